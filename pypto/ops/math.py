"""Unary math: inverse and hyperbolic trig, tan, exp2/log2/log10, cbrt, sign, trunc, NaN tests, casts.

Every op takes one array of any rank and returns an array of its shape, like the ops in
``elementwise`` (same frontend: flattened to the 1-D kernel ``N``; views and byte orders handled
there). Names follow NumPy (``arctan`` is ``atan`` as in torch and the C library).

- dtypes: float32, float64 and float16 (computed in float32, rounded once). ``sign`` also takes
  int8/int16/int32; ``bitwise_not`` takes the integer dtypes and bool.
- ``isnan``/``isinf``/``isfinite``/``signbit`` return bool arrays; ``nan_to_num(x, nan=0.0,
  posinf=None, neginf=None)`` is ``np.nan_to_num`` (None: the dtype's largest / most negative
  finite value).
- ``cast(x, dtype)``: ``x.astype(dtype)`` for bool, int8-64, uint8-32 and float16-64. Integers
  wrap like NumPy, floats round to nearest (float64 -> float16 rounds once, like NumPy). Float to
  integer truncates toward zero; where NumPy's result is undefined (NaN, values beyond the
  integer range), PyPTO defines it: NaN gives 0 and out-of-range values saturate at the
  integer's limits.
- NaN in gives NaN out; outside the real domain (``asin(2)``, ``acosh(0.5)``, ``log2(-1)``) the
  result is NaN, as in NumPy; ``atanh(+-1)`` and ``log2(0)`` are +-inf.

Accuracy: within a few units in the last place (the tests bound each op in ulps against a float64
or exact reference). Everything is written as vectorizable polynomials over the exponential and
logarithm of ``elementwise`` (Halide's ``atan``, ``sinh``... lower to scalar C library calls):
``atan`` reduces its argument to |t| <= tan(pi/8) and sums the Taylor series; ``asin``/``acos``/
``atan2`` go through it; ``cbrt`` is Newton's iteration in float64; float64 ``tan`` hands
|x| >= 1e6 to the C library, as ``sin``/``cos`` do.
"""

from __future__ import annotations

import decimal
import inspect
import math

import halide as hl
import numpy as np

from ..dtypes import halide_type
from ._consts import lit64
from . import elementwise as _ew
from ._op import Param, op

FLOATS = _ew.FLOATS
_k, _let, _is64 = _ew._k, _ew._let, _ew._is64
_quiet = _ew._quiet
INT_TYPES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32")
CAST_TYPES = ("bool",) + INT_TYPES + ("float16", "float32", "float64")


def _precise(exact: decimal.Decimal) -> tuple[float, float]:
    """A constant as (double, what the double misses)."""
    hi = float(exact)
    return hi, float(exact - decimal.Decimal(hi))


_PI = (math.pi, 1.2246467991473532e-16)           # pi = hi + lo to about 107 bits
with decimal.localcontext() as _ctx:              # 40 digits: lo is good to the last bit
    _ctx.prec = 40
    _TWO = decimal.Decimal(2)
    _LN2 = _precise(_TWO.ln())
    _LOG10_2 = _precise(_TWO.log10())
    _LOG10_E = _precise(decimal.Decimal(1).exp().log10())
    _INV_LN2 = _precise(1 / _TWO.ln())


def _pair(like, v: float, v_lo: float):
    """The constant v + v_lo as (hi, lo) in like's type: hi + lo is good to about twice the bits."""
    if _is64(like):
        return lit64(v), lit64(v_lo)
    hi = float(np.float32(v))
    return hl.f32(hi), hl.f32((v - hi) + v_lo)


def _split(v: float, v_lo: float, bits: int) -> tuple[float, float]:
    """v = hi + lo with hi of ``bits`` significant bits (so small integers times hi are exact)."""
    e = math.frexp(v)[1]
    hi = round(v * 2.0 ** (bits - e)) / 2.0 ** (bits - e)
    return hi, (v - hi) + v_lo


# -- atan and friends ------------------------------------------------------------------------------

