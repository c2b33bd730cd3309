"""Activations with ``torch.nn.functional``'s names and arguments: hardsigmoid, hardswish, mish, elu,
selu, celu, softsign, hardtanh, relu6, logit, tanhshrink, hardshrink, softshrink, threshold,
log_sigmoid, glu, geglu, softmin and prelu. (``gelu(x, approximate="tanh")``, ``silu``,
``softplus``, ``leaky_relu`` and ``swiglu`` live in ``elementwise``/``binary``.)

Elementwise ones take any rank (the ``elementwise`` frontend) in float32, float64 and float16
(computed in float32, rounded once). NaN in gives NaN out (as in torch). Where torch's formula
gives ``inf * 0`` or ``inf / inf`` at an infinite input, the op returns its limit instead of NaN:
``hardswish(-inf) = mish(-inf) = -0.0`` and ``softsign(+-inf) = +-1``.

- ``glu(x, axis=-1)``: x split in halves a, b along ``axis``: ``a * sigmoid(b)``;
  ``geglu(x, axis=-1, approximate="none")``: ``a * gelu(b)``. The axis must have an even length.
  The kernel reads x as [R, 2, C] (a reshape, no copy) and writes [R, C].
- ``softmin(x, axis=-1) = softmax(-x)`` along ``axis`` (softmax's algorithm and schedule).
- ``prelu(x, weight)``: ``x`` where x >= 0, ``weight * x`` below; ``weight`` is [1] or [C] with
  C = x.shape[1] (torch's channel axis; a 1-D x has one channel).
- ``logit(x, eps=None) = log(x / (1 - x))`` with x clamped to [eps, 1 - eps] when eps is given.
- ``tanhshrink(x) = x - tanh(x)``, kept accurate near 0 (a series there; float32 goes through
  float64); torch computes the difference directly and loses the relative accuracy near 0.

Accuracy: within a few ulp of a float64 reference, except where the function is a difference of
nearly equal terms (``logit`` near 1/2 is computed as ``log1p((2x - 1) / (1 - x))`` to avoid it).
"""

from __future__ import annotations

import inspect
import math
from fractions import Fraction

import halide as hl
import numpy as np

from ..errors import DtypeError, ParamError, ShapeError
from ..runtime import as_array
from ._consts import lit64
from . import binary as _bin
from . import elementwise as _ew
from . import norm as _norm
from ._op import Param, op

FLOATS = _ew.FLOATS
_k, _let, _quiet = _ew._k, _ew._let, _ew._quiet
_un = _ew._unary

_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def _nan_through(x, res):
    return hl.select(_ew._is_nan(x), x, res)


def _hardsigmoid(x):
    return _ew._clamp(x + _k(x, 3.0), 0.0, 6.0) / _k(x, 6.0)


def _hardswish(x):
    return _ew._finite_below(x) * _ew._clamp(x + _k(x, 3.0), 0.0, 6.0) / _k(x, 6.0)


def _mish(x):
    # tanh(softplus(x)) = n / (n + 2) with n = e (e + 2), e = exp(x); above 20 the ratio is 1.
    x = _let("mish_arg", x)
    e = _let("mish_e", _ew._exp(hl.min(x, _k(x, 20.0))))
    n = _let("mish_n", e * (e + _k(x, 2.0)))
    return _nan_through(x, _ew._finite_below(x) * (n / (n + _k(x, 2.0))))


def _elu(x, alpha=1.0):
    x = _let("elu_arg", x)
    # x >= 0 keeps both zeros as they are (torch): alpha * expm1(+0.0) was -0.0 for a negative alpha
    return hl.select(x >= _k(x, 0.0), x, _k(x, alpha) * _ew._expm1_checked(x))


def _selu(x):
    return _k(x, _SELU_SCALE) * _elu(x, _SELU_ALPHA)


