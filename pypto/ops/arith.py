"""Binary math: atan2, hypot, copysign, lerp, fmod/remainder/floor_divide, fmax/fmin, logaddexp,
heaviside, and the bitwise and shift ops on integers.

They broadcast like NumPy and type Python scalars the NumPy way (the ``binary`` frontend: both
arrays must share a dtype). Names and argument order follow NumPy (``arctan2`` is ``atan2``, as in
torch); ``lerp(input, end, weight)`` is ``torch.lerp``'s formula (see its doc for where its
kernel differs).

- ``fmod`` is C's fmod (the result has the sign of ``a``); ``remainder`` follows Python and NumPy
  (the sign of ``b``); ``floor_divide`` is NumPy's, so ``a == b * floor_divide(a, b) +
  remainder(a, b)`` up to rounding. All three take float32, float64, float16, int32 and int64.
  Floats are exact for every pair, as NumPy's: float16 and float32 through one float64 division
  where |a / b| < 2**29 (every float16 pair), float32's larger quotients by a float64 remainder
  taken in chunks of 28 quotient bits; float64, which has no wider type, by one division and two
  exact reduction steps (products split into halves, as in Dekker's) where |a / b| < 2**51, and
  larger quotients in chunks of 51 bits. ``remainder`` and ``floor_divide`` then follow NumPy's
  ``npy_divmod`` in the array's type, so they equal NumPy's bit for bit. Integer division by
  zero gives 0, as NumPy's does (with its warning).
- ``left_shift``/``right_shift`` follow NumPy for shift counts beyond the width (0, or -1 for a
  negative value shifted right) and for negative counts (treated as beyond the width).
- ``fmax``/``fmin`` ignore NaN (the other value is returned); ``hypot`` is inf if either is inf,
  even with a NaN, as in C; ``heaviside(x, h0)`` is 0 below 0, h0 at 0, 1 above.

Accuracy: ``hypot`` within 1 ulp (float32) or 2 (float64), ``atan2`` within 3; ``logaddexp`` and
``logaddexp2`` within a few ulps of max(|a|, |b|, 1), as the difference of the two is rounded.
"""

from __future__ import annotations

import math

import halide as hl
import numpy as np

from ._consts import lit64
from . import binary as _bin
from . import elementwise as _ew
from . import math as _m

FLOATS = _ew.FLOATS
INTS = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32")
_k, _let = _ew._k, _ew._let
_quiet = _ew._quiet


def _nan_either(a, b):
    return _ew._is_nan(a) | _ew._is_nan(b)


# -- atan2, hypot, copysign, lerp ------------------------------------------------------------------


def _atan2(y, x):
    y, x = _let("atan2_y", y), _let("atan2_x", x)
    ay, ax = hl.abs(y), hl.abs(x)
    swap = _let("atan2_swap", ay > ax)
    t = hl.select(swap, ax, ay) / hl.select(swap, ay, ax)          # in [0, 1]
    zero = _k(x, 0.0)
    t = hl.select((ay == zero) & (ax == zero), zero, t)              # 0 / 0
    t = hl.select(_ew._is_inf(y) & _ew._is_inf(x), _k(x, 1.0), t)   # inf / inf
    r = _let("atan2_r", _m._atan01(t))
    hi, lo = _m._pair(x, _m._PI[0] / 2, _m._PI[1] / 2)
    r = _let("atan2_q", hl.select(swap, hi - (r - lo), r))
    hi, lo = _m._pair(x, *_m._PI)
    x_neg = (_ew._as_bits(x) & _ew._sign_bit(x)) != hl.cast(_ew._bits_type(x, False), 0)
    r = hl.select(x_neg, hi - (r - lo), r)                            # -0.0 counts as negative
    return hl.select(_nan_either(y, x), _ew._nan(x), _ew._flipsign(r, y))