_TAN_PI8 = math.tan(math.pi / 8)
# Taylor terms of atan after t: enough that t**(2n+3)/(2n+3) < half an ulp at |t| = tan(pi/8).
_ATAN = {32: [(-1.0) ** k / (2 * k + 1) for k in range(1, 9)],
         64: [(-1.0) ** k / (2 * k + 1) for k in range(1, 21)]}


def _atan01(t):
    """atan(t) for t in [0, 1]: reduced to |v| <= tan(pi/8) by atan(t) = pi/4 + atan((t-1)/(t+1))."""
    big = t > _k(t, _TAN_PI8)
    v = _let("atan_v", hl.select(big, (t - _k(t, 1.0)) / (t + _k(t, 1.0)), t))
    z = _let("atan_z", v * v)
    p = v + v * z * _ew._poly("atan_poly", z, _ATAN[t.type().bits()])
    hi, lo = _pair(t, _PI[0] / 4, _PI[1] / 4)
    return hl.select(big, hi + (p + lo), p)


def _atan_pos(t):
    """atan(t) for t >= 0 (+inf included); atan(t) = pi/2 - atan(1/t) above 1."""
    t = _let("atan_t", t)
    inv = t > _k(t, 1.0)
    r = _let("atan_r", _atan01(hl.select(inv, _k(t, 1.0) / t, t)))
    hi, lo = _pair(t, _PI[0] / 2, _PI[1] / 2)
    return hl.select(inv, hi - (r - lo), r)


def _atan(x):
    x = _let("atan_arg", x)
    return hl.select(_ew._is_nan(x), x, _ew._flipsign(_atan_pos(hl.abs(x)), x))


def _asin(x):
    x = _let("asin_arg", x)
    a = _let("asin_abs", hl.abs(x))
    one = _k(x, 1.0)
    t = a / hl.sqrt((one - a) * (one + a))        # (1 - a) is exact where it matters (a > 1/2)
    res = _ew._flipsign(_atan_pos(t), x)
    return hl.select(_ew._is_nan(x) | (a > one), _ew._nan(x), res)


def _acos(x):
    x = _let("acos_arg", x)
    one = _k(x, 1.0)
    t = hl.sqrt((one - x) / (one + x))            # acos(x) = 2 atan(sqrt((1 - x) / (1 + x)))
    res = _k(x, 2.0) * _atan_pos(t)
    return hl.select(_ew._is_nan(x) | (hl.abs(x) > one), _ew._nan(x), res)


# -- hyperbolic ------------------------------------------------------------------------------------

# Below the cut: from expm1 (sinh) or exp (cosh); above it e**-|x| is below half an ulp and the
# result is exp(|x|/2)**2 / 2, which stays finite up to the type's overflow threshold.
_HYP_CUT = {32: 9.0, 64: 20.0}


def _hyp_large(a):
    w = _let("hyp_w", _ew._exp(a * _k(a, 0.5)))
    return (w * _k(a, 0.5)) * w


def _sinh(x):
    x = _let("sinh_arg", x)
    a = _let("sinh_abs", _ew._fabs(x))
    cut = _k(x, _HYP_CUT[x.type().bits()])
    e = _let("sinh_em1", _ew._expm1(hl.min(a, cut)))
    small = (e + e / (e + _k(x, 1.0))) * _k(x, 0.5)   # (e^a - e^-a) / 2 without cancellation
    res = hl.select(a < cut, small, _hyp_large(a))
    return hl.select(_ew._is_nan(x), x, _ew._flipsign(res, x))


def _cosh(x):
    x = _let("cosh_arg", x)
    a = _let("cosh_abs", hl.abs(x))
    cut = _k(x, _HYP_CUT[x.type().bits()])
    e = _let("cosh_e", _ew._exp(hl.min(a, cut)))
    small = e * _k(x, 0.5) + _k(x, 0.5) / e
    res = hl.select(a < cut, small, _hyp_large(a))
    return hl.select(_ew._is_nan(x), x, res)


def _big(x):
    """Above this, sqrt(x*x + 1) is x to within half an ulp (asinh, acosh use log(2x))."""
    return _k(x, 2.0 ** (12 if x.type().bits() == 32 else 28))


