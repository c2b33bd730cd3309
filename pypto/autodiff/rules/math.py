"""Rules of the math and arith ops: inverse and hyperbolic trig, exp2/log2/log10, cbrt, the
two-argument functions (atan2, hypot, copysign, lerp, fmax/fmin, logaddexp, fmod, remainder,
heaviside) and the step functions.

Closed forms on the kernels' flat [N] (unary) or [R, C] (binary, already broadcast) form, as
PyTorch writes them. Where the math leaves a choice PyTorch's is taken: ``fmax``/``fmin`` pass
the gradient to the number when the other argument is NaN and, on ties, all of it to the first
argument (PyTorch 2.13's ``a >= b`` mask; unlike ``maximum``, which splits ties); ``copysign``
passes nothing to ``a`` at ``a == 0`` and nothing to ``b``;
``fmod``/``remainder`` give ``b`` the gradient ``-trunc(a / b)`` / ``-floor(a / b)``;
``heaviside`` passes to ``h0`` where ``x == 0`` only; ``hypot`` passes nothing at (0, 0) (PyTorch
gives NaN there; 0 is the norms' choice); ``atan2`` passes nothing at (0, 0), as PyTorch.
``sign``, ``trunc`` and ``floor_divide`` are step functions (zero gradient, as PyTorch's);
``isnan``/``isinf``/``isfinite``/``signbit`` give masks; the bitwise ops and shifts work on
integer bits and are not differentiable.
"""

from __future__ import annotations

import math

from ... import ops
from . import ZERO, Constant, NotDifferentiable, mark, rule
from .elementwise import _unary

_LN2 = math.log(2.0)
_LN10 = math.log(10.0)


# -- unary -----------------------------------------------------------------------------------------

@_unary("asin")
def _asin(x, y, dy, p):
    return dy * ops.rsqrt(1.0 - x * x)


@_unary("acos")
def _acos(x, y, dy, p):
    return -dy * ops.rsqrt(1.0 - x * x)


@_unary("atan")
def _atan(x, y, dy, p):
    return dy / (1.0 + x * x)


@_unary("asinh")
def _asinh(x, y, dy, p):
    return dy * ops.rsqrt(x * x + 1.0)


@_unary("acosh")
def _acosh(x, y, dy, p):
    # x**2 - 1 without cancellation near 1; + 0.0 turns the -0.0 of x = -1 into +0.0 (+inf,
    # as PyTorch's, not -inf; the value is NaN there).
    return dy * ops.rsqrt((x - 1.0) * (x + 1.0) + 0.0)


@_unary("atanh")
def _atanh(x, y, dy, p):
    return dy / ((1.0 - x) * (1.0 + x))


@_unary("sinh")
def _sinh(x, y, dy, p):
    return dy * ops.cosh(x)


@_unary("cosh")
def _cosh(x, y, dy, p):
    return dy * ops.sinh(x)


@_unary("tan")
def _tan(x, y, dy, p):
    return dy * (1.0 + y * y)


@_unary("exp2")
def _exp2(x, y, dy, p):
    return dy * y * _LN2


@_unary("log2")
def _log2(x, y, dy, p):
    return dy / (x * _LN2)


@_unary("log10")
def _log10(x, y, dy, p):
    return dy / (x * _LN10)


@_unary("cbrt")
def _cbrt(x, y, dy, p):
    return dy / (3.0 * y * y)


@_unary("deg2rad")
def _deg2rad(x, y, dy, p):
    return dy * (math.pi / 180.0)


@_unary("rad2deg")
def _rad2deg(x, y, dy, p):
    return dy * (180.0 / math.pi)


@_unary("nan_to_num")
def _nan_to_num(x, y, dy, p):
    return ops.where(ops.isfinite(x), dy, 0.0)


_STEP = Constant("it is a step function: its gradient is zero wherever it exists, as in PyTorch")
mark(_STEP, "sign", "trunc", "floor_divide")
mark(ZERO, "isnan", "isinf", "isfinite", "signbit")
mark(NotDifferentiable("it works on the bits of integers and bools"),
     "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not", "left_shift", "right_shift")


# -- binary ----------------------------------------------------------------------------------------

@rule("atan2")
def _atan2(c):
    y, x = c.inputs
    r = x * x + y * y
    # PyTorch's: nothing flows at (0, 0), where x / r and y / r were 0 / 0 (NaN)
    inv = ops.where(r == 0.0, 0.0, 1.0 / ops.where(r == 0.0, 1.0, r))
    return [c.dy * x * inv, -c.dy * y * inv]


@rule("hypot")
def _hypot(c):
    a, b = c.inputs
    h = c.y
    # (Tested as h == 0, not h > 0: a NaN argument gets NaN, where it got 0.)
    safe = ops.where(h == 0, 1.0, h)
    return [ops.where(h == 0, 0.0, c.dy * a / safe), ops.where(h == 0, 0.0, c.dy * b / safe)]


@rule("copysign")
def _copysign(c):
    a, _ = c.inputs
    same = ops.where(a == 0, 0.0, c.y / ops.where(a == 0, 1.0, a))   # +-1: the sign flip
    return [c.dy * same, Constant("copysign uses only the sign of b")]


@rule("lerp")
def _lerp(c):
    start, end, w = c.inputs
    return [c.dy * (1.0 - w), c.dy * w, c.dy * (end - start)]


def _nan_extreme(c, greater: bool):
    """PyTorch's: ``a`` takes the whole gradient where ``a >= b`` (``<=`` for fmin), ties
    included, or where ``b`` is NaN (both NaN: ``a``); ``b`` takes it everywhere else."""
    a, b = c.inputs
    keeps = (a >= b) if greater else (a <= b)
    wins = keeps | ops.isnan(b)            # a NaN loses to a number (both NaN: a takes it)
    return [ops.where(wins, c.dy, 0.0), ops.where(wins, 0.0, c.dy)]


@rule("fmax")
def _fmax(c):
    return _nan_extreme(c, True)


@rule("fmin")
def _fmin(c):
    return _nan_extreme(c, False)


@rule("logaddexp")
def _logaddexp(c):
    a, b = c.inputs
    # exp(a - y) is NaN at a = inf (inf - inf); the same weight as a sigmoid of a - b is 1
    # there, as PyTorch's.
    return [c.dy * ops.sigmoid(a - b), c.dy * ops.sigmoid(b - a)]


@rule("logaddexp2")
def _logaddexp2(c):
    a, b = c.inputs
    ln2 = 0.6931471805599453
    return [c.dy * ops.sigmoid((a - b) * ln2), c.dy * ops.sigmoid((b - a) * ln2)]


@rule("fmod")
def _fmod(c):
    a, b = c.inputs
    return [c.dy, -c.dy * ops.trunc(a / b)]


@rule("remainder")
def _remainder(c):
    a, b = c.inputs
    # An infinite divisor of the other sign gives b itself (0.5 % -inf = -inf, the quotient
    # -1, as PyTorch's gradient has it); floor(a / b) said -0.
    # An infinite a (the value is NaN) gives NaN, as PyTorch's; floor(a / b) said +-inf.
    q = ops.where(ops.isinf(b) & (c.y == b), -1.0, ops.floor(a / b))
    q = ops.where(ops.isinf(a), float("nan"), q)
    return [c.dy, -c.dy * q]


@rule("heaviside")
def _heaviside(c):
    x, _ = c.inputs
    return [_STEP, ops.where(x == 0, c.dy, 0.0)]