def _hypot(a, b):
    inf = _ew._is_inf(a) | _ew._is_inf(b)
    if a.type().bits() == 32:          # float64 holds a*a + b*b exactly enough: one rounding
        a64, b64 = hl.cast(hl.Float(64), a), hl.cast(hl.Float(64), b)
        res = hl.cast(hl.Float(32), hl.sqrt(a64 * a64 + b64 * b64))
    else:
        aa, bb = _let("hypot_a", hl.abs(a)), _let("hypot_b", hl.abs(b))
        big, small = _let("hypot_max", hl.max(aa, bb)), hl.min(aa, bb)
        r = small / big
        res = hl.select(big == _k(a, 0.0), _k(a, 0.0), big * hl.sqrt(_k(a, 1.0) + r * r))
        res = hl.select(_nan_either(a, b), _ew._nan(a), res)
    return hl.select(inf, _ew._inf(a), res)


def _copysign(a, b):
    mag = _ew._as_bits(a) & ~_ew._sign_bit(a)
    return _ew._from_bits(mag | (_ew._as_bits(b) & _ew._sign_bit(b)), a)


def _lerp(start, end, weight):
    diff = _let("lerp_diff", end - start)
    # torch's form: exact at weight 0 and 1, and monotone.
    return hl.select(weight < _k(start, 0.5), start + weight * diff,
                     end - diff * (_k(start, 1.0) - weight))


# -- fmod, remainder, floor_divide -----------------------------------------------------------------
# float32 and float64 take two paths. Where |a| < |b| * 2**29 (float32; 2**51 in float64: the
# quotients users meet), the direct path gives the exact result (_fmod_direct); the other
# elements are recomputed afterwards by the chunked method (_fmod_magnitude, ten times the work;
# float64: _fmod64_chunked), tile by tile, in the tiles that hold one (_recompute_hard_tiles).
# float16 needs only the direct path, integers their own.


def _exponent(v):
    """The biased exponent field of a float64 (the sign masked: |x| of -0.0 may keep its sign)."""
    return hl.cast(hl.Int(32), (hl.reinterpret(hl.UInt(64), v) >> 52) & 0x7FF)


def _fmod_magnitude(a, b, steps: int):
    """|fmod(a, b)| in float64, exact, for float32 a, b (finite, b != 0).

    Step i takes off a multiple q of b * 2**s_i, with s_i chosen so that q < 2**29: q * b * 2**s_i
    then has at most 53 bits. q comes from a multiplication by 1/b (no division), so it may be
    one too small or too large; the remainder is brought back into [0, b * 2**s) once. Every
    value stays a multiple of the finer of the inputs' last bits and below 2**26 of them, so
    every subtraction is exact.
    """
    r = _let("fmod_a", hl.abs(hl.cast(hl.Float(64), a)))
    bb = _let("fmod_b", hl.abs(hl.cast(hl.Float(64), b)))
    inv = _let("fmod_inv", lit64(1.0) / bb)
    # The shifts are planned from the exponents once: step i leaves r < b * 2**s_i, so with
    # s_(i+1) = s_i - 28 the next quotient is again below 2**29.
    d = _let("fmod_d", _exponent(r) - _exponent(bb))
    for i in range(steps):
        s = _let(f"fmod_s{i}", hl.max(d - 28 * (i + 1), 0))
        bs = _let(f"fmod_bs{i}", bb * _ew._pow2(s, bb))
        q = hl.trunc(r * (inv * _ew._pow2(-s, bb)))
        t = _let(f"fmod_t{i}", r - q * bs)
        t = _let(f"fmod_u{i}", hl.select(t < lit64(0.0), t + bs, t))
        r = _let(f"fmod_r{i}", hl.select(t >= bs, t - bs, t))
    return r


#: Quotients below this are exact in the direct path (float32; every float16 quotient is).
DIRECT_QUOTIENT = 2.0 ** 29