def _celu(x, alpha=1.0):
    if alpha == 0:
        raise ParamError("celu: parameter 'alpha' must not be 0 (it divides x)")
    x = _let("celu_arg", x)
    zero = _k(x, 0.0)
    neg = _let("celu_neg", _k(x, alpha) * _ew._expm1(x * _k(x, 1.0 / alpha)))
    # neg <= 0 below 0 (either sign of alpha); where it is 0 (x = -0.0, or x / alpha underflows)
    # a zero of x's sign: max(0, x) + min(0, neg) added two zeros to +0.0 (torch keeps -0.0)
    res = hl.select(x > zero, x, hl.select(neg < zero, neg, _ew._copysign(zero, x)))
    return _nan_through(x, res)


def _softsign(x):
    x = _let("softsign_arg", x)
    res = x / (_k(x, 1.0) + hl.abs(x))
    # Beyond 2**60 the quotient rounds to +-1 anyway; this also gives +-1 at +-inf.
    return hl.select(hl.abs(x) > _k(x, 2.0 ** 60), _ew._copysign(_k(x, 1.0), x), res)


def _hardtanh(x, min_val=-1.0, max_val=1.0):
    if min_val > max_val:
        raise ParamError(f"hardtanh: min_val ({min_val}) must not be greater than max_val "
                         f"({max_val})")
    return _ew._clamp(x, min_val, max_val)


def _relu6(x):
    return _ew._clamp(x, 0.0, 6.0)


def _logit(x, eps=None):
    if eps is not None:
        x = _ew._clamp(x, eps, 1.0 - eps)
    x = _let("logit_arg", x)
    one = _k(x, 1.0)
    low = x < _k(x, 0.25)
    # log(x / (1 - x)) below 1/4, log1p((2x - 1) / (1 - x)) above (2x - 1 is exact there: no
    # cancellation), both through one log: log1p(r) is log(u) r / (u - 1) with u = 1 + r (the
    # factor cancels the rounding of 1 + r, as _ew._log1p does). Two logs per element, one per
    # branch, cost twice the time.
    r = _let("logit_r", hl.select(low, x, x + x - one) / (one - x))
    u = _let("logit_u", hl.select(low, r, one + r))
    d = u - one
    res = _ew._log(u) * hl.select(low, one, r / d)
    res = hl.select(low | (d != _k(x, 0.0)), res, r)       # u == 1 (above 1/4): log1p(r) = r
    res = hl.select(_ew._is_inf(r) & (r > _k(x, 0.0)), r, res)   # x == 1
    # Below 0 the log's argument is negative (NaN), but at -inf the quotient -inf / inf came
    # out finite under Halide's float assumptions (-88.3 in float32): outside [0, 1] is NaN.
    res = hl.select(x < _k(x, 0.0), _k(x, math.nan), res)
    return _nan_through(x, res)


def _tanh_series(n_terms: int) -> list[float]:
    """Coefficients c with x - tanh(x) = x**3 * sum(c[i] * x**(2i)), from Bernoulli numbers."""
    bern = [Fraction(1)]
    for m in range(1, 2 * n_terms + 4):
        bern.append(-sum(math.comb(m + 1, j) * bern[j] for j in range(m)) / (m + 1))
    out = []
    for n in range(2, n_terms + 2):
        a = Fraction(2 ** (2 * n) * (2 ** (2 * n) - 1)) * bern[2 * n] / math.factorial(2 * n)
        out.append(float(-a))
    return out


# Below |x| = cut the series (ratio about 0.405 x**2 per term) is used; above it the difference.
_TSHRINK = {32: (0.01, _tanh_series(4)), 64: (1.0, _tanh_series(42))}


def _tanhshrink(x):
    narrow = not _ew._is64(x)
    w = hl.cast(hl.Float(64), x) if narrow else x     # float32: the difference in float64
    w = _let("tshrink_arg", w)
    cut, coeffs = _TSHRINK[32 if narrow else 64]
    z = _let("tshrink_z", w * w)
    small = w * z * _ew._horner(z, coeffs)
    res = hl.select(hl.abs(w) < lit64(cut), small, w - _ew._tanh(w))
    if narrow:   # a named float32 value: Halide's JIT cannot fold float64 -> float16 directly
        res = _let("tshrink_res", hl.cast(x.type(), res))
    return hl.select(_ew._is_inf(x), x, res)


