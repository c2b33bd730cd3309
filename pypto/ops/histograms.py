"""Histograms: histogram (fixed bins over a range) and equalize_hist (uint8 images).

- ``histogram(x, bins=10, range=None)`` is ``np.histogram`` with equal bins: it returns
  ``(counts, bin_edges)``, counts int64. The edges are NumPy's: ``np.linspace(lo, hi, bins + 1)``
  (``lo + k (hi - lo) / bins``, the last exactly ``hi``) in float64, and for float32 data in
  float32 as ``np.histogram`` makes them (the float64 edges rounded to float32 when ``range`` is
  given; computed in float32 from ``x.min()`` and ``x.max()`` when it is not). Bin ``k`` holds
  ``edge[k] <= v < edge[k + 1]``, the last bin also ``v == edge[bins]``; values outside
  ``[edge[0], edge[bins]]`` and NaN are not counted. So the counts and edges equal
  ``np.histogram(x, bins, range)``: a float32 0.7 lies in bin 7 of ``range=(0, 1)``, where
  ``np.histogram(x.astype(np.float64))`` puts it in bin 6. ``range=None`` takes ``(x.min(),
  x.max())`` (which needs the values: with a traced Tensor, give ``range``); ``lo == hi`` widens
  it to ``(lo - 0.5, hi + 0.5)``, as NumPy does.
- ``equalize_hist(x)`` is ``cv2.equalizeHist`` on each ``[H, W]`` uint8 image of ``[..., H, W]``:
  with ``cdf`` the cumulative histogram and ``m`` its value at the first occupied level, level
  ``v`` maps to ``round((cdf[v] - m) * (255 / (H W - m)))`` computed in float32 (the quotient
  first, then the product), rounded half to even and saturated; an image of a single level is
  left unchanged.
"""

from __future__ import annotations

import math

import halide as hl
import numpy as np

from ..errors import DtypeError, ParamError, ShapeError
from ..runtime import as_array
from ._consts import lit64
from ._args import int_arg
from ._op import Param, op
from .image import _to_bhw
from .quantized import round_half_even

_HIST_DTYPES = ["float32", "float64", "uint8", "int8", "int16", "uint16", "int32", "uint32", "int64"]
MAX_BINS = 1 << 20


# -- histogram ----------------------------------------------------------------------------------

#: How the kernel makes the edges: float64 ``np.linspace``; that rounded to float32 (float32
#: data with a given range); ``np.linspace`` computed in float32 (float32 data, range=None).
_EDGES = ("float64", "float32", "float32-arith")


def _bins_and_range(x, bins, range_, name="histogram"):
    """(bins, lo, hi, edges, mode) checked, with NumPy's edges for ``x``'s dtype and the
    kernel's way of making them (one of ``_EDGES``); ``range_`` None reads the values of ``x``
    (an array)."""
    if isinstance(bins, (np.ndarray, list, tuple)) and np.ndim(bins) > 0:
        raise ParamError(f"{name}: parameter 'bins' must be an int (equal-width bins; arrays of "
                         f"edges are not supported), got {bins!r}")
    bins = int_arg(name, "bins", bins)
    if not 1 <= bins <= MAX_BINS:
        raise ParamError(f"{name}: parameter 'bins' must be in [1, {MAX_BINS}], got {bins}")
    if range_ is None:
        if not isinstance(x, np.ndarray):
            raise ParamError(f"{name}: give range=(lo, hi) for a traced Tensor (range=None "
                             f"reads the values to find their minimum and maximum)")
        if x.size == 0:
            lo, hi = 0.0, 1.0
        else:
            lo, hi = x.min(), x.max()       # NumPy scalars of x's dtype, as np.histogram's
        if not (math.isfinite(lo) and math.isfinite(hi)):
            raise ParamError(f"{name}: the data's range [{lo}, {hi}] is not finite (NaN or inf "
                             f"in 'x'); give range=(lo, hi)")
    else:
        try:
            lo, hi = (float(v) for v in range_)
        except (TypeError, ValueError):
            raise ParamError(f"{name}: parameter 'range' must be a pair (lo, hi) of numbers, got "
                             f"{range_!r}") from None
        if not (math.isfinite(lo) and math.isfinite(hi)):
            raise ParamError(f"{name}: parameter 'range' must be finite, got {range_!r}")
        if lo > hi:
            raise ParamError(f"{name}: parameter 'range' must have lo <= hi, got {range_!r}")
    single = getattr(x, "dtype", None) == np.float32
    from_data = range_ is None and x.size > 0
    if not (single and from_data):
        lo, hi = float(lo), float(hi)
    if lo == hi:
        lo, hi = lo - 0.5, hi + 0.5    # in float32 for float32 minimum and maximum, as NumPy
    with np.errstate(all="ignore"):            # a range too wide for float32 is refused below
        if single:
            edges = np.linspace(lo, hi, bins + 1, dtype=np.float32)
            mode = "float32-arith" if from_data else "float32"
        else:
            edges, mode = np.linspace(lo, hi, bins + 1), "float64"
    if not np.all(edges[:-1] < edges[1:]):     # NaN too: a float32 range whose width overflows
        raise ParamError(f"{name}: {bins} bins over [{lo}, {hi}] are too narrow to be told apart "
                         f"(or too wide) in {edges.dtype}; use fewer bins or another range")
    return bins, float(lo), float(hi), edges, mode


