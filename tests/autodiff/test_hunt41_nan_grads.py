"""Gradients of the reductions at NaN, inf and zeros, against torch 2.13's autograd (float64).

* ``vector_norm``: PyTorch's ``norm_backward`` branch by branch. A row holding NaN passed 0 for
  ord 2 (``fro``), p (3, 0.5...) where torch passes NaN; ord 1 passed NaN at the NaN where torch's
  ``sgn`` gives 0; ord 0.5 passed NaN at a zero (0 ** -0.5) where torch passes 0. inf/-inf
  already matched (a NaN row passes nothing).
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