def _hardshrink(x, lambd=0.5):
    return hl.select(hl.abs(x) > _k(x, lambd), x, hl.select(_ew._is_nan(x), x, _k(x, 0.0)))


def _softshrink(x, lambd=0.5):
    lam = _k(x, lambd)
    res = hl.select(x > lam, x - lam, hl.select(x < -lam, x + lam, _k(x, 0.0)))
    return _nan_through(x, res)


def _threshold(x, threshold, value):
    # torch's test is ``x <= threshold``: a NaN threshold replaces nothing, a NaN x passes through.
    if math.isnan(threshold):
        return x
    if threshold == -math.inf:
        # only -inf is replaced. Below the lowest finite value rather than "> -inf" or a bits
        # test: with x a float16 widened to float32, Halide 21 kept -inf for both of those.
        lowest = -np.finfo(np.float64 if _ew._is64(x) else np.float32).max
        return hl.select(x < _k(x, float(lowest)), _k(x, value), x)
    return hl.select(_ew._is_nan(x) | (x > _k(x, threshold)), x, _k(x, value))


def _log_sigmoid(x):
    return -_ew._softplus(-x)


# -- references (NumPy, written from the formulas in torch's documentation) -----------------------

def _f(x):
    return np.asarray(x)


@_quiet
def _ref_hardswish(x):
    x = _f(x)
    out = x * np.clip(x + 3, 0, 6).astype(x.dtype) / np.asarray(6, x.dtype)
    return np.where(np.isneginf(x), np.asarray(-0.0, x.dtype), out).astype(x.dtype)


@_quiet
def _ref_mish(x):
    x = _f(x)
    x64 = x.astype(np.float64)
    out = x64 * np.tanh(np.logaddexp(0.0, x64))
    return np.where(np.isneginf(x64), -0.0, out).astype(x.dtype)


@_quiet
def _ref_elu(x, alpha=1.0):
    x = _f(x)
    return np.where(x >= 0, x, alpha * np.expm1(x)).astype(x.dtype)


@_quiet
def _ref_celu(x, alpha=1.0):
    x = _f(x)
    neg = alpha * np.expm1(x / alpha)
    out = np.where(x > 0, x, np.where(neg < 0, neg, np.copysign(0.0, x)))
    return out.astype(x.dtype)


@_quiet
def _ref_softsign(x):
    x = _f(x)
    return np.where(np.isinf(x), np.sign(x), x / (1 + np.abs(x))).astype(x.dtype)


@_quiet
def _ref_logit(x, eps=None):
    x = _f(x)
    if eps is not None:
        x = np.clip(x, eps, 1 - eps).astype(x.dtype)
    x64 = x.astype(np.float64)
    return (np.log(x64) - np.log1p(-x64)).astype(x.dtype)


@_quiet
def _ref_tanhshrink(x):
    x = _f(x)
    x64 = x.astype(np.float64)
    # float64 difference; below 1e-3 the series' first terms (exact to double precision there).
    series = x64 ** 3 / 3 - 2 * x64 ** 5 / 15 + 17 * x64 ** 7 / 315
    return np.where(np.abs(x64) < 1e-3, series, x64 - np.tanh(x64)).astype(x.dtype)


@_quiet
def _ref_log_sigmoid(x):
    x = _f(x)
    return (-np.logaddexp(0.0, -x.astype(np.float64))).astype(x.dtype)


# -- elementwise ops -------------------------------------------------------------------------------

hardsigmoid = _un("hardsigmoid", _hardsigmoid,
                  lambda x: (np.clip(_f(x) + 3, 0, 6) / 6).astype(_f(x).dtype),
                  "relu6(x + 3) / 6 (torch's hardsigmoid).")
