"""Row reductions at shapes that take each form of the default schedule, with the values that
the fast paths treat apart: NaN of either sign, infinities, signed zeros, ties.

The forms (``pypto.schedule.templates.reduce``): few long rows (chunks reduced in parallel),
rows of at least two vectors (one row at a time, vector lanes along it), short rows (vectorized
across rows); argmax/argmin of one long row also go through blocks of the row
(``reduce._arg_blocks``, float64). argmax/argmin of 32-bit inputs reduce one int64 per element
(an ordered key of the value above the index); of float64 they find the extreme as a float max
plus a NaN flag and then the first index on the bits; each special value is checked in each
position.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import pypto.ops as P
from pypto.schedule.templates.reduce import TASK_ELEMS, task_rows
from pypto.schedule.defaults import MIN_TASK_ELEMS

#: (O, R): short rows, rows of a few vectors, ragged rows, long rows, few long rows.
SHAPES = [(37, 3), (40, 10), (9, 31), (13, 33), (70, 100), (5, 2048), (2, 140_000),
          (300, 517)]
SPECIALS = [np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0]


def _rows_with_specials(shape, dtype, seed):
    """Small integers (many ties) with special values sprinkled in some rows."""
    rng = np.random.default_rng(seed)
    x = rng.integers(-3, 4, shape).astype(dtype)
    o, r = shape
    for row in range(0, o, 3):
        for j, v in enumerate(SPECIALS[row % len(SPECIALS):]):
            x[row, (row * 7 + j * 11) % r] = v
    if o > 4:
        x[1] = -np.inf                        # a row of -inf only
        x[2] = np.nan                         # a row of NaN only
        x[4, :] = 0.0
        x[4, ::2] = -0.0                      # zeros of both signs
    return x


def _numpy(name, x):
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return getattr(np, name)(x, axis=1)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", ["argmax", "argmin"])
def test_first_index_of_the_extreme_with_special_values(shape, dtype, name):
    x = _rows_with_specials(shape, dtype, seed=shape[1])
    got = getattr(P, name)(x, axis=1)
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, _numpy(name, x))


@pytest.mark.parametrize("name", ["argmax", "argmin"])
def test_a_nan_of_either_sign_after_the_extreme_still_wins(name):
    x = np.zeros((3, 300), np.float32)
    x[:, 50] = 5.0 if name == "argmax" else -5.0
    x[0, 200] = np.nan
    x[1, 200] = -np.nan
    x[2, 299] = np.float32(np.nan) * -1
    np.testing.assert_array_equal(getattr(P, name)(x, axis=1), [200, 200, 299])


@pytest.mark.parametrize("name", ["argmax", "argmin"])
def test_one_long_row_searched_by_blocks(name):
    x = np.random.default_rng(3).integers(-50, 50, 300_001).astype(np.float32)
    x[[17, 150_000, 299_999]] = 99.0 if name == "argmax" else -99.0
    assert getattr(P, name)(x) == 17
    x[[5, 250_000]] = -0.0
    x[:5] = 0.0
    x[5:] = 1.0 if name == "argmin" else -1.0
    x[[5, 250_000]] = -0.0                    # the first zero of either sign
    assert getattr(P, name)(x) == 0
    x[123_456] = -np.nan
    assert getattr(P, name)(x) == 123_456


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", ["max", "min", "nanmax", "nanmin"])
def test_extremes_with_special_values(shape, dtype, name):
    x = _rows_with_specials(shape, dtype, seed=shape[0])
    got = getattr(P, name)(x, axis=1)
    want = _numpy(name, x)
    assert got.dtype == x.dtype
    np.testing.assert_array_equal(got, want)               # NaN == NaN, -0.0 == 0.0


_EDGE_BITS = {
    "float32": [0x7F800001, 0x7FC00000, 0x7FFFFFFF, 0xFF800001, 0xFFC00000, 0xFFFFFFFF,  # NaNs
                0x7F800000, 0xFF800000, 0x7F7FFFFF, 0xFF7FFFFF, 0x00000001, 0x80000001,
                0x00000000, 0x80000000, 0x3F800000, 0xBF800000],
    "float64": [0x7FF0000000000001, 0x7FF8000000000000, 0x7FFFFFFFFFFFFFFF, 0xFFF0000000000001,
                0xFFF8000000000000, 0xFFFFFFFFFFFFFFFF, 0x7FF0000000000000, 0xFFF0000000000000,
                0x7FEFFFFFFFFFFFFF, 0xFFEFFFFFFFFFFFFF, 0x0000000000000001, 0x8000000000000001,
                0x0000000000000000, 0x8000000000000000, 0x3FF0000000000000, 0xBFF0000000000000],
}


@pytest.mark.parametrize("r", [2, 40, 140_000])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", ["max", "min"])
def test_extremes_of_every_pair_of_edge_bit_patterns(r, dtype, name):
    """max/min move the keys of one sign of NaN round the end of the integer key range
    (``reduce._nan_key``): every pair of the NaNs with the lowest and highest payloads of both
    signs, the infinities, the largest finite values, the smallest denormals and the zeros, in a
    row of ones, gives NumPy's answer (a NaN for any NaN), as a row that is then also one of
    few long rows (chunks in parallel) or of a short row. (The sign of a zero extreme is
    unspecified, as in NumPy.)"""
    bits = _EDGE_BITS[dtype]
    edges = np.array(bits, np.uint32 if dtype == "float32" else np.uint64).view(dtype)
    pairs = [(i, j) for i in range(len(edges)) for j in range(len(edges))]
    x = np.ones((len(pairs), r), dtype)
    for row, (i, j) in enumerate(pairs):
        x[row, 0] = edges[i]
        x[row, r - 1] = edges[j]
    np.testing.assert_array_equal(getattr(P, name)(x, axis=1), _numpy(name, x))  # -0.0 == 0.0


@pytest.mark.parametrize("shape", [(13, 33), (70, 100), (5, 2048), (2, 140_000)])
@pytest.mark.parametrize("name", ["argmax", "argmin", "max", "min"])
def test_int32_rows(shape, name):
    x = np.random.default_rng(2).integers(-5, 6, shape).astype(np.int32)
    x[0, -1] = np.iinfo(np.int32).max
    x[-1, 0] = np.iinfo(np.int32).min
    np.testing.assert_array_equal(getattr(P, name)(x, axis=1), _numpy(name, x))


@pytest.mark.parametrize("shape", [(40, 10), (13, 33), (70, 95), (5, 2048), (3, 140_003)])
def test_prod_with_four_vectors_of_partial_products(shape):
    spread = 1.0 / np.sqrt(shape[1])         # products of many factors stay in range
    x = np.random.default_rng(1).uniform(1 - spread, 1 + spread, shape).astype(np.float32)
    want = np.prod(x.astype(np.float64), axis=1)
    np.testing.assert_allclose(P.prod(x, axis=1), want, rtol=2e-5 * np.sqrt(shape[1]))
    y = np.random.default_rng(1).integers(1, 3, shape).astype(np.int32)
    y[:, 40:] = 1                                           # no int64 overflow
    np.testing.assert_array_equal(P.prod(y, axis=1), np.prod(y, axis=1, dtype=np.int64))


@pytest.mark.parametrize("shape", [(37, 3), (13, 33), (300, 517), (2, 140_000)])
def test_nan_sums_and_means(shape):
    x = _rows_with_specials(shape, "float32", seed=7)
    x[np.isinf(x)] = 1.0                                   # inf - inf aside
    for name in ("nansum", "nanmean"):
        want = _numpy(name, x.astype(np.float64))
        np.testing.assert_allclose(getattr(P, name)(x, axis=1), want, rtol=1e-6, atol=1e-6)


def test_leading_axis_extremes_match_numpy():
    # These reductions stay single-valued, so the frontend's column schedule reads rows in place.
    x = _rows_with_specials((4096, 64), "float32", seed=9)
    for name in ("max", "min", "nanmax", "nanmin"):
        np.testing.assert_array_equal(getattr(P, name)(x, axis=0), _numpy(name, x.T))


def test_task_rows_makes_big_tasks_while_there_are_several():
    assert task_rows(2048, 2048) * 2048 == TASK_ELEMS            # 64 tasks of 64K elements
    assert task_rows(64, 2048) == 16                             # still four tasks
    assert task_rows(16, 2048) * 2048 == MIN_TASK_ELEMS          # never under the minimum
    assert task_rows(3, 100_000) == 1
    assert task_rows(5, 10) == 5                                 # one task holds every row
    for n_o, r in [(2048, 2048), (256, 1024), (100, 700), (1 << 20, 4)]:
        rows = task_rows(n_o, r)
        assert 1 <= rows <= n_o
        assert rows * r >= min(MIN_TASK_ELEMS, n_o * r)
        assert rows * r <= max(TASK_ELEMS, r)


@pytest.mark.parametrize("dtype", ["float32", "int32"])
@pytest.mark.parametrize("name", ["argmax", "argmin"])
def test_leading_axis_arg_extremes_run_as_programs(name, dtype):
    """argmax/argmin over axis 0 of a 32-bit input run as one-op programs (one int64 reduction,
    which the column schedule reads row by row: 4096x1024 took ~72 ms on the transposed view);
    ties, signed zeros and NaNs of either sign give NumPy's first index."""
    from pypto.frontend.jit import GLOBAL

    if dtype == "float32":
        x = np.ascontiguousarray(_rows_with_specials((64, 4096), dtype, seed=5).T)
    else:
        x = np.random.default_rng(5).integers(-3, 4, (4096, 64)).astype(dtype)
        x[4000, 7] = np.iinfo(np.int32).max
        x[17, 9] = np.iinfo(np.int32).min
    before = GLOBAL.segments_run
    got = getattr(P, name)(x, axis=0)
    assert GLOBAL.segments_run == before + 1
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, _numpy(name, x.T))
    x3 = np.ascontiguousarray(x.reshape(64, 64, 64))
    np.testing.assert_array_equal(getattr(P, name)(x3, axis=0, keepdims=True),
                                  getattr(np, name)(x3, axis=0, keepdims=True))


