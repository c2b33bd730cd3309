"""The scans at shapes that take each form of their default schedule, against NumPy.

The default CPU schedule (``pypto.schedule.templates.scan``) scans blocks of rows with vector
lanes across rows when I is below a vector (the last block shifted inwards when the rows do not
divide), tiles of I when I spans a vector, and one row at a time otherwise; the GPU default
computes the running Func at root. Sums and products run in order along R, as NumPy's
``accumulate`` does, so they match it exactly.
"""

from __future__ import annotations

import numpy as np
import pytest
from helpers import assert_close

import pypto.ops as P
from pypto.compiler.lower import build
from pypto.ops import get_op
from pypto.schedule.defaults import default_schedule
from pypto.compiler import targets
from pypto.schedule.gpu import gpu_default

#: (O, R, I): across rows (8 | O, ragged, fewer than 8 rows), across I, one row, I between.
SHAPES = [(16, 37, 1), (13, 50, 1), (5, 9, 1), (3, 7, 1), (6, 11, 3), (4, 9, 8), (3, 6, 19),
          (1, 300, 1), (1, 5, 2), (9, 1, 1), (40, 300, 1)]


def _x(shape, dtype, seed=0, low=-2.0, high=2.0):
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind == "f":
        return rng.uniform(low, high, shape).astype(dtype)
    return rng.integers(-50, 50, shape).astype(dtype)


def _cum_extreme(x, largest):
    """torch.cummax/cummin along axis 1 of [O, R, I]: ties move the index on, NaN wins."""
    vals, idx = np.empty_like(x), np.zeros(x.shape, np.int64)
    for o in range(x.shape[0]):
        for i in range(x.shape[2]):
            best, at = x[o, 0, i], 0
            for j in range(x.shape[1]):
                v = x[o, j, i]
                if np.isnan(v) or (not np.isnan(best) and (v >= best if largest else v <= best)):
                    best, at = v, j
                vals[o, j, i], idx[o, j, i] = best, at
    return vals, idx


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64"])
def test_cumsum_and_cumprod_match_numpy_exactly(shape, dtype):
    x = _x(shape, dtype)
    acc = np.int64 if dtype.startswith("int") else None
    np.testing.assert_array_equal(P.cumsum.kernel(x), np.cumsum(x, 1, dtype=acc))
    y = (x % 3 + 1).astype(dtype) if dtype.startswith("int") else (x * 0.25 + 1).astype(dtype)
    np.testing.assert_array_equal(P.cumprod.kernel(y), np.cumprod(y, 1, dtype=acc))


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("name", ["cummax", "cummin"])
@pytest.mark.parametrize("dtype", ["float32", "float64", "int32"])
def test_cummax_cummin_with_ties_nan_and_signed_zeros(shape, name, dtype):
    x = np.random.default_rng(1).integers(-3, 4, shape).astype(dtype)
    if dtype != "int32":
        flat = x.reshape(-1)
        flat[3::11] = np.nan
        flat[1::7] = -0.0
        flat[2::13] = np.inf
    values, indices = getattr(P, name).kernel(x)
    want_v, want_i = _cum_extreme(x, name == "cummax")
    assert indices.dtype == np.int64 and values.dtype == x.dtype
    np.testing.assert_array_equal(indices, want_i)
    np.testing.assert_array_equal(values, want_v)          # NaN == NaN here
    np.testing.assert_array_equal(np.signbit(values), np.signbit(want_v))


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_logcumsumexp_matches_a_float64_reference(shape, dtype):
    x = _x(shape, dtype, low=-30.0, high=30.0)
    want = np.log(np.cumsum(np.exp(x.astype(np.float64)), 1)).astype(dtype)
    assert_close(P.logcumsumexp.kernel(x), want)


def test_logcumsumexp_special_values_in_every_lane():
    # Rows of one block carry different states side by side in the vector lanes.
    rows = [[-np.inf, -np.inf, 0.0, np.inf, 1.0, np.inf],
            [1.0, np.nan, 0.0, 2.0, 3.0, -np.inf],
            [np.inf, np.inf, 1.0, -np.inf, 2.0, 0.0],
            [-np.inf, 3.0, -np.inf, -np.inf, 2.0, 2.0],
            [0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
            [-np.inf] * 6,
            [5.0, -np.inf, np.nan, -np.inf, np.inf, 1.0],
            [-1e30, 1e30, -1e30, 1e30, 0.0, -0.0],
            [88.0, 88.0, 88.5, -200.0, 87.0, 90.0]]
    for dtype in ("float32", "float64"):
        x = np.array(rows, dtype)[:, :, None]
        with np.errstate(invalid="ignore"):
            want = np.logaddexp.accumulate(x.astype(np.float64), axis=1).astype(dtype)
        assert_close(P.logcumsumexp.kernel(x), want)


def test_logcumsumexp_of_long_rows_stays_accurate():
    x = _x((8, 20000, 1), "float32", seed=3, low=-3.0, high=3.0)
    want = np.log(np.cumsum(np.exp(x.astype(np.float64)), 1))
    np.testing.assert_allclose(P.logcumsumexp.kernel(x), want, rtol=2e-6, atol=0)


def test_rows_too_long_for_a_block_take_the_row_form():
    x = _x((9, 70000, 1), "float32", seed=2)
    np.testing.assert_array_equal(P.cumsum.kernel(x), np.cumsum(x, 1))
    v, i = P.cummax.kernel(x)
    np.testing.assert_array_equal(i[..., 0], _first_max_index_running(x[..., 0]))
    np.testing.assert_array_equal(v, np.maximum.accumulate(x, 1))


def _first_max_index_running(a):
    """Index of the last element equal to the running maximum (ties move it on)."""
    run = np.maximum.accumulate(a, 1)
    hit = np.where(a == run, np.arange(a.shape[1]), 0)
    return np.maximum.accumulate(hit, 1)


@pytest.mark.parametrize("dims,form", [({"O": 64, "R": 100, "I": 1}, "rows"),
                                       ({"O": 5, "R": 100, "I": 1}, "rows"),
                                       ({"O": 4, "R": 50, "I": 16}, "tiles"),
                                       ({"O": 1, "R": 100, "I": 1}, "serial"),
                                       ({"O": 16, "R": 1 << 17, "I": 1}, "serial")])
def test_default_cpu_schedule_takes_the_expected_form(dims, form):
    built = build(get_op("cumsum"), ("float32",), {})
    text = str(default_schedule(built, dims, targets.current()))
    assert ("reorder_storage" in text) == (form == "rows"), text
    assert ("io" in text) == (form == "tiles"), text


@pytest.mark.parametrize("name", ["cumsum", "cumprod", "logcumsumexp", "cummax", "cummin"])
def test_gpu_default_computes_the_scan_once_per_row(name):
    # Inside a GPU thread loop the running Func would be rescanned whole for every output point.
    built = build(get_op(name), ("float32",), {})
    ds = gpu_default(built, {"O": 64, "R": 300, "I": 1})
    running = [f.name for f in built.funcs.values() if not f.is_output and f.updates]
    assert running
    for f in running:
        assert any(d.op == "compute_root" and d.func == f for d in ds), ds
        assert not any(d.op == "compute_at" and d.func == f for d in ds), ds


def test_public_calls_on_strided_input():
    x = _x((12, 10, 7), "float32", seed=4)
    view = x[:, ::2, ::-1]
    for axis in (0, 1, 2, -1):
        np.testing.assert_array_equal(P.cumsum(view, axis), np.cumsum(view, axis))
        v, i = P.cummin(view, axis)
        np.testing.assert_array_equal(v, np.minimum.accumulate(view, axis))
