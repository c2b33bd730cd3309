"""Rules of the reductions, on their canonical form: x [O, R] reduced along R to [O].

``max``/``min`` split the gradient evenly among tied extremes (PyTorch's ``amax``: a row holding
NaN gets NaN); ``prod`` divides the product by each element where a row holds no zero, and
otherwise passes each element the product of the others (PyTorch's, NaN and inf included; the
division gave NaN there); ``std`` passes 0 where it is 0 (a constant row), as PyTorch does, and
``var``/``std`` with ``ddof`` equal to the reduced length divide by 0 as the forward does
(inf/NaN gradients, PyTorch's) instead of raising ZeroDivisionError; ``argmax``/``argmin`` are
not differentiable.
``nansum``/``nanmean`` pass nothing to NaNs; ``nanmax``/``nanmin`` split among the tied extremes
(NaNs get nothing; a row of NaNs passes 0);
``vector_norm`` is PyTorch's ``norm_backward`` (see its rule); ``all``/``any``/``count_nonzero`` are
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


def _extreme(c, nan_row_nan: bool = False):
    """``dy`` split evenly among each row's tied extremes. ``max``/``min`` are PyTorch's
    ``amax``/``amin`` (``scale_grad_by_count``): ``dy / count`` times the mask, a product, so a
    row holding NaN (its extreme NaN, which no element equals) gets ``dy / 0 * 0``, NaN on the
    whole row, as torch's amax and TensorFlow's reduce_max give (it was 0). torch's ``max()``
    without a dim and ``max(dim)`` pass it to the NaNs instead (split, or the first one);
    PyPTO's ``max`` is ``amax``: ties split, an axis tuple, ``keepdims``. ``nanmax``/``nanmin``
    select instead: NaNs get nothing, and a row of NaNs passes 0."""
    x = c.inputs[0]
    r = c.dims["R"]
    hit = x == _spread(c.y, r)
    share = _spread(c.dy / hit.astype(x.dtype).sum(axis=1), r)
    if nan_row_nan:
        return [share * hit.astype(x.dtype)]
    return [ops.where(hit, share, 0.0)]


@rule("max", "min")
def _max_min(c):
    return _extreme(c, nan_row_nan=True)


def _others(x):
    """The product of each element's others in its row of [O, R]: the products before it times
    those after it, two exclusive cumulative products (PyTorch's prod_safe_zeros_backward), so
    a zero, an inf or a NaN elsewhere in the row gives the value multiplying through does."""
    before = ops.cumprod(shapes.pad_axis(x, 1, 1, -1, fill=1.0), axis=1)
    after = shapes.flip_axes(ops.cumprod(shapes.pad_axis(shapes.flip_axes(x, [1]), 1, 1, -1,
                                                         fill=1.0), axis=1), [1])
    return before * after


@rule("prod")
def _prod(c):
    """PyTorch's: ``dy (y / x)`` in a row without zeros; in a row with one, ``dy`` times the
    product of the others, multiplied out (a NaN or inf times the zero is NaN, as torch's:
    [2, nan, 0, 3] passes [nan, 0, nan, nan], [inf, 0, 2] [0, inf, nan]; the rule gave 0 to
    all but the zero). torch chooses between the two on the whole tensor (any zero anywhere
    takes the product of the others for every row: [inf, 2, 3] then passes 6, not NaN, to the
    inf), and its ``prod()`` without a dim passes zeros when two or more zeros are there
    (without create_graph); here each row chooses for itself, as ``prod(dim)`` does where the
    row holds a zero."""
    x, r = c.inputs[0], c.dims["R"]
    dy = _spread(c.dy, r)
    if r == 1:
        return [dy]
    zero = _spread((x == 0.0).astype(x.dtype).sum(axis=1), r) > 0.0     # the row holds a zero
    # x is 1 in the division where the row holds a zero: 0 / 0 there would make the gradient
    # of this gradient NaN, through the branch the select drops
    return [ops.where(zero, dy * _others(x), dy * (_spread(c.y, r) / ops.where(zero, 1.0, x)))]


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


def _sgn(x):
    """torch's ``sgn``: -1, 0 or 1, and 0 at a NaN (``sign`` gives NaN there)."""
    return ops.where(ops.isnan(x), 0.0, ops.sign(x))


@rule("vector_norm")
def _vector_norm(c):
    """PyTorch's ``norm_backward``, branch by branch, so that NaN, inf and zeros give its values:

    * 1: ``dy sgn(x)`` (0 at a NaN); inf/-inf: the extreme ``|x|`` (ties split), signed by
      ``sgn(x)``; a row holding NaN passes nothing;
    * 2: ``dy x / y``, 0 where ``y`` is 0; NaN where ``y`` is NaN (a row holding NaN);
    * p < 1, negative p included: ``sgn(x) |x|**(p-1) dy y**(1-p)``, 0 at each zero of ``x``
      (so a row with a zero, whose norm is 0 when p < 0, passes 0);
    * 1 < p < 2: ``sgn(x) |x|**(p-1) dy / y**(p-1)``; p > 2: ``x |x|**(p-2) dy / y**(p-1)``;
      both 0 where ``y`` is 0;
    * 0 counts nonzeros: nothing flows.
    """
    x, r = c.inputs[0], c.dims["R"]
    kind, p = c.params["ord"], c.params["p"]
    if kind == "0":
        return [COUNT]
    dy, y = _spread(c.dy, r), _spread(c.y, r)
    if kind == "1":
        return [_sgn(x) * dy]
    if kind in ("inf", "-inf"):
        hit = ops.abs(x) == y                     # none in a row holding NaN (y is NaN)
        count = hit.astype(x.dtype).sum(axis=1)
        return [_sgn(x) * ops.where(hit, _spread(c.dy / count, r), 0.0)]
    flat = y == 0.0                               # False where y is NaN: NaN flows, as torch's
    if kind == "2":
        return [ops.where(flat, 0.0, dy * (x / y))]
    if p < 1.0:
        scaled = ops.where(x == 0.0, 0.0, _sgn(x) * ops.pow(ops.abs(x), p - 1.0))
        return [scaled * dy * ops.pow(y, 1.0 - p)]
    scaled = _sgn(x) * ops.pow(ops.abs(x), p - 1.0) if p < 2.0 else \
        x * ops.pow(ops.abs(x), p - 2.0)
    return [scaled * ops.where(flat, 0.0, dy / ops.pow(y, p - 1.0))]


mark(COUNT, "count_nonzero")
mark(ZERO, "all", "any")
