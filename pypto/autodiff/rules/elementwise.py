"""Rules of the elementwise ops: closed forms on the flat [N] (unary) or [R, C] (binary) form.

The frontends broadcast before the kernel call (a ``view:broadcast`` node), so a binary rule sees
inputs of one shape; un-broadcasting happens in the broadcast view's rule.

Choices where the math leaves one, as PyTorch makes them: ``relu``, ``abs`` and ``clip`` pass
nothing at their kinks' left side (``relu'(0) = 0``, ``abs'(0) = 0``, ``clip`` passes where
``min <= x <= max``); ``maximum``/``minimum`` split the gradient evenly on ties and pass all of it
to both arguments where either is NaN; ``pow`` passes nothing to its base where the exponent is
0, and to its exponent ``a**b log a`` (0 at ``a == 0, b >= 0``; NaN for ``a < 0``); ``floor``,
``ceil`` and ``round`` have zero gradient (use ``@pypto.def_gradient`` for a straight-through
estimator).
"""

from __future__ import annotations

import math

from ... import ops
from .. import shapes
from . import NotDifferentiable, ZERO, mark, rule


def _unary(*names):
    """Registers ``fn(x, y, dy, params) -> dx`` as a one-input rule."""
    def wrap(fn):
        return rule(*names)(lambda c: [fn(c.inputs[0], c.y, c.dy, c.params)])
    return wrap


def _zero_like(t):
    return shapes.zeros(t.shape, t.dtype)


@_unary("neg")
def _neg(x, y, dy, p):
    return -dy


@_unary("abs")
def _abs(x, y, dy, p):
    return ops.where(x > 0, dy, ops.where(x < 0, -dy, 0.0))


@_unary("exp")
def _exp(x, y, dy, p):
    return dy * y


@_unary("expm1")
def _expm1(x, y, dy, p):
    return dy * (y + 1.0)


@_unary("log")
def _log(x, y, dy, p):
    return dy / x


@_unary("log1p")
def _log1p(x, y, dy, p):
    return dy / (x + 1.0)


@_unary("sqrt")
def _sqrt(x, y, dy, p):
    return dy * 0.5 / y


@_unary("rsqrt")
def _rsqrt(x, y, dy, p):
    return dy * -0.5 * y * y * y


@_unary("sin")
def _sin(x, y, dy, p):
    return dy * ops.cos(x)


@_unary("cos")
def _cos(x, y, dy, p):
    return -dy * ops.sin(x)


@_unary("tanh")
def _tanh(x, y, dy, p):
    return dy * (1.0 - y * y)


@_unary("sigmoid")
def _sigmoid(x, y, dy, p):
    return dy * y * (1.0 - y)


@_unary("relu")
def _relu(x, y, dy, p):
    return ops.where(x > 0, dy, 0.0)


@_unary("leaky_relu")
def _leaky_relu(x, y, dy, p):
    return ops.where(x > 0, dy, dy * p["negative_slope"])


def silu_grad(x):
    """d silu / dx = s (1 + x (1 - s)) with s = sigmoid(x)."""
    s = ops.sigmoid(x)
    return s * (1.0 + x * (1.0 - s))


@_unary("silu")
def _silu(x, y, dy, p):
    return dy * silu_grad(x)


def gelu_grad(x, approximate="none", y=None):
    """d gelu / dx, erf form or (approximate="tanh") the tanh form; ``y`` is gelu(x) when the
    caller has it.

    The erf form is Phi(x) + x phi(x). Below x = -1, Phi(x) is gelu(x) / x: the op computes its
    tail without cancelling, where 0.5 (1 + erf(x / sqrt 2)) lost every digit (the gradient was
    3% off at x = -6 in float32, 1.2% at -9 in float64). The sum itself does not cancel there:
    Phi(x) is about phi(x) / |x|, under a third of |x| phi(x)."""
    if approximate == "tanh":
        k = math.sqrt(2.0 / math.pi)
        t = ops.tanh(k * (x + 0.044715 * x * x * x))
        return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * k * (1.0 + 3 * 0.044715 * x * x)
    if y is None:
        y = ops.gelu(x)
    cdf = ops.where(x < -1.0, y / x, 0.5 * (1.0 + ops.erf(x * (1.0 / math.sqrt(2.0)))))
    pdf = ops.exp(-0.5 * x * x) * (1.0 / math.sqrt(2.0 * math.pi))
    return cdf + x * pdf


