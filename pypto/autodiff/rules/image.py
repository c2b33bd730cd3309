"""Rules of the image, resampling and detection ops.

All but sobel's magnitude and box_iou are linear in the image, so each gradient is the op's
transpose:

* resize_bilinear, upsample_nearest: every output pixel read at most two source rows and two
  source columns (the same taps as the kernel, computed in NumPy from the shapes), so the
  transpose is a scatter-add of the weighted gradient per axis (O(size), no dense matrix);
* adaptive_avg_pool2d: a dense [out, in] averaging matrix per axis (outputs are small), applied
  with matmul; global_avg_pool2d spreads the mean's gradient;
* box_blur, gaussian_blur: a symmetric window on the edge-replicated image; the transpose runs
  the same kernel on the gradient padded with zeros, then folds what fell beyond each edge back
  onto the edge pixel (the adjoint of edge replication);
* sobel: the derivatives gx, gy are linear (recomputed with pad and slices, whose rules give
  their transpose); the magnitude passes ``dy * (gx, gy) / out`` (nothing where out == 0);
* pixel_shuffle and pixel_unshuffle are each other's transpose;
* roi_pool: each bin's gradient to its first maximum, found with masks (see its rule);
* roi_align: per box, separable bilinear weight matrices built from the box values with PyPTO
  ops (a sample's weight on pixel h is ``relu(1 - |y - h|)`` at its clamped coordinate), then
  matmuls and a scatter-add over the boxes' images. The box coordinates get no gradient (as in
  torchvision): asking for one is an error;
* box_convert is a constant 4x4 map; box_iou is recomputed from min/max/products and
  differentiated through them (ties between coordinates split evenly); anchor_boxes adds
  constant offsets to its base anchors.
"""

from __future__ import annotations

import numpy as np

from ... import ops
from ...frontend import tensor as T
from ...ops.image import _src_coords
from ...ops.resample import _src_index
from .. import shapes
from . import NotDifferentiable, mark, rule


def _const(a, dtype):
    return T.as_tensor(np.ascontiguousarray(a, dtype=dtype))


def _scatter_taps(t, n: int, taps):
    """The transpose of ``out[:, j] = sum_k w_k[j] * x[:, i_k[j]]`` along the middle axis of
    ``t`` [O, J, I]: zeros [O, n, I] with ``w_k[j] * t[:, j]`` added at ``i_k[j]``."""
    o, j, i = t.shape
    acc = shapes.zeros((o, n, i), t.dtype)
    for index, weight in taps:
        idx = _const(index, np.int32).reshape(1, j, 1).broadcast_to((o, j, i))
        src = t if weight is None else t * _const(weight, t.dtype).reshape(1, j, 1)
        acc = ops.scatter_add.kernel(acc, idx, src)
    return acc


def _separable_transpose(dy, hw, taps_h, taps_w):
    """dy [B, OH, OW] through the transposes of a row map (taps_h) and a column map (taps_w)."""
    b, oh, ow = dy.shape
    h, w = hw
    cols = _scatter_taps(dy.reshape(b * oh, ow, 1), w, taps_w).reshape(b, oh, w)
    return _scatter_taps(cols, h, taps_h)


def _bilinear_taps(n_in, n_out, align_corners, dtype):
    s = _src_coords(n_in, n_out, align_corners)
    i0 = np.clip(s.astype(np.int64), 0, n_in - 1)
    lam = np.where(i0 < n_in - 1, s - i0, 0.0).astype(dtype)
    i1 = np.minimum(i0 + 1, n_in - 1)
    return [(i0, (1 - lam).astype(dtype)), (i1, lam)]


@rule("resize_bilinear")
def _resize_bilinear(c):
    x = c.inputs[0]
    _, h, w = x.shape
    p = c.params
    th = _bilinear_taps(h, p["height"], p["align_corners"], x.dtype)
    tw = _bilinear_taps(w, p["width"], p["align_corners"], x.dtype)
    return [_separable_transpose(c.dy, (h, w), th, tw)]


@rule("upsample_nearest")
def _upsample_nearest(c):
    x = c.inputs[0]
    _, h, w = x.shape
    p = c.params
    rows = np.clip(_src_index(h, p["height"], p["scale_h"]), 0, h - 1)
    cols = np.clip(_src_index(w, p["width"], p["scale_w"]), 0, w - 1)
    return [_separable_transpose(c.dy, (h, w), [(rows, None)], [(cols, None)])]


def _averaging(n_in, n_out, dtype):
    """[n_out, n_in]: row i averages input [floor(i n / n_out), ceil((i + 1) n / n_out))."""
    m = np.zeros((n_out, n_in))
    for i in range(n_out):
        lo, hi = (i * n_in) // n_out, -(-((i + 1) * n_in) // n_out)
        m[i, lo:hi] = 1.0 / (hi - lo)
    return m.astype(dtype)


