"""Rules of the activations (``torch.nn.functional``'s names): hardsigmoid ... prelu, glu, geglu
and softmin.

At a kink the one-sided choice is PyTorch's: ``hardtanh``/``relu6``/``hardsigmoid`` pass nothing
at their bounds, ``hardswish`` takes the inner formula on (-3, 3) only (0 at -3, 1 at 3, as
PyTorch 2.13), ``hardshrink``/``softshrink`` pass nothing at +-lambd, ``threshold`` passes
where ``x <= threshold`` is false (a NaN x, everything under a NaN threshold), ``prelu`` takes the
slope ``weight`` at 0 (PyTorch's ``x > 0`` test), and ``logit`` with ``eps`` passes nothing where
x was clamped (inclusive bounds: inside [eps, 1 - eps] it is the plain derivative).

``glu``/``geglu`` see x as [R, 2, C] (the two halves); their gradient is the two halves' gradients
stacked back into that form.
"""

from __future__ import annotations

from ... import ops
from .. import shapes
from . import rule
from .elementwise import _unary, gelu_grad

_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def _inside(x, lo, hi):
    return (x > lo) & (x < hi)


@_unary("hardsigmoid")
def _hardsigmoid(x, y, dy, p):
    return ops.where(_inside(x, -3.0, 3.0), dy * (1.0 / 6.0), 0.0)


@_unary("hardswish")
def _hardswish(x, y, dy, p):
    inner = dy * (x * (1.0 / 3.0) + 0.5)
    return ops.where(x <= -3.0, 0.0, ops.where(x < 3.0, inner, dy))


@_unary("mish")
def _mish(x, y, dy, p):
    t = ops.tanh(ops.softplus(x))
    return dy * (t + x * ops.sigmoid(x) * (1.0 - t * t))


@_unary("elu")
def _elu(x, y, dy, p):
    return ops.where(x > 0, dy, dy * p["alpha"] * ops.exp(x))


@_unary("selu")
def _selu(x, y, dy, p):
    return ops.where(x > 0, dy * _SELU_SCALE, dy * (_SELU_SCALE * _SELU_ALPHA) * ops.exp(x))


@_unary("celu")
def _celu(x, y, dy, p):
    return ops.where(x > 0, dy, dy * ops.exp(x * (1.0 / p["alpha"])))


@_unary("softsign")
def _softsign(x, y, dy, p):
    d = 1.0 + ops.abs(x)
    return dy / (d * d)


@_unary("hardtanh")
def _hardtanh(x, y, dy, p):
    return ops.where(_inside(x, p["min_val"], p["max_val"]), dy, 0.0)


@_unary("relu6")
def _relu6(x, y, dy, p):
    return ops.where(_inside(x, 0.0, 6.0), dy, 0.0)


@_unary("logit")
def _logit(x, y, dy, p):
    eps = p.get("eps")
    if eps is None:
        # Outside [0, 1] the value is NaN and so is its gradient (PyTorch's; the formula alone
        # gave finite gradients there, -0.6 at x = 2); at 0 and -0 both +inf.
        return ops.where((x >= 0.0) & (x <= 1.0), dy / ops.abs(x * (1.0 - x)), float("nan"))
    g = dy / (x * (1.0 - x))
    # Written as "outside" so that a NaN x (neither) gets NaN, as PyTorch's.
    return ops.where((x < eps) | (x > 1.0 - eps), 0.0, g)


@_unary("tanhshrink")
def _tanhshrink(x, y, dy, p):
    t = ops.tanh(x)
    return dy * t * t


@_unary("hardshrink", "softshrink")
def _shrink(x, y, dy, p):
    return ops.where(ops.abs(x) > p["lambd"], dy, 0.0)


@_unary("threshold")
def _threshold(x, y, dy, p):
    t = p["threshold"]
    if t != t:                       # a NaN threshold replaces nothing: the identity
        return dy
    return ops.where(x <= t, 0.0, dy)   # torch's test: a NaN x passes its gradient


@_unary("log_sigmoid")
def _log_sigmoid(x, y, dy, p):
    return dy * ops.sigmoid(-x)


@rule("prelu")
def _prelu(c):
    x, w = c.inputs
    pos = x > 0                       # PyTorch's: x = 0 takes the slope w
    return [ops.where(pos, c.dy, c.dy * w), ops.where(pos, 0.0, c.dy * x)]


def _halves(c, gate, gate_grad):
    """x [R, 2, C] -> a * gate(b): the gradients of a and b stacked back as [R, 2, C]."""
    x = c.inputs[0]
    a, b = x[:, 0], x[:, 1]
    r, _, n = x.shape
    da = (c.dy * gate(b)).reshape(r, 1, n)
    db = (c.dy * a * gate_grad(b)).reshape(r, 1, n)
    return [shapes.pad_axis(da, 1, 0, 1) + shapes.pad_axis(db, 1, 1, 0)]


@rule("glu")
def _glu(c):
    def sig_grad(b):
        s = ops.sigmoid(b)
        return s * (1.0 - s)
    return _halves(c, ops.sigmoid, sig_grad)


@rule("geglu")
def _geglu(c):
    approx = c.params.get("approximate", "none")
    return _halves(c, lambda b: ops.gelu(b, approximate=approx),
                   lambda b: gelu_grad(b, approx))


@rule("softmin")
def _softmin(c):
    y, dy = c.y, c.dy
    return [-(y * (dy - shapes.total(dy * y, 1, keepdims=True)))]
