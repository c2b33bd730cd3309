"""Rules of the reductions, on their canonical form: x [O, R] reduced along R to [O].

``max``/``min`` split the gradient evenly among tied extremes (PyTorch's ``amax``); ``prod``
divides the product by each element, so an input holding zeros gives inf/NaN there (as a
closed form cannot avoid without a second product); ``argmax``/``argmin`` are not differentiable.
"""

from __future__ import annotations

from ... import ops
from .. import shapes
from . import NotDifferentiable, mark, rule


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
