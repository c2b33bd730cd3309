"""Spatial transformers in ``torch.nn.functional``'s conventions: affine_grid and grid_sample
(2-D: images [N, C, H, W]).

- ``affine_grid(theta, size, align_corners=False)``: theta [N, 2, 3], size (N, C, H, W); returns
  the grid [N, H, W, 2] of ``theta @ (x, y, 1)`` over the normalized output coordinates, x along
  columns and y along rows. With ``align_corners=True`` column j is ``-1 + 2 j / (W - 1)`` (the
  centres of the corner pixels sit at -1 and 1; 0 when W = 1, as torch since 1.3); otherwise ``(2 j + 1) / W - 1``
  (the corner pixels' outer edges sit at -1 and 1).
- ``grid_sample(x, grid, mode="bilinear", padding_mode="zeros", align_corners=False)``: x
  [N, C, H, W], grid [N, OH, OW, 2] of normalized (x, y) positions; returns [N, C, OH, OW].
  A position maps to pixel coordinates by ``(g + 1) / 2 * (n - 1)`` (align_corners) or
  ``((g + 1) * n - 1) / 2``. ``mode`` is ``"bilinear"`` (the four neighbours weighted) or
  ``"nearest"`` (the nearest pixel, halves to even, as torch); ``padding_mode`` ``"zeros"`` (pixels
  outside the image read 0) or ``"border"`` (positions clipped to the image first).
  ``"reflection"`` padding and bicubic sampling are not offered. Non-finite positions follow
  torch: with zeros padding, bilinear gives NaN at a NaN or infinite position and nearest reads
  0; border padding clips an infinite position to the edge and a NaN one to 0.
"""

from __future__ import annotations

import halide as hl
import numpy as np

from ..errors import ParamError, ShapeError
from ..runtime import as_array
from . import elementwise as _ew
from ._consts import lit
from ._op import Param, op
from .conv import check_float

_FLOATS = ["float32", "float64"]
_ALIGN = Param("align_corners", bool, False,
               doc="-1 and 1 are the corner pixels' centres (else their outer edges)")
_SIZE = 1 << 20


def _bool(name, arg, value):
    if value is None and arg == "align_corners":
        return False            # torch's default (it warns when left unset)
    if not isinstance(value, (bool, np.bool_)):
        raise ParamError(f"{name}: '{arg}' must be a bool, got {value!r}")
    return bool(value)


# -- affine_grid -----------------------------------------------------------------------------------
def _base(n, align):
    """Normalized coordinates of ``n`` pixels, float64 (independent of the kernel's formula)."""
    if align:
        return np.linspace(-1.0, 1.0, n) if n > 1 else np.zeros(1)
    edges = np.linspace(-1.0, 1.0, n + 1)
    return (edges[:-1] + edges[1:]) / 2


def _affine_grid_reference(theta, size, align_corners=False):
    theta = np.asarray(theta)
    n, _, h, w = size
    ys, xs = np.meshgrid(_base(h, align_corners), _base(w, align_corners), indexing="ij")
    base = np.stack([xs, ys, np.ones_like(xs)], axis=-1)          # [H, W, 3]
    grid = np.einsum("hwk,nrk->nhwr", base, theta.astype(np.float64))
    return grid.astype(theta.dtype)


def _affine_grid_frontend(theta, size, align_corners=False):
    """The sampling grid of a batch of 2-D affine maps, like F.affine_grid."""
    name = "affine_grid"
    theta = as_array(theta, name, "theta")
    align = _bool(name, "align_corners", align_corners)
    try:
        dims = tuple(size)
    except TypeError:
        dims = None
    if dims is None or len(dims) != 4:
        raise ParamError(f"{name}: 'size' must be (N, C, H, W) for 2-D images, got {size!r} "
                         f"(3-D volumes are not supported)")
    for v in dims:
        if isinstance(v, (bool, np.bool_)) or not hasattr(v, "__index__") or int(v) < 1:
            raise ParamError(f"{name}: 'size' must hold positive ints, got {size!r}")
    n, _, h, w = (int(v) for v in dims)
    if tuple(theta.shape) != (n, 2, 3):
        raise ShapeError(f"{name}: theta must be [N, 2, 3] = [{n}, 2, 3] for size {tuple(dims)}, "
                         f"got shape {tuple(theta.shape)}")
    check_float(name, theta=theta)
    return affine_grid.kernel(theta, height=h, width=w, align_corners=align)


_affine_grid_frontend.shape_only = True


def _affine_grid_validate(dims, p):
    if dims["R"] != 2 or dims["K"] != 3:
        raise ShapeError(f"affine_grid: theta must be [N, 2, 3], got [N, {dims['R']}, "
                         f"{dims['K']}]")


