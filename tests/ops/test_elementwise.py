"""Unary elementwise ops against their NumPy references."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

import pypto
from pypto.errors import DtypeError, ParamError, ShapeError
from pypto.ops import get_op
from helpers import ODD_SIZES, assert_close, rand

FLOAT_OPS = ["abs", "neg", "exp", "log", "sqrt", "rsqrt", "sin", "cos", "tanh", "sigmoid", "relu",
             "gelu", "silu", "erf", "floor", "ceil", "round", "clip", "square", "reciprocal",
             "softplus", "leaky_relu", "log1p", "expm1"]
INT_OPS = ["abs", "neg", "relu", "square", "clip"]
INTS = ["int8", "int16", "int32"]
#: Parameters used where an op needs them to say something.
PARAMS = {"clip": {"min": -0.5, "max": 0.75}, "leaky_relu": {"negative_slope": 0.2}}
INT_PARAMS = {"clip": {"min": -7, "max": 20}}


def _domain(name, x):
    """Inputs inside the op's real domain (NaN outside it is tested separately)."""
    if name in ("log", "sqrt", "rsqrt"):
        return np.abs(x) + np.asarray(0.05, x.dtype)
    if name == "log1p":
        return np.abs(x) * np.asarray(2, x.dtype) - np.asarray(0.9, x.dtype)
    if name == "reciprocal":
        return np.where(np.abs(x) < 0.05, np.asarray(0.5, x.dtype), x)
    return x * np.asarray(4, x.dtype)


def _tiled(values, dtype, n=1000):
    """``values`` repeated to ``n`` elements (a size whose kernels the other tests compile)."""
    return np.resize(np.asarray(values, dtype=np.float64), n).astype(dtype)


def _ref(name, x, **params):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return get_op(name).reference(x, **params)


def test_all_ops_registered():
    names = {o.name for o in pypto.list_ops("elementwise")}
    assert set(FLOAT_OPS) <= names


@pytest.mark.parametrize("size", ODD_SIZES)
@pytest.mark.parametrize("name", FLOAT_OPS)
def test_float32_sizes(name, size):
    x = _domain(name, rand((size,), "float32", seed=size))
    params = PARAMS.get(name, {})
    got = get_op(name)(x, **params)
    assert got.dtype == np.float32
    assert_close(got, _ref(name, x, **params), err_msg=name)


@pytest.mark.parametrize("dtype", ["float64", "float16"])
@pytest.mark.parametrize("name", FLOAT_OPS)
def test_other_float_dtypes(name, dtype):
    x = _domain(name, rand((3, 127), dtype, seed=3))
    params = PARAMS.get(name, {})
    got = get_op(name)(x, **params)
    assert got.dtype == np.dtype(dtype) and got.shape == (3, 127)
    assert_close(got, _ref(name, x, **params), err_msg=name)


@pytest.mark.parametrize("dtype", INTS)
@pytest.mark.parametrize("name", INT_OPS)
def test_integer_dtypes_wrap_like_numpy(name, dtype):
    info = np.iinfo(dtype)
    x = np.concatenate([rand((50,), dtype, seed=1),
                        np.array([info.min, info.min + 1, -1, 0, 1, info.max], dtype=dtype)])
    params = INT_PARAMS.get(name, {})
    got = get_op(name)(x, **params)
    assert got.dtype == np.dtype(dtype)
    with np.errstate(over="ignore"):
        want = _ref(name, x, **params)
    np.testing.assert_array_equal(got, want)


def test_abs_and_neg_of_int_min_wrap():
    x = np.array([-128, 127, -127], dtype=np.int8)
    np.testing.assert_array_equal(pypto.ops.abs(x), np.array([-128, 127, 127], np.int8))
    np.testing.assert_array_equal(pypto.ops.neg(x), np.array([-128, -127, 127], np.int8))


# -- accuracy over wide ranges, special values -----------------------------------------------------

SPECIAL = [0.0, -0.0, np.nan, np.inf, -np.inf, 1e-30, -1e-30, 1e-40, -1e-40, 1e-45, 88.7, 89.0,
           -87.3, -104.0, 710.0, -746.0, 1e300, 3.4e38, -3.4e38, 0.5, -0.5, 1.5, 2.5, -2.5, -1.0,
           1.5707964, 3.1415927, 1e5, 1e6, 1e10, 1e20, -1e30, 0.35, 0.84375, 1.25, 2.857, 6.0, 28.0,
           9.0, 20.0, -0.999999]
TRANSCENDENTAL = ["exp", "expm1", "log", "log1p", "sqrt", "rsqrt", "sin", "cos", "tanh", "sigmoid",
                  "silu", "gelu", "erf", "softplus", "reciprocal", "floor", "ceil", "round", "relu",
                  "leaky_relu", "abs", "neg", "square", "clip"]


