"""Elementwise unary ops: ``exp(x)``, ``gelu(x, approximate="none")``, ``clip(x, min, max)``...

Every op here takes one array of any rank and returns an array of the same shape and dtype. The
kernel is 1-D over the flattened elements (named dim ``N``); the public call flattens its input
(a C- or Fortran-contiguous array is passed without a copy, any other view is copied once) and
gives the result back in the input's shape. An empty array gives an empty result.

Conventions:

- dtypes: float32, float64 and float16 (float16 is computed in float32 and rounded once at the
  end, as NumPy does). ``abs``, ``neg``, ``relu`` and ``square`` also take int8, int16, int32
  and int64, ``clip`` int8 to int32, with NumPy's wrap-around (``abs`` of the most negative value
  is itself).
- NaN in gives NaN out, and +-inf follow the math (``exp(-inf) = 0``, ``tanh(inf) = 1``,
  ``sin(inf) = nan``). Where a formula would give ``inf * 0`` at an infinite input, the op returns
  its limit: ``silu(-inf) = gelu(-inf) = -0.0``, ``softplus(-inf) = 0``.
- ``round`` rounds half to even, like ``np.round``.
- ``clip(x, min=None, max=None)`` is ``np.clip``: ``minimum(maximum(x, min), max)``, so
  ``min > max`` gives ``max`` everywhere; a bound left as None is not applied. Integer arrays take
  integer bounds; bounds beyond the dtype's range act as that range's end.
- ``gelu(x, approximate="none")`` is ``x * Phi(x)`` with the exact normal CDF (through ``erf``);
  ``approximate="tanh"`` is ``0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))``, as in
  ``torch.nn.functional.gelu``.
- ``softplus(x, beta=1.0, threshold=inf) = log(1 + exp(beta x)) / beta``, and x where
  ``beta x > threshold``: torch's parameters and semantics (``beta x`` rounded and compared in
  the compute type; beta < 0 allowed; beta == 0 and NaN threshold are refused). The default
  threshold is inf, not torch's 20, so that the default stays accurate for every x
  (``np.logaddexp(0, x)``): with 20, float64 results for 20 < x < 33.3 would be x instead of
  x + log1p(e**-x) (up to 2e-9 off, 580163 ulps at x = 20). In float16 and float32 the two
  agree: the accurate value already rounds to x wherever beta x > 20 (x + log1p(e**-t) / beta
  with a term below e**-t / t < 2**-25 of |x| for t = beta x > 15; checked for every float32
  x > 20), so there the default gives x as torch does. Pass ``threshold=20.0`` for torch's
  float64 values. With beta != 1, the rounding of beta x costs up to about |beta x| ulps where
  the result is tiny (beta x far below 0): the function's own sensitivity to x there.

Accuracy: results are within a few units in the last place of the correctly rounded value
(float32 ``erf`` within 6 ulp). ``gelu`` is ``0.5 x (1 + erf(x / sqrt 2))`` as in PyTorch, so
below x = -3 its error is small in absolute terms (about 1e-7 |x| in float32) but not relative to
the tiny result. Transcendentals are written as vectorizable polynomials (exp, log, sin and cos
with an exact argument reduction in float32, erf after FreeBSD's msun), so the kernels run as
vector code; float32 ``sin``/``cos`` reduce |x| < 2**19 in float64 (Cody-Waite) and recompute
only the 64-element tiles holding a larger |x| with the exact reduction; float64 ``sin``/``cos``
call the C library only for |x| >= 1e6.
"""

from __future__ import annotations

import builtins
import contextlib
import functools
import inspect
import math
import threading

import halide as hl
import numpy as np

from ..errors import ArgumentError, DtypeError, ParamError
from ..runtime import as_array
from ._consts import lit64
from ._op import Param, op

FLOATS = ("float32", "float64", "float16")
INTS = ("int8", "int16", "int32")
#: The integer dtypes of the ops that are exact on int64 too (``clip`` takes its bounds as floats).
WITH_INT64 = INTS + ("int64",)
_EXAMPLE = {"N": 1000}

# -- constants and bit-level helpers ---------------------------------------------------------------


def _is64(e) -> bool:
    return e.type().bits() == 64


def _k(like, v: float):
    """The constant ``v`` in the float type of ``like``."""
    return lit64(v) if _is64(like) else hl.f32(v)


def _bits_type(like, signed=True):
    n = like.type().bits()
    return hl.Int(n) if signed else hl.UInt(n)


def _as_bits(x):
    return hl.reinterpret(_bits_type(x, signed=False), x)


def _from_bits(bits, like):
    return hl.reinterpret(like.type(), bits)


def _sign_bit(x):
    one = hl.cast(_bits_type(x, signed=False), 1)
    return one << (x.type().bits() - 1)


def _copysign(mag, sign):
    """``mag`` with the sign bit of ``sign`` (``mag`` must be non-negative or NaN)."""
    return _from_bits(_as_bits(mag) | (_as_bits(sign) & _sign_bit(sign)), mag)


def _flipsign(v, sign):
    """``v`` with its sign flipped where ``sign`` is negative (or -0.0)."""
    return _from_bits(_as_bits(v) ^ (_as_bits(sign) & _sign_bit(sign)), v)


def _round_nearest(y, name):
    """y rounded to the nearest integer, as (float, int32), for |y| < 2**22 (float32) or 2**51
    (float64): adding and subtracting 1.5 * 2**mantissa bits (IEEE-strict, so kept) rounds in
    one add each way, and the integer is the low bits of the sum. Outside that range both are
    meaningless; callers replace those elements."""
    magic = _k(y, 1.5 * 2.0 ** (52 if _is64(y) else 23))
    # strict even outside an op's strict element function (softmax, scans call _exp bare):
    # otherwise (y + magic) - magic simplifies to y.
    shifted = _let(name, hl.strict_float(y + magic))
    ki = hl.cast(hl.Int(32), _as_bits(shifted) - _as_bits(magic))
    return hl.strict_float(shifted - magic), ki


def _magnitude_bits(x):
    return _as_bits(x) & ~_sign_bit(x)


def _fabs(x):
    """|x| of a float by clearing its sign bit. Use it where the sign is put back afterwards:
    Halide 21 compiled strict_float(abs(x) * c) in float64 to -0.0 for x = +0.0 (the lowered
    statement is right, the machine code is not), so sin, tan, tanh and sinh of +0.0 gave
    -0.0 and 1 / sin(0.0) gave -inf."""
    return _from_bits(_magnitude_bits(x), x)


def _exp_mask(x):
    n = x.type().bits()
    mant = 23 if n == 32 else 52
    return hl.cast(_bits_type(x, signed=False), (1 << (n - 1)) - (1 << mant))


# NaN/inf tests on the bits: Halide's is_nan/is_inf drop a float16 -> float32 conversion and then
# miss float16 NaN and inf.
def _is_nan(x):
    return _magnitude_bits(x) > _exp_mask(x)


def _is_inf(x):
    return _magnitude_bits(x) == _exp_mask(x)


def _is_finite(x):
    return _magnitude_bits(x) < _exp_mask(x)


def _pow2(k, like):
    """2**k as a float of ``like``'s type, for an integer Expr k inside the normal range."""
    if _is64(like):
        return _from_bits(hl.cast(hl.UInt(64), hl.cast(hl.Int(64), k) + 1023) << 52, like)
    return _from_bits(hl.cast(hl.UInt(32), k + 127) << 23, like)


def _inf(like):
    return _k(like, math.inf)


def _nan(like):
    return _k(like, math.nan)