def _histogram_ref(x, bins=10, range=None):
    x = np.asarray(x)
    bins, lo, hi, edges, _ = _bins_and_range(x, bins, range)
    return _count(x, edges), edges


def _count(x, edges):
    """Counts of ``x`` in the bins between ``edges``, compared in float64."""
    v = x.astype(np.float64).ravel()
    e = edges.astype(np.float64)
    v = v[(v >= e[0]) & (v <= e[-1])]
    k = np.searchsorted(e, v, side="right") - 1          # edge[k] <= v < edge[k + 1]
    k = np.minimum(k, len(e) - 2)                         # v == the last edge joins the last bin
    return np.bincount(k, minlength=len(e) - 1).astype(np.int64)


def _kernel_edges(bins, lo, hi, edges="float64"):
    """The edges the kernel makes from its parameters (see ``_EDGES``)."""
    if edges == "float32-arith":
        return np.linspace(np.float32(lo), np.float32(hi), bins + 1, dtype=np.float32)
    e = np.linspace(lo, hi, bins + 1)
    return e.astype(np.float32) if edges == "float32" else e


def _histogram_kernel_ref(x, bins, lo, hi, edges="float64"):
    return _count(np.asarray(x), _kernel_edges(bins, lo, hi, edges))


def _histogram_frontend(x, bins=10, range=None):
    """Counts of ``x`` (any shape, flattened) in ``bins`` equal bins over ``range``, as
    ``np.histogram``: returns ``(counts, bin_edges)`` with int64 counts and float64 edges.
    Values outside the range and NaN are not counted; the last bin includes its right edge."""
    name = "histogram"
    x = as_array(x, name, "x")
    if x.dtype.name not in _HIST_DTYPES:    # (before the range is read: min() of strings raised)
        raise DtypeError(f"{name}: argument 'x' has dtype {x.dtype.name}; expected "
                         f"{' or '.join(sorted(_HIST_DTYPES))}")
    bins, lo, hi, edges, mode = _bins_and_range(x, bins, range)
    counts = histogram.kernel(x.reshape(-1), bins=bins, lo=lo, hi=hi, edges=mode)
    return counts, edges


def _histogram_validate(dims, params):
    lo, hi = params["lo"], params["hi"]
    if not lo < hi:
        raise ParamError(f"histogram: parameter 'lo' ({lo}) must be below 'hi' ({hi})")


@op(category="image", inputs={"x": "N"}, output="K", dtypes=_HIST_DTYPES,
    params=[Param("bins", int, 10, low=1, high=MAX_BINS, doc="number of equal bins"),
            Param("lo", float, 0.0, doc="left edge of the first bin"),
            Param("hi", float, 1.0, doc="right edge of the last bin (included)"),
            Param("edges", str, "float64", choices=_EDGES,
                  doc="np.linspace in float64, that rounded to float32, or computed in float32")],
    reference=_histogram_ref, kernel_reference=_histogram_kernel_ref,
    frontend=_histogram_frontend, validate=_histogram_validate,
    derive=lambda dims, params: {"K": params["bins"]},
    out_dtype=lambda dtypes, params: "int64", doc=_histogram_frontend.__doc__,
    example={"N": 100000})
def histogram(x, *, bins, lo, hi, edges, dims):
    """Each value's bin from one float64 multiply, corrected by comparing with the two edges
    around it (so bins are exactly [edge[k], edge[k + 1])); counts accumulate by scatter."""
    k = hl.Var("k")
    f = hl.Float(64)
    f32 = hl.Float(32)
    step = (hi - lo) / bins

    def edge(i):
        # np.linspace's edges: i * step + lo, and exactly hi at the end.
        # Strict: two roundings, as NumPy computes them (no fused multiply-add).
        if edges == "float32-arith":          # every step in float32
            s32 = float(np.float32(np.float32(hi) - np.float32(lo)) / np.float32(bins))
            e = hl.cast(f, hl.strict_float(hl.cast(f32, i) * hl.f32(s32) + hl.f32(lo)))
        else:
            e = hl.strict_float(hl.cast(f, i) * lit64(step) + lit64(lo))
            if edges == "float32":
                e = hl.cast(f, hl.cast(f32, e))
        last = lit64(float(np.float32(hi))) if edges != "float64" else lit64(hi)
        return hl.select(i >= bins, last, e)

    n = hl.Var("n")
    byte = x.type() == hl.UInt(8)
    if byte:
        # Every uint8 value's slot once, in a 256-entry table; the values then look it up.
        lvl = hl.Var("lvl")
        v = hl.cast(f, lvl)
    else:
        v = hl.cast(f, x[n])
    # Strict: Halide's simplifier otherwise treats float arithmetic as real arithmetic and may
    # evaluate the estimate differently where it is used (then an edge test sees another bin).
    est = hl.cast(hl.Int(32), hl.strict_float(hl.clamp(
        (v - lit64(lo)) * lit64(bins / (hi - lo)), lit64(0.0), lit64(float(bins - 1)))))
    idx = est - hl.select(v < edge(est), 1, 0)
    idx = hl.clamp(idx + hl.select((v >= edge(idx + 1)) & (idx < bins - 1), 1, 0), 0, bins - 1)
    # (Halide compiles float comparisons as if no operand were NaN: the test is on the bits.)
    u64 = hl.UInt(64)
    finite = (hl.reinterpret(u64, v) & hl.u64(0x7FFFFFFFFFFFFFFF)) < hl.u64(0x7FF0000000000000)
    counted = (v >= edge(hl.i32(0))) & (v <= edge(hl.i32(bins))) & finite
    # Each value's bin; values not counted go to an extra slot past the last bin.
    slot = hl.Func("slot")
    if byte:
        table = hl.Func("table")
        table[lvl] = hl.select(counted, idx, bins)
        slot[n] = table[hl.cast(hl.Int(32), x[n])]
    else:
        slot[n] = hl.select(counted, idx, bins)
    r = hl.RDom([hl.Range(0, dims.N)], "r")
    counts = hl.Func("counts")
    counts[k] = hl.cast(hl.Int(64), 0)
    counts[hl.clamp(slot[r.x], 0, bins)] += hl.cast(hl.Int(64), 1)
    out = hl.Func("out")
    out[k] = counts[k]
    return out


