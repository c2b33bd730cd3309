"""Resampling: pixel_shuffle, pixel_unshuffle, upsample_nearest and roi_pool.

- ``pixel_shuffle(x, upscale_factor)``: [*, C r**2, H, W] -> [*, C, H r, W r] like torch:
  ``out[c, h r + i, w r + j] = x[c r**2 + i r + j, h, w]``; ``pixel_unshuffle`` inverts it.
- ``upsample_nearest(x, size=None, scale_factor=None)``: ``F.interpolate(mode="nearest")`` on the
  last two axes: output pixel ``d`` reads ``min(floor(d * scale), n - 1)`` with
  ``scale = 1 / scale_factor`` when a factor is given, else ``n / n_out``, computed in float32
  as torch computes it (so the pixels chosen are torch's).
- ``roi_pool(x, boxes, output_size, spatial_scale=1.0)``: ``torchvision.ops.roi_pool``: box
  corners scaled in the input's dtype and rounded half away from zero; a box spans
  ``end - start + 1`` pixels (at least 1) cut into bins of ``span / pooled`` pixels; each output
  is the maximum of its bin clamped to the image (0 for an empty bin). NaNs are skipped, as
  torchvision's kernel skips them; a bin of NaN and -inf only gives -inf (torchvision: -FLT_MAX).
  ``boxes`` are [K, 5] rows
  ``(batch_index, x1, y1, x2, y2)`` or a list of [L_i, 4] arrays, as for ``roi_align``.
"""

from __future__ import annotations

import math

import halide as hl
import numpy as np

from ..errors import ParamError, ShapeError
from ..runtime import as_array
from ._consts import lit
from ._op import Param, op
from .image import _check_batch_index, _roi_boxes
from .layout import ANY, _int
from .nn import _pair

_FLOATS = ["float32", "float64"]
_R = Param("r", int, 2, low=1, high=1 << 10, doc="the factor")


# -- pixel_shuffle and pixel_unshuffle -----------------------------------------------------------

