"""Specialised default GPU schedules, chosen by the structure of an op's pipeline (not its name).

Three families, each a list of directives like any schedule:

- ``row_reduction``: one output, every other Func with an update reduces one row (a single RVar)
  over the same pure dims, which are the output's dims (``sum``: ``[O, R] -> [O]``) or all but its
  innermost (``softmax``: ``[R, C] -> [R, C]``). One GPU block per row; each reduction is
  ``rfactor``-ed over ``T`` threads that stride the row (coalesced reads), the ``T`` partials live
  in shared memory and one thread combines them. The output's innermost dim, if any, is spread
  over the same threads.
- ``full_reduction``: the same structure with few rows (at most :data:`FEW_ROWS`) and long ones,
  e.g. a sum over everything. Each reduction is ``rfactor``-ed into ``P`` partials computed by a
  grid of blocks (each thread a strided slice), then combined in one block as above.
- ``matmul``: one output equal to one accumulator with a single RVar over 2 or 3 pure dims
  (``matmul``, ``batch_matmul``, ``linear``, ``quantized_matmul``). Blocks of 32 x 32 outputs,
  16 x 16 threads each computing a 2 x 2 tile held in registers; per step of 16 along the
  reduction, the inputs' tiles are copied to shared memory by all threads of the block. Needs
  both output dims of at least 32 (tiles at the edge shift inwards instead of reading past it).

:func:`choose` returns the family and its directives, or None when no family fits.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from .directives import Directive
from .gpu import GpuLimits, _map

D = Directive.make
#: At most this many rows use the two-stage full reduction.
FEW_ROWS = 8
#: Rows at least this long (elements) use the two-stage full reduction when rows are few.
LONG_ROW = 8192
#: Elements each thread of the first stage of a full reduction reduces at least.
PER_THREAD = 32
#: Matrix product tiling: block tile, register tile per thread, reduction step.
BLOCK, REG, KSTEP = 32, 2, 16


def _pow2_at_most(n: int, cap: int) -> int:
    p = 1
    while p * 2 <= min(n, cap):
        p *= 2
    return p


def _itemsize(type_text: str) -> int:
    sizes = [np.dtype(t).itemsize for t in (type_text or "float32").split(",") if t]
    return sum(sizes) or 4


def _prod(values) -> int:
    n = 1
    for v in values:
        n *= v
    return n


def _extent(dims: Mapping[str, int], var: str) -> int:
    return int(dims.get(var.upper(), 1))


def _reduction_shape(built):
    """(output, reductions, row vars, inner var or None) when the op is a row reduction."""
    outputs = [i for i in built.funcs.values() if i.is_output]
    if len(outputs) != 1 or outputs[0].updates:
        return None
    out = outputs[0]
    reds = [i for i in built.funcs.values() if i.updates and not i.is_input and not i.is_output]
    if not reds:
        return None
    row = reds[0].args
    for f in reds:
        if f.args != row or len(f.updates) != 1 or len(f.updates[0]) != 1:
            return None
        if set(f.update_args[0]) != set(row):
            return None
    if not 1 <= len(row) <= 3:
        return None
    if tuple(out.args) == tuple(row):
        return out, reds, list(row), None
    if tuple(out.args[1:]) == tuple(row):
        return out, reds, list(row), out.args[0]
    return None


def _row_length(built, dims: Mapping[str, int], row) -> int:
    """Elements reduced per row: the first input's size over the number of rows."""
    spec = built.op.inputs[0]
    total = _prod(int(dims.get(d, 1)) for d in spec.dims)
    return max(1, total // max(1, _prod(_extent(dims, r) for r in row)))


def _threads(length: int, reds, lim: GpuLimits) -> int:
    """Threads per row: a power of two up to 256 that keeps the partials within shared memory."""
    t = max(min(lim.warp, lim.max_threads), _pow2_at_most(length, min(256, lim.max_threads)))
    need = sum(_itemsize(f.type) for f in reds)
    while t > lim.warp and need * t > lim.shared_bytes // 2:
        t //= 2
    return t


def _cooperative(f, at: str, var: str, t: int) -> list[Directive]:
    """``f``'s single RVar reduced by ``t`` threads at ``at``'s loop ``var``, partials in shared."""
    (k,) = f.updates[0] if f.updates else (None,)
    return _cooperative_over(f.name, k, at, var, t)


def _cooperative_over(name: str, k: str, at: str, var: str, t: int) -> list[Directive]:
    part = f"{name}_t"
    return [
        D("split", name, 1, var=k, outer=f"{k}_o", inner=f"{k}_i", factor=t),
        D("rfactor", name, 1, pairs=[[f"{k}_i", "u"]], intm=part),
        D("compute_at", part, at=at, var=var),
        D("store_in", part, memory="gpu_shared"),
        D("gpu_threads", part, vars=["u"]),
        D("reorder", part, 1, vars=[f"{k}_o", "u"]),
        D("gpu_threads", part, 1, vars=["u"]),
    ]


def row_reduction(built, dims, lim: GpuLimits, shape) -> list[Directive]:
    out, reds, row, inner = shape
    t = _threads(_row_length(built, dims, row), reds, lim)
    ds: list[Directive] = []
    if inner is not None:
        ti = min(t, _pow2_at_most(_extent(dims, inner), t)) if _extent(dims, inner) < t else t
        ds += [D("split", out.name, var=inner, outer=f"{inner}_o", inner=f"{inner}_t", factor=ti,
                 tail="guard_with_if"),
               D("reorder", out.name, vars=[f"{inner}_o", f"{inner}_t"]),
               D("gpu_threads", out.name, vars=[f"{inner}_t"])]
    ds.append(D("gpu_blocks", out.name, vars=row))
    for f in reds:
        ds.append(D("compute_at", f.name, at=out.name, var=row[0]))
        ds += _cooperative(f, out.name, row[0], t)
    return ds


def full_reduction(built, dims, lim: GpuLimits, shape) -> list[Directive]:
    out, reds, row, _inner = shape
    length = _row_length(built, dims, row)
    t = _threads(length, reds, lim)
    parts = t * max(1, min(64, _pow2_at_most(length // (PER_THREAD * t), 64)))
    ds: list[Directive] = []
    for f in reds:
        (k,) = f.updates[0]
        p = f"{f.name}_p"
        ds += [
            D("compute_root", f.name),
            D("split", f.name, 1, var=k, outer="kp_o", inner="kp", factor=parts),
            D("rfactor", f.name, 1, pairs=[["kp", "u"]], intm=p),
            D("compute_root", p),
            D("reorder_storage", p, vars=["u", *row]),
            D("gpu_tile", p, x="u", bx="bx", tx="tx", xsize=t),
            D("reorder", p, 1, vars=["kp_o", "u"]),
            D("gpu_tile", p, 1, x="u", bx="bx", tx="tx", xsize=t),
            D("gpu_blocks", f.name, vars=row),
        ]
        # The merge over the partials: one block per row, t threads, partials in shared memory.
        part = f"{f.name}_t"
        ds += [
            D("split", f.name, 1, var="kp", outer="kp_o", inner="kp_i", factor=t),
            D("rfactor", f.name, 1, pairs=[["kp_i", "u"]], intm=part),
            D("gpu_blocks", f.name, 1, vars=row),
            D("compute_at", part, at=f.name, var=row[0]),
            D("store_in", part, memory="gpu_shared"),
            D("gpu_threads", part, vars=["u"]),
            D("reorder", part, 1, vars=["kp_o", "u"]),
            D("gpu_threads", part, 1, vars=["u"]),
        ]
    ds += _map(out.name, 0, out.args, dims, lim)
    return ds


def _matmul_shape(built, dims, lim: GpuLimits):
    outputs = [i for i in built.funcs.values() if i.is_output]
    if len(outputs) != 1 or outputs[0].updates:
        return None
    out = outputs[0]
    reds = [i for i in built.funcs.values() if i.updates and not i.is_input and not i.is_output]
    if len(reds) != 1:
        return None
    acc = reds[0]
    if (acc.args != out.args or len(acc.args) not in (2, 3) or len(acc.updates) != 1
            or len(acc.updates[0]) != 1 or set(acc.update_args[0]) != set(acc.args)
            or out.calls != frozenset({acc.name})):
        return None
    threads = (BLOCK // REG) ** 2
    if threads > lim.max_threads:
        return None
    if _extent(dims, acc.args[0]) < BLOCK or _extent(dims, acc.args[1]) < BLOCK:
        return None
    ranks = {f"{s.name}_im": s.rank for s in built.op.inputs}
    staged = []
    for c in sorted(acc.calls):
        info = built.funcs.get(c)
        if info is None:
            continue
        # A wrapper's loops: an input's are _0, _1...; a Func's keep its own names.
        if info.is_input and ranks.get(c, 0) >= 2:
            staged.append((c[:-3], ("_0", "_1")))
        elif not info.is_input and not info.updates and len(info.args) >= 2:
            staged.append((c, info.args[:2]))
    tile_bytes = 2 * BLOCK * KSTEP * max(_itemsize(t) for t in built.dtypes)
    if not staged or len(staged) * tile_bytes // 2 > lim.shared_bytes:
        return None
    return out, acc, staged


def matmul(built, dims, lim: GpuLimits, shape) -> list[Directive]:
    out, acc, staged = shape
    x, y = acc.args[0], acc.args[1]
    batch = list(acc.args[2:])
    th = BLOCK // REG
    (k,) = acc.updates[0]

    def thread_tile(func: str, stage: int, a: str = x, b: str = y) -> list[Directive]:
        return [D("tile", func, stage, x=a, y=b, xo="xt", yo="yt", xi="xr", yi="yr", xfactor=REG,
                  yfactor=REG),
                D("gpu_threads", func, stage, vars=["xt", "yt"]),
                D("unroll", func, stage, var="xr"), D("unroll", func, stage, var="yr")]

    ds = [
        D("tile", out.name, x=x, y=y, xo="xb", yo="yb", xi="xi", yi="yi", xfactor=BLOCK,
          yfactor=BLOCK, tail="shift_inwards"),
        *thread_tile(out.name, 0, "xi", "yi"),
        D("gpu_blocks", out.name, vars=["xb", "yb", *batch]),
        D("compute_at", acc.name, at=out.name, var="xb"),
        D("store_in", acc.name, memory="register"),
        *thread_tile(acc.name, 0),
        D("split", acc.name, 1, var=k, outer="ko", inner="ki", factor=KSTEP),
        D("tile", acc.name, 1, x=x, y=y, xo="xt", yo="yt", xi="xr", yi="yr", xfactor=REG,
          yfactor=REG),
        D("reorder", acc.name, 1, vars=["xr", "yr", "ki", "xt", "yt", "ko"]),
        D("gpu_threads", acc.name, 1, vars=["xt", "yt"]),
        D("unroll", acc.name, 1, var="xr"), D("unroll", acc.name, 1, var="yr"),
    ]
    for src, (a, b) in staged:
        s = f"{src}_s"
        ds += [
            D("wrap", src, consumer=acc.name, **{"as": s}),
            D("compute_at", s, at=acc.name, var="ko"),
            D("store_in", s, memory="gpu_shared"),
            D("tile", s, x=a, y=b, xo="s_xo", yo="s_yo", xi="s_xt", yi="s_yt", xfactor=th,
              yfactor=th, tail="guard_with_if"),
            D("gpu_threads", s, vars=["s_xt", "s_yt"]),
        ]
    return ds


def choose(built, dims: Mapping[str, int], lim: GpuLimits):
    """(family name, directives) of the specialised schedule that fits ``built``, or None."""
    mm = _matmul_shape(built, dims, lim)
    if mm is not None:
        return "matmul", matmul(built, dims, lim, mm)
    shape = _reduction_shape(built)
    if shape is None:
        return None
    out, reds, row, inner = shape
    length = _row_length(built, dims, row)
    rows = _prod(_extent(dims, r) for r in row)
    if rows <= FEW_ROWS and length >= LONG_ROW:
        return "full_reduction", full_reduction(built, dims, lim, shape)
    if length >= 2 * lim.warp:
        return "row_reduction", row_reduction(built, dims, lim, shape)
    return None