def _log_twice(a):
    """log(2a) for a > 0 without overflow; +inf stays +inf (tested by comparison: the bit test
    can miss an infinity that came from float16)."""
    hi, lo = _pair(a, *_LN2)
    top = float(np.finfo(np.float64 if _is64(a) else np.float32).max)
    return hl.select(a > _k(a, top), a, _ew._log(a) + (hi + lo))


def _asinh(x):
    x = _let("asinh_arg", x)
    a = _let("asinh_abs", hl.abs(x))
    s = a * a
    small = _ew._log1p(a + s / (_k(x, 1.0) + hl.sqrt(s + _k(x, 1.0))))
    res = hl.select(a > _big(x), _log_twice(a), small)
    return hl.select(_ew._is_nan(x), x, _ew._flipsign(res, x))


def _acosh(x):
    x = _let("acosh_arg", x)
    t = _let("acosh_t", x - _k(x, 1.0))
    small = _ew._log1p(t + hl.sqrt(t * (t + _k(x, 2.0))))
    res = hl.select(x > _big(x), _log_twice(x), small)
    return hl.select(_ew._is_nan(x) | (x < _k(x, 1.0)), _ew._nan(x), res)


def _atanh(x):
    x = _let("atanh_arg", x)
    a = _let("atanh_abs", hl.abs(x))
    one, two = _k(x, 1.0), _k(x, 2.0)
    d = _let("atanh_d", one - a)
    # 0.5 log1p(2a / (1 - a)), with the small-|x| form of FreeBSD's msun for accuracy near 0.
    u = hl.select(a < _k(x, 0.5), two * a + two * a * a / d, two * a / d)
    res = _k(x, 0.5) * _ew._log1p(u)
    return hl.select(_ew._is_nan(x), x, _ew._flipsign(res, x))


def _tan_exact(x):
    """sin x / cos x, each with the exact reduction: the float32 recomputation of tiles
    holding |x| >= SINCOS32_FAST (see ``_ew._huge_tiles_fixup``)."""
    return _ew._sin(x) / _ew._cos(x)


# -- exp2, log2, log10 -----------------------------------------------------------------------------


#: Taylor degree of 2**r = e**(r ln 2) on |r| <= 1/2 with truncation below 1/4 ulp.
_EXP2_DEG = {32: 7, 64: 13}


def _exp2_poly(r):
    """2**r for |r| <= 1/2: the Taylor series of e**(r ln 2) in r (no rounded r * ln 2)."""
    ln2 = math.log(2.0)
    deg = _EXP2_DEG[r.type().bits()]
    return _ew._poly("exp2_poly", r, [ln2 ** i / math.factorial(i) for i in range(deg + 1)])


def _exp2(x):
    x = _let("exp2_arg", x)
    b = x.type().bits()
    xc = _ew._clamp(x, -152.0 if b == 32 else -1077.0, 129.0 if b == 32 else 1025.0)
    k = _let("exp2_k", hl.floor(xc + _k(x, 0.5)))
    p = _exp2_poly(xc - k)                              # xc - k is exact, in [-1/2, 1/2]
    ki = hl.cast(hl.Int(32), k)
    k1 = ki >> 1                                       # two factors keep each power normal
    res = p * _ew._pow2(k1, x) * _ew._pow2(ki - k1, x)
    return hl.select(_ew._is_nan(x), x, res)


_LOG_DEG = {32: 6, 64: 12}


def _log_parts(x):
    """(e, lg) with x = 2**e * m and lg = log(m), m in [sqrt(1/2), sqrt(2)), for x > 0 finite."""
    b = x.type().bits()
    mant_bits, bias, shift = (23, 127, 25) if b == 32 else (52, 1023, 54)
    tiny = x < _k(x, 2.0 ** (1 - bias))                 # subnormal: scale into the normal range
    xs = hl.select(tiny, x * _k(x, 2.0 ** shift), x)
    ibits = hl.reinterpret(_ew._bits_type(x), xs)
    one = hl.cast(_ew._bits_type(x), 1)
    e = hl.cast(hl.Int(32), ibits >> mant_bits) - bias - hl.select(tiny, shift, 0)
    mant = ibits & ((one << mant_bits) - 1)
    m = _let("logp_m", _ew._from_bits(hl.cast(_ew._bits_type(x, signed=False),
                                              mant | (hl.cast(_ew._bits_type(x), bias) << mant_bits)),
                                      x))
    high = m > _k(x, math.sqrt(2.0))
    f = hl.select(high, m * _k(x, 0.5), m) - _k(x, 1.0)
    s = _let("logp_s", f / (f + _k(x, 2.0)))             # log(1 + f) = 2 atanh(s)
    lg = s * _ew._poly("logp_poly", s * s, [2.0 / (2 * i + 1) for i in range(_LOG_DEG[b] + 1)])
    return hl.cast(x.type(), e + hl.select(high, 1, 0)), lg


