"""Default schedules of the normalizations.

Row normalizations (kernel form [R, C], output ``out[c, r]``): blocks of rows (about
``MIN_TASK_ELEMS`` elements) are parallel tasks. Row statistics (the Funcs with updates, over RVar
``k$x``) are ``rfactor``-ed over vector lanes so that a row is read with contiguous vector loads into
lane partials (``<name>_part``); per-row scalars (Funcs over ``r`` only) are computed once per row; a
per-element intermediate (softmax's ``e``, the exponentials) is stored, so each exponential is
computed once; the output is vectorized along C.

Each row of a block is handled in turn (statistics, scalars, output row), so the passes after the
first re-read the row from L1. (softmax at C >= 1024 float32 once computed them per block of 16
rows instead: the statistics of every row, then the exponentials of the whole block, then its
output rows, re-read from L2. Side by side with torch at [4096, 1024] float32, fresh outputs, two
threads, medians of 9 single calls and of 9 blocks of 10 calls, each after a pause, in two
sittings: per block 3.57 / 2.56 and 3.14 / 2.20 ms against torch's 2.78 / 2.15 and 2.44 / 1.65;
per row 2.78 / 2.06 and 2.75 / 2.07 against 2.74 / 2.06 and 2.82 / 1.86. float64, while its
exponential was still Halide's: 19.8 ms per row against 22.6 per block, steady.)

Rows shorter than two vectors use the generic schedule (vectorized across rows).

``batch_norm`` (output ``out[s, c, n]``): the per-channel scale is computed once up front; the
output is vectorized along S and parallel over (channel, image) pairs, or, when S is shorter than a
vector (a 2-D input), vectorized along C and parallel over blocks of N.
"""

from __future__ import annotations

import numpy as np

from ..defaults import MIN_TASK_ELEMS, D, generic, template


def _itemsize(dtype: str) -> int:
    return np.dtype(dtype).itemsize


def row_stats(f: str, k: str, width: int, row: str = "r") -> list:
    """Lane-partial ``rfactor`` of the row reduction ``f`` over RVar ``k`` (computed for one row,
    pure var ``row``, at a time)."""
    part = f"{f}_part"
    return [
        D("split", f, 1, var=k, outer="ko", inner="ki", factor=width),
        D("rfactor", f, 1, pairs=[["ki", "v"]], intm=part),
        D("compute_at", part, at=f, var=row),
        D("reorder_storage", part, vars=["v", row]),
        D("vectorize", part, 0, var="v"),
        D("reorder", part, 1, vars=["v", "ko", row]),
        D("vectorize", part, 1, var="v"),
    ]


