"""Rules of the reductions, on their canonical form: x [O, R] reduced along R to [O].

``max``/``min`` split the gradient evenly among tied extremes (PyTorch's ``amax``); ``prod``
divides the product by each element where a row holds no zero, and otherwise gives PyTorch's
gradient: a row with one zero passes the product of its other elements to the zero and 0 to the
rest, a row with two or more zeros passes 0 (the division gave NaN there); ``std`` passes 0 where
it is 0 (a constant row), as PyTorch does, and ``var``/``std`` with ``ddof`` equal to the
reduced length divide by 0 as the forward does (inf/NaN gradients, PyTorch's) instead of raising
ZeroDivisionError; ``argmax``/``argmin`` are not differentiable.
``nansum``/``nanmean`` pass nothing to NaNs; ``nanmax``/``nanmin`` follow ``max``/``min``;
``vector_norm`` passes nothing where a row's norm is 0; ``all``/``any``/``count_nonzero`` are
step functions (nothing flows back).
"""

from __future__ import annotations

import math

from ... import ops
from .. import shapes
from . import ZERO, Constant, NotDifferentiable, mark, rule


def _spread(v, r):
    return shapes.expand_rows(v, r)


@rule("sum")
def _sum(c):
    return [_spread(c.dy, c.dims["R"])]


@rule("mean")
def _mean(c):
    return [_spread(c.dy * (1.0 / c.dims["R"]), c.dims["R"])]


def _extreme(c):
    x = c.inputs[0]
    r = c.dims["R"]
    hit = x == _spread(c.y, r)
    count = hit.astype(x.dtype).sum(axis=1)
    return [ops.where(hit, _spread(c.dy / count, r), 0.0)]


rule("max", "min")(_extreme)


@rule("prod")
def _prod(c):
    x, r = c.inputs[0], c.dims["R"]
    zero = x == 0.0
    zeros = zero.astype(x.dtype).sum(axis=1)                  # [O]: zeros in each row
    # the product of the row's nonzero elements: the gradient of its one zero, if it has one
    others = ops.prod(ops.where(zero, 1.0, x), axis=1)
    plain = _spread(c.dy * c.y, r) / ops.where(zero, 1.0, x)
    lone = _spread(ops.where(zeros == 1.0, c.dy * others, 0.0), r)
    return [ops.where(_spread(zeros, r) == 0.0, plain, ops.where(zero, lone, 0.0))]


def _centered(x, r):
    return x - _spread(ops.mean(x, axis=1), r)


def _over(num: float, r, ddof) -> float:
    """num / (r - ddof), inf where ddof is the reduced length (the forward divides by 0 too)."""
    d = r - ddof
    return num / d if d != 0 else math.inf


@rule("var")
def _var(c):
    x, r = c.inputs[0], c.dims["R"]
    k = _over(2.0, r, c.params.get("ddof", 0))
    return [_spread(c.dy * k, r) * _centered(x, r)]


@rule("std")
def _std(c):
    x, r = c.inputs[0], c.dims["R"]
    k = _over(1.0, r, c.params.get("ddof", 0))
    y = c.y
    # PyTorch's: nothing flows where std is 0 (a constant row), where dy / y was NaN
    scaled = ops.where(y == 0.0, 0.0, c.dy / ops.where(y == 0.0, 1.0, y))
    return [_spread(scaled * k, r) * _centered(x, r)]


@rule("logsumexp")
def _logsumexp(c):
    x, r = c.inputs[0], c.dims["R"]
    return [_spread(c.dy, r) * ops.exp(x - _spread(c.y, r))]


mark(NotDifferentiable("it returns an integer index"), "argmax", "argmin")


# -- the scan module's reductions: NaN-ignoring ones, vector_norm, all/any/count_nonzero -----------

@rule("nansum")
def _nansum(c):
    x = c.inputs[0]
    return [ops.where(ops.isnan(x), 0.0, _spread(c.dy, c.dims["R"]))]


@rule("nanmean")
def _nanmean(c):
    x, r = c.inputs[0], c.dims["R"]
    nan = ops.isnan(x)
    count = (~nan).astype(x.dtype).sum(axis=1)
    return [ops.where(nan, 0.0, _spread(c.dy / count, r))]


rule("nanmax", "nanmin")(_extreme)       # a NaN never equals the result: it gets nothing


COUNT = Constant("it counts nonzero elements: a step function of its input")


@rule("vector_norm")
def _vector_norm(c):
    """ord 2: dy x / |x|; 1: dy sign(x); inf/-inf: the extreme |x| (ties split, signed);
    p: dy sign(x) |x|**(p-1) / |x|_p**(p-1); 0 counts nonzeros (nothing flows). Rows whose
    norm is 0 get 0."""
    x, r = c.inputs[0], c.dims["R"]
    kind, p = c.params["ord"], c.params["p"]
    y = _spread(c.y, r)
    if kind == "0":
        return [COUNT]
    if kind == "1":
        return [_spread(c.dy, r) * ops.sign(x)]
    if kind in ("inf", "-inf"):
        hit = ops.abs(x) == y
        count = hit.astype(x.dtype).sum(axis=1)
        return [ops.where(hit, _spread(c.dy / count, r) * ops.sign(x), 0.0)]
    safe = ops.where(y > 0, y, 1.0)
    if kind == "2":
        return [ops.where(y > 0, _spread(c.dy, r) * x / safe, 0.0)]
    grow = ops.sign(x) * ops.pow(ops.abs(x), p - 1.0) / ops.pow(safe, p - 1.0)
    return [ops.where(y > 0, _spread(c.dy, r) * grow, 0.0)]

mark(COUNT, "count_nonzero")
mark(ZERO, "all", "any")