def _horner(z, coeffs):
    """c0 + z*(c1 + z*(c2 + ...)) with python-float coefficients."""
    acc = _k(z, coeffs[-1])
    for c in reversed(coeffs[:-1]):
        acc = acc * z + _k(z, c)
    return acc


def _clamp(x, lo, hi):
    """min(max(x, lo), hi) that lets NaN through (it compares false both ways)."""
    lo, hi = _k(x, lo), _k(x, hi)
    x = hl.select(x < lo, lo, x)
    return hl.select(x > hi, hi, x)


# -- shared sub-results ----------------------------------------------------------------------------
# An element function uses some intermediate values many times (a polynomial's argument, a
# clamped input). Each such value becomes a small named Func over the output's variables, so the
# expression handed to Halide stays a graph of modest size; Halide inlines these Funcs again (the
# default schedule computes them inline), giving the same code as one big expression.

_LOCAL = threading.local()


class _Sharing:
    def __init__(self, args, prefix=""):
        self.args = list(args)
        self.prefix = prefix
        self.used: dict[str, int] = {}

    def let(self, name, e):
        n = self.used.get(name, 0) + 1
        self.used[name] = n
        f = hl.Func(self.prefix + (name if n == 1 else f"{name}{n}"))
        f[self.args] = hl.strict_float(e) if e.type().is_float() else e
        return hl.Expr(f[self.args])


@contextlib.contextmanager
def sharing(args, prefix=""):
    """While active, element functions name their shared values as Funcs over ``args`` (their
    names start with ``prefix``: a second element function in the same pipeline needs its own)."""
    prev = getattr(_LOCAL, "ctx", None)
    _LOCAL.ctx = _Sharing(args, prefix)
    try:
        yield
    finally:
        _LOCAL.ctx = prev


def _let(name, e):
    ctx = getattr(_LOCAL, "ctx", None)
    return e if ctx is None else ctx.let(name, e)


def _poly(name, z, coeffs):
    """``_horner(z, coeffs)`` as a Func that is not IEEE-strict (inside ``sharing``), so that
    each step compiles to one fused multiply-add where the target has one."""
    ctx = getattr(_LOCAL, "ctx", None)
    if ctx is None:
        return _horner(z, coeffs)
    n = ctx.used.get(name, 0) + 1
    ctx.used[name] = n
    f = hl.Func(ctx.prefix + (name if n == 1 else f"{name}{n}"))
    f[ctx.args] = _horner(z, coeffs)
    return hl.Expr(f[ctx.args])


def _fused(name, e):
    """``e`` as a shared value that is not IEEE-strict (inside ``sharing``), like ``_poly``: its
    multiply-adds compile to fused ones where the target has them. For steps whose rounding the
    result does not depend on (a Newton-like step corrected after, a last multiply-add)."""
    ctx = getattr(_LOCAL, "ctx", None)
    if ctx is None:
        return e
    n = ctx.used.get(name, 0) + 1
    ctx.used[name] = n
    f = hl.Func(ctx.prefix + (name if n == 1 else f"{name}{n}"))
    f[ctx.args] = e
    return hl.Expr(f[ctx.args])


# -- exp, expm1, log, log1p ------------------------------------------------------------------------

# ln 2 split so that k * _LN2_HI is exact for the k that occur.
_LN2_HI = {32: 0.693359375, 64: 6.93147180369123816490e-01}
_LN2_LO = {32: -2.12194440e-4, 64: 1.90821492927058770002e-10}
# Clamp bounds: beyond them exp is +inf or 0 after rounding.
_EXP_HI = {32: 89.0, 64: 710.0}
_EXP_LO = {32: -104.0, 64: -746.0}
# Taylor degree that makes the truncation error < 1/2 ulp on |r| <= ln2/2.
_EXP_DEG = {32: 7, 64: 13}
_INV_FACT = [1.0 / math.factorial(i) for i in range(20)]


def _exp(x):
    """e**x for every x but NaN (which gives some NaN or number: callers select NaN through)."""
    b = x.type().bits()
    xc = _let("exp_arg", _clamp(x, _EXP_LO[b], _EXP_HI[b]))
    k, ki = _round_nearest(xc * _k(x, 1.0 / math.log(2.0)), "exp_round")
    r = _let("exp_red", (xc - k * _k(x, _LN2_HI[b])) - k * _k(x, _LN2_LO[b]))
    p = _poly("exp_poly", r, _INV_FACT[: _EXP_DEG[b] + 1])
    # Two factors keep each power of two a normal number down into the subnormal results.
    k1 = ki >> 1
    return p * _pow2(k1, x) * _pow2(ki - k1, x)


# exp inside kernels: softmax's, attention's and logsumexp's row exponentials, the recurrent
# cells' gates. These exponentiate values <= 0 (or feed 1 / (1 + e)), where a result below about
# the smallest normal number may as well be 0. The scaling by 2**k is then one shift of the
# rounding sum's bits instead of exp's two-step scaling into the subnormals, and the float32
# polynomial is the degree-6 minimax one (fitted here on |r| <= ln2/2 for relative error: 7e-8 in
# float32 arithmetic with FMA). softmax's exponential loop on AVX-512 (load, subtract, exp, store,
# counter) is 26 instructions with it against 32 with Halide's exp, whose floor AVX-512 splits
# into two 8-lane halves.
_KEXP_POLY32 = [1.0, 1.0, 0.49999991059303284, 0.16666419804096222, 0.041668202728033066,
                0.00837482325732708, 0.0013838170561939478]


def kernel_exp(x):
    """e**x within 1 ulp, but 0 where e**x is below about the smallest normal number times 2**0.5
    (float32: x < -125.5 ln2 = -86.989; float64: x < -1021.5 ln2 = -708.05); +inf and overflow
    give +inf, -inf gives 0, NaN gives NaN; float16 is computed in float32. Not IEEE-strict past the
    argument reduction: the polynomial compiles to fused multiply-adds where the target has them.
    """
    t = x.type()
    if t.bits() == 16:   # Halide's is_nan misses a float16 NaN widened to float32
        wide = hl.cast(hl.Float(32), x)
        return hl.select(_is_nan(wide), x, hl.cast(t, kernel_exp(wide)))
    b = t.bits()
    # float32 (float64): clamped so that k = round(x / ln2) lies in [-126, 128] ([-1022, 1024]);
    # the result is 2 e**r * 2**(k - 1), the biased exponent k + 126 (k + 1022) in [0, 254]
    # ([0, 2046]): a scale of 0.0 at the bottom, and at the top 2 e**r * 2**127 (2**1023), which
    # overflows to inf where e**x does.
    mant, bias, lo, hi = (23, 126, -87.3, 89.0) if b == 32 else (52, 1022, -708.3, 710.0)
    bits_t = hl.UInt(b)
    xc = hl.min(hl.max(x, _k(x, lo)), _k(x, hi))
    # Adding 1.5 * 2**mant + bias rounds x / ln2 to an integer in the sum's low bits; the
    # difference of the bit patterns is k, and the low bits shifted into the exponent field are
    # 2**(k - 1). The reduction is IEEE-strict, so that k and 2**(k - 1) come from the same
    # rounding and the simplifier does not merge the two parts of ln2 into one constant (2.7 ulps
    # at large k in float32, 107 in float64); the polynomial is not. The float64 constants are
    # built exactly (``_consts``): on OpenCL, a plain float64 magic lost its bias.
    magic = _k(x, 1.5 * 2.0 ** mant + bias)
    sum_bits = hl.reinterpret(bits_t, hl.strict_float(xc * _k(x, 1.0 / math.log(2.0)) + magic))
    kf = hl.cast(t, hl.reinterpret(hl.Int(b), sum_bits - hl.reinterpret(bits_t, magic)))
    r = hl.strict_float((xc - kf * _k(x, _LN2_HI[b])) - kf * _k(x, _LN2_LO[b]))
    # 2 e**r (exact doubling): float32's degree-6 minimax polynomial, float64's Taylor terms.
    coeffs = _KEXP_POLY32 if b == 32 else _INV_FACT[: _EXP_DEG[64] + 1]
    p2 = _horner(r, [2.0 * c for c in coeffs])
    scale = hl.reinterpret(t, sum_bits << hl.cast(bits_t, mant))
    return hl.select(hl.is_nan(x), x, p2 * scale)


