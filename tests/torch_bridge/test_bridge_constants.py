"""pypto.torch ops called with numbers, strings and keyword arguments beside their tensors, as
torch's own functions are called (``F.leaky_relu(x, 0.2)``, ``F.scaled_dot_product_attention(q,
k, v, scale=0.5)``): the non-tensor arguments are constants of the program, one PyTorch op per
set of them."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402

import pypto  # noqa: E402
import pypto.torch as pt  # noqa: E402
from pypto import ops as o  # noqa: E402

gen = torch.Generator().manual_seed(43)


def _randn(*shape, grad=False):
    return torch.randn(*shape, dtype=torch.float64, generator=gen, requires_grad=grad)


def test_a_positional_number_is_a_constant_with_forward_and_backward():
    lr = pt.op(o.leaky_relu)
    x = _randn(7, grad=True)
    y = lr(x, 0.2)
    torch.testing.assert_close(y, F.leaky_relu(x.detach(), 0.2))
    y.sum().backward()
    want = torch.where(x.detach() > 0, 1.0, 0.2).to(torch.float64)
    torch.testing.assert_close(x.grad, want)


def test_each_set_of_constants_is_its_own_op():
    lr = pt.op(o.leaky_relu)
    x = _randn(9)
    for slope in (0.01, 0.3, 0.01):
        torch.testing.assert_close(lr(x, slope), F.leaky_relu(x, slope))
    assert len(lr._bound_ops) == 2          # 0.01 is made once
    # 1 and 1.0 are different constants (a float parameter and an int one trace differently).
    lr(x, 1)
    lr(x, 1.0)
    assert len(lr._bound_ops) == 4


def test_keyword_constants_and_keyword_tensors():
    sdpa = pt.op(o.scaled_dot_product_attention)
    q, k, v = _randn(2, 3, 5, 4, grad=True), _randn(2, 3, 6, 4), _randn(2, 3, 6, 2)
    got = sdpa(q, k, v=v, scale=0.5)
    torch.testing.assert_close(got, F.scaled_dot_product_attention(q, k, v, scale=0.5))
    assert torch.autograd.gradcheck(lambda q: sdpa(q, k, v=v, scale=0.5), (q,))


def test_a_string_and_a_tuple_as_constants():
    pad = pt.op(o.pad)
    x = _randn(2, 3, grad=True)
    got = pad(x, ((1, 0), (0, 2)), mode="reflect")
    want = F.pad(x.detach()[None], (0, 2, 1, 0), mode="reflect")[0]
    torch.testing.assert_close(got, want)
    got.sum().backward()
    assert x.grad.shape == x.shape and torch.isfinite(x.grad).all()


def test_constants_under_torch_compile():
    lr = pt.op(o.leaky_relu)
    x = _randn(6, grad=True)
    f = torch.compile(lambda t: lr(t, 0.1).sum(), fullgraph=True)
    got = f(x)
    torch.testing.assert_close(got, F.leaky_relu(x.detach(), 0.1).sum())
    got.backward()
    torch.testing.assert_close(x.grad, torch.where(x.detach() > 0, 1.0, 0.1).to(torch.float64))


@pytest.mark.parametrize("bad, what", [(np.ones(3), "a NumPy array"), (object(), "object")])
def test_an_argument_that_cannot_be_a_constant_is_named(bad, what):
    lr = pt.op(o.leaky_relu)
    with pytest.raises(pypto.TraceError, match=rf"pypto.torch.op\(leaky_relu\): argument #1 is "
                                               rf"{what}; pass tensors as torch tensors"):
        lr(torch.ones(2), bad)
    with pytest.raises(pypto.TraceError, match=r"argument negative_slope= is a NumPy array"):
        lr(torch.ones(2), negative_slope=np.ones(1))


def test_constants_without_a_tensor_are_refused():
    with pytest.raises(pypto.TraceError, match=r"leaky_relu\): called with no tensors"):
        pt.op(o.leaky_relu)(negative_slope=0.1)


def test_a_module_passes_constants_and_keywords_on():
    w = np.linspace(-1, 1, 12).reshape(3, 4)
    mod = pt.Module(lambda w, x, slope=0.01: o.leaky_relu(o.matmul(x, w), slope), w=w)
    x = _randn(2, 3)
    want = F.leaky_relu(x @ torch.from_numpy(w), 0.25)
    torch.testing.assert_close(mod(x, slope=0.25), want)
    torch.testing.assert_close(mod(x, 0.25), want)
    mod(x, slope=0.25).sum().backward()
    assert mod.w.grad is not None and mod.w.grad.shape == (3, 4)