def _direct_magnitude(a, b):
    """|fmod(a, b)| from one division: exact for finite a, b != 0 with |a / b| below
    DIRECT_QUOTIENT (float32; 2**40 for float16 inputs) or DIRECT_QUOTIENT64 (float64).

    float32 and float16 take the division in float64. With a = A 2**ea, b = B 2**eb (A, B < 2**24
    integers): a quotient q < 2**29 times |b| has at most 53 bits, so |a| - q |b| is exact. The
    float64 quotient truncates to the true one: where a / b >= 1, ea >= eb (eb is the least
    exponent if b is subnormal), so a non-integer a / b is more than 2**-24 from every integer,
    above half an ulp of any quotient below 2**29 (and a quotient below 1 is at least 2**-25
    below 1). float16 (11-bit A, B) leaves even more room. float64: :func:`_fmod64_direct`.
    """
    if _ew._is64(a):
        return _fmod64_direct(_let("f64_x", _ew._fabs(a)), _let("f64_y", _ew._fabs(b)))
    x = _let("fdir_a", hl.abs(hl.cast(hl.Float(64), a)))
    y = _let("fdir_b", hl.abs(hl.cast(hl.Float(64), b)))
    return x - hl.trunc(x / y) * y


# -- float64: exact without a wider type -----------------------------------------------------------
# Write Q* = floor(x / y) for the true quotient. A float64 division rounds x / y to the nearest,
# and rounding is monotone, so while Q* + 1 <= 2**53 is a float64, q = trunc(fl(x / y)) is Q* or
# Q* + 1. One reduction step (``_fmod64_step``) takes q y off x exactly for q <= 2**26:
#
# - y = yh + yl by clearing y's 27 low significand bits: yh has 26 significant bits and
#   y - yh < 2**-25 y (y normal), yl at most 27. So q yh and q yl (at most 52 and 53 bits) are
#   exact products.
# - s = x - q yh is exact. q >= 2: q yh lies in [x / 2, 2 x] (Sterbenz). q = 1: where x <= 2 yh
#   likewise; where x > 2 yh (so x >= 2**(e+1), y in [2**e, 2**(e+1))), x and yh are multiples of
#   2**(e-51) and x - yh < y + yl < 2**(e+2): 53 bits. q = 0: s = x.
# - t = s - q yl is the exact x - q y, in [-y, y): where x >= y, x, y, yh, yl are multiples of
#   ulp(y) and |t| <= y, so t is a float64 (an operation whose exact result is a float64 gives
#   it); where x < y, q = 1 gives x - y with x >= y / 2 (Sterbenz). Then t + y where t < 0, the
#   same way, is x - Q* y.
#
# The direct path runs two such steps from one division, for x / y < 2**52: q = Q1 2**26 + q2,
# first Q1 against y 2**26 (Q1 is again the true quotient or one more: the step's correction
# says which), then the rest against y. A scaling of x and y by a power of two keeps y normal
# and y 2**26 finite; its inverse scales the (representable) result back exactly. Quotients from
# 2**51 up take ``_fmod64_chunked``: the direct path against y 2**s with s planned from the
# exponents, 51 quotient bits a step, 42 steps for the 2097 bits between the largest float64
# and the least subnormal; only the tiles that hold such an element compute it.

#: float64 quotients below this take the direct path.
DIRECT_QUOTIENT64 = 2.0 ** 51
_CHUNK64 = 51
_STEPS64 = 42          # ceil((1023 + 1074 - 51) / 51) + 1
_LOW27 = (1 << 64) - 1 - ((1 << 27) - 1)


def _fmod64_step(x, y, yh, yl, q, let=_let):
    """x - q y exactly, brought into [0, y), for q the true quotient or one more; with the
    condition (whether q was one more) for the caller's next quotient."""
    t = let("f64_t", (x - q * yh) - q * yl)
    neg = t < lit64(0.0)
    return hl.select(neg, t + y, t), neg


def _fmod64_direct(x, y, let=_let):
    """fmod(x, y) for finite x >= 0, y > 0 with x / y < 2**52, exact (see above)."""
    tiny, huge = y < lit64(2.0 ** -900), y > lit64(2.0 ** 900)
    c = hl.select(tiny, lit64(2.0 ** 960), hl.select(huge, lit64(2.0 ** -128), lit64(1.0)))
    back = hl.select(tiny, lit64(2.0 ** -960), hl.select(huge, lit64(2.0 ** 128), lit64(1.0)))
    xs, ys = let("f64_xs", x * c), let("f64_ys", y * c)       # y in [2**-114, 2**900]
    yh = let("f64_yh", _ew._from_bits(_ew._as_bits(ys) & hl.u64(_LOW27), ys))
    yl = let("f64_yl", ys - yh)
    q = let("f64_quot", hl.trunc(xs / ys))
    q1 = let("f64_qhi", hl.trunc(q * lit64(2.0 ** -26)))
    big = lit64(2.0 ** 26)
    r1, over = _fmod64_step(xs, ys * big, yh * big, yl * big, q1, let)
    r1 = let("f64_rhi", r1)
    q2 = let("f64_qlo", q - (q1 - hl.select(over, lit64(1.0), lit64(0.0))) * big)
    r2, _ = _fmod64_step(r1, ys, yh, yl, q2, let)
    return hl.select(x < y, x, r2 * back)


