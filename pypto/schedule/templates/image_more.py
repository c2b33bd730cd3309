"""Default schedules of the morphology, filter, colour, warp and histogram ops
(pypto/ops/{morphology,filters,color,warp,histograms}.py).

Window ops reuse the strip schedule of the separable filters (templates/image.py): strips of
output rows run in parallel, a row pass (when the op has one) is computed per strip with its halo,
and everything is vectorized along W. Morphology on uint8 compares bytes directly, so it keeps the
full byte vector width (the blurs halve it for their wider sums).
"""

from __future__ import annotations

from ..defaults import D, MIN_TASK_ELEMS, _pow2_at_most, output_directives, template
from .image import _separable


def _footprint_halo(params) -> int:
    rows = params.get("footprint", "1").split("/")
    return len(rows) // 2


def _morph(row_funcs, passes):
    base = _separable(row_funcs, lambda p: passes * _footprint_halo(p))

    def fn(built, dims, lanes):
        if built.out_dtypes[0] in ("uint8", "int8"):
            lanes *= 2     # undo the halving the blurs' template applies (max/min stay 8-bit)
        return base(built, dims, lanes)
    return fn


template("dilate")(_morph(["rows0"], 1))
template("erode")(_morph(["rows0"], 1))
template("morph_open")(_morph(["rows0", "stage0", "rows1"], 2))
template("morph_close")(_morph(["rows0", "stage0", "rows1"], 2))


# -- filters ------------------------------------------------------------------------------------

def _full_lanes(fn):
    """``fn`` with the byte lanes the blur template halves restored (8-bit min/max/compare)."""
    def wrapped(built, dims, lanes):
        if built.out_dtypes[0] in ("uint8", "int8"):
            lanes *= 2
        return fn(built, dims, lanes)
    return wrapped