def _log_special(x, res):
    res = hl.select(x == _k(x, 0.0), -_ew._inf(x), res)
    res = hl.select(_ew._is_inf(x), x, res)
    res = hl.select(x < _k(x, 0.0), _ew._nan(x), res)
    return hl.select(_ew._is_nan(x), x, res)


def _log2(x):
    x = _let("log2_arg", x)
    e, lg = _log_parts(x)
    hi, lo = _pair(x, *_INV_LN2)
    return _log_special(x, e + (lg * hi + lg * lo))     # exact at powers of two


def _log10(x):
    x = _let("log10_arg", x)
    e, lg = _log_parts(x)
    hi, lo = _split(*_LOG10_2, 16 if x.type().bits() == 32 else 40)   # e * hi is exact
    ehi, elo = _pair(x, *_LOG10_E)
    return _log_special(x, e * _k(x, hi) + (e * _k(x, lo) + (lg * ehi + lg * elo)))


# -- cbrt, sign, trunc -----------------------------------------------------------------------------


def _cbrt(x):
    """Newton's iteration on |x| from a bit-level first guess (within ~6%): in float64 for
    float64, else :func:`_cbrt32`."""
    x = _let("cbrt_arg", x)
    if not _is64(x):
        return _cbrt32(x)
    a = _let("cbrt_abs", hl.abs(x))
    tiny = a < lit64(2.0 ** -1022)
    s = hl.select(tiny, a * lit64(2.0 ** 54), a)
    high = hl.cast(hl.UInt(32), hl.reinterpret(hl.UInt(64), s) >> 32)
    guess = hl.cast(hl.UInt(64), high / 3 + (682 << 20)) << 32   # exponent / 3, bias kept
    y = _let("cbrt_y0", hl.reinterpret(hl.Float(64), guess))
    for i in range(5):
        y = _let(f"cbrt_y{i + 1}", (y + y + s / (y * y)) * lit64(1.0 / 3.0))
    y = hl.select(tiny, y * lit64(2.0 ** -18), y)
    return hl.select((x == _k(x, 0.0)) | _ew._is_inf(x) | _ew._is_nan(x), x, _ew._flipsign(y, x))


#: The float32 first guess of |x|^(-1/3) from its bits: bits(1.0) + bits(1.0) / 3 - bits(x) / 3,
#: exact at 1 and within ~6% elsewhere.
_RCBRT32_BIAS = 0x3F800000 + 0x3F800000 // 3