def _exponent64(v):
    """floor(log2(v)) of a finite float64 v > 0, subnormals included."""
    sub = v < lit64(2.0 ** -1022)
    field = _exponent(hl.select(sub, v * lit64(2.0 ** 54), v))
    return field - hl.select(sub, 1023 + 54, 1023)


def _as_is(name, e):
    return e


def _fmod64_chunked(x, y):
    """fmod(x, y) for finite x >= 0, y > 0, any quotient: step k reduces modulo y 2**s_k,
    s_k = max(d - 51 (k + 1), 0) with d the difference of the exponents, so that every step's
    quotient is below 2**52 (the steps after s reaches 0 leave the remainder as it is).

    The steps are an update over RDom ``f64_k`` of a Func of the output's Vars (``f64_chunks``):
    a Func with an update is not inlined, so Halide computes it at the innermost loop of its
    consumer, where the steps run as one vector loop (unrolled, 42 copies of the step took
    2-3 s to compile). Its values inside a step are plain expressions: a Func of the Vars would
    read the final remainder, not the step's.
    """
    ctx = _ew._LOCAL.ctx
    d = _let("f64_d", _exponent64(x) - _exponent64(y))
    n = ctx.used.get("f64_chunks", 0) + 1
    ctx.used["f64_chunks"] = n
    chunks = hl.Func(ctx.prefix + ("f64_chunks" if n == 1 else f"f64_chunks{n}"))
    chunks[ctx.args] = x
    k = hl.RDom([hl.Range(0, _STEPS64)], "f64_k")
    s = hl.max(d - _CHUNK64 * (k.x + 1), 0)
    half = s >> 1                                           # 2**s in two normal factors
    ys = y * _ew._pow2(half, y) * _ew._pow2(s - half, y)
    chunks[ctx.args] = hl.strict_float(_fmod64_direct(chunks[ctx.args], ys, let=_as_is))
    return hl.Expr(chunks[ctx.args])


def _hard_magnitude(a, b):
    """|fmod(a, b)| for finite a, b != 0 and any quotient."""
    if _ew._is64(a):
        return _fmod64_chunked(_let("f64_x", _ew._fabs(a)), _let("f64_y", _ew._fabs(b)))
    return _fmod_magnitude(a, b, 10)


def _with_specials(magnitude):
    """fmod from |fmod| of finite a, b != 0: the sign of a, and C's special values."""
    def fmod_fn(a, b):
        if not a.type().is_float():
            return _int_fmod(a, b)                     # 0 for b == 0, like NumPy
        a, b = _let("fmod_x", a), _let("fmod_y", b)
        r = hl.cast(a.type(), magnitude(a, b))
        res = _ew._flipsign(r, a)
        res = hl.select(_ew._is_inf(b), a, res)
        bad = _nan_either(a, b) | _ew._is_inf(a) | (b == _k(a, 0.0))
        return hl.select(bad, _ew._nan(a), res)
    return fmod_fn


# float32 quotients span up to 2**277 (10 steps of 28 bits); float16 ones up to 2**40.
_fmod_hard = _with_specials(_hard_magnitude)
_fmod_direct = _with_specials(_direct_magnitude)

#: Elements per tile of the recomputation: a tile holding one hard element is recomputed whole.
HARD_TILE = 64


def _hard(a, b):
    """Elements the direct path may get wrong: |a| >= |b| * 2**29 (float32) or 2**51 (float64),
    exact (or inf, when the product overflows |a| cannot reach it). inf a and b == 0 fall here
    too."""
    if _ew._is64(a):
        return hl.abs(a) >= hl.abs(b) * lit64(DIRECT_QUOTIENT64)
    return hl.abs(a) >= hl.abs(b) * hl.f32(DIRECT_QUOTIENT)


