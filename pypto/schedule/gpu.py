"""The generic default GPU schedule: outputs tiled over blocks and threads, reductions per thread.

Each output's two innermost dims are tiled 16 x 16 (a 1-D output: 256 threads per block) over GPU
blocks and threads; an update definition of an output is mapped the same way over its pure dims,
or run by a single GPU thread when it has none. Every other Func with an update definition is
computed inside the thread loop that consumes it (its loops run serially per thread); pure
producers stay inlined. This is correct for every op; tuned GPU schedules replace it.
"""

from __future__ import annotations

from collections.abc import Mapping

from .directives import Directive

D = Directive.make
TILE_2D = 16
TILE_1D = 256


def _map(name: str, stage: int, args, dims: Mapping[str, int]) -> list[Directive]:
    ext = [dims.get(a.upper(), TILE_2D) for a in args]
    if len(args) >= 2:
        tx, ty = min(TILE_2D, ext[0]), min(TILE_2D, ext[1])
        return [D("gpu_tile", name, stage, x=args[0], y=args[1], bx="bx", by="by", tx="tx", ty="ty",
                  xsize=tx, ysize=ty, tail="guard_with_if")]
    if len(args) == 1:
        return [D("gpu_tile", name, stage, x=args[0], bx="bx", tx="tx",
                  xsize=min(TILE_1D, ext[0]), tail="guard_with_if")]
    return [D("gpu_single_thread", name, stage)]


def gpu_default(built, dims: Mapping[str, int]) -> list[Directive]:
    out: list[Directive] = []
    outputs = [i for i in built.funcs.values() if i.is_output]
    for o in outputs:
        out += _map(o.name, 0, o.args, dims)
        for u in range(len(o.updates)):
            pure = [a for a in o.args if a in o.update_args[u]]
            out += _map(o.name, u + 1, pure, dims)
    anchor = outputs[0]
    for info in built.funcs.values():
        if info.is_input or info.is_output or not info.updates:
            continue
        if len(outputs) == 1:
            out.append(D("compute_at", info.name, at=anchor.name, var="tx"))
        else:
            out.append(D("compute_root", info.name))
            out += _map(info.name, 0, info.args, dims)
            for u in range(len(info.updates)):
                pure = [a for a in info.args if a in info.update_args[u]]
                out += _map(info.name, u + 1, pure, dims)
    return out