def _cbrt32(x):
    """cbrt of float32 (and float16, through float32) without a division.

    z ~ s^(-1/3) (s = |x|) from a bit-level guess, then three Newton steps
    ``z (4 - s z^3) / 3`` in float32 (6% -> 7e-3 -> 1e-4 -> float32 rounding); y = s z^2; then
    one Newton step for y^3 = s in float64 whose factor 1 / (3 y^2) is z^2 / 3 (its float32
    error is lost in the ~1e-7 correction): within ~1e-12 relative before the one rounding to
    float32. Products are taken as ``((s z) z) z`` so that nothing leaves float32's range
    (s z is at most 2^86). Subnormal |x| is scaled by 2^24 first (the root by 2^-8 after).

    The earlier form ran three Newton steps on the root in float64, a float64 division each:
    4M floats, two threads, ``out=``, blocks of 5 after a pause, old and new trees in turn:
    5.5-5.7 ms against 3.5-4.9 for this one. (A version with the first steps in float32, still
    dividing, measured the same as this one, 3.6 ms: on this machine the loop's instruction
    count, not the divider, sets the time.) In `pypto bench --all-ops cbrt`: 3.22 ms against
    NumPy's 3.98."""
    w = hl.cast(hl.Float(32), x)
    a = _let("cbrt_abs", hl.abs(w))
    tiny = a < hl.f32(2.0 ** -126)
    s = _let("cbrt_s", hl.select(tiny, a * hl.f32(2.0 ** 24), a))
    # bits / 3 through float32: its rounding moves the guess by less than 2^-16
    third = hl.cast(hl.UInt(32), hl.cast(hl.Float(32), hl.reinterpret(hl.UInt(32), s))
                    * hl.f32(1.0 / 3.0))
    z = _let("cbrt_z0", hl.reinterpret(hl.Float(32), hl.cast(hl.UInt(32), _RCBRT32_BIAS) - third))
    for i in range(3):
        z = _let(f"cbrt_z{i + 1}", z * (hl.f32(4.0) - s * z * z * z) * hl.f32(1.0 / 3.0))
    f64 = hl.Float(64)
    y = hl.cast(f64, s * z * z)
    y = y - (y * y * y - hl.cast(f64, s)) * hl.cast(f64, z * z * hl.f32(1.0 / 3.0))
    y = hl.cast(hl.Float(32), hl.select(tiny, y * lit64(2.0 ** -8), y))
    res = _let("cbrt_res", hl.cast(x.type(), _ew._flipsign(y, w)))
    return hl.select((x == _k(x, 0.0)) | _ew._is_inf(x) | _ew._is_nan(x), x, res)


def _sign(x):
    if x.type().is_float():
        res = hl.select(x > _k(x, 0.0), _k(x, 1.0), hl.select(x < _k(x, 0.0), _k(x, -1.0), x))
        return hl.select(x == _k(x, 0.0), _k(x, 0.0), res)     # np.sign(-0.0) is 0.0
    t = x.type()
    return hl.select(x > 0, hl.cast(t, 1), hl.select(x < 0, hl.cast(t, -1), hl.cast(t, 0)))


def _scale(c: float):
    return lambda x: x * _k(x, c)


# -- ops on the native type (no float32 detour): NaN tests, nan_to_num, cast, bitwise_not --------

_MANT = {16: 10, 32: 23, 64: 52}


def _fbits(x):
    """(magnitude bits, the +inf pattern, the sign bit) of a float of any width."""
    n = x.type().bits()
    u = hl.UInt(n)
    bits = hl.reinterpret(u, x)
    sign = hl.cast(u, 1) << (n - 1)
    return bits & ~sign, hl.cast(u, (1 << (n - 1)) - (1 << _MANT[n])), bits & sign