def _recompute_hard_tiles(exact_fn):
    """The float32 and float64 update: ``exact_fn`` over every tile of HARD_TILE elements of a
    row that holds a hard element. ``hard_tile[t, r]`` flags tile t of row r (the last tile
    shifted inwards to end at the row's end, so that its loads stay dense); RVar ``redo$x``
    walks the row."""
    def fixup(out, images, dims):
        a, b = images
        if a.type() not in (hl.Float(32), hl.Float(64)):
            return
        c, r, t = hl.Var("c"), hl.Var("r"), hl.Var("t")
        n = dims.C
        width = hl.min(n, HARD_TILE)
        first = hl.min(t * HARD_TILE, n - width)
        k = hl.RDom([hl.Range(0, width)], "hard_k")
        flag = hl.Func("hard_tile")
        flag[t, r] = hl.cast(hl.UInt(8), 0)
        flag[t, r] = hl.max(flag[t, r], hl.cast(hl.UInt(8), _hard(a[first + k.x, r],
                                                                  b[first + k.x, r])))
        exact = hl.Func("exact")
        exact[c, r] = _bin._apply(exact_fn, [a[c, r], b[c, r]], [c, r], prefix="exact_")
        redo = hl.RDom([hl.Range(0, n)], "redo")
        redo.where(flag[redo.x / HARD_TILE, r] != 0)
        out[redo.x, r] = exact[redo.x, r]
    return fixup


def _int_floor_parts(a, b):
    """(floor quotient, floor remainder) of integers from Halide's Euclidean division (which
    gives 0 for b == 0 and never traps, unlike C's division)."""
    q, r = a / b, a % b                              # a = q * b + r with 0 <= r < |b|
    zero, one = hl.cast(a.type(), 0), hl.cast(a.type(), 1)
    fix = (b < zero) & (r != zero)                   # floor rounding wants r in (b, 0]
    return hl.select(fix, q - one, q), hl.select(fix, r + b, r)


def _int_fmod(a, b):
    """C's truncating remainder (the sign of a); 0 for b == 0."""
    r = a % b
    zero = hl.cast(a.type(), 0)
    return hl.select((a < zero) & (r != zero), r - hl.cast(a.type(), hl.abs(b)), r)


def _divmod(a, b, fmod_fn):
    """NumPy's npy_divmod in a's float type: (floor quotient, remainder with the sign of b)."""
    mod = _let("divmod_mod", fmod_fn(a, b))
    zero, one = _k(a, 0.0), _k(a, 1.0)
    div = (a - mod) / b
    flip = (mod != zero) & ((b < zero) != (mod < zero))
    mod2 = hl.select(mod != zero, hl.select(flip, mod + b, mod), _copysign(zero, b))
    div = _let("divmod_div", hl.select(flip, div - one, div))
    fd = hl.floor(div)
    fd = hl.select(div - fd > _k(a, 0.5), fd + one, fd)
    # A zero quotient takes the sign of a / b (b != 0 here): the xor of the signs, no division.
    signed_zero = _ew._from_bits((_ew._as_bits(a) ^ _ew._as_bits(b)) & _ew._sign_bit(a), a)
    fd = hl.select(div != zero, fd, signed_zero)
    return fd, mod2


def _remainder_with(fmod_fn):
    def remainder_fn(a, b):
        if not a.type().is_float():
            return _int_floor_parts(a, b)[1]
        a, b = _let("rem_x", a), _let("rem_y", b)
        return hl.select(b == _k(a, 0.0), _ew._nan(a), _divmod(a, b, fmod_fn)[1])
    return remainder_fn


def _floor_divide_with(fmod_fn):
    def floor_divide_fn(a, b):
        if not a.type().is_float():
            return _int_floor_parts(a, b)[0]
        a, b = _let("fdiv_x", a), _let("fdiv_y", b)
        return hl.select(b == _k(a, 0.0), a / b, _divmod(a, b, fmod_fn)[0])
    return floor_divide_fn


