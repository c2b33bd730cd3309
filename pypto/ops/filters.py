"""Image filters: median_blur, laplacian, bilateral_filter and integral_image.

Images are ``[..., H, W]`` (leading axes are independent images, collapsed into one batch dim for
the kernels). Window filters replicate the edges (out-of-range pixels read the nearest pixel),
as ``cv2.medianBlur`` does; OpenCV's Laplacian and bilateral filter reflect instead
(BORDER_REFLECT_101), so they differ from these at the outermost pixels only.

- ``median_blur(x, ksize=3)``: the median of each ``ksize`` x ``ksize`` window, ksize 1, 3 or 5
  (``cv2.medianBlur``'s sizes for float images). A window holding a NaN gives NaN.
- ``laplacian(x, ksize=1)``: ``cv2.Laplacian``'s kernels: ``ksize=1`` is
  ``[[0, 1, 0], [1, -4, 1], [0, 1, 0]]``, ``ksize=3`` is ``[[2, 0, 2], [0, -8, 0], [2, 0, 2]]``.
- ``bilateral_filter(x, d, sigma_color, sigma_space)``: ``cv2.bilateralFilter``'s weights over
  the disc of radius ``r = d // 2`` (``round(1.5 * sigma_space)`` when ``d <= 0``): tap
  ``(i, j)`` with ``i**2 + j**2 <= r**2`` weighs
  ``exp(-(i**2 + j**2) / (2 sigma_space**2) - (x_ij - x_c)**2 / (2 sigma_color**2))``; the result
  is the weighted mean. Exponentials are computed exactly (OpenCV interpolates a table).
- ``integral_image(x)``: inclusive 2-D cumulative sums (``x.cumsum(-2).cumsum(-1)``, as
  ``skimage.transform.integral_image``; OpenCV's ``cv2.integral`` adds a leading row and column
  of zeros). Floats sum in float64 and round once; uint8 sums exactly in int32 (images up to
  8,421,504 pixels cannot overflow).
"""

from __future__ import annotations

import math

import halide as hl
import numpy as np

from ..errors import ParamError
from ._consts import lit
from ._op import Param, op
from .elementwise import _exp, _is_nan
from .image import _clamped, _edge_pad, _taps, _to_bhw

_FLOATS = ["float32", "float64"]
_EXAMPLE = {"B": 2, "H": 64, "W": 100}


# -- median_blur --------------------------------------------------------------------------------

def _median_ref(x, ksize=3):
    x = np.asarray(x)
    if ksize not in (1, 3, 5):
        raise ParamError(f"median_blur: parameter 'ksize' must be 1, 3 or 5, got {ksize!r}")
    r = ksize // 2
    H, W = x.shape[-2:]
    p = _edge_pad(x, r)
    stack = np.stack([p[..., i:i + H, j:j + W] for i in range(ksize) for j in range(ksize)])
    out = np.median(stack.astype(np.float64), axis=0)   # NaN in a window gives NaN
    return out.astype(x.dtype)


def _median_frontend(x, ksize=3):
    """The median of each ``ksize`` x ``ksize`` window of the last two axes, edges replicated
    (``cv2.medianBlur``). ``ksize`` is 1, 3 or 5; a window holding a NaN gives NaN."""
    x3, lead = _to_bhw(x, "median_blur")
    return median_blur.kernel(x3, ksize=ksize).reshape(lead + x3.shape[1:])


def _median_validate(dims, params):
    if params["ksize"] not in (1, 3, 5):
        raise ParamError(f"median_blur: parameter 'ksize' must be 1, 3 or 5, got "
                         f"{params['ksize']}")


def _any_nan(vals):
    return _taps([hl.cast(hl.UInt(8), _is_nan(v)) for v in vals]) > 0


@op(category="image", inputs={"x": "B H W"}, output="B H W",
    dtypes=["float32", "float64", "uint8"],
    params=[Param("ksize", int, 3, low=1, high=5, doc="window side: 1, 3 or 5")],
    reference=_median_ref, frontend=_median_frontend, validate=_median_validate,
    doc=_median_frontend.__doc__, example=_EXAMPLE)
