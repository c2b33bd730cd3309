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
``atan2`` go through it; ``cbrt`` corrects a Halley step by an exactly computed residual;
``sinh`` and ``cosh`` take one exponential (and a polynomial below 1); float64 ``tan`` hands
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

#: e**r on |r| <= ln2/2 for float64, degree 11 (Chebyshev interpolation in mpmath at 50 digits on
#: |r| <= 1.01 ln2/2, rounded to doubles): relative error 2**-56.9. float32 takes
#: ``elementwise``'s degree-6 minimax polynomial of kernel_exp.
_EXP64_POLY = [1.0, 1.0, 0.500000000000002, 0.16666666666666682, 0.04166666666647329,
               0.008333333333318461, 0.0013888888956219215, 0.00019841269893049545,
               2.4801481344570324e-05, 2.75572377367406e-06, 2.7634155490989483e-07,
               2.511120325747114e-08]
#: The clamp of _exp_half: past the overflow of sinh and cosh (89.42, 710.48), below the point
#: where the scale 2**(k-2) would leave the exponent range.
_EXP_HALF_TOP = {32: 89.5, 64: 710.6}


def _exp_half(a):
    """e**a / 2 for a >= 0, within about an ulp; +inf where it overflows (a = +inf included).

    k = round(a / ln2) comes from a magic sum (IEEE-strict, as the reduction r = a - k ln2 in two
    parts) whose low bits carry k + bias - 2: shifted into the exponent field they are 2**(k-2),
    which times the polynomial for 2 e**r is e**a / 2 with one multiplication. Halving inside
    the scale instead of after it lets the result reach sinh's and cosh's overflow threshold,
    beyond exp's own."""
    b = a.type().bits()
    mant, bias = (23, 127 - 2) if b == 32 else (52, 1023 - 2)
    ut = hl.UInt(b)
    ac = hl.min(a, _k(a, _EXP_HALF_TOP[b]))
    magic = 1.5 * 2.0 ** mant + bias
    total = _let("exph_sum", ac * _k(a, 1.0 / math.log(2.0)) + _k(a, magic))
    kf = total - _k(a, magic)
    r = _let("exph_r", (ac - kf * _k(a, _ew._LN2_HI[b])) - kf * _k(a, _ew._LN2_LO[b]))
    coeffs = _ew._KEXP_POLY32 if b == 32 else _EXP64_POLY
    p2 = _ew._poly("exph_poly", r, [2.0 * c for c in coeffs])
    scale = hl.reinterpret(a.type(), hl.reinterpret(ut, total) << hl.cast(ut, mant))
    return _let("exph", p2 * scale)


#: sinh(a) = a + a**3 P(a**2) below 1: P by Chebyshev interpolation (mpmath) on a**2 in [0, 1];
#: relative error of sinh 2**-32.5 (float32, degree 3) and below 2**-56 (float64, degree 6).
_SINH_POLY = {32: [0.16666666646842135, 0.00833333967591706, 0.00019838101968683888,
                   2.8062802582276946e-06],
              64: [0.16666666666666666, 0.008333333333333299, 0.00019841269841324198,
                   2.7557319191381816e-06, 2.5052117695907823e-08, 1.6057679623801638e-10,
                   7.746178593018827e-13]}


def _sinh(x):
    """Below |x| = 1 an odd polynomial; above, h - 1 / (4h) with h = e**|x| / 2 (:func:`_exp_half`),
    where the cancellation costs at most coth(1) = 1.31 times h's error.

    The earlier form took expm1 (its Taylor series and exp) and a second exp above 9 (20): 81
    instructions a 16-float vector against 37 now. 4M elements in [0.1, 10], ``out=``, one
    Halide thread, CPU time per call, old and new kernels and NumPy in turn (30 rounds of 5
    calls, medians): float32 4.06 -> 1.79 ms (NumPy 1.82), float64 11.1 -> 5.1 ms (NumPy 5.3);
    cosh likewise 3.37 -> 1.32 (1.70) and 8.9 -> 3.5 (4.7). As users call it (fresh output, two
    threads, ``pypto.infra.timing.measure``, medians of 3 runs, single/steady): float32
    2.24/2.18 -> 1.11/1.07 ms (NumPy 1.77/1.70), float64 10.2/10.1 -> 6.9/6.7 (NumPy 10.0/10.2).
    Largest error against NumPy in
    float64 over 537M float32 inputs (random bit patterns and [-12, 12]): sinh 2.94 -> 1.62 ulp,
    cosh 3.09 -> 1.48; float64 (134M inputs) sinh 3 -> 2, cosh 3 -> 1."""
    b = x.type().bits()
    a = _let("sinh_abs", _ew._fabs(x))
    z = _let("sinh_z", a * a)
    small = _ew._fused("sinh_small", a + (a * z) * _ew._poly("sinh_poly", z, _SINH_POLY[b]))
    h = _exp_half(a)
    res = hl.select(a < _k(x, 1.0), small, h - _k(x, 0.25) / h)
    return hl.select(_ew._is_nan(x), x, _ew._flipsign(res, x))


def _cosh(x):
    """h + 1 / (4h) with h = e**|x| / 2 (:func:`_exp_half`): no cancellation anywhere."""
    h = _exp_half(_ew._fabs(x))
    return hl.select(_ew._is_nan(x), x, h + _k(x, 0.25) / h)


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