hardswish = _un("hardswish", _hardswish, _ref_hardswish, "x * relu6(x + 3) / 6.")
mish = _un("mish", _mish, _ref_mish, "x * tanh(softplus(x)).")
_ALPHA = Param("alpha", float, 1.0, doc="scale of the negative part")
elu = _un("elu", _elu, _ref_elu, "x for x > 0, alpha * (e**x - 1) below.", params=[_ALPHA])
selu = _un("selu", _selu,
           lambda x: (_SELU_SCALE * _ref_elu(_f(x).astype(np.float64), _SELU_ALPHA)).astype(
               _f(x).dtype), "scale * elu(x, alpha) with torch's fixed SELU constants.")
celu = _un("celu", _celu, _ref_celu, "max(0, x) + min(0, alpha * (e**(x / alpha) - 1)).",
           params=[_ALPHA])
softsign = _un("softsign", _softsign, _ref_softsign, "x / (1 + |x|).")
hardtanh = _un("hardtanh", _hardtanh,
               lambda x, min_val=-1.0, max_val=1.0: np.clip(_f(x), min_val, max_val).astype(
                   _f(x).dtype), "x clamped to [min_val, max_val] (NaN stays NaN).",
               params=[Param("min_val", float, -1.0, doc="lower bound"),
                       Param("max_val", float, 1.0, doc="upper bound")])
relu6 = _un("relu6", _relu6, lambda x: np.clip(_f(x), 0, 6).astype(_f(x).dtype),
            "min(max(x, 0), 6).")
logit = _un("logit", _logit, _ref_logit,
            "log(x / (1 - x)); x clamped to [eps, 1 - eps] first when eps is given.",
            params=[Param("eps", float, None, low=0.0, high=0.5, doc="clamp margin (None: none)")],
            make_inputs=lambda dims, dtypes, params, rng: [
                rng.uniform(0.01, 0.99, size=(dims["N"],)).astype(dtypes[0])])
tanhshrink = _un("tanhshrink", _tanhshrink, _ref_tanhshrink, "x - tanh(x).")
_LAMBD = Param("lambd", float, 0.5, low=0.0, doc="half-width of the zeroed band")
hardshrink = _un("hardshrink", _hardshrink,
                 lambda x, lambd=0.5: np.where(np.isnan(_f(x)) | (np.abs(_f(x)) > lambd), _f(x),
                                               0).astype(_f(x).dtype),
                 "x where |x| > lambd, else 0.", params=[_LAMBD])
softshrink = _un("softshrink", _softshrink,
                 lambda x, lambd=0.5: (np.sign(_f(x)) * np.maximum(np.abs(_f(x)) - lambd, 0)).astype(
                     _f(x).dtype), "x - lambd above lambd, x + lambd below -lambd, else 0.",
                 params=[_LAMBD])
threshold = _un("threshold", _threshold,
                lambda x, threshold, value: np.where(_f(x) <= threshold, value,
                                                     _f(x)).astype(_f(x).dtype),
                "value where x <= threshold, else x (torch's test: NaN x stays NaN, a NaN "
                "threshold replaces nothing, +-inf allowed).",
                params=[Param("threshold", float, doc="values at or below it are replaced "
                              "(inf and NaN allowed)", finite=False),
                        Param("value", float, doc="the replacement (inf and NaN allowed)",
                              finite=False)])
log_sigmoid = _un("log_sigmoid", _log_sigmoid, _ref_log_sigmoid,
                  "log(sigmoid(x)) = -softplus(-x), accurate for every x.")


# -- glu and geglu: halves along an axis -----------------------------------------------------------


def _halves_validate(name):
    def validate(dims, params):
        if dims["S"] != 2:
            raise ShapeError(f"{name}: the kernel's middle dim S must be 2 (the two halves), got "
                             f"{dims['S']}")
    return validate


