"""Rules of the 1-D and 3-D convolutions and pooling, the transposed convolutions, affine_grid,
grid_sample and the warps.

Shapes are the kernels' (``pypto.ops.conv``, ``pypto.ops.pool``): x [N, C, *S], a convolution's
w [O, C/groups, *K], a transposed convolution's w [C, O/groups, *K]. Per spatial axis: s stride,
p padding, d dilation, k kernel size.

* A convolution's input gradient is the transposed convolution of the output gradient with the
  same weights (1-D: ``conv_transpose1d`` with ``output_padding`` the inputs the forward's floor
  division dropped). 3-D has no transposed kernel: the gradient is spread by the stride, padded
  by d (k - 1) - p and convolved (stride 1, dilation d) with the weights flipped in space and
  transposed per group, as the conv2d rule does.
* A convolution's weight gradient is a correlation of the input with the output gradient: a
  grouped convolution whose "batch" is C/groups, "channels" groups * N and "kernel" the output
  gradient, stride d and dilation s (the roles swap), cropped to k.
* A transposed convolution is the adjoint of a convolution with the same parameters, so its
  input gradient is that convolution of the output gradient (cropped to the input's size when
  ``output_padding`` reaches past the stride), and its weight gradient the convolution weight
  gradient with input and output gradient exchanged.
* Average pooling: the transposed depthwise convolution of the output gradient (divided by each
  window's divisor) with a ones kernel. Max pooling: each output's gradient goes to the first
  maximum of its window in row-major order, as the kernel picks it (and PyTorch's CPU kernel).
  The kernels are floor mode only: ``ceil_mode=True`` is a pad, this kernel and (for averages)
  a mul in the frontend, differentiated through their own rules.
* affine_grid is linear in theta: its gradient is the output gradient times the constant
  normalized coordinates (x, y, 1), a matmul.
* grid_sample is recomputed from gathers (``take_along_axis``) of the four neighbours (or the
  nearest pixel) and differentiated through them: the input gets the scatter of the bilinear
  weights, the grid the derivative of the weights (x(i, j+1) - x(i, j) and so on, times the
  unnormalizing scale). In ``"border"`` mode positions outside the image are clipped, so their
  grid gradient is zero there; in ``"nearest"`` mode the grid gradient is zero (the sampled
  pixel is piecewise constant in the grid), as in PyTorch.
* warp_affine, warp_perspective: recomputed the same way, with the destination-to-source map
  (the matrix inverted by cofactors, 0 for a singular one, as the kernel) built from the matrix
  with PyPTO ops, so both the image and the matrix get their gradients.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from ... import ops
from ...frontend import tensor as T
from .. import shapes
from . import rule

_SFX = {1: ("",), 2: ("_h", "_w"), 3: ("_d", "_h", "_w")}


def _per_axis(p, prefix, nsp):
    return tuple(p[f"{prefix}{s}"] for s in _SFX[nsp])


def _kw(prefix, values, nsp):
    return {f"{prefix}{s}": v for s, v in zip(_SFX[nsp], values)}


def _conv(x, w, stride, pad, dil, groups):
    """The convolution kernel of x's spatial rank, zero bias."""
    nsp = x.ndim - 2
    the_op = {1: ops.conv1d, 2: ops.conv2d, 3: ops.conv3d}[nsp]
    zero = shapes.zeros((w.shape[0],), x.dtype)
    return the_op.kernel(x, w, zero, **_kw("stride", stride, nsp), **_kw("pad", pad, nsp),
                         **_kw("dil", dil, nsp), groups=groups)


def _crop(t, sizes):
    return t[(slice(None), slice(None)) + tuple(slice(0, n) for n in sizes)]