def _wide(dtype, seed=7):
    rng = np.random.default_rng(seed)
    hi = 38 if dtype == "float32" else 300
    parts = [rng.uniform(-5, 5, 4000), rng.uniform(-40, 40, 2000), rng.uniform(-1e-3, 1e-3, 500),
             10.0 ** rng.uniform(-hi, hi, 3000) * rng.choice([-1.0, 1.0], 3000), np.array(SPECIAL)]
    with np.errstate(over="ignore"):
        return np.concatenate(parts).astype(dtype)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", TRANSCENDENTAL)
def test_wide_range_and_special_values(name, dtype):
    """Large |x|, 0, -0, subnormals, NaN and +-inf, against NumPy (NaN where NumPy gives NaN)."""
    x = _wide(dtype)
    params = PARAMS.get(name, {})
    got = get_op(name)(x, **params)
    want = _ref(name, x, **params)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg=f"{name}: NaN positions")
    assert_close(got, want, err_msg=name)


def _ulps(got, truth, dtype):
    """Error in units in the last place of the correctly rounded result (normal results only)."""
    with np.errstate(over="ignore"):
        truth_d = truth.astype(dtype)
    normal = np.isfinite(truth_d) & (np.abs(truth_d) >= np.finfo(dtype).tiny)
    ulp = np.spacing(np.abs(truth_d[normal])).astype(np.float64)
    return np.abs(got[normal].astype(np.float64) - truth[normal]) / ulp


#: (op, dtype): most ulps allowed; the truth is the float64 reference for float32 inputs.
ULP_BOUNDS = {"exp": 2, "expm1": 3, "log": 3, "log1p": 5, "sin": 2, "cos": 2, "tanh": 4,
              "sigmoid": 3, "silu": 4, "softplus": 6, "erf": 10}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", sorted(ULP_BOUNDS))
def test_ulp_error_bounds(name, dtype):
    x = _wide(dtype, seed=11)
    if name in ("log", "log1p"):
        x = np.abs(x)
    if name == "erf" and dtype == "float64":
        bound = 2
    else:
        bound = ULP_BOUNDS[name] + (2 if dtype == "float64" else 0)
    got = get_op(name)(x)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        truth = np.asarray(get_op(name).reference(x.astype(np.float64)), dtype=np.float64)
    err = _ulps(got, truth, dtype)
    assert err.max() <= bound, f"{name} {dtype}: {err.max():.2f} ulp (bound {bound})"


def _trig_close(name, got, want, dtype, err_msg=""):
    """sin, cos: absolute; tan, unbounded: 4 ulps relative (its bound in test_math)."""
    if name == "tan":
        eps = np.finfo(dtype).eps
        np.testing.assert_allclose(got, want, rtol=4 * eps, atol=0, err_msg=err_msg)
    else:
        np.testing.assert_allclose(got, want, rtol=0, atol=2e-7 if dtype == "float32" else 1e-15,
                                   err_msg=err_msg)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", ["sin", "cos", "tan"])
def test_sin_cos_huge_arguments(name, dtype):
    """float32 reduces exactly, float64 hands |x| >= 1e6 to the C library: even x ~ 1e38 (or
    1e300) gives the true sine (cosine, tangent) of the float."""
    rng = np.random.default_rng(5)
    top = 38 if dtype == "float32" else 300
    x = 10.0 ** rng.uniform(3, top, 5000) * rng.choice([-1.0, 1.0], 5000)
    x = np.concatenate([x, [1e5, 71476.0625, 999999.9, 1e6, 2.0 ** 24, 2.0 ** 100, 3.3e38]])
    x = x.astype(dtype)
    got = get_op(name)(x)
    want = getattr(np, name)(x.astype(np.float64))
    _trig_close(name, got, want, dtype)


@pytest.mark.parametrize("n", [1, 7, 63, 64, 65, 1000, 40000])
def test_trig_float32_huge_arguments_among_small_ones(n):
    """float32 reduces |x| < 2**19 the fast way and recomputes each 64-element tile holding a
    larger |x| (or inf, NaN) exactly: scattered huge values, the last (shifted) tile and the
    parallel tiles must all come out right."""
    rng = np.random.default_rng(n)
    x = rng.uniform(-10, 10, n)
    mask = rng.random(n) < 0.01
    x[mask] = 10.0 ** rng.uniform(5.8, 38, mask.sum()) * rng.choice([-1.0, 1.0], mask.sum())
    x[-1] = 3e38
    x[rng.integers(0, n)] = 524288.0 if n > 1 else x[0]     # 2**19: the first exact one
    x = x.astype(np.float32)
    for name in ("sin", "cos", "tan"):
        got = get_op(name)(x)
        want = getattr(np, name)(x.astype(np.float64))
        _trig_close(name, got, want, "float32", err_msg=name)