def _raw(name, fn, reference, doc, *, dtypes, params=()):
    """An elementwise op whose element function sees the input's own type (float16 included)."""
    params = tuple(params)

    def algorithm(x, **kw):
        n = hl.Var("n")
        out = hl.Func("out")
        out[n] = fn(x[n], **kw)
        return out

    algorithm.__signature__ = inspect.Signature(
        [inspect.Parameter("x", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
        + [inspect.Parameter(p.name, inspect.Parameter.KEYWORD_ONLY) for p in params])
    algorithm.__name__ = name
    the_op = op(category="elementwise", inputs={"x": "N"}, output="N", dtypes=list(dtypes),
                params=params, reference=reference, frontend=_ew._frontend(name, params),
                example=dict(_ew._EXAMPLE), name=name, doc=doc)(algorithm)
    _ew._OPS[name] = the_op
    return the_op


def _const(like, v: float):
    t = like.type()
    if t.bits() == 64:
        return lit64(v)
    return hl.cast(t, hl.f32(v))       # float16 rounds from float32 (exact for its own limits)


def _nan_to_num(x, nan=0.0, posinf=None, neginf=None):
    mag, inf, sign = _fbits(x)
    big = float(np.finfo(f"float{x.type().bits()}").max)
    hi = _const(x, big if posinf is None else posinf)
    lo = _const(x, -big if neginf is None else neginf)
    res = hl.select(mag == inf, hl.select(sign != hl.cast(sign.type(), 0), lo, hi), x)
    return hl.select(mag > inf, _const(x, nan), res)


def _f32_round_to_odd(v):
    """float64 -> float32 rounding to odd: a second rounding to float16 is then correct."""
    f = hl.cast(hl.Float(32), v)
    back = hl.cast(hl.Float(64), f)
    bits = hl.reinterpret(hl.UInt(32), f)
    bits = hl.select((back != v) & (hl.abs(back) > hl.abs(v)), bits - 1, bits)   # toward zero
    bits = hl.select(back != v, bits | 1, bits)
    return hl.reinterpret(hl.Float(32), bits)


def _cast(x, dtype):
    src, dst = x.type(), halide_type(dtype)
    if src == dst:
        return x
    if dst.is_bool():
        return x != hl.cast(src, 0)
    if src.is_bool():
        return hl.select(x, hl.cast(dst, 1), hl.cast(dst, 0))
    if src.is_float() and dst.is_float():
        if src.bits() == 64 and dst.bits() == 16:     # no direct conversion in Halide's JIT
            return hl.cast(dst, _f32_round_to_odd(x))
        return hl.cast(dst, x)
    if src.is_float():
        v = hl.cast(hl.Float(32), x) if src.bits() == 16 else x
        mag, inf, _ = _fbits(x)
        return hl.select(mag > inf, hl.cast(dst, 0), hl.saturating_cast(dst, hl.trunc(v)))
    if dst.is_float() and dst.bits() == 16:
        # Beyond 2**17 every float16 is inf: clamp first so that float32 holds the value exactly.
        if src.bits() >= 32:
            lo, hi = (0 if src.is_uint() else -(1 << 17)), 1 << 17
            x = hl.clamp(x, hl.cast(src, lo), hl.cast(src, hi))
        return hl.cast(dst, hl.cast(hl.Float(32), x))
    return hl.cast(dst, x)


#: ``x.astype(dtype)`` of a Halide expression by ``cast``'s rules: traced programs' casts use it.
cast_expr = _cast


def _ref_cast(x, dtype):
    x = np.asarray(x)
    dt = np.dtype(dtype)
    if x.dtype.kind == "f" and dt.kind in "iu":
        info = np.iinfo(dt)
        with np.errstate(invalid="ignore"):
            t = np.trunc(x.astype(np.float64))
            t = np.where(np.isnan(t), 0, np.clip(t, info.min, info.max))
        # float64 holds every int up to 2**53; beyond, the clip bounds round: fix the ends.
        out = t.astype(np.float64)
        res = np.where(out >= float(info.max), info.max, 0).astype(dt)
        mid = (out < float(info.max)) & (out > float(info.min))
        res[mid] = out[mid].astype(dt)
        res[out <= float(info.min)] = info.min
        return res
    with np.errstate(all="ignore"):
        return x.astype(dt)


# -- the ops ---------------------------------------------------------------------------------------

_un = _ew._unary


def _unit_inputs(dims, dtypes, params, rng):
    return [rng.uniform(-0.99, 0.99, size=(dims["N"],)).astype(dtypes[0])]


def _above_one(dims, dtypes, params, rng):
    return [rng.uniform(1.0, 8.0, size=(dims["N"],)).astype(dtypes[0])]


atan = _un("atan", _atan, lambda x: np.arctan(x), "Inverse tangent (np.arctan), in [-pi/2, pi/2].")
asin = _un("asin", _asin, _quiet(lambda x: np.arcsin(x)),
           "Inverse sine (np.arcsin); NaN outside [-1, 1].", make_inputs=_unit_inputs)
acos = _un("acos", _acos, _quiet(lambda x: np.arccos(x)),
           "Inverse cosine (np.arccos), in [0, pi]; NaN outside [-1, 1].",
           make_inputs=_unit_inputs)
tan = _un("tan", _ew._tan_fast, _quiet(lambda x: np.tan(x)), "Tangent (radians), accurate for every finite x.",
          fixup=_ew._huge_tiles_fixup(_tan_exact, hl.tan))
sinh = _un("sinh", _sinh, _quiet(lambda x: np.sinh(x)), "Hyperbolic sine.")
cosh = _un("cosh", _cosh, _quiet(lambda x: np.cosh(x)), "Hyperbolic cosine.")
asinh = _un("asinh", _asinh, lambda x: np.arcsinh(x), "Inverse hyperbolic sine (np.arcsinh).")
acosh = _un("acosh", _acosh, _quiet(lambda x: np.arccosh(x)),
            "Inverse hyperbolic cosine (np.arccosh); NaN below 1.", make_inputs=_above_one)
atanh = _un("atanh", _atanh, _quiet(lambda x: np.arctanh(x)),
            "Inverse hyperbolic tangent (np.arctanh); +-inf at +-1, NaN beyond.",
            make_inputs=_unit_inputs)
exp2 = _un("exp2", _exp2, _quiet(lambda x: np.exp2(x)), "2**x (exact at integers).")
log2 = _un("log2", _log2, _quiet(lambda x: np.log2(x)),
           "Base-2 logarithm (exact at powers of two); -inf at 0, NaN below 0.",
           make_inputs=_ew._positive_inputs)
log10 = _un("log10", _log10, _quiet(lambda x: np.log10(x)),
            "Base-10 logarithm; -inf at 0, NaN below 0.", make_inputs=_ew._positive_inputs)
cbrt = _un("cbrt", _cbrt, lambda x: np.cbrt(x), "Cube root (real, odd: cbrt(-8) = -2).")
sign = _un("sign", _sign, lambda x: np.sign(x),
           "-1, 0 or 1 by the sign of x (np.sign); NaN stays NaN.", dtypes=FLOATS + _ew.WITH_INT64)
trunc = _un("trunc", hl.trunc, lambda x: np.trunc(x), "x rounded toward zero.")
deg2rad = _un("deg2rad", _scale(math.pi / 180.0), lambda x: np.deg2rad(x),
              "Degrees to radians (x * pi / 180).")
rad2deg = _un("rad2deg", _scale(180.0 / math.pi), lambda x: np.rad2deg(x),
              "Radians to degrees (x * 180 / pi).")

isnan = _raw("isnan", lambda x: _fbits(x)[0] > _fbits(x)[1], lambda x: np.isnan(x),
             "True where x is NaN (bool).", dtypes=FLOATS)
isinf = _raw("isinf", lambda x: _fbits(x)[0] == _fbits(x)[1], lambda x: np.isinf(x),
             "True where x is +inf or -inf (bool).", dtypes=FLOATS)
isfinite = _raw("isfinite", lambda x: _fbits(x)[0] < _fbits(x)[1], lambda x: np.isfinite(x),
                "True where x is neither NaN nor infinite (bool).", dtypes=FLOATS)
signbit = _raw("signbit", lambda x: _fbits(x)[2] != hl.cast(_fbits(x)[2].type(), 0),
               lambda x: np.signbit(x), "True where the sign bit is set (-0.0 and -NaN too).",
               dtypes=FLOATS)
nan_to_num = _raw(
    "nan_to_num", _nan_to_num,
    lambda x, nan=0.0, posinf=None, neginf=None: np.nan_to_num(x, nan=nan, posinf=posinf,
                                                               neginf=neginf),
    "NaN -> nan, +inf -> posinf, -inf -> neginf (None: the dtype's finite extremes).",
    dtypes=FLOATS, params=[Param("nan", float, 0.0, doc="value for NaN"),
                           Param("posinf", float, None, doc="value for +inf (None: max finite)"),
                           Param("neginf", float, None, doc="value for -inf (None: min finite)")])
cast = _raw("cast", _cast, _ref_cast,
            "x.astype(dtype); float to int truncates, NaN -> 0, beyond the range saturates.",
            dtypes=CAST_TYPES,
            params=[Param("dtype", str, "float32", choices=CAST_TYPES, doc="the result dtype")])
bitwise_not = _un("bitwise_not", lambda x: ~x, lambda x: np.bitwise_not(x),
                  "~x: every bit flipped (logical not for bool).", dtypes=INT_TYPES + ("bool",))