def conv_input_grad(dy, w, in_sizes, stride, pad, dil, groups):
    """d conv / d x for a 1-D or 3-D convolution with weights ``w`` [O, C/groups, *K]."""
    nsp = dy.ndim - 2
    o, cg = w.shape[:2]
    ks = tuple(w.shape[2:])
    # inputs the floor division of the output size left out, per axis
    rems = [(n + 2 * p - d * (k - 1) - 1) - (m - 1) * s
            for n, k, s, p, d, m in zip(in_sizes, ks, stride, pad, dil, dy.shape[2:])]
    if nsp == 1:
        zero = shapes.zeros((cg * groups,), dy.dtype)
        return ops.conv_transpose1d.kernel(dy, w, zero, stride=stride[0], pad=pad[0],
                                           out_pad=rems[0], dil=dil[0], groups=groups)
    og = o // groups
    space = tuple(range(3, 3 + nsp))
    wt = w.reshape((groups, og, cg) + ks).transpose((0, 2, 1) + space)
    wt = shapes.flip_axes(wt.reshape((groups * cg, og) + ks), range(2, 2 + nsp))
    e = dy
    for axis, (k, s, p, d, rem) in enumerate(zip(ks, stride, pad, dil, rems), start=2):
        e = shapes.dilate_axis(e, axis, s)
        e = shapes.pad_axis(e, axis, d * (k - 1) - p, d * (k - 1) - p + rem)
    return _conv(e, wt, (1,) * nsp, (0,) * nsp, dil, groups)


def conv_weight_grad(x, dy, ks, stride, pad, dil, groups):
    """d conv / d w [O, C/groups, *K], as a grouped convolution of ``x`` with ``dy``."""
    nsp = x.ndim - 2
    n, c = x.shape[:2]
    sizes = tuple(x.shape[2:])
    cg = c // groups
    space = tuple(range(3, 3 + nsp))
    xs = x.reshape((n, groups, cg) + sizes).transpose((2, 1, 0) + space)
    xs = xs.reshape((cg, groups * n) + sizes)
    ker = dy.transpose((1, 0) + tuple(range(2, 2 + nsp)))           # [O, N, *OS]
    r = _crop(_conv(xs, ker, dil, pad, stride, groups), ks)          # [CG, O, *K]
    return r.transpose((1, 0) + tuple(range(2, 2 + nsp)))


def _conv_args(c, nsp):
    p = c.params
    return (_per_axis(p, "stride", nsp), _per_axis(p, "pad", nsp), _per_axis(p, "dil", nsp),
            p["groups"])


def _conv_rule(nsp):
    def fn(c):
        x, w, _ = c.inputs
        stride, pad, dil, g = _conv_args(c, nsp)
        dx = conv_input_grad(c.dy, w, x.shape[2:], stride, pad, dil, g) if c.wants(0) else None
        dw = conv_weight_grad(x, c.dy, w.shape[2:], stride, pad, dil, g) if c.wants(1) else None
        return [dx, dw, c.dy.sum(axis=(0,) + tuple(range(2, 2 + nsp)))]
    return fn


def _conv_transpose_rule(nsp):
    def fn(c):
        x, w, _ = c.inputs
        stride, pad, dil, g = _conv_args(c, nsp)
        dx = dw = None
        if c.wants(0):
            dx = _crop(_conv(c.dy, w, stride, pad, dil, g), x.shape[2:])
        if c.wants(1):
            dw = conv_weight_grad(c.dy, x, w.shape[2:], stride, pad, dil, g)
        return [dx, dw, c.dy.sum(axis=(0,) + tuple(range(2, 2 + nsp)))]
    return fn


rule("conv1d")(_conv_rule(1))
rule("conv3d")(_conv_rule(3))
rule("conv_transpose1d")(_conv_transpose_rule(1))
rule("conv_transpose2d")(_conv_transpose_rule(2))


# -- pooling ---------------------------------------------------------------------------------------

def _pool_args(p, nsp):
    return _per_axis(p, "kernel", nsp), _per_axis(p, "stride", nsp), _per_axis(p, "pad", nsp)


def _avg_pool_rule(nsp):
    def fn(c):
        x = c.inputs[0]
        ks, stride, pad = _pool_args(c.params, nsp)
        ch = x.shape[1]
        sizes = tuple(x.shape[2:])
        if c.params.get("count_include_pad", True) or not any(pad):
            scaled = c.dy * (1.0 / math.prod(ks))
        else:                  # each window's divisor counts its in-bounds inputs
            inv = np.ones(())
            for n, k, s, p, m in zip(sizes, ks, stride, pad, c.dy.shape[2:]):
                count = np.array([min(i * s - p + k, n) - max(i * s - p, 0) for i in range(m)])
                inv = np.multiply.outer(inv, 1.0 / count)
            scaled = c.dy * T.as_tensor(inv.astype(x.dtype))
        ones = shapes.ones((ch, 1) + ks, x.dtype)
        return [conv_input_grad(scaled, ones, sizes, stride, pad, (1,) * nsp, ch)]
    return fn