def _shuffle_ref(x, upscale_factor):
    x = np.asarray(x)
    r = upscale_factor
    *lead, c, h, w = x.shape
    y = x.reshape(*lead, c // (r * r), r, r, h, w)
    k = len(lead)
    y = y.transpose(*range(k), k, k + 3, k + 1, k + 4, k + 2)
    return y.reshape(*lead, c // (r * r), h * r, w * r)


def _unshuffle_ref(x, downscale_factor):
    x = np.asarray(x)
    r = downscale_factor
    *lead, c, h, w = x.shape
    k = len(lead)
    y = x.reshape(*lead, c, h // r, r, w // r, r)
    y = y.transpose(*range(k), k, k + 2, k + 4, k + 1, k + 3)
    return y.reshape(*lead, c * r * r, h // r, w // r)


def _chw(name, x):
    x = as_array(x, name, "x")
    if x.ndim < 3:
        raise ShapeError(f"{name}: x must be [*, C, H, W], got shape {x.shape}")
    return x


def _shuffle_frontend(x, upscale_factor):
    """``F.pixel_shuffle``: channels C r**2 rearranged into an r times larger image."""
    x = _chw("pixel_shuffle", x)
    r = _int("pixel_shuffle", "upscale_factor", upscale_factor, low=1)
    c, h, w = x.shape[-3:]
    if c % (r * r):
        raise ShapeError(f"pixel_shuffle: channels C={c} must be divisible by "
                         f"upscale_factor**2 = {r * r}")
    out = pixel_shuffle.kernel(x.reshape(math.prod(x.shape[:-3]), c, h, w), r=r)
    return out.reshape(x.shape[:-3] + out.shape[1:])


def _shuffle_validate(d, p):
    if d["CI"] % (p["r"] * p["r"]):
        raise ShapeError(f"pixel_shuffle: channels {d['CI']} are not divisible by r**2")


@op(category="resample", inputs={"x": "B CI H W"}, output="B CO OH OW", dtypes=ANY[:4],
    params=[_R], reference=_shuffle_ref,
    kernel_reference=lambda x, r=2: _shuffle_ref(x, r), frontend=_shuffle_frontend,
    validate=_shuffle_validate,
    derive=lambda d, p: {"CO": d["CI"] // (p["r"] ** 2), "OH": d["H"] * p["r"],
                         "OW": d["W"] * p["r"]},
    example={"B": 2, "CI": 16, "H": 12, "W": 10})
def pixel_shuffle(x, *, r, dims):
    """out[b, c, h, w] = x[b, c r**2 + (h % r) r + w % r, h / r, w / r]."""
    ow, oh, co, b = hl.Var("ow"), hl.Var("oh"), hl.Var("co"), hl.Var("b")
    out = hl.Func("out")
    out[ow, oh, co, b] = x[ow / r, oh / r, co * (r * r) + (oh % r) * r + ow % r, b]
    return out


def _unshuffle_frontend(x, downscale_factor):
    """``F.pixel_unshuffle``: r x r blocks of pixels moved into channels."""
    x = _chw("pixel_unshuffle", x)
    r = _int("pixel_unshuffle", "downscale_factor", downscale_factor, low=1)
    c, h, w = x.shape[-3:]
    if h % r or w % r:
        raise ShapeError(f"pixel_unshuffle: H={h} and W={w} must be divisible by "
                         f"downscale_factor={r}")
    out = pixel_unshuffle.kernel(x.reshape(math.prod(x.shape[:-3]), c, h, w), r=r)
    return out.reshape(x.shape[:-3] + out.shape[1:])


def _unshuffle_validate(d, p):
    if d["H"] % p["r"] or d["W"] % p["r"]:
        raise ShapeError(f"pixel_unshuffle: H={d['H']} and W={d['W']} are not divisible by "
                         f"r={p['r']}")


@op(category="resample", inputs={"x": "B C H W"}, output="B CO OH OW", dtypes=ANY[:4],
    params=[_R], reference=_unshuffle_ref,
    kernel_reference=lambda x, r=2: _unshuffle_ref(x, r), frontend=_unshuffle_frontend,
    validate=_unshuffle_validate,
    derive=lambda d, p: {"CO": d["C"] * p["r"] ** 2, "OH": d["H"] // p["r"],
                         "OW": d["W"] // p["r"]},
    example={"B": 2, "C": 4, "H": 12, "W": 10})
def pixel_unshuffle(x, *, r, dims):
    """out[b, c r**2 + i r + j, h, w] = x[b, c, h r + i, w r + j]."""
    ow, oh, co, b = hl.Var("ow"), hl.Var("oh"), hl.Var("co"), hl.Var("b")
    i, j = (co / r) % r, co % r
    out = hl.Func("out")
    out[ow, oh, co, b] = x[ow * r + j, oh * r + i, co / (r * r), b]
    return out


# -- upsample_nearest ----------------------------------------------------------------------------

def _src_index(n_in, n_out, scale):
    """torch's nearest source index (float32 arithmetic) for each output position."""
    d = np.arange(n_out)
    if n_out == n_in:
        return d
    if n_out == 2 * n_in:
        return d >> 1
    s = np.float32(scale)
    return np.minimum(np.floor(d.astype(np.float32) * s).astype(np.int64), n_in - 1)


def _sizes(name, x, size, scale_factor):
    h, w = x.shape[-2:]
    if (size is None) == (scale_factor is None):
        raise ParamError(f"{name}: give exactly one of size and scale_factor")
    if size is not None:
        oh, ow = _pair(size, name, "size", 1)
        return oh, ow, h / oh, w / ow
    sf = scale_factor
    if isinstance(sf, np.ndarray) and sf.ndim <= 1:   # a 1-D array is a pair; 0-d, a number
        sf = tuple(sf.tolist()) if sf.ndim else sf[()]
    sf = tuple(sf) if isinstance(sf, (tuple, list)) else (sf,) * 2
    if len(sf) != 2 or any(isinstance(v, (bool, np.bool_)) or
                           not isinstance(v, (int, float, np.integer, np.floating)) or
                           not (0 < v < math.inf) for v in sf):
        raise ParamError(f"{name}: 'scale_factor' must be a positive number or a pair, got "
                         f"{scale_factor!r}")
    sf = (float(sf[0]), float(sf[1]))
    oh, ow = int(math.floor(h * sf[0])), int(math.floor(w * sf[1]))
    if oh < 1 or ow < 1:
        raise ParamError(f"{name}: scale_factor {scale_factor!r} gives an empty output")
    return oh, ow, 1.0 / sf[0], 1.0 / sf[1]


def _up_ref(x, size=None, scale_factor=None):
    x = np.asarray(x)
    oh, ow, sh, sw = _sizes("upsample_nearest", x, size, scale_factor)
    rows = _src_index(x.shape[-2], oh, sh)
    cols = _src_index(x.shape[-1], ow, sw)
    return x[..., rows, :][..., cols]


def _up_frontend(x, size=None, scale_factor=None):
    """``F.interpolate(x, size, scale_factor, mode="nearest")`` on the last two axes."""
    name = "upsample_nearest"
    x = as_array(x, name, "x")
    if x.ndim < 2:
        raise ShapeError(f"{name}: x must be [..., H, W], got shape {x.shape}")
    oh, ow, sh, sw = _sizes(name, x, size, scale_factor)
    out = upsample_nearest.kernel(x.reshape((math.prod(x.shape[:-2]),) + x.shape[-2:]),
                                  height=oh, width=ow,
                                  scale_h=sh, scale_w=sw)
    return out.reshape(x.shape[:-2] + (oh, ow))


@op(category="resample", inputs={"x": "B H W"}, output="B OH OW", dtypes=ANY[:4],
    params=[Param("height", int, 2, low=1, high=1 << 20, doc="output rows"),
            Param("width", int, 2, low=1, high=1 << 20, doc="output columns"),
            Param("scale_h", float, 1.0, low=0.0, doc="input rows per output row"),
            Param("scale_w", float, 1.0, low=0.0, doc="input columns per output column")],
    reference=_up_ref,
    kernel_reference=lambda x, height=2, width=2, scale_h=1.0, scale_w=1.0: x[
        :, _src_index(x.shape[1], height, scale_h)][:, :, _src_index(x.shape[2], width, scale_w)],
    frontend=_up_frontend, derive=lambda d, p: {"OH": p["height"], "OW": p["width"]},
    example={"B": 2, "H": 20, "W": 30})
def upsample_nearest(x, *, height, width, scale_h, scale_w, dims):
    """out[b, i, j] = x[b, src(i), src(j)] with torch's float32 source indices."""
    ow, oh, b = hl.Var("ow"), hl.Var("oh"), hl.Var("b")

    def src(d, n_in, n_out, scale):
        s = hl.floor(hl.cast(hl.Float(32), d) * hl.f32(scale))
        general = hl.min(hl.cast(hl.Int(32), s), n_in - 1)
        return hl.select(n_out == n_in, d, hl.select(n_out == 2 * n_in, d / 2, general))

    out = hl.Func("out")
    out[ow, oh, b] = x[hl.clamp(src(ow, dims.W, width, scale_w), 0, dims.W - 1),
                       hl.clamp(src(oh, dims.H, height, scale_h), 0, dims.H - 1), b]
    return out


# -- roi_pool ------------------------------------------------------------------------------------

def _round_away(v):
    return np.sign(v) * np.floor(np.abs(v) + 0.5)


def _roi_pool_ref(x, boxes, output_size, spatial_scale=1.0):
    x = np.asarray(x)
    boxes = np.asarray(_roi_boxes(boxes, "roi_pool"))
    ph_n, pw_n = _pair(output_size, "roi_pool", "output_size", 1)
    n, c, h, w = x.shape
    t = x.dtype.type
    out = np.zeros((boxes.shape[0], c, ph_n, pw_n), x.dtype)
    for k, bx in enumerate(boxes.astype(x.dtype)):
        img = x[int(bx[0])]
        x1, y1, x2, y2 = (int(_round_away(t(v) * t(spatial_scale))) for v in bx[1:])
        bh = t(max(y2 - y1 + 1, 1)) / t(ph_n)
        bw = t(max(x2 - x1 + 1, 1)) / t(pw_n)
        for i in range(ph_n):
            hs = min(max(int(np.floor(t(i) * bh)) + y1, 0), h)
            he = min(max(int(np.ceil(t(i + 1) * bh)) + y1, 0), h)
            for j in range(pw_n):
                ws = min(max(int(np.floor(t(j) * bw)) + x1, 0), w)
                we = min(max(int(np.ceil(t(j + 1) * bw)) + x1, 0), w)
                if he > hs and we > ws:
                    vals = img[:, hs:he, ws:we]
                    out[k, :, i, j] = np.where(np.isnan(vals), -np.inf, vals).max(axis=(1, 2))
    return out


def _roi_pool_frontend(x, boxes, output_size, spatial_scale=1.0):
    """Max pooling of each box's bins, like ``torchvision.ops.roi_pool`` (see the module docs)."""
    name = "roi_pool"
    x = as_array(x, name, "x")
    b = _roi_boxes(boxes, name)
    oh, ow = _pair(output_size, name, "output_size", 1)
    _check_batch_index(name, x, b)
    if b.ndim == 2 and b.dtype != x.dtype and b.dtype.kind in "fiu" and x.dtype.name in _FLOATS:
        b = b.astype(x.dtype)
    return roi_pool.kernel(x, b, pooled_height=oh, pooled_width=ow,
                           spatial_scale=float(spatial_scale))


def _roi_pool_inputs(dims, dtypes, params, rng):
    x = rng.uniform(-1, 1, (dims["N"], dims["C"], dims["H"], dims["W"])).astype(dtypes[0])
    k = dims["K"]
    xy = rng.uniform(-2, max(dims["H"], dims["W"]), (k, 2, 2))
    b = np.concatenate([rng.integers(0, dims["N"], (k, 1)), xy.min(1), xy.max(1)], 1)
    return [x, b.astype(dtypes[1])]


@op(category="detection", inputs={"x": "N C H W", "boxes": "K F"}, output="K C OH OW",
    dtypes=_FLOATS,
    params=[Param("pooled_height", int, 2, low=1, high=1 << 16, doc="output bins along height"),
            Param("pooled_width", int, 2, low=1, high=1 << 16, doc="output bins along width"),
            Param("spatial_scale", float, 1.0, low=0.0, doc="box coordinate scale")],
    reference=_roi_pool_ref,
    kernel_reference=lambda x, boxes, pooled_height=2, pooled_width=2, spatial_scale=1.0:
    _roi_pool_ref(x, boxes, (pooled_height, pooled_width), spatial_scale),
    frontend=_roi_pool_frontend, make_inputs=_roi_pool_inputs,
    validate=lambda d, p: None if d["F"] == 5 else (_ for _ in ()).throw(ShapeError(
        f"roi_pool: boxes must be [K, 5] rows (batch_index, x1, y1, x2, y2), got {d['F']} "
        "columns")),
    derive=lambda d, p: {"OH": p["pooled_height"], "OW": p["pooled_width"]},
    example={"N": 2, "C": 8, "H": 24, "W": 30, "K": 6, "F": 5})
def roi_pool(x, boxes, *, pooled_height, pooled_width, spatial_scale, dims):
    """RoIPool: the maximum of each bin of each box (0 for an empty bin)."""
    ow, oh, c, k = hl.Var("ow"), hl.Var("oh"), hl.Var("c"), hl.Var("k")
    t = x.type()
    scale = lit(t, spatial_scale)

    def corner(e):
        v = hl.strict_float(boxes[e, k] * scale)     # no fused multiply-add: ties round as NumPy
        return hl.cast(hl.Int(32), hl.strict_float(hl.select(
            v < 0, -hl.floor(-v + hl.cast(t, 0.5)), hl.floor(v + hl.cast(t, 0.5)))))

    n = hl.clamp(hl.cast(hl.Int(32), boxes[0, k]), 0, dims.N - 1)
    x1, y1, x2, y2 = corner(1), corner(2), corner(3), corner(4)
    # The bin edges are floor/ceil of products that land on integers (7 bins of a 3-pixel box:
    # 7 * (3/7) is 3.0 in float32): under LLVM's fast math they came out one off, at 7,638 of
    # 196,000 outputs (1,000 boxes, 4 channels, 7x7 bins). strict_float keeps the IEEE
    # arithmetic the reference does.
    bh = hl.strict_float(hl.cast(t, hl.max(y2 - y1 + 1, 1)) / hl.cast(t, pooled_height))
    bw = hl.strict_float(hl.cast(t, hl.max(x2 - x1 + 1, 1)) / hl.cast(t, pooled_width))
    # Each bin's edges are Funcs of (bin, box), so that a schedule computes them once per box:
    # inlined, they sat in the bin loop's predicate and were recomputed (two divisions among
    # them) at every pixel of every bin of every channel.
    rows, cols = hl.Func("bin_rows"), hl.Func("bin_cols")
    rows[oh, k] = (
        hl.clamp(hl.cast(hl.Int(32), hl.strict_float(hl.floor(hl.cast(t, oh) * bh))) + y1, 0, dims.H),
        hl.clamp(hl.cast(hl.Int(32), hl.strict_float(hl.ceil(hl.cast(t, oh + 1) * bh))) + y1, 0, dims.H))
    cols[ow, k] = (
        hl.clamp(hl.cast(hl.Int(32), hl.strict_float(hl.floor(hl.cast(t, ow) * bw))) + x1, 0, dims.W),
        hl.clamp(hl.cast(hl.Int(32), hl.strict_float(hl.ceil(hl.cast(t, ow + 1) * bw))) + x1, 0, dims.W))
    hs, he = rows[oh, k][0], rows[oh, k][1]
    ws, we = cols[ow, k][0], cols[ow, k][1]
    r = hl.RDom([hl.Range(0, dims.W), hl.Range(0, dims.H)], "r")
    r.where((r.x < we - ws) & (r.y < he - hs))
    acc = hl.Func("acc")
    acc[ow, oh, c, k] = hl.cast(t, -math.inf)
    v = x[hl.clamp(ws + r.x, 0, dims.W - 1), hl.clamp(hs + r.y, 0, dims.H - 1), c, n]
    # torchvision's ``if (v > maxval) maxval = v``: a NaN never replaces the maximum. Strict, so
    # the compare keeps its IEEE meaning (hl.max kept a NaN at the end of a bin, dropped others).
    acc[ow, oh, c, k] = hl.strict_float(hl.select(v > acc[ow, oh, c, k], v, acc[ow, oh, c, k]))
    out = hl.Func("out")
    out[ow, oh, c, k] = hl.select((he > hs) & (we > ws), acc[ow, oh, c, k], hl.cast(t, 0))
    return out
