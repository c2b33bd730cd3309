"""Functions that return integer arrays beside float ones (topk's and sort's indices, max with
its argmax) differentiate through the float outputs, in pypto.vjp and through the torch bridge;
a function with only integer outputs is refused by name."""

from __future__ import annotations

import numpy as np
import pytest

import pypto
from pypto.errors import NotDifferentiableError

o = pypto.ops
X = np.random.default_rng(0).standard_normal((3, 6))


def topk_then_scale(x):
    values, indices = o.topk(x, 2)
    return values * 3.0, indices


def test_vjp_skips_an_integer_output():
    (values, indices), vjp_fn = pypto.vjp(topk_then_scale, X)
    ct = np.random.default_rng(1).standard_normal(values.shape)
    for int_ct in (None, np.zeros(indices.shape, indices.dtype)):
        (gx,) = vjp_fn(ct, int_ct)
        want = np.zeros_like(X)
        np.put_along_axis(want, np.asarray(indices), 3.0 * ct, axis=1)
        np.testing.assert_allclose(gx, want, rtol=1e-12)


def test_only_integer_outputs_are_refused_by_name():
    _, vjp_fn = pypto.vjp(lambda x: o.argmax(x, axis=1), X)
    with pytest.raises(NotDifferentiableError, match="no output is a float array"):
        vjp_fn(None)


def test_the_torch_bridge_differentiates_values_and_passes_indices():
    torch = pytest.importorskip("torch")
    import pypto.torch as pt

    f = pt.op(topk_then_scale)
    x = torch.tensor(X, requires_grad=True)
    values, indices = f(x)
    assert indices.dtype == torch.int64 and not indices.requires_grad
    ct = torch.randn(values.shape, dtype=torch.float64)
    values.backward(ct)
    tv, ti = torch.topk(x.detach(), 2)
    torch.testing.assert_close(indices, ti)
    want = torch.zeros_like(x).scatter_(1, ti, 3.0 * ct)
    torch.testing.assert_close(x.grad, want)
    assert torch.autograd.gradcheck(lambda x: f(x)[0], (x,))
    assert torch.autograd.gradgradcheck(lambda x: f(x)[0] ** 2, (x,))
