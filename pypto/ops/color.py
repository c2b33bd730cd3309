"""Colour conversions: rgb_to_gray, rgb_to_hsv, hsv_to_rgb, rgb_to_yuv and yuv_to_rgb.

Colours lie along one axis of size 3, ``axis=-3`` by default (``[..., 3, H, W]`` as in
torchvision and kornia; ``axis=-1`` takes channels-last images ``[..., H, W, 3]``). The kernels
see ``[B, 3, N]`` (B: the axes before the colour axis, N: those after it), so any axis works
without a copy; channels-first arrays give the longest vectors.

Conventions (ITU-R BT.601 luma):
- ``rgb_to_gray``: ``Y = 0.299 R + 0.587 G + 0.114 B``, keeping a colour axis of size 1 (as
  ``torchvision.transforms.functional.rgb_to_grayscale``). uint8 images round to nearest, ties
  up, in exact integer arithmetic: ``(299 R + 587 G + 114 B + 500) // 1000``.
- ``rgb_to_hsv`` / ``hsv_to_rgb``: float RGB in [0, 1]; hue is a fraction of a turn in [0, 1)
  (0 red, 1/3 green, 2/3 blue), saturation ``(max - min) / max`` (0 for grays), value ``max``,
  as ``matplotlib.colors.rgb_to_hsv`` and torchvision's ``adjust_hue`` helpers. ``hsv_to_rgb``
  takes any hue (it wraps) and does not clamp.
- ``rgb_to_yuv`` / ``yuv_to_rgb``: analog BT.601 YUV with ``U = 0.436 (B - Y) / (1 - 0.114)``
  and ``V = 0.615 (R - Y) / (1 - 0.299)`` (so U is in [-0.436, 0.436] and V in
  [-0.615, 0.615] for RGB in [0, 1]); ``yuv_to_rgb`` is its exact inverse.
"""

from __future__ import annotations

import math

import halide as hl
import numpy as np

from ..errors import ParamError, ShapeError
from ..runtime import as_array
from ._consts import lit
from ._op import op

_FLOATS = ["float32", "float64"]
KR, KG, KB = 0.299, 0.587, 0.114
UMAX, VMAX = 0.436, 0.615
_EXAMPLE = {"B": 2, "C": 3, "N": 4096}


def _bcn(x, axis, name: str):
    """``x`` viewed as [B, 3, N] around colour axis ``axis``, and the shape to restore."""
    x = as_array(x, name, "x")
    if isinstance(axis, bool) or not hasattr(axis, "__index__"):
        raise ParamError(f"{name}: parameter 'axis' expects an int, got {axis!r}")
    nd = x.ndim
    if nd == 0 or not -nd <= int(axis) < nd:
        raise ParamError(f"{name}: parameter 'axis'={axis} is out of range for an array of "
                         f"shape {tuple(x.shape)}")
    ax = int(axis) % nd
    if x.shape[ax] != 3:
        raise ShapeError(f"{name}: the colour axis (axis={axis}) of 'x' must have size 3, got "
                         f"shape {tuple(x.shape)}; pass axis= to name the colour axis")
    b = math.prod(x.shape[:ax])
    n = math.prod(x.shape[ax + 1:])
    return x.reshape(b, 3, n), x.shape, ax


def _restore(out, shape, ax, channels=3):
    return out.reshape(shape[:ax] + (channels,) + shape[ax + 1:])


def _three(dims, params, name):
    if dims["C"] != 3:
        raise ShapeError(f"{name}: the colour axis must have size 3, got {dims['C']}")


def _channels(x, n, b, t):
    return tuple(_expr(x[n, i, b]) for i in range(3))


def _expr(v):
    return v if isinstance(v, hl.Expr) else hl.Expr(v)


def _pick3(c, e0, e1, e2):
    return hl.select(c == 0, e0, c == 1, e1, e2)


def _moved(ref):
    """A NumPy reference written for channels-last ``[..., 3]`` as one with ``axis=``."""
    def wrapped(x, axis=-3):
        x = np.asarray(x)
        out = ref(np.moveaxis(x, axis, -1))
        return np.moveaxis(out, -1, axis)
    wrapped.__name__ = ref.__name__
    return wrapped


