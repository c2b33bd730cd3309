"""Geometric transforms: resize_nearest, resize_bicubic, warp_affine and warp_perspective.

Images are ``[..., H, W]``. Pixel ``(row i, column j)`` has its center at coordinate
``(x=j, y=i)`` for the warps (OpenCV's convention) and at ``(j + 0.5, i + 0.5)`` in the
half-pixel convention of the resizes (``F.interpolate`` with ``align_corners=False``).

- ``resize_nearest(x, height, width, mode="nearest")``: ``F.interpolate(mode="nearest")``:
  output pixel ``d`` reads ``min(floor(d * scale), n - 1)`` with ``scale = float32(n) /
  float32(n_out)`` computed in float32 as torch does; ``mode="nearest-exact"`` reads
  ``min(floor((d + 0.5) * scale), n - 1)`` (``F.interpolate(mode="nearest-exact")``,
  ``PIL``'s and ``cv2.INTER_NEAREST_EXACT``'s rule).
- ``resize_bicubic(x, height, width, align_corners=False)``: ``F.interpolate(mode="bicubic")``:
  Keys' cubic convolution with ``A = -0.75`` at source coordinate ``(d + 0.5) * n / n_out - 0.5``
  (``d * (n - 1) / (n_out - 1)`` with ``align_corners``), the four taps clamped to the image
  (edges replicated). Results are not clamped to the input's range, as in torch. Coordinates and
  weights are computed in float64, then rounded to the array's dtype.
- ``warp_affine(x, matrix, size=None, inverse_map=False)`` and
  ``warp_perspective(x, matrix, size=None, inverse_map=False)``: ``cv2.warpAffine`` /
  ``cv2.warpPerspective`` with bilinear interpolation and a zero border. ``matrix`` (2 x 3 or
  3 x 3) maps **source** coordinates ``(x, y, 1)`` to **destination** coordinates, as in
  OpenCV; the kernel inverts it (in float64; a singular matrix inverts to zeros, OpenCV's rule).
  With ``inverse_map=True`` it maps destination to source (``cv2.WARP_INVERSE_MAP``) and is used
  as given. Each output pixel ``(x, y)`` samples the source at ``M^-1 (x, y, 1)`` (divided by
  its third coordinate for a perspective; where that divisor is 0 the sample is taken at source
  ``(0, 0)``, as OpenCV's ``W ? 1 / W : 0`` gives).
  Bilinear taps outside the image read 0, so the image fades out over its border pixel, like
  ``F.grid_sample(padding_mode="zeros", align_corners=True)``. ``size`` is the output
  ``(height, width)`` (default: the input's). ``matrix`` may be one matrix for every image or
  ``[N, 2, 3]`` / ``[N, 3, 3]`` with ``x`` ``[N, ..., H, W]``. uint8 images round to nearest
  (ties to even).
"""

from __future__ import annotations

import math

import halide as hl
import numpy as np

from ..errors import ParamError, ShapeError
from ..runtime import as_array
from ._consts import lit64
from ._op import Param, op
from .image import _to_bhw
from .quantized import round_half_even

_FLOATS = ["float32", "float64"]
_SIZES = [Param("height", int, low=1, high=1 << 20, doc="output height"),
          Param("width", int, low=1, high=1 << 20, doc="output width")]
f64 = hl.Float(64)


def _resize_derive(dims, params):
    return {"OH": params["height"], "OW": params["width"]}


# -- resize_nearest -----------------------------------------------------------------------------

def _nearest_index_np(n_in: int, n_out: int, exact: bool) -> np.ndarray:
    scale = np.float32(n_in) / np.float32(n_out)
    d = np.arange(n_out, dtype=np.float32)
    if exact:
        d = d + np.float32(0.5)
    return np.minimum(np.floor(d * scale).astype(np.int64), n_in - 1)


def _nearest_ref(x, height, width, mode="nearest"):
    x = np.asarray(x)
    if mode not in ("nearest", "nearest-exact"):
        raise ParamError(f"resize_nearest: parameter 'mode' must be 'nearest' or "
                         f"'nearest-exact', got {mode!r}")
    H, W = x.shape[-2:]
    rows = _nearest_index_np(H, height, mode == "nearest-exact")
    cols = _nearest_index_np(W, width, mode == "nearest-exact")
    return x[..., rows, :][..., cols]


