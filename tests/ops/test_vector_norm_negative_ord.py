"""``vector_norm`` with ``ord < 0``: torch.linalg.vector_norm computes ``(sum |x|**ord)**(1/ord)``
(a zero in the row makes ``|0|**ord`` inf and the norm 0; a row of infs gives inf) and PyPTO
refused it with a ParamError. Forward, eager and traced, and gradients against torch 2.13
(float64), zeros, inf and NaN included; an empty axis is refused as torch refuses it."""

from __future__ import annotations

import numpy as np
import pytest

import pypto
from pypto.errors import ParamError, ShapeError

torch = pytest.importorskip("torch")
P = pypto.ops
nan, inf = np.nan, np.inf

ROWS = np.array([[3.0, -3.0, 1.0, 0.5], [0.0, 2.0, -1.0, 4.0], [inf, -2.0, 1.0, 3.0],
                 [-inf, 2.0, -inf, inf], [inf, inf, -inf, inf], [0.0, 0.0, 0.0, 0.0],
                 [inf, 0.0, 1.0, 2.0], [1.0, nan, 3.0, 0.0], [-0.0, 1.5, -2.0, 0.25],
                 [0.1, -0.2, 0.3, -0.4]])
ORDS = [-1, -2, -0.5, -3.7, -1.0]


def _torch_norm(x, ord_, weights=None, **kw):
    t = torch.tensor(x, requires_grad=True)
    y = torch.linalg.vector_norm(t, ord_, **kw)
    total = (y * torch.tensor(weights)).sum() if weights is not None else y.sum()
    total.backward()
    return y.detach().numpy(), t.grad.numpy()


@pytest.mark.parametrize("ord_", ORDS)
def test_negative_ord_forward_and_gradient_match_torch(ord_):
    w = np.linspace(0.5, 2.0, len(ROWS))
    want, want_g = _torch_norm(ROWS, ord_, w, dim=1)
    got = P.vector_norm(ROWS, ord_, axis=1)
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=0)
    assert got[5] == 0.0 and got[1] == 0.0 and got[4] == inf and np.isnan(got[7])
    g = pypto.grad(lambda v: (P.vector_norm(v, ord_, axis=1) * w).sum())(ROWS)
    np.testing.assert_allclose(g, want_g, rtol=1e-13, atol=0)      # NaN where torch's is NaN
    traced = pypto.jit(lambda v: P.vector_norm(v, ord_, axis=1))(ROWS)
    np.testing.assert_array_equal(traced, got)
    traced_g = pypto.jit(pypto.grad(lambda v: (P.vector_norm(v, ord_, axis=1) * w).sum()))(ROWS)
    np.testing.assert_array_equal(traced_g, g)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("axis,keepdims", [(None, False), ((0, 2), True), (-1, False)])
def test_negative_ord_axes_and_dtypes_match_torch(dtype, axis, keepdims):
    x = np.random.default_rng(3).uniform(-2.0, 2.0, (3, 4, 5)).astype(dtype)
    x[1, 2, 3] = 0.0
    for ord_ in (-1, -0.5):
        got = P.vector_norm(x, ord_, axis, keepdims)
        want = torch.linalg.vector_norm(torch.tensor(x), ord_, axis, keepdims).numpy()
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-5 if dtype == "float32" else 1e-13)


def test_ord_zero_counts_nonzeros_as_torch():
    x = np.array([[0.0, -0.0, 2.0, nan], [inf, 0.0, 0.0, 0.0]], np.float32)
    want = torch.linalg.vector_norm(torch.tensor(x), 0, dim=1).numpy()
    np.testing.assert_array_equal(P.vector_norm(x, 0, axis=1), want)   # NaN is nonzero: [2, 1]
    np.testing.assert_array_equal(pypto.grad(lambda v: P.vector_norm(v, 0).sum())(x), 0.0)


def test_negative_ord_over_an_empty_axis_is_refused_as_torch():
    with pytest.raises(RuntimeError, match="identity"):
        torch.linalg.vector_norm(torch.empty(2, 0), -1, dim=1)
    with pytest.raises(ShapeError, match="identity"):
        P.vector_norm(np.empty((2, 0)), -1, axis=1)
    np.testing.assert_array_equal(P.vector_norm(np.empty((2, 0, 3)), -1, axis=2), np.empty((2, 0)))
    with pytest.raises(ParamError, match="'p' must not be 0"):
        P.vector_norm.kernel(np.ones((2, 3)), ord="p", p=0.0)
    with pytest.raises(ParamError, match="ord"):
        P.vector_norm(np.ones(3), nan)