def _expm1(x):
    b = x.type().bits()
    x = _let("expm1_arg", x)
    # Below the cut, Taylor terms to degree `deg` are exact to well under an ulp of the result.
    cut, deg = (0.5, 9) if b == 32 else (0.35, 14)
    small = x * _poly("expm1_poly", x, _INV_FACT[1: deg + 1])
    return hl.select(hl.abs(x) < _k(x, cut), small, _exp(x) - _k(x, 1.0))


_LOG_DEG = {32: 4, 64: 12}   # terms of 2*atanh(s)/s in z = s*s, |s| <= 0.1716 (float32: the
#                              first dropped term is below 1e-9 of the sum)


def _log_core(x):
    """log(x) for positive, finite, normal x."""
    b = x.type().bits()
    mant_bits, bias = (23, 127) if b == 32 else (52, 1023)
    ibits = hl.reinterpret(_bits_type(x), x)
    one = hl.cast(_bits_type(x), 1)
    e = hl.cast(hl.Int(32), ibits >> mant_bits) - bias
    mant = ibits & ((one << mant_bits) - 1)
    m = _from_bits(hl.cast(_bits_type(x, signed=False),
                           mant | (hl.cast(_bits_type(x), bias) << mant_bits)), x)
    m = _let("log_mant", m)
    big = m > _k(x, math.sqrt(2.0))                     # m in [sqrt(1/2), sqrt(2))
    f = hl.select(big, m * _k(x, 0.5), m) - _k(x, 1.0)
    e = e + hl.select(big, 1, 0)
    s = _let("log_s", f / (f + _k(x, 2.0)))              # log(1 + f) = 2 atanh(s)
    coeffs = [2.0 / (2 * i + 1) for i in range(_LOG_DEG[b] + 1)]
    lg = s * _poly("log_poly", s * s, coeffs)
    ef = hl.cast(x.type(), e)
    return ef * _k(x, _LN2_HI[b]) + (ef * _k(x, _LN2_LO[b]) + lg)


def _log(x):
    """log(x) for every x but NaN (which the caller selects through)."""
    b = x.type().bits()
    x = _let("log_arg", x)
    shift = 25 if b == 32 else 54
    tiny = x < _k(x, 2.0 ** (-126 if b == 32 else -1022))   # subnormal: scale into the normal range
    xs = hl.select(tiny, x * _k(x, 2.0 ** shift), x)
    res = _log_core(xs) - hl.select(tiny, _k(x, shift * math.log(2.0)), _k(x, 0.0))
    res = hl.select(x == _k(x, 0.0), -_inf(x), res)
    res = hl.select(_is_inf(x), x, res)
    return hl.select(x < _k(x, 0.0), _nan(x), res)


def _log_checked(x):
    return hl.select(_is_nan(x), x, _log(x))


def _log1p(x):
    x = _let("log1p_arg", x)
    u = _let("log1p_u", x + _k(x, 1.0))
    d = u - _k(x, 1.0)
    # log(u) * x / (u - 1) cancels the rounding of 1 + x (exact where u == 1).
    corr = hl.select(d == _k(x, 0.0), _k(x, 1.0), x / d)
    res = hl.select(d == _k(x, 0.0), x, _log(u) * corr)
    res = hl.select(_is_inf(x) & (x > _k(x, 0.0)), x, res)
    return hl.select(_is_nan(x), x, res)


# -- hyperbolic and logistic -----------------------------------------------------------------------


def _tanh(x):
    b = x.type().bits()
    x = _let("tanh_arg", x)
    a = _clamp(_fabs(x), 0.0, 9.5 if b == 32 else 19.5)
    e = _let("tanh_em1", _expm1(a + a))
    t = e / (e + _k(x, 2.0))
    return _copysign(t, x)


def _sigmoid(x):
    # e = exp(-|x|) never overflows; below 0, sigmoid(x) = e / (1 + e) keeps its relative accuracy.
    x = _let("sigmoid_arg", x)
    e = _let("sigmoid_e", _exp(-hl.abs(x)))
    return hl.select(x < _k(x, 0.0), e, _k(x, 1.0)) / (_k(x, 1.0) + e)


def _finite_below(x):
    """x with -inf replaced by the most negative finite value (so x * 0 stays 0)."""
    lowest = -float(np.finfo(np.float64 if _is64(x) else np.float32).max)
    return hl.select(x < _k(x, lowest), _k(x, lowest), x)


def _silu(x):
    x = _let("silu_arg", x)
    return _finite_below(x) * _sigmoid(x)


def _softplus_check(dtype: str, beta: float, threshold: float) -> None:
    """softplus's parameters for an array of ``dtype``: refuses what has no meaning there."""
    if beta == 0.0:
        raise ParamError("softplus: parameter 'beta' must be nonzero (the result is "
                         "log(1 + exp(beta x)) / beta), got 0.0")
    with np.errstate(over="ignore"):
        beyond = dtype in ("float32", "float16") and not math.isfinite(float(np.float32(beta)))
    if beyond:
        raise ParamError(f"softplus: parameter 'beta' is {beta!r}, beyond float32's range, in "
                         f"which a {dtype} array is computed (|beta| <= 3.4e38)")
    if math.isnan(threshold):
        raise ParamError("softplus: parameter 'threshold' must not be NaN (inf, the default, "
                         "gives no linear part)")


def _exp_over(y, beta: float):
    """e**y / |beta| for y <= 0 and 0 < |beta| < 1 (in y's type), without the underflow of e**y
    on the way: with |beta| = m 2**E (m in [0.5, 1)), exp's 2**k scaling takes 2**-E in and the
    division by m comes before it, so that only the result is rounded into the subnormals."""
    b = y.type().bits()
    m, e_beta = math.frexp(math.fabs(beta))
    shift = -e_beta                                     # 0 < shift <= 1074 (float64's least)
    # one factor of 2 below exp's clamp: where e**y 2**shift / m is below half the least
    # subnormal, so that -inf gives 0.
    lo = _EXP_LO[b] - (shift + 1) * math.log(2.0)
    yc = _let("softplus_tail_arg", hl.select(y < _k(y, lo), _k(y, lo), y))
    k, ki = _round_nearest(yc * _k(y, 1.0 / math.log(2.0)), "exp_round")
    r = _let("exp_red", (yc - k * _k(y, _LN2_HI[b])) - k * _k(y, _LN2_LO[b]))
    p = _poly("exp_poly", r, _INV_FACT[: _EXP_DEG[b] + 1]) / _k(y, m)
    kk = ki + shift
    k1 = kk >> 1
    return p * _pow2(k1, y) * _pow2(kk - k1, y)


