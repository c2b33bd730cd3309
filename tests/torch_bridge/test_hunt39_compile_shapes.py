"""pypto.torch ops under torch.compile(fullgraph=True) when the shapes change between calls
(the second shape makes Dynamo's sizes symbolic): forward and backward against torch's own
functions on the same tensors."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import pypto  # noqa: E402
import pypto.torch as pt  # noqa: E402

o = pypto.ops


@pytest.mark.parametrize("dynamic", [None, True])
def test_a_compiled_op_takes_new_shapes_in_one_graph(dynamic):
    gelu = pt.op(o.gelu)
    f = torch.compile(lambda t: gelu(t * 2.0).sum(), fullgraph=True, dynamic=dynamic)
    gen = torch.Generator().manual_seed(1)
    for n in (4, 6, 9):
        x = torch.randn(n, 5, dtype=torch.float64, generator=gen, requires_grad=True)
        got = f(x)
        got.backward()
        y = x.detach().clone().requires_grad_(True)
        want = torch.nn.functional.gelu(y * 2.0).sum()
        want.backward()
        torch.testing.assert_close(got.detach(), want.detach())
        torch.testing.assert_close(x.grad, y.grad)


def two(a, b):
    return a * b, (a - b).sum(axis=0)


def test_a_compiled_op_with_two_outputs_and_one_unused_gradient():
    top = pt.op(two)
    f = torch.compile(lambda a, b: top(a, b)[1].sum(), fullgraph=True)
    gen = torch.Generator().manual_seed(2)
    for n in (3, 5, 7):
        a = torch.randn(n, 4, generator=gen, requires_grad=True)
        b = torch.randn(n, 4, generator=gen, requires_grad=True)
        f(a, b).backward()
        torch.testing.assert_close(a.grad, torch.ones(n, 4))
        torch.testing.assert_close(b.grad, -torch.ones(n, 4))


def test_two_outputs_eagerly_one_of_them_differentiated():
    top = pt.op(two)
    a = torch.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    b = torch.tensor([[0.5, -1.0], [2.0, 0.25]], requires_grad=True)
    p, q = top(a, b)
    assert isinstance(p, torch.Tensor) and isinstance(q, torch.Tensor)
    np.testing.assert_array_equal(p.detach().numpy(), (a * b).detach().numpy())
    p.sum().backward()
    torch.testing.assert_close(a.grad, b.detach())
    torch.testing.assert_close(b.grad, a.detach())


def test_one_output_is_a_tensor_not_a_list():
    top = pt.op(o.tanh)
    x = torch.linspace(-1, 1, 5)
    got = top(x)
    assert isinstance(got, torch.Tensor)
    torch.testing.assert_close(got, torch.tanh(x))
