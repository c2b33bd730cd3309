"""Default schedules for the nn family: convolutions, pooling and the LSTM cell.

Convolutions are register-blocked direct convolutions: each task computes a tile of output
channels x output rows x output columns (columns vectorized) in registers, with the reduction over
input channels and kernel taps inside the tile, so every loaded input vector feeds several output
channels and every broadcast weight feeds several vectors. The zero-padded input is materialized
once per image (or per channel for depthwise), so the inner loops carry no boundary tests.
"""

from __future__ import annotations

import math

import numpy as np

from ..defaults import D, output_directives, template
from ..directives import LIMITS, rename_funcs
from .linalg import LINEAR_KNOBS, _fit_matmul, _lanes_for, gemm_directives

#: Vector registers a tile may keep busy: its accumulators, its loaded input vectors (each feeds
#: every output channel of the tile) and one broadcast weight, leaving one spare, by vector width:
#: AVX2's 16 registers of 32 bytes, AVX-512's 32 of 64. Tiles over this budget spill and run about
#: half as fast. On AVX-512 the 16-register budget left half the register file idle: conv2d
#: 64 -> 64 channels, 3x3, at 28/56/112 pixels took 0.46-0.83 / 1.84-1.91 / 7.4-10.1 ms with it
#: and 0.33-0.47 / 1.33-1.57 / 4.7-5.9 with (31, 20) (torch 0.45-0.51 / 1.52-2.17 / 5.7-7.0).
REGISTERS = 15
MAX_ACC = 12
WIDE_REGISTERS = 31
WIDE_MAX_ACC = 20
#: conv2d unrolls the kernel columns inside its channel loop up to this kernel width, while the
#: unrolled body (vector lanes x register tile x kernel columns) stays within UNROLLED_BODY; with
#: AVX-512's budget, within the directive limit (16 lanes x 20 accumulators x 3 columns fit).
KW_UNROLL = 7
UNROLLED_BODY = 512
#: Bytes of padded input rows one conv2d task reads (half of a 512 KiB L2 cache).
SLAB_BYTES = 256 * 1024


def _vec(n: int, lanes: int) -> int:
    """The vector width used along an axis of extent ``n``: ``lanes``, or a smaller power of two."""
    v = 1
    while v * 2 <= min(n, lanes):
        v *= 2
    return v


