"""Reduction rules at their edges, against PyTorch's gradients (values written out here):

* ``prod`` of a row holding zeros: the product of the other elements (one zero), 0 (two or more);
  the rule divided the product by each element, NaN at every zero and 0 / 0 elsewhere;
* ``std`` of a constant row: 0 (PyTorch masks where std == 0), was NaN;
* ``var``/``std`` with ``ddof`` equal to the reduced length: the forward divides by 0, and the
  rule raised ZeroDivisionError while tracing; now inf/NaN, as PyTorch.
"""

from __future__ import annotations

import numpy as np
from fd import check_vjp

import pypto

o = pypto.ops


def _prod_grad(x, axis):
    """d sum(prod(x, axis)) / dx as PyTorch gives it: the product of the others in the row."""
    moved = np.moveaxis(x, axis, -1)
    g = np.empty_like(moved)
    for idx in np.ndindex(moved.shape):
        row = moved[idx[:-1]]
        g[idx] = np.prod(np.delete(row, idx[-1]))
    return np.moveaxis(g, -1, axis)


def test_prod_gradient_with_zeros_is_the_product_of_the_others():
    x = np.random.default_rng(0).uniform(0.5, 1.5, (3, 4))
    x[0, 1] = 0.0                       # one zero in row 0
    x[1, 0] = x[1, 3] = 0.0             # two zeros in row 1; row 2 has none
    g = pypto.grad(lambda v: o.prod(v, axis=1).sum())(x)
    np.testing.assert_allclose(g, _prod_grad(x, 1), rtol=1e-12, atol=0)
    assert g[0, 1] != 0.0 and np.all(g[1] == 0.0)
    g0 = pypto.grad(lambda v: o.prod(v, axis=0).sum())(x)      # along the other axis
    np.testing.assert_allclose(g0, _prod_grad(x, 0), rtol=1e-12, atol=0)


def test_prod_gradient_without_zeros_still_matches_differences():
    check_vjp(lambda v: o.prod(v, axis=(0, 2), keepdims=True),
              np.random.default_rng(1).uniform(0.5, 1.5, (2, 3, 2)))


def test_std_of_a_constant_row_passes_nothing():
    x = np.ones((2, 3))
    x[1] = [1.0, 2.0, 4.0]
    g = pypto.grad(lambda v: o.std(v, axis=1, ddof=1).sum())(x)
    assert np.all(g[0] == 0.0)
    row = x[1]
    want = (row - row.mean()) / (2 * np.std(row, ddof=1))
    np.testing.assert_allclose(g[1], want, rtol=1e-12)


def test_var_std_with_ddof_equal_to_the_length_do_not_raise():
    x = np.array([[1.0, 2.0, 4.0], [3.0, 3.0, 3.0]])
    gv = pypto.grad(lambda v: o.var(v, axis=1, ddof=3).sum())(x)
    # PyTorch: (2 / 0) (x - mean): +-inf, NaN where x == mean
    assert np.all(np.isinf(gv[0])) and np.all(np.sign(gv[0]) == np.sign(x[0] - x[0].mean()))
    assert np.all(np.isnan(gv[1]))
    # PyTorch: NaN (0 * inf). Here the value depends on the traced forward's std, which is not
    # inf as the eager op's is (a forward question, left to the op): only assert no finite value
    gs = pypto.grad(lambda v: o.std(v, axis=1, ddof=3).sum())(x)
    assert not np.isfinite(gs).any()