# -- equalize_hist ------------------------------------------------------------------------------

def _equalize_ref(x):
    x = np.asarray(x)
    if x.dtype != np.uint8:
        raise ShapeError("equalize_hist: reference takes uint8 images")
    H, W = x.shape[-2:]
    imgs = x.reshape(-1, H, W)
    out = np.empty_like(imgs)
    total = H * W
    for i, img in enumerate(imgs):
        hist = np.bincount(img.ravel(), minlength=256)
        first = int(np.flatnonzero(hist)[0])
        if hist[first] == total:
            out[i] = img
            continue
        cdf = np.cumsum(hist)
        scale = np.float32(255.0) / np.float32(total - hist[first])
        lut = np.rint((cdf - hist[first]).astype(np.float32) * scale)
        out[i] = np.clip(lut, 0, 255).astype(np.uint8)[img]
    return out.reshape(x.shape)


def _equalize_frontend(x):
    """Histogram equalization of each uint8 ``[H, W]`` image of ``[..., H, W]``, as
    ``cv2.equalizeHist`` (see the module doc for the exact rounding)."""
    x3, lead = _to_bhw(x, "equalize_hist")
    return equalize_hist.kernel(x3).reshape(lead + x3.shape[1:])


def _equalize_inputs(dims, dtypes, params, rng):
    shape = (dims["B"], dims["H"], dims["W"])
    # A skewed distribution (most levels low), the case equalization is for.
    return [np.minimum(rng.exponential(40.0, shape), 255).astype(np.uint8)]


@op(category="image", inputs={"x": "B H W"}, output="B H W", dtypes=["uint8"],
    reference=_equalize_ref, frontend=_equalize_frontend, doc=_equalize_frontend.__doc__,
    make_inputs=_equalize_inputs, example={"B": 2, "H": 64, "W": 100})
def equalize_hist(x, *, dims):
    """Per image: a 256-bin histogram, its running sum, a lookup table, then the lookup."""
    w, h, b, v = hl.Var("w"), hl.Var("h"), hl.Var("b"), hl.Var("v")
    i32, f32 = hl.Int(32), hl.Float(32)
    r = hl.RDom([hl.Range(0, dims.W), hl.Range(0, dims.H)], "r")
    hist = hl.Func("hist")
    hist[v, b] = 0
    hist[hl.cast(i32, x[r.x, r.y, b]), b] += 1
    cdf = hl.Func("cdf")
    cdf[v, b] = hist[v, b]
    rv = hl.RDom([hl.Range(1, 255)], "rv")
    cdf[rv.x, b] = cdf[rv.x - 1, b] + hist[rv.x, b]
    total = dims.W * dims.H
    # cdf is 0 below the first occupied level and equals its count there: the smallest
    # positive cdf value is that count.
    lv = hl.RDom([hl.Range(0, 256)], "lv")
    first = hl.Func("first")
    first[b] = hl.minimum(hl.select(cdf[lv.x, b] > 0, cdf[lv.x, b], total))
    scale = hl.strict_float(hl.f32(255.0) / hl.cast(f32, total - first[b]))
    level = round_half_even(hl.strict_float(hl.cast(f32, cdf[v, b] - first[b]) * scale))
    lut = hl.Func("lut")
    lut[v, b] = hl.cast(hl.UInt(8), hl.clamp(level, hl.f32(0.0), hl.f32(255.0)))
    out = hl.Func("out")
    px = x[w, h, b]
    out[w, h, b] = hl.select(first[b] == total, px, lut[hl.cast(i32, px), b])
    return out


for _fe in (_equalize_frontend,):
    _fe.shape_only = True
