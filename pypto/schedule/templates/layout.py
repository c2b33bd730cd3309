"""Default schedules of the layout, indexing, scan and detection ops.

- Copies along one axis (kernel form [O, A, I] -> [O, X, I]: split, pad, repeat, flip,
  take_along_axis, gather, index_select): the generic rule vectorizes the innermost dim I, which
  is 1 when the op works on the last axis. Then the middle dim X is made innermost and vectorized
  instead, and the rows O run in parallel; for the layout ops with I = 1 the loop is specialized
  for the unit stride of X (the kernel knows it only at run time).
- tile and roll are block copies (updates): see :func:`_block_copies`.
- Scans: see :mod:`.scan`.
- scatter_add: its update runs in parallel over the rows O (a row's scatters stay in order).
- The extra row reductions (all, any, count_nonzero, vector_norm, the nan* ops) reuse the
  reduction family's template: their Funcs have the same shape ([O] over RVar ``k$x``).
- nms: every stage at root as the generic rule has it; the final scatter is marked serial (it
  must be, and Halide warns about an update left unscheduled).
"""

from __future__ import annotations

from ..defaults import MIN_TASK_ELEMS, D, _pow2_at_most, generic, output_directives, template
from .reduce import row_reduction

_COPIES = ("split", "pad", "repeat", "flip", "take_along_axis", "gather", "index_select")
#: Copies whose kernels know only at run time that the middle axis has unit stride when I = 1.
_UNIT = ("split", "pad", "repeat", "flip", "tile")