def test_tan_reduces_once():
    """tan shares one range reduction between the sine and cosine of the remainder (it once ran
    two exact reductions, 2.5x slower than torch): its fast path has one rounding of x 2/pi."""
    from pypto.compiler.lower import build
    for dtype in ("float32", "float64"):
        names = set(build(get_op("tan"), (dtype,), {}).funcs)
        assert "sincos_k" in names and "sincos_k2" not in names, (dtype, sorted(names))


def test_limits_at_infinity():
    x = _tiled([-np.inf, np.inf], np.float32)
    want = {"silu": [0.0, np.inf], "gelu": [0.0, np.inf], "softplus": [0.0, np.inf],
            "sigmoid": [0.0, 1.0], "tanh": [-1.0, 1.0], "erf": [-1.0, 1.0], "exp": [0.0, np.inf]}
    for name, w in want.items():
        np.testing.assert_array_equal(get_op(name)(x)[:2], w, err_msg=name)
    np.testing.assert_array_equal(pypto.ops.gelu(x, approximate="tanh")[:2], [0.0, np.inf])
    assert np.isnan(pypto.ops.sin(x)).all() and np.isnan(pypto.ops.cos(x)).all()


@pytest.mark.parametrize("dtype", ["float32", "float16", "float64"])
def test_nan_passes_through(dtype):
    x = _tiled([np.nan, 0.5, 0.5], dtype, 1000 if dtype == "float32" else 381)
    for name in FLOAT_OPS:
        got = get_op(name)(x, **PARAMS.get(name, {}))
        np.testing.assert_array_equal(np.isnan(got), np.isnan(x), err_msg=name)


def test_round_is_half_to_even():
    x = _tiled([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 3.5000002, 1e8 + 0.5], np.float64, 381)
    np.testing.assert_array_equal(pypto.ops.round(x), np.round(x))
    np.testing.assert_array_equal(pypto.ops.round(x.astype(np.float32))[:8],
                                  [0, 2, 2, 0, -2, -2, 4, 1e8])


def test_small_arguments_keep_relative_accuracy():
    x = _tiled([1e-8, -1e-8, 1e-20, 3e-4, -3e-4], np.float32)
    for name, ref in [("expm1", np.expm1), ("log1p", np.log1p), ("tanh", np.tanh), ("sin", np.sin),
                      ("erf", lambda v: v * 2 / np.sqrt(np.pi))]:
        got = get_op(name)(x)
        np.testing.assert_allclose(got, ref(x.astype(np.float64)), rtol=2e-6, err_msg=name)


# -- parameters ------------------------------------------------------------------------------------


def test_gelu_approximate_forms_differ_and_match():
    x = rand((1000,), "float32", seed=2, low=-6, high=6)
    exact = pypto.ops.gelu(x)
    approx = pypto.ops.gelu(x, approximate="tanh")
    assert_close(exact, _ref("gelu", x))
    assert_close(approx, _ref("gelu", x, approximate="tanh"))
    assert np.abs(exact - approx).max() > 1e-5
    assert np.abs(exact - approx).max() < 1e-2


def test_leaky_relu_slope():
    x = _tiled([-2.0, -0.0, 3.0], np.float32)
    np.testing.assert_array_equal(pypto.ops.leaky_relu(x)[:3], np.float32([-0.02, 0.0, 3.0]))
    np.testing.assert_array_equal(pypto.ops.leaky_relu(x, 0.5)[:3], [-1.0, 0.0, 3.0])
    np.testing.assert_array_equal(pypto.ops.leaky_relu(x, negative_slope=-1.0)[:3], [2.0, 0.0, 3.0])


@pytest.mark.parametrize("bounds", [(-1, 1), (None, 0.5), (0.5, None), (1, -1), (-np.inf, 0.25)])
def test_clip_matches_numpy(bounds):
    x = _tiled([np.nan, -np.inf, -2, -0.0, 0.0, 0.3, 0.5, 2, np.inf], np.float32)
    got = pypto.ops.clip(x, *bounds)
    want = np.clip(x, *bounds)
    np.testing.assert_array_equal(got, want)
    assert got.dtype == np.float32


@pytest.mark.parametrize("dtype", INTS)
def test_clip_integer_bounds(dtype):
    info = np.iinfo(dtype)
    x = np.resize(np.array([info.min, -5, 0, 7, info.max], dtype), 56)   # as in the test above
    for lo, hi in [(-3, 5), (-100000, None), (5, 2)]:
        got = pypto.ops.clip(x, lo, hi)
        assert got.dtype == np.dtype(dtype)
        np.testing.assert_array_equal(got, np.clip(x, lo, hi))