template("median_blur")(_full_lanes(_separable(["col_lo", "col_mid", "col_hi"],
                                               lambda p: p.get("ksize", 3) // 2)))
template("laplacian")(_separable([], lambda p: 1))
template("bilateral_filter")(_separable([], lambda p: p.get("radius", 2)))

#: Columns per parallel task of the column scan of integral_image.
SCAN_COLUMNS = 256


@template("integral_image")
def _integral_image(built, dims, lanes):
    """The column scan over the whole image first (its update vectorized along W, blocks of
    columns in parallel), then strips of rows: each row's running sum is a serial scan."""
    H, W, B = dims.get("H", 1), dims.get("W", 1), dims.get("B", 1)
    acc_lanes = max(1, lanes // 2) if built.out_dtypes[0] != "float64" else lanes
    vec = _pow2_at_most(W, acc_lanes) if W >= 4 else 1
    ds = [D("compute_root", "cols")]
    if vec > 1:
        ds.append(D("vectorize", "cols", var="w", factor=vec))
    ds.append(D("parallel", "cols", var="b"))
    (ry,) = built.funcs["cols"].updates[0]
    if W >= 2 * SCAN_COLUMNS:
        ds += [D("split", "cols", 1, var="w", outer="wc", inner="wi", factor=SCAN_COLUMNS,
                 tail="guard_with_if"),
               D("split", "cols", 1, var="wi", outer="wo", inner="wv", factor=vec,
                 tail="guard_with_if"),
               D("reorder", "cols", 1, vars=["wv", "wo", ry, "wc", "b"]),
               D("vectorize", "cols", 1, var="wv"),
               D("parallel", "cols", 1, var="wc")]
    elif vec > 1:
        ds += [D("split", "cols", 1, var="w", outer="wo", inner="wv", factor=vec,
                 tail="guard_with_if"),
               D("reorder", "cols", 1, vars=["wv", "wo", ry, "b"]),
               D("vectorize", "cols", 1, var="wv"),
               D("parallel", "cols", 1, var="b")]
    rows = max(16, MIN_TASK_ELEMS // max(W, 1))
    if H >= 2 * rows:
        ds += [D("split", "out", var="h", outer="ho", inner="hi", factor=rows),
               D("fuse", "out", inner="ho", outer="b", fused="strip")]
        at = "strip"
    else:
        at = "b"
    if H * W * B >= MIN_TASK_ELEMS:
        ds.append(D("parallel", "out", var=at))
    if vec > 1:
        ds.append(D("vectorize", "out", var="w", factor=_pow2_at_most(W, lanes)))
    ds.append(D("compute_at", "rows", at="out", var=at))
    if vec > 1:
        ds.append(D("vectorize", "rows", var="w", factor=vec))
    (rx,) = built.funcs["rows"].updates[0]
    ds.append(D("serial", "rows", 1, var=rx))     # a running sum: one element after another
    return ds


# -- colour conversions -------------------------------------------------------------------------

#: Pixels per parallel task of a colour conversion.
COLOR_BLOCK = 1 << 13


def _color(built, dims, lanes):
    """``out[n, c, b]``: vectors of pixels, the (3 or 1) channels unrolled inside each vector so
    every channel's ``select`` on ``c`` folds away and the pixel's inputs are read once.
    Channels-last images (N == 1: the colour axis is the last one) take their vectors across
    pixels ``b`` instead, with stride-3 loads and stores."""
    N, B = dims.get("N", 1), dims.get("B", 1)
    C = dims.get("CO", dims.get("C", 3))
    c = "c" if "c" in built.funcs["out"].args else "co"
    along, other = ("n", "b") if N >= lanes or N >= B else ("b", "n")
    extent = N if along == "n" else B
    vec = _pow2_at_most(extent, lanes) if extent >= 4 else 1
    ds = []
    inner, outer = along, along
    if vec > 1:
        ds.append(D("split", "out", var=along, outer=f"{along}o", inner=f"{along}i",
                    factor=vec, tail="shift_inwards"))
        inner, outer = f"{along}i", f"{along}o"
    if along == "n":
        order = [inner, c, outer, "b"] if vec > 1 else [inner, c, "b"]
    else:
        order = [inner, c, "n", outer] if vec > 1 else [inner, c, "n"]
    ds.append(D("reorder", "out", vars=order))
    if vec > 1:
        ds.append(D("vectorize", "out", var=inner))
    if C > 1:
        ds += [D("bound", "out", var=c, min=0, extent=C),
               D("unroll", "out", var=c)]
    if N * B * C >= 2 * MIN_TASK_ELEMS:
        last = order[-1]
        if vec > 1 and extent >= 2 * COLOR_BLOCK:
            ds += [D("split", "out", var=outer, outer="t", inner="tv", factor=COLOR_BLOCK // vec)]
            if along == "n":
                ds += [D("fuse", "out", inner="t", outer="b", fused="task"),
                       D("parallel", "out", var="task")]
            else:
                ds.append(D("parallel", "out", var="t"))
        else:
            ds.append(D("parallel", "out", var=last))
    return ds


for _name in ("rgb_to_gray", "rgb_to_hsv", "hsv_to_rgb", "rgb_to_yuv", "yuv_to_rgb"):
    template(_name)(_color)


# -- resizes and warps --------------------------------------------------------------------------

@template("resize_nearest")
def _resize_nearest(built, dims, lanes):
    """The generic output schedule with the row and column indices computed once, up front."""
    ds = output_directives("out", built.funcs["out"].args, dims, lanes, fuse_rows=True)
    ds += [D("compute_root", "rows"), D("compute_root", "cols")]
    return ds


@template("resize_bicubic")
def _resize_bicubic(built, dims, lanes):
    """Tap indices and weights once per axis; the horizontal pass over every input row it needs
    (in parallel, vectorized along the output columns), then the vertical pass."""
    ds = output_directives("out", built.funcs["out"].args, dims, lanes, fuse_rows=True)
    for f in ("xi", "xw", "yi", "yw"):
        ds.append(D("compute_root", f))
    OW = dims.get("OW", 1)
    ds.append(D("compute_root", "horiz"))
    if OW >= 4:
        ds.append(D("vectorize", "horiz", var="ow", factor=_pow2_at_most(OW, lanes)))
    if dims.get("H", 1) * OW * dims.get("B", 1) >= 2 * MIN_TASK_ELEMS:
        ds += [D("fuse", "horiz", inner="h", outer="b", fused="hb"),
               D("parallel", "horiz", var="hb")]
    return ds


def _warp(built, dims, lanes):
    """The output in vectors along its rows, rows in parallel; the 3 x 3 inverse per image is
    computed once, up front."""
    return output_directives("out", built.funcs["out"].args, dims, lanes, fuse_rows=True) + [
        D("compute_root", "inv")]


template("warp_affine")(_warp)
template("warp_perspective")(_warp)


# -- histograms ---------------------------------------------------------------------------------

#: Elements per parallel chunk of a histogram (each chunk counts into its own partial
#: histogram; the partials are added at the end).
HIST_CHUNK = 1 << 16


@template("histogram")
def _histogram(built, dims, lanes):
    """Chunks of the input in parallel (``rfactor``): per chunk, the bin of every value is
    computed in vectors into a small buffer, then counted one by one; the partial histograms
    are summed."""
    N = dims.get("N", 1)
    (r,) = built.funcs["counts"].updates[0]
    ds = output_directives("out", ("k",), dims, lanes) + [D("compute_root", "counts")]
    vec = _pow2_at_most(N, 2 * lanes) if N >= 4 else 1     # int32 slots: twice the int64 lanes
    if N >= 2 * HIST_CHUNK:
        ds += [D("split", "counts", 1, var=r, outer="ro", inner="ri", factor=HIST_CHUNK,
                 tail="guard_with_if"),
               D("rfactor", "counts", 1, pairs=[["ro", "u"]], intm="partial"),
               D("compute_root", "partial"),
               D("parallel", "partial", 1, var="u"),
               D("compute_at", "slot", at="partial", var="u")]
    else:
        ds.append(D("compute_root", "slot"))
    if vec > 1:
        ds.append(D("vectorize", "slot", var="n", factor=vec))
    if "table" in built.funcs:      # uint8: the 256 slots once, up front
        ds += [D("compute_root", "table"), D("vectorize", "table", var="lvl", factor=lanes)]
    return ds


@template("equalize_hist")
def _equalize_hist(built, dims, lanes):
    """Per image: the histogram (rows in parallel chunks for a single image, images in
    parallel otherwise), its running sum and the 256-entry table, then the lookup in vectors."""
    H, W, B = dims.get("H", 1), dims.get("W", 1), dims.get("B", 1)
    ds = output_directives("out", ("w", "h", "b"), dims, lanes)
    ds.append(D("compute_root", "hist"))
    rx, ry = built.funcs["hist"].updates[0]
    rows = max(1, HIST_CHUNK // max(W, 1))
    if B == 1 and H >= 2 * rows:
        ds += [D("split", "hist", 1, var=ry, outer="ryo", inner="ryi", factor=rows,
                 tail="guard_with_if"),
               D("rfactor", "hist", 1, pairs=[["ryo", "u"]], intm="hist_part"),
               D("compute_root", "hist_part"),
               D("parallel", "hist_part", 1, var="u")]
    elif B > 1 and H * W * B >= 2 * HIST_CHUNK:
        ds.append(D("parallel", "hist", 1, var="b"))
    for f in ("cdf", "first", "lut"):
        ds.append(D("compute_root", f))
    ds.append(D("vectorize", "lut", var="v", factor=lanes))
    return ds


# -- sampling -----------------------------------------------------------------------------------

@template("grid_sample")
def _grid_sample(built, dims, lanes):
    """A task per output row of an image: the row's sampling positions (``pos_x``, ``pos_y``)
    computed once, then every channel's row in vectors along it. (Positions inlined and
    recomputed per channel, with images in parallel: 4 x 32 channels, 64 x 64, bilinear, AOT
    kernels side by side, median of 9 blocks: 1.66 ms against 1.38; F.grid_sample 0.66.)"""
    vec = _pow2_at_most(dims["OW"], lanes)
    ds = [D("reorder", "out", vars=["ow", "c", "oh", "n"])]
    if vec > 1:
        ds.append(D("vectorize", "out", var="ow", factor=vec))
    ds += [D("fuse", "out", inner="oh", outer="n", fused="task"),
           D("parallel", "out", var="task")]
    for f in ("pos_x", "pos_y"):
        ds.append(D("compute_at", f, at="out", var="task"))
        if vec > 1:
            ds.append(D("vectorize", f, var="ow", factor=vec))
    return ds
