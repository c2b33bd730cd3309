"""Rules of resize_nearest, resize_bicubic, median_blur and bilateral_filter (images
[B, H, W]).

* resize_nearest and resize_bicubic are separable linear maps with taps known from the shapes
  (the kernels' index and weight formulas, evaluated in NumPy): the gradient is their transpose,
  a scatter-add per axis (see the image rules).
* median_blur: each output is one pixel of its edge-replicated window; its gradient goes to the
  first window tap (row-major) equal to the output, through the replicate pad (taps beyond the
  edge fold back onto the edge pixel).
* bilateral_filter: recomputed from the replicate pad, slices and exponentials (the weights
  depend on the image too) and differentiated through them.
"""

from __future__ import annotations

from ... import ops
from ...ops.warp import _bicubic_axis_np, _nearest_index_np
from .image import _separable_transpose
from . import rule


@rule("resize_nearest")
def _resize_nearest(c):
    x = c.inputs[0]
    _, h, w = x.shape
    _, oh, ow = c.dy.shape
    exact = c.params["mode"] == "nearest-exact"
    rows = _nearest_index_np(h, oh, exact)
    cols = _nearest_index_np(w, ow, exact)
    return [_separable_transpose(c.dy, (h, w), [(rows, None)], [(cols, None)])]


@rule("resize_bicubic")
def _resize_bicubic(c):
    x = c.inputs[0]
    _, h, w = x.shape
    _, oh, ow = c.dy.shape
    align = c.params["align_corners"]
    taps = []
    for n, m in ((h, oh), (w, ow)):
        index, weight = _bicubic_axis_np(n, m, align)
        taps.append([(index[:, k], weight[:, k].astype(x.dtype)) for k in range(4)])
    return [_separable_transpose(c.dy, (h, w), taps[0], taps[1])]


def _window(x, r):
    """The edge-replicated views of x, one per window offset (i, j) in row-major order."""
    _, h, w = x.shape
    p = ops.pad(x, (r, r, r, r), mode="replicate")
    return {(i, j): p[:, r + i:r + i + h, r + j:r + j + w]
            for i in range(-r, r + 1) for j in range(-r, r + 1)}


@rule("median_blur")
def _median_blur(c):
    from ..core import through

    r = c.params["ksize"] // 2
    if r == 0:
        return [c.dy]
    views = _window(c.inputs[0], r)
    hits, taken = {}, None
    for key, v in views.items():        # the first tap holding the median: constant masks
        hit = v == c.y
        if taken is not None:
            hit = hit & ~taken
        taken = hit if taken is None else taken | hit
        hits[key] = hit

    def pick(x):
        out = None
        for key, v in _window(x, r).items():
            part = ops.where(hits[key], v, 0.0)
            out = part if out is None else out + part
        return out
    return through(pick, c.inputs, [c.dy])


def _bilateral(x, r, sc, ss):
    num = den = None
    for (i, j), v in _window(x, r).items():
        if i * i + j * j > r * r:
            continue
        d = v - x
        wt = ops.exp(d * d * (-1.0 / (2 * sc * sc)) - (i * i + j * j) / (2 * ss * ss))
        num = wt * v if num is None else num + wt * v
        den = wt if den is None else den + wt
    return num / den


@rule("bilateral_filter")
def _bilateral_filter(c):
    from ..core import through

    p = c.params
    return through(lambda x: _bilateral(x, p["radius"], p["sigma_color"], p["sigma_space"]),
                   c.inputs, [c.dy])