def _nearest_frontend(x, height, width, mode="nearest"):
    """Nearest-neighbour resize of the last two axes to ``height`` x ``width``, choosing the
    pixels ``F.interpolate(size=(height, width), mode=mode)`` chooses (``mode`` "nearest" or
    "nearest-exact"; see the module doc)."""
    x3, lead = _to_bhw(x, "resize_nearest")
    out = resize_nearest.kernel(x3, height=height, width=width, mode=mode)
    return out.reshape(lead + out.shape[1:])


@op(category="image", inputs={"x": "B H W"}, output="B OH OW",
    dtypes=["float32", "float64", "uint8", "int32"],
    params=_SIZES + [Param("mode", str, "nearest", choices=("nearest", "nearest-exact"),
                           doc="torch's 'nearest' (floor) or 'nearest-exact' (pixel centers)")],
    reference=_nearest_ref, frontend=_nearest_frontend, derive=_resize_derive,
    doc=_nearest_frontend.__doc__, example={"B": 2, "H": 40, "W": 50})
def resize_nearest(x, *, height, width, mode, dims):
    """Source indices computed in float32 as torch computes them."""
    ow, oh, b = hl.Var("ow"), hl.Var("oh"), hl.Var("b")
    f32 = hl.Float(32)

    def index(d, n_in, n_out, name):
        scale = hl.cast(f32, n_in) / hl.f32(float(n_out))
        pos = hl.cast(f32, d) + (hl.f32(0.5) if mode == "nearest-exact" else hl.f32(0.0))
        f = hl.Func(name)
        # Strict: the product is rounded to float32 before the floor, as in torch.
        f[d] = hl.min(hl.cast(hl.Int(32), hl.floor(hl.strict_float(pos * scale))), n_in - 1)
        return f

    rows = index(oh, dims.H, height, "rows")
    cols = index(ow, dims.W, width, "cols")
    out = hl.Func("out")
    # (the clamps only tell bounds inference what the index Funcs already guarantee)
    out[ow, oh, b] = x[hl.clamp(cols[ow], 0, dims.W - 1), hl.clamp(rows[oh], 0, dims.H - 1), b]
    return out


# -- resize_bicubic -----------------------------------------------------------------------------

A_CUBIC = -0.75


def _cubic_weights_np(t: np.ndarray) -> np.ndarray:
    """[len(t), 4] weights of taps -1, 0, 1, 2 at fractional offset t (Keys, A = -0.75)."""
    a = A_CUBIC

    def near(s):       # |s| <= 1
        return ((a + 2) * s - (a + 3)) * s * s + 1

    def far(s):        # 1 < |s| < 2
        return ((a * s - 5 * a) * s + 8 * a) * s - 4 * a
    return np.stack([far(t + 1), near(t), near(1 - t), far(2 - t)], axis=-1)


def _bicubic_axis_np(n_in, n_out, align_corners):
    d = np.arange(n_out, dtype=np.float64)
    if align_corners:
        src = d * ((n_in - 1) / (n_out - 1)) if n_out > 1 else np.zeros(n_out)
    else:
        src = (d + 0.5) * (n_in / n_out) - 0.5
    i0 = np.minimum(np.floor(src).astype(np.int64), n_in - 1)
    t = np.clip(src - i0, 0.0, 1.0)
    taps = np.clip(i0[:, None] + np.arange(-1, 3)[None, :], 0, n_in - 1)
    return taps, _cubic_weights_np(t)


def _bicubic_ref(x, height, width, align_corners=False):
    x = np.asarray(x)
    H, W = x.shape[-2:]
    ry, wy = _bicubic_axis_np(H, height, align_corners)
    rx, wx = _bicubic_axis_np(W, width, align_corners)
    xd = x.astype(np.float64)
    # [..., OH, 4, OW, 4] gathered taps, weighted and summed.
    g = xd[..., ry, :][..., rx]
    out = np.einsum("...iajb,ia,jb->...ij", g, wy, wx)
    return out.astype(x.dtype)