def _max_pool_rule(nsp):
    def fn(c):
        x = c.inputs[0]
        ks, stride, pad = _pool_args(c.params, nsp)
        sizes = tuple(x.shape[2:])
        outs = tuple(c.dy.shape[2:])
        xp = x
        for axis, p in enumerate(pad, start=2):
            xp = shapes.pad_axis(xp, axis, p, p, -math.inf)
        total = taken = None
        for tap in itertools.product(*(range(k) for k in ks)):
            sl = tuple(slice(t, t + s * (m - 1) + 1, s) for t, s, m in zip(tap, stride, outs))
            hit = xp[(slice(None), slice(None)) + sl] == c.y
            if taken is not None:
                hit = hit & ~taken
            taken = hit if taken is None else taken | hit
            part = shapes.unslice(ops.where(hit, c.dy, 0.0), xp.shape, (0, 0) + tap,
                                  (1, 1) + stride)
            total = part if total is None else total + part
        return [total[(slice(None), slice(None))
                      + tuple(slice(p, p + n) for p, n in zip(pad, sizes))]]
    return fn


rule("avg_pool1d")(_avg_pool_rule(1))
rule("avg_pool3d")(_avg_pool_rule(3))
rule("max_pool1d")(_max_pool_rule(1))
rule("max_pool3d")(_max_pool_rule(3))


# -- affine_grid and grid_sample -------------------------------------------------------------------

def _normalized(n: int, align: bool) -> np.ndarray:
    """The normalized coordinate of each of ``n`` pixels (float64)."""
    i = np.arange(n, dtype=np.float64)
    if align:
        return 2.0 * i / (n - 1) - 1.0 if n > 1 else np.zeros(1)
    return (2.0 * i + 1.0) / n - 1.0


@rule("affine_grid")
def _affine_grid(c):
    """out[n, h, w, t] = theta[n, t, :] . (x_w, y_h, 1): dtheta[n, t, :] = sum over (h, w) of
    dy[n, h, w, t] (x_w, y_h, 1)."""
    n, h, w, _ = c.dy.shape
    align = c.params["align_corners"]
    ys, xs = np.meshgrid(_normalized(h, align), _normalized(w, align), indexing="ij")
    base = np.stack([xs.ravel(), ys.ravel(), np.ones(h * w)], axis=1)      # [H W, 3]
    dyt = c.dy.reshape(n, h * w, 2).transpose(0, 2, 1).reshape(n * 2, h * w)
    got = ops.matmul.kernel(dyt, T.as_tensor(base.astype(c.dy.dtype)))
    return [got.reshape(n, 2, 3)]


def bilinear_at(x, px, py, mode="bilinear"):
    """x [N, C, H, W] sampled at pixel coordinates px, py [N, OH, OW] (any float dtype), 0
    outside the image: gathers of flat pixel indices (constants to the gradient) weighted by
    the bilinear weights (functions of the coordinates, rounded to x's dtype)."""
    n, ch, h, w = x.shape
    _, oh, ow = px.shape
    dt = x.dtype
    flat = x.reshape(n, ch, h * w)

    def read(fx, fy):
        """x at integer-valued float positions (fx, fy), 0 outside: [N, C, OH, OW]."""
        inside = ((fx >= 0.0) & (fx <= w - 1.0) & (fy >= 0.0) & (fy <= h - 1.0)).astype(dt)
        index = (ops.clip(fy, 0.0, h - 1.0) * float(w) + ops.clip(fx, 0.0, w - 1.0))
        index = index.astype(np.int32).reshape(n, 1, oh * ow).broadcast_to((n, ch, oh * ow))
        got = ops.take_along_axis(flat, index, 2).reshape(n, ch, oh, ow)
        return got * inside.reshape(n, 1, oh, ow)

    if mode == "nearest":
        return read(ops.round(px), ops.round(py))
    x0, y0 = ops.floor(px), ops.floor(py)
    wx = (px - x0).astype(dt).reshape(n, 1, oh, ow)
    wy = (py - y0).astype(dt).reshape(n, 1, oh, ow)
    top = read(x0, y0) * (1.0 - wx) + read(x0 + 1.0, y0) * wx
    bottom = read(x0, y0 + 1.0) * (1.0 - wx) + read(x0 + 1.0, y0 + 1.0) * wx
    return top * (1.0 - wy) + bottom * wy


