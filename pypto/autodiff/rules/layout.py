"""Rules of the layout and matrix-construction ops: each gradient is the transposed copy.

Kernel forms are [O, A, I] around the axis an op works on (see ``pypto.ops.layout``), so every
rule here works on the middle axis:

* concat, stack, split: slices of the output gradient, or the gradient padded with zeros;
* pad: the middle slice, plus (reflect, replicate, circular) the padded parts added back where
  they were read from; negative (cropping) counts as the pad of the positive ones and a crop;
* tile, repeat: sums over the copies; flip, roll: the inverse flip or roll;
* tril/triu: the same triangle of the gradient; diag <-> diagonal: each other's transpose;
* arange and eye are linear in their one- or two-element input (``start, step`` and ``one``).
"""

from __future__ import annotations

import numpy as np

from ... import ops
from ...frontend import tensor as T
from .. import shapes
from . import rule


@rule("concat")
def _concat(c):
    n = c.inputs[0].shape[1]
    return [c.dy[:, :n], c.dy[:, n:]]


@rule("stack")
def _stack(c):
    return [c.dy[:, 0], c.dy[:, 1]]


@rule("split")
def _split(c):
    n = c.inputs[0].shape[1]
    start, length = c.params["start"], c.params["length"]
    return [shapes.pad_axis(c.dy, 1, start, n - start - length)]


def _place(t, at: int, n: int):
    """``t`` (along axis 1) placed at offset ``at`` of a zero axis of length ``n``."""
    return shapes.pad_axis(t, 1, at, n - at - t.shape[1])


@rule("pad")
def _pad(c):
    n = c.inputs[0].shape[1]
    lo, hi, mode = c.params["before"], c.params["after"], c.params["mode"]
    if min(lo, hi) >= 0:
        return [_pad_grad(c.dy, n, lo, hi, mode)]
    crop_lo, crop_hi = max(-lo, 0), max(-hi, 0)
    if mode == "circular":      # crop, then pad what is left: the pad's gradient, placed back
        kept = n - crop_lo - crop_hi
        return [_place(_pad_grad(c.dy, kept, max(lo, 0), max(hi, 0), mode), crop_lo, n)]
    # the others pad by the positive counts, then crop: the crop's gradient pads dy with zeros
    dy = shapes.pad_axis(c.dy, 1, crop_lo, crop_hi)
    return [_pad_grad(dy, n, max(lo, 0), max(hi, 0), mode)]


def _pad_grad(dy, n: int, lo: int, hi: int, mode: str):
    """The gradient of padding an axis of ``n`` by ``lo, hi >= 0``."""
    dx = dy[:, lo:lo + n]
    if mode == "constant" or (lo == 0 and hi == 0):
        return dx
    left, right = dy[:, :max(lo, 1)], dy[:, lo + n:] if hi else None
    parts = []
    if mode == "replicate":
        if lo:
            parts.append(_place(left.sum(axis=1, keepdims=True), 0, n))
        if hi:
            parts.append(_place(right.sum(axis=1, keepdims=True), n - 1, n))
    elif mode == "reflect":         # left[p] read x[lo - p], right[j] read x[n - 2 - j]
        if lo:
            parts.append(_place(shapes.flip_axes(left, [1]), 1, n))
        if hi:
            parts.append(_place(shapes.flip_axes(right, [1]), n - 1 - hi, n))
    elif mode == "circular":        # left[p] read x[n - lo + p], right[j] read x[j]
        if lo:
            parts.append(_place(left, n - lo, n))
        if hi:
            parts.append(_place(right, 0, n))
    for p in parts:
        dx = dx + p
    return dx


@rule("tile")
def _tile(c):
    o, n, i = c.inputs[0].shape
    return [c.dy.reshape(o, c.params["reps"], n, i).sum(axis=1)]


@rule("repeat")
def _repeat(c):
    o, n, i = c.inputs[0].shape
    return [c.dy.reshape(o, n, c.params["repeats"], i).sum(axis=2)]


@rule("flip")
def _flip(c):
    return [shapes.flip_axes(c.dy, [1])]


@rule("roll")
def _roll(c):
    n = c.inputs[0].shape[1]
    return [ops.roll.kernel(c.dy, shift=(n - c.params["shift"]) % n)]


# -- matrix construction ---------------------------------------------------------------------------

@rule("tril")
def _tril(c):
    return [ops.tril.kernel(c.dy, k=c.params["k"])]


@rule("triu")
def _triu(c):
    return [ops.triu.kernel(c.dy, k=c.params["k"])]


@rule("diag")
def _diag(c):
    m = c.dy.shape[0]
    return [ops.diagonal.kernel(c.dy.reshape(1, m, m), offset=c.params["k"]).reshape(-1)]


@rule("diagonal")
def _diagonal(c):
    """dy [B, L] put back on the diagonal of zeros [B, M, N]: element l sits on row l + r0."""
    b, m, n = c.inputs[0].shape
    off = c.params["offset"]
    r0 = max(-off, 0)
    rows = shapes.pad_axis(c.dy, 1, r0, m - r0 - c.dy.shape[1])         # [B, M]
    spread = rows.reshape(b, m, 1).broadcast_to((b, m, n))
    on = (np.arange(n)[None, :] - np.arange(m)[:, None]) == off
    return [shapes.where_mask(on[None], spread, 0.0)]


@rule("eye")
def _eye(c):
    r, k = c.dy.shape, c.params["k"]
    on = (np.arange(r[1])[None, :] - np.arange(r[0])[:, None]) == k
    return [shapes.where_mask(on, c.dy, 0.0).sum().reshape(1)]


@rule("arange")
def _arange(c):
    """out[i] = start + i * step: d start = sum(dy), d step = sum(i * dy)."""
    dy = c.dy
    i = np.arange(dy.shape[0], dtype=dy.dtype)
    d_start = dy.sum().reshape(1, 1)
    d_step = (dy * T.as_tensor(i)).sum().reshape(1, 1)
    return [ops.concat.kernel(d_start, d_step).reshape(2)]
