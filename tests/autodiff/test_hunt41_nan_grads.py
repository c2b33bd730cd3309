"""Gradients of the reductions at NaN, inf and zeros, against torch 2.13's autograd (float64).

* ``vector_norm``: PyTorch's ``norm_backward`` branch by branch. A row holding NaN passed 0 for
  ord 2 (``fro``), p (3, 0.5...) where torch passes NaN; ord 1 passed NaN at the NaN where torch's
  ``sgn`` gives 0; ord 0.5 passed NaN at a zero (0 ** -0.5) where torch passes 0. inf/-inf
  already matched (a NaN row passes nothing).
* ``max``/``min`` (PyPTO's are torch's ``amax``/``amin``: ties split, axis tuples, keepdims): a
  row holding NaN passed 0 everywhere; torch's amax passes NaN to the whole row (its
  ``dy / count * mask`` with no element equal to NaN). torch's ``max()`` and ``max(dim)`` pass it
  to the NaNs instead (split, or the first); that is not PyPTO's ``max`` (ties differ too).
* ``prod`` of a row with a zero and a NaN or inf: torch multiplies the others out
  ([2, nan, 0, 3] passes [nan, 0, nan, nan]); the rule passed 0 to all but the zero.
"""

from __future__ import annotations

import numpy as np
import pytest

import pypto

torch = pytest.importorskip("torch")
P = pypto.ops
nan, inf = np.nan, np.inf


def _torch_grad(fn, x, weights):
    t = torch.tensor(x, requires_grad=True)
    y = fn(t)
    (y * torch.tensor(weights)).sum().backward()
    return y.detach().numpy(), t.grad.numpy()


def _check(fn, torch_fn, x, weights):
    """Value and gradient of ``(fn(x) * weights).sum()``, eager and traced, against torch."""
    want, want_g = _torch_grad(torch_fn, x, weights)
    loss = lambda v: (fn(v) * weights).sum()            # noqa: E731
    got_g = pypto.grad(loss)(x)
    np.testing.assert_allclose(fn(x), want, rtol=1e-13, atol=0)
    np.testing.assert_allclose(got_g, want_g, rtol=1e-13, atol=0)   # NaN where torch's is NaN
    np.testing.assert_array_equal(pypto.jit(fn)(x), fn(x))
    np.testing.assert_array_equal(pypto.jit(pypto.grad(loss))(x), got_g)
    return got_g


NORM_ROWS = np.array([[1.0, nan, -3.0], [nan, 2.0, nan], [inf, -2.0, 1.0], [inf, nan, 1.0],
                      [-inf, 2.0, -inf], [0.0, 0.0, 0.0], [0.0, 2.0, 0.0], [inf, 0.0, 1.0],
                      [3.0, -3.0, 1.0], [0.0, nan, 1.0]])


@pytest.mark.parametrize("ord_", [2, "fro", 1, inf, -inf, 3, 0.5, 1.5])
def test_vector_norm_gradient_at_nan_inf_and_zeros_matches_torch(ord_):
    w = np.linspace(0.5, 2.0, len(NORM_ROWS))
    t_ord = 2 if ord_ == "fro" else ord_
    g = _check(lambda v: P.vector_norm(v, ord_, axis=1),
               lambda t: torch.linalg.vector_norm(t, t_ord, dim=1), NORM_ROWS, w)
    if ord_ in (2, "fro", 3, 0.5, 1.5):
        assert np.isnan(g[[0, 1, 3, 9]]).all()          # a row holding NaN: NaN everywhere
    if ord_ == 1:
        np.testing.assert_array_equal(g[0], [0.5, 0.0, -0.5])   # sgn(NaN) is 0
    if ord_ == 0.5:
        np.testing.assert_allclose(g[6], [0.0, w[6], 0.0], rtol=1e-15)   # 0 at the zeros, not NaN


EXT_ROWS = np.array([[1.0, nan, 3.0, 3.0], [nan, 2.0, nan, 0.0], [nan, nan, nan, nan],
                     [3.0, 3.0, 1.0, -1.0], [inf, nan, inf, 1.0], [inf, 2.0, inf, -inf],
                     [-inf, -inf, 0.0, 5.0], [0.5, -0.5, 2.0, -2.0]])


