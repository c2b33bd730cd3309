"""Default schedules for conv1d, conv3d and the transposed convolutions (pypto/ops/conv.py).

The direct convolutions follow conv2d's template (templates/nn.py): a register tile of output
channels x output rows x vectors of output columns, the reduction over input channels and kernel
taps inside it, the zero-padded input made once per image with the channels of a row side by
side. The transposed convolutions are computed per output phase (``acc[q, p, ...]`` holds output
``q * stride + p``): a tile of vectors along ``q`` times a few output channels accumulates over
input channels and taps in registers, per task of (channel block, image); the output then
interleaves the phases.
"""

from __future__ import annotations

import math

import numpy as np

from ..defaults import D, output_directives, template
from ..directives import rename_funcs
from .linalg import _fit_matmul, _lanes_for, gemm_directives
from .nn import (KW_UNROLL, MAX_ACC, REGISTERS, SLAB_BYTES, _channel_lane_tile, _conv2d,
                 _conv2d_channel_lanes, _conv_tile, _pad_directives, _parallel_blocks,
                 _tile_split, _tiles, _vec, register_budget)

#: The padded input's loops in the transposed convolutions (column, channel, row, sample).
_PAD_VARS_1 = ("i0", "ic", "i1", "inb")


def _position_chunks(d: list, tile: list, l_outer: str, o_outer: str, blocks: int,
                     chunk_values: int, built, n: int) -> tuple[str, str]:
    """Parallel tasks of (a chunk of position tiles, sample) for the 1-D convolutions: as many
    of the ``blocks`` tiles per chunk as keep its input (``chunk_values`` values per tile, every
    channel) within SLAB_BYTES, halved while there are fewer than 8 tasks. Appends ``out``'s
    directives; returns (the position-tile loop, the task loop)."""
    item = np.dtype(built.dtypes[0]).itemsize
    per_task = max(1, min(blocks, SLAB_BYTES // max(1, chunk_values * item)))
    while per_task > 1 and n * -(-blocks // per_task) < 8:
        per_task = -(-per_task // 2)
    if per_task < blocks:
        d += [D("split", "out", var=l_outer, outer="olc", inner="olt", factor=per_task,
                tail="guard_with_if"),
              D("reorder", "out", vars=[*tile, "olt", o_outer, "olc", "n"]),
              D("fuse", "out", inner="olc", outer="n", fused="task")]
        l_outer, task = "olt", "task"
    else:
        d.append(D("reorder", "out", vars=[*tile, l_outer, o_outer, "n"]))
        task = "n"
    d.append(D("parallel", "out", var=task))
    return l_outer, task


@template("conv1d")
def _conv1d(built, dims, lanes):
    """A register tile of output channels x vectors of output positions (AVX-512's budget where
    vectors are 64 bytes), the kernel taps unrolled inside the input-channel loop (their loads
    read the same lines), per task of (a chunk of positions, sample) with the zero-padded input
    of that chunk made inside the task: every channel's row of the chunk is then a few KiB
    apart instead of a whole padded row (4 KiB at 1024 positions, which mapped a channel step's
    lines onto the same few L1 sets). At 8 x 128 -> 128 channels, 1024 positions, 3 taps: the
    earlier schedule (2 x 6 tile, input padded once per call, channel loop innermost) took
    6.6-8.4 ms, this 3.7-4.4 (AOT kernels side by side); as users call it, 4.1-4.4 against
    torch.nn.functional.conv1d's 4.3-5.0."""
    OL, O, N, C = dims["OL"], dims["O"], dims["N"], dims["C"]
    p = built.params
    vec = _vec(OL, lanes)
    budget = register_budget(built, lanes)
    nv, _, ob = _conv_tile(OL, 1, O, vec, budget, wide_first=True)
    K = dims["K"]
    taps = 1 < K <= KW_UNROLL and vec * nv * ob * K <= budget[2]
    d, tile = [], []
    l_outer = _tile_split(d, tile, "ol", vec * nv)
    o_outer = _tile_split(d, tile, "o", ob)
    l_outer, task = _position_chunks(d, tile, l_outer, o_outer, -(-OL // (vec * nv)),
                                     C * vec * nv * p["stride"], built, N)
    if vec > 1:
        d.append(D("vectorize", "out", var="oli", factor=vec))
    d.append(D("compute_at", "acc", at="out", var=l_outer))
    if vec > 1:
        d += [D("vectorize", "acc", var="ol", factor=vec),
              D("split", "acc", 1, var="ol", outer="olv_o", inner="olv", factor=vec)]
        inner = ["olv", "olv_o"]
    else:
        inner = ["ol"]
    if ob > 1:
        d.append(D("unroll", "acc", var="o", factor=ob))
    # r$x is the tap, r$y the input channel.
    if taps:
        d.append(D("split", "acc", 1, var="r$x", outer="rxo", inner="rxi", factor=K,
                   tail="guard_with_if"))
        red = ["rxi", "r$y", "rxo"]
    else:
        red = ["r$y", "r$x"]
    d.append(D("reorder", "acc", 1, vars=[*inner, "o", *red]))
    if taps:
        d.append(D("unroll", "acc", 1, var="rxi"))
    if vec > 1:
        d.append(D("vectorize", "acc", 1, var="olv"))
        if nv > 1:
            d.append(D("unroll", "acc", 1, var="olv_o", factor=nv))
    elif nv > 1:
        d.append(D("unroll", "acc", 1, var="ol", factor=nv))
    if ob > 1:
        d.append(D("unroll", "acc", 1, var="o", factor=ob))
    if "x_pad" in built.funcs:
        d.append(D("compute_at", "x_pad", at="out", var=task))
        if _vec(dims["L"] + 2 * p["pad"], lanes) > 1:
            d.append(D("vectorize", "x_pad", var="i0", factor=_vec(dims["L"] + 2 * p["pad"],
                                                                   lanes)))
    return d


@template("conv3d")
def _conv3d(built, dims, lanes):
    OW, OH, OD, O = dims["OW"], dims["OH"], dims["OD"], dims["O"]
    vec = _vec(OW, lanes)
    nv, rb, ob = _conv_tile(OW, OH, O, vec)
    d, tile = [], []
    w_outer = _tile_split(d, tile, "ow", vec * nv)
    o_outer = _tile_split(d, tile, "o", ob)
    h_outer = _tile_split(d, tile, "oh", rb)
    d.append(D("reorder", "out", vars=[*tile, w_outer, h_outer, "od", o_outer, "n"]))
    # Rows of every depth plane form one loop, so tasks split depth and rows alike.
    d.append(D("fuse", "out", inner=h_outer, outer="od", fused="dh"))
    if vec > 1:
        d.append(D("vectorize", "out", var="owi", factor=vec))
    d += _parallel_blocks("out", "dh", o_outer, OD * -(-OH // rb), -(-O // ob))
    d.append(D("compute_at", "acc", at="out", var=w_outer))
    if vec > 1:
        d.append(D("vectorize", "acc", var="ow", factor=vec))
    if ob > 1:
        d.append(D("unroll", "acc", var="o", factor=ob))
    if rb > 1:
        d.append(D("unroll", "acc", var="oh", factor=rb))
    inner = ["owv", "owv_o"] if vec > 1 else ["ow"]
    if vec > 1:
        d.append(D("split", "acc", 1, var="ow", outer="owv_o", inner="owv", factor=vec))
    # Taps: r$x, r$y, r$z are the kernel columns, rows and depth; r$w the input channel.
    d.append(D("reorder", "acc", 1, vars=[*inner, "oh", "o", "r$w", "r$x", "r$y", "r$z"]))
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
                               True, ("i0", "ic", "i1", "i2", "inb"), rows_side_by_side=True)


def _transposed(built, dims, lanes, spatial: list[tuple[str, str]]):
    """``spatial``: (output dim, stride parameter) per spatial axis, innermost first."""
    acc = built.funcs["acc"]
    a0 = acc.args[0]
    (out0, s0), others = spatial[0], [o.lower() for o, _ in spatial[1:]]
    stride = built.params[s0]
    n0 = -(-dims[out0] // stride) if a0.startswith("q") else dims[out0]
    vec = _vec(n0, lanes)
    nv, _, ob = _conv_tile(n0, 1, dims["O"], vec)
    x = out0.lower()
    ovec = _vec(dims[out0], lanes)
    d = []
    if ob > 1:
        d.append(D("split", "out", var="o", outer="oo", inner="oi", factor=ob))
    if ovec > 1:
        d.append(D("split", "out", var=x, outer=f"{x}o", inner=f"{x}i", factor=ovec))
    d.append(D("reorder", "out", vars=[*([f"{x}i"] if ovec > 1 else []),
                                       *(["oi"] if ob > 1 else []),
                                       f"{x}o" if ovec > 1 else x, *others,
                                       "oo" if ob > 1 else "o", "n"]))
    if ovec > 1:
        d.append(D("vectorize", "out", var=f"{x}i"))
    d += [D("fuse", "out", inner="oo" if ob > 1 else "o", outer="n", fused="task"),
          D("parallel", "out", var="task"),
          D("compute_at", "acc", at="out", var="task")]
    if vec > 1:
        d.append(D("vectorize", "acc", var=a0, factor=vec))
    rest = [a for a in acc.args[1:] if a not in ("o", "n")]
    taps = list(acc.updates[0][:-1])
    chan = acc.updates[0][-1]
    inner = []
    if vec > 1:
        d += [D("split", "acc", 1, var=a0, outer="ao", inner="ai", factor=vec * nv),
              D("split", "acc", 1, var="ai", outer="aio", inner="av", factor=vec)]
        inner = ["av", "aio"]
        outer = ["ao"]
    else:
        outer = [a0]
    if ob > 1:
        d.append(D("split", "acc", 1, var="o", outer="oo2", inner="ou", factor=ob))
        inner.append("ou")
        outer_o = "oo2"
    else:
        outer_o = "o"
    # The input channel innermost of the reduction; the taps a phase skips (the predicate)
    # are decided outside it.
    d.append(D("reorder", "acc", 1, vars=[*inner, chan, *taps, *outer, *rest, outer_o, "n"]))
    if vec > 1:
        d.append(D("vectorize", "acc", 1, var="av"))
        if nv > 1:
            d.append(D("unroll", "acc", 1, var="aio"))
    if ob > 1:
        d.append(D("unroll", "acc", 1, var="ou"))
    storage = ["i0", "ic", *[f"i{j}" for j in range(1, len(spatial))], "inb"]
    w_in = dims["L"] if "L" in dims else dims["W"]
    return d + _pad_directives(built, None, _vec(w_in, lanes), True, storage,
                               rows_side_by_side=len(spatial) > 1)


@template("conv_transpose1d")
def _conv_transpose1d(built, dims, lanes):
    p = built.params
    if p["stride"] > 1 and p["dil"] == 1:
        return _phases_1d(built, dims, lanes)
    return _transposed(built, dims, lanes, [("OL", "stride")])


def _phases_1d(built, dims, lanes) -> list:
    """conv_transpose1d with a stride whose phases loop over their own taps only:
    ``acc[q, p, o, n]`` is, for each phase p, a dense convolution of the input. As conv1d's
    schedule: a register tile of vectors along q times output channels (AVX-512's budget where
    vectors are 64 bytes), every phase of the tile computed in turn (the phases unrolled outside
    the reduction, so each keeps its sums in registers), the phase's taps unrolled inside the
    input-channel loop; tasks of (a chunk of positions, sample) with that chunk's input made in
    the task. ``out`` interleaves the phases as it loads them. At 8 x 128 -> 64 channels, 512
    positions, 4 taps, stride 2: the schedule over every tap with a predicate per tap took
    5.3-5.9 ms as users call it (torch 2.3-2.4); this one 2.0-2.3 (torch 2.4 in the same
    run)."""
    p = built.params
    s = p["stride"]
    q, ph = built.funcs["acc"].args[:2]
    OL, O, N, C = dims["OL"], dims["O"], dims["N"], dims["C"]
    n_q = -(-OL // s)
    vec = _vec(n_q, lanes)
    budget = register_budget(built, lanes)
    nv, _, ob = _conv_tile(n_q, 1, O, vec, budget, wide_first=True)
    k_phase = -(-dims["K"] // s)
    taps = 1 < k_phase <= KW_UNROLL and vec * nv * ob * k_phase * s <= budget[2]
    d = [D("bound", "out", var="ol", min=0, extent=OL)]
    tile = []
    l_outer = _tile_split(d, tile, "ol", s * vec * nv, OL >= s * vec * nv)
    o_outer = _tile_split(d, tile, "o", ob)
    # One position tile when the output is narrower than a tile: no chunks.
    blocks = -(-OL // (s * vec * nv)) if l_outer != "ol" else 1
    l_outer, task = _position_chunks(d, tile, l_outer, o_outer, blocks, C * vec * nv, built, N)
    ovec = _vec(min(OL, s * vec * nv), lanes)       # within a tile of the output
    if ovec > 1 and l_outer != "ol":
        d.append(D("vectorize", "out", var="oli", factor=ovec))
    d.append(D("compute_at", "acc", at="out", var=l_outer))
    if vec > 1:
        d.append(D("vectorize", "acc", var=q, factor=vec))
    d.append(D("unroll", "acc", var=ph))
    if ob > 1:
        d.append(D("unroll", "acc", var="o", factor=ob))
    inner = [q]
    if vec > 1:
        d.append(D("split", "acc", 1, var=q, outer="qv_o", inner="qv", factor=vec))
        inner = ["qv", "qv_o"]
    # r$x is the phase's tap, r$y the input channel.
    if taps:
        d.append(D("split", "acc", 1, var="r$x", outer="rxo", inner="rxi", factor=k_phase,
                   tail="guard_with_if"))
        red = ["rxi", "r$y", "rxo"]
    else:
        red = ["r$y", "r$x"]
    d.append(D("reorder", "acc", 1, vars=[*inner, "o", *red, ph, "n"]))
    if taps:
        d.append(D("unroll", "acc", 1, var="rxi"))
    if vec > 1:
        d.append(D("vectorize", "acc", 1, var="qv"))
        if nv > 1:
            d.append(D("unroll", "acc", 1, var="qv_o", factor=nv))
    elif nv > 1:
        d.append(D("unroll", "acc", 1, var=q, factor=nv))
    if ob > 1:
        d.append(D("unroll", "acc", 1, var="o", factor=ob))
    d.append(D("unroll", "acc", 1, var=ph))
    if "x_pad" in built.funcs:
        d.append(D("compute_at", "x_pad", at="out", var=task))
        if _vec(dims["L"], lanes) > 1:
            d.append(D("vectorize", "x_pad", var="i0", factor=_vec(dims["L"], lanes)))
    return d


def _stride1_as_conv2d(built, dims, lanes) -> list:
    """conv_transpose2d with stride 1 along both axes: one output phase, so its ``acc`` and
    ``out`` have conv2d's loops and reduction (``r$x``, ``r$y`` taps, ``r$z`` input channel),
    read from the padded input at ``ow + pad - tap dil`` instead of ``ow - pad + tap dil``.
    conv2d's templates apply as they are, given its ``x_pad`` loop names. At the
    ResNet layer (64 channels, 56 x 56, 3 x 3, pad 1) the per-plane phase schedule took about
    10.5 ms on one thread, this one 3.5 (conv2d 3.4; under load)."""
    tile = _channel_lane_tile(built, dims, lanes)
    if tile is not None:
        return _conv2d_channel_lanes(built, dims, lanes, *tile, pad_vars=_PAD_VARS_1)
    return _conv2d(built, dims, lanes, pad_vars=_PAD_VARS_1)


def _phase_tile(ow: int, oh: int, o: int, vec: int) -> tuple[int, int, int]:
    """(vectors along columns, rows, output channels) of a phase's register tile: conv2d's cost
    model (:func:`.nn._conv_tile`), its ties going to fewer output channels, then to more column
    vectors (each output channel's weights are a broadcast from a line of their own per input
    channel). At 64 -> 32 channels, 28 x 28 -> 56 x 56, 4 x 4, stride 2 (one thread, under
    load) 2 x 2 x 2 ran 1.4-1.5 ms, conv2d's pick 1 x 2 x 4 2.0-2.2 (the same modelled cost);
    at three other generator-like shapes 10-25% less time too."""
    best, best_cost = (1, 1, 1), math.inf
    for ob in range(1, MAX_ACC + 1):
        if ob > o:
            break
        for nv in range(8, 0, -1):
            if vec * nv > ow:
                continue
            for rb in range(1, 5):
                acc = nv * rb * ob
                if rb > oh or acc > MAX_ACC or acc + nv * rb + 1 > REGISTERS:
                    break
                per_step = max(acc / 2, (ob + nv * rb) / 1.5) + 1
                steps = (_tiles(ow, vec * nv) // (vec * nv)) * (_tiles(oh, rb) // rb) * (
                    _tiles(o, ob) // ob)
                if steps * per_step < best_cost - 1e-9:
                    best, best_cost = (nv, rb, ob), steps * per_step
    return best


def _phases_as_conv2d(built, dims, lanes) -> list:
    """conv_transpose2d with a stride whose phases loop over their own taps only (the RDom
    runs over every s-th tap, from the phase's first): ``acc[qw, pw, qh, ph, o, n]`` is, for
    each phase (pw, ph), a dense convolution of the input. ``acc`` is computed per register tile
    of ``out`` (s x vectors of columns, s x rows, output channels; every phase of the tile), its
    update as conv2d's per phase: the phases unrolled outside the reduction (input channel,
    then taps), vectors along qw, rows and output channels unrolled inside it, so each phase's
    sums stay in registers. ``out`` interleaves the phases as it loads them. (The per-plane
    phase schedule kept its sums in memory.)"""
    axes = {}
    for a, out_dim, stride in (("w", "OW", "stride_w"), ("h", "OH", "stride_h")):
        s = built.params[stride]
        axes[a] = (s, f"q{a}" if s > 1 else f"o{a}", f"p{a}" if s > 1 else None,
                   -(-dims[out_dim] // s))
    sw, aw, apw, n_w = axes["w"]
    sh, ah, aph, n_h = axes["h"]
    vec = _vec(n_w, lanes)
    nv, rb, ob = _phase_tile(n_w, n_h, dims["O"], vec)
    # The output's origin made known (0): a tile of s x vec columns from an even column then
    # needs vec sums per phase (with the origin a run-time value, one more).
    d = [D("bound", "out", var="ow", min=0, extent=dims["OW"]),
         D("bound", "out", var="oh", min=0, extent=dims["OH"])]
    tile = []
    # The output's vectors within a tile: at 6 x 6 inputs, stride 3, 2 x 2 taps a 12-column
    # tile vectorized by 16 (from the 17 output columns) read column -4.
    ovec = _vec(min(dims["OW"], sw * vec * nv), lanes)
    w_outer = _tile_split(d, tile, "ow", sw * vec * nv, dims["OW"] >= sw * vec * nv)
    h_outer = _tile_split(d, tile, "oh", sh * rb, dims["OH"] >= sh * rb)
    o_outer = _tile_split(d, tile, "o", ob)
    d.append(D("reorder", "out", vars=[*tile, w_outer, h_outer, o_outer, "n"]))
    if ovec > 1 and w_outer == "owo":
        d.append(D("vectorize", "out", var="owi", factor=ovec))
    d += _parallel_blocks("out", h_outer, o_outer, -(-dims["OH"] // (sh * rb)),
                          -(-dims["O"] // ob))
    d.append(D("compute_at", "acc", at="out", var=w_outer))
    if vec > 1:
        d.append(D("vectorize", "acc", var=aw, factor=vec))
    phases = [v for v in (apw, aph) if v]
    for v in phases:
        d.append(D("unroll", "acc", var=v))
    if ob > 1:
        d.append(D("unroll", "acc", var="o", factor=ob))
    if rb > 1:
        d.append(D("unroll", "acc", var=ah, factor=rb))
    inner = [aw]
    if vec > 1:
        d.append(D("split", "acc", 1, var=aw, outer="awv_o", inner="awv", factor=vec))
        inner = ["awv", "awv_o"]
    d.append(D("reorder", "acc", 1, vars=[*inner, ah, "o", "r$z", "r$x", "r$y", *phases,
                                          "n"]))
    if vec > 1:
        d.append(D("vectorize", "acc", 1, var="awv"))
        if nv > 1:
            d.append(D("unroll", "acc", 1, var="awv_o", factor=nv))
    elif nv > 1:
        d.append(D("unroll", "acc", 1, var=aw, factor=nv))
    if ob > 1:
        d.append(D("unroll", "acc", 1, var="o", factor=ob))
    if rb > 1:
        d.append(D("unroll", "acc", 1, var=ah, factor=rb))
    for v in phases:
        d.append(D("unroll", "acc", 1, var=v))
    return d + _pad_directives(built, None, _vec(dims["W"], lanes), True, _PAD_VARS_1,
                               rows_side_by_side=True)


@template("conv_transpose2d")
def _conv_transpose2d(built, dims, lanes):
    p = built.params
    if p["stride_h"] == 1 and p["stride_w"] == 1:
        return _stride1_as_conv2d(built, dims, lanes)
    if all(p[f"dil_{a}"] == 1 for a in "hw" if p[f"stride_{a}"] > 1):
        # the algorithm loops over each phase's taps (ops/conv.py, _phase_taps)
        return _phases_as_conv2d(built, dims, lanes)
    return _transposed(built, dims, lanes, [("OW", "stride_w"), ("OH", "stride_h")])


def _pool(built, dims, lanes, spatial: list[str]):
    """Pooling: tasks of (output rows..., channel, sample) planes, vectors of output columns with
    the window reduced inside each vector tile (unrolled when small); the padded input, when
    there is one, is made per task so its select is not evaluated once per tap."""
    x = spatial[0].lower()
    n0 = dims[spatial[0]]
    vec = _vec(n0, lanes)
    nv = max(1, min(4, n0 // max(vec, 1)))
    d = []
    outer = x
    if vec * nv > 1:
        d.append(D("split", "out", var=x, outer=f"{x}o", inner=f"{x}i", factor=vec * nv))
        outer = f"{x}o"
        if vec > 1:
            d.append(D("vectorize", "out", var=f"{x}i", factor=vec))
    # One task per output plane (the outermost spatial axis with the channels and samples).
    rest = [s.lower() for s in spatial[1:]]
    task = "c"
    if rest:
        d.append(D("fuse", "out", inner=rest[-1], outer="c", fused="sc"))
        task = "sc"
    d += [D("fuse", "out", inner=task, outer="n", fused="task"),
          D("parallel", "out", var="task"),
          D("compute_at", "acc", at="out", var=outer)]
    if vec > 1:
        d += [D("vectorize", "acc", var=x, factor=vec),
              D("split", "acc", 1, var=x, outer="xv_o", inner="xv", factor=vec),
              D("reorder", "acc", 1, vars=["xv", "xv_o", *built.funcs["acc"].updates[0]]),
              D("vectorize", "acc", 1, var="xv")]
        if nv > 1:
            d.append(D("unroll", "acc", 1, var="xv_o", factor=nv))
    taps = 1
    for k in [built.params[p] for p in built.params if p.startswith("kernel")]:
        taps *= k
    if taps * nv <= 32:
        for j, rv in enumerate(built.funcs["acc"].updates[0]):
            d.append(D("unroll", "acc", 1, var=rv))
    if "x_pad" in built.funcs:
        d.append(D("compute_at", "x_pad", at="out", var="task"))
        w_in = dims.get("W", dims.get("L"))
        if _vec(w_in, lanes) > 1:
            d.append(D("vectorize", "x_pad", var="i0", factor=_vec(w_in, lanes)))
    return d


for _name, _spatial in (("max_pool1d", ["OL"]), ("avg_pool1d", ["OL"]),
                        ("max_pool3d", ["OW", "OH", "OD"]), ("avg_pool3d", ["OW", "OH", "OD"])):
    template(_name)(lambda built, dims, lanes, _s=_spatial: _pool(built, dims, lanes, _s))


def _cell(built, dims, lanes):
    """gru_cell and rnn_cell: each gate product (per gate t) as linear's blocked matrix product
    (the weight staged transposed per tile, sums in registers or a tile buffer, the gates as the
    batch of the product), into its own buffer; then the elementwise step, vectorized along the
    hidden units. (Dot products along k with vectors of partial sums, this template's earlier
    form, took 67 ms for a [64, 512] gru_cell on AVX-512 and 22 for an rnn_cell; this one 1.3 and
    0.55, torch.nn.GRUCell and RNNCell 1.5 and 0.53.)"""
    lanes = _lanes_for(built, lanes)
    d = []
    for f, k in (("gates_ih", dims["IN"]), ("gates_hh", dims["HID"])):
        gemm = gemm_directives(dims, lanes, n="j", m="b", k=f"{f}_r$x", N=dims["HO"],
                               M=dims["B"], K=k, batch="t" if dims["T"] > 1 else None,
                               B=dims["T"], b_src=f"{f}_wt", b_is_func=True, b_k="k",
                               **_fit_matmul({"M": dims["B"], "K": k, "N": dims["HO"]}, {}, lanes))
        d.append(D("compute_root", f))
        d += rename_funcs(gemm, {"out": f, "acc": f"{f}_acc"})
    return d + output_directives("out", ("hid", "b"), dims, lanes)


template("gru_cell")(_cell)
template("rnn_cell")(_cell)