def _sample(x, grid, mode, padding_mode, align):
    """grid_sample recomputed from differentiable ops (see bilinear_at)."""
    _, _, h, w = x.shape

    def pixel(g, size):
        p = (g + 1.0) * ((size - 1) / 2.0) if align else ((g + 1.0) * size - 1.0) * 0.5
        if padding_mode == "border":
            return ops.clip(p, 0.0, size - 1.0)
        return ops.clip(p, -2.0, size + 1.0)      # as the kernel (far outside everything is 0)

    return bilinear_at(x, pixel(grid[:, :, :, 0], w), pixel(grid[:, :, :, 1], h), mode)


def _safe_inverse(v):
    """1 / v, 0 where v is 0 (the warps' rule for a singular matrix or a zero divisor)."""
    nz = v != 0.0
    return ops.where(nz, 1.0 / ops.where(nz, v, 1.0), 0.0)


def _warp(x, matrix, oh, ow, inverse_map):
    """warp_affine / warp_perspective recomputed: the destination-to-source map (the matrix,
    or its inverse by cofactors), then bilinear sampling at the mapped pixel coordinates."""
    n = x.shape[0]
    rows = matrix.shape[1]

    def m(r, k):
        return matrix[:, r, k].reshape(n, 1, 1)

    if inverse_map:
        inv = [[m(r, k) for k in range(3)] for r in range(rows)]
    elif rows == 2:
        a, b, cc, d, e, f = m(0, 0), m(0, 1), m(0, 2), m(1, 0), m(1, 1), m(1, 2)
        s = _safe_inverse(a * e - b * d)
        i00, i01, i10, i11 = e * s, -b * s, -d * s, a * s
        inv = [[i00, i01, -(i00 * cc + i01 * f)], [i10, i11, -(i10 * cc + i11 * f)]]
    else:
        g = [[m(r, k) for k in range(3)] for r in range(3)]
        cof = [[g[(r + 1) % 3][(k + 1) % 3] * g[(r + 2) % 3][(k + 2) % 3]
                - g[(r + 1) % 3][(k + 2) % 3] * g[(r + 2) % 3][(k + 1) % 3] for k in range(3)]
               for r in range(3)]
        s = _safe_inverse(g[0][0] * cof[0][0] + g[0][1] * cof[0][1] + g[0][2] * cof[0][2])
        inv = [[cof[k][r] * s for k in range(3)] for r in range(3)]
    ys, xs = np.meshgrid(np.arange(oh, dtype=np.float64), np.arange(ow, dtype=np.float64),
                         indexing="ij")
    big_x = T.as_tensor(xs.astype(matrix.dtype)).reshape(1, oh, ow)
    big_y = T.as_tensor(ys.astype(matrix.dtype)).reshape(1, oh, ow)

    def row(r):
        return inv[r][0] * big_x + inv[r][1] * big_y + inv[r][2]

    sx, sy = row(0), row(1)
    if rows == 3:
        rz = _safe_inverse(row(2))
        sx, sy = sx * rz, sy * rz
    big = float(1 << 30)
    sx, sy = ops.clip(sx, -big, big), ops.clip(sy, -big, big)
    return bilinear_at(x, sx.broadcast_to((n, oh, ow)), sy.broadcast_to((n, oh, ow)))


@rule("warp_affine", "warp_perspective")
def _warp_rule(c):
    from ..core import through

    _, _, oh, ow = c.dy.shape
    inverse_map = c.params["inverse_map"]
    return through(lambda a, mtx: _warp(a, mtx, oh, ow, inverse_map), c.inputs, [c.dy])


@rule("grid_sample")
def _grid_sample(c):
    from ..core import through

    p = c.params
    x, grid = c.inputs
    got = through(lambda a, g: _sample(a, g, p["mode"], p["padding_mode"], p["align_corners"]),
                  [x, grid], [c.dy])
    if got[1] is None:                 # nearest: nothing of the grid reaches the output
        got[1] = shapes.zeros(grid.shape, grid.dtype)
    return got