# -- fmax, fmin, logaddexp, heaviside --------------------------------------------------------------


def _fmax(a, b):
    if not a.type().is_float():
        return hl.max(a, b)
    return hl.select(_ew._is_nan(b) | (a > b) | (a == b), a, b)   # NaN a: b


def _fmin(a, b):
    if not a.type().is_float():
        return hl.min(a, b)
    return hl.select(_ew._is_nan(b) | (a < b) | (a == b), a, b)


def _logaddexp_base(two: bool):
    def fn(a, b):
        a, b = _let("lae_a", a), _let("lae_b", b)
        m = hl.max(a, b)
        d = -hl.abs(a - b)
        if two:
            tail = _ew._log1p(_m._exp2(d)) * _k(a, 1.0 / math.log(2.0))
            same = a + _k(a, 1.0)
        else:
            tail = _ew._log1p(_ew._exp(d))
            same = a + _k(a, math.log(2.0))
        res = hl.select(a == b, same, m + tail)       # equal infinities: no inf - inf
        return hl.select(_nan_either(a, b), _ew._nan(a), res)
    return fn


def _heaviside(x, h0):
    zero, one = _k(x, 0.0), _k(x, 1.0)
    res = hl.select(x < zero, zero, hl.select(x > zero, one, h0))
    return hl.select(_ew._is_nan(x), x, res)


# -- bitwise ---------------------------------------------------------------------------------------


def _shift(left: bool):
    def fn(a, b):
        t = a.type()
        n = t.bits()
        zero = hl.cast(t, 0)
        in_range = (b < hl.cast(t, n)) if t.is_uint() else (b >= zero) & (b < hl.cast(t, n))
        count = hl.clamp(b, zero, hl.cast(t, n - 1))
        if left:
            return hl.select(in_range, a << count, zero)
        beyond = zero if t.is_uint() else hl.select(a < zero, hl.cast(t, -1), zero)
        return hl.select(in_range, a >> count, beyond)
    return fn


def _ref_shift(np_fn, left: bool):
    def ref(a, b):
        a, b = np.asarray(a), np.asarray(b)
        bits = a.dtype.itemsize * 8
        ok = (b >= 0) & (b < bits)
        safe = np.where(ok, b, 0).astype(b.dtype)
        out = np_fn(a, safe)
        beyond = np.zeros_like(out) if left or a.dtype.kind == "u" else np.where(a < 0, -1, 0)
        return np.where(ok, out, beyond).astype(a.dtype)
    return ref


# -- references ------------------------------------------------------------------------------------


def _ref_lerp(start, end, weight):
    start, end, weight = np.asarray(start), np.asarray(end), np.asarray(weight)
    diff = end - start
    one, half = np.asarray(1, start.dtype), np.asarray(0.5, start.dtype)
    return np.where(weight < half, start + weight * diff, end - diff * (one - weight))


def _nonzero_divisor(dims, dtypes, params, rng):
    shape = (dims["R"], dims["C"])
    a = rng.uniform(-20.0, 20.0, size=shape)
    b = rng.uniform(0.5, 3.0, size=shape) * rng.choice([-1.0, 1.0], size=shape)
    if np.dtype(dtypes[0]).kind == "i":
        return [np.round(a).astype(dtypes[0]), np.round(b * 3).astype(dtypes[1])]
    return [a.astype(dtypes[0]), b.astype(dtypes[1])]


def _shift_inputs(dims, dtypes, params, rng):
    shape = (dims["R"], dims["C"])
    bits = np.dtype(dtypes[0]).itemsize * 8
    return [rng.integers(0, 100, size=shape).astype(dtypes[0]),
            rng.integers(0, bits, size=shape).astype(dtypes[1])]


# -- the ops ---------------------------------------------------------------------------------------

_b = _bin._binary
_DIV_TYPES = ("float32", "float64", "float16", "int32", "int64")

atan2 = _b("atan2", _atan2, lambda y, x: np.arctan2(y, x),
           "Angle of the point (x, y) (np.arctan2), in [-pi, pi], with C's signed zeros.",
           arg_names=("y", "x"))
