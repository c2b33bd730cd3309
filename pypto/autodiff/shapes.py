"""Shape helpers for gradient rules, written with views and ``where`` only.

The backward of a slice scatters a small array into zeros, and the backward of a strided window
(a convolution's stride, a pooling window) spreads values apart with zeros between them. PyPTO
has no pad or scatter op; both are made here from views, which cost nothing once lowered, and one
``where`` with a constant mask, so they fuse into the pipeline that consumes them:

* a row repeated periodically (reshape + broadcast + reshape) and sliced at the right offset puts
  element ``k`` at position ``before + k``; the mask keeps exactly those positions;
* a row with each element repeated ``s`` times keeps every ``s``-th copy: a dilation by ``s``.
"""

from __future__ import annotations

import math

import numpy as np

from ..frontend import tensor as T


def scalar(value, dtype) -> T.Tensor:
    """A 0-d constant of ``dtype`` (a program input; broadcast it, never materialize it)."""
    return T.as_tensor(np.asarray(value, dtype=dtype))


def zeros(shape, dtype) -> T.Tensor:
    """Zeros of ``shape``: a broadcast view of one 0-d constant."""
    z = scalar(0, dtype)
    return z.broadcast_to(tuple(shape)) if tuple(shape) else z


def ones(shape, dtype) -> T.Tensor:
    o = scalar(1, dtype)
    return o.broadcast_to(tuple(shape)) if tuple(shape) else o


def total(t: T.Tensor, axis, keepdims: bool = False) -> T.Tensor:
    """``t.sum(axis, keepdims)``; float16 is summed in float32 (the ``sum`` op has no float16),
    as PyTorch accumulates it, and rounded back once."""
    if t.dtype == np.float16:
        return t.astype(np.float32).sum(axis=axis, keepdims=keepdims).astype(np.float16)
    return t.sum(axis=axis, keepdims=keepdims)


def where_mask(mask: np.ndarray, a: T.Tensor, fill: float = 0.0) -> T.Tensor:
    """``a`` where the constant NumPy ``mask`` (broadcast to ``a``) holds, ``fill`` elsewhere."""
    from .. import ops

    return ops.where(T.as_tensor(mask), a, scalar(fill, a.dtype))


def _to_rows(t: T.Tensor, axis: int):
    """``t`` with ``axis`` moved last and the rest flattened: (rows, perm, moved shape)."""
    axis %= t.ndim
    perm = [i for i in range(t.ndim) if i != axis] + [axis]
    moved = t.transpose(perm)
    rows = moved.reshape(math.prod(moved.shape[:-1]), moved.shape[-1])
    return rows, perm, moved.shape


def _from_rows(rows: T.Tensor, perm, moved_shape, n: int) -> T.Tensor:
    shape = tuple(moved_shape[:-1]) + (n,)
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    return rows.reshape(shape).transpose(inv)


#: The dtypes the pad op takes (float16 pads through the view below).
_PAD_DTYPES = tuple(np.dtype(d) for d in ("float32", "float64", "int32", "int64", "bool"))


def pad_axis(t: T.Tensor, axis: int, before: int, after: int, fill: float = 0.0) -> T.Tensor:
    """``t`` with ``before``/``after`` elements of ``fill`` added along ``axis`` (a negative count
    crops instead)."""
    n0 = t.shape[axis % t.ndim]
    lo, hi = max(-before, 0), n0 - max(-after, 0)
    if lo or hi != n0:      # crop first: a plain slice
        idx = [slice(None)] * t.ndim
        idx[axis % t.ndim] = slice(lo, hi)
        t = t[tuple(idx)]
    before, after = max(before, 0), max(after, 0)
    if before == 0 and after == 0:
        return t
    if t.dtype in _PAD_DTYPES and math.isfinite(fill):    # (the op takes finite fills)
        # The pad op: one block copy and the fill. The periodic view and mask below index by
        # division per element: padding conv2d's input for its weight gradient took ~1.8 ms
        # that way, ~0.6 with the op (ResNet 3x3 1x64x56x56, one thread, under load).
        from .. import ops

        return ops.pad(t, [0, 0] * (t.ndim - 1 - axis % t.ndim) + [before, after],
                       mode="constant", value=fill)
    rows, perm, moved = _to_rows(t, axis)
    m_rows, m = rows.shape
    n = before + m + after
    a = (-before) % m                      # offset of the periodic copy that lands k at before+k
    k = -(-(a + n) // m)
    periodic = rows.reshape(m_rows, 1, m).broadcast_to((m_rows, k, m)).reshape(m_rows, k * m)
    shifted = periodic[:, a:a + n]
    mask = np.zeros((1, n), dtype=bool)
    mask[0, before:before + m] = True
    return _from_rows(where_mask(mask, shifted, fill), perm, moved, n)


def dilate_axis(t: T.Tensor, axis: int, step: int) -> T.Tensor:
    """``t`` with ``step - 1`` zeros between neighbours along ``axis``: (m - 1) * step + 1 long."""
    if step == 1:
        return t
    rows, perm, moved = _to_rows(t, axis)
    m_rows, m = rows.shape
    n = (m - 1) * step + 1
    spread = rows.reshape(m_rows, m, 1).broadcast_to((m_rows, m, step)).reshape(m_rows, m * step)
    spread = spread[:, :n]
    mask = (np.arange(n) % step == 0)[None, :]
    return _from_rows(where_mask(mask, spread, 0.0), perm, moved, n)


def flip_axes(t: T.Tensor, axes) -> T.Tensor:
    idx = [slice(None)] * t.ndim
    for a in axes:
        idx[a % t.ndim] = slice(None, None, -1)
    return t[tuple(idx)]


def unslice(dy: T.Tensor, in_shape, starts, steps) -> T.Tensor:
    """The transpose of a basic slice: ``dy`` scattered into zeros of ``in_shape``."""
    out = dy
    for axis, (n, start, step) in enumerate(zip(in_shape, starts, steps)):
        size = dy.shape[axis]
        if step < 0:        # reversed: flip, then it is a forward slice from the last position
            out = flip_axes(out, [axis])
            start, step = start + step * (size - 1), -step
        if start == 0 and step == 1 and size == n:
            continue
        out = dilate_axis(out, axis, step)
        span = (size - 1) * step + 1
        out = pad_axis(out, axis, start, n - start - span)
    return out


class Unsliced:
    """A slice's gradient not yet scattered (what the slice rule returns): ``dy`` belongs at
    ``starts``/``steps`` of an array of ``shape``. The backward keeps it apart until the array's
    gradient is read, so that the pieces of one array (``xs[t]`` for every step of a loop) join
    as one concat, not a sum of zero-padded copies, one per piece (``core._sum``)."""

    def __init__(self, dy: T.Tensor, shape, starts, steps):
        self.dy, self.shape, self.starts, self.steps = dy, tuple(shape), starts, steps

    def axis(self):
        """The one axis this slice cuts with step 1 (None where it is not that simple)."""
        cut = [a for a, (n, st, sp, m) in enumerate(zip(self.shape, self.starts, self.steps,
                                                        self.dy.shape))
               if not (st == 0 and sp == 1 and m == n)]
        if len(cut) != 1 or self.steps[cut[0]] != 1:
            return None
        return cut[0]

    def scattered(self) -> T.Tensor:
        return unslice(self.dy, self.shape, self.starts, self.steps)


def expand_rows(v: T.Tensor, r: int) -> T.Tensor:
    """An [O] vector as [O, R], each value repeated along the row."""
    return v.reshape(v.shape[0], 1).broadcast_to((v.shape[0], r))