@rule("adaptive_avg_pool2d")
def _adaptive_avg_pool2d(c):
    x = c.inputs[0]
    n, ch, h, w = x.shape
    oh, ow = c.params["out_h"], c.params["out_w"]
    ph, pw = _averaging(h, oh, x.dtype), _averaging(w, ow, x.dtype)
    cols = ops.matmul.kernel(c.dy.reshape(n * ch * oh, ow), _const(pw, x.dtype))   # dy Pw
    rows = cols.reshape(n * ch, oh, w)
    pht = _const(ph.T, x.dtype).reshape(1, h, oh).broadcast_to((n * ch, h, oh))
    return [ops.batch_matmul.kernel(pht, rows).reshape(n, ch, h, w)]                 # Ph^T .


@rule("global_avg_pool2d")
def _global_avg_pool2d(c):
    s = c.inputs[0].shape[1]
    return [shapes.expand_rows(c.dy * (1.0 / s), s)]


# -- blurs -----------------------------------------------------------------------------------------

def _fold_edges(t, axis: int, r: int):
    """The adjoint of extending an axis by ``r`` replicated pixels each side: ``t`` (n + 2r long)
    folded to n, its first and last r entries added onto the edge pixels."""
    if r == 0:
        return t
    n = t.shape[axis] - 2 * r

    def part(lo, hi):
        idx = [slice(None)] * t.ndim
        idx[axis] = slice(lo, hi)
        return t[tuple(idx)]

    out = part(r, r + n)
    out = out + shapes.pad_axis(part(0, r).sum(axis=axis, keepdims=True), axis, 0, n - 1)
    return out + shapes.pad_axis(part(n + r, n + 2 * r).sum(axis=axis, keepdims=True), axis,
                                 n - 1, 0)


def _window_transpose(kernel, dy, r: int):
    """The transpose of a symmetric (2r + 1)-window ``kernel`` on the edge-replicated image."""
    if r == 0:
        return kernel(dy)
    _, h, w = dy.shape
    padded = shapes.pad_axis(shapes.pad_axis(dy, 1, 2 * r, 2 * r), 2, 2 * r, 2 * r)
    ext = kernel(padded)[:, r:h + 3 * r, r:w + 3 * r]      # the extended image's gradient
    return _fold_edges(_fold_edges(ext, 1, r), 2, r)


