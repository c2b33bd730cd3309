"""Rules of the indexing ops: a gather's gradient is a scatter-add and a scatter-add's is a
gather, both with the forward's indices.

Indices are constants to the gradient (a :class:`Constant` in their place): ``x[argmax(x)]`` is
differentiable in ``x``. Inside traced programs the kernels clamp out-of-range indices (see
``pypto.ops.indexing``); ``scatter_add`` and ``gather`` clamp the same way, so the backward
sends each gradient where the forward read. ``take_along_axis`` wraps negative indices first,
as its forward does.

``embedding``'s ``padding_idx`` row gets no gradient, as in PyTorch.
``one_hot`` and ``sequence_mask`` make masks from integers: nothing flows back through them.
"""

from __future__ import annotations

import numpy as np

from ... import ops
from .. import shapes
from . import ZERO, Constant, mark, rule

INDEX = Constant("indices are constants to the gradient")


def _scatter(shape, index, src):
    """Zeros of ``shape`` ([O, A, I]) with ``src`` [O, J, I] added at ``index`` along A."""
    return ops.scatter_add.kernel(shapes.zeros(shape, src.dtype), index, src)


@rule("gather")
def _gather(c):
    x, index = c.inputs
    return [_scatter(x.shape, index, c.dy), INDEX]


@rule("take_along_axis")
def _take_along_axis(c):
    x, index = c.inputs
    index = index.astype(np.int32)         # where takes int32 (axes are below 2**30)
    wrapped = ops.where(index < 0, ops.remainder(index, x.shape[1]), index)
    return [_scatter(x.shape, wrapped, c.dy), INDEX]


@rule("index_select")
def _index_select(c):
    x, index = c.inputs
    o, _, i = x.shape
    spread = index.reshape(1, -1, 1).broadcast_to((o, index.shape[0], i))
    return [_scatter(x.shape, spread, c.dy), INDEX]


@rule("embedding")
def _embedding(c):
    index, w = c.inputs
    v, d = w.shape
    n = index.shape[0]
    spread = index.reshape(1, n, 1).broadcast_to((1, n, d))
    dy = c.dy.reshape(1, n, d)
    pad = c.params.get("padding_idx", -1)
    if pad >= 0:        # that row's uses send nothing back (torch's padding_idx)
        dy = dy * (index != pad).astype(dy.dtype).reshape(1, n, 1)
    return [INDEX, _scatter((1, v, d), spread, dy).reshape(v, d)]


@rule("scatter_add")
def _scatter_add(c):
    _, index, _ = c.inputs
    return [c.dy, INDEX, ops.gather.kernel(c.dy, index)]


@rule("masked_fill")
def _masked_fill(c):
    return [ops.where(c.inputs[1], 0.0, c.dy), ZERO]


mark(ZERO, "one_hot", "sequence_mask")