@_unary("gelu")
def _gelu(x, y, dy, p):
    return dy * gelu_grad(x, p.get("approximate", "none"), y)


@_unary("erf")
def _erf(x, y, dy, p):
    return dy * (2.0 / math.sqrt(math.pi)) * ops.exp(-(x * x))


@_unary("floor", "ceil", "round")
def _steps(x, y, dy, p):
    return _zero_like(x)


@_unary("clip")
def _clip(x, y, dy, p):
    keep = None
    if p.get("min") is not None:
        keep = x >= p["min"]
    if p.get("max") is not None:
        upper = x <= p["max"]
        keep = upper if keep is None else keep & upper
    return dy if keep is None else ops.where(keep, dy, 0.0)


@_unary("square")
def _square(x, y, dy, p):
    return 2.0 * x * dy


@_unary("reciprocal")
def _reciprocal(x, y, dy, p):
    return -dy * y * y


@_unary("softplus")
def _softplus(x, y, dy, p):
    # d/dx log(1 + e**(beta x)) / beta = sigmoid(beta x); 1 where the op returns x (torch's rule)
    beta, threshold = p.get("beta", 1.0), p.get("threshold", math.inf)
    t = x if beta == 1.0 else x * beta
    slope = ops.sigmoid(t)
    if threshold != math.inf:
        slope = ops.where(t > threshold, 1.0, slope)
    return dy * slope


# -- binary ----------------------------------------------------------------------------------------

@rule("add")
def _add(c):
    return [c.dy, c.dy]


@rule("sub")
def _sub(c):
    return [c.dy, -c.dy]


@rule("mul")
def _mul(c):
    a, b = c.inputs
    return [c.dy * b, c.dy * a]


@rule("div")
def _div(c):
    a, b = c.inputs
    return [c.dy / b, -c.dy * c.y / b]


@rule("pow")
def _pow(c):
    a, b = c.inputs
    # PyTorch's: nothing flows to a where b == 0 (b a**(b-1) was 0 * inf = NaN at a = 0)
    da = ops.where(b == 0.0, 0.0, c.dy * b * ops.pow(a, b - 1.0))
    # d/db a**b = a**b log a, PyTorch's: 0 at a = 0 with b >= 0 (the limit), else as written
    # (NaN for a < 0, where a**b has no derivative in b; -inf at a = 0 with b < 0)
    limit = (a == 0.0) & (b >= 0.0)
    db = ops.where(limit, 0.0, c.dy * c.y * ops.log(ops.where(limit, 1.0, a)))
    return [da, db]


def _extreme(c, greater: bool):
    """PyTorch's: half each on a tie; where either is NaN (the result is NaN) both take all of
    the gradient (the mask only removes it from the strict loser)."""
    a, b = c.inputs
    half = c.dy * 0.5
    a_loses = (a < b) if greater else (a > b)
    b_loses = (b < a) if greater else (b > a)
    tie = a == b
    da = ops.where(a_loses, 0.0, ops.where(tie, half, c.dy))
    db = ops.where(b_loses, 0.0, ops.where(tie, half, c.dy))
    return [da, db]


@rule("maximum")
def _maximum(c):
    return _extreme(c, True)


@rule("minimum")
def _minimum(c):
    return _extreme(c, False)


@rule("swiglu")
def _swiglu(c):
    x, y = c.inputs
    return [c.dy * y * silu_grad(x), c.dy * ops.silu(x)]


@rule("where")
def _where(c):
    cond = c.inputs[0]
    return [None, ops.where(cond, c.dy, 0.0), ops.where(cond, 0.0, c.dy)]


mark(ZERO, "greater", "greater_equal", "less", "less_equal", "equal", "not_equal",
     "logical_and", "logical_or", "logical_not")
mark(NotDifferentiable("its output is integer-valued (quantization to int8/int16/uint8)"),
     "quantize", "requantize")


@rule("dequantize", "quantized_matmul")
def _integer_inputs(c):
    """Integer inputs carry no gradient: the op that made them from floats (quantize) is named."""
    return [None] * len(c.inputs)