def median_blur(x, *, ksize, dims):
    """3x3: columns sorted once per pixel, then the median of the three sorted columns of a window
    is med3(max of the lows, med3 of the middles, min of the highs). 5x5: each tap's rank in its
    window (ties broken by position) is counted and the tap of rank 12 is taken."""
    w, h, b = hl.Var("w"), hl.Var("h"), hl.Var("b")
    t = x.type()
    c = _clamped(x, dims)
    out = hl.Func("out")
    if ksize == 1:
        out[w, h, b] = x[w, h, b]
        return out
    if ksize == 3:
        p, q, s = (hl.Expr(c[w, h + i, b]) for i in (-1, 0, 1))
        lo = hl.Func("col_lo")
        mid = hl.Func("col_mid")
        hi = hl.Func("col_hi")
        lo[w, h, b] = hl.min(hl.min(p, q), s)
        hi[w, h, b] = hl.max(hl.max(p, q), s)
        mid[w, h, b] = hl.max(hl.min(p, q), hl.min(hl.max(p, q), s))

        def med3(a, b_, c_):
            return hl.max(hl.min(a, b_), hl.min(hl.max(a, b_), c_))
        a = hl.max(hl.max(lo[w - 1, h, b], lo[w, h, b]), lo[w + 1, h, b])
        m = med3(mid[w - 1, h, b], mid[w, h, b], mid[w + 1, h, b])
        z = hl.min(hl.min(hi[w - 1, h, b], hi[w, h, b]), hi[w + 1, h, b])
        res = med3(a, m, z)
        vals = [hl.Expr(c[w + j, h + i, b]) for i in (-1, 0, 1) for j in (-1, 0, 1)]
    else:
        vals = [hl.Expr(c[w + j, h + i, b]) for i in range(-2, 3) for j in range(-2, 3)]
        n = len(vals)
        u8 = hl.UInt(8)
        # rank[i] = #{j: v_j < v_i} + #{j < i: v_j == v_i}: every pair is compared once.
        terms = [[] for _ in range(n)]
        for i in range(n):
            for j in range(i + 1, n):
                lt = hl.cast(u8, vals[j] < vals[i])    # j ranks below i
                terms[i].append(lt)
                terms[j].append(hl.cast(u8, 1) - lt)   # else i (earlier, <=) ranks below j
        pairs = []
        for i in range(n):
            pairs += [_taps(terms[i]) == n // 2, vals[i]]
        res = hl.select(*pairs[:-2], vals[-1])
    if t.is_float():
        res = hl.select(_any_nan(vals), lit(t, float("nan")), res)
    out[w, h, b] = res
    return out


# -- laplacian ----------------------------------------------------------------------------------

_LAPLACE = {1: [[0, 1, 0], [1, -4, 1], [0, 1, 0]], 3: [[2, 0, 2], [0, -8, 0], [2, 0, 2]]}


def _laplacian_ref(x, ksize=1):
    x = np.asarray(x)
    if ksize not in _LAPLACE:
        raise ParamError(f"laplacian: parameter 'ksize' must be 1 or 3, got {ksize!r}")
    k = np.array(_LAPLACE[ksize], np.float64)
    H, W = x.shape[-2:]
    p = _edge_pad(x, 1).astype(np.float64)
    out = np.zeros(x.shape, np.float64)
    for i in range(3):
        for j in range(3):
            if k[i, j]:
                out += k[i, j] * p[..., i:i + H, j:j + W]
    return out.astype(x.dtype)


def _laplacian_frontend(x, ksize=1):
    """The Laplacian of the last two axes with ``cv2.Laplacian``'s kernels, edges replicated:
    ``ksize=1`` is ``[[0, 1, 0], [1, -4, 1], [0, 1, 0]]``, ``ksize=3`` is
    ``[[2, 0, 2], [0, -8, 0], [2, 0, 2]]``. Taps of weight 0 are not read."""
    x3, lead = _to_bhw(x, "laplacian")
    return laplacian.kernel(x3, ksize=ksize).reshape(lead + x3.shape[1:])


def _laplacian_validate(dims, params):
    if params["ksize"] not in _LAPLACE:
        raise ParamError(f"laplacian: parameter 'ksize' must be 1 or 3, got {params['ksize']}")


@op(category="image", inputs={"x": "B H W"}, output="B H W", dtypes=_FLOATS,
    params=[Param("ksize", int, 1, low=1, high=3, doc="1 (4-neighbour) or 3 (diagonal, x2)")],
    reference=_laplacian_ref, frontend=_laplacian_frontend, validate=_laplacian_validate,
    doc=_laplacian_frontend.__doc__, example=_EXAMPLE)
def laplacian(x, *, ksize, dims):
    """Sum of the neighbours minus 4 (or 8) times the center, per cv2.Laplacian's kernels."""
    w, h, b = hl.Var("w"), hl.Var("h"), hl.Var("b")
    c = _clamped(x, dims)
    t = x.type()
    if ksize == 1:
        ring = (c[w - 1, h, b] + c[w + 1, h, b]) + (c[w, h - 1, b] + c[w, h + 1, b])
        res = ring - hl.cast(t, 4) * c[w, h, b]
    else:
        ring = (c[w - 1, h - 1, b] + c[w + 1, h - 1, b]) + (c[w - 1, h + 1, b] + c[w + 1, h + 1, b])
        res = hl.cast(t, 2) * ring - hl.cast(t, 8) * c[w, h, b]
    out = hl.Func("out")
    out[w, h, b] = res
    return out


# -- bilateral_filter ---------------------------------------------------------------------------

MAX_BILATERAL_RADIUS = 15


def _positive(name, arg, v):
    if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)) or \
            not (math.isfinite(v) and v > 0):
        raise ParamError(f"{name}: parameter '{arg}' must be a finite number > 0, got {v!r}")
    return float(v)


