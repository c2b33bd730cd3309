"""median of a row holding NaN: the median is NaN, and PyTorch passes its gradient to the row's
(first) NaN; the rule gave it to the sorted middle element, a number (values from torch 2.13)."""

from __future__ import annotations

import numpy as np

import pypto

o = pypto.ops
nan = np.nan


def test_median_gradient_goes_to_the_first_nan_of_a_row():
    x = np.array([[1.0, nan, 2.0, nan, 0.0], [3.0, 1.0, 2.0, 5.0, 4.0]])
    weights = np.array([1.0, 2.0])
    value, g = pypto.value_and_grad(lambda v: (o.median(v, axis=1) * weights).sum())(x)
    assert np.isnan(value)
    np.testing.assert_array_equal(g, [[0, 1, 0, 0, 0], [2, 0, 0, 0, 0]])
    # along axis 0 (column 2 has no NaN: its middle value 2 is tied, the first one has it, as torch)
    y = np.array([[1.0, nan, 2.0], [nan, 1.0, 2.0], [0.0, nan, 1.0]])
    np.testing.assert_array_equal(pypto.grad(lambda v: o.median(v, axis=0).sum())(y),
                                  [[0, 1, 1], [1, 0, 0], [0, 0, 0]])
