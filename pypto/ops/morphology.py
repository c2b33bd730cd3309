"""Grey-level morphology: dilate, erode, morph_open and morph_close.

The structuring element (``kernel``) is an int ``k`` (a k x k square), a pair ``(kh, kw)`` (a
rectangle) or a 2-D array of 0/1 (or bool) values: any shape up to 63 x 63. As in OpenCV its
anchor is its center ``(kh // 2, kw // 2)`` and it is not reflected:
``dilate(x)[i, j] = max x[i + a - kh // 2, j + b - kw // 2]`` over the set taps ``(a, b)``, and
``erode`` takes the minimum. Taps outside the image are ignored (OpenCV's default border for
morphology); a window with no tap inside the image gives the lowest (dilate) or highest (erode)
value of the dtype (-inf/+inf for floats). A NaN in a window makes its result NaN.

The element is a compile-time parameter of the kernel (``footprint``: rows of '0'/'1' joined by
'/', e.g. ``"010/111/010"``); a full rectangle runs as two separable passes (rows, then columns).
``morph_open`` is an erosion followed by a dilation with the same element, ``morph_close`` the
reverse, each computed in one fused kernel. Images are ``[..., H, W]``; leading axes are
independent images.
"""

from __future__ import annotations

import halide as hl
import numpy as np

from ..errors import ParamError
from ._consts import lit
from ._op import Param, op
from .elementwise import _is_nan
from .image import _to_bhw

_DTYPES = ["float32", "float64", "uint8"]
#: Largest structuring element along each axis.
MAX_SE = 63
#: Most set taps of a non-rectangular element (each is one unrolled read per pixel).
MAX_TAPS = 256


# -- the structuring element --------------------------------------------------------------------

def footprint_of(kernel, name: str) -> str:
    """``kernel`` (int, pair or 2-D 0/1 array) as the canonical footprint string."""
    if isinstance(kernel, bool):
        raise ParamError(f"{name}: argument 'kernel' must be an int, a pair (kh, kw) or a 2-D "
                         f"array of 0/1, got {kernel!r}")
    if hasattr(kernel, "__index__") and np.ndim(kernel) == 0:
        kh = kw = int(kernel)
        mask = None
    elif isinstance(kernel, (tuple, list)) and len(kernel) == 2 and all(
            hasattr(v, "__index__") and not isinstance(v, bool) for v in kernel):
        kh, kw = (int(v) for v in kernel)
        mask = None
    else:
        try:
            mask = np.asarray(kernel)
        except Exception:
            mask = None
        if mask is None or mask.ndim != 2 or mask.dtype.kind not in "biuf":
            raise ParamError(f"{name}: argument 'kernel' must be an int, a pair (kh, kw) or a "
                             f"2-D array of 0/1, got {kernel!r}")
        if not np.isin(mask, (0, 1)).all():
            raise ParamError(f"{name}: argument 'kernel' must hold only 0 and 1 (or bool), got "
                             f"values {np.unique(mask)[:6].tolist()}")
        kh, kw = mask.shape
    for arg, n in (("kh", kh), ("kw", kw)):
        if not 1 <= n <= MAX_SE:
            raise ParamError(f"{name}: the structuring element's size {arg}={n} must be in "
                             f"[1, {MAX_SE}]")
    if mask is None:
        return "/".join(["1" * kw] * kh)
    rows = ["".join("1" if v else "0" for v in row) for row in mask.astype(bool)]
    return "/".join(rows)


def parse_footprint(text: str, name: str) -> np.ndarray:
    """The footprint string as a bool array; ParamError naming the problem."""
    rows = text.split("/")
    if not rows or any(not r or set(r) - {"0", "1"} for r in rows) or len(
            {len(r) for r in rows}) != 1:
        raise ParamError(f"{name}: parameter 'footprint' must be rows of '0'/'1' of equal length "
                         f"joined by '/', e.g. '010/111/010', got {text!r}")
    mask = np.array([[c == "1" for c in r] for r in rows], dtype=bool)
    if mask.shape[0] > MAX_SE or mask.shape[1] > MAX_SE:
        raise ParamError(f"{name}: the structuring element is {mask.shape[0]} x {mask.shape[1]}; "
                         f"at most {MAX_SE} x {MAX_SE} is supported")
    if not mask.any():
        raise ParamError(f"{name}: the structuring element has no set tap; give at least one 1")
    if not mask.all() and mask.sum() > MAX_TAPS:
        raise ParamError(f"{name}: a non-rectangular structuring element may have at most "
                         f"{MAX_TAPS} set taps, got {int(mask.sum())}")
    return mask