def _tiles(n: int, f: int) -> int:
    """Elements computed along an axis of extent ``n`` split by ``f`` (the last tile shifts in)."""
    return -(-n // f) * f


def register_budget(built, lanes: int) -> tuple[int, int, int]:
    """(vector registers, accumulators, unrolled values) a register tile may use: AVX-512's
    budget when a vector of the op's dtype is 64 bytes, else AVX2's (and NEON's, whose 32
    registers of 16 bytes hold fewer values than AVX2's 16)."""
    if lanes * np.dtype(built.dtypes[0]).itemsize >= 64:
        return WIDE_REGISTERS, WIDE_MAX_ACC, LIMITS["unrolled_body"]
    return REGISTERS, MAX_ACC, UNROLLED_BODY


def _conv_tile(ow: int, oh: int, o: int, vec: int,
               budget: tuple[int, ...] = (REGISTERS, MAX_ACC),
               wide_first: bool = False) -> tuple[int, int, int]:
    """Chooses (vectors along columns, rows, output channels) per tile, by a small cost model.

    A tap step of a tile costs about max(FMAs / 2, loads / 1.5) cycles plus one of loop overhead
    (two FMA pipes; loads, which include the weight broadcasts, issue less freely), where the loads
    are the input vectors (one per column vector and row) and the weight broadcasts (one per output
    channel). Work outside the output (tiles overlapping at the edges) is counted. Ties go to
    fewer column vectors, or with ``wide_first`` to more (fewer weight broadcasts per step).
    """
    registers, max_acc = budget[:2]
    best, best_cost = (1, 1, 1), math.inf
    for nv in (range(8, 0, -1) if wide_first else range(1, 9)):
        if vec * nv > ow:
            if wide_first:
                continue
            break
        for rb in range(1, 5):
            if rb > oh:
                break
            for ob in range(1, max_acc + 1):
                acc = nv * rb * ob
                if ob > o or acc > max_acc or acc + nv * rb + 1 > registers:
                    break
                per_step = max(acc / 2, (ob + nv * rb) / 1.5) + 1
                steps = (_tiles(ow, vec * nv) // (vec * nv)) * (_tiles(oh, rb) // rb) * (
                    _tiles(o, ob) // ob)
                cost = steps * per_step
                if cost < best_cost - 1e-9:
                    best, best_cost = (nv, rb, ob), cost
    return best


def _parallel_blocks(name: str, row: str, chan: str, rows: int, chans: int,
                     max_rows: int | None = None) -> list:
    """Parallel tasks over (group of row blocks, channel block): about 32 tasks in all, and at
    most ``max_rows`` row blocks in a task when given.

    ``row`` must be the loop just inside ``chan``. Within a task the rows run in order, so one
    channel block's weights stay in the L1 cache while its rows stream by.
    """
    per_task = max(1, min(rows, rows * chans // 32, max_rows or rows))
    if per_task >= rows:
        return [D("parallel", name, var=chan)]
    if per_task == 1:
        return [D("fuse", name, inner=row, outer=chan, fused="task"),
                D("parallel", name, var="task")]
    # A guarded tail: the last group is shorter instead of overlapping its neighbour.
    return [D("split", name, var=row, outer=f"{row}p", inner=f"{row}q", factor=per_task,
              tail="guard_with_if"),
            D("reorder", name, vars=[f"{row}q", chan, f"{row}p"]),
            D("fuse", name, inner=chan, outer=f"{row}p", fused="task"),
            D("parallel", name, var="task")]


#: conv2d's padded input loops: column, channel, row, sample.
PAD_VARS = ("iw", "ic", "ih", "inb")


def _pad_directives(built, at_var: str | None, vec: int, parallel: bool,
                    pad_vars=PAD_VARS, rows_side_by_side: bool = False) -> list:
    """The zero-padded input ``x_pad`` computed at ``out``'s ``at_var`` loop (root when None),
    vectorized along its column loop and parallel over channels when asked. ``pad_vars`` names
    its loops (column, channel, then the other spatial loops and the sample);
    ``rows_side_by_side`` stores the rows of all channels next to each other, so a channel loop
    inside a tile walks memory in order instead of jumping between whole channel planes."""
    if "x_pad" not in built.funcs:
        return []
    col, chan = pad_vars[:2]
    out = [D("compute_at", "x_pad", at="out", var=at_var) if at_var else D("compute_root", "x_pad")]
    if vec > 1:
        out.append(D("vectorize", "x_pad", var=col, factor=vec))
    if parallel:
        out.append(D("parallel", "x_pad", var=chan))
    if rows_side_by_side:
        out.append(D("reorder_storage", "x_pad", vars=list(pad_vars)))
    return out


def _rows_in_cache(built, dims, rb: int) -> int:
    """Row blocks of ``rb`` output rows per task whose padded input rows (all channels) fit in
    SLAB_BYTES: the task's channel blocks then re-read them from L2 instead of L3 (at 112 x 112,
    64 channels: 2 row blocks instead of 19, about 1.07x)."""
    p = built.params
    row_bytes = dims["C"] * (dims["W"] + 2 * p["pad_w"]) * np.dtype(built.dtypes[0]).itemsize
    in_rows = SLAB_BYTES // max(1, row_bytes)
    taps = (dims["KH"] - 1) * p.get("dil_h", 1) + 1
    return max(1, (in_rows - taps) // (rb * p.get("stride_h", 1)))


def _tile_split(d: list, tile: list, var: str, factor: int, fits: bool = True) -> str:
    """Splits ``out``'s ``var`` into a register-tile loop ``<var>i`` of ``factor`` (appended to
    ``tile``) when the factor is more than one and ``fits``; returns the loop outside the tile."""
    if factor <= 1 or not fits:
        return var
    d.append(D("split", "out", var=var, outer=f"{var}o", inner=f"{var}i", factor=factor))
    tile.append(f"{var}i")
    return f"{var}o"


@template("conv2d")
def _conv2d_default(built, dims, lanes):
    """Output channels as vector lanes where the column tile would compute columns outside the
    output (see :func:`_channel_lane_tile`); otherwise columns as vector lanes."""
    tile = _channel_lane_tile(built, dims, lanes)
    if tile is not None:
        return _conv2d_channel_lanes(built, dims, lanes, *tile)
    return _conv2d(built, dims, lanes)


#: Output pixels (``N * OH * OW``) a call must have before conv2d copies its weights with the
#: output channels innermost for the channel-lane tile (see :func:`_channel_lane_tile`).
LANE_MIN_PIXELS = 1024
#: Share of extra work (columns or channels computed outside the output) the column tile must
#: waste, beyond the channel-lane tile's, before the channel-lane tile is taken.
LANE_MIN_GAIN = 0.05
#: The cost of storing one row segment of a channel-lane tile, in the cost model's cycles.
LANE_SEGMENT = 14


def _channel_lane_tile(built, dims, lanes) -> tuple[int, int] | None:
    """(columns, rows) of conv2d's channel-lane register tile, or None where the column tile is
    kept.

    A channel-lane tile holds ``lanes`` output channels of ``columns x rows`` pixels, one vector
    per pixel: a step of the reduction loads one weight vector and multiplies it by each pixel's
    input value, broadcast from memory inside the FMA, so no input vector has to be loaded, and
    no tile spans columns past the row's end. The column tile vectorizes along the row: a row
    that the vector width does not divide computes its last vector partly outside (56 columns in
    64, 1/7 more work). Measured at 64 -> 64 channels, 56 x 56, 3 x 3 (medians of single calls /
    steady state, the fair protocol, ms): one thread, the column tile 2.72 / 2.67, the channel-lane
    tile of 28 x 1 pixels 2.52 / 2.39, torch 2.39 / 2.34; two threads 1.53 / 1.48, 1.43 / 1.35,
    torch 1.50 / 1.36. At 28 x 28 and 112 x 112 pixels (two threads) the two tiles were level
    (0.41 / 0.42 against 0.45 / 0.42; 4.97 / 5.01 against 4.97 / 5.06).

    Taken for ungrouped convolutions whose output channels are a multiple of the lanes, with at
    least ``LANE_MIN_PIXELS`` output pixels, and where the column tile wastes ``LANE_MIN_GAIN``
    more. The copy of the weights touches each once, where the convolution reads each once per
    pixel: at 14 x 14 pixels and 256 channels it made a channel-lane tile (7 x 4) slower than the
    column tile (1.78 against 1.55 ms, the copy parallel and vectorized; 2.77 serial).
    """
    p = built.params
    O, OW, OH = dims["O"], dims["OW"], dims["OH"]
    if (p.get("groups", 1) != 1 or lanes < 4 or O % lanes or
            dims["N"] * OH * OW < LANE_MIN_PIXELS or built.op.name not in _LANE_WEIGHTS):
        return None
    budget = register_budget(built, lanes)
    max_acc = budget[0] - 3                    # the weight vector and two spare registers
    steps = dims.get("CG", dims["C"]) * dims["KH"] * dims["KW"]     # (groups are 1)
    best, best_cost = None, math.inf
    # A tile costs its reduction steps (one FMA per accumulator, each with its broadcast load,
    # and one weight load) and its output: lanes x rows stores of a row segment, which are apart
    # in memory (7 x 4 pixels spent 0.21 ms of 2.36 writing the output, 28 x 1 0.07 of 2.18:
    # LANE_SEGMENT in the steps' units). Wide first: ties go to fewer rows.
    for tw in range(min(OW, max_acc), 0, -1):
        for th in range(1, min(OH, max_acc // tw) + 1):
            acc = tw * th
            cost = -(-OW // tw) * -(-OH // th) * (steps * ((acc + 1) / 2 + 1) +
                                                  th * lanes * LANE_SEGMENT)
            if cost < best_cost - 1e-9:
                best, best_cost = (tw, th), cost
    tw, th = best
    lane_waste = -(-OW // tw) * tw * -(-OH // th) * th / (OW * OH)
    vec = _vec(OW, lanes)
    nv, rb, ob = _conv_tile(OW, OH, O, vec, budget)
    col_waste = (_tiles(OW, vec * nv) * _tiles(OH, rb) * _tiles(O, ob)) / (OW * OH * O)
    return best if col_waste > lane_waste + LANE_MIN_GAIN else None


#: The ops with conv2d's loops that take the channel-lane tile, and the order of their weights'
#: loops in the restaged copy: the output channel's first (the weight's dims innermost first,
#: ``_0`` the kernel column; conv2d's weight is [O, C, KH, KW], the stride-1 transposed
#: convolution's [C, O, KH, KW]), then the kernel column, row and the input channel.
_LANE_WEIGHTS = {"conv2d": ["_3", "_0", "_1", "_2"],
                 "conv_transpose2d": ["_2", "_0", "_1", "_3"]}


def _conv2d_channel_lanes(built, dims, lanes, tw: int, th: int, pad_vars=PAD_VARS) -> list:
    """conv2d with output channels as vector lanes: tiles of ``lanes`` channels x ``th`` rows x
    ``tw`` columns, one accumulator vector per pixel (channels innermost in its storage), the
    reduction (kernel row, kernel column, then input channel innermost) around the tile. The
    weights are copied once per call with the output channel innermost (``w_in``), so a step loads
    one contiguous weight vector; the input values are read as broadcasts. Tasks are blocks of
    rows of one channel block. ``pad_vars`` names the padded input's loops (column, channel,
    row, sample)."""
    OH, O = dims["OH"], dims["O"]
    wv = _LANE_WEIGHTS[built.op.name]
    d = [D("split", "out", var="o", outer="oo", inner="oi", factor=lanes),
         D("split", "out", var="oh", outer="oho", inner="ohi", factor=th),
         D("split", "out", var="ow", outer="owo", inner="owi", factor=tw),
         D("reorder", "out", vars=["owi", "ohi", "oi", "owo", "oho", "oo", "n"])]
    d += _parallel_blocks("out", "oho", "oo", -(-OH // th), O // lanes,
                          _rows_in_cache(built, dims, th))
    d += [D("compute_at", "acc", at="out", var="owo"),
          D("reorder_storage", "acc", vars=["o", "ow", "oh", "n"]),
          D("reorder", "acc", vars=["o", "ow", "oh", "n"]),
          D("vectorize", "acc", var="o", factor=lanes),
          D("unroll", "acc", var="ow", factor=tw),
          D("unroll", "acc", var="oh", factor=th),
          D("reorder", "acc", 1, vars=["o", "ow", "oh", "r$z", "r$x", "r$y", "n"]),
          D("vectorize", "acc", 1, var="o", factor=lanes),
          D("unroll", "acc", 1, var="ow", factor=tw),
          D("unroll", "acc", 1, var="oh", factor=th),
          D("wrap", "w", consumer="acc", **{"as": "w_in"}),
          D("compute_root", "w_in"),
          D("reorder_storage", "w_in", vars=wv),
          D("reorder", "w_in", vars=wv),
          D("vectorize", "w_in", var=wv[0], factor=lanes),
          D("parallel", "w_in", var=wv[-1])]
    d += _pad_directives(built, "n", _vec(dims["W"] + 2 * built.params["pad_w"], lanes), True,
                         pad_vars, rows_side_by_side=True)
    return d


def _conv2d(built, dims, lanes, pad_vars=PAD_VARS):
    """conv2d's column tile: output columns as vector lanes, a register tile of vectors x rows x
    output channels. ``pad_vars`` names the padded input's loops (column, channel, row,
    sample)."""
    OW, OH, O = dims["OW"], dims["OH"], dims["O"]
    vec = _vec(OW, lanes)
    budget = register_budget(built, lanes)
    nv, rb, ob = _conv_tile(OW, OH, O, vec, budget)
    d = []
    tile = []
    ow_outer = _tile_split(d, tile, "ow", vec * nv)
    o_outer = _tile_split(d, tile, "o", ob)
    oh_outer = _tile_split(d, tile, "oh", rb)
    d.append(D("reorder", "out", vars=[*tile, ow_outer, oh_outer, o_outer, "n"]))
    if vec > 1:
        d.append(D("vectorize", "out", var="owi", factor=vec))
    d += _parallel_blocks("out", oh_outer, o_outer, -(-OH // rb), -(-O // ob),
                          _rows_in_cache(built, dims, rb))
    # The accumulator tile lives in registers: columns vectorized, everything else unrolled,
    # the reduction (kernel row outermost, then input channel and kernel column) around it.
    d.append(D("compute_at", "acc", at="out", var=ow_outer))
    if vec > 1:
        d.append(D("vectorize", "acc", var="ow", factor=vec))
    if ob > 1:
        d.append(D("unroll", "acc", var="o", factor=ob))
    if rb > 1:
        d.append(D("unroll", "acc", var="oh", factor=rb))
    inner = []
    if vec > 1:
        d.append(D("split", "acc", 1, var="ow", outer="owv_o", inner="owv", factor=vec))
        inner = ["owv", "owv_o"]
    # The kernel columns unrolled inside the channel loop: their loads read the same input rows
    # one column apart (the same cache lines), so a channel step touches a few lines instead of
    # one line per kernel column spread over the whole channel plane (1.15x at 112x112).
    kw = dims["KW"]
    taps = 1 < kw <= KW_UNROLL and vec * nv * rb * ob * kw <= budget[2]
    if taps:
        d.append(D("split", "acc", 1, var="r$x", outer="rxo", inner="rxi", factor=kw,
                   tail="guard_with_if"))
    red = ["rxi", "r$z", "rxo", "r$y"] if taps else ["r$z", "r$x", "r$y"]
    d.append(D("reorder", "acc", 1, vars=[*inner, *([] if vec > 1 else ["ow"]), "oh", "o",
                                         *red]))
    if taps:
        d.append(D("unroll", "acc", 1, var="rxi"))
    if vec > 1:
        d.append(D("vectorize", "acc", 1, var="owv"))
        if nv > 1:
            d.append(D("unroll", "acc", 1, var="owv_o", factor=nv))
    elif nv > 1:
        d.append(D("unroll", "acc", 1, var="ow", factor=nv))
    if ob > 1:
        d.append(D("unroll", "acc", 1, var="o", factor=ob))
    if rb > 1:
        d.append(D("unroll", "acc", 1, var="oh", factor=rb))
    return d + _pad_directives(built, "n", _vec(dims["W"] + 2 * built.params["pad_w"], lanes),
                               True, pad_vars, rows_side_by_side=True)


@template("depthwise_conv2d")
def _depthwise(built, dims, lanes):
    OW = dims["OW"]
    vec = _vec(OW, lanes)
    # A whole row of vectors per tile when it fits; fewer columns for wide images.
    best, best_cost = 1, math.inf
    for nv in range(1, 9):
        if vec * nv > OW:
            break
        cost = (_tiles(OW, vec * nv) // (vec * nv)) * (nv + 2)
        if cost < best_cost:
            best, best_cost = nv, cost
    nv = best
    d = []
    ow_outer = "ow"
    if vec * nv > 1:
        d.append(D("split", "out", var="ow", outer="owo", inner="owi", factor=vec * nv))
        ow_outer = "owo"
    d.append(D("reorder", "out", vars=[*(["owi"] if vec * nv > 1 else []), ow_outer, "oh", "c",
                                       "n"]))
    if vec > 1:
        d.append(D("vectorize", "out", var="owi", factor=vec))
    if dims["C"] >= 4 or dims["N"] == 1:
        d.append(D("parallel", "out", var="c"))
    else:
        d += [D("fuse", "out", inner="c", outer="n", fused="cn"), D("parallel", "out", var="cn")]
    d.append(D("compute_at", "acc", at="out", var=ow_outer))
    if vec > 1:
        d += [D("vectorize", "acc", var="ow", factor=vec),
              D("split", "acc", 1, var="ow", outer="owv_o", inner="owv", factor=vec),
              D("reorder", "acc", 1, vars=["owv", "owv_o", "r$x", "r$y"]),
              D("vectorize", "acc", 1, var="owv")]
        if nv > 1:
            d.append(D("unroll", "acc", 1, var="owv_o", factor=nv))
    at = "c" if dims["C"] >= 4 or dims["N"] == 1 else "cn"
    d += _pad_directives(built, at, _vec(dims["W"] + 2 * built.params["pad_w"], lanes), False)
    return d


def _window_reduction(built, dims, lanes, chan: str, unroll_taps: tuple[int, int] | None):
    """Pooling-style schedule: rows of vectors per task, the window reduction inside each vector
    tile, the padded input made per channel plane (it stays in cache while its rows are read)."""
    OW = dims["OW"]
    vec = _vec(OW, lanes)
    best, best_cost = 1, math.inf
    for nv in range(1, 5):
        if vec * nv > OW:
            break
        cost = (_tiles(OW, vec * nv) // (vec * nv)) * (nv + 2)
        if cost < best_cost:
            best, best_cost = nv, cost
    nv = best
    d = []
    ow_outer = "ow"
    if vec * nv > 1:
        d.append(D("split", "out", var="ow", outer="owo", inner="owi", factor=vec * nv))
        ow_outer = "owo"
        d.append(D("vectorize", "out", var="owi", factor=vec))
    if dims["C"] >= 8 or dims["N"] == 1:
        d.append(D("parallel", "out", var=chan))
        at = chan
    else:
        d += [D("fuse", "out", inner=chan, outer="n", fused="cn"), D("parallel", "out", var="cn")]
        at = "cn"
    d.append(D("compute_at", "acc", at="out", var=ow_outer))
    if vec > 1:
        d += [D("vectorize", "acc", var="ow", factor=vec),
              D("split", "acc", 1, var="ow", outer="owv_o", inner="owv", factor=vec),
              D("reorder", "acc", 1, vars=["owv", "owv_o", "r$x", "r$y"]),
              D("vectorize", "acc", 1, var="owv")]
        if nv > 1:
            d.append(D("unroll", "acc", 1, var="owv_o", factor=nv))
    if unroll_taps is not None:
        kw, kh = unroll_taps
        if kw * kh * nv <= 64:
            d.append(D("unroll", "acc", 1, var="r$x", factor=kw))
            d.append(D("unroll", "acc", 1, var="r$y", factor=kh))
    d += _pad_directives(built, at, _vec(dims["W"] + 2 * built.params["pad_w"], lanes), False)
    return d


@template("max_pool2d")
def _max_pool(built, dims, lanes):
    p = built.params
    return _window_reduction(built, dims, lanes, "c", (p["kernel_w"], p["kernel_h"]))


@template("avg_pool2d")
def _avg_pool(built, dims, lanes):
    p = built.params
    return _window_reduction(built, dims, lanes, "c", (p["kernel_w"], p["kernel_h"]))


@template("lstm_cell", knobs=LINEAR_KNOBS)
def _lstm_cell(built, dims, lanes, **knobs):
    """The two gate products as one blocked matrix product, linear's (the algorithm concatenates
    [x, h] and reads [w_ih, w_hh] transposed as ``wt``): ``xh`` copied once, the gates computed
    into their own buffer by tiles, then the elementwise cell update, vectorized along the hidden
    units. (Computing each product as dot products along k with partial sums in vectors, which
    this template did before, took 7.0 ms for a [64, 512] cell of 512 hidden units on AVX-512,
    this 1.7; torch.nn.LSTMCell 1.8-2.5.)"""
    lanes = _lanes_for(built, lanes)
    B, G, K = dims["B"], dims["G"], dims["IN"] + dims["HID"]
    gemm = gemm_directives(dims, lanes, n="j", m="b", k="r$x", N=G, M=B, K=K, b_src="wt",
                           b_is_func=True, b_k="k",
                           **_fit_matmul({"M": B, "K": K, "N": G}, knobs, lanes))
    d = [D("compute_root", "xh"), D("compute_root", "gates")]
    if K >= lanes:
        d.append(D("vectorize", "xh", var="k", factor=lanes, tail="guard_with_if"))
    d += rename_funcs(gemm, {"out": "gates"})
    for out in ("c_out", "h_out"):
        d += output_directives(out, ("hid", "b"), dims, lanes)
    return d
