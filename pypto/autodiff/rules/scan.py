"""Rules of the scans and the sorting ops, on their [O, R, I] kernel form (along R).

* cumsum: the reversed cumulative sum of the gradient (flip, cumsum, flip: the flips are views);
* cumprod: ``revcumsum(dy * y) / x`` before a row's first zero; at the first zero the same sum
  with that zero replaced by 1 (a second cumprod); nothing after it. Exact with zeros, as
  PyTorch's;
* logcumsumexp: ``sum_{i >= j} dy_i exp(x_j - y_i)``, summed in log space with the positive and
  negative parts of dy apart (a reversed logcumsumexp each), so nothing overflows;
* cummax/cummin, topk: each value's gradient goes to the index the op returned (a scatter-add);
* sort: the permutation is recomputed with argsort (same order, ties included) and the gradient
  scattered back through it; median: to the middle element, or half to each of the two middle
  ones of an even row; a row holding NaN (its median is NaN) passes it to its first NaN, as
  PyTorch;
* argsort returns indices: not differentiable, like argmax.
"""

from __future__ import annotations

import math

from ... import ops
from .. import shapes
from . import NotDifferentiable, mark, rule


def _rev_scan(kernel, t):
    """``kernel`` (a scan along axis 1) run from the end of each row."""
    return shapes.flip_axes(kernel(shapes.flip_axes(t, [1])), [1])


def _revcumsum(t):
    return _rev_scan(ops.cumsum.kernel, t)


def _scatter(shape, index, src):
    return ops.scatter_add.kernel(shapes.zeros(shape, src.dtype), index, src)


@rule("cumsum")
def _cumsum(c):
    return [_revcumsum(c.dy)]


@rule("cumprod")
def _cumprod(c):
    x, y, dy = c.inputs[0], c.y, c.dy
    zero = x == 0
    seen = ops.cumsum.kernel(zero.astype(x.dtype))            # zeros up to here, inclusive
    before = seen == 0
    first = zero & (seen == 1)
    plain = _revcumsum(dy * y) / ops.where(before, x, 1.0)
    skipped = ops.cumprod.kernel(ops.where(first, 1.0, x))     # the first zero left out
    at_zero = _revcumsum(dy * skipped)
    return [ops.where(before, plain, ops.where(first, at_zero, 0.0))]


@rule("logcumsumexp")
def _logcumsumexp(c):
    x, y, dy = c.inputs[0], c.y, c.dy

    def part(sign):
        mag = dy * sign
        log_mag = ops.where(mag > 0, ops.log(ops.where(mag > 0, mag, 1.0)), -math.inf)
        return ops.exp(x + _rev_scan(ops.logcumsumexp.kernel, log_mag - y))

    return [part(1.0) - part(-1.0)]


@rule("cummax", "cummin", "topk")
def _at_indices(c):
    x = c.inputs[0]
    return [_scatter(x.shape, c.outs[1], c.dys[0])]


@rule("sort")
def _sort(c):
    x = c.inputs[0]
    order = ops.argsort.kernel(x, **c.params)
    return [_scatter(x.shape, order, c.dy)]


@rule("median")
def _median(c):
    x = c.inputs[0]
    o, r, i = x.shape
    order = ops.argsort.kernel(x, descending=False, width=c.params["width"])
    lo, hi = (r - 1) // 2, r // 2
    dy = c.dy.reshape(o, 1, i)
    if lo == hi:
        got = _scatter(x.shape, order[:, lo:lo + 1], dy)
    else:
        half = (dy * 0.5).broadcast_to((o, 2, i))
        got = _scatter(x.shape, order[:, lo:hi + 1], half)
    # a row holding NaN has the median NaN: its gradient goes to the row's first NaN, as
    # PyTorch's (the sorted middle, a number, had it)
    nan = ops.isnan(x)
    seen = ops.cumsum.kernel(nan.astype(x.dtype))
    first = nan & (seen == 1.0)
    has_nan = seen[:, r - 1:r] > 0.0                               # [O, 1, I]
    return [ops.where(has_nan, ops.where(first, dy, 0.0), got)]


mark(NotDifferentiable("it returns integer indices"), "argsort")