def _softplus(x, beta=1.0, threshold=math.inf):
    """log(1 + e**(beta x)) / beta as max(x, 0) + log1p(e**-|beta x|) / beta (for beta > 0;
    the sign test is on beta x), and x where beta x > threshold. beta x and its comparison are
    in x's type, as in torch."""
    _softplus_check("float64" if _is64(x) else "float32", beta, threshold)
    x = _let("softplus_arg", x)
    t = x if beta == 1.0 else _let("softplus_bx", x * _k(x, beta))
    e = _let("softplus_e", _exp(-hl.abs(t)))           # in [0, 1]
    u = _let("softplus_u", e + _k(x, 1.0))              # in [1, 2]: log needs no special cases
    log1p_e = _log_core(u) + (e - (u - _k(x, 1.0))) / u
    if beta == 1.0:
        res = hl.select(x > _k(x, 0.0), x, _k(x, 0.0)) + log1p_e
    else:
        # Where beta x <= 0 the result is the scaled term alone, so that beta < 0 keeps its sign
        # (softplus(inf, beta=-1) = -0.0, as torch gives).
        scaled = log1p_e / _k(x, beta)
        b = beta if _is64(x) else float(np.float32(beta))      # the beta the kernel uses
        if math.fabs(b) < 1.0:
            # 1 / beta scales up: where e is tiny, log1p(e) = e and e / beta is computed whole
            # (e itself may be subnormal or 0 while e / beta is a normal number).
            tail = _exp_over(-hl.abs(t), b)
            tail = tail if b > 0 else -tail
            scaled = hl.select(e < _k(x, 2.0 ** -60), tail, scaled)
        res = hl.select(t > _k(x, 0.0), x + scaled, scaled)
    if threshold != math.inf:
        res = hl.select(t > _k(x, threshold), x, res)   # beyond float32's range: +-inf
    return hl.select(_is_nan(x), x, res)


# -- erf -------------------------------------------------------------------------------------------
# Rational approximations of FreeBSD msun's s_erf.c, evaluated on every interval and selected.

_ERX = 8.45062911510467529297e-01
_PP = [1.28379167095512558561e-01, -3.25042107247001499370e-01, -2.84817495755985104766e-02,
       -5.77027029648944159157e-03, -2.37630166566501626084e-05]
_QQ = [1.0, 3.97917223959155352819e-01, 6.50222499887672944485e-02, 5.08130628187576562776e-03,
       1.32494738004321644526e-04, -3.96022827877536812320e-06]
_PA = [-2.36211856075265944077e-03, 4.14856118683748331666e-01, -3.72207876035701323847e-01,
       3.18346619901161753674e-01, -1.10894694282396677476e-01, 3.54783043256182359371e-02,
       -2.16637559486879084300e-03]
_QA = [1.0, 1.06420880400844228286e-01, 5.40397917702171048937e-01, 7.18286544141962662868e-02,
       1.26171219808761642112e-01, 1.36370839120290507362e-02, 1.19844998467991074170e-02]
_RA = [-9.86494403484714822705e-03, -6.93858572707181764372e-01, -1.05586262253232909814e+01,
       -6.23753324503260060396e+01, -1.62396669462573470355e+02, -1.84605092906711035994e+02,
       -8.12874355063065934246e+01, -9.81432934416914548592e+00]
_SA = [1.0, 1.96512716674392571292e+01, 1.37657754143519042600e+02, 4.34565877475229228821e+02,
       6.45387271733267880336e+02, 4.29008140027567833386e+02, 1.08635005541779435134e+02,
       6.57024977031928170135e+00, -6.04244152148580987438e-02]
_RB = [-9.86494292470009928597e-03, -7.99283237680523006574e-01, -1.77579549177547519889e+01,
       -1.60636384855821916062e+02, -6.37566443368389627722e+02, -1.02509513161107724954e+03,
       -4.83519191608651397019e+02, 0.0]
_SB = [1.0, 3.03380607434824582924e+01, 3.25792512996573918826e+02, 1.53672958608443695994e+03,
       3.19985821950859553908e+03, 2.55305040643316442583e+03, 4.74528541206955367215e+02,
       -2.24409524465858183362e+01, 0.0]


def _erf64(x):
    x = _let("erf_arg", x)
    a = _let("erf_abs", hl.abs(x))
    # |x| < 0.84375: x + x * P(x^2) / Q(x^2)
    z = _let("erf_z", x * x)
    r1 = x + x * (_horner(z, _PP) / _horner(z, _QQ))
    # 0.84375 <= |x| < 1.25: erx + P(s) / Q(s), s = |x| - 1
    s = _let("erf_s", a - _k(x, 1.0))
    r2 = _k(x, _ERX) + _horner(s, _PA) / _horner(s, _QA)
    # 1.25 <= |x| < 6: 1 - exp(-x^2 - 0.5625 + R/S) / |x|, with R/S in 1/x^2
    ac = _let("erf_tail", _clamp(a, 1.25, 6.0))
    w = _let("erf_w", _k(x, 1.0) / (ac * ac))
    first = ac < _k(x, 1.0 / 0.35)
    num = hl.select(first, _horner(w, _RA), _horner(w, _RB))
    den = hl.select(first, _horner(w, _SA), _horner(w, _SB))
    hi = _let("erf_hi", _from_bits(_as_bits(ac) & hl.u64(0xFFFFFFFF00000000), ac))  # low word 0
    ex = _exp(-hi * hi - _k(x, 0.5625)) * _exp((hi - ac) * (hi + ac) + num / den)
    r3 = _k(x, 1.0) - ex / ac
    mag = hl.select(a < _k(x, 1.25), r2, hl.select(a < _k(x, 6.0), r3, _k(x, 1.0)))
    res = hl.select(a < _k(x, 0.84375), r1, _copysign(mag, x))
    return hl.select(_is_nan(x), x, res)


def _erf32(x):
    # Halide's float32 erf is a vector polynomial accurate to ~4e-7; it needs a bounded input.
    x = _let("erf_arg", x)
    res = hl.erf(_clamp(x, -8.0, 8.0))
    # NaN and both zeros as they are (Halide's erf(-0.0) is +0.0; torch and SciPy keep -0.0)
    return hl.select(_is_nan(x) | (x == _k(x, 0.0)), x, res)


def _erf(x):
    return _erf64(x) if _is64(x) else _erf32(x)


def _gelu(x, approximate):
    xs = _let("gelu_arg", _finite_below(x))
    if approximate == "tanh":
        # 0.5 (1 + tanh(u)) = 1 / (1 + exp(-2u)): no cancellation for negative x.
        u = _k(x, math.sqrt(2.0 / math.pi)) * (xs + _k(x, 0.044715) * xs * xs * xs)
        return xs / (_k(x, 1.0) + _exp(-(u + u)))
    t = _let("gelu_t", xs * _k(x, math.sqrt(0.5)))
    body = _k(x, 0.5) * xs * (_k(x, 1.0) + _erf(t))
    # 1.25 > -t >= 0.84375: erfc(-t) = (1 - erx) - P(s) / Q(s), s = -t - 1 (no cancellation)
    s = _let("gelu_s", -t - _k(x, 1.0))
    mid = _k(x, 0.5) * xs * (_k(x, 1.0 - _ERX) - _horner(s, _PA) / _horner(s, _QA))
    body = hl.select(t < _k(x, -0.84375), mid, body)
    return hl.select(xs < _k(x, -_GELU_TAIL), _gelu_tail(xs), body)


# Below x = -_GELU_TAIL (erfc's argument a = -x / sqrt 2 above 1.25) 1 + erf(x / sqrt 2) cancels:
# float32 lost all relative accuracy by x = -6. There x Phi(x) = 0.5 x erfc(a) with fdlibm's
# erfc(a) = exp(-a**2 - 0.5625 + R/S(1/a**2)) / a, and 0.5 x / a = -1/sqrt 2.
_GELU_TAIL = 1.25 * math.sqrt(2.0)