def _bicubic_frontend(x, height, width, align_corners=False):
    """Bicubic resize of the last two axes to ``height`` x ``width``, like
    ``F.interpolate(mode="bicubic")`` (A = -0.75, taps clamped to the image, results not
    clamped; see the module doc)."""
    x3, lead = _to_bhw(x, "resize_bicubic")
    out = resize_bicubic.kernel(x3, height=height, width=width, align_corners=align_corners)
    return out.reshape(lead + out.shape[1:])


def _cubic_near(s, a):
    return ((a + 2) * s - (a + 3)) * s * s + 1


def _cubic_far(s, a):
    return ((a * s - 5 * a) * s + 8 * a) * s - 4 * a


@op(category="image", inputs={"x": "B H W"}, output="B OH OW", dtypes=_FLOATS,
    params=_SIZES + [Param("align_corners", bool, False,
                           doc="corner pixels of input and output coincide")],
    reference=_bicubic_ref, frontend=_bicubic_frontend, derive=_resize_derive,
    doc=_bicubic_frontend.__doc__, example={"B": 2, "H": 40, "W": 50})
def resize_bicubic(x, *, height, width, align_corners, dims):
    """Separable: a horizontal pass over every input row, then a vertical pass."""
    ow, oh, h, b = hl.Var("ow"), hl.Var("oh"), hl.Var("h"), hl.Var("b")
    t = x.type()
    a = lit64(A_CUBIC)

    def axis(d, n_in, n_out, name):
        """Funcs of the first tap's index and the four tap weights along one axis."""
        df, nf = hl.cast(f64, d), hl.cast(f64, n_in)
        if align_corners:
            src = df * ((nf - 1) / lit64(n_out - 1)) if n_out > 1 else lit64(0.0)
        else:
            src = (df + 0.5) * (nf / lit64(n_out)) - 0.5
        src = hl.strict_float(src)
        i0 = hl.min(hl.cast(hl.Int(32), hl.floor(src)), n_in - 1)
        lam = hl.clamp(src - hl.cast(f64, i0), lit64(0.0), lit64(1.0))
        first = hl.Func(name + "i")
        first[d] = i0
        k = hl.Var("k")
        wt = hl.Func(name + "w")
        wt[d, k] = hl.cast(t, hl.select(k == 0, _cubic_far(lam + 1, a), k == 1,
                                        _cubic_near(lam, a), k == 2, _cubic_near(1 - lam, a),
                                        _cubic_far(2 - lam, a)))
        return first, wt

    yi, yw = axis(oh, dims.H, height, "y")
    xi, xw = axis(ow, dims.W, width, "x")
    horiz = hl.Func("horiz")
    horiz[ow, h, b] = sum(
        (xw[ow, j] * x[hl.clamp(xi[ow] + (j - 1), 0, dims.W - 1), h, b] for j in range(1, 4)),
        xw[ow, 0] * x[hl.clamp(xi[ow] - 1, 0, dims.W - 1), h, b])
    out = hl.Func("out")
    out[ow, oh, b] = sum(
        (yw[oh, i] * horiz[ow, hl.clamp(yi[oh] + (i - 1), 0, dims.H - 1), b]
         for i in range(1, 4)),
        yw[oh, 0] * horiz[ow, hl.clamp(yi[oh] - 1, 0, dims.H - 1), b])
    return out


# -- warp_affine and warp_perspective -----------------------------------------------------------

def _warp_sizes(name, size, shape):
    if size is None:
        return shape[-2], shape[-1]
    if not isinstance(size, (tuple, list)) or len(size) != 2 or any(
            isinstance(v, bool) or not hasattr(v, "__index__") or int(v) < 1 for v in size):
        raise ParamError(f"{name}: parameter 'size' must be the output (height, width), two "
                         f"ints >= 1, got {size!r}")
    return int(size[0]), int(size[1])


def _invert_np(m: np.ndarray, rows: int) -> np.ndarray:
    """[N, 3, 3] inverses as OpenCV takes them: a singular matrix gives zeros."""
    full = np.zeros(m.shape[:-2] + (3, 3))
    full[..., :rows, :] = m
    if rows == 2:
        full[..., 2, 2] = 1.0
    out = np.zeros_like(full)
    for i in range(full.shape[0]):
        det = np.linalg.det(full[i])
        if det != 0:
            out[i] = np.linalg.inv(full[i])
    return out