def _bilateral_radius(d, sigma_space, name="bilateral_filter"):
    if isinstance(d, bool) or not hasattr(d, "__index__"):
        raise ParamError(f"{name}: parameter 'd' expects an int (the window diameter), got {d!r}")
    d = int(d)
    r = d // 2 if d > 0 else int(round(1.5 * sigma_space))
    if r > MAX_BILATERAL_RADIUS:
        raise ParamError(f"{name}: the window radius would be {r} (from d={d}, sigma_space="
                         f"{sigma_space}); at most {MAX_BILATERAL_RADIUS} is supported: give a "
                         f"smaller d")
    return r


def _disc(r):
    return [(i, j) for i in range(-r, r + 1) for j in range(-r, r + 1) if i * i + j * j <= r * r]


def _bilateral_ref(x, d, sigma_color, sigma_space):
    x = np.asarray(x)
    sc = _positive("bilateral_filter", "sigma_color", sigma_color)
    ss = _positive("bilateral_filter", "sigma_space", sigma_space)
    r = _bilateral_radius(d, ss)
    H, W = x.shape[-2:]
    xd = x.astype(np.float64)
    p = _edge_pad(xd, r)
    num = np.zeros(x.shape)
    den = np.zeros(x.shape)
    for i, j in _disc(r):
        v = p[..., r + i:r + i + H, r + j:r + j + W]
        wt = np.exp(-(i * i + j * j) / (2 * ss * ss) - (v - xd) ** 2 / (2 * sc * sc))
        num += wt * v
        den += wt
    return (num / den).astype(x.dtype)


def _bilateral_frontend(x, d, sigma_color, sigma_space):
    """Edge-preserving smoothing with ``cv2.bilateralFilter``'s weights (see the module doc):
    a disc of radius ``d // 2`` (``round(1.5 * sigma_space)`` for ``d <= 0``, at most 15),
    Gaussian in distance (``sigma_space``) times Gaussian in value difference
    (``sigma_color``), edges replicated. A NaN in a window makes its result NaN."""
    name = "bilateral_filter"
    x3, lead = _to_bhw(x, name)
    sc = _positive(name, "sigma_color", sigma_color)
    ss = _positive(name, "sigma_space", sigma_space)
    r = _bilateral_radius(d, ss)
    out = bilateral_filter.kernel(x3, radius=r, sigma_color=sc, sigma_space=ss)
    return out.reshape(lead + x3.shape[1:])