def _on_kernel(ref):
    """The reference for the kernel's [B, 3, N] form (colour axis 1)."""
    return lambda x: ref(x, axis=1)


# -- rgb_to_gray --------------------------------------------------------------------------------

def _gray_np(x):
    if x.dtype == np.uint8:
        s = x[..., 0].astype(np.int64) * 299 + x[..., 1].astype(np.int64) * 587 + \
            x[..., 2].astype(np.int64) * 114
        return ((s + 500) // 1000).astype(np.uint8)[..., None]
    xd = x.astype(np.float64)
    return (xd @ np.array([KR, KG, KB]))[..., None].astype(x.dtype)


def _gray_frontend(x, axis=-3):
    """BT.601 luma ``0.299 R + 0.587 G + 0.114 B``; the colour axis is kept with size 1.

    uint8 rounds to nearest (ties up) exactly: ``(299 R + 587 G + 114 B + 500) // 1000``.
    """
    x3, shape, ax = _bcn(x, axis, "rgb_to_gray")
    return _restore(rgb_to_gray.kernel(x3), shape, ax, 1)


@op(category="image", inputs={"x": "B C N"}, output="B CO N",
    dtypes=["float32", "float64", "uint8"], reference=_moved(_gray_np),
    kernel_reference=_on_kernel(_moved(_gray_np)),
    frontend=_gray_frontend, doc=_gray_frontend.__doc__,
    derive=lambda dims, params: {"CO": 1},
    validate=lambda dims, params: _three(dims, params, "rgb_to_gray"), example=_EXAMPLE)
def rgb_to_gray(x, *, dims):
    """Weighted sum of the three channels (exact integers for uint8)."""
    n, co, b = hl.Var("n"), hl.Var("co"), hl.Var("b")
    t = x.type()
    r, g, bl = _channels(x, n, b, t)
    out = hl.Func("out")
    if t.is_float():
        out[n, co, b] = lit(t, KR) * r + lit(t, KG) * g + lit(t, KB) * bl
    else:
        i32 = hl.Int(32)
        s = hl.cast(i32, r) * 299 + hl.cast(i32, g) * 587 + hl.cast(i32, bl) * 114 + 500
        out[n, co, b] = hl.cast(t, s / 1000)
    return out


# -- rgb_to_hsv ---------------------------------------------------------------------------------

def _hsv_np(x):
    xd = x.astype(np.float64)
    r, g, b = xd[..., 0], xd[..., 1], xd[..., 2]
    v = np.max(xd, axis=-1)
    delta = v - np.min(xd, axis=-1)
    s = np.zeros_like(v)
    nz = delta > 0
    s[nz] = delta[nz] / v[nz]
    h = np.zeros_like(v)
    safe = np.where(nz, delta, 1.0)
    # Which channel is the maximum decides the sector (red first, then green).
    red = nz & (r == v)
    green = nz & ~red & (g == v)
    blue = nz & ~red & ~green
    h[red] = ((g - b) / safe)[red]
    h[green] = (2.0 + (b - r) / safe)[green]
    h[blue] = (4.0 + (r - g) / safe)[blue]
    h = np.mod(h / 6.0, 1.0)
    h = np.where(h >= 1.0, h - 1.0, h)      # np.mod(-tiny, 1.0) rounds to 1.0
    return np.stack([h, s, v], axis=-1).astype(x.dtype)


def _hsv_frontend(x, axis=-3):
    """RGB (floats in [0, 1]) to HSV: hue in [0, 1) turns, saturation ``(max - min) / max``
    (0 where max == min), value ``max`` (``matplotlib.colors.rgb_to_hsv``'s definition)."""
    x3, shape, ax = _bcn(x, axis, "rgb_to_hsv")
    return _restore(rgb_to_hsv.kernel(x3), shape, ax)


@op(category="image", inputs={"x": "B C N"}, output="B C N", dtypes=_FLOATS,
    reference=_moved(_hsv_np),
    kernel_reference=_on_kernel(_moved(_hsv_np)),
    frontend=_hsv_frontend, doc=_hsv_frontend.__doc__,
    validate=lambda dims, params: _three(dims, params, "rgb_to_hsv"), example=_EXAMPLE)
def rgb_to_hsv(x, *, dims):
    """Hexcone model: the sector of the largest channel and the offset within it."""
    n, c, b = hl.Var("n"), hl.Var("c"), hl.Var("b")
    t = x.type()
    r, g, bl = _channels(x, n, b, t)
    zero, one = lit(t, 0), lit(t, 1)
    v = hl.max(hl.max(r, g), bl)
    delta = v - hl.min(hl.min(r, g), bl)
    gray = delta <= zero
    safe = hl.select(gray, one, delta)
    h = hl.select(r == v, (g - bl) / safe,
                  g == v, lit(t, 2) + (bl - r) / safe,
                  lit(t, 4) + (r - g) / safe) * lit(t, 1.0 / 6.0)
    h = hl.select(gray, zero, hl.select(h < zero, h + one, h))
    h = hl.select(h >= one, h - one, h)     # a tiny negative sector offset rounds up to 1
    s = hl.select(gray, zero, delta / hl.select(gray, one, v))
    out = hl.Func("out")
    out[n, c, b] = _pick3(c, h, s, v)
    return out


# -- hsv_to_rgb ---------------------------------------------------------------------------------

def _rgb_np(x):
    xd = x.astype(np.float64)
    h, s, v = xd[..., 0], xd[..., 1], xd[..., 2]
    h6 = np.mod(h, 1.0) * 6.0
    sector = np.floor(h6)
    f = h6 - sector
    sector = sector.astype(np.int64) % 6
    p = v * (1.0 - s)
    q = v * (1.0 - s * f)
    t = v * (1.0 - s * (1.0 - f))
    table = [(v, t, p), (q, v, p), (p, v, t), (p, q, v), (t, p, v), (v, p, q)]
    out = np.zeros(xd.shape)
    for k, (rr, gg, bb) in enumerate(table):
        m = sector == k
        out[..., 0][m], out[..., 1][m], out[..., 2][m] = rr[m], gg[m], bb[m]
    return out.astype(x.dtype)


def _rgb_frontend(x, axis=-3):
    """HSV (hue in turns, any value: it wraps; saturation and value in [0, 1]) to RGB, the
    inverse of ``rgb_to_hsv`` (``matplotlib.colors.hsv_to_rgb``); results are not clamped."""
    x3, shape, ax = _bcn(x, axis, "hsv_to_rgb")
    return _restore(hsv_to_rgb.kernel(x3), shape, ax)


def _hsv_inputs(dims, dtypes, params, rng):
    shape = (dims["B"], dims["C"], dims["N"])
    return [rng.uniform(0.0, 1.0, size=shape).astype(dtypes[0])]


@op(category="image", inputs={"x": "B C N"}, output="B C N", dtypes=_FLOATS,
    reference=_moved(_rgb_np),
    kernel_reference=_on_kernel(_moved(_rgb_np)),
    frontend=_rgb_frontend, doc=_rgb_frontend.__doc__,
    validate=lambda dims, params: _three(dims, params, "hsv_to_rgb"), make_inputs=_hsv_inputs,
    example=_EXAMPLE)
def hsv_to_rgb(x, *, dims):
    """The hexcone sectors: each channel is v, p, q or t by sector."""
    n, c, b = hl.Var("n"), hl.Var("c"), hl.Var("b")
    t = x.type()
    h, s, v = _channels(x, n, b, t)
    one = lit(t, 1)
    hw = h - hl.floor(h)                      # the hue wrapped into [0, 1)
    h6 = hw * lit(t, 6)
    sec = hl.floor(h6)
    f = h6 - sec
    k = hl.cast(hl.Int(32), sec) % 6
    p = v * (one - s)
    q = v * (one - s * f)
    tt = v * (one - s * (one - f))
    red = hl.select(k == 0, v, k == 1, q, k == 2, p, k == 3, p, k == 4, tt, v)
    green = hl.select(k == 0, tt, k == 1, v, k == 2, v, k == 3, q, k == 4, p, p)
    blue = hl.select(k == 0, p, k == 1, p, k == 2, tt, k == 3, v, k == 4, v, q)
    out = hl.Func("out")
    out[n, c, b] = _pick3(c, red, green, blue)
    return out


# -- rgb_to_yuv and yuv_to_rgb ------------------------------------------------------------------

def _yuv_matrix() -> np.ndarray:
    return np.array([[KR, KG, KB],
                     [-UMAX * KR / (1 - KB), -UMAX * KG / (1 - KB), UMAX],
                     [VMAX, -VMAX * KG / (1 - KR), -VMAX * KB / (1 - KR)]])


def _yuv_np(x):
    return (x.astype(np.float64) @ _yuv_matrix().T).astype(x.dtype)


def _yuv_inv_np(x):
    return (x.astype(np.float64) @ np.linalg.inv(_yuv_matrix()).T).astype(x.dtype)


def _yuv_frontend(x, axis=-3):
    """RGB to analog BT.601 YUV: ``Y = 0.299 R + 0.587 G + 0.114 B``,
    ``U = 0.436 (B - Y) / 0.886``, ``V = 0.615 (R - Y) / 0.701``."""
    x3, shape, ax = _bcn(x, axis, "rgb_to_yuv")
    return _restore(rgb_to_yuv.kernel(x3), shape, ax)


def _yuv_inv_frontend(x, axis=-3):
    """Analog BT.601 YUV to RGB, the exact inverse of ``rgb_to_yuv``:
    ``R = Y + V 0.701 / 0.615``, ``B = Y + U 0.886 / 0.436``,
    ``G = (Y - 0.299 R - 0.114 B) / 0.587``."""
    x3, shape, ax = _bcn(x, axis, "yuv_to_rgb")
    return _restore(yuv_to_rgb.kernel(x3), shape, ax)


@op(category="image", inputs={"x": "B C N"}, output="B C N", dtypes=_FLOATS,
    reference=_moved(_yuv_np),
    kernel_reference=_on_kernel(_moved(_yuv_np)),
    frontend=_yuv_frontend, doc=_yuv_frontend.__doc__,
    validate=lambda dims, params: _three(dims, params, "rgb_to_yuv"), example=_EXAMPLE)
def rgb_to_yuv(x, *, dims):
    """Y as luma, U and V as scaled blue and red differences from it."""
    n, c, b = hl.Var("n"), hl.Var("c"), hl.Var("b")
    t = x.type()
    r, g, bl = _channels(x, n, b, t)
    y = lit(t, KR) * r + lit(t, KG) * g + lit(t, KB) * bl
    u = lit(t, UMAX / (1 - KB)) * (bl - y)
    v = lit(t, VMAX / (1 - KR)) * (r - y)
    out = hl.Func("out")
    out[n, c, b] = _pick3(c, y, u, v)
    return out


@op(category="image", inputs={"x": "B C N"}, output="B C N", dtypes=_FLOATS,
    reference=_moved(_yuv_inv_np),
    kernel_reference=_on_kernel(_moved(_yuv_inv_np)),
    frontend=_yuv_inv_frontend, doc=_yuv_inv_frontend.__doc__,
    validate=lambda dims, params: _three(dims, params, "yuv_to_rgb"), example=_EXAMPLE)
def yuv_to_rgb(x, *, dims):
    """Red and blue from Y plus the scaled differences; green from the luma equation."""
    n, c, b = hl.Var("n"), hl.Var("c"), hl.Var("b")
    t = x.type()
    y, u, v = _channels(x, n, b, t)
    r = y + lit(t, (1 - KR) / VMAX) * v
    bl = y + lit(t, (1 - KB) / UMAX) * u
    g = y - lit(t, KR / KG) * (v * lit(t, (1 - KR) / VMAX)) - lit(t, KB / KG) * (
        u * lit(t, (1 - KB) / UMAX))
    out = hl.Func("out")
    out[n, c, b] = _pick3(c, r, g, bl)
    return out


for _fe in (_gray_frontend, _hsv_frontend, _rgb_frontend, _yuv_frontend, _yuv_inv_frontend):
    _fe.shape_only = True