hypot = _b("hypot", _hypot, lambda a, b: np.hypot(a, b),
           "sqrt(a**2 + b**2) without overflow or underflow; inf if either is inf.")
copysign = _b("copysign", _copysign, lambda a, b: np.copysign(a, b),
              "|a| with the sign of b (its sign bit: -0.0 and -NaN count as negative).")
lerp = _b("lerp", _lerp, _ref_lerp,
          "torch.lerp's formula input + weight * (end - input), computed as end - (end - input) "
          "* (1 - weight) when weight >= 0.5, each product rounded (torch's CPU kernel switches "
          "at |weight| >= 0.5 and fuses the multiply-add: the last bit can differ, and at "
          "weight <= -0.5 with an infinite end - input torch gives NaN where this gives the "
          "formula's infinity).",
          arg_names=("input", "end", "weight"))
fmod = _b("fmod", _fmod_direct, _quiet(lambda a, b: np.fmod(a, b)),
          "C's fmod: a - trunc(a / b) * b exactly, with the sign of a; NaN for b == 0 (floats), "
          "0 for integers.", dtypes=_DIV_TYPES, make_inputs=_nonzero_divisor,
          fixup=_recompute_hard_tiles(_fmod_hard))
remainder = _b("remainder", _remainder_with(_fmod_direct),
               _quiet(lambda a, b: np.remainder(a, b)),
               "a mod b with the sign of b (Python's % and np.remainder).", dtypes=_DIV_TYPES,
               make_inputs=_nonzero_divisor,
               fixup=_recompute_hard_tiles(_remainder_with(_fmod_hard)))
floor_divide = _b("floor_divide", _floor_divide_with(_fmod_direct),
                  _quiet(lambda a, b: np.floor_divide(a, b)),
                  "floor(a / b) as np.floor_divide (Python's //).", dtypes=_DIV_TYPES,
                  make_inputs=_nonzero_divisor,
                  fixup=_recompute_hard_tiles(_floor_divide_with(_fmod_hard)))
fmax = _b("fmax", _fmax, lambda a, b: np.fmax(a, b),
          "Elementwise maximum ignoring NaN (np.fmax).", dtypes=FLOATS + ("int32", "int64"))
fmin = _b("fmin", _fmin, lambda a, b: np.fmin(a, b),
          "Elementwise minimum ignoring NaN (np.fmin).", dtypes=FLOATS + ("int32", "int64"))
logaddexp = _b("logaddexp", _logaddexp_base(False), _quiet(lambda a, b: np.logaddexp(a, b)),
               "log(exp(a) + exp(b)) without overflow.")
logaddexp2 = _b("logaddexp2", _logaddexp_base(True), _quiet(lambda a, b: np.logaddexp2(a, b)),
                "log2(2**a + 2**b) without overflow.")
heaviside = _b("heaviside", _heaviside, lambda x, h0: np.heaviside(x, h0),
               "Step function: 0 for x < 0, h0 at 0, 1 for x > 0 (np.heaviside).",
               arg_names=("x", "h0"))
bitwise_and = _b("bitwise_and", lambda a, b: a & b, lambda a, b: np.bitwise_and(a, b),
                 "a & b on integers (and bool).", dtypes=INTS + ("bool",))
bitwise_or = _b("bitwise_or", lambda a, b: a | b, lambda a, b: np.bitwise_or(a, b),
                "a | b on integers (and bool).", dtypes=INTS + ("bool",))
bitwise_xor = _b("bitwise_xor", lambda a, b: a ^ b, lambda a, b: np.bitwise_xor(a, b),
                 "a ^ b on integers (and bool).", dtypes=INTS + ("bool",))
left_shift = _b("left_shift", _shift(True), _ref_shift(np.left_shift, True),
                "a << b; 0 where b is negative or at least the bit width (as NumPy).",
                dtypes=INTS, make_inputs=_shift_inputs)
right_shift = _b("right_shift", _shift(False), _ref_shift(np.right_shift, False),
                 "a >> b (arithmetic for signed ints); beyond the width: 0, or -1 for a < 0.",
                 dtypes=INTS, make_inputs=_shift_inputs)
