"""median selects the middle elements on ordered integer keys, bit by bit
(``pypto.ops.sorting._select_bits``): every row length parity, ties around the middle, values of
both signs and every magnitude, NaN, infinities and signed zeros, at both schedule forms (blocks
of rows vectorized across rows, and fewer rows than a vector)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import pypto.ops as P


def _want(x, axis):
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return np.median(x, axis=axis)


def _rows(shape, dtype, seed):
    """Small integers (many ties), scaled by powers of two of both signs in some rows."""
    rng = np.random.default_rng(seed)
    x = rng.integers(-4, 5, shape).astype(dtype)
    scale = np.float64(2.0) ** rng.integers(-140 if dtype == "float32" else -1070, 120, shape[0])
    x *= scale.astype(dtype).reshape(-1, *([1] * (len(shape) - 1)))
    return x


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape", [(37, 1), (37, 2), (37, 3), (19, 7), (24, 64), (9, 1000),
                                   (9, 1023), (3, 5, 2), (2, 777)])
def test_median_of_rows_with_ties_and_every_magnitude(shape, dtype):
    x = _rows(shape, dtype, seed=shape[0] * 31 + shape[1])
    np.testing.assert_array_equal(P.median(x, axis=1), _want(x, 1))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("r", [1, 2, 5, 6, 1000, 1001])
def test_median_with_special_values(r, dtype):
    specials = [np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0]
    rng = np.random.default_rng(r)
    x = rng.uniform(-1, 1, (24, r)).astype(dtype)
    for row in range(6):                       # a special value somewhere in each of these rows
        x[row, (row * 7) % r] = specials[row]
    x[6] = np.inf                              # rows of one special value only
    x[7] = -np.inf
    x[8] = -0.0
    x[9] = np.nan
    x[10, ::2] = np.inf                        # infinities of both signs as the middles
    x[10, 1::2] = -np.inf
    x[11, : (r + 1) // 2] = -np.inf
    x[12, r // 2:] = np.inf
    x[13] = np.finfo(dtype).max                # no overflow of an odd row's single middle
    x[14] = np.finfo(dtype).tiny / 4           # denormals
    x[15, ::3] = 0.0
    x[15, 1::3] = -0.0
    np.testing.assert_array_equal(P.median(x, axis=1), _want(x, 1))   # NaN == NaN, -0 == 0
    if r % 2:
        assert P.median(x[13:14], axis=1)[0] == np.finfo(dtype).max


def test_median_over_other_axes_and_everything():
    x = _rows((6, 10, 9), "float32", seed=4)
    for axis in (0, 1, 2, -1, None):
        np.testing.assert_array_equal(P.median(x, axis=axis), _want(x, axis))