def _gated(name, gate, reference, doc, params=()):
    """out[r, c] = x[r, 0, c] * gate(x[r, 1, c]) over the kernel form [R, 2, C]."""
    params = tuple(params)

    def algorithm(x, **kw):
        c, r = hl.Var("c"), hl.Var("r")
        out = hl.Func("out")
        a, b = x[c, 0, r], x[c, 1, r]
        t = a.type()
        with _ew.sharing([c, r]):
            if t.bits() == 16:
                a32, b32 = hl.cast(hl.Float(32), a), hl.cast(hl.Float(32), b)
                out[c, r] = hl.cast(t, hl.strict_float(a32 * gate(b32, **kw)))
            else:
                out[c, r] = hl.strict_float(a * gate(b, **kw))
        return out

    algorithm.__signature__ = inspect.Signature(
        [inspect.Parameter("x", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
        + [inspect.Parameter(p.name, inspect.Parameter.KEYWORD_ONLY) for p in params])
    algorithm.__name__ = name

    known = {p.name for p in params}

    def frontend(x, axis=-1, **kw):
        for k in kw:
            if k not in known:
                # Python's own error for the signature below (no **kw): the public call turns it
                # into an ArgumentError naming the op and its call, before any shape is checked.
                raise TypeError(f"{name}() got an unexpected keyword argument {k!r}")
        a = as_array(x, name, "x")
        if a.dtype.name not in FLOATS:
            raise DtypeError(f"{name}: argument 'x' has dtype {a.dtype.name}; expected "
                             f"{' or '.join(sorted(FLOATS))}")
        if a.ndim == 0:
            raise ShapeError(f"{name}: argument 'x' must have at least 1 dimension, got a 0-D array")
        ax = _norm._check_axis(name, axis, a.ndim)
        n = a.shape[ax]
        if n % 2:
            raise ShapeError(f"{name}: axis {axis} of x has odd length {n}; it is split into two "
                             "halves, so it must be even")
        out_shape = a.shape[:ax] + (n // 2,) + a.shape[ax + 1:]
        if 0 in out_shape:
            the_op.resolve_params(kw)
            return np.empty(out_shape, a.dtype)
        rows = math.prod(a.shape[:ax])
        cols = (n // 2) * math.prod(a.shape[ax + 1:])
        return the_op.kernel(a.reshape(rows, 2, cols), **kw).reshape(out_shape)

    fparams = [inspect.Parameter("x", inspect.Parameter.POSITIONAL_OR_KEYWORD),
               inspect.Parameter("axis", inspect.Parameter.POSITIONAL_OR_KEYWORD, default=-1)]
    fparams += [inspect.Parameter(p.name, inspect.Parameter.KEYWORD_ONLY, default=p.default)
                for p in params]
    frontend.__signature__ = inspect.Signature(fparams)
    frontend.__name__ = name

    def kernel_reference(x, **kw):
        return reference(x.reshape(x.shape[0], -1), axis=-1, **kw)

    the_op = op(category="nn", inputs={"x": "R S C"}, output="R C", dtypes=list(FLOATS),
                params=params, reference=reference, kernel_reference=kernel_reference,
                frontend=frontend, validate=_halves_validate(name),
                make_inputs=lambda dims, dtypes, ps, rng: [rng.uniform(
                    -3, 3, size=(dims["R"], 2, dims["C"])).astype(dtypes[0])],
                example={"R": 64, "S": 2, "C": 100}, name=name, doc=doc)(algorithm)
    return the_op


@_quiet
def _ref_glu(x, axis=-1):
    x = _f(x)
    a, b = np.split(x.astype(np.float64), 2, axis=axis)
    return (a / (1 + np.exp(-b))).astype(x.dtype)


@_quiet
def _ref_geglu(x, axis=-1, approximate="none"):
    x = _f(x)
    a, b = np.split(x.astype(np.float64), 2, axis=axis)
    if approximate == "tanh":
        g = 0.5 * b * (1 + np.tanh(math.sqrt(2 / math.pi) * (b + 0.044715 * b ** 3)))
    else:
        g = 0.5 * b * (1 + np.vectorize(math.erf, otypes=[np.float64])(b / math.sqrt(2)))
    return (a * g).astype(x.dtype)


glu = _gated("glu", _ew._sigmoid, _ref_glu,
             "a * sigmoid(b) with a, b the two halves of x along axis (torch's glu).")
geglu = _gated("geglu", _ew._gelu, _ref_geglu,
               "a * gelu(b) with a, b the two halves of x along axis (GEGLU).",
               params=[Param("approximate", str, "none", choices=("none", "tanh"),
                             doc="gelu's form: 'none' (erf) or 'tanh'")])


# -- softmin ---------------------------------------------------------------------------------------


class _Negated:
    """-x as an input of softmax's algorithm (which only indexes its input and asks its type)."""

    def __init__(self, x):
        self._x = x

    def type(self):
        return self._x.type()

    def __getitem__(self, idx):
        return -self._x[idx]


def _ref_softmin(x, axis=-1):
    x = _f(x)
    with np.errstate(all="ignore"):
        z = -x.astype(np.float64)
        e = np.exp(z - np.max(z, axis=axis, keepdims=True))
        return (e / e.sum(axis=axis, keepdims=True)).astype(x.dtype)


def _softmin_frontend(x, axis=-1):
    """``softmax(-x)`` along ``axis``."""
    return _norm._along_axis(softmin, x, axis)


@op(category="nn", inputs={"x": "R C"}, output="R C", dtypes=list(FLOATS), reference=_ref_softmin,
    frontend=_softmin_frontend, example={"R": 64, "C": 100})
def softmin(x, *, dims):
    """Softmin of each row of [R, C]: softmax of -x."""
    return _norm.softmax.algorithm(_Negated(x), dims=dims)


# -- prelu -----------------------------------------------------------------------------------------


def _prelu(x, weight):
    return hl.select(x < _k(x, 0.0), weight * x, x)


@_quiet
def _ref_prelu(x, weight):
    x, w = _f(x), _f(weight)
    if x.ndim >= 2 and w.size > 1:
        w = w.reshape((w.size,) + (1,) * (x.ndim - 2))
    return np.where(x < 0, w * x, x).astype(x.dtype)


def _prelu_frontend(x, weight):
    """``x`` where x >= 0, ``weight * x`` below; weight [1] or [C] over axis 1 of x."""
    xa, w = as_array(x, "prelu", "x"), as_array(weight, "prelu", "weight")
    if w.ndim != 1:
        raise ShapeError(f"prelu: argument 'weight' must be 1-D ([1] or [C]), got shape {w.shape}")
    channels = xa.shape[1] if xa.ndim >= 2 else 1
    if w.shape[0] not in (1, channels):
        raise ShapeError(f"prelu: argument 'weight' has {w.shape[0]} values but x has {channels} "
                         f"channel(s) (axis 1 of shape {xa.shape}); give 1 or {channels}")
    if w.shape[0] > 1:
        w = w.reshape((channels,) + (1,) * (xa.ndim - 2))
    return _prelu_broadcast(xa, w)


def _prelu_algorithm(x, weight):
    c, r = hl.Var("c"), hl.Var("r")
    out = hl.Func("out")
    out[c, r] = _bin._apply(_prelu, [x[c, r], weight[c, r]], [c, r])
    return out


_prelu_broadcast = _bin._frontend("prelu", ("x", "weight"))
prelu = op(category="elementwise", inputs={"x": "R C", "weight": "R C"}, output="R C",
           dtypes=list(FLOATS), reference=_ref_prelu, frontend=_prelu_frontend,
           kernel_reference=lambda x, weight: np.where(x < 0, weight * x, x),
           example=dict(_bin._EXAMPLE), name="prelu",
           doc="x where x >= 0, weight * x below; weight [1] or [C] (channels on axis 1).")(
               _prelu_algorithm)
_bin._OPS["prelu"] = prelu