@pytest.mark.parametrize("name", ["argmax", "argmin"])
def test_arg_extremes_of_long_rows_at_every_chunk_boundary(name):
    """One long 32-bit row is split into parallel chunks by its schedule (no block search): the
    first of equal extremes wins across chunk and lane boundaries, a NaN wins from anywhere."""
    from pypto.schedule.templates.reduce import CHUNK

    n = 4 * CHUNK + 37
    x = np.zeros(n, np.float32)
    best = 7.0 if name == "argmax" else -7.0
    x[[CHUNK + 1, 2 * CHUNK, 3 * CHUNK - 1, n - 1]] = best
    assert getattr(P, name)(x) == CHUNK + 1
    x[CHUNK + 1] = 0.0
    assert getattr(P, name)(x) == 2 * CHUNK
    x[n - 1] = -np.nan
    assert getattr(P, name)(x) == n - 1
    x[2 * CHUNK + 5] = np.nan
    assert getattr(P, name)(x) == 2 * CHUNK + 5
    y = np.full((2, n), -0.0, np.float32)
    y[:, 0] = 0.0
    y[1, :3] = -0.0
    np.testing.assert_array_equal(getattr(P, name)(y, axis=1), [0, 0])


@pytest.mark.parametrize("name", ["sum", "mean", "nansum"])
def test_float32_sums_read_in_blocks_with_every_remainder(name):
    """A float32 row is summed in blocks of GROUP runs (the last block's runs shorter) plus the
    last R % GROUP elements (``reduce._float_sum``): every row length from 1 to a few groups, rows
    ending in a short block, with runs of BLOCK elements and long runs, and at each schedule form.
    Small integers are summed exactly in any order, so an element missed or read twice shows;
    an inf or a NaN in a run or in the remainder; values of mixed magnitude within the error
    bound of float32 group sums accumulated in float64."""
    from pypto.schedule.templates.reduce import BLOCK, GROUP

    rng = np.random.default_rng(11)
    f = getattr(P, name)
    short = [3 * BLOCK * GROUP + 5 * GROUP + 3, 40 * BLOCK * GROUP + (BLOCK - 1) * GROUP + 7,
             GROUP * 2048, GROUP * 1500 + 3, GROUP * (2 * 4096 + 1500) + 5]       # long runs
    for r in list(range(1, 3 * GROUP + 2)) + [2 * 16 * GROUP - 1, 2 * 16 * GROUP + 5, 4099] + short:
        for o in (3, 40):
            x = rng.integers(-8, 9, (o, r)).astype(np.float32)
            x[0, -1] = 1000.0                    # in the remainder (or the last run)
            x[1, 0] = -300.0                     # the first run
            if o > 2:
                x[2, r // 2] = np.inf
            if o > 5:
                x[5, -1] = np.nan
                x[6, r // 3] = np.nan
            want = _numpy(name, x.astype(np.float64)).astype(np.float32)
            np.testing.assert_array_equal(f(x, axis=1), want, err_msg=f"{name} r={r} o={o}")
            y = rng.uniform(-1, 1, (o, r)).astype(np.float32)
            y[0, -1] = 1e6
            y[1, 0] = -3e5
            exact = np.sum(y.astype(np.float64), axis=1) / (r if name == "mean" else 1)
            # float32 rounds each group sum (log2(GROUP) additions) and the result once.
            bound = 2.0**-24 * (np.abs(exact) + np.log2(GROUP) * np.sum(np.abs(y), axis=1)
                                / (r if name == "mean" else 1))
            assert np.all(np.abs(f(y, axis=1) - exact) <= bound), (name, r, o)


def test_float32_sum_of_one_long_row_in_chunks_is_accurate():
    """The full-reduction form (chunks of blocks in parallel), for lengths around a chunk and
    with a remainder: against the exact float64 sum, and exactly for integers."""
    from pypto.schedule.templates.reduce import CHUNK, GROUP

    rng = np.random.default_rng(12)
    for n in (4 * CHUNK, 4 * CHUNK + GROUP - 1, 9 * CHUNK + 3, 3_000_017):
        x = rng.uniform(0, 1, n).astype(np.float32)
        exact = np.sum(x.astype(np.float64))
        assert abs(float(P.sum(x)) - exact) <= 1e-6 * exact
        assert abs(float(P.mean(x)) - exact / n) <= 1e-6 * exact / n
        ints = rng.integers(-1000, 1000, n).astype(np.float32)
        assert P.sum(ints) == np.float32(np.sum(ints.astype(np.int64)))
        y = x.copy()
        y[n - 1] = np.nan
        assert P.nansum(y) == np.float32(np.sum(y[:-1].astype(np.float64)))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_global_avg_pool_sums_planes_as_mean_sums_rows(dtype):
    """global_avg_pool2d sums each flattened plane as ``mean`` sums a row, with the row
    reductions' schedule (the planes as rows): 7 x 7 to 56 x 56 planes, planes of 14 x 14 (24
    steps of eight, lane partials eight steps wide) and 16 x 16 (sixteen wide), few and many
    planes. Small integers exactly against NumPy; uniform values within float32's group-sum
    bound of the float64 mean."""
    rng = np.random.default_rng(13)
    for n, c, h, w in [(1, 3, 7, 7), (2, 64, 14, 14), (1, 40, 16, 16), (8, 512, 7, 7),
                       (1, 2, 56, 56), (3, 5, 1, 13), (2, 1, 255, 1)]:
        x = rng.integers(-8, 9, (n, c, h, w)).astype(dtype)
        x[0, 0, -1, -1] = 1000.0
        want = x.astype(np.float64).mean(axis=(2, 3), keepdims=True).astype(dtype)
        got = P.global_avg_pool2d(x)
        assert got.shape == (n, c, 1, 1) and got.dtype == np.dtype(dtype)
        np.testing.assert_array_equal(got, want, err_msg=str((n, c, h, w)))
        y = rng.uniform(-1, 1, (n, c, h, w)).astype(dtype)
        exact = y.astype(np.float64).mean(axis=(2, 3), keepdims=True)
        eps = 2.0**-24 if dtype == "float32" else 2.0**-53
        bound = eps * (np.abs(exact) + 3 * np.abs(y).astype(np.float64).mean(axis=(2, 3),
                                                                              keepdims=True))
        assert np.all(np.abs(P.global_avg_pool2d(y) - exact) <= bound), (n, c, h, w)
