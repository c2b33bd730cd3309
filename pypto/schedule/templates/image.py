"""Default schedules of the separable image filters (box_blur, gaussian_blur, sobel).

The output is split into strips of rows; strips (of every image in the batch) run in parallel.
Each strip first computes the horizontal pass for its rows plus the filter's halo into a buffer
that stays in cache, then the vertical pass reads it. Both passes are vectorized along W.
(Computing the horizontal pass row by row into a rolling buffer, Halide's sliding window, runs
no faster here and takes about five times longer to compile.)
"""

from __future__ import annotations

from ..defaults import D, MIN_TASK_ELEMS, _pow2_at_most, output_directives, template

#: Output rows per strip, at least; a strip is also at least 8 times the filter's half height so
#: that recomputing the halo rows of each strip stays cheap.
STRIP_ROWS = 16


def _separable(row_funcs, halo):
    def fn(built, dims, lanes):
        H, W, B = dims.get("H", 1), dims.get("W", 1), dims.get("B", 1)
        if built.out_dtypes[0] in ("uint8", "int8"):
            # Sums run in 16 or 32 bits: half a register of bytes per vector is as fast and
            # compiles several times faster.
            lanes = max(1, lanes // 2)
        vec = _pow2_at_most(W, lanes) if W >= 4 else 1
        out = []
        rows = max(STRIP_ROWS, 8 * halo(built.params), MIN_TASK_ELEMS // max(W, 1))
        if H >= 2 * rows:
            out += [D("split", "out", var="h", outer="ho", inner="hi", factor=rows),
                    D("fuse", "out", inner="ho", outer="b", fused="strip")]
            at = "strip"
        else:
            at = "b"
        if vec > 1:
            out.append(D("vectorize", "out", var="w", factor=vec))
        if H * W * B >= MIN_TASK_ELEMS and (at == "strip" or B > 1):
            out.append(D("parallel", "out", var=at))
        for f in row_funcs:
            if f in built.funcs:
                out.append(D("compute_at", f, at="out", var=at))
                if vec > 1:
                    out.append(D("vectorize", f, var="w", factor=vec))
        return out

    return fn


def _gauss_halo(params):
    r = params.get("radius")
    return r if r is not None else int(4.0 * params.get("sigma", 1.0) + 0.5)


template("box_blur")(_separable(["hsum"], lambda p: p.get("size", 3) // 2))
template("gaussian_blur")(_separable(["hblur"], _gauss_halo))
template("sobel")(_separable(["hdiff", "hsmooth"], lambda p: 1))


@template("resize_bilinear")
def _resize_bilinear(built, dims, lanes):
    """Blocks of output rows of one image are the parallel tasks; a task first interpolates the
    input rows it reads along the columns (``rows``, two gathers per output column), then each
    output row from two of them (contiguous loads). The column indices and weights are computed
    once, up front (the row ones are hoisted out of the column loop by the compiler).

    3 x 1024^2 to 1536^2 float32, two threads, ``out=``, after a pause: parallel over the three
    images with four gathers per output element, 8.2 ms (torch 5.6); over blocks of rows, 6.6
    (torch 5.4); this schedule, 4.0-4.3 (torch 5.3-7.1, its spread in the same sitting)."""
    OW, OH, B = dims.get("OW", 1), dims.get("OH", 1), dims.get("B", 1)
    out: list = []
    if OW >= lanes:
        out.append(D("vectorize", "out", var="ow", factor=lanes))
    per_task = max(1, MIN_TASK_ELEMS // max(OW, 1))
    if OW * OH * B >= 2 * MIN_TASK_ELEMS and OH >= 2 * per_task:
        out += [D("split", "out", var="oh", outer="oho", inner="ohi", factor=per_task),
                D("fuse", "out", inner="oho", outer="b", fused="task"),
                D("parallel", "out", var="task"),
                D("compute_at", "rows", at="out", var="task")]
    elif B >= 2 and OW * OH * B >= 2 * MIN_TASK_ELEMS:
        out += [D("parallel", "out", var="b"), D("compute_at", "rows", at="out", var="b")]
    else:
        out.append(D("compute_root", "rows"))
    if OW >= lanes:
        out.append(D("vectorize", "rows", var="ow", factor=lanes))
    for f in ("xlo", "xwt"):
        out.append(D("compute_root", f))
        if OW >= lanes:
            out.append(D("vectorize", f, var="ow", factor=lanes))
    return out