def _bilateral_kernel_ref(x, radius, sigma_color, sigma_space):
    return _bilateral_ref(x, 2 * radius + 1, sigma_color, sigma_space)


def _bilateral_validate(dims, params):
    _positive("bilateral_filter", "sigma_color", params["sigma_color"])
    _positive("bilateral_filter", "sigma_space", params["sigma_space"])


@op(category="image", inputs={"x": "B H W"}, output="B H W", dtypes=_FLOATS,
    params=[Param("radius", int, 2, low=0, high=MAX_BILATERAL_RADIUS, doc="disc radius"),
            Param("sigma_color", float, 0.1, doc="Gaussian width in value (> 0)"),
            Param("sigma_space", float, 1.0, doc="Gaussian width in pixels (> 0)")],
    reference=_bilateral_ref, kernel_reference=_bilateral_kernel_ref,
    frontend=_bilateral_frontend, validate=_bilateral_validate,
    doc=_bilateral_frontend.__doc__, example=_EXAMPLE)
def bilateral_filter(x, *, radius, sigma_color, sigma_space, dims):
    """Weighted mean over a disc; each weight is one exponential of the summed exponents."""
    w, h, b = hl.Var("w"), hl.Var("h"), hl.Var("b")
    t = x.type()
    c = _clamped(x, dims)
    center = hl.Expr(c[w, h, b])
    kc = lit(t, -0.5 / (sigma_color * sigma_color))
    num, den = [], []
    for i, j in _disc(radius):
        v = hl.Expr(c[w + j, h + i, b])
        diff = v - center
        e = lit(t, -(i * i + j * j) / (2.0 * sigma_space * sigma_space)) + kc * diff * diff
        wt = _exp(e)
        num.append(wt * v)
        den.append(wt)
    out = hl.Func("out")
    out[w, h, b] = _taps(num) / _taps(den)
    return out


# -- integral_image -----------------------------------------------------------------------------

def _integral_ref(x):
    x = np.asarray(x)
    acc = np.int64 if x.dtype.kind in "iu" else np.float64
    out = np.cumsum(np.cumsum(x.astype(acc), axis=-2), axis=-1)
    return out.astype(np.int32 if x.dtype.kind in "iu" else x.dtype)


def _integral_frontend(x):
    """Inclusive 2-D cumulative sums of the last two axes: ``out[..., i, j] = x[..., :i+1,
    :j+1].sum()`` (``skimage.transform.integral_image``). Floats sum in float64 and round once;
    uint8 gives exact int32 sums."""
    x3, lead = _to_bhw(x, "integral_image")
    return integral_image.kernel(x3).reshape(lead + x3.shape[1:])


@op(category="image", inputs={"x": "B H W"}, output="B H W",
    dtypes=["float32", "float64", "uint8"], reference=_integral_ref,
    frontend=_integral_frontend, doc=_integral_frontend.__doc__,
    out_dtype=lambda dtypes, params: "int32" if dtypes[0] == "uint8" else dtypes[0],
    example=_EXAMPLE)
def integral_image(x, *, dims):
    """A running sum down each column (vectorized along W), then along each row."""
    w, h, b = hl.Var("w"), hl.Var("h"), hl.Var("b")
    t = x.type()
    acc_t = hl.Int(32) if not t.is_float() else hl.Float(64)
    cols = hl.Func("cols")
    cols[w, h, b] = hl.cast(acc_t, x[w, h, b])
    ry = hl.RDom([hl.Range(1, dims.H - 1)], "ry")
    cols[w, ry.x, b] += cols[w, ry.x - 1, b]
    rows = hl.Func("rows")
    rows[w, h, b] = cols[w, h, b]
    rx = hl.RDom([hl.Range(1, dims.W - 1)], "rx")
    rows[rx.x, h, b] += rows[rx.x - 1, h, b]
    out = hl.Func("out")
    out[w, h, b] = hl.cast(acc_t if not t.is_float() else t, rows[w, h, b])
    return out


for _fe in (_median_frontend, _laplacian_frontend, _bilateral_frontend, _integral_frontend):
    _fe.shape_only = True
