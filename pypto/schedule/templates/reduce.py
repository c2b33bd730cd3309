"""Default schedules of the row reductions (kernel form [O, R] -> [O]).

Two shapes of work:

- few rows, long rows (a full reduction, O = 1): every reduction Func is split along R into
  chunks, and ``rfactor`` turns the chunks and the vector lanes inside a chunk into an
  intermediate ``<name>_part[v, u, o]`` of partial results, computed in parallel over the chunks
  ``u`` with the lanes ``v`` vectorized; the final combine over the chunks is small.
- many rows: the output is split into blocks of rows, one parallel task per block; each reduction
  is computed per block, with its row reduction ``rfactor``-ed over the vector lanes (lane partials
  ``<name>_part[v, o]`` accumulated with contiguous vector loads), or, for rows shorter than a
  vector, vectorized across rows.
"""

from __future__ import annotations

import numpy as np

from ..defaults import MIN_TASK_ELEMS, D, template

#: Elements of R per parallel chunk in a full reduction.
CHUNK = 1 << 15
#: At most this many rows use the chunked (rfactor over R) form.
FEW_ROWS = 8


def _itemsize(dtype: str) -> int:
    return np.dtype(dtype).itemsize


def reduction_funcs(built):
    return [i for i in built.funcs.values() if i.updates and not i.is_input and not i.is_output]


def row_reduction(built, dims, lanes: int) -> list:
    """Directives for an op whose Funcs with updates each reduce one row (RVar ``k$x``) per ``o``."""
    n_o, n_r = dims["O"], dims["R"]
    out = built.funcs["out"]
    vec_bytes = lanes * _itemsize(out.type or "float32")
    in_lanes = max(1, vec_bytes // _itemsize(built.dtypes[0]))
    reds = reduction_funcs(built)
    ds: list = []
    # Two vectors of partials per lane group hide the latency of the accumulating adds.
    width = 2 * in_lanes
    if n_o <= FEW_ROWS and n_r >= 4 * CHUNK:
        for f in reds:
            (k,) = f.updates[0]
            part, lane = f"{f.name}_part", f"{f.name}_lane"
            ds += [
                D("compute_root", f.name),
                D("split", f.name, 1, var=k, outer="ko", inner="ki", factor=CHUNK),
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
    rows = max(1, MIN_TASK_ELEMS // max(n_r, 1))
    rows = min(rows, n_o)
    out_lanes = lanes
    if rows >= out_lanes:
        rows -= rows % out_lanes
    at = None
    if n_o * n_r >= MIN_TASK_ELEMS and n_o >= 2 * rows:
        ds.append(D("split", "out", var="o", outer="oo", inner="oi", factor=rows))
        ds.append(D("parallel", "out", var="oo"))
        if rows >= out_lanes:
            ds.append(D("vectorize", "out", var="oi", factor=out_lanes))
        at = "oo"
    elif n_o >= out_lanes:
        ds.append(D("vectorize", "out", var="o", factor=out_lanes))
    for f in reds:
        (k,) = f.updates[0]
        ds.append(D("compute_at", f.name, at="out", var=at) if at else D("compute_root", f.name))
        if n_r >= 2 * width:
            part = f"{f.name}_part"
            ds += [
                D("split", f.name, 1, var=k, outer="ko", inner="ki", factor=width),
                D("rfactor", f.name, 1, pairs=[["ki", "v"]], intm=part),
                D("compute_at", part, at=f.name, var="o"),
                D("reorder_storage", part, vars=["v", "o"]),
                D("vectorize", part, 0, var="v"),
                D("reorder", part, 1, vars=["v", "ko", "o"]),
                D("vectorize", part, 1, var="v"),
            ]
        elif n_o >= in_lanes:
            ds += [
                D("split", f.name, 1, var="o", outer="o_o", inner="o_v", factor=in_lanes,
                  tail="guard_with_if"),
                D("reorder", f.name, 1, vars=["o_v", k, "o_o"]),
                D("vectorize", f.name, 1, var="o_v"),
            ]
    return ds


for _name in ("sum", "mean", "prod", "max", "min", "argmax", "argmin", "var", "std", "logsumexp"):
    template(_name)(row_reduction)
