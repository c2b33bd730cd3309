"""cummax, cummin and logcumsumexp of one long row: the chunked kernels against the general
ones and NumPy.

A single row of ``LONG_ROW`` elements or more takes ``pypto.ops.scan._LONG`` (chunk
summaries, their carries, then every chunk scanned again from its carry). The running extreme is
associative with its tie and NaN rules, so cummax/cummin must equal the serial scan bit for bit:
indices, values and the signs of zeros. logcumsumexp's sums round differently by chunks (and
lose less over a long row): it is checked against float64, its special values against the serial
scan.
"""

from __future__ import annotations

import numpy as np
import pytest

import pypto.ops as P
from pypto.ops.scan import _LONG, LONG_ROW
from pypto.runtime import observe
from pypto.schedule.templates.scan import CHUNK


def _row(n, dtype, seed=0):
    """Few distinct values (many ties), and for floats NaN, -0.0 and inf here and there."""
    x = np.random.default_rng(seed).integers(-3, 4, n).astype(dtype)
    if np.dtype(dtype).kind == "f":
        x[5::777] = -0.0
        x[7::1999] = np.inf
        x[CHUNK + 3::CHUNK * 5 + 11] = np.nan
    return x


def _serial(name, x):
    v, i = getattr(P, name).kernel(x.reshape(1, -1, 1))
    return v.reshape(-1), i.reshape(-1)


def _same(got, want):
    (gv, gi), (wv, wi) = got, want
    assert gi.dtype == np.int64 and gv.dtype == wv.dtype
    np.testing.assert_array_equal(gi, wi)
    np.testing.assert_array_equal(gv, wv)               # NaN == NaN here
    np.testing.assert_array_equal(np.signbit(gv), np.signbit(wv))


#: Fewer chunks than a block, whole blocks, a ragged last block and chunk.
LENGTHS = [3 * CHUNK + 5, 32 * CHUNK, 37 * CHUNK + 1, 70 * CHUNK + 123]


#: Every length in float32, the raggedest in the other dtypes (each dtype is a compile).
CASES = [(n, "float32") for n in LENGTHS] + [(LENGTHS[-1], d) for d in ("float64", "int32",
                                                                          "int64")]


@pytest.mark.parametrize("n,dtype", CASES)
@pytest.mark.parametrize("name", ["cummax", "cummin"])
def test_chunked_kernel_equals_the_serial_scan(n, name, dtype):
    x = _row(n, dtype)
    _same(_LONG[name].kernel(x), _serial(name, x))


def test_a_nan_in_the_first_chunk_holds_to_the_end_and_a_later_one_takes_over():
    x = _row(40 * CHUNK + 9, "float32", 3)
    x[np.isnan(x)] = 0.0
    x[10], x[35 * CHUNK + 2] = np.nan, np.nan
    for name in ("cummax", "cummin"):
        v, i = _LONG[name].kernel(x)
        assert np.isnan(v[10:]).all()
        assert (i[10:35 * CHUNK + 2] == 10).all() and (i[35 * CHUNK + 2:] == 35 * CHUNK + 2).all()


@pytest.mark.parametrize("name", ["cummax", "cummin"])
def test_public_call_of_a_long_row_takes_the_chunked_form(name):
    x = np.random.default_rng(1).standard_normal(LONG_ROW + 4097).astype(np.float32)
    with observe() as calls:
        values, indices = getattr(P, name)(x)
    assert [c[0] for c in calls] == [_LONG[name]]
    acc = np.maximum if name == "cummax" else np.minimum
    want = acc.accumulate(x)
    np.testing.assert_array_equal(values, want)
    # the last position so far holding the running extreme (no NaN here)
    pos = np.arange(x.size)
    np.testing.assert_array_equal(indices, np.maximum.accumulate(np.where(x == want, pos, 0)))
    # also along an axis of a [N, 1] array, and with axis=None
    v2, i2 = getattr(P, name)(x.reshape(-1, 1), 0)
    np.testing.assert_array_equal(i2.reshape(-1), indices)
    assert v2.shape == (x.size, 1)
    v3, i3 = getattr(P, name)(x[:LONG_ROW + 2].reshape(2, -1), None)
    np.testing.assert_array_equal(i3, indices[:LONG_ROW + 2])
    # out= goes to the general kernel, which writes it in place
    out = (np.empty_like(x), np.empty(x.shape, np.int64))
    assert getattr(P, name)(x, out=out) is out
    np.testing.assert_array_equal(out[1], indices)


# -- logcumsumexp ---------------------------------------------------------------------------------

@pytest.mark.parametrize("n", LENGTHS)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_chunked_logcumsumexp_matches_a_float64_reference(n, dtype):
    x = np.random.default_rng(2).uniform(-30.0, 30.0, n).astype(dtype)
    want = np.logaddexp.accumulate(x.astype(np.float64))
    got = _LONG["logcumsumexp"].kernel(x)
    assert got.dtype == x.dtype
    np.testing.assert_allclose(got, want, rtol=0, atol=2e-5 if dtype == "float32" else 1e-10)


def test_chunked_logcumsumexp_special_values_as_the_serial_scan():
    x = np.random.default_rng(3).uniform(-3.0, 3.0, 70 * CHUNK + 123).astype(np.float32)
    x[100], x[5000], x[200000] = np.inf, -np.inf, np.nan
    got = _LONG["logcumsumexp"].kernel(x)
    ser = P.logcumsumexp.kernel(x.reshape(1, -1, 1)).reshape(-1)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(ser))
    np.testing.assert_array_equal(got[~np.isfinite(ser)], ser[~np.isfinite(ser)])
    # every chunk -inf until one finite element, several chunks in
    y = np.full(x.size, -np.inf, np.float32)
    y[9 * CHUNK + 7] = 1.0
    np.testing.assert_array_equal(_LONG["logcumsumexp"].kernel(y),
                                  P.logcumsumexp.kernel(y.reshape(1, -1, 1)).reshape(-1))


def test_public_logcumsumexp_of_a_long_row_is_chunked_and_accurate():
    x = np.random.default_rng(4).standard_normal(LONG_ROW + 4097).astype(np.float32)
    with observe() as calls:
        got = P.logcumsumexp(x)
    assert [c[0] for c in calls] == [_LONG["logcumsumexp"]]
    np.testing.assert_allclose(got, np.logaddexp.accumulate(x.astype(np.float64)), rtol=0,
                               atol=2e-5)
