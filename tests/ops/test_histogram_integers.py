"""histogram of every integer dtype it declares equals np.histogram, over the whole range of
the type and with ranges that cut it."""

from __future__ import annotations

import numpy as np
import pytest

import pypto


@pytest.mark.parametrize("dtype", ["int8", "int16", "uint16", "int32", "uint32", "int64",
                                   "uint8"])
@pytest.mark.parametrize("bins, range_", [(7, None), (16, (-5, 100)), (3, (0, 2)), (1, None)])
def test_integer_data_as_numpy(dtype, bins, range_):
    info = np.iinfo(dtype)
    rng = np.random.default_rng(len(dtype) * 31 + bins)
    x = rng.integers(info.min, info.max, 999, dtype=dtype, endpoint=True)
    x[:3] = [info.min, info.max, 0]
    got, edges = pypto.ops.histogram(x[::2], bins=bins, range=range_)   # a strided view too
    want, want_edges = np.histogram(x[::2], bins=bins, range=range_)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(edges, want_edges)
    assert got.dtype == np.int64 and edges.dtype == want_edges.dtype


def test_int64_is_declared():
    assert ("int64",) in pypto.get_op("histogram").dtypes
