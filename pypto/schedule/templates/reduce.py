"""Default schedules of the row reductions (kernel form [O, R] -> [O]).

Three shapes of work:

- few long rows (a full reduction has O = 1): each reduction Func is split along R into chunks of
  ``CHUNK`` elements; ``rfactor`` makes ``<name>_part[o, u]``, the partial result of chunk ``u``,
  computed in parallel over the chunks; inside a chunk a second ``rfactor`` over vector lanes
  (``<name>_lane[o, v, u]``, on the stack) accumulates with contiguous vector loads. The final
  combine over the chunks is small.
- rows of at least two vectors: blocks of rows are parallel tasks; each row is reduced in turn,
  ``rfactor``-ed over vector lanes (``<name>_part[o, v]``); a second pass over the same row
  (argmax's index search, var's deviations) reads it from cache.
- shorter rows: blocks of rows, each reduction vectorized across the rows of a block.
"""

from __future__ import annotations

import numpy as np

from ..defaults import MIN_TASK_ELEMS, D, template

#: Elements of R per parallel chunk in a full reduction.
CHUNK = 1 << 15
#: At most this many rows use the chunked (rfactor over R) form.
FEW_ROWS = 8
#: Elements per parallel task of a large reduction (see :func:`task_rows`).
TASK_ELEMS = 4 * MIN_TASK_ELEMS
#: Vectors of partial results per row, by op (default 2).
_CHAINS = {"prod": 4}
#: float32 sums read a row in blocks of GROUP runs of BLOCK elements, one step adding element
#: ``m % BLOCK`` of each run of a block (see ``pypto.ops.reduce._float_sum``): their reduction
#: runs over R // GROUP steps, and their lane partials are BLOCK wide, so that each of a step's
#: GROUP loads is one contiguous vector (a width that BLOCK does not divide makes them shuffles).
GROUP = 8
BLOCK = 16
_GROUPED = ("sum", "mean", "nansum", "global_avg_pool2d")