@rule("box_blur")
def _box_blur(c):
    size = c.params["size"]
    return [_window_transpose(lambda t: ops.box_blur.kernel(t, size=size), c.dy, size // 2)]


@rule("gaussian_blur")
def _gaussian_blur(c):
    from ...ops.image import _gauss_radius

    sigma, radius = c.params["sigma"], c.params["radius"]
    r = _gauss_radius(sigma, radius)
    return [_window_transpose(
        lambda t: ops.gaussian_blur.kernel(t, sigma=sigma, radius=r), c.dy, r)]


def _sobel_parts(x):
    """The Sobel derivatives (gx, gy) of [B, H, W], edges replicated, from pads and slices."""
    b, h, w = x.shape
    xp = ops.pad.kernel(x.reshape(b * h, w, 1), before=1, after=1, mode="replicate")
    xp = ops.pad.kernel(xp.reshape(b, h, w + 2), before=1, after=1, mode="replicate")

    def at(i, j):                                      # the window tap (i, j) of each pixel
        return xp[:, i:i + h, j:j + w]

    gx = (at(0, 2) - at(0, 0)) + 2.0 * (at(1, 2) - at(1, 0)) + (at(2, 2) - at(2, 0))
    gy = (at(2, 0) - at(0, 0)) + 2.0 * (at(2, 1) - at(0, 1)) + (at(2, 2) - at(0, 2))
    return gx, gy


@rule("sobel")
def _sobel(c):
    from ..core import through

    x = c.inputs[0]
    gx, gy = _sobel_parts(x)
    y = c.y
    scale = ops.where(y > 0, c.dy / ops.where(y > 0, y, 1.0), 0.0)
    return through(_sobel_parts, [x], [scale * gx, scale * gy])


@rule("pixel_shuffle")
def _pixel_shuffle(c):
    return [ops.pixel_unshuffle.kernel(c.dy, r=c.params["r"])]


@rule("pixel_unshuffle")
def _pixel_unshuffle(c):
    return [ops.pixel_shuffle.kernel(c.dy, r=c.params["r"])]


# -- roi_align -------------------------------------------------------------------------------------

def _roi_weights(start, size, n_out, n, g, dtype, per_box=None):
    """[K, n_out, n]: the bilinear weight of each pixel in each bin, per box, averaged over the
    bin's g samples along this axis. ``start``/``size`` are the boxes' [K] start and bin size.
    With ``per_box`` ([K] floats, the adaptive grid) box k takes per_box[k] samples of the g
    (then a bound) and averages over them."""
    k = start.shape[0]
    if per_box is not None:
        used = ops.maximum(per_box, 1.0).reshape(k, 1, 1)
        s = _const(np.arange(g) + 0.5, dtype).reshape(1, 1, g)
        b = _const(np.arange(n_out), dtype).reshape(1, n_out, 1)
        pos = start.reshape(k, 1, 1) + size.reshape(k, 1, 1) * (b + s / used)  # [K, n_out, g]
        live = s < per_box.reshape(k, 1, 1)                  # sample index + 0.5 < the grid
        valid = ((pos >= -1.0) & (pos <= float(n)) & live).astype(dtype).reshape(k, n_out * g)
        pos = pos.reshape(k, n_out * g)
        at = ops.clip(pos, 0.0, float(n - 1))
        dist = at.reshape(k, n_out * g, 1) - _const(np.arange(n), dtype).reshape(1, 1, n)
        hat = ops.relu(1.0 - ops.abs(dist)) * valid.reshape(k, n_out * g, 1)
        return hat.reshape(k, n_out, g, n).sum(axis=2) / used
    offs = (np.arange(n_out)[:, None] + (np.arange(g)[None, :] + 0.5) / g).reshape(-1)
    pos = start.reshape(k, 1) + size.reshape(k, 1) * _const(offs, dtype).reshape(1, -1)
    valid = ((pos >= -1.0) & (pos <= float(n))).astype(dtype)          # [K, n_out * g]
    at = ops.clip(pos, 0.0, float(n - 1))
    dist = at.reshape(k, n_out * g, 1) - _const(np.arange(n), dtype).reshape(1, 1, n)
    hat = ops.relu(1.0 - ops.abs(dist)) * valid.reshape(k, n_out * g, 1)
    return hat.reshape(k, n_out, g, n).sum(axis=2) * (1.0 / g)


@rule("roi_align")
def _roi_align(c):
    x, boxes = c.inputs
    p = c.params
    n, ch, h, w = x.shape
    k, oh, ow = boxes.shape[0], p["pooled_height"], p["pooled_width"]
    g = p["sampling_ratio"]
    dt = x.dtype
    off = 0.5 if p["aligned"] else 0.0
    corner = [boxes[:, i] * p["spatial_scale"] - off for i in range(1, 5)]
    x1, y1 = corner[0], corner[1]
    rw, rh = corner[2] - x1, corner[3] - y1
    if not p["aligned"]:
        rw, rh = ops.maximum(rw, 1.0), ops.maximum(rh, 1.0)
    if g > 0:
        wy = _roi_weights(y1, rh * (1.0 / oh), oh, h, g, dt)             # [K, OH, H]
        wx = _roi_weights(x1, rw * (1.0 / ow), ow, w, g, dt)             # [K, OW, W]
    else:                  # adaptive: ceil(side / bins) samples per box, as the kernel counts
        top = float(p["max_grid"])
        gy = ops.clip(ops.ceil(rh / float(oh)), 0.0, top)
        gx = ops.clip(ops.ceil(rw / float(ow)), 0.0, top)
        wy = _roi_weights(y1, rh * (1.0 / oh), oh, h, p["max_grid"], dt, gy)
        wx = _roi_weights(x1, rw * (1.0 / ow), ow, w, p["max_grid"], dt, gx)
    bmm = ops.batch_matmul.kernel
    cols = bmm(c.dy.reshape(k, ch * oh, ow), wx).reshape(k, ch, oh, w)   # dy Wx
    rows = cols.transpose(0, 2, 1, 3).reshape(k, oh, ch * w)
    per_box = bmm(wy.transpose(0, 2, 1), rows).reshape(k, h, ch, w)       # Wy^T .
    per_box = per_box.transpose(0, 2, 1, 3).reshape(1, k, ch * h * w)
    img = boxes[:, 0].astype(np.int32).reshape(1, k, 1).broadcast_to((1, k, ch * h * w))
    dx = ops.scatter_add.kernel(shapes.zeros((1, n, ch * h * w), dt), img, per_box)
    why = "its gradient in the box coordinates is not provided (torchvision has none either)"
    return [dx.reshape(n, ch, h, w), NotDifferentiable(why)]


# -- roi_pool --------------------------------------------------------------------------------------

def _first_along_last(hit):
    """``hit`` keeping only its first True along the last axis."""
    n = hit.shape[-1]
    seen = ops.cumsum.kernel(hit.astype(np.float32).reshape(-1, n, 1)).reshape(hit.shape)
    return hit & (seen == 1.0)


def _roi_bins(lo, hi, pooled: int, n: int, dtype):
    """[K, pooled, n] bool: pixel i lies in bin b of each box (the kernel's rounded bounds)."""
    k = lo.shape[0]
    size = ops.maximum(hi - lo + 1.0, 1.0) * (1.0 / pooled)                 # [K]
    b = _const(np.arange(pooled), dtype).reshape(1, pooled)
    start = ops.clip(ops.floor(b * size.reshape(k, 1)) + lo.reshape(k, 1), 0.0, float(n))
    end = ops.clip(ops.ceil((b + 1.0) * size.reshape(k, 1)) + lo.reshape(k, 1), 0.0, float(n))
    i = _const(np.arange(n), dtype).reshape(1, 1, n)
    return (i >= start.reshape(k, pooled, 1)) & (i < end.reshape(k, pooled, 1))


@rule("roi_pool")
def _roi_pool(c):
    """Each bin's gradient goes to its first maximum in row-major order (torchvision's argmax),
    found in two separable steps: the maximum of each row over the bin's columns (R), then the
    first row whose R is the bin's maximum and, in that row, the first column holding it.
    Work and memory are O(K C H W (OH + OW)), against torchvision's O(K C OH OW) (it keeps the
    argmax from the forward)."""
    x, boxes = c.inputs
    p = c.params
    n, ch, h, w = x.shape
    k, oh, ow = boxes.shape[0], p["pooled_height"], p["pooled_width"]
    dt = x.dtype

    def corner(e):       # rounded half away from zero, in x's dtype
        v = boxes[:, e] * p["spatial_scale"]
        return ops.where(v < 0, -ops.floor(0.5 - v), ops.floor(v + 0.5))

    x1, y1, x2, y2 = (corner(e) for e in range(1, 5))
    in_row = _roi_bins(y1, y2, oh, h, dt)                                    # [K, OH, H]
    in_col = _roi_bins(x1, x2, ow, w, dt)                                    # [K, OW, W]
    img = boxes[:, 0].astype(np.int32)
    xk = ops.index_select.kernel(x.reshape(1, n, ch * h * w), img).reshape(k, ch, h, 1, w)
    cols = in_col.reshape(k, 1, 1, ow, w)
    r = ops.where(cols, xk, -np.inf).max(axis=4)                             # [K, C, H, OW]
    rows = in_row.reshape(k, 1, oh, 1, h)
    hit_row = rows & (r.transpose(0, 1, 3, 2).reshape(k, ch, 1, ow, h)
                      == c.y.reshape(k, ch, oh, ow, 1))
    d_r = ops.where(_first_along_last(hit_row), c.dy.reshape(k, ch, oh, ow, 1), 0.0)
    d_r = d_r.sum(axis=2).transpose(0, 1, 3, 2)                              # [K, C, H, OW]
    hit_col = cols & (xk == r.reshape(k, ch, h, ow, 1))
    d_xk = ops.where(_first_along_last(hit_col), d_r.reshape(k, ch, h, ow, 1), 0.0).sum(axis=3)
    spread = img.reshape(1, k, 1).broadcast_to((1, k, ch * h * w))
    dx = ops.scatter_add.kernel(shapes.zeros((1, n, ch * h * w), dt), spread,
                                d_xk.reshape(1, k, ch * h * w))
    why = "its bins are rounded box coordinates: a step function of them"
    return [dx.reshape(n, ch, h, w), NotDifferentiable(why)]


# -- boxes -----------------------------------------------------------------------------------------

@rule("box_convert")
def _box_convert(c):
    boxes = c.inputs[0]
    m = c.op.kernel_ref(np.eye(4, dtype=boxes.dtype), **c.params)     # out = boxes @ m
    return [ops.matmul.kernel(c.dy, _const(m.T, boxes.dtype))]


def _iou(a, b):
    n, m = a.shape[0], b.shape[0]
    ac = [a[:, i].reshape(n, 1) for i in range(4)]
    bc = [b[:, i].reshape(1, m) for i in range(4)]
    w = ops.maximum(ops.minimum(ac[2], bc[2]) - ops.maximum(ac[0], bc[0]), 0.0)
    h = ops.maximum(ops.minimum(ac[3], bc[3]) - ops.maximum(ac[1], bc[1]), 0.0)
    inter = w * h
    area_a = (ac[2] - ac[0]) * (ac[3] - ac[1])
    area_b = (bc[2] - bc[0]) * (bc[3] - bc[1])
    return inter / (area_a + area_b - inter)


@rule("box_iou")
def _box_iou(c):
    from ..core import through

    return through(_iou, c.inputs, [c.dy])


@rule("anchor_boxes")
def _anchor_boxes(c):
    return [c.dy.sum(axis=(0, 1))]


mark(NotDifferentiable("it returns the indices of the kept boxes"), "nms", "batched_nms")