# -- layouts ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["exp", "sin", "gelu", "clip"])
def test_non_contiguous_inputs(name):
    base = rand((40, 60), "float32", seed=4, low=-3, high=3)
    params = PARAMS.get(name, {})
    views = {"transposed": base.T, "step": base[::2, ::3], "reversed": base[::-1, ::-1],
             "fortran": np.asfortranarray(base), "column": base[:, 7]}
    for label, v in views.items():
        got = get_op(name)(v, **params)
        assert got.shape == v.shape, label
        assert_close(got, _ref(name, np.ascontiguousarray(v), **params), err_msg=label)
    np.testing.assert_array_equal(base, rand((40, 60), "float32", seed=4, low=-3, high=3))


def test_any_rank_empty_zero_d_lists_and_read_only():
    x = rand((2, 3, 4, 5), "float32", seed=9)
    assert_close(pypto.ops.tanh(x), np.tanh(x))
    zero_d = pypto.ops.exp(np.float64(1.0))
    assert zero_d.shape == () and zero_d == pytest.approx(math.e, rel=1e-15)
    empty = pypto.ops.exp(np.zeros((3, 0), np.float32))
    assert empty.shape == (3, 0) and empty.dtype == np.float32
    assert_close(pypto.ops.sigmoid([0.0, 1.0, -1.0]), _ref("sigmoid", np.array([0.0, 1.0, -1.0])))
    ro = np.broadcast_to(np.float32(2.0), (3, 4))
    assert not ro.flags.writeable
    assert_close(pypto.ops.sqrt(ro), np.full((3, 4), np.sqrt(np.float32(2.0))))


def test_large_arrays_use_the_parallel_schedule():
    x = rand((70001,), "float32", seed=12, low=-10, high=10)
    for name in ("exp", "sin", "gelu", "tanh"):
        assert_close(get_op(name)(x), _ref(name, x), err_msg=name)


def test_kernel_form_is_one_dimensional():
    op = get_op("exp")
    x = rand((100,), "float32")
    assert_close(op.kernel(x), op.kernel_ref(x))
    with pytest.raises(ShapeError, match="must be 1-D"):
        op.kernel(rand((4, 5), "float32"))


def test_public_signatures():
    assert get_op("gelu").public_signature() == "gelu(x, approximate='none')"
    assert get_op("clip").public_signature() == "clip(x, min=None, max=None)"
    assert get_op("leaky_relu").public_signature() == "leaky_relu(x, negative_slope=0.01)"
    assert get_op("exp").public_signature() == "exp(x)"


# -- errors ----------------------------------------------------------------------------------------


def test_errors():
    x = rand((10,), "float32")
    with pytest.raises(DtypeError, match="exp: argument 'x' has dtype int32; expected float16"):
        pypto.ops.exp(np.arange(3, dtype=np.int32))
    with pytest.raises(DtypeError, match="abs: argument 'x' has dtype uint16"):
        pypto.ops.abs(np.arange(3, dtype=np.uint16))
    with pytest.raises(DtypeError, match="expected float16 or float32 or float64"):
        pypto.ops.sin(np.zeros((0,), np.int32))
    with pytest.raises(DtypeError, match="must be a NumPy array, got str"):
        pypto.ops.exp("abc")
    with pytest.raises(ParamError, match=r"gelu: parameter 'approximate' must be one of "
                                         r"\['none', 'tanh'\], got 'fast'"):
        pypto.ops.gelu(x, approximate="fast")
    with pytest.raises(ParamError, match="leaky_relu: parameter 'negative_slope' expects a number"):
        pypto.ops.leaky_relu(x, negative_slope="big")
    with pytest.raises(ParamError, match="clip: parameter 'min' must be an int for an int32 array"):
        pypto.ops.clip(np.arange(3, dtype=np.int32), 0.5, 2)
    with pytest.raises(ParamError, match="clip: parameter 'min' must be an integer for an int32"):
        get_op("clip").kernel(np.arange(3, dtype=np.int32), min=0.5)
    with pytest.raises(ParamError, match="clip: parameter 'max' must not be NaN"):
        pypto.ops.clip(x, 0.0, float("nan"))
    with pytest.raises(ParamError, match="clip: parameter 'min' is \\+inf"):
        pypto.ops.clip(x, np.inf, None)
    with pytest.raises(ParamError, match="exp: too many positional arguments"):
        pypto.ops.exp(x, 2)
    with pytest.raises(ParamError, match="unexpected keyword argument 'alpha'"):
        pypto.ops.relu(x, alpha=1.0)
    with pytest.raises(ParamError, match="unknown parameter"):
        get_op("relu").kernel(x, alpha=1.0)
