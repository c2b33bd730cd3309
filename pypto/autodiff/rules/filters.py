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
* rgb_to_hsv: piecewise smooth, the piece fixed by which channel holds the maximum M and which
  the minimum m (delta = M - m). Ties go where the kernel sends them: the maximum is the first
  of red, green, blue equal to it (the order the kernel picks the hue sector in), and the
  minimum likewise the first equal to it. On its piece hue is (k + (a - b) / delta) / 6 (k = 0,
  2, 4 and (a, b) = (g, b), (b, r), (r, g) for a red, green, blue maximum), saturation
  delta / M and value M, each differentiated exactly; the value's gradient goes to the maximum
  channel alone. Where delta == 0 (a gray pixel, black included; the kernel holds hue and
  saturation at 0 there) hue and saturation pass nothing back, a chosen zero (hue has no limit
  at a gray and saturation only one-sided slopes), and the value's gradient goes to red. Hue's
  wrap from just under 1 to 0 (a red maximum with green == blue) is a jump of one turn with
  the same slope on both sides; the rule gives that slope. Where M == 0 < delta (negative
  inputs, outside the [0, 1] domain) the kernel's saturation is infinite, and so is its
  gradient.
* hsv_to_rgb: continuous, kinked where 6 h crosses an integer; the gradient is that of the
  sector the kernel picks (floor of 6 wrap(h): the derivative from above at a sector edge). The
  hue's wrap into [0, 1) has slope 1 (its floor passes nothing, as ``floor`` does).
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


# -- HSV -------------------------------------------------------------------------------------------

def _channel(t, k):
    return t[:, k:k + 1, :]


def _first_hits(x, target):
    """Boolean [B, 1, N] masks, one per channel, of the first channel (red, green, blue order)
    equal to ``target``; the last mask takes whatever the first two do not (the kernel's
    ``select`` falls through to blue the same way)."""
    r_hit = _channel(x, 0) == target
    g_hit = ~r_hit & (_channel(x, 1) == target)
    return r_hit, g_hit, ~(r_hit | g_hit)


def _stack3(parts, dtype):
    return ops.concat([p.astype(dtype) for p in parts], axis=1)


@rule("rgb_to_hsv")
def _rgb_to_hsv(c):
    """With M the maximum, m the minimum and d = M - m, the sector of the maximum channel gives
    hue h = (k + (a - b) / d) / 6, where (a, b) = (g, b), (b, r), (r, g) for a red, green, blue
    maximum; s = d / M = 1 - m / M; v = M. So

    * dh: +1 / (6 d) to a, -1 / (6 d) to b, -u / (6 d) to M and +u / (6 d) to m (u = (a - b) / d);
    * ds: m / M**2 to M, -1 / M to m;
    * dv: 1 to M.

    ``a`` is the channel after the maximum (cyclically) and ``b`` the one before it, so one
    mask of the maximum, rolled, places all three hue terms."""
    x, y, dy = c.inputs[0], c.y, c.dy
    dt = x.dtype
    big = _channel(y, 2)                                   # value: the maximum, exactly
    small = ops.minimum(ops.minimum(_channel(x, 0), _channel(x, 1)), _channel(x, 2))
    mr, mg, mb = _first_hits(x, big)
    at_max = _stack3((mr, mg, mb), dt)
    at_min = _stack3(_first_hits(x, small), dt)
    after_minus_before = _stack3((mb, mr, mg), dt) - _stack3((mg, mb, mr), dt)
    delta = big - small
    gray = delta <= 0.0
    safe_d = ops.where(gray, 1.0, delta)
    safe_v = ops.where(gray, 1.0, big)                    # the kernel's own guard
    u = (x * after_minus_before).sum(axis=1, keepdims=True) / safe_d
    gh = ops.where(gray, 0.0, _channel(dy, 0) / (6.0 * safe_d))
    gs = ops.where(gray, 0.0, _channel(dy, 1) / safe_v)
    to_max = _channel(dy, 2) + gs * small / safe_v - gh * u
    to_min = gh * u - gs
    return [gh * after_minus_before + at_max * to_max + at_min * to_min]


@rule("hsv_to_rgb")
def _hsv_to_rgb(c):
    """Sector k = floor(6 wrap(h)) and f = 6 wrap(h) - k, as the kernel computes them; each
    output channel is one of v, p = v (1 - s), q = v (1 - s f), t = v (1 - s (1 - f)), by the
    kernel's table. Summing the output gradients by the quantity each channel shows
    (wv, wp, wq, wt):

    * dh = 6 v s (wt - wq) (df/dh = 6; the wrap and the sector are locally constant);
    * ds = -v (wp + f wq + (1 - f) wt);
    * dv = wv + (1 - s) wp + (1 - s f) wq + (1 - s (1 - f)) wt."""
    x, dy = c.inputs[0], c.dy
    h, s, v = (_channel(x, k) for k in range(3))
    dr, dg, db = (_channel(dy, k) for k in range(3))
    h6 = (h - ops.floor(h)) * 6.0
    sec = ops.floor(h6)
    f = h6 - sec
    k = ops.where(sec >= 6.0, sec - 6.0, sec)             # the kernel's `% 6` on a rounded-up 6
    at = [k == float(i) for i in range(6)]
    wv = ops.where(at[0] | at[5], dr, ops.where(at[1] | at[2], dg, db))
    wp = ops.where(at[0] | at[1], db, ops.where(at[2] | at[3], dr, dg))
    wq = ops.where(at[1], dr, ops.where(at[3], dg, ops.where(at[5], db, 0.0)))
    wt = ops.where(at[0], dg, ops.where(at[2], db, ops.where(at[4], dr, 0.0)))
    sf = s * f
    dh = 6.0 * v * s * (wt - wq)
    ds = -v * (wp + f * wq + (1.0 - f) * wt)
    dv = wv + (1.0 - s) * wp + (1.0 - sf) * wq + (1.0 - s + sf) * wt
    return [ops.concat([dh, ds, dv], axis=1)]