def _warp_ref(rows):
    def ref(x, matrix, size=None, inverse_map=False):
        x = np.asarray(x)
        m = np.asarray(matrix, dtype=np.float64)
        per_image = m.ndim == 3
        m = m.reshape(-1, rows, 3)
        oh, ow = _warp_sizes("reference", size, x.shape)
        H, W = x.shape[-2:]
        if per_image:
            x4 = x.reshape(x.shape[0], -1, H, W)
        else:
            x4 = x.reshape(1, -1, H, W)
        if inverse_map:
            inv = np.zeros(m.shape[:-2] + (3, 3))
            inv[..., :rows, :] = m
            if rows == 2:
                inv[..., 2, 2] = 1.0
        else:
            inv = _invert_np(m, rows)
        yy, xx = np.meshgrid(np.arange(oh, dtype=np.float64), np.arange(ow, dtype=np.float64),
                             indexing="ij")
        pts = np.stack([xx, yy, np.ones_like(xx)])                 # [3, OH, OW]
        out = np.zeros(x4.shape[:2] + (oh, ow))
        xd = x4.astype(np.float64)
        for n in range(x4.shape[0]):
            src = np.einsum("ij,jhw->ihw", inv[n], pts)
            if rows == 3:
                with np.errstate(divide="ignore", invalid="ignore"):
                    wz = np.where(src[2] != 0, 1.0 / np.where(src[2] != 0, src[2], 1.0), 0.0)
                sx, sy = src[0] * wz, src[1] * wz
            else:
                sx, sy = src[0], src[1]
            x0, y0 = np.floor(sx), np.floor(sy)
            fx, fy = sx - x0, sy - y0
            for dy, wy in ((0, 1 - fy), (1, fy)):
                for dx, wx in ((0, 1 - fx), (1, fx)):
                    cx, cy = x0 + dx, y0 + dy
                    ok = (cx >= 0) & (cx < W) & (cy >= 0) & (cy < H)
                    ci = np.where(ok, cx, 0).astype(np.int64)
                    ri = np.where(ok, cy, 0).astype(np.int64)
                    out[n] += np.where(ok, wy * wx, 0.0) * xd[n][:, ri, ci]
        if x.dtype == np.uint8:
            out = np.clip(np.round(out), 0, 255)
        lead = x.shape[:-2]
        return out.astype(x.dtype).reshape(lead + (oh, ow))
    return ref


def _warp_frontend(name, rows):
    def fe(x, matrix, size=None, inverse_map=False):
        x = as_array(x, name, "x")
        m = as_array(matrix, name, "matrix")
        if x.ndim < 2:
            raise ShapeError(f"{name}: argument 'x' must have at least 2 dims [..., H, W], got "
                             f"shape {tuple(x.shape)}")
        if m.ndim not in (2, 3) or tuple(m.shape[-2:]) != (rows, 3):
            raise ShapeError(f"{name}: argument 'matrix' must be [{rows}, 3] or [N, {rows}, 3], "
                             f"got shape {tuple(m.shape)}")
        if m.dtype.kind not in "fiu":
            raise ParamError(f"{name}: argument 'matrix' must hold numbers, got dtype {m.dtype}")
        oh, ow = _warp_sizes(name, size, x.shape)
        H, W = x.shape[-2:]
        if m.ndim == 3:
            if x.ndim < 3 or x.shape[0] != m.shape[0]:
                raise ShapeError(f"{name}: {m.shape[0]} matrices need 'x' of shape [N={m.shape[0]},"
                                 f" ..., H, W], got {tuple(x.shape)}")
            x4 = x.reshape(x.shape[0], math.prod(x.shape[1:-2]), H, W)
        else:
            m = m.reshape(1, rows, 3)
            x4 = x.reshape(1, math.prod(x.shape[:-2]), H, W)
        if m.dtype != np.float64:
            m = m.astype(np.float64)
        out = _WARPS[name].kernel(x4, m, height=oh, width=ow, inverse_map=inverse_map)
        return out.reshape(x.shape[:-2] + (oh, ow))
    fe.__name__ = f"_{name}_frontend"
    return fe