def _rows_parallel(stage: int, n_o: int, row: int) -> list:
    """The rows ``o`` in parallel, in tasks of about :data:`MIN_TASK_ELEMS` elements (rows of
    ``row`` elements); none when that makes fewer than two tasks. A task per row of a
    [2048, 1024 + 1024] concat spent a tenth of the copy's CPU time in dispatch."""
    if n_o < 2 or n_o * row < 2 * MIN_TASK_ELEMS:
        return []
    rows = max(1, MIN_TASK_ELEMS // max(row, 1))
    if rows == 1:
        return [D("parallel", "out", stage, var="o")]
    return [D("parallel", "out", stage, var="o", factor=rows, tail="guard_with_if")]


def _oai_copy(built, dims, lanes):
    out = built.funcs["out"]
    i, x, o = out.args
    n_i = dims.get(i.upper(), 1)
    n_x = dims.get(x.upper(), 1)
    if n_i >= lanes or n_x < lanes:
        return generic(built, dims, lanes)
    ds = [D("reorder", "out", vars=[x, i, o]),
          D("vectorize", "out", var=x, factor=_pow2_at_most(n_x, lanes))]
    ds += _rows_parallel(0, dims.get("O", 1), n_x * n_i)
    if n_i == 1 and built.op.name in _UNIT:
        # The stride of the middle axis is 1 here, which the kernel knows only at run time:
        # without this its vector loads and stores are gathers and scatters (split [2048, 2048,
        # 1] one core: 1.7 -> 1.2 ms, NumPy 0.8-1.0).
        ds.append(D("specialize", "out", unit_stride=1))
    return ds


def _block_copies(built, dims, lanes):
    """tile and roll: ``out`` has an undefined pure definition and block copies (updates over
    an RDom along the middle axis A; tile's one update also runs over the copies, outside A).
    Each copy is vectorized along I when I is a vector or more, else along its run of A (with
    the unit stride of A specialized when I = 1; tile's stores, which Halide cannot prove apart
    across copies, are said to be race-free: each (a, k) writes its own element k * A + a); a
    copy shorter than a vector (roll's wrap-around by a small shift) runs as it is. Rows run in
    parallel, or the runs of I for a single row."""
    info = built.funcs["out"]
    n_i, n_a, n_o = dims.get("I", 1), dims.get("A", 1), dims.get("O", 1)
    ds = []
    shift = built.params.get("shift", 0)
    tiled = built.op.name == "tile"
    runs = [n_a - shift, shift] if not tiled else [n_a]
    for u, (rvars, run) in enumerate(zip(info.updates, runs)):
        st = u + 1
        rx = rvars[0]
        base = rx.replace("$", "_")
        # Elements one row of this stage writes (all of tile's copies).
        row = run * n_i * (built.params.get("reps", 1) if tiled else 1)
        # I shorter than a vector is still vectorized (in a narrower vector) when the run is
        # too short to be: np.tile of [2048, 4] x (1, 256) ran 2.5-2.9 ms scalar, NumPy 0.5-0.8.
        vec_i = lanes if n_i >= lanes else (
            _pow2_at_most(n_i, lanes) if n_i >= 4 and run < lanes else 0)
        if vec_i:
            ds.append(D("reorder", "out", st, vars=["i", *rvars, "o"]))
            if n_o < 2 and n_i >= 2 * MIN_TASK_ELEMS:
                ds += [D("split", "out", st, var="i", outer="i_t", inner="i_b",
                         factor=MIN_TASK_ELEMS, tail="guard_with_if"),
                       D("reorder", "out", st, vars=["i_b", *rvars, "i_t", "o"]),
                       D("parallel", "out", st, var="i_t"),
                       D("split", "out", st, var="i_b", outer="i_o", inner="i_v", factor=vec_i,
                         tail="guard_with_if"),
                       D("vectorize", "out", st, var="i_v")]
                continue
            ds += [D("split", "out", st, var="i", outer="i_o", inner="i_v", factor=vec_i,
                     tail="guard_with_if"),
                   D("vectorize", "out", st, var="i_v")]
        elif run >= lanes:
            if tiled:
                ds.append(D("allow_race_conditions", "out", st))
            ds += [D("split", "out", st, var=rx, outer=f"{base}_o", inner=f"{base}_v",
                     factor=lanes, tail="guard_with_if"),
                   D("vectorize", "out", st, var=f"{base}_v")]
        ds += _rows_parallel(st, n_o, row)
        if n_i == 1 and run >= lanes:
            ds.append(D("specialize", "out", st, unit_stride=1))
        if not any(d.stage == st for d in ds):
            # A short copy run as it is, said so (Halide warns about an update left unscheduled
            # beside scheduled ones).
            ds.append(D("serial", "out", st, var=rx))
    return ds


def _scatter_add(built, dims, lanes):
    ds = output_directives("out", built.funcs["out"].args, dims, lanes)
    if dims.get("O", 1) > 1:
        ds.append(D("parallel", "out", 1, var="o"))
    else:
        ds.append(D("serial", "out", 1, var="i"))
    return ds


def _nms(built, dims, lanes):
    ds = generic(built, dims, lanes)
    (put,) = built.funcs["keep"].updates[0]
    return ds + [D("serial", "keep", 1, var=put)]


for _name in _COPIES:
    template(_name)(_oai_copy)
template("tile")(_block_copies)
template("roll")(_block_copies)
for _name in ("all", "any", "count_nonzero", "vector_norm", "nansum", "nanmean", "nanmax",
              "nanmin"):
    template(_name)(row_reduction)
template("scatter_add")(_scatter_add)
template("nms")(_nms)
template("batched_nms")(_nms)


# -- sorting -------------------------------------------------------------------------------------
#: Rows per parallel task of a sorting network (each stage of a block stays in cache).
SORT_BLOCK = 64


def _network(built, dims, lanes):
    """sort, argsort, median: every stage of the bitonic network computed per block of rows,
    vectorized across the rows of the block (a stage reads its partner at the same index in
    every row, so each vector load is dense)."""
    stages = [n for n in built.funcs if n.startswith("stage")]
    n_o = dims.get("O", 1)
    # Each stage's no-op update (see sorting._materialized), named so Halide does not warn.
    ds = [D("serial", s, 1, var=built.funcs[s].updates[0][0]) for s in stages]
    if n_o >= lanes:
        block = max(lanes, min(SORT_BLOCK, n_o))
        ds += [D("split", "out", var="o", outer="oo", inner="oi", factor=block),
               D("parallel", "out", var="oo")]
        for s in stages:
            ds += [D("compute_at", s, at="out", var="oo"),
                   D("vectorize", s, var="o", factor=lanes)]
        return ds
    width = built.params.get("width", 1)
    for s in stages:
        ds.append(D("compute_root", s))
        if width >= lanes:
            ds.append(D("vectorize", s, var="t", factor=lanes))
    return ds


def _topk(built, dims, lanes):
    """topk: the selection passes at root, vectorized across rows, rows in parallel."""
    (rx, ry) = built.funcs["pick"].updates[0]
    ds = [D("compute_root", "pick")]
    if dims.get("O", 1) >= lanes:
        ds += [D("split", "pick", 1, var="o", outer="o_o", inner="o_v", factor=lanes,
                 tail="guard_with_if"),
               D("reorder", "pick", 1, vars=["o_v", rx, ry, "o_o", "i"]),
               D("vectorize", "pick", 1, var="o_v"),
               D("parallel", "pick", 1, var="o_o")]
    return ds


for _name in ("sort", "argsort"):
    template(_name)(_network)
template("topk")(_topk)


# -- concat ----------------------------------------------------------------------------------------

def _concat(built, dims, lanes):
    """concat: ``out`` has an undefined pure definition and two block copies (updates over
    ``ra`` and ``rb``). Each copy is vectorized along its block; rows run in parallel, or, for
    few rows (a concat along the first axis is one long row), the block is cut into tasks."""
    info = built.funcs["out"]
    n_o = dims.get("O", 1)
    ds = []
    for u, ext in enumerate((dims.get("A", 1), dims.get("B", 1))):
        (r,) = info.updates[u]
        st = u + 1
        base = r.replace("$", "_")
        inner = r
        if n_o < 2 and ext >= 2 * MIN_TASK_ELEMS:
            ds += [D("split", "out", st, var=r, outer=f"{base}_t", inner=f"{base}_b",
                     factor=MIN_TASK_ELEMS),
                   D("parallel", "out", st, var=f"{base}_t")]
            inner = f"{base}_b"
        else:
            ds += _rows_parallel(st, n_o, ext)
        if ext >= lanes:
            ds += [D("split", "out", st, var=inner, outer=f"{base}_o", inner=f"{base}_v",
                     factor=_pow2_at_most(ext, lanes), tail="guard_with_if"),
                   D("vectorize", "out", st, var=f"{base}_v")]
        elif not any(d.stage == st for d in ds):
            # A short block copied as it is, said so (Halide warns about an update left
            # unscheduled beside scheduled ones).
            ds.append(D("serial", "out", st, var=r))
    return ds


template("concat")(_concat)