def _coord(i, n, align, t):
    """Normalized coordinate of pixel ``i`` of ``n`` in type ``t``."""
    fi = hl.cast(t, i)
    one, two = hl.cast(t, 1), hl.cast(t, 2)
    # Products with exact reciprocals: Halide turns a division by a constant into one anyway, and
    # a float64 reciprocal must be built exactly to reach an OpenCL device (``_consts``).
    if align:
        return two * fi * lit(t, 1.0 / (n - 1)) - one if n > 1 else hl.cast(t, 0)
    return (two * fi + one) * lit(t, 1.0 / n) - one


@op(category="nn",
    inputs={"theta": "N R K"},
    output="N H W T",
    dtypes=_FLOATS,
    params=[Param("height", int, low=1, high=_SIZE, doc="rows of the grid"),
            Param("width", int, low=1, high=_SIZE, doc="columns of the grid"), _ALIGN],
    reference=_affine_grid_reference,
    kernel_reference=lambda theta, height, width, align_corners=False: _affine_grid_reference(
        theta, (theta.shape[0], 1, height, width), align_corners),
    frontend=_affine_grid_frontend,
    validate=_affine_grid_validate,
    derive=lambda d, p: {"H": p["height"], "W": p["width"], "T": 2},
    example={"N": 2, "R": 2, "K": 3})
def affine_grid(theta, *, height, width, align_corners, dims):
    """out[n, h, w, t] = theta[n, t, 0] * x(w) + theta[n, t, 1] * y(h) + theta[n, t, 2] with
    x, y the normalized column and row coordinates."""
    t, w, h, n = hl.Var("t"), hl.Var("w"), hl.Var("h"), hl.Var("n")
    ty = theta.type()
    xs = _coord(w, width, align_corners, ty)
    ys = _coord(h, height, align_corners, ty)
    out = hl.Func("out")
    out[t, w, h, n] = theta[0, t, n] * xs + theta[1, t, n] * ys + theta[2, t, n]
    return out


# -- grid_sample -----------------------------------------------------------------------------------
def _unnormalize(g, n, align):
    return (g + 1) / 2 * (n - 1) if align else ((g + 1) * n - 1) / 2


def _grid_sample_reference(x, grid, mode="bilinear", padding_mode="zeros", align_corners=False):
    """NumPy grid_sample in float64: per output pixel, the neighbours read with zero outside."""
    x, grid = np.asarray(x), np.asarray(grid)
    n, c, h, w = x.shape
    xf = x.astype(np.float64)
    gx = _unnormalize(grid[..., 0].astype(np.float64), w, align_corners)   # [N, OH, OW]
    gy = _unnormalize(grid[..., 1].astype(np.float64), h, align_corners)
    if padding_mode == "border":                               # torch: a NaN position clips to 0
        gx = np.where(np.isnan(gx), 0.0, np.clip(gx, 0, w - 1))
        gy = np.where(np.isnan(gy), 0.0, np.clip(gy, 0, h - 1))
        bad = np.zeros(gx.shape, bool)
    else:      # far outside reads 0 all the same; torch: NaN where a position is NaN or inf
        bad = ~(np.isfinite(gx) & np.isfinite(gy))
        gx = np.where(bad, -2.0, np.clip(gx, -2.0, w + 1.0))
        gy = np.where(bad, -2.0, np.clip(gy, -2.0, h + 1.0))
    batch = np.arange(n)[:, None, None]

    def read(ix, iy):                      # [N, C, OH, OW], 0 outside the image
        ok = (ix >= 0) & (ix < w) & (iy >= 0) & (iy < h)
        vals = xf[batch, :, np.clip(iy, 0, h - 1), np.clip(ix, 0, w - 1)]  # [N, OH, OW, C]
        return np.moveaxis(np.where(ok[..., None], vals, 0.0), -1, 1)

    if mode == "nearest":
        out = read(np.rint(gx).astype(np.int64), np.rint(gy).astype(np.int64))
    else:
        x0, y0 = np.floor(gx), np.floor(gy)
        fx, fy = gx - x0, gy - y0
        x0, y0 = x0.astype(np.int64), y0.astype(np.int64)
        out = 0.0
        for dx, dy, wt in ((0, 0, (1 - fx) * (1 - fy)), (1, 0, fx * (1 - fy)),
                           (0, 1, (1 - fx) * fy), (1, 1, fx * fy)):
            out = out + read(x0 + dx, y0 + dy) * wt[:, None]
        out = np.where(bad[:, None], np.nan, out)
    return np.asarray(out).astype(x.dtype)


