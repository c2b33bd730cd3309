"""Quantization ops (quantize, dequantize, quantized_matmul, requantize): exact integer results."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pypto.ops as P
from helpers import ODD_SIZES, rand
from pypto.errors import DtypeError, ParamError, ShapeError

LIMITS = {"int8": (-128, 127), "uint8": (0, 255)}


def exact(got, want):
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    assert got.shape == want.shape, (got.shape, want.shape)
    np.testing.assert_array_equal(got, want)


def _floats(shape, seed=0, spread=40.0):
    return (np.random.default_rng(seed).standard_normal(shape) * spread).astype(np.float32)


# -- quantize -----------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["int8", "uint8"])
def test_quantize_shapes(dtype):
    zp = 3 if dtype == "int8" else 128
    for n in ODD_SIZES:
        x = _floats(n, seed=n)
        exact(P.quantize(x, 0.37, zp, dtype), P.quantize.reference(x, 0.37, zp, dtype))
    x = _floats((3, 7, 11))
    got = P.quantize(x, 0.5, zp, dtype=dtype)
    exact(got, P.quantize.reference(x, 0.5, zp, dtype))
    exact(P.quantize(x.T, 0.5, zp, dtype), got.T)
    exact(P.quantize(x[:, ::2, 1::3], 0.5, zp, dtype), got[:, ::2, 1::3])
    s = P.quantize(np.float32(2.6), 1.0, 0, dtype)
    assert s.shape == () and s == 3


@pytest.mark.parametrize("scale", [0.1, 0.3, 1 / 3, 0.0123, 7.0])
def test_quantize_true_division(scale):
    # x / scale must be an IEEE float32 division: a multiplication by a rounded reciprocal
    # lands on the other side of a .5 for some of these values.
    x = np.random.default_rng(1).uniform(-12, 12, 200_003).astype(np.float32)
    x[:1000] = (np.arange(-500, 500) + 0.5).astype(np.float32) * np.float32(scale)
    exact(P.quantize(x, scale, 0), P.quantize.reference(x, scale, 0))


def test_quantize_rounding_saturation_and_specials():
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 126.5, 127.5, -128.5, 1e30, -1e30,
                  np.inf, -np.inf, np.nan], np.float32)
    got = P.quantize(x, 1.0, 0)
    exact(got, np.array([0, 2, 2, 0, -2, -2, 126, 127, -128, 127, -128, 127, -128, 0], np.int8))
    got = P.quantize(x, 1.0, 10, dtype="uint8")
    exact(got, np.array([10, 12, 12, 10, 8, 8, 136, 138, 0, 255, 0, 255, 0, 10], np.uint8))


# -- dequantize ---------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["int8", "uint8"])
def test_dequantize(dtype):
    lo, hi = LIMITS[dtype]
    full = np.arange(lo, hi + 1).astype(dtype)
    got = P.dequantize(full, 0.05, lo + 7)
    exact(got, (full.astype(np.int32) - (lo + 7)).astype(np.float32) * np.float32(0.05))
    assert got[7] == 0 and got[0] == np.float32(-7 * np.float32(0.05))
    for n in ODD_SIZES:
        q = rand((n,), dtype, seed=n)
        exact(P.dequantize(q, 0.3, 1), P.dequantize.reference(q, 0.3, 1))
    q = rand((5, 6, 7), dtype)
    exact(P.dequantize(q.transpose(2, 0, 1), 1.5, hi), P.dequantize.reference(q, 1.5, hi)
          .transpose(2, 0, 1))
    exact(P.dequantize(q[::2, :, ::3], 1.5, lo), P.dequantize.reference(q[::2, :, ::3], 1.5, lo))


@settings(max_examples=25, deadline=None)
@given(st.lists(st.floats(-6.0, 6.0, width=32), min_size=1, max_size=50),
       st.sampled_from([0.05, 0.1, 0.25]))
def test_quantize_round_trip(values, scale):
    # Inside the representable range a round trip is within half a step.
    x = np.array(values, np.float32)
    back = P.dequantize(P.quantize(x, scale, 0), scale, 0)
    assert np.all(np.abs(back - x) <= scale / 2 * (1 + 1e-5)), (x, back)


# -- quantized_matmul ---------------------------------------------------------------------------

@pytest.mark.parametrize("dts", [("int8", "int8"), ("uint8", "uint8"), ("uint8", "int8")])
def test_quantized_matmul(dts):
    da, db = dts
    rng = np.random.default_rng(0)
    zas = (0, LIMITS[da][0], LIMITS[da][1])
    zbs = (0, LIMITS[db][1], LIMITS[db][0])
    for (m, k, n), za, zb in zip([(1, 1, 1), (3, 7, 127), (37, 129, 51), (64, 1000, 48)],
                                 zas + (5,), zbs + (-3 if db == "int8" else 3,)):
        a = rng.integers(*LIMITS[da], size=(m, k), endpoint=True).astype(da)
        b = rng.integers(*LIMITS[db], size=(k, n), endpoint=True).astype(db)
        want = (a.astype(np.int64) - za) @ (b.astype(np.int64) - zb)
        got = P.quantized_matmul(a, b, za, zb)
        exact(got, want.astype(np.int32))
        exact(got, P.quantized_matmul.reference(a, b, za, zb))


def test_quantized_matmul_extremes_and_views():
    # Every product at its largest magnitude: (-128 - 127) * (127 - -128) summed over K.
    k = 1000
    a = np.full((9, k), -128, np.int8)
    b = np.full((k, 30), 127, np.int8)
    got = P.quantized_matmul(a, b, a_zero_point=127, b_zero_point=-128)
    assert (got == -255 * 255 * k).all()
    rng = np.random.default_rng(3)
    at = rng.integers(-128, 128, (40, 33)).astype(np.int8)   # a = at.T, a transposed view
    b = rng.integers(-128, 128, (80, 48)).astype(np.int8)[::2]  # a step slice
    exact(P.quantized_matmul(at.T, b, 1, 2), P.quantized_matmul.reference(at.T, b, 1, 2))


# -- requantize ---------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["int8", "uint8"])
def test_requantize(dtype):
    lo, hi = LIMITS[dtype]
    zp = 0 if dtype == "int8" else 128
    rng = np.random.default_rng(0)
    for n in ODD_SIZES:
        acc = rng.integers(-2**31, 2**31, n, dtype=np.int64).astype(np.int32)
        exact(P.requantize(acc, 1.3e-8, zp, dtype), P.requantize.reference(acc, 1.3e-8, zp, dtype))
    acc = np.array([1, 3, 5, -1, -3, 2**31 - 1, -2**31, 255, -255], np.int32)
    got = P.requantize(acc, 0.5, zp, dtype)  # ties go to even
    big = 10**9
    want = np.clip(np.array([0, 2, 2, 0, -2, big, -big, 128, -128]) + zp, lo, hi).astype(dtype)
    exact(got, want)
    acc2 = rng.integers(-5000, 5000, (6, 7)).astype(np.int32)
    exact(P.requantize(acc2.T, 0.01, zp, dtype), P.requantize.reference(acc2.T, 0.01, zp, dtype))


# -- errors -------------------------------------------------------------------------------------

def test_errors():
    x = _floats(10)
    q = rand((10,), "int8")
    with pytest.raises(DtypeError, match="quantize: argument 'x' has dtype float64; expected"):
        P.quantize(x.astype(np.float64), 0.1, 0)
    with pytest.raises(ParamError, match="quantize: parameter 'scale' must be finite and > 0"):
        P.quantize(x, 0.0, 0)
    with pytest.raises(ParamError, match="'zero_point' must be in \\[0, 255\\] for uint8, got -1"):
        P.quantize(x, 0.1, -1, dtype="uint8")
    with pytest.raises(ParamError, match=r"'zero_point' must be in \[-128, 127\] for int8, got 2"):
        P.quantize(x, 0.1, 200)
    with pytest.raises(ParamError, match="'dtype' must be 'int8' or 'uint8', got 'int16'"):
        P.quantize(x, 0.1, 0, dtype="int16")
    with pytest.raises(DtypeError, match="dequantize: argument 'q' has dtype int32"):
        P.dequantize(q.astype(np.int32), 0.1, 0)
    with pytest.raises(ParamError, match="dequantize: parameter 'scale' must be finite"):
        P.dequantize(q, -1.0, 0)
    with pytest.raises(ParamError, match="dequantize: parameter 'zero_point' must be in"):
        P.dequantize(q, 0.1, 128)
    with pytest.raises(DtypeError, match="requantize: argument 'acc' has dtype int64; expect"):
        P.requantize(q.astype(np.int64), 0.1, 0)
    with pytest.raises(ParamError, match="requantize: parameter 'scale' must be finite"):
        P.requantize(q.astype(np.int32), float("nan"), 0)


def test_quantized_matmul_errors():
    a = rand((4, 5), "int8")
    b = rand((5, 3), "int8")
    with pytest.raises(ShapeError, match="dim K is 5 in 'a' \\(axis 1\\) but 4 in 'b'"):
        P.quantized_matmul(a, b[:4])
    with pytest.raises(ShapeError, match="'a' must be 2-D"):
        P.quantized_matmul(a[0], b)
    with pytest.raises(DtypeError, match="quantized_matmul"):
        P.quantized_matmul(a.astype(np.int16), b)
    with pytest.raises(DtypeError, match="quantized_matmul"):
        P.quantized_matmul(a, b.astype(np.uint8))  # int8 x uint8 is not a supported pair
    with pytest.raises(ParamError, match="'b_zero_point' must be in \\[-128, 127\\] for int8"):
        P.quantized_matmul(a, b, 0, 200)
