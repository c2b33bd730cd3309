"""histogram on float32 data counts as np.histogram does (found in a bug hunt: the bins were
compared in float64, so a float32 value equal to a float32-rounded edge, 0.7 in ten bins of
[0, 1], fell one bin lower than NumPy puts it)."""

from __future__ import annotations

import numpy as np
import pytest

import pypto
import pypto.ops as P
from pypto.errors import ParamError


def test_float32_value_on_a_rounded_edge():
    x = np.array([0.1, 0.2, 0.3, 0.7], np.float32)
    counts, edges = P.histogram(x, 10, (0.0, 1.0))
    assert counts.tolist() == [0, 1, 1, 1, 0, 0, 0, 1, 0, 0]     # 0.7 in bin 7, as NumPy
    want_c, want_e = np.histogram(x, 10, (0.0, 1.0))
    np.testing.assert_array_equal(counts, want_c)
    np.testing.assert_array_equal(edges, want_e)
    assert edges.dtype == np.float32


@pytest.mark.parametrize("range_", [None, (0.0, 1.0), (-0.3, 2.9), (0, 4)])
@pytest.mark.parametrize("bins", [3, 10, 40])
def test_float32_grid_values_against_numpy(bins, range_):
    rng = np.random.default_rng(bins)
    # Values on a decimal grid sit on or next to float32-rounded edges.
    x = (rng.integers(-5, 45, (4, 60)) / 10).astype(np.float32)
    counts, edges = P.histogram(x, bins, range_)
    want_c, want_e = np.histogram(x, bins, range_)
    np.testing.assert_array_equal(counts, want_c)
    np.testing.assert_array_equal(edges, want_e)
    assert edges.dtype == want_e.dtype
    ref_c, ref_e = pypto.get_op("histogram").reference(x, bins, range_)
    np.testing.assert_array_equal(ref_c, want_c)


def test_float32_range_from_the_data_in_float32():
    # range=None: NumPy builds the edges in float32 arithmetic from x.min() and x.max(); a value
    # on each edge must land where NumPy puts it.
    lo, hi, bins = np.float32(0.1), np.float32(2.3), 7
    e = np.linspace(lo, hi, bins + 1, dtype=np.float32)
    x = np.concatenate([e, np.nextafter(e, np.float32(np.inf)),
                        np.nextafter(e, np.float32(-np.inf))])
    x = np.clip(x, lo, hi).astype(np.float32)
    counts, edges = P.histogram(x, bins)
    want_c, want_e = np.histogram(x, bins)
    np.testing.assert_array_equal(edges, want_e)
    np.testing.assert_array_equal(counts, want_c)
    one = np.full(6, 0.1, np.float32)           # lo == hi widens by 0.5 in float32
    np.testing.assert_array_equal(P.histogram(one, 4)[1], np.histogram(one, 4)[1])
    np.testing.assert_array_equal(P.histogram(one, 4)[0], np.histogram(one, 4)[0])


def test_other_dtypes_unchanged():
    rng = np.random.default_rng(3)
    for x in (rng.standard_normal(500), rng.integers(0, 200, 500).astype(np.int32),
              rng.integers(0, 256, 500).astype(np.uint8)):
        counts, edges = P.histogram(x, 9, (-1, 150))
        want_c, want_e = np.histogram(x, 9, (-1, 150))
        np.testing.assert_array_equal(counts, want_c)
        np.testing.assert_array_equal(edges, want_e)
        assert edges.dtype == np.float64


def test_float32_range_too_wide_is_refused():
    x = np.array([-3e38, 3e38], np.float32)
    with pytest.raises(ParamError, match="too narrow to be told apart \\(or too wide\\)"):
        P.histogram(x, 4)
