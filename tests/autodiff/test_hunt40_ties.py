"""Gradients at the points where the math leaves a choice, as PyTorch 2.13 makes it (values
checked against torch.autograd and written out here):

* ``fmax``/``fmin``: a tie gives the whole gradient to the first argument (``a >= b``), where
  the rule split it;
* ``maximum``/``minimum``: where either argument is NaN both get the gradient (only ``b`` did);
* ``hardswish``: 0 at -3 and 1 at 3 (the rule took the inner slope, -0.5 and 1.5);
* ``prelu``: slope ``weight`` at x == 0 (was 1);
* ``pow``: nothing to the base where the exponent is 0 (NaN at a = 0); the exponent's gradient
  ``a**b log a`` is NaN for a < 0 and -inf at a = 0, b < 0 (was 0);
* ``atan2``: 0 at (0, 0) (was NaN).
"""

from __future__ import annotations

import numpy as np

import pypto

o = pypto.ops
nan, inf = np.nan, np.inf


def _grads(fn, *args):
    out, vjp_fn = pypto.vjp(fn, *args)
    return vjp_fn(np.ones(np.shape(out)))


def test_fmax_fmin_ties_go_to_the_first_argument():
    a = np.array([1.0, 1.0, nan, 2.0, nan, 0.0])
    b = np.array([1.0, 2.0, 1.0, nan, nan, -0.0])
    ga, gb = _grads(o.fmax, a, b)
    np.testing.assert_array_equal(ga, [1, 0, 0, 1, 1, 1])
    np.testing.assert_array_equal(gb, [0, 1, 1, 0, 0, 0])
    ga, gb = _grads(o.fmin, a, b)
    np.testing.assert_array_equal(ga, [1, 1, 0, 1, 1, 1])
    np.testing.assert_array_equal(gb, [0, 0, 1, 0, 0, 0])


def test_maximum_minimum_nan_gives_both_and_ties_split():
    a = np.array([1.0, 1.0, nan, 2.0, nan])
    b = np.array([1.0, 2.0, 1.0, nan, nan])
    ga, gb = _grads(o.maximum, a, b)
    np.testing.assert_array_equal(ga, [0.5, 0, 1, 1, 1])
    np.testing.assert_array_equal(gb, [0.5, 1, 1, 1, 1])
    ga, gb = _grads(o.minimum, a, b)
    np.testing.assert_array_equal(ga, [0.5, 1, 1, 1, 1])
    np.testing.assert_array_equal(gb, [0.5, 0, 1, 1, 1])


def test_hardswish_and_prelu_kinks():
    (g,) = _grads(o.hardswish, np.array([-3.0, -2.0, 0.0, 3.0, 4.0]))
    np.testing.assert_allclose(g, [0.0, -1.0 / 6.0, 0.5, 1.0, 1.0], rtol=1e-15)
    x = np.array([[-1.0, 0.0, 2.0], [-0.0, -2.0, 1.0]])
    gx, gw = _grads(o.prelu, x, np.array([0.25]))
    np.testing.assert_array_equal(gx, [[0.25, 0.25, 1.0], [0.25, 0.25, 1.0]])
    np.testing.assert_array_equal(gw, [-3.0])


def test_pow_at_zero_and_negative_bases():
    a = np.array([0.0, 0.0, 0.0, 2.0, -2.0, 0.0, 1.5])
    b = np.array([2.0, 0.0, 0.5, 3.0, 2.0, -1.0, 0.0])
    ga, gb = _grads(o.pow, a, b)
    np.testing.assert_array_equal(ga, [0.0, 0.0, inf, 12.0, -4.0, -inf, 0.0])
    np.testing.assert_allclose(gb, [0.0, 0.0, 0.0, 8 * np.log(2.0), nan, -inf, np.log(1.5)],
                               rtol=1e-15)
    (g,) = _grads(lambda x: o.pow(x, 0.0), np.array([0.0, -1.0, 2.0]))
    np.testing.assert_array_equal(g, [0.0, 0.0, 0.0])


def test_atan2_at_the_origin_passes_nothing():
    gy, gx = _grads(o.atan2, np.array([0.0, 1.0, 0.0]), np.array([0.0, 0.0, 1.0]))
    np.testing.assert_array_equal(gy, [0.0, 0.0, 1.0])
    np.testing.assert_array_equal(gx, [0.0, -1.0, 0.0])
