"""warp_perspective where the homogeneous divisor is 0 (found in a bug hunt: the module doc said
such a pixel reads 0, while the kernel and its reference sample source (0, 0) as OpenCV does)."""

from __future__ import annotations

import numpy as np

import pypto
import pypto.ops as P
from pypto.ops import warp


def test_zero_divisor_samples_source_origin():
    x = np.arange(1, 13, dtype=np.float64).reshape(3, 4)
    # Destination -> source with w = 0 everywhere: every pixel samples source (0, 0).
    m = np.array([[1.0, 0, 0], [0, 1, 0], [0, 0, 0]])
    np.testing.assert_array_equal(P.warp_perspective(x, m, inverse_map=True),
                                  np.full((3, 4), x[0, 0]))
    # w = x - 1: column 1 samples (0, 0); the others divide as usual.
    m = np.array([[1.0, 0, 0], [0, 1, 0], [1, 0, -1]])
    got = P.warp_perspective(x, m, inverse_map=True)
    np.testing.assert_array_equal(got[:, 1], np.full(3, x[0, 0]))
    np.testing.assert_allclose(got, pypto.get_op("warp_perspective").reference(
        x, m, inverse_map=True), rtol=1e-12)
    assert "sample is taken at source\n  ``(0, 0)``" in warp.__doc__