def _warp_validate(name, rows):
    def validate(dims, params):
        if dims["R"] != rows or dims["K"] != 3:
            raise ShapeError(f"{name}: argument 'matrix' must be [N, {rows}, 3], got "
                             f"[{dims['N']}, {dims['R']}, {dims['K']}]")
    return validate


def _warp_inputs(rows):
    def make(dims, dtypes, params, rng):
        n, c, h, w = dims["N"], dims["C"], dims["H"], dims["W"]
        if dtypes[0] == "uint8":
            x = rng.integers(0, 256, (n, c, h, w)).astype(np.uint8)
        else:
            x = rng.uniform(-1, 1, (n, c, h, w)).astype(dtypes[0])
        # Near-identity maps with a rotation and a shift, so most samples fall in the image.
        m = np.zeros((n, dims["R"], dims["K"]))
        for i in range(n):
            a = 0.2 + 0.1 * i
            m[i, 0] = [math.cos(a) * 1.1, -math.sin(a), 1.5 + i]
            m[i, 1] = [math.sin(a), math.cos(a) * 0.9, -2.0]
            if rows == 3:
                m[i, 2] = [1e-3, -2e-3, 1.0]
        return [x, m.astype(dtypes[1])]
    return make


def _warp_algorithm(x, matrix, rows, inverse_map, dims):
    ow, oh, c, n = hl.Var("ow"), hl.Var("oh"), hl.Var("c"), hl.Var("n")
    t = x.type()
    i, j = hl.Var("i"), hl.Var("j")

    def m(r, k):
        return hl.cast(f64, matrix[k, r, n])

    # inv[j, i, n]: row i, column j of the matrix that maps destination to source (3 x 3).
    inv = hl.Func("inv")
    if inverse_map:
        if rows == 2:
            inv[j, i, n] = hl.select(i < 2, hl.cast(f64, matrix[j, hl.min(i, 1), n]),
                                     hl.select(j == 2, lit64(1.0), lit64(0.0)))
        else:
            inv[j, i, n] = hl.cast(f64, matrix[j, i, n])
    elif rows == 2:
        a, b_, cc, d, e, f = m(0, 0), m(0, 1), m(0, 2), m(1, 0), m(1, 1), m(1, 2)
        det = a * e - b_ * d
        s = hl.select(det != 0, 1.0 / hl.select(det != 0, det, lit64(1.0)), lit64(0.0))
        i00, i01, i10, i11 = e * s, -b_ * s, -d * s, a * s
        vals = [[i00, i01, -(i00 * cc + i01 * f)], [i10, i11, -(i10 * cc + i11 * f)],
                [lit64(0.0), lit64(0.0), lit64(1.0)]]
        inv[j, i, n] = _pick(i, j, vals)
    else:
        g = [[m(r, k) for k in range(3)] for r in range(3)]
        cof = [[g[(r + 1) % 3][(k + 1) % 3] * g[(r + 2) % 3][(k + 2) % 3]
                - g[(r + 1) % 3][(k + 2) % 3] * g[(r + 2) % 3][(k + 1) % 3] for k in range(3)]
               for r in range(3)]
        det = g[0][0] * cof[0][0] + g[0][1] * cof[0][1] + g[0][2] * cof[0][2]
        s = hl.select(det != 0, 1.0 / hl.select(det != 0, det, lit64(1.0)), lit64(0.0))
        # inverse = adjugate / det; the adjugate is the cofactor matrix transposed.
        inv[j, i, n] = _pick(i, j, [[cof[k][r] * s for k in range(3)] for r in range(3)])
    X, Y = hl.cast(f64, ow), hl.cast(f64, oh)
    sx = inv[0, 0, n] * X + inv[1, 0, n] * Y + inv[2, 0, n]
    sy = inv[0, 1, n] * X + inv[1, 1, n] * Y + inv[2, 1, n]
    if rows == 3:
        wz = inv[0, 2, n] * X + inv[1, 2, n] * Y + inv[2, 2, n]
        rz = hl.select(wz != 0, 1.0 / hl.select(wz != 0, wz, lit64(1.0)), lit64(0.0))
        sx, sy = sx * rz, sy * rz
    # Far-away coordinates are clamped before the integer conversion (they sample nothing).
    # Strict: the tap index and its weight must come from the same rounding of the coordinate.
    big = lit64(float(1 << 30))
    sx = hl.strict_float(hl.clamp(sx, -big, big))
    sy = hl.strict_float(hl.clamp(sy, -big, big))
    fx0, fy0 = hl.floor(sx), hl.floor(sy)
    x0, y0 = hl.cast(hl.Int(32), fx0), hl.cast(hl.Int(32), fy0)
    wt = t if t.is_float() else hl.Float(32)
    fx, fy = hl.cast(wt, sx - fx0), hl.cast(wt, sy - fy0)
    one = hl.cast(wt, 1)
    val = hl.Func("val")
    w_, h_ = hl.Var("w"), hl.Var("h")
    inside = (w_ >= 0) & (w_ < dims.W) & (h_ >= 0) & (h_ < dims.H)
    val[w_, h_, c, n] = hl.select(
        inside, hl.cast(wt, x[hl.clamp(w_, 0, dims.W - 1), hl.clamp(h_, 0, dims.H - 1), c, n]),
        hl.cast(wt, 0))
    top = (one - fx) * val[x0, y0, c, n] + fx * val[x0 + 1, y0, c, n]
    bot = (one - fx) * val[x0, y0 + 1, c, n] + fx * val[x0 + 1, y0 + 1, c, n]
    res = (one - fy) * top + fy * bot
    out = hl.Func("out")
    if t.is_float():
        out[ow, oh, c, n] = res
    else:
        out[ow, oh, c, n] = hl.cast(t, hl.clamp(round_half_even(res), hl.f32(0.0),
                                                hl.f32(255.0)))
    return out


