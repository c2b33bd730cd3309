"""Broadcasting binary ops against NumPy."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pypto
from pypto.errors import DtypeError, ParamError, ShapeError
from pypto.ops import get_op
from helpers import ODD_SIZES, assert_close, rand

FLOAT_ONLY = ["div", "pow", "swiglu"]
WITH_INT = ["add", "sub", "mul", "maximum", "minimum"]
ALL = WITH_INT + FLOAT_ONLY


def _operands(name, shape_a, shape_b, dtype, seed=0):
    a = rand(shape_a, dtype, seed=seed, low=-3, high=3)
    b = rand(shape_b, dtype, seed=seed + 1, low=-3, high=3)
    if name == "pow":
        a = np.abs(a) + np.asarray(0.25, dtype)       # a real-valued power everywhere
    if name == "div" and np.dtype(dtype).kind == "f":
        b = np.where(np.abs(b) < 0.1, np.asarray(0.5, dtype), b)
    return a, b


def _ref(name, *args):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return get_op(name).reference(*args)


def test_all_ops_registered():
    names = {o.name for o in pypto.list_ops("elementwise")}
    assert set(ALL) | {"where"} <= names


@pytest.mark.parametrize("size", ODD_SIZES)
@pytest.mark.parametrize("name", ALL)
def test_float32_sizes(name, size):
    a, b = _operands(name, (size,), (size,), "float32", seed=size)
    got = get_op(name)(a, b)
    assert got.dtype == np.float32 and got.shape == (size,)
    assert_close(got, _ref(name, a, b), err_msg=name)


@pytest.mark.parametrize("name,dtype", [(n, d) for n in ALL for d in ("float64", "float16", "int32")
                                        if not (d == "int32" and n in FLOAT_ONLY)])
def test_other_dtypes(name, dtype):
    a, b = _operands(name, (3, 127), (3, 127), dtype, seed=2)
    got = get_op(name)(a, b)
    want = _ref(name, a, b)
    assert got.dtype == want.dtype == np.dtype(dtype)
    assert_close(got, want, err_msg=name)


BROADCASTS = [((3, 4), (4,)), ((3, 1), (1, 4)), ((), (5,)), ((2, 3, 70), (3, 1)),
              ((5, 1, 3), (4, 1)), ((1,), (1,)), ((2, 1, 70), (70,)), ((6, 200), (6, 1)),
              ((4, 5, 6), (1, 5, 1)), ((7,), (3, 1, 7))]


@pytest.mark.parametrize("shapes", BROADCASTS, ids=str)
@pytest.mark.parametrize("name", ["add", "pow", "maximum", "swiglu"])
def test_broadcasting(name, shapes):
    a, b = _operands(name, *shapes, "float32", seed=5)
    want = _ref(name, a, b)
    got = get_op(name)(a, b)
    assert got.shape == np.broadcast_shapes(*shapes)
    assert_close(got, want)
    got_swapped = get_op(name)(b, a)
    assert_close(got_swapped, _ref(name, b, a))


def test_views_pass_without_changing_inputs():
    base = rand((30, 80), "float32", seed=3)
    other = rand((30, 80), "float32", seed=4)
    keep = base.copy()
    cases = {"transposed": (base.T, other.T), "step": (base[::2, ::3], other[::2, ::3]),
             "reversed": (base[::-1], other[::-1]), "rows": (base[::3], other[::3]),
             "fortran": (np.asfortranarray(base), other), "column": (base[:, 5:6], other),
             "read-only broadcast": (np.broadcast_to(base[0], (30, 80)), other)}
    for label, (a, b) in cases.items():
        for name in ("sub", "swiglu"):
            assert_close(get_op(name)(a, b), _ref(name, np.array(a), np.array(b)),
                         err_msg=f"{name} {label}")
    np.testing.assert_array_equal(base, keep)


def test_python_scalars_take_numpy_dtypes():
    x32 = rand((10,), "float32")
    i32 = np.arange(10, dtype=np.int32)
    h16 = rand((10,), "float16")
    assert pypto.ops.add(x32, 2.0).dtype == np.float32
    assert pypto.ops.mul(3, x32).dtype == np.float32
    assert pypto.ops.add(i32, 2).dtype == np.int32
    assert pypto.ops.add(h16, 1.5).dtype == np.float16
    promoted = pypto.ops.add(i32, 2.5)
    assert promoted.dtype == np.add(i32, 2.5).dtype == np.float64
    np.testing.assert_array_equal(promoted, i32 + 2.5)
    assert_close(pypto.ops.pow(x32, 2.0), x32.astype(np.float64) ** 2, dtype="float32")
    assert_close(pypto.ops.div(1.0, x32 + 5), 1.0 / (x32 + 5))
    assert_close(pypto.ops.maximum(x32, 0.0), np.maximum(x32, 0.0))
    both = pypto.ops.add(1.5, 2.0)
    assert both.shape == () and both.dtype == np.float64 and float(both) == 3.5


def test_where():
    x = rand((4, 70), "float32", seed=7)
    y = rand((70,), "float32", seed=8)
    cond = x > 0
    assert_close(pypto.ops.where(cond, x, y), np.where(cond, x, y))
    assert_close(pypto.ops.where(cond[:1], x, 0.0), np.where(cond[:1], x, 0.0))
    assert_close(pypto.ops.where(True, x, y), np.where(True, x, y))
    ints = np.arange(280, dtype=np.int32).reshape(4, 70)
    np.testing.assert_array_equal(pypto.ops.where(cond, ints, -1), np.where(cond, ints, -1))
    nan = np.full((4, 70), np.nan, np.float64)
    got = pypto.ops.where(cond, nan, 1.0)
    np.testing.assert_array_equal(np.isnan(got), cond)
    h = x.astype(np.float16)
    assert pypto.ops.where(cond, h, h).dtype == np.float16


def test_swiglu_is_silu_times_gate():
    x = rand((8, 70), "float32", seed=9, low=-8, high=8)
    y = rand((8, 70), "float32", seed=10)
    assert_close(pypto.ops.swiglu(x, y), pypto.ops.silu(x) * y)
    assert_close(pypto.ops.swiglu(x, y[0]), x / (1 + np.exp(-x)) * y[0])
    inf = np.resize(np.array([-np.inf, np.inf, np.nan], np.float32), (8, 70))
    got = pypto.ops.swiglu(inf, np.ones((8, 70), np.float32))
    np.testing.assert_array_equal(got[0, :3], [0.0, np.inf, np.nan])


def test_nan_and_inf_semantics():
    a = np.resize(np.array([np.nan, 1, -np.inf, 2, np.nan, 0.0, 3.0], np.float32), 1000)
    b = np.resize(np.array([1, np.nan, 3, np.inf, np.nan, -0.0, 0.0], np.float32), 1000)
    for name in ("maximum", "minimum", "add", "sub", "mul", "div"):
        got = get_op(name)(a, b)
        want = _ref(name, a, b)
        np.testing.assert_array_equal(got, want, err_msg=name)


def test_pow_special_values_match_numpy():
    # float32 takes log2|x| = -inf at 0 and |x| at inf and NaN, so that those powers come out of
    # the float64 core; subnormal bases and exponents, the last odd float32 (2**24 - 1) and
    # exponents near the int32 limit of y's integer test are here too
    xs = [np.nan, -np.inf, -2.0, -1.0, -0.5, -0.0, 0.0, 0.5, 1.0, 2.0, np.inf, -3.7, 1e-30, 1e30,
          1e-45, -1e-45, 1 - 2.0 ** -24, -(1 - 2.0 ** -24)]
    ys = [np.nan, -np.inf, -3.0, -2.0, -0.5, -0.0, 0.0, 0.5, 2.0, 3.0, np.inf, 1e300, 2.5, -1.0,
          1.0, 1e10 + 1, 7.0, 1e-45, -1e-45, 2.0 ** 24 - 1, -(2.0 ** 24 - 1), 2.0 ** 31,
          2.0 ** 31 - 128]
    x, y = (v.ravel() for v in np.meshgrid(xs, ys))
    for dtype in ("float64", "float32"):
        with np.errstate(over="ignore"):         # 1e300 and 1e30 become inf in float32
            xd, yd = x.astype(dtype), y.astype(dtype)
        got = pypto.ops.pow(xd, yd)
        want = _ref("pow", xd, yd)
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
        num = ~np.isnan(want)
        np.testing.assert_array_equal(np.signbit(got[num]), np.signbit(want[num]))
        assert_close(got, want, rtol=1e-6 if dtype == "float32" else 1e-12)


def test_pow_accuracy():
    rng = np.random.default_rng(1)
    a = rng.uniform(0, 10, 2000)
    b = rng.uniform(-30, 30, 2000)
    for dtype, rtol in (("float64", 1e-13), ("float32", 1.2e-7)):
        ad, bd = a.astype(dtype), b.astype(dtype)
        truth = np.power(ad.astype(np.float64), bd.astype(np.float64))
        got = pypto.ops.pow(ad, bd)
        ok = (np.abs(truth) < np.finfo(dtype).max) & (np.abs(truth) > np.finfo(dtype).tiny)
        np.testing.assert_allclose(got[ok], truth[ok], rtol=rtol, atol=0)


def test_pow_float32_is_within_a_hair_of_correct_rounding():
    # float32 goes through float64 with short polynomials: the error before the one rounding must
    # stay far below half an ulp, also where y * log2|x| is large (bases near 1, huge exponents),
    # near overflow and for subnormal bases or results.
    rng = np.random.default_rng(11)
    n = 20000
    cases = [(rng.uniform(0, 10, n), rng.uniform(-30, 30, n)),
             (1 + rng.uniform(-1e-6, 1e-6, n), rng.uniform(-1e7, 1e7, n)),
             (10.0 ** rng.uniform(-45, 38, n), rng.uniform(-4, 4, n)),
             (rng.uniform(1.5, 2.5, n), rng.uniform(120, 190, n) * rng.choice([-1, 1], n)),
             (-rng.uniform(0, 10, n), rng.integers(-40, 40, n).astype(np.float64))]
    for a, b in cases:
        a32, b32 = a.astype(np.float32), b.astype(np.float32)
        with np.errstate(all="ignore"):
            truth = np.power(a32.astype(np.float64), b32.astype(np.float64))
            t32 = truth.astype(np.float32)
        got = pypto.ops.pow(a32, b32)
        np.testing.assert_array_equal(np.isinf(got), np.isinf(t32))
        ok = np.isfinite(t32) & (t32 != 0)
        # in units of the float32 spacing at the result (subnormal results included)
        err = np.abs(got[ok].astype(np.float64) - truth[ok]) / np.spacing(np.abs(t32[ok]))
        assert err.max() <= 0.51, f"pow float32: {err.max():.4f} ulp"


def test_int32_wraps_like_numpy():
    big = np.array([2**31 - 1, -2**31, 65536, -7], np.int32)
    one = np.array([1, -1, 65536, 3], np.int32)
    a, b = np.resize(big, (3, 127)), np.resize(one, (3, 127))
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(pypto.ops.add(a, b), a + b)
        np.testing.assert_array_equal(pypto.ops.mul(a, b), a * b)
        np.testing.assert_array_equal(pypto.ops.sub(a, b), a - b)


def test_large_inputs_use_the_parallel_schedules():
    x = rand((70001,), "float32", seed=11)
    y = rand((70001,), "float32", seed=12)
    assert_close(pypto.ops.add(x, y), x + y)
    rows = rand((3, 40000), "float32", seed=13)
    assert_close(pypto.ops.swiglu(rows, rows[0]), _ref("swiglu", rows, rows[0]))
    many = rand((300, 700), "float32", seed=14)
    assert_close(pypto.ops.maximum(many, many[:, :1]), np.maximum(many, many[:, :1]))


def test_empty_and_kernel_form():
    assert pypto.ops.add(np.zeros((0, 3), np.float32), np.zeros(3, np.float32)).shape == (0, 3)
    op = get_op("add")
    a, b = rand((5, 9), "float32"), rand((5, 9), "float32", seed=1)
    assert_close(op.kernel(a, b), op.kernel_ref(a, b))
    with pytest.raises(ShapeError, match="dim C is 9"):
        op.kernel(a, rand((5, 8), "float32"))
    assert get_op("where").public_signature() == "where(cond, a, b)"
    assert get_op("swiglu").public_signature() == "swiglu(x, y)"


def test_errors():
    x32, x64 = rand((4,), "float32"), rand((4,), "float64")
    with pytest.raises(DtypeError, match=r"add: arguments 'a' \(float32\) and 'b' \(float64\) "
                                         r"have different dtypes.*e\.g\. a\.astype\(np\.float64\) "
                                         r"\(float64"):
        pypto.ops.add(x32, x64)
    # The suggested cast widens, as NumPy promotes: never int32 down to int8.
    with pytest.raises(DtypeError, match=r"e\.g\. a\.astype\(np\.int32\) \(int32"):
        pypto.ops.add(np.ones(4, np.int8), np.arange(4, dtype=np.int32))
    with pytest.raises(DtypeError, match=r"a\.astype\(np\.float64\) and b\.astype\(np\.float64\)"):
        pypto.ops.sub(np.arange(4, dtype=np.int32), x32)
    with pytest.raises(DtypeError, match="different dtypes"):
        pypto.ops.mul(x32, np.float64(2.0))
    with pytest.raises(DtypeError, match="div: argument 'a' has dtype int32; expected float16 "
                                         "or float32 or float64"):
        pypto.ops.div(np.arange(4, dtype=np.int32), np.arange(4, dtype=np.int32))
    with pytest.raises(DtypeError, match="add: argument 'a' has dtype uint16"):
        pypto.ops.add(np.arange(4, dtype=np.uint16), np.arange(4, dtype=np.uint16))
    with pytest.raises(DtypeError, match="where: argument 'cond' must be a bool array"):
        pypto.ops.where(np.arange(4), x32, x32)
    with pytest.raises(DtypeError, match="the Python int 4294967296 given as 'b' does not fit"):
        pypto.ops.add(np.arange(4, dtype=np.int32), 2**32)
    with pytest.raises(ShapeError, match=r"add: shapes \(3, 4\) of 'a', \(5,\) of 'b' cannot be "
                                         "broadcast together"):
        pypto.ops.add(rand((3, 4), "float32"), rand((5,), "float32"))
    with pytest.raises(ParamError, match="missing a required argument: 'b'"):
        pypto.ops.add(x32)
    with pytest.raises(DtypeError, match="must be a NumPy array"):
        pypto.ops.add(x32, "3")


@st.composite
def broadcastable_shapes(draw):
    """Two shapes that broadcast: trailing parts of one full shape, some dims replaced by 1."""
    full = draw(st.lists(st.integers(1, 5), min_size=0, max_size=4))

    def one_operand():
        k = draw(st.integers(0, len(full)))
        ones = draw(st.lists(st.booleans(), min_size=k, max_size=k))
        return tuple(1 if one else n for one, n in zip(ones, full[len(full) - k:]))

    return one_operand(), one_operand()


@settings(max_examples=25, deadline=None)
@given(shapes=broadcastable_shapes(), seed=st.integers(0, 1000))
def test_broadcasting_property(shapes, seed):
    sa, sb = shapes
    a = rand(sa, "float32", seed=seed)
    b = rand(sb, "float32", seed=seed + 1)
    for name, ref in (("add", np.add), ("mul", np.multiply), ("maximum", np.maximum)):
        got = get_op(name)(a, b)
        want = ref(a, b)
        assert got.shape == want.shape
        assert_close(got, want, err_msg=f"{name} {sa} {sb}")
