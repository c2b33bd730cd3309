"""Float constants for op algorithms, exact on every target.

Halide's OpenCL C prints each float64 literal through float32 (``x * 0.1`` in float64 came out
with float32(0.1)'s relative error, 1.5e-8). A float64 constant is therefore written here: as a
plain literal when float32 holds it exactly (0, 0.5, small integers: Halide's simplifier still
sees the value, which bounds inference of index arithmetic needs), otherwise as the
reinterpretation of its 64 bits, which reaches the device exactly and which LLVM folds back into
the same literal on CPUs.

Every float64 constant in ``pypto/ops`` comes from :func:`lit64` or :func:`lit`;
``tests/ops/test_float_constants.py`` rejects a bare ``hl.f64(...)`` elsewhere.
"""

from __future__ import annotations

import math
import struct

import halide as hl


def exact_in_float32(v: float) -> bool:
    """Whether float32 holds ``v`` exactly (non-finite values count as exact: they print so)."""
    if not math.isfinite(v):
        return True
    try:
        return struct.unpack("<f", struct.pack("<f", v))[0] == v
    except OverflowError:           # beyond float32's range
        return False


def lit64(v: float) -> hl.Expr:
    """The float64 constant ``v``, exact on every target."""
    v = float(v)
    if exact_in_float32(v):
        return hl.f64(v)
    return hl.reinterpret(hl.Float(64), hl.u64(struct.unpack("<Q", struct.pack("<d", v))[0]))


def lit(t: hl.Type, v: float) -> hl.Expr:
    """The constant ``v`` in Halide type ``t``, rounded once from the Python (double) value.

    A narrower float or an integer type gets a literal Halide folds at compile time, so a float32
    kernel never carries a float64 value (a device without float64 support can still run it)."""
    if t.is_float() and t.bits() == 64:
        return lit64(v)
    return hl.cast(t, hl.f64(float(v)))


def fill(op_name: str, arg: str, t: hl.Type, v: float) -> hl.Expr:
    """A fill value ``v`` (an op's parameter ``arg``) as a constant of type ``t``.

    The one check of every fill: a value that ``t`` cannot hold raises a ParamError naming the
    op, the value and the range, where a cast would wrap it (int32 from 2**40 gave 0) or round it
    to infinity. As in torch: an integer type holds the values in [min, max] (compared exactly;
    a fraction inside is truncated toward zero, 2.7 fills 2), float32 the values up to its
    largest finite one (and inf, -inf and NaN), bool anything finite (nonzero is True).
    Infinities and NaN are fills only for float types."""
    from ..errors import ParamError

    where = f"{op_name}: parameter '{arg}' is {_show(v)}"
    if not math.isfinite(v) and not t.is_float():
        raise ParamError(f"{where}, which {_type_name(t)} values cannot hold; give a finite "
                         "value or a float array")
    if t.is_bool():
        return hl.cast(hl.Bool(), v != 0)
    if not t.is_float():
        lo, hi = _int_range(t)
        if not lo <= v <= hi:       # Python compares a float with an int exactly
            raise ParamError(f"{where}, outside the range of {_type_name(t)} [{lo}, {hi}]; "
                             f"give a value in range or cast the array first")
    elif t.bits() == 32 and math.isfinite(v) and abs(v) > _F32_MAX:
        raise ParamError(f"{where}, beyond float32's largest finite value {_F32_MAX!r} "
                         "(it would round to infinity); give inf itself or a float64 array")
    return lit(t, v)


#: float32's largest finite value, exactly (as a Python float).
_F32_MAX = struct.unpack("<f", struct.pack("<I", 0x7F7FFFFF))[0]


def _int_range(t: hl.Type) -> tuple[int, int]:
    n = t.bits()
    return (0, (1 << n) - 1) if t.is_uint() else (-(1 << (n - 1)), (1 << (n - 1)) - 1)


def _show(v: float) -> str:
    """``v`` as a user wrote it: an integral value without a fraction (2**40, not 1.0995e12)."""
    return str(int(v)) if math.isfinite(v) and float(v).is_integer() and abs(v) < 1e21 \
        else repr(v)


def _type_name(t: hl.Type) -> str:
    if t.is_bool():
        return "bool"
    return f"{'u' if t.is_uint() else ''}int{t.bits()}"   # the only other non-float types
