"""Rules of the morphology, filter, colour and histogram ops (kernel shapes: images [B, H, W],
colours [B, 3, N]).

* dilate, erode: each output's gradient goes to the first tap of its window (footprint order,
  row-major) holding the maximum (minimum); taps outside the image take no part (they are
  padded with -inf / +inf, as the kernel ignores them). morph_open and morph_close are
  recomputed as the erosion and dilation they are made of and differentiated through them.
* laplacian: linear on the edge-replicated image; recomputed with a replicate pad and slices,
  whose rules give its transpose (the edge taps fold back onto the edge pixels).
* integral_image: inclusive cumulative sums down and across, so the gradient is the reversed
  cumulative sums of the output gradient.
* rgb_to_gray, rgb_to_yuv, yuv_to_rgb: constant 3x3 (or 1x3) colour maps; the gradient is the
  transposed map applied to the output gradient.
* histogram counts and equalize_hist (uint8 in and out) are piecewise constant: nothing flows
  back.
"""

from __future__ import annotations

import math

import numpy as np

from ... import ops
from ...frontend import tensor as T
from ...ops.color import KB, KG, KR, UMAX, VMAX
from ...ops.morphology import parse_footprint
from .. import shapes
from . import Constant, mark, rule

mark(Constant("its counts are piecewise constant in the values"), "histogram")
mark(Constant("it maps uint8 images to uint8 images (piecewise constant)"), "equalize_hist")


# -- morphology ------------------------------------------------------------------------------------

def _extreme_grad(x, y, dy, footprint: str, largest: bool):
    mask = parse_footprint(footprint, "dilate" if largest else "erode")
    kh, kw = mask.shape
    _, h, w = x.shape
    fill = -math.inf if largest else math.inf
    xp = shapes.pad_axis(shapes.pad_axis(x, 1, kh // 2, kh - 1 - kh // 2, fill), 2, kw // 2,
                         kw - 1 - kw // 2, fill)
    total = taken = None
    for a, b in zip(*np.nonzero(mask)):
        a, b = int(a), int(b)
        hit = xp[:, a:a + h, b:b + w] == y
        if taken is not None:
            hit = hit & ~taken
        taken = hit if taken is None else taken | hit
        part = shapes.unslice(ops.where(hit, dy, 0.0), xp.shape, (0, a, b), (1, 1, 1))
        total = part if total is None else total + part
    return total[:, kh // 2:kh // 2 + h, kw // 2:kw // 2 + w]


@rule("dilate")
def _dilate(c):
    return [_extreme_grad(c.inputs[0], c.y, c.dy, c.params["footprint"], True)]


@rule("erode")
def _erode(c):
    return [_extreme_grad(c.inputs[0], c.y, c.dy, c.params["footprint"], False)]


def _sequence(first, second):
    def fn(c):
        from ..core import through

        fp = c.params["footprint"]
        return through(lambda x: second.kernel(first.kernel(x, footprint=fp), footprint=fp),
                       c.inputs, [c.dy])
    return fn


rule("morph_open")(_sequence(ops.erode, ops.dilate))
rule("morph_close")(_sequence(ops.dilate, ops.erode))


# -- filters ---------------------------------------------------------------------------------------

def _laplacian_of(x, ksize):
    _, h, w = x.shape
    p = ops.pad(x, (1, 1, 1, 1), mode="replicate")

    def at(di, dj):
        return p[:, 1 + di:1 + di + h, 1 + dj:1 + dj + w]

    if ksize == 1:
        return (at(0, -1) + at(0, 1)) + (at(-1, 0) + at(1, 0)) - 4.0 * x
    return 2.0 * ((at(-1, -1) + at(-1, 1)) + (at(1, -1) + at(1, 1))) - 8.0 * x


@rule("laplacian")
def _laplacian(c):
    from ..core import through

    k = c.params["ksize"]
    return through(lambda x: _laplacian_of(x, k), c.inputs, [c.dy])


@rule("integral_image")
def _integral_image(c):
    dy = shapes.flip_axes(c.dy, (1, 2))
    return [shapes.flip_axes(ops.cumsum(ops.cumsum(dy, axis=1), axis=2), (1, 2))]


# -- colour maps -----------------------------------------------------------------------------------

_LUMA = np.array([KR, KG, KB])
_YUV = np.stack([_LUMA, UMAX / (1 - KB) * (np.array([0.0, 0.0, 1.0]) - _LUMA),
                 VMAX / (1 - KR) * (np.array([1.0, 0.0, 0.0]) - _LUMA)])
_MAPS = {"rgb_to_gray": _LUMA[None, :], "rgb_to_yuv": _YUV, "yuv_to_rgb": np.linalg.inv(_YUV)}


def _colour_map(c):
    """out[b, o, n] = sum over k of M[o, k] x[b, k, n]: dx[b, k, n] = sum over o of
    M[o, k] dy[b, o, n]."""
    m = _MAPS[c.op.name]
    dy = c.dy
    b, co, n = dy.shape
    mt = T.as_tensor(np.ascontiguousarray(m.reshape(1, co, 3, 1), dtype=dy.dtype))
    return [(dy.reshape(b, co, 1, n) * mt).sum(axis=1)]


rule("rgb_to_gray", "rgb_to_yuv", "yuv_to_rgb")(_colour_map)