@pytest.mark.parametrize("name", ["max", "min"])
def test_max_min_gradient_of_a_nan_row_is_torchs_amax(name):
    w = np.linspace(0.5, 2.0, len(EXT_ROWS))
    ours = getattr(P, name)
    theirs = getattr(torch, "a" + name)
    g = _check(lambda v: ours(v, axis=1), lambda t: theirs(t, dim=1), EXT_ROWS, w)
    assert np.isnan(g[[0, 1, 2, 4]]).all()                 # every element of a NaN row
    assert not np.isnan(g[[3, 5, 6, 7]]).any()
    # the whole array, and a tuple of axes with keepdims
    x = EXT_ROWS[[3, 5, 6, 7]]
    _check(lambda v: ours(v), lambda t: theirs(t), x, np.array(1.5))
    x3 = EXT_ROWS.reshape(2, 4, 4)
    w3 = np.array([[[1.0]], [[2.0]]])
    _check(lambda v: ours(v, axis=(1, 2), keepdims=True),
           lambda t: theirs(t, dim=(1, 2), keepdim=True), x3, w3)


def test_nanmax_still_ignores_nans():
    g = pypto.grad(lambda v: P.nanmax(v, axis=1).sum())(EXT_ROWS[:3])
    np.testing.assert_array_equal(g, [[0, 0, 0.5, 0.5], [0, 1, 0, 0], [0, 0, 0, 0]])


PROD_ROWS = [[2.0, nan, 0.0, 3.0], [2.0, nan, 3.0, 1.0], [nan, 0.0, 0.0, 1.0],
             [inf, 0.0, 2.0, 1.0], [inf, 0.0, 0.0, 1.0], [inf, 2.0, 3.0, 1.0],
             [-inf, 0.0, nan, 1.0], [inf, inf, 0.0, 1.0], [0.0, 2.0, 3.0, 1.0],
             [-0.0, 3.0, 2.0, 1.0], [0.5, 2.0, -3.0, 1.5]]


def test_prod_gradient_with_nan_inf_and_zeros_matches_torch():
    x = np.array(PROD_ROWS)
    w = np.linspace(0.5, 2.0, len(x))
    # torch picks its formula on the whole tensor (any zero: every row multiplies the others
    # out), so each row is its own tensor there: torch's prod(dim) of that one row
    want = np.concatenate([_torch_grad(lambda t: t.prod(1), x[i:i + 1], w[i:i + 1])[1]
                           for i in range(len(x))])
    loss = lambda v: (P.prod(v, axis=1) * w).sum()            # noqa: E731
    g = pypto.grad(loss)(x)
    np.testing.assert_allclose(g, want, rtol=1e-14, atol=0)
    np.testing.assert_array_equal(pypto.jit(pypto.grad(loss))(x), g)
    np.testing.assert_array_equal(g[0], [nan, 0.0, nan, nan])
    np.testing.assert_array_equal(g[3] / w[3], [0.0, inf, nan, nan])
    # the same rows along axis 0, and a one-element axis (the gradient is dy)
    np.testing.assert_allclose(pypto.grad(lambda v: (P.prod(v, axis=0) * w).sum())(x.T), want.T,
                               rtol=1e-14, atol=0)
    np.testing.assert_array_equal(pypto.grad(lambda v: P.prod(v, axis=1).sum())(x[:, :1]), 1.0)


def test_prod_second_derivative_with_zeros_stays_finite():
    x = np.array([[0.5, 2.0, -3.0, 1.5], [0.0, 2.0, 3.0, 1.0], [0.0, 0.0, 3.0, 1.0]])
    w = np.array([1.0, 2.0, 3.0, 4.0])
    t = torch.tensor(x, requires_grad=True)
    (g,) = torch.autograd.grad(t.prod(1).sum(), t, create_graph=True)
    (g * torch.tensor(w)).sum().backward()
    inner = lambda u: P.prod(u, axis=1).sum()              # noqa: E731
    h = pypto.grad(lambda v: (pypto.grad(inner)(v) * w).sum())(x)
    np.testing.assert_allclose(h, t.grad.numpy(), rtol=1e-14, atol=0)
