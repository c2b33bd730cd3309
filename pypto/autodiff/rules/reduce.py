"""Rules of the reductions, on their canonical form: x [O, R] reduced along R to [O].

``max``/``min`` split the gradient evenly among tied extremes (PyTorch's ``amax``); ``prod``
divides the product by each element, so an input holding zeros gives inf/NaN there (as a
closed form cannot avoid without a second product); ``argmax``/``argmin`` are not differentiable.
``nansum``/``nanmean`` pass nothing to NaNs; ``nanmax``/``nanmin`` follow ``max``/``min``;
``vector_norm`` passes nothing where a row's norm is 0; ``all``/``any``/``count_nonzero`` are
step functions (nothing flows back).
"""

from __future__ import annotations

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
    x = c.inputs[0]
    return [_spread(c.dy * c.y, c.dims["R"]) / x]


def _centered(x, r):
    return x - _spread(ops.mean(x, axis=1), r)


@rule("var")
def _var(c):
    x, r = c.inputs[0], c.dims["R"]
    k = 2.0 / (r - c.params.get("ddof", 0))
    return [_spread(c.dy * k, r) * _centered(x, r)]


@rule("std")
def _std(c):
    x, r = c.inputs[0], c.dims["R"]
    k = 1.0 / (r - c.params.get("ddof", 0))
    return [_spread(c.dy * k / c.y, r) * _centered(x, r)]


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