# -- NumPy references ---------------------------------------------------------------------------

def _identity(dtype, kind: str):
    dt = np.dtype(dtype)
    if dt.kind == "f":
        return -np.inf if kind == "max" else np.inf
    info = np.iinfo(dt)
    return info.min if kind == "max" else info.max


def _morph_np(x: np.ndarray, mask: np.ndarray, kind: str) -> np.ndarray:
    """One dilation (kind 'max') or erosion ('min') of the last two axes by ``mask``."""
    kh, kw = mask.shape
    ay, ax = kh // 2, kw // 2
    H, W = x.shape[-2:]
    pad = [(0, 0)] * (x.ndim - 2) + [(ay, kh - 1 - ay), (ax, kw - 1 - ax)]
    xp = np.pad(x, pad, constant_values=_identity(x.dtype, kind))
    fn = np.maximum if kind == "max" else np.minimum   # both propagate NaN
    out = None
    for a, b in zip(*np.nonzero(mask)):
        v = xp[..., a:a + H, b:b + W]
        out = v.copy() if out is None else fn(out, v)
    return out


def _ref(kind_seq):
    def ref(x, kernel=3, iterations=1):
        x = np.asarray(x)
        mask = parse_footprint(footprint_of(kernel, "reference"), "reference")
        for kind in kind_seq:
            for _ in range(iterations):
                x = _morph_np(x, mask, kind)
        return x
    return ref


def _kernel_ref(kind_seq):
    def ref(x, footprint):
        return _ref(kind_seq)(x, parse_footprint(footprint, "reference").astype(np.uint8))
    return ref


# -- the algorithm ------------------------------------------------------------------------------

def _extreme(t: hl.Type, kind: str):
    if t.is_float():
        return lit(t, float("-inf") if kind == "max" else float("inf"))
    return t.min() if kind == "max" else t.max()


def _expr(v):
    return hl.Expr(v) if isinstance(v, hl.FuncRef) else v


def _pick(kind: str, is_float: bool):
    """max or min of two values; for floats a NaN in either wins."""
    if not is_float:
        return hl.max if kind == "max" else hl.min

    def nan_max(a, b):
        a, b = _expr(a), _expr(b)
        better = (a > b) if kind == "max" else (a < b)
        # NaN tested on the bits (hl.is_nan here broke the vectorizer in fused programs).
        return hl.select(better | _is_nan(a), a, b)
    return nan_max


def _tree(terms, fn):
    terms = list(terms)
    while len(terms) > 1:
        nxt = [fn(terms[i], terms[i + 1]) for i in range(0, len(terms) - 1, 2)]
        if len(terms) % 2:
            nxt.append(terms[-1])
        terms = nxt
    return terms[0]


def _morph_stage(src, H, W, mask: np.ndarray, kind: str, t: hl.Type, tag: str):
    """The Funcs of one dilation/erosion of ``src`` (B H W, valid on [0, W) x [0, H)).

    Returns the result Func; a rectangular element adds a row pass named ``rows<tag>``.
    """
    w, h, b = hl.Var("w"), hl.Var("h"), hl.Var("b")
    fill = _extreme(t, kind)
    ext = hl.Func("ext" + tag)
    inside = (w >= 0) & (w < W) & (h >= 0) & (h < H)
    ext[w, h, b] = hl.select(inside, src[hl.clamp(w, 0, W - 1), hl.clamp(h, 0, H - 1), b], fill)
    pick = _pick(kind, t.is_float())
    kh, kw = mask.shape
    ay, ax = kh // 2, kw // 2
    res = hl.Func("stage" + tag)
    if mask.all():
        rows = hl.Func("rows" + tag)
        rows[w, h, b] = _tree([ext[w + j - ax, h, b] for j in range(kw)], pick)
        res[w, h, b] = _tree([rows[w, h + i - ay, b] for i in range(kh)], pick)
    else:
        taps = [ext[w + j - ax, h + i - ay, b] for i, j in zip(*np.nonzero(mask))]
        res[w, h, b] = _tree(taps, pick)
    return res


