"""Activations (pypto.ops.activations) against NumPy written here from torch's documented formulas,
in float64 for the truth; special values, parameters, the halving and channel ops, errors, and
every op's public call on pypto.Tensor inputs through pypto.jit."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

import pypto
import pypto.ops as P
from pypto.errors import DtypeError, ParamError, ShapeError

RNG = np.random.default_rng(21)
SPECIAL = [0.0, -0.0, np.inf, -np.inf, np.nan, 3.0, -3.0, 6.0, 0.5, -0.5, 20.0, -20.0, 1e-30,
           -1e-30, 100.0, -100.0, 1e30, -1e30]


def _x(dtype, n=4000):
    return np.concatenate([RNG.uniform(-8, 8, n), RNG.uniform(-1e-3, 1e-3, n // 8),
                           SPECIAL]).astype(dtype)


def _sig(v):
    return 1 / (1 + np.exp(-v))


def _softplus(v):
    return np.logaddexp(0, v)


#: name -> (params, float64 formula, ulp bound float32, ulp bound float64)
EW = {
    "hardsigmoid": ({}, lambda v: np.clip(v + 3, 0, 6) / 6, 1, 1),
    "hardswish": ({}, lambda v: np.where(v == -np.inf, 0.0, v * np.clip(v + 3, 0, 6) / 6), 2, 2),
    "mish": ({}, lambda v: np.where(v == -np.inf, 0.0, v * np.tanh(_softplus(v))), 4, 5),
    "elu": ({"alpha": 0.7}, lambda v: np.where(v > 0, v, 0.7 * np.expm1(v)), 2, 3),
    "selu": ({}, lambda v: 1.0507009873554804934 * np.where(
        v > 0, v, 1.6732632423543772848 * np.expm1(v)), 3, 3),
    "celu": ({"alpha": 2.0}, lambda v: np.maximum(v, 0) + np.minimum(0, 2 * np.expm1(v / 2)),
             2, 3),
    "softsign": ({}, lambda v: np.where(np.isinf(v), np.sign(v), v / (1 + np.abs(v))), 2, 2),
    "hardtanh": ({"min_val": -2.0, "max_val": 0.5}, lambda v: np.clip(v, -2, 0.5), 0, 0),
    "relu6": ({}, lambda v: np.clip(v, 0, 6), 0, 0),
    "hardshrink": ({"lambd": 0.75}, lambda v: np.where(np.isnan(v) | (np.abs(v) > 0.75), v, 0.0),
                   0, 0),
    "softshrink": ({"lambd": 0.75}, lambda v: np.sign(v) * np.maximum(np.abs(v) - 0.75, 0), 0, 0),
    "threshold": ({"threshold": 0.5, "value": -2.0},
                  lambda v: np.where(np.isnan(v) | (v > 0.5), v, -2.0), 0, 0),
    "log_sigmoid": ({}, lambda v: -_softplus(-v), 4, 4),
    "tanhshrink": ({}, None, 2, 8),
}


def _tanhshrink_truth(v):
    """x - tanh(x) from exact decimal arithmetic (40 digits) on each element."""
    import decimal

    ctx = decimal.Context(prec=40)
    out = np.empty(v.shape, np.float64)
    for i, x in enumerate(v.astype(np.float64).tolist()):
        if not math.isfinite(x) or abs(x) > 30:
            out[i] = x - math.tanh(x) if not math.isnan(x) else x
            continue
        if abs(x) < 1e-4:           # the series: its next term is below 1e-17 relative
            out[i] = x ** 3 / 3 - 2 * x ** 5 / 15 + 17 * x ** 7 / 315
            continue
        d = decimal.Decimal(x)
        e2 = ctx.exp(2 * d)
        out[i] = float(ctx.subtract(d, ctx.divide(e2 - 1, e2 + 1)))
    return out


def _ulps(got, truth, dtype):
    with np.errstate(over="ignore"):
        t = truth.astype(dtype)
    normal = np.isfinite(t) & (np.abs(t) >= np.finfo(dtype).tiny)
    return np.abs(got[normal].astype(np.float64) - truth[normal]) / np.spacing(
        np.abs(t[normal])).astype(np.float64)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", sorted(EW))
def test_elementwise_activations(name, dtype):
    params, formula, b32, b64 = EW[name]
    x = _x(dtype, 1500 if name == "tanhshrink" else 4000)
    got = getattr(P, name)(x, **params)
    assert got.dtype == np.dtype(dtype) and got.shape == x.shape
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        x64 = x.astype(np.float64)
        truth = _tanhshrink_truth(x) if formula is None else formula(x64)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(x), err_msg=f"{name}: NaN in, NaN out")
    inf = np.isinf(truth)
    np.testing.assert_array_equal(got[inf], truth[inf], err_msg=f"{name}: infinities")
    if name in ("softshrink", "threshold", "hardshrink"):
        # the threshold is rounded to the dtype, as in torch: compare in the dtype
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            same = formula(x)
        np.testing.assert_array_equal(got, same.astype(dtype))
        return
    err = _ulps(got, truth, dtype)
    bound = b32 if dtype == "float32" else b64
    assert err.max() <= max(bound, 0.5), f"{name} {dtype}: {err.max():.2f} ulp"


def test_float16_is_the_float32_result_rounded():
    x = np.concatenate([RNG.uniform(-8, 8, 300), [np.inf, -np.inf, np.nan, 0.0]]).astype(np.float16)
    for name, (params, _, _, _) in EW.items():
        got = getattr(P, name)(x, **params)
        want = getattr(P, name)(x.astype(np.float32), **params).astype(np.float16)
        assert got.dtype == np.float16
        np.testing.assert_array_equal(got, want, err_msg=name)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_logit_outside_zero_to_one_is_nan_infinities_included(dtype):
    # -inf gave a finite number (-88.3 in float32), where torch.logit gives NaN
    x = np.array([-np.inf, -1e30, -2, -1e-30, 1 + 1e-7, 2, 1e30, np.inf], dtype)
    assert np.isnan(P.logit(x)).all(), P.logit(x)


def test_logit_is_accurate_near_one_half_and_clamps_with_eps():
    x = np.concatenate([RNG.uniform(0, 1, 2000), [0, 1, 0.5, 0.25, 1e-30, np.nan, -0.5, 2.0]])
    for dtype, bound in (("float32", 4), ("float64", 4)):
        v = x.astype(dtype)
        got = P.logit(v)
        import decimal
        ctx = decimal.Context(prec=40)
        with np.errstate(all="ignore"):
            truth = np.log(v.astype(np.float64)) - np.log1p(-v.astype(np.float64))
        mid = (v > 0.05) & (v < 0.95)
        truth[mid] = [float(ctx.ln(ctx.divide(decimal.Decimal(t), 1 - decimal.Decimal(t))))
                      for t in v[mid].astype(np.float64).tolist()]
        with np.errstate(all="ignore"):
            np.testing.assert_array_equal(np.isnan(got), np.isnan(np.log(v / (1 - v))))
        assert _ulps(got, truth, dtype).max() <= bound
        np.testing.assert_array_equal(got[-8:-5], [-np.inf, np.inf, 0])   # 0, 1, 1/2
    eps = P.logit(np.float32([0, 1, 0.5, 0.001, np.nan]), eps=0.01)
    lim = np.log(np.float32(0.01) / (1 - np.float32(0.01)))
    np.testing.assert_allclose(eps[[0, 1, 3]], [lim, -lim, lim], rtol=1e-6)
    assert eps[2] == 0 and np.isnan(eps[4])


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_glu_and_geglu_split_the_axis_in_halves(axis):
    x = RNG.uniform(-4, 4, (4, 6, 8)).astype(np.float32)
    a, b = np.split(x.astype(np.float64), 2, axis=axis)
    np.testing.assert_allclose(P.glu(x, axis), a * _sig(b), rtol=2e-6, atol=1e-7)
    erf = np.vectorize(math.erf)
    np.testing.assert_allclose(P.geglu(x, axis=axis), a * 0.5 * b * (1 + erf(b / math.sqrt(2))),
                               rtol=2e-6, atol=1e-6)
    tanh_form = a * 0.5 * b * (1 + np.tanh(math.sqrt(2 / math.pi) * (b + 0.044715 * b ** 3)))
    np.testing.assert_allclose(P.geglu(x, axis=axis, approximate="tanh"), tanh_form, rtol=2e-6,
                               atol=1e-6)
    assert P.glu(x[:, :, :0], axis=-1).shape == (4, 6, 0)


def test_softmin_is_softmax_of_minus_x():
    x = RNG.uniform(-20, 20, (5, 129)).astype(np.float64)
    for axis in (0, 1):
        z = -x
        e = np.exp(z - z.max(axis=axis, keepdims=True))
        np.testing.assert_allclose(P.softmin(x, axis=axis), e / e.sum(axis=axis, keepdims=True),
                                   rtol=1e-13, atol=1e-300)
    assert P.softmin(np.float32([np.inf, 0.0, 1.0]))[0] == 0


def test_prelu_weight_per_channel_or_shared():
    x = RNG.uniform(-3, 3, (2, 3, 5, 4)).astype(np.float32)
    w = np.float32([0.1, -0.5, 2.0])
    want = np.where(x < 0, w[:, None, None] * x, x)
    np.testing.assert_array_equal(P.prelu(x, w), want)
    np.testing.assert_array_equal(P.prelu(x, w[:1]), np.where(x < 0, w[0] * x, x))
    v = x[0, 0, 0]
    np.testing.assert_array_equal(P.prelu(v, w[1:2]), np.where(v < 0, w[1] * v, v))


def test_errors():
    x = np.ones((2, 3), np.float32)
    with pytest.raises(ShapeError, match="glu: axis -1 of x has odd length 3"):
        P.glu(x)
    with pytest.raises(ParamError, match="geglu: parameter 'axis' must be in"):
        P.geglu(x, axis=2)
    with pytest.raises(ShapeError, match="prelu: argument 'weight' has 2 values but x has 3"):
        P.prelu(x, np.ones(2, np.float32))
    with pytest.raises(ShapeError, match="prelu: argument 'weight' must be 1-D"):
        P.prelu(x, np.ones((1, 1), np.float32))
    with pytest.raises(ParamError, match="celu: parameter 'alpha' must not be 0"):
        P.celu(x, alpha=0.0)
    with pytest.raises(ParamError, match="hardtanh: min_val .* must not be greater than max_val"):
        P.hardtanh(x, 1.0, -1.0)
    with pytest.raises(ParamError, match="softshrink: parameter 'lambd' must be >= 0"):
        P.softshrink(x, lambd=-1.0)
    with pytest.raises(ParamError, match="logit: parameter 'eps' must be <= 0.5"):
        P.logit(x, eps=0.7)
    with pytest.raises(DtypeError, match="mish: argument 'x' has dtype int32"):
        P.mish(np.ones(3, np.int32))
    with pytest.raises(DtypeError, match="glu: argument 'x' has dtype int64"):
        P.glu(np.ones((2, 4), np.int64))
    with pytest.raises(ParamError, match="threshold: missing a required argument"):
        P.threshold(x, 0.5)


# -- every new op on pypto.Tensor inputs, through pypto.jit ----------------------------------------

_A = RNG.uniform(-3, 3, (3, 8)).astype(np.float32)
_B = RNG.uniform(0.5, 3, (8,)).astype(np.float32)
_I = RNG.integers(-50, 50, (3, 8)).astype(np.int32)
_S = RNG.integers(0, 8, (3, 8)).astype(np.int32)

TRACED = {
    "unary math": (lambda x: [getattr(P, n)(x) for n in (
        "atan", "tan", "sinh", "cosh", "asinh", "exp2", "cbrt", "sign", "trunc", "deg2rad",
        "rad2deg", "isnan", "isinf", "isfinite", "signbit")] + [
        P.asin(x / 4), P.acos(x / 4), P.atanh(x / 4), P.acosh(x * x + 1), P.log2(x * x + 1),
        P.log10(x * x + 1), P.nan_to_num(x), P.cast(x, "int16")], (_A,)),
    "binary math": (lambda a, b: [getattr(P, n)(a, b) for n in (
        "atan2", "hypot", "copysign", "fmod", "remainder", "floor_divide", "fmax", "fmin",
        "logaddexp", "logaddexp2", "heaviside")] + [P.lerp(a, b, 0.25)], (_A, _B)),
    "integers": (lambda i, s: [P.bitwise_and(i, s), P.bitwise_or(i, s), P.bitwise_xor(i, s),
                               P.left_shift(i, s), P.right_shift(i, s), P.bitwise_not(i),
                               P.floor_divide(i, s + 1)], (_I, _S)),
    "activations": (lambda x: [getattr(P, n)(x, **EW[n][0]) for n in sorted(EW)] + [
        P.glu(x), P.geglu(x, approximate="tanh"),
        P.softmin(x, axis=0), P.logit(P.hardsigmoid(x), eps=1e-3)], (_A,)),
    "prelu": (lambda x, w: [P.prelu(x.reshape(1, 3, 8), w)], (_A, _B[:3])),
}


@pytest.mark.parametrize("group", sorted(TRACED))
def test_new_ops_take_tensors_under_jit(group):
    fn, args = TRACED[group]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = fn(*args)
        got = pypto.jit(lambda *a: tuple(fn(*a)))(*args)
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want)):
        g, w = np.asarray(g), np.asarray(w)
        assert g.shape == w.shape and g.dtype == w.dtype, (group, i)
        if w.dtype.kind == "f":
            np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6, err_msg=f"{group} #{i}")
        else:
            np.testing.assert_array_equal(g, w, err_msg=f"{group} #{i}")