def _gelu_tail(x):
    x = _let("gelu_tail_x", hl.min(x, _k(x, -_GELU_TAIL)))
    a = -x * _k(x, math.sqrt(0.5))
    w = _let("gelu_tail_w", _k(x, 1.0) / (a * a))
    first = a < _k(x, 1.0 / 0.35)
    ratio = hl.select(first, _horner(w, _RA), _horner(w, _RB)) / \
        hl.select(first, _horner(w, _SA), _horner(w, _SB))
    # a**2 = x**2 / 2 with x = hi + (x - hi), hi of half the significand: hi**2 / 2 is exact, so
    # the big exponent carries no rounding (one ulp of 100 is 8e-6 relative in float32)
    mask = hl.u64(0xFFFFFFFF00000000) if _is64(x) else hl.u32(0xFFFFF000)
    hi = _let("gelu_tail_hi", _from_bits(_as_bits(x) & mask, x))
    small = _k(x, -0.5625) - (x - hi) * (x + hi) * _k(x, 0.5) + ratio
    return _k(x, -math.sqrt(0.5)) * (_exp(-(hi * hi) * _k(x, 0.5)) * _exp(small))


# -- sin and cos -----------------------------------------------------------------------------------
# float32: exact argument reduction for every finite input (Payne-Hanek style). |x| = m * 2**E
# with an integer m < 2**24; a table gives G = (2**E * 2/pi) mod 4 split into three doubles whose
# products with m are exact, so (x * 2/pi) mod 4 is found without cancellation error.