#: Terms of 2*atanh(s)/s in s*s, |s| <= 0.1716: float32's first dropped term is below 1e-9 of
#: the sum at 4 (6 cost log10 12% of its time, 0.87x NumPy's).
_LOG_DEG = {32: 4, 64: 12}


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
    """cbrt(|x|) with x's sign: :func:`_cbrt_parts` in x's type (float16 through float32);
    0, +-inf and NaN are x itself."""
    t = hl.Float(64) if _is64(x) else hl.Float(32)
    w = hl.cast(t, x)
    a = _let("cbrt_abs", _ew._fabs(w))
    root = hl.cast(x.type(), _ew._flipsign(_cbrt_parts(a), w))
    ut = hl.UInt(t.bits())
    # |x| is 0, inf or NaN: its bits minus 1 wrap around or reach the largest finite number's
    special = hl.reinterpret(ut, a) - hl.cast(ut, 1) >= hl.cast(ut, _MAX_FINITE_BITS[t.bits()])
    return hl.select(special, x, root)


_MAX_FINITE_BITS = {32: 0x7F7FFFFF, 64: 0x7FEFFFFFFFFFFFFF}
#: bits(s) / 3 + K is within 3.2% of cbrt(s) (K fitted for the least largest error; K of 1.0's
#: bits would be exact at 1 but 6% off elsewhere).
_CBRT_K = {32: 709954000, 64: 3071303372999611176}


def _cbrt_parts(a):
    """cbrt(a) for finite a > 0 within about half an ulp (0.5046 over every float32).

    1. A guess from the bits (bits / 3 + K, the division through the float type), within 3.2%,
       and one Halley step ``y (y^3 + 2s) / (2 y^3 + s)``: about 2**-15 (not IEEE-strict: the
       step after makes up for its rounding).
    2. yh: that root rounded to 8 significant bits (float64: 17), so that yh**3 is exact, and
       so is yh**3 - s (Sterbenz: the two are within 3%). u = (yh**3 - s) / yh**3 is then known
       to the type's precision, |u| < 0.012 (float64: 1e-4), and cbrt(s) = yh (1 - u)**(1/3)
       = yh - yh u (1/3 + u/9 + 5u**2/81 + 10u**3/243 + ...), the series cut where the rest
       falls below 2**-31 of the root (float64: 2**-60). Its roundings are those of a
       correction of 1% at most: the result is within a hair of the one rounding.

    Everything runs on (root / 2, s / 8), so that nothing overflows up to the largest float;
    tiny a (below 2**-100, 2**-1000) is scaled by 2**48 (2**108) first and the root back by
    2**-16 (2**-36).

    The earlier float32 form took the inverse cube root by three float32 Newton steps and the
    root by one float64 step: 65 instructions a 16-float vector against 37 now, with two
    divisions (dividing costs little here: on this machine the loop's instruction count sets the
    time). 4M elements in [0.1, 10], ``out=``, one Halide thread, CPU time per call, old and new
    kernels and NumPy in turn (30 rounds of 5 calls, medians): float32 4.78 -> 2.23 ms (NumPy
    1.74), float64 (five Newton steps, each dividing, before) 8.3 -> 5.0 ms (NumPy 5.4). As users
    call it (fresh output, two threads, ``pypto.infra.timing.measure``, old and new kernels and
    NumPy, medians of 3 runs, single/steady): float32 2.53/2.52 -> 1.37/1.36 ms (NumPy
    1.89/1.58), float64 9.0/9.1 -> 6.5/6.3 (NumPy 10.1/9.8)."""
    b = a.type().bits()
    ut = hl.UInt(b)
    tiny = a < _k(a, 2.0 ** (-100 if b == 32 else -1000))
    s = _let("cbrt_s", hl.select(tiny, a * _k(a, 2.0 ** (48 if b == 32 else 108)), a))
    s8 = _let("cbrt_s8", s * _k(a, 0.125))
    third = hl.cast(ut, hl.cast(a.type(), hl.reinterpret(ut, s)) * _k(a, 1.0 / 3.0))
    mant = 23 if b == 32 else 52
    y0 = _let("cbrt_y0", hl.reinterpret(a.type(), third + hl.cast(ut, _CBRT_K[b] - (1 << mant))))
    c0 = y0 * y0 * y0
    ratio = _ew._fused("cbrt_halley", (c0 + s8 * _k(a, 2.0)) / (c0 * _k(a, 2.0) + s8))
    y1 = _let("cbrt_y1", y0 * ratio)
    drop = mant + 1 - (8 if b == 32 else 17)
    half_ulp, low = hl.cast(ut, 1 << (drop - 1)), hl.cast(ut, (1 << drop) - 1)
    rounded = (hl.reinterpret(ut, y1) + half_ulp) & ~low
    yh = _let("cbrt_yh", hl.reinterpret(a.type(), rounded))
    h3 = _let("cbrt_h3", yh * yh * yh)
    u = _let("cbrt_u", (h3 - s8) / h3)
    series = [1 / 3, 1 / 9, 5 / 81, 10 / 243]
    y = _ew._fused("cbrt_y", yh - (yh * u) * _ew._poly("cbrt_series", u, series))
    return y * hl.select(tiny, _k(a, 2.0 ** (-15 if b == 32 else -35)), _k(a, 2.0))


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