def _grid_sample_frontend(x, grid, mode="bilinear", padding_mode="zeros", align_corners=False):
    """Samples x [N, C, H, W] at the normalized positions of grid [N, OH, OW, 2], like
    F.grid_sample (bilinear or nearest; zeros or border padding)."""
    name = "grid_sample"
    x = as_array(x, name, "x")
    grid = as_array(grid, name, "grid")
    if mode not in ("bilinear", "nearest"):
        raise ParamError(f"{name}: 'mode' must be 'bilinear' or 'nearest', got {mode!r} "
                         f"(bicubic is not supported)")
    if padding_mode not in ("zeros", "border"):
        raise ParamError(f"{name}: 'padding_mode' must be 'zeros' or 'border', got "
                         f"{padding_mode!r} (reflection is not supported)")
    align = _bool(name, "align_corners", align_corners)
    if x.ndim != 4:
        raise ShapeError(f"{name}: x must be 4-D [N, C, H, W], got shape {tuple(x.shape)} "
                         f"(5-D volumes are not supported)")
    if grid.ndim != 4 or grid.shape[-1] != 2:
        raise ShapeError(f"{name}: grid must be [N, OH, OW, 2] (x, y positions), got shape "
                         f"{tuple(grid.shape)}")
    if grid.shape[0] != x.shape[0]:
        raise ShapeError(f"{name}: grid has N={grid.shape[0]} but x has N={x.shape[0]}; one grid "
                         f"per image")
    check_float(name, x=x, grid=grid)
    return grid_sample.kernel(x, grid, mode=mode, padding_mode=padding_mode,
                              align_corners=align)


_grid_sample_frontend.shape_only = True


def _grid_sample_validate(dims, p):
    if dims["T"] != 2:
        raise ShapeError(f"grid_sample: grid's last axis must be 2 (x, y), got {dims['T']}")


@op(category="nn",
    inputs={"x": "N C H W", "grid": "N OH OW T"},
    output="N C OH OW",
    dtypes=_FLOATS,
    params=[Param("mode", str, "bilinear", choices=("bilinear", "nearest"),
                  doc="bilinear weights of the 4 neighbours, or the nearest pixel"),
            Param("padding_mode", str, "zeros", choices=("zeros", "border"),
                  doc="outside pixels read 0, or positions clip to the image"), _ALIGN],
    reference=_grid_sample_reference,
    frontend=_grid_sample_frontend,
    validate=_grid_sample_validate,
    example={"N": 2, "C": 8, "H": 17, "W": 19, "OH": 15, "OW": 21, "T": 2})
def grid_sample(x, grid, *, mode, padding_mode, align_corners, dims):
    """out[n, c, i, j] = x sampled at pixel coordinates (unnormalize(grid[n, i, j, 0], W),
    unnormalize(grid[n, i, j, 1], H)): bilinear over the 4 neighbours or the nearest pixel, 0
    outside the image (zeros) or positions clipped to it first (border)."""
    ow, oh, c, n = hl.Var("ow"), hl.Var("oh"), hl.Var("c"), hl.Var("n")
    t = x.type()
    one, two = hl.cast(t, 1), hl.cast(t, 2)

    def pixel(g, size):
        fs = hl.cast(t, size)
        if align_corners:
            p = (g + one) / two * (fs - one)
        else:
            p = ((g + one) * fs - one) / two
        if padding_mode == "border":          # torch: a NaN position clips to 0
            return hl.select(_ew._is_nan(g), hl.cast(t, 0), hl.clamp(p, hl.cast(t, 0), fs - one))
        # Far outside, every neighbour reads 0 either way; clamping keeps the int conversion
        # below in range. A NaN or infinite position reads 0 too (bilinear makes it NaN below).
        return hl.select(_ew._is_finite(g), hl.clamp(p, hl.cast(t, -2), fs + one), hl.cast(t, -2))

    # The sampling positions of an output pixel, the same for every channel: Funcs of their own
    # so that a schedule computes them once per pixel rather than once per channel.
    pos_x, pos_y = hl.Func("pos_x"), hl.Func("pos_y")
    gx, gy = grid[0, ow, oh, n], grid[1, ow, oh, n]
    pos_x[ow, oh, n] = pixel(gx, dims.W)
    pos_y[ow, oh, n] = pixel(gy, dims.H)
    px, py = pos_x[ow, oh, n], pos_y[ow, oh, n]

    def read(ix, iy):
        inside = (ix >= 0) & (ix < dims.W) & (iy >= 0) & (iy < dims.H)
        v = x[hl.clamp(ix, 0, dims.W - 1), hl.clamp(iy, 0, dims.H - 1), c, n]
        return hl.select(inside, v, hl.cast(t, 0))

    out = hl.Func("out")
    if mode == "nearest":
        out[ow, oh, c, n] = read(hl.cast(hl.Int(32), hl.round(px)),
                                 hl.cast(hl.Int(32), hl.round(py)))
        return out
    fx0, fy0 = hl.floor(px), hl.floor(py)
    ix, iy = hl.cast(hl.Int(32), fx0), hl.cast(hl.Int(32), fy0)
    wx, wy = px - fx0, py - fy0
    value = ((read(ix, iy) * (one - wx) + read(ix + 1, iy) * wx) * (one - wy)
             + (read(ix, iy + 1) * (one - wx) + read(ix + 1, iy + 1) * wx) * wy)
    if padding_mode == "zeros":
        # torch: a NaN or infinite position gives NaN (its weights are), not a pixel read as 0.
        value = hl.select(_ew._is_finite(gx) & _ew._is_finite(gy), value, _ew._nan(value))
    out[ow, oh, c, n] = value
    return out
