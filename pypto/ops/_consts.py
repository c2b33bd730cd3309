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
    """A fill value ``v`` (an op's parameter ``arg``) as a constant of type ``t``. Infinities and
    NaN are fills only for float types: an integer or bool array has no such value, so those
    raise a ParamError instead of an arbitrary cast."""
    from ..errors import ParamError

    if not math.isfinite(v) and not t.is_float():
        kind = _type_name(t)
        raise ParamError(f"{op_name}: parameter '{arg}' is {v!r}, which {kind} values cannot "
                         "hold; give a finite value or a float array")
    if t.is_bool():
        return hl.cast(hl.Bool(), v != 0)
    return lit(t, v)


def _type_name(t: hl.Type) -> str:
    if t.is_bool():
        return "bool"
    return f"{'u' if t.is_uint() else ''}int{t.bits()}"   # the only other non-float types