def _two_over_pi_bits(nbits: int) -> int:
    """floor(2/pi * 2**nbits), from Machin's formula in integer arithmetic."""
    guard = nbits + 32
    one = 1 << guard

    def arctan_inv(n):
        total, term, k, sign = 0, one // n, 1, 1
        n2 = n * n
        while term:
            total += sign * (term // k)
            term //= n2
            k += 2
            sign = -sign
        return total

    pi = 16 * arctan_inv(5) - 4 * arctan_inv(239)      # pi * 2**guard
    return ((2 << (2 * guard)) // pi) >> (guard - nbits)


@functools.lru_cache(maxsize=1)
def _sincos_tables():
    frac = 200                                          # fixed-point bits kept below the point
    q = 120 + frac
    t = _two_over_pi_bits(q)
    his, mids, los = [], [], []
    for be in range(256):
        e = max(be, 1) - 150
        shift = q - e - frac
        v = t >> shift if shift >= 0 else t << -shift   # floor(2**E * 2/pi * 2**frac)
        g = v % (4 << frac)
        hi = g >> (frac - 24)
        rem = g - (hi << (frac - 24))
        mid = rem >> (frac - 50)
        lo = rem - (mid << (frac - 50))
        his.append(hi / 2.0 ** 24)
        mids.append(mid / 2.0 ** 50)
        los.append(lo / 2.0 ** frac)
    parts = ((his, "sincos_g_hi"), (mids, "sincos_g_mid"), (los, "sincos_g_lo"))
    return tuple(hl.Buffer(np.array(v, dtype=np.float64), name) for v, name in parts)


_SIN_TAYLOR = [(-1.0) ** i / math.factorial(2 * i + 1) for i in range(6)]   # degree 11
_COS_TAYLOR = [(-1.0) ** i / math.factorial(2 * i) for i in range(7)]       # degree 12


def _sincos32(x, want_cos: bool):
    g_hi, g_mid, g_lo = _sincos_tables()
    x = _let("sincos_arg", x)
    bits = _as_bits(x)
    be = hl.cast(hl.Int(32), (bits >> 23) & 0xFF)
    mant = hl.cast(hl.Int(32), bits & 0x7FFFFF)
    m = _let("sincos_m", hl.cast(hl.Float(64), hl.select(be == 0, mant, mant | 0x800000)))
    idx = _let("sincos_idx", hl.clamp(be, 1, 254))
    a = m * g_hi[idx]                                   # exact
    a = _let("sincos_a", a - lit64(4.0) * hl.floor(a * lit64(0.25)))   # exact, in [0, 4)
    bsum = _let("sincos_b", a + m * g_mid[idx])         # exact, in [0, 5)
    k = _let("sincos_k", hl.floor(bsum + lit64(0.5)))
    f = (bsum - k) + m * g_lo[idx]
    r = _let("sincos_r", hl.cast(hl.Float(32), f * lit64(math.pi / 2)))
    z = _let("sincos_z", r * r)
    s = r * _poly("sin_poly", z, _SIN_TAYLOR)
    c = _poly("cos_poly", z, _COS_TAYLOR)
    quad = hl.cast(hl.Int(32), k) + (1 if want_cos else 0)
    odd = (quad & 1) == 1
    neg = (quad & 2) == 2
    v = hl.select(odd, c, s)
    v = hl.select(neg, -v, v)
    if not want_cos:
        v = _flipsign(v, x)                              # sin is odd
    return hl.select(_is_finite(x), v, _nan(x))


# float64: Cody-Waite reduction with pi/2 in three parts (the first two of 33 bits, so k * part is
# exact for k < 2**20), accurate for |x| < SINCOS64_FAST; larger |x| is recomputed by the C
# library in an update of the output (see _unary's ``fixup``).
SINCOS64_FAST = 1.0e6


@functools.lru_cache(maxsize=1)
def _pio2_parts():
    bits = 300
    pio2 = _two_over_pi_bits(bits)                      # floor(2/pi * 2**bits)
    # pi/2 = 1 / (2/pi): 2**(2*bits) // pio2 is pi/2 * 2**bits, good to ~bits - 2 bits.
    v = (1 << (2 * bits)) // pio2
    parts = []
    for width in (33, 33, 53):
        top = v.bit_length() - width
        head = (v >> top) << top
        parts.append(head / 2.0 ** bits)
        v -= head
    return tuple(parts)


_SIN64 = [(-1.0) ** i / math.factorial(2 * i + 1) for i in range(10)]   # degree 19
_COS64 = [(-1.0) ** i / math.factorial(2 * i) for i in range(11)]       # degree 20


def _quadrant64(x):
    """float64 |x| = k pi/2 + r (Cody-Waite, accurate below SINCOS64_FAST), then sin r and
    cos r: (k as int32, sin r, cos r)."""
    p1, p2, p3 = _pio2_parts()
    a = _fabs(x)
    k, quad = _round_nearest(a * lit64(2.0 / math.pi), "sincos_k")
    r = _let("sincos_r", ((a - k * lit64(p1)) - k * lit64(p2)) - k * lit64(p3))
    z = _let("sincos_z", r * r)
    return quad, r * _poly("sin_poly", z, _SIN64), _poly("cos_poly", z, _COS64)


def _sincos_from(quadrant, x, want_cos: bool):
    """sin or cos of x from a reduction ``quadrant`` (``_quadrant64``, ``_quadrant32_fast``)."""
    x = _let("sincos_arg", x)
    quad, s, c = quadrant(x)
    quad = quad + (1 if want_cos else 0)
    v = hl.select((quad & 1) == 1, c, s)
    v = hl.select((quad & 2) == 2, -v, v)
    if not want_cos:
        v = _flipsign(v, x)                              # sin is odd
    return hl.select(_is_finite(x), v, _nan(x))


def _sincos64(x, want_cos: bool):
    return _sincos_from(_quadrant64, x, want_cos)


def _sin(x):
    return _sincos64(x, False) if _is64(x) else _sincos32(x, False)


def _cos(x):
    return _sincos64(x, True) if _is64(x) else _sincos32(x, True)


def _sincos64_fixup(libm_fn):
    def fixup(out, x, dims):
        """Recomputes the rare float64 elements beyond the fast reduction's range with libm."""
        if x.type() != hl.Float(64):
            return
        big = hl.RDom([hl.Range(0, dims.N)], "big")
        big.where(hl.abs(x[big.x]) >= lit64(SINCOS64_FAST))
        out[big.x] = hl.strict_float(libm_fn(x[big.x]))
    return fixup


# float32, fast path: below SINCOS32_FAST the float64 Cody-Waite reduction of ``_sincos64`` (exact
# to about 2**-70 for k < 2**20, against |r| >= 2**-31 for every float32 here) and the float32
# polynomials. Tiles holding a larger |x| (or inf, NaN) are recomputed with the exact reduction
# of ``_sincos32`` in an update of the output (see ``_huge_tiles_fixup``).
SINCOS32_FAST = 2.0 ** 19
#: Elements per tile of that recomputation: a tile holding one huge |x| is recomputed whole.
HUGE_TILE = 64
#: Columns of the vertical max that finds a tile's largest |x|.
HUGE_LANES = 8
_F32_BITS_FAST = int(np.float32(SINCOS32_FAST).view(np.uint32))


def _max_all(values):
    """The max of a list of Exprs as a balanced tree."""
    while len(values) > 1:
        values = [hl.max(values[i], values[i + 1]) if i + 1 < len(values) else values[i]
                  for i in range(0, len(values), 2)]
    return values[0]


def _quadrant32_fast(x):
    """The shared part of float32 sin, cos and tan below SINCOS32_FAST: |x| = k pi/2 + r with
    the float64 Cody-Waite reduction, then sin r and cos r by float32 polynomials. Returns
    (k as int32, sin r, cos r)."""
    p1, p2, p3 = _pio2_parts()
    a = hl.cast(hl.Float(64), hl.abs(x))
    k, quad = _round_nearest(a * lit64(2.0 / math.pi), "sincos_k")
    r = ((a - k * lit64(p1)) - k * lit64(p2)) - k * lit64(p3)
    r = _let("sincos_r", hl.cast(hl.Float(32), r))
    z = _let("sincos_z", r * r)
    s = r * _poly("sin_poly", z, _SIN_TAYLOR[:5])      # degree 9: truncation below 2**-28
    c = _poly("cos_poly", z, _COS_TAYLOR[:6])          # degree 10: below 2**-33
    return quad, s, c


def _sincos32_fast(x, want_cos: bool):
    return _sincos_from(_quadrant32_fast, x, want_cos)


def _tan_fast(x):
    """tan from one reduction (float32 below SINCOS32_FAST, float64 below SINCOS64_FAST; the
    op's fixup recomputes the rest): sin r / cos r in an even quadrant, -cos r / sin r in an
    odd one (tan has period pi), the sign of x restored (tan is odd)."""
    x = _let("sincos_arg", x)
    quad, s, c = (_quadrant32_fast if x.type() == hl.Float(32) else _quadrant64)(x)
    odd = (quad & 1) == 1
    v = _flipsign(hl.select(odd, -c, s) / hl.select(odd, s, c), x)
    return hl.select(_is_finite(x), v, _nan(x))


def _sin_fast(x):
    return _sincos32_fast(x, False) if x.type() == hl.Float(32) else _sin(x)


def _cos_fast(x):
    return _sincos32_fast(x, True) if x.type() == hl.Float(32) else _cos(x)


def _huge_tiles_fixup(exact_fn, libm_fn):
    """The update of ``out`` for sin/cos: float32 recomputes with ``exact_fn`` every tile of
    HUGE_TILE elements holding |x| >= SINCOS32_FAST (``huge_tile[t]`` flags tile t, the last
    one shifted inwards to end at N; RVar ``redo$x`` walks the elements); float64 hands the
    elements beyond its fast range to the C library (``_sincos64_fixup``)."""
    f64_fixup = _sincos64_fixup(libm_fn)

    def fixup(out, x, dims):
        if x.type() != hl.Float(32):
            f64_fixup(out, x, dims)
            return
        j, t, n = hl.Var("j"), hl.Var("t"), hl.Var("n")
        last = dims.N - 1
        first = hl.min(t * HUGE_TILE, dims.N - HUGE_TILE)    # the last tile shifted inwards
        # The tile's largest magnitude: HUGE_LANES columns of a vertical max, then one across.
        rows = HUGE_TILE // HUGE_LANES
        column = hl.Func("huge_column")
        column[j, t] = _max_all([_magnitude_bits(x[hl.clamp(first + i * HUGE_LANES + j, 0, last)])
                                 for i in range(rows)])
        flag = hl.Func("huge_tile")
        k = hl.RDom([hl.Range(0, HUGE_LANES)], "huge_k")
        flag[t] = hl.u32(0)
        flag[t] = hl.max(flag[t], column[k.x, t])
        exact = hl.Func("exact")
        exact[n] = _apply(x[n], exact_fn, {}, [n], prefix="exact_")
        redo = hl.RDom([hl.Range(0, dims.N)], "redo")
        redo.where(flag[redo.x / HUGE_TILE] >= hl.u32(_F32_BITS_FAST))
        out[redo.x] = exact[redo.x]
    return fixup


# -- the op factory --------------------------------------------------------------------------------


def _apply(x, fn, params, args, prefix=""):
    """fn on an element: float16 goes through float32; float math is IEEE-strict. ``prefix``
    starts the names of its shared values (see ``sharing``)."""
    t = x.type()
    with sharing(args, prefix):
        if t.is_float():
            if t.bits() == 16:
                return hl.cast(t, hl.strict_float(fn(hl.cast(hl.Float(32), x), **params)))
            return hl.strict_float(fn(x, **params))
        return hl.cast(t, fn(x, **params))


def _frontend(name: str, params, check=None):
    """The public any-rank call: flatten, run the 1-D kernel, restore the shape."""
    sig = inspect.Signature(
        [inspect.Parameter("x", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
        + [inspect.Parameter(p.name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=p.default)
           for p in params])

    # The common call, f(x) with every parameter at its default, skips the signature binding
    # (it costs more than a small kernel); any other call binds as documented.
    defaults = {p.name: p.default for p in params}
    plain = all(p.default is not inspect.Parameter.empty for p in params)
    accepted: set = set()   # np.dtype objects of the op's signatures, filled on the first call

    def call(*args, **kwargs):
        if plain and len(args) == 1 and not kwargs:
            x, given = args[0], dict(defaults)
        else:
            try:
                bound = sig.bind(*args, **kwargs)
            except TypeError as e:
                # an ArgumentError (a ParamError and a TypeError, as Python raises for such a call)
                raise ArgumentError(f"{name}: {e}; the call is {name}{sig}") from None
            bound.apply_defaults()
            given = dict(bound.arguments)
            x = given.pop("x")
        a = as_array(x, name, "x")
        the_op = _OPS[name]
        if not accepted:
            accepted.update(np.dtype(s[0]) for s in the_op.dtypes)
        if a.dtype not in accepted and a.dtype.name not in (allowed := sorted(
                {s[0] for s in the_op.dtypes})):
            raise DtypeError(f"{name}: argument 'x' has dtype {a.dtype.name}; expected "
                             f"{' or '.join(allowed)}")
        if check is not None:
            given = check(a, given)
        given = {k: v for k, v in given.items() if v is not None}
        # A zero-size array takes the first branch: the runtime makes the empty result without
        # running the kernel, in its output dtype (bool for isnan, not the input's dtype).
        if a.flags.c_contiguous:
            return the_op.kernel(a.reshape(-1), **given).reshape(a.shape)
        if a.flags.f_contiguous:
            return the_op.kernel(a.T.reshape(-1), **given).reshape(a.T.shape).T
        return the_op.kernel(np.ascontiguousarray(a).reshape(-1), **given).reshape(a.shape)

    call.__signature__ = sig
    call.__name__ = name
    call.shape_only = True   # no array values read: runtime.call_public may skip it
    return call


_OPS: dict = {}


def _unary(name, fn, reference, doc, *, dtypes=FLOATS, params=(), check=None, make_inputs=None,
           fixup=None):
    """Declares the elementwise op ``name``: out[n] = fn(x[n], **params), then ``fixup``'s update
    of ``out`` if given."""
    params = tuple(params)

    def algorithm(x, dims, **kw):
        n = hl.Var("n")
        out = hl.Func("out")
        out[n] = _apply(x[n], fn, kw, [n])
        if fixup is not None:
            fixup(out, x, dims)
        return out

    algorithm.__signature__ = inspect.Signature(
        [inspect.Parameter("x", inspect.Parameter.POSITIONAL_OR_KEYWORD),
         inspect.Parameter("dims", inspect.Parameter.KEYWORD_ONLY)]
        + [inspect.Parameter(p.name, inspect.Parameter.KEYWORD_ONLY) for p in params])
    algorithm.__name__ = name
    the_op = op(category="elementwise", inputs={"x": "N"}, output="N", dtypes=list(dtypes),
                params=params, reference=reference, frontend=_frontend(name, params, check),
                example=dict(_EXAMPLE), make_inputs=make_inputs, name=name, doc=doc)(algorithm)
    _OPS[name] = the_op
    return the_op


def _positive_inputs(dims, dtypes, params, rng):
    return [rng.uniform(0.05, 4.0, size=(dims["N"],)).astype(dtypes[0])]


def _over_minus_one(dims, dtypes, params, rng):
    return [rng.uniform(-0.9, 4.0, size=(dims["N"],)).astype(dtypes[0])]


def _quiet(fn):
    """A NumPy reference that computes through overflow and domain warnings silently."""
    @functools.wraps(fn)
    def wrapped(*args, **kwargs):
        with np.errstate(all="ignore"):
            return fn(*args, **kwargs)
    return wrapped


def _erf_np(v):
    """erf via Python's math.erf (NumPy has none), in float64."""
    v64 = np.asarray(v, dtype=np.float64)
    return np.frompyfunc(math.erf, 1, 1)(v64).astype(np.float64).reshape(v64.shape)


# -- reference functions (public signatures) -------------------------------------------------------


@_quiet
def _ref_sigmoid(x):
    x = np.asarray(x)
    one = np.asarray(1, x.dtype)
    return one / (one + np.exp(-x))


@_quiet
def _ref_silu(x):
    x = np.asarray(x)
    out = x / (np.asarray(1, x.dtype) + np.exp(-x))
    return np.where(np.isneginf(x), np.asarray(-0.0, x.dtype), out)


@_quiet
def _ref_gelu(x, approximate="none"):
    x = np.asarray(x)
    if approximate == "tanh":
        c, k = np.asarray(np.sqrt(2.0 / np.pi), x.dtype), np.asarray(0.044715, x.dtype)
        half, one = np.asarray(0.5, x.dtype), np.asarray(1, x.dtype)
        out = half * x * (one + np.tanh(c * (x + k * x ** 3)))
    else:   # NumPy has no erf: math.erf per element, in float64
        x64 = x.astype(np.float64)
        # 1 + erf(t) as erfc(-t): the sum cancels where x is very negative
        t = -x64 / np.sqrt(2.0)
        out = (0.5 * x64 * np.frompyfunc(math.erfc, 1, 1)(t).astype(np.float64)).astype(x.dtype)
    return np.where(np.isneginf(x), np.asarray(-0.0, x.dtype), out)


def _ref_erf(x):
    x = np.asarray(x)
    return _erf_np(x).astype(x.dtype)


@_quiet
def _ref_rsqrt(x):
    return 1 / np.sqrt(x)


@_quiet
def _ref_reciprocal(x):
    return np.reciprocal(x)


@_quiet
def _ref_leaky_relu(x, negative_slope=0.01):
    x = np.asarray(x)
    out = np.where(x < 0, x * negative_slope, x)
    if negative_slope < 0:
        out = np.where(x == 0, 0.0, out)
    return out.astype(x.dtype)


@_quiet
def _ref_softplus(x, beta=1.0, threshold=math.inf):
    """In the op's compute type (float32 for float16): t = beta x rounded as the kernel does, the
    logarithm in long double (its tail e**t / beta need not underflow), and x where t >
    threshold."""
    x = np.asarray(x)
    work = np.float32 if x.dtype == np.float16 else x.dtype.type
    w = x.astype(work)
    b = work(beta)
    t = w * b
    out = np.logaddexp(0.0, t.astype(np.longdouble)) / np.longdouble(b)
    out = np.where(t > work(threshold), w, out)
    return out.astype(x.dtype)


def _check_softplus(a, given):
    beta, threshold = given.get("beta", 1.0), given.get("threshold", math.inf)
    numbers = (int, float, np.integer, np.floating)
    for key, v in (("beta", beta), ("threshold", threshold)):
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, numbers):
            raise ParamError(f"softplus: parameter '{key}' expects a number, got {v!r}")
    if not math.isfinite(float(beta)):
        raise ParamError(f"softplus: parameter 'beta' must be finite, got {beta!r}")
    _softplus_check(a.dtype.name, float(beta), float(threshold))
    return given


def _ref_clip(x, min=None, max=None):  # noqa: A002 - NumPy's names
    x = np.asarray(x)
    if x.dtype.kind in "iu":
        info = np.iinfo(x.dtype)
        min = None if min is None else int(np.clip(min, info.min, info.max))
        max = None if max is None else int(np.clip(max, info.min, info.max))
    out = x
    if min is not None:
        out = np.maximum(out, np.asarray(min, dtype=x.dtype))
    if max is not None:
        out = np.minimum(out, np.asarray(max, dtype=x.dtype))
    return np.array(out, dtype=x.dtype)


# -- element functions -----------------------------------------------------------------------------


def _relu(x):
    if x.type().is_float():
        return hl.select(x < _k(x, 0.0), _k(x, 0.0), x)
    return hl.max(x, hl.cast(x.type(), 0))


def _abs(x):
    if x.type().is_float():
        # The sign bit cleared: Halide 21's abs of +0.0 came out -0.0 inside a fused program
        # (jit(lambda x: 1.0 / abs(x)) gave -inf at 0.0, eager +inf; see _fabs).
        return _fabs(x)
    return hl.abs(x)          # unsigned for ints; the cast back wraps like NumPy


def _neg(x):
    if x.type().is_float():
        return _from_bits(_as_bits(x) ^ _sign_bit(x), x)     # exact, -0.0 and NaN included
    return hl.cast(x.type(), 0) - x


def _square(x):
    return x * x


def _exp_checked(x):
    return hl.select(_is_nan(x), x, _exp(x))


def _expm1_checked(x):
    return hl.select(_is_nan(x), x, _expm1(x))


def _sqrt(x):
    return hl.sqrt(x)


def _rsqrt(x):
    return _k(x, 1.0) / hl.sqrt(x)


def _reciprocal(x):
    return _k(x, 1.0) / x


def _leaky_relu(x, negative_slope):
    res = hl.select(x < _k(x, 0.0), x * _k(x, negative_slope), x)
    if negative_slope < 0:      # the result is >= 0 everywhere: -0.0 is +0.0 (as torch gives it)
        res = hl.select(x == _k(x, 0.0), _k(x, 0.0), res)
    return res


def _clip_fn(x, min=None, max=None):  # noqa: A002
    if x.type().is_float():
        lo = None if min is None else _k(x, min)
        hi = None if max is None else _k(x, max)
    else:
        info = np.iinfo(f"int{x.type().bits()}")
        for key, v in (("min", min), ("max", max)):
            if v is not None and not float(v).is_integer():
                raise ParamError(f"clip: parameter '{key}' must be an integer for an "
                                 f"int{x.type().bits()} array, got {v!r}")
        def bound(v):
            # Python ints (exact): the bounds reach here as floats, int64's limits as 2.0**63.
            return None if v is None else hl.cast(
                x.type(), builtins.max(info.min, builtins.min(int(v), info.max)))
        lo, hi = bound(min), bound(max)
    out = x
    if lo is not None:
        out = hl.select(out < lo, lo, out)
    if hi is not None:
        out = hl.select(out > hi, hi, out)
    return out


def _check_clip(a, given):
    """Public-call checks of clip's bounds (the kernel's Params only see finite floats)."""
    for key in ("min", "max"):
        v = given.get(key)
        if v is None:
            continue
        number = isinstance(v, (int, float, np.integer, np.floating))
        if isinstance(v, (bool, np.bool_)) or not number:
            raise ParamError(f"clip: parameter '{key}' expects a number or None, got {v!r}")
        if a.dtype.kind in "iu":
            if not isinstance(v, (int, np.integer)):
                raise ParamError(f"clip: parameter '{key}' must be an int for an {a.dtype.name} "
                                 f"array, got {v!r} (NumPy would return float64; cast x to a float "
                                 "dtype to clip by a float)")
            info = np.iinfo(a.dtype)
            v = int(min(max(int(v), info.min), info.max))
            if float(v) != v and v not in (info.min, info.max):
                # Bounds reach the kernel as float64, exact up to 2**53 (int64 only).
                raise ParamError(f"clip: parameter '{key}' is {v}, which has no exact float64 "
                                 "form (bounds are passed as float64, exact up to 2**53); use "
                                 f"pypto.ops.{'maximum' if key == 'min' else 'minimum'}(x, {v}) "
                                 "for an int64 bound this large")
            given[key] = v
            continue
        f = float(v)
        if math.isnan(f):
            raise ParamError(f"clip: parameter '{key}' must not be NaN")
        if math.isinf(f):
            if (key == "min") == (f < 0):
                given[key] = None                  # -inf below, +inf above: no bound
            else:
                raise ParamError(f"clip: parameter '{key}' is {'+' if f > 0 else '-'}inf, which "
                                 "would replace every element; give a finite bound")
    return given


# -- the ops ---------------------------------------------------------------------------------------

abs = _unary(  # noqa: A001 - the public name
    "abs", _abs, lambda x: np.abs(x),
    "|x|. Integers wrap like NumPy: abs of the most negative value is itself.",
    dtypes=FLOATS + WITH_INT64)
neg = _unary("neg", _neg, lambda x: np.negative(x), "-x (integers wrap like NumPy).",
             dtypes=FLOATS + WITH_INT64)
exp = _unary("exp", _exp_checked, _quiet(lambda x: np.exp(x)), "e**x.")
expm1 = _unary("expm1", _expm1_checked, _quiet(lambda x: np.expm1(x)),
               "e**x - 1, accurate near 0.")
log = _unary("log", _log_checked, _quiet(lambda x: np.log(x)),
             "Natural logarithm: -inf at 0, NaN below 0.", make_inputs=_positive_inputs)
log1p = _unary("log1p", _log1p, _quiet(lambda x: np.log1p(x)),
               "log(1 + x), accurate near 0: -inf at -1, NaN below -1.",
               make_inputs=_over_minus_one)
sqrt = _unary("sqrt", _sqrt, _quiet(lambda x: np.sqrt(x)), "Square root (NaN below 0).",
              make_inputs=_positive_inputs)
rsqrt = _unary("rsqrt", _rsqrt, _ref_rsqrt, "1 / sqrt(x) (inf at 0, NaN below 0).",
               make_inputs=_positive_inputs)
sin = _unary("sin", _sin_fast, _quiet(lambda x: np.sin(x)),
             "Sine (radians), accurate for every finite x.", fixup=_huge_tiles_fixup(_sin, hl.sin))
cos = _unary("cos", _cos_fast, _quiet(lambda x: np.cos(x)),
             "Cosine (radians), accurate for every finite x.", fixup=_huge_tiles_fixup(_cos, hl.cos))
tanh = _unary("tanh", _tanh, lambda x: np.tanh(x), "Hyperbolic tangent.")
sigmoid = _unary("sigmoid", _sigmoid, _ref_sigmoid, "The logistic function 1 / (1 + e**-x).")
relu = _unary("relu", _relu, lambda x: np.maximum(x, 0), "max(x, 0); NaN stays NaN.",
              dtypes=FLOATS + WITH_INT64)
gelu = _unary(
    "gelu", _gelu, _ref_gelu,
    "x * Phi(x) with Phi the standard normal CDF (approximate='none', through erf), or the "
    "tanh approximation 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) (approximate='tanh').",
    params=[Param("approximate", str, "none", choices=("none", "tanh"),
                  doc="'none': exact erf form; 'tanh': the tanh approximation")])
silu = _unary("silu", _silu, _ref_silu, "x * sigmoid(x) (also called swish).")
erf = _unary("erf", _erf, _ref_erf, "The error function 2/sqrt(pi) * integral_0^x exp(-t^2) dt.")
floor = _unary("floor", hl.floor, lambda x: np.floor(x), "Largest integer <= x.")
ceil = _unary("ceil", hl.ceil, lambda x: np.ceil(x), "Smallest integer >= x.")
round = _unary("round", hl.round, lambda x: np.round(x),  # noqa: A001
               "Nearest integer, halves to even (like np.round).")
clip = _unary(
    "clip", _clip_fn, _ref_clip,
    "np.clip(x, min, max) = minimum(maximum(x, min), max); a bound of None is not applied.",
    dtypes=FLOATS + WITH_INT64, check=_check_clip,
    params=[Param("min", float, None, doc="lower bound (None: none)"),
            Param("max", float, None, doc="upper bound (None: none)")])
square = _unary("square", _square, lambda x: np.square(x), "x * x (integers wrap like NumPy).",
                dtypes=FLOATS + WITH_INT64)
reciprocal = _unary("reciprocal", _reciprocal, _ref_reciprocal, "1 / x.")
softplus = _unary(
    "softplus", _softplus, _ref_softplus,
    "log(1 + e**(beta x)) / beta, and x where beta x > threshold (torch's names and semantics; "
    "the default threshold is inf: accurate for every x).", check=_check_softplus,
    params=[Param("beta", float, 1.0, doc="the sharpness: log(1 + e**(beta x)) / beta (nonzero)"),
            Param("threshold", float, math.inf, finite=False,
                  doc="x itself where beta x > threshold (inf: never; torch's default 20)")])
leaky_relu = _unary(
    "leaky_relu", _leaky_relu, _ref_leaky_relu, "x where x >= 0, negative_slope * x below 0.",
    params=[Param("negative_slope", float, 0.01, doc="slope for x < 0")])