def _pick(i, j, vals):
    """A 3 x 3 table of Exprs as one Expr of (row i, column j)."""
    row = [hl.select(j == 0, r[0], j == 1, r[1], r[2]) for r in vals]
    return hl.select(i == 0, row[0], i == 1, row[1], row[2])


_WARPS: dict = {}
_WARP_DTYPES = [("float32", "float64"), ("float64", "float64"), ("uint8", "float64")]


def _declare_warp(name, rows, doc):
    fe = _warp_frontend(name, rows)
    fe.__doc__ = doc
    ref = _warp_ref(rows)

    def kernel_ref(x, matrix, height, width, inverse_map=False):
        return ref(x, matrix, (height, width), inverse_map)

    def algorithm(x, matrix, *, height, width, inverse_map, dims):
        return _warp_algorithm(x, matrix, rows, inverse_map, dims)
    algorithm.__name__ = name
    algorithm.__doc__ = doc.split("\n")[0]
    the_op = op(name=name, category="image", inputs={"x": "N C H W", "matrix": "N R K"},
                output="N C OH OW", dtypes=_WARP_DTYPES,
                params=_SIZES + [Param("inverse_map", bool, False,
                                       doc="matrix maps destination to source")],
                reference=ref, kernel_reference=kernel_ref, frontend=fe,
                validate=_warp_validate(name, rows), derive=_resize_derive,
                make_inputs=_warp_inputs(rows), doc=doc,
                example={"N": 2, "C": 3, "H": 48, "W": 64, "R": rows, "K": 3})(algorithm)
    _WARPS[name] = the_op
    return the_op


warp_affine = _declare_warp("warp_affine", 2, """Affine warp with bilinear sampling and a zero
border, like ``cv2.warpAffine(x, matrix, (width, height))``.

``matrix`` is [2, 3] (or [N, 2, 3] for ``x`` [N, ..., H, W]) mapping source ``(x, y, 1)`` to
destination; ``inverse_map=True`` takes it as destination -> source. ``size`` is the output
(height, width), default the input's. See the module doc for the conventions.""")

warp_perspective = _declare_warp("warp_perspective", 3, """Perspective warp with bilinear
sampling and a zero border, like ``cv2.warpPerspective(x, matrix, (width, height))``.

``matrix`` is [3, 3] (or [N, 3, 3] for ``x`` [N, ..., H, W]) mapping source ``(x, y, 1)`` to
destination (homogeneous); ``inverse_map=True`` takes it as destination -> source. ``size`` is the
output (height, width), default the input's. See the module doc for the conventions.""")

for _fe in (_nearest_frontend, _bicubic_frontend):
    _fe.shape_only = True