def task_rows(n_o: int, row_elems: int) -> int:
    """Rows per parallel task: tasks of up to ``TASK_ELEMS`` elements while there are at least
    four of them, never under ``MIN_TASK_ELEMS``. Measured on this 2-core machine under load
    (max of float32 [2048, 2048], 2 threads, best of 25): 8 rows (16K elements) a task, 256
    tasks, took 0.97-1.38 ms; 16 to 64 rows 0.62-0.74 ms; torch 0.59-0.83 ms."""
    row_elems = max(row_elems, 1)
    least = max(1, MIN_TASK_ELEMS // row_elems)
    most = max(1, TASK_ELEMS // row_elems)
    return min(n_o, max(least, min(most, n_o // 4)))


def _itemsize(dtype: str) -> int:
    return np.dtype(dtype).itemsize


def _group_width(steps: int) -> int:
    """Steps per lane-partial vector of a grouped float32 sum: BLOCK, or half of it when fewer
    steps are left over the last vector (the leftover steps run one by one). Rows of 196
    (24 steps, [4096, 196] float32, kernel alone, 15 rounds): 16 wide took 0.21 ms (a
    half-empty second vector), 8 wide 0.15-0.17."""
    def cost(w):
        return steps // w + steps % w
    return BLOCK if cost(BLOCK) <= cost(BLOCK // 2) else BLOCK // 2


def reduction_funcs(built):
    return [i for i in built.funcs.values() if i.updates and not i.is_input and not i.is_output]


def row_reduction(built, dims, lanes: int) -> list:
    """Directives for an op whose Funcs with updates each reduce one row (RVar ``k$x``) per ``o``."""
    n_o, n_r = dims["O"], dims["R"]
    group = GROUP if built.op.name in _GROUPED and built.dtypes[0] == "float32" else 1
    steps = n_r // group                  # of each reduction; a step reads `group` elements
    out = built.funcs["out"]
    vec_bytes = lanes * _itemsize(out.type or "float32")
    in_lanes = max(1, vec_bytes // _itemsize(built.dtypes[0]))
    reds = reduction_funcs(built)
    ds: list = []
    # Two vectors of partials per lane group hide the latency of the accumulating adds; a
    # product's multiplies want four (prod of float32 [256, 2048] on one core: 0.058 -> 0.043 ms
    # from two to four, torch 0.037).
    width = _group_width(steps) if group > 1 else _CHAINS.get(built.op.name, 2) * in_lanes
    if n_o <= FEW_ROWS and n_r >= 4 * CHUNK:
        for f in reds:
            (k,) = f.updates[0]
            part, lane = f"{f.name}_part", f"{f.name}_lane"
            ds += [
                D("compute_root", f.name),
                D("split", f.name, 1, var=k, outer="ko", inner="ki", factor=CHUNK // group),
                D("rfactor", f.name, 1, pairs=[["ko", "u"]], intm=part),
                D("compute_root", part),
                D("reorder_storage", part, vars=["u", "o"]),
                D("reorder", part, 1, vars=["ki", "u", "o"]),
                D("parallel", part, 1, var="u"),
                D("split", part, 1, var="ki", outer="kio", inner="kii", factor=width),
                D("rfactor", part, 1, pairs=[["kii", "v"]], intm=lane),
                D("compute_at", lane, at=part, var="u"),
                D("reorder_storage", lane, vars=["v", "o", "u"]),
                D("vectorize", lane, 0, var="v"),
                D("reorder", lane, 1, vars=["v", "kio", "o", "u"]),
                D("vectorize", lane, 1, var="v"),
            ]
        return ds
    rows = task_rows(n_o, n_r)
    parallel = n_o * n_r >= MIN_TASK_ELEMS and n_o >= 2 * rows
    if steps >= (width if group > 1 else 2 * width):
        # Rows of at least two vectors: one row at a time, read with contiguous vector loads into
        # lane partials; a second pass over the row (argmax, var) finds it in cache.
        at = "o"
        if parallel:
            ds.append(D("split", "out", var="o", outer="oo", inner="oi", factor=rows))
            ds.append(D("parallel", "out", var="oo"))
            at = "oi"
        for f in reds:
            (k,) = f.updates[0]
            part = f"{f.name}_part"
            ds += [
                D("compute_at", f.name, at="out", var=at),
                D("split", f.name, 1, var=k, outer="ko", inner="ki", factor=width),
                D("rfactor", f.name, 1, pairs=[["ki", "v"]], intm=part),
                D("compute_at", part, at=f.name, var="o"),
                D("reorder_storage", part, vars=["v", "o"]),
                D("vectorize", part, 0, var="v"),
                D("reorder", part, 1, vars=["v", "ko", "o"]),
                D("vectorize", part, 1, var="v"),
            ]
        return ds
    # Short rows: blocks of rows, each reduction vectorized across the rows of a block.
    if rows >= lanes:
        rows -= rows % lanes
    at = None
    if parallel:
        ds.append(D("split", "out", var="o", outer="oo", inner="oi", factor=rows))
        ds.append(D("parallel", "out", var="oo"))
        if rows >= lanes:
            ds.append(D("vectorize", "out", var="oi", factor=lanes))
        at = "oo"
    elif n_o >= lanes:
        ds.append(D("vectorize", "out", var="o", factor=lanes))
    for f in reds:
        (k,) = f.updates[0]
        ds.append(D("compute_at", f.name, at="out", var=at) if at else D("compute_root", f.name))
        if n_o >= in_lanes:
            ds += [
                D("split", f.name, 1, var="o", outer="o_o", inner="o_v", factor=in_lanes,
                  tail="guard_with_if"),
                D("reorder", f.name, 1, vars=["o_v", k, "o_o"]),
                D("vectorize", f.name, 1, var="o_v"),
            ]
    return ds


for _name in ("sum", "mean", "prod", "max", "min", "argmax", "argmin", "var", "std", "logsumexp"):
    template(_name)(row_reduction)


@template("global_avg_pool2d")
def _global_avg_pool(built, dims, lanes):
    """The mean of each flattened plane, summed as ``mean`` sums a row: its schedule, the
    planes as rows (the output's loop is ``p``, the sums' ``o``)."""
    out = []
    for d in row_reduction(built, {"O": dims["P"], "R": dims["S"]}, lanes):
        on_out = d.func == "out" or (d.op == "compute_at" and d.get("at") == "out")
        if on_out and d.get("var") == "o":
            d = D(d.op, d.func, d.stage, **{**dict(d.kwargs), "var": "p"})
        out.append(d)
    return out