def _morph_algorithm(x, footprint: str, kinds, dims, name: str):
    mask = parse_footprint(footprint, name)
    t = x.type()
    src = x
    for i, kind in enumerate(kinds):
        src = _morph_stage(src, dims.H, dims.W, mask, kind, t, str(i))
    w, h, b = hl.Var("w"), hl.Var("h"), hl.Var("b")
    out = hl.Func("out")
    out[w, h, b] = src[w, h, b]
    return out


# -- frontends and ops --------------------------------------------------------------------------

def _run(name: str, x, kernel, iterations):
    x3, lead = _to_bhw(x, name)
    fp = footprint_of(kernel, name)
    if isinstance(iterations, bool) or not hasattr(iterations, "__index__") or \
            not 1 <= int(iterations) <= 1000:
        raise ParamError(f"{name}: parameter 'iterations' must be an int in [1, 1000], "
                         f"got {iterations!r}")
    for _ in range(int(iterations)):
        x3 = _OPS[name].kernel(x3, footprint=fp)
    return x3.reshape(lead + x3.shape[1:])


def _frontend(name: str, with_iterations: bool):
    if with_iterations:
        def fe(x, kernel=3, iterations=1):
            return _run(name, x, kernel, iterations)
    else:
        def fe(x, kernel=3):
            return _run(name, x, kernel, 1)
    return fe


def _validate(name):
    def validate(dims, params):
        parse_footprint(params["footprint"], name)
    return validate


_FOOTPRINT = Param("footprint", str, "111/111/111",
                   doc="structuring element: rows of 0/1 joined by '/' (anchor at the center)")
_OPS: dict = {}


def _declare(name: str, kinds: tuple, doc: str, with_iterations: bool):
    fe = _frontend(name, with_iterations)
    base = _ref(kinds)
    if with_iterations:
        ref = base
    else:
        def ref(x, kernel=3):
            return base(x, kernel)
    fe.__doc__ = doc
    # Not marked shape_only: a 0/1 array given as ``kernel`` is read by value.

    def algorithm(x, *, footprint, dims):
        return _morph_algorithm(x, footprint, kinds, dims, name)
    algorithm.__name__ = name
    algorithm.__doc__ = doc.split("\n")[0]
    the_op = op(name=name, category="image", inputs={"x": "B H W"}, output="B H W",
                dtypes=_DTYPES, params=[_FOOTPRINT], reference=ref,
                kernel_reference=_kernel_ref(kinds), frontend=fe, validate=_validate(name),
                doc=doc, example={"B": 2, "H": 64, "W": 100})(algorithm)
    _OPS[name] = the_op
    return the_op


dilate = _declare("dilate", ("max",), """Grey dilation: the maximum over the structuring element.

``dilate(x, kernel=3, iterations=1)`` like ``cv2.dilate``: ``kernel`` is an int (square), a pair
``(kh, kw)`` or a 2-D 0/1 array, anchored at its center; taps outside the image are ignored; a
NaN in a window gives NaN. ``iterations`` applies it repeatedly.""", True)

erode = _declare("erode", ("min",), """Grey erosion: the minimum over the structuring element.

``erode(x, kernel=3, iterations=1)`` like ``cv2.erode``: ``kernel`` is an int (square), a pair
``(kh, kw)`` or a 2-D 0/1 array, anchored at its center; taps outside the image are ignored; a
NaN in a window gives NaN. ``iterations`` applies it repeatedly.""", True)

morph_open = _declare("morph_open", ("min", "max"), """Opening: erosion, then dilation.

``morph_open(x, kernel=3)`` like ``cv2.morphologyEx(x, cv2.MORPH_OPEN, kernel)``: both passes
use the same element and ignore taps outside the image; computed in one fused kernel.""", False)

morph_close = _declare("morph_close", ("max", "min"), """Closing: dilation, then erosion.

``morph_close(x, kernel=3)`` like ``cv2.morphologyEx(x, cv2.MORPH_CLOSE, kernel)``: both passes
use the same element and ignore taps outside the image; computed in one fused kernel.""", False)
