"""Math ops (pypto.ops.math, pypto.ops.arith) against NumPy written here and exact arithmetic.

Accuracy is bounded in ulps of the correctly rounded result: float32 against NumPy in float64,
float64 against NumPy in float64 (itself within about an ulp). Special values (0, -0, +-inf,
NaN, subnormals, the domain edges) must match NumPy exactly.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import pypto
import pypto.ops as P
from pypto.errors import DtypeError, ParamError

RNG = np.random.default_rng(15)
SPECIAL = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5, -0.5, 2.0, 1e-30, -1e-30, 1e-40,
           1e-45, 3e38, -3e38, 88.0, 89.5, -89.5, 710.0, 1e300, 1e5, 4096.5, 0.999999, -0.999999]


def _wide(dtype, n=3000):
    top = 38 if dtype == "float32" else 300
    with np.errstate(over="ignore"):
        return np.concatenate([RNG.uniform(-6, 6, n), RNG.uniform(-1e-3, 1e-3, n // 4),
                               10.0 ** RNG.uniform(-top, top, n) * RNG.choice([-1.0, 1.0], n),
                               SPECIAL]).astype(dtype)


def _unit(dtype, n=3000):
    return np.concatenate([RNG.uniform(-1, 1, n), 1 - 10.0 ** RNG.uniform(-7, 0, n // 4),
                           -1 + 10.0 ** RNG.uniform(-7, 0, n // 4),
                           [0.0, -0.0, 1.0, -1.0, 1.5, -2.0, np.nan, np.inf]]).astype(dtype)


def _ulps(got, truth, dtype):
    with np.errstate(over="ignore"):
        t = truth.astype(dtype)
    normal = np.isfinite(t) & (np.abs(t) >= np.finfo(dtype).tiny)
    return np.abs(got[normal].astype(np.float64) - truth[normal]) / np.spacing(
        np.abs(t[normal])).astype(np.float64)


#: name -> (NumPy function, input maker, ulp bound float32, ulp bound float64)
UNARY = {
    "atan": (np.arctan, _wide, 3, 3),
    "asin": (np.arcsin, _unit, 4, 4),
    "acos": (np.arccos, _unit, 4, 3),
    "tan": (np.tan, _wide, 4, 4),
    "sinh": (np.sinh, _wide, 4, 5),
    "cosh": (np.cosh, _wide, 4, 3),
    "asinh": (np.arcsinh, _wide, 4, 4),
    "acosh": (np.arccosh, lambda d: np.abs(_wide(d)) + np.asarray(1, d), 5, 5),
    "atanh": (np.arctanh, _unit, 5, 4),
    "exp2": (np.exp2, _wide, 2, 2),
    "log2": (np.log2, lambda d: np.abs(_wide(d)), 4, 3),
    "log10": (np.log10, lambda d: np.abs(_wide(d)), 4, 3),
    "cbrt": (np.cbrt, _wide, 1, 3),
    "sign": (np.sign, _wide, 0, 0),
    "trunc": (np.trunc, _wide, 0, 0),
    "deg2rad": (np.deg2rad, _wide, 1, 1),
    "rad2deg": (np.rad2deg, _wide, 1, 1),
}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_accuracy_and_special_values(name, dtype):
    fn, make, b32, b64 = UNARY[name]
    x = make(dtype)
    got = getattr(P, name)(x)
    assert got.dtype == np.dtype(dtype) and got.shape == x.shape
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        truth = fn(x.astype(np.float64))
        same_dtype = fn(x)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(same_dtype), err_msg=f"{name}: NaN")
    inf = np.isinf(same_dtype)
    np.testing.assert_array_equal(got[inf], same_dtype[inf], err_msg=f"{name}: infinities")
    err = _ulps(got, truth, dtype)
    bound = b32 if dtype == "float32" else b64
    assert err.max() <= max(bound, 0.5), f"{name} {dtype}: {err.max():.2f} ulp (bound {bound})"


def test_unary_float16_rounds_the_float32_result_once():
    x = np.concatenate([RNG.uniform(-0.99, 0.99, 500), [0, -0.0, np.inf, -np.inf, np.nan, 0.5]])
    for name, (fn, _, _, _) in UNARY.items():
        v = (np.abs(x) + 1 if name == "acosh" else x).astype(np.float16)
        got = getattr(P, name)(v)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            want = fn(v.astype(np.float64)).astype(np.float16)
        assert got.dtype == np.float16
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg=name)
        ok = ~np.isnan(want)
        np.testing.assert_allclose(got[ok].astype(np.float64), want[ok].astype(np.float64),
                                   rtol=1e-3, atol=0, err_msg=name)


def test_cbrt_float32_subnormals_and_extremes():
    # float32 cbrt scales |x| below 2**-100 by 2**48 before its bit-level guess (the root by
    # 2**-16 after): the guess of a subnormal's bits alone is far off. Up to the largest float
    # nothing may overflow on the way (the cube of the rounded root is taken on halves).
    x = np.concatenate([10.0 ** RNG.uniform(-45.8, -37.9, 4000) * RNG.choice([-1.0, 1.0], 4000),
                        [1.4e-45, -1.4e-45, 1.1754942e-38, 1.1754944e-38, 3.4028235e38,
                         -3.4028235e38, 7.9e-31, 7.9e-31 * 1.0000001, 3.3e38]]).astype(np.float32)
    x = x[x != 0]
    err = _ulps(P.cbrt(x), np.cbrt(x.astype(np.float64)), "float32")
    assert err.size == x.size and err.max() <= 0.51, err.max()


def test_cbrt_is_within_a_hair_of_correct_rounding_across_the_range():
    # the root is corrected by an exactly computed residual: every float32 was within 0.5046 ulp
    # when this was written; float64 is checked against exact cube roots of a sample
    b = RNG.integers(1, 0x7F800000, 200000, dtype=np.uint32)
    x = (b.view(np.float32) * RNG.choice([-1.0, 1.0], b.size)).astype(np.float32)
    err = _ulps(P.cbrt(x), np.cbrt(x.astype(np.float64)), "float32")
    assert err.max() <= 0.51, err.max()
    import fractions
    x64 = np.concatenate([10.0 ** RNG.uniform(-300, 300, 300), RNG.uniform(0.1, 8, 300),
                          [5e-324, 2.2250738585072014e-308, 1.7976931348623157e308]])
    got = P.cbrt(x64)
    for v, g in zip(x64, got):
        # |g**3 - v| within 0.51 ulp of the root: (g +- 0.51 ulp)**3 brackets v exactly
        u = fractions.Fraction(float(np.spacing(g))) * fractions.Fraction(51, 100)
        lo, hi = (fractions.Fraction(float(g)) - u) ** 3, (fractions.Fraction(float(g)) + u) ** 3
        assert lo <= fractions.Fraction(float(v)) <= hi, (v, g)


def test_sinh_and_cosh_overflow_where_numpy_does():
    # e**|x| / 2 comes from one exponential whose scale carries the halving, so that the result
    # stays finite up to sinh's own overflow (beyond exp's)
    for dtype, edge in (("float32", 89.4159851), ("float64", 710.4758600739439)):
        x = np.concatenate([edge + np.linspace(-1.5, 1.5, 301), [88.7, 709.78]]).astype(dtype)
        x = np.concatenate([x, -x])
        with np.errstate(over="ignore"):
            for name, fn in (("sinh", np.sinh), ("cosh", np.cosh)):
                got, want = getattr(P, name)(x), fn(x)
                np.testing.assert_array_equal(np.isinf(got), np.isinf(want), err_msg=name)
                err = _ulps(got, fn(x.astype(np.float64)), dtype)
                assert err.max() <= 2, (name, dtype, err.max())


def test_exact_points():
    np.testing.assert_array_equal(P.log2(np.float32([1, 2, 1024, 0.125, 2.0 ** -140])),
                                  [0, 1, 10, -3, -140])
    np.testing.assert_array_equal(P.exp2(np.float64([0, 1, 10, -3, -1074, 1024])),
                                  [1, 2, 1024, 0.125, 5e-324, np.inf])
    np.testing.assert_array_equal(P.cbrt(np.float32([8, -27, 0.125, -0.0])), [2, -3, 0.5, -0.0])
    np.testing.assert_array_equal(P.atanh(np.float32([1, -1])), [np.inf, -np.inf])
    assert np.signbit(P.atan(np.float32(-0.0))) and np.signbit(P.sinh(np.float64(-0.0)))
    np.testing.assert_array_equal(P.sign(np.int8([-128, -3, 0, 9])), [-1, -1, 0, 1])


def test_tan_float64_huge_arguments_use_the_c_library():
    x = np.array([1e6, 1e10, -3e15, 1e300, 2.5], np.float64)
    np.testing.assert_allclose(P.tan(x), np.tan(x), rtol=1e-15)


# -- NaN tests, nan_to_num, cast, bitwise_not ------------------------------------------------------

@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_predicates_and_nan_to_num(dtype):
    x = np.array([0, -0.0, np.nan, -np.nan, np.inf, -np.inf, 1.5, -2.5, 6e-8, 65504], dtype)
    for name in ("isnan", "isinf", "isfinite", "signbit"):
        got = getattr(P, name)(x)
        assert got.dtype == np.bool_
        np.testing.assert_array_equal(got, getattr(np, name)(x), err_msg=name)
    for kw in ({}, {"nan": 5.0, "posinf": 7.0, "neginf": -1.0}, {"posinf": 1e10}):
        with np.errstate(over="ignore"):
            want = np.nan_to_num(x, **kw)
        got = P.nan_to_num(x, **kw)
        assert got.dtype == x.dtype
        np.testing.assert_array_equal(got, want)


def _cast_input(dtype, n=300):
    dt = np.dtype(dtype)
    if dt.kind == "b":
        return RNG.random(n) < 0.5
    if dt.kind == "f":
        return np.concatenate([RNG.uniform(-300, 300, n), [0.5, -0.5, 2.5, -2.5, 65504, 65520,
                                                           1e-8, -0.0, 1 + 2.0 ** -11]]).astype(dt)
    info = np.iinfo(dt)
    return np.concatenate([RNG.integers(max(info.min, -300), min(info.max, 300), n),
                           [info.min, info.max, 0, 1]]).astype(dt)


@pytest.mark.parametrize("src", ["bool", "int8", "uint16", "int64", "float16", "float64"])
def test_cast_matches_astype_in_range(src):
    x = _cast_input(src)
    for dst in ("bool", "int8", "int32", "uint8", "float16", "float32", "float64"):
        got = P.cast(x, dst)
        assert got.dtype == np.dtype(dst), (src, dst)
        if np.dtype(src).kind == "f" and np.dtype(dst).kind in "iu":
            info = np.iinfo(dst)
            keep = (x > info.min - 1) & (x < info.max + 1)      # NumPy's result is defined
            np.testing.assert_array_equal(got[keep], x[keep].astype(dst), err_msg=(src, dst))
        else:
            with np.errstate(over="ignore"):
                np.testing.assert_array_equal(got, x.astype(dst), err_msg=(src, dst))


def test_cast_defines_what_numpy_leaves_undefined():
    x = np.array([np.nan, np.inf, -np.inf, 1e20, -1e20, 3e9, -3e9, -7.9, 7.9], np.float32)
    np.testing.assert_array_equal(
        P.cast(x, "int32"), [0, 2 ** 31 - 1, -2 ** 31, 2 ** 31 - 1, -2 ** 31, 2 ** 31 - 1,
                             -2 ** 31, -7, 7])
    np.testing.assert_array_equal(P.cast(x, "uint8"), [0, 255, 0, 255, 0, 255, 0, 0, 7])
    # float64 -> float16 rounds once (through float32 it would round twice on these)
    y = np.array([1 + 2.0 ** -11 + 2.0 ** -40, 1 + 2.0 ** -11, 2049.0000001, 2.0 ** -25 * 1.0000001])
    np.testing.assert_array_equal(P.cast(y, "float16"), y.astype(np.float16))


def test_bitwise_not():
    np.testing.assert_array_equal(P.bitwise_not(np.int8([0, 5, -1, 127])), [-1, -6, 0, -128])
    np.testing.assert_array_equal(P.bitwise_not(np.uint16([0, 1])), [65535, 65534])
    np.testing.assert_array_equal(P.bitwise_not(np.array([True, False])), [False, True])


# -- binary ops ------------------------------------------------------------------------------------

_GRID = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 2.5, -7.0, 1e-45, 3e38, -1e-3])


def _pairs(dtype, n=3000):
    a = np.concatenate([RNG.uniform(-5, 5, n), 10.0 ** RNG.uniform(-30, 30, n) *
                        RNG.choice([-1.0, 1.0], n), np.repeat(_GRID, _GRID.size)])
    b = np.concatenate([RNG.uniform(-5, 5, n), 10.0 ** RNG.uniform(-30, 30, n) *
                        RNG.choice([-1.0, 1.0], n), np.tile(_GRID, _GRID.size)])
    with np.errstate(over="ignore"):
        return a.astype(dtype), b.astype(dtype)


BINARY = {"atan2": (np.arctan2, 3, 3), "hypot": (np.hypot, 1, 2), "copysign": (np.copysign, 0, 0),
          "fmax": (np.fmax, 0, 0), "fmin": (np.fmin, 0, 0), "heaviside": (np.heaviside, 0, 0)}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_accuracy_and_special_values(name, dtype):
    fn, b32, b64 = BINARY[name]
    a, b = _pairs(dtype)
    got = getattr(P, name)(a, b)
    want = fn(a, b)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg=name)
    np.testing.assert_array_equal(np.isinf(got), np.isinf(want), err_msg=name)
    err = _ulps(got, fn(a.astype(np.float64), b.astype(np.float64)), dtype)
    assert err.max() <= max(b32 if dtype == "float32" else b64, 0.5), f"{name}: {err.max()} ulp"
    if name == "atan2":   # C's signed zeros and quadrants on the axes
        zeros = np.array([0.0, -0.0], dtype)
        np.testing.assert_array_equal(np.signbit(P.atan2(zeros, zeros.copy())), [False, True])
        np.testing.assert_array_equal(P.atan2(zeros, -zeros), np.arctan2(zeros, -zeros))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_logaddexp_against_the_same_formula_in_float64(dtype):
    a, b = _pairs(dtype)
    for name, fn, scale in (("logaddexp", np.logaddexp, 1.0), ("logaddexp2", np.logaddexp2, 1.0)):
        got = getattr(P, name)(a, b)
        with np.errstate(all="ignore"):
            want = fn(a.astype(np.float64), b.astype(np.float64))
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg=name)
        fin = np.isfinite(want)
        # the result is a sum of max(a, b) and a term in [0, 1]: an ulp of max(|a|, |b|, 1) each
        big = np.maximum(np.maximum(np.abs(a), np.abs(b)), 1)
        tol = 4 * np.spacing(np.where(np.isinf(big), 1, big).astype(dtype))[fin]
        assert (np.abs(got[fin] - want[fin]) <= tol * scale).all(), name
        np.testing.assert_array_equal(got[~fin], want[~fin].astype(dtype), err_msg=name)


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
def test_fmod_remainder_floor_divide_are_exact_like_numpy(dtype):
    n = 20000
    with np.errstate(over="ignore"):
        a = np.concatenate([RNG.uniform(-50, 50, n), 10.0 ** RNG.uniform(-45, 38.5, n) *
                            RNG.choice([-1, 1], n), np.repeat(_GRID, _GRID.size),
                            [3.4e38, 2.0 ** -149, 65504, -7.5]]).astype(dtype)
        b = np.concatenate([RNG.uniform(-5, 5, n), 10.0 ** RNG.uniform(-45, 38.5, n) *
                            RNG.choice([-1, 1], n), np.tile(_GRID, _GRID.size),
                            [2.0 ** -149, 3.4e38, 2.0 ** -24, 2.0]]).astype(dtype)
    for name in ("fmod", "remainder", "floor_divide"):
        got = getattr(P, name)(a, b)
        with np.errstate(all="ignore"):
            want = getattr(np, name)(a, b)
        assert got.dtype == np.dtype(dtype)
        np.testing.assert_array_equal(got, want, err_msg=name)   # NaN == NaN here


@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_integer_division_family_matches_numpy(dtype):
    info = np.iinfo(dtype)
    a = np.concatenate([RNG.integers(-100, 100, 300), [info.min, info.min, info.max, 7, -7, 5]])
    b = np.concatenate([RNG.integers(-9, 9, 300), [-1, info.min, -1, 0, 3, -3]])
    a, b = a.astype(dtype), b.astype(dtype)
    for name in ("fmod", "remainder", "floor_divide", "fmax", "fmin"):
        with np.errstate(all="ignore"):
            want = getattr(np, name)(a, b)
        np.testing.assert_array_equal(getattr(P, name)(a, b), want, err_msg=name)


@pytest.mark.parametrize("dtype", ["int8", "uint16", "int32", "int64"])
def test_bitwise_and_shifts(dtype):
    info = np.iinfo(dtype)
    a = np.concatenate([RNG.integers(max(info.min, -1000), min(info.max, 1000), 200),
                        [info.min, info.max, -1 if info.min else 1]]).astype(dtype)
    bits = np.dtype(dtype).itemsize * 8
    s = RNG.integers(0 if info.min == 0 else -3, bits + 5, a.size).astype(dtype)
    np.testing.assert_array_equal(P.bitwise_and(a, s), a & s)
    np.testing.assert_array_equal(P.bitwise_or(a, s), a | s)
    np.testing.assert_array_equal(P.bitwise_xor(a, 3), a ^ np.asarray(3, dtype))
    ok = (s >= 0) & (s < bits)
    safe = np.where(ok, s, 0).astype(dtype)
    np.testing.assert_array_equal(P.left_shift(a, s), np.where(ok, a << safe, 0).astype(dtype))
    right = np.where(ok, a >> safe, np.where(a < 0, -1, 0)).astype(dtype)
    np.testing.assert_array_equal(P.right_shift(a, s), right)


def test_lerp_is_torchs_and_broadcasts():
    a = RNG.uniform(-3, 3, (4, 5)).astype(np.float32)
    b = RNG.uniform(-3, 3, (5,)).astype(np.float32)
    w = RNG.uniform(-0.5, 1.5, (4, 1)).astype(np.float32)
    want = np.where(w < 0.5, a + w * (b - a), b - (b - a) * (1 - w))
    np.testing.assert_allclose(P.lerp(a, b, w), want, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(P.lerp(a, b, 1.0), np.broadcast_to(b, a.shape))
    np.testing.assert_array_equal(P.lerp(a, b, 0.0), a)


# -- errors ----------------------------------------------------------------------------------------

def test_errors_name_the_argument_and_what_is_allowed():
    f32, i32 = np.ones(3, np.float32), np.ones(3, np.int32)
    with pytest.raises(DtypeError, match="asin: argument 'x' has dtype int32"):
        P.asin(i32)
    with pytest.raises(DtypeError, match="bitwise_and: argument 'a' has dtype float32"):
        P.bitwise_and(f32, f32)
    with pytest.raises(DtypeError, match="fmod: argument 'a' has dtype int16; expected .*float32"):
        P.fmod(np.ones(3, np.int16), np.ones(3, np.int16))
    with pytest.raises(DtypeError, match="have different dtypes"):
        P.atan2(f32, np.ones(3))
    with pytest.raises(ParamError, match=r"cast: parameter 'dtype' must be one of .*got 'complex64'"):
        P.cast(f32, "complex64")
    with pytest.raises(ParamError, match="nan_to_num: parameter 'posinf' expects a number"):
        P.nan_to_num(f32, posinf="big")
    with pytest.raises(DtypeError, match="isnan: argument 'x' has dtype int32"):
        P.isnan(i32)


def test_public_signatures_follow_numpy_and_torch():
    assert pypto.get_op("nan_to_num").public_signature() == \
        "nan_to_num(x, nan=0.0, posinf=None, neginf=None)"
    assert pypto.get_op("atan2").public_signature() == "atan2(y, x)"
    assert pypto.get_op("lerp").public_signature() == "lerp(input, end, weight)"
    assert pypto.get_op("cast").public_signature() == "cast(x, dtype='float32')"


def test_gpu_defaults_run_on_opencl():
    """A unary, a binary (float64 inside), a gated and a row op under the GPU default schedule."""
    from helpers import opencl_device

    if not opencl_device():
        pytest.skip("no OpenCL device (PoCL) here")
    x = RNG.uniform(-3, 3, (16, 130)).astype(np.float32)
    y = RNG.uniform(0.5, 3, (16, 130)).astype(np.float32)
    calls = [("atan", (x,)), ("fmod", (x, y)), ("glu", (x,)), ("softmin", (x,))]
    for name, args in calls:
        want = getattr(P, name)(*args)
        with pypto.target("opencl"):
            got = getattr(P, name)(*args)
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7, err_msg=name)


ODD = ["sin", "sinh", "tan", "tanh", "asin", "atan", "asinh", "atanh", "expm1", "log1p", "cbrt",
       "erf", "trunc"]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", [n for n in ODD if hasattr(P, n)])
def test_odd_functions_keep_the_sign_of_zero(name, dtype):
    # float64 sin, tan, tanh and sinh gave -0.0 for +0.0 (a Halide code-generation fault with
    # strict_float(abs(x) * c)), so 1 / sin(0.0) was -inf
    x = np.array([0.0, -0.0], dtype)
    got = getattr(P, name)(x)
    np.testing.assert_array_equal(np.signbit(got), [False, True])
    np.testing.assert_array_equal(got, [0.0, 0.0])


def test_cast_takes_numpy_dtypes_as_astype_does():
    x = np.array([1.7, -2.2], np.float32)
    for dt in (np.int16, np.dtype("int16"), "int16"):
        got = P.cast(x, dt)
        assert got.dtype == np.int16 and got.tolist() == [1, -2]


def test_a_promotion_to_an_unsupported_dtype_names_the_promotion_not_the_array():
    a = np.array([-1, 0, 1, 2], np.int32)
    with pytest.raises(pypto.DtypeError, match=r"bitwise_and: the arguments \('a' int32, 'b' a "
                                               r"Python float\) promote to float64"):
        P.bitwise_and(a, 0.5)
    # fmod takes float64, so an int32 array and a Python float go there, as in NumPy
    np.testing.assert_array_equal(P.fmod(a, 0.5), np.fmod(a, 0.5))