def row_normalization(built, dims, lanes: int) -> list:
    n_r, n_c = dims["R"], dims["C"]
    in_lanes = max(1, lanes * _itemsize(built.out_dtypes[0]) // _itemsize(built.dtypes[0]))
    width = 2 * in_lanes
    if n_c < 2 * width:
        return generic(built, dims, lanes)
    ds: list = []
    rows = min(n_r, max(1, MIN_TASK_ELEMS // n_c))
    inner = [info for info in built.funcs.values() if not (info.is_input or info.is_output)]
    at = "r"
    if n_r * n_c >= MIN_TASK_ELEMS and n_r >= 2:
        if rows > 1:
            ds.append(D("split", "out", var="r", outer="ro", inner="ri", factor=rows))
            ds.append(D("parallel", "out", var="ro"))
            at = "ri"
        else:
            ds.append(D("parallel", "out", var="r"))
    ds.append(D("vectorize", "out", var="c", factor=lanes))
    for info in inner:
        ds.append(D("compute_at", info.name, at="out", var=at))
        if info.updates:
            ds += row_stats(info.name, info.updates[0][0], width)
        elif "c" in info.args:
            if at == "ri":  # one row of it at a time, in a buffer allocated once per task
                ds.append(D("store_at", info.name, at="out", var="ro"))
            ds.append(D("vectorize", info.name, var="c", factor=lanes))
    return ds


for _name in ("softmax", "log_softmax", "layer_norm", "rms_norm"):
    template(_name)(row_normalization)


@template("batch_norm")
def _batch_norm(built, dims, lanes: int) -> list:
    n_n, n_c, n_s = dims["N"], dims["C"], dims["S"]
    ds = [D("compute_root", "scale")]
    total = n_n * n_c * n_s
    if n_s >= lanes:
        ds.append(D("vectorize", "out", var="s", factor=lanes))
        if total >= MIN_TASK_ELEMS:
            ds.append(D("fuse", "out", inner="c", outer="n", fused="cn"))
            per_task = max(1, MIN_TASK_ELEMS // n_s)
            if per_task > 1 and n_n * n_c >= 4 * per_task:
                ds.append(D("split", "out", var="cn", outer="cno", inner="cni", factor=per_task))
                ds.append(D("parallel", "out", var="cno"))
            else:
                ds.append(D("parallel", "out", var="cn"))
        return ds
    if n_c >= lanes:
        ds.append(D("vectorize", "out", var="c", factor=lanes))
    if total >= MIN_TASK_ELEMS:
        per_task = max(1, MIN_TASK_ELEMS // (n_c * n_s))
        if per_task > 1 and n_n >= 4 * per_task:
            ds.append(D("split", "out", var="n", outer="no", inner="ni", factor=per_task))
            ds.append(D("parallel", "out", var="no"))
        else:
            ds.append(D("parallel", "out", var="n"))
    return ds


def _plane_stats(f: str, width: int, at: str, inner_rvars: list[str]) -> list:
    """Lane-partial ``rfactor`` of a per-group statistic ``f`` (a scalar per group, computed at
    ``out``'s loop ``at``): the contiguous reduction dim ``r$x`` read ``width`` values at a
    time into lane partials ``<f>_part``, the other reduction dims (``inner_rvars``, e.g. the
    group's channels) outside it, then the lanes summed."""
    part = f"{f}_part"
    return [
        D("compute_at", f, at="out", var=at),
        D("split", f, 1, var="r$x", outer="ko", inner="ki", factor=width, tail="guard_with_if"),
        D("rfactor", f, 1, pairs=[["ki", "v"]], intm=part),
        D("compute_at", part, at="out", var=at),
        D("vectorize", part, 0, var="v"),
        D("reorder", part, 1, vars=["v", "ko", *inner_rvars]),
        D("vectorize", part, 1, var="v"),
    ]


def _plane_normalization(built, dims, lanes: int, groups: list[str],
                         inner_rvars: list[str]) -> list:
    """group_norm and instance_norm: statistics (in float64) per group of planes, one parallel
    task per group, each statistic read with vectors of lane partials; the output vectorized
    along the contiguous dim S. The generic default computed the sums one float64 value at a
    time: group_norm at [32, 64, 56, 56] in 8 groups took 10-11 ms against torch's 4.3."""
    n_s = dims["S"]
    # float64 partials, two vectors of them
    width = 2 * max(1, lanes * _itemsize(built.out_dtypes[0]) // 8)
    if n_s < 2 * width:
        return generic(built, dims, lanes)
    inner, outer = groups
    ds = [D("vectorize", "out", var="s", factor=lanes),
          D("fuse", "out", inner=inner, outer=outer, fused="grp"),
          D("parallel", "out", var="grp")]
    ds += _plane_stats("mean", width, "grp", inner_rvars)
    ds.append(D("compute_at", "mu", at="out", var="grp"))
    ds += _plane_stats("dev", width, "grp", inner_rvars)
    ds.append(D("compute_at", "inv_std", at="out", var="grp"))
    return ds


template("group_norm")(lambda built, dims, lanes: _plane_normalization(
    built, dims, lanes, ["g", "n"], ["r$y"]))
template("instance_norm")(lambda built, dims, lanes: _plane_normalization(
    built, dims, lanes, ["c", "n"], []))
