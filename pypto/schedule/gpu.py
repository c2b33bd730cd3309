"""Default GPU schedules: device limits, a generic mapping for every op, and the dispatch to the
specialised schedules of :mod:`.gpu_families` (row and full reductions, matrix products).

The generic schedule tiles each output's two innermost dims 16 x 16 over GPU blocks and threads
(a 1-D output: 256 threads per block) and maps up to two more outer dims to a third block dim, so
one kernel launch covers the whole output; an update definition of an output is mapped the same
way over its pure dims, or run by a single GPU thread when it has none. Every other Func with an
update definition is computed inside the thread loop that consumes it (its loops run serially per
thread), except a scan computed in place (its pure definition undefined, an update running
along one of its dims): that one is computed at root with each stage mapped over the dims it
keeps, since inside a thread loop it would be recomputed whole for every point read (and so is
every such Func when an update of the output runs in a single thread, which has no thread loop); pure
producers stay inlined. It is correct for every op and is what a specialised
schedule falls back to when the op's structure does not fit one.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import halide as hl

from .directives import Directive

D = Directive.make
TILE_2D = 16
TILE_1D = 256


@dataclasses.dataclass(frozen=True)
class GpuLimits:
    """What one GPU block may use: schedules and the tuner's space stay inside these.

    Attributes:
        api: the GPU API (``cuda``, ``opencl``, ``vulkan``, ``metal``).
        max_threads: threads per block (work-group size).
        shared_bytes: shared (local) memory per block, in bytes.
        warp: threads that run in lock step (warp / SIMD group / subgroup width).
    """

    api: str
    max_threads: int
    shared_bytes: int
    warp: int


#: Conservative limits per API: every device of that API we aim at offers at least these.
_LIMITS = {
    "cuda": GpuLimits("cuda", 1024, 48 * 1024, 32),
    "opencl": GpuLimits("opencl", 256, 32 * 1024, 32),
    "vulkan": GpuLimits("vulkan", 256, 16 * 1024, 32),
    "metal": GpuLimits("metal", 512, 32 * 1024, 32),
}
#: Used when no target is given: within every API's limits.
SAFE_LIMITS = GpuLimits("any", 256, 16 * 1024, 32)


def gpu_api(target: hl.Target) -> str | None:
    """The GPU API a target compiles for, or None for a CPU target."""
    for feat, api in ((hl.TargetFeature.CUDA, "cuda"), (hl.TargetFeature.OpenCL, "opencl"),
                      (hl.TargetFeature.Vulkan, "vulkan"), (hl.TargetFeature.Metal, "metal")):
        if target.has_feature(feat):
            return api
    return None


def gpu_limits(target) -> GpuLimits:
    """Device limits for ``target`` (a Halide Target, a short name such as "opencl", or a string).

    The values are conservative defaults per API rather than a query of one device, so a schedule
    made within them runs on any device of that API. A CPU target raises TargetError.

    >>> gpu_limits("cuda").max_threads
    1024
    """
    from ..compiler.targets import parse
    from ..errors import TargetError

    t = parse(target)
    api = gpu_api(t)
    if api is None:
        raise TargetError(f"target {str(t)!r} has no GPU feature; GPU limits apply to "
                          f"cuda, opencl, vulkan or metal targets")
    return _LIMITS[api]


def _map(name: str, stage: int, args, dims: Mapping[str, int], lim: GpuLimits) -> list[Directive]:
    """Blocks and threads over a stage's pure ``args`` (innermost first)."""
    ext = [dims.get(a.upper(), TILE_2D) for a in args]
    side = TILE_2D if lim.max_threads >= TILE_2D * TILE_2D else 8
    out: list[Directive] = []
    if len(args) >= 2:
        tx, ty = min(side, ext[0]), min(side, ext[1])
        out.append(D("gpu_tile", name, stage, x=args[0], y=args[1], bx="bx", by="by", tx="tx",
                     ty="ty", xsize=tx, ysize=ty, tail="guard_with_if"))
        rest = list(args[2:4])
        if len(rest) == 2:
            out.append(D("fuse", name, stage, inner=rest[0], outer=rest[1], fused="bz"))
            rest = ["bz"]
        if rest:
            out.append(D("gpu_blocks", name, stage, vars=rest))
        return out
    if len(args) == 1:
        return [D("gpu_tile", name, stage, x=args[0], bx="bx", tx="tx",
                  xsize=min(TILE_1D, lim.max_threads, ext[0]), tail="guard_with_if")]
    return [D("gpu_single_thread", name, stage)]


def generic_gpu(built, dims: Mapping[str, int], lim: GpuLimits = SAFE_LIMITS) -> list[Directive]:
    """The structural default described in the module docstring."""
    out: list[Directive] = []
    outputs = [i for i in built.funcs.values() if i.is_output]
    for o in outputs:
        out += _map(o.name, 0, o.args, dims, lim)
        for u in range(len(o.updates)):
            pure = [a for a in o.args if a in o.update_args[u]]
            out += _map(o.name, u + 1, pure, dims, lim)
    anchor = outputs[0]
    # An update of the output with no pure dim runs in one GPU thread, where no thread loop is
    # (sin/cos float32 recompute flagged tiles so): the Funcs it reads are computed at root.
    single = any(not [a for a in anchor.args if a in anchor.update_args[u]]
                 for u in range(len(anchor.updates)))
    for info in built.funcs.values():
        if info.is_input or info.is_output or not info.updates:
            continue
        if len(outputs) == 1 and not single and not _scan_in_place(info):
            out.append(D("compute_at", info.name, at=anchor.name, var="tx"))
        else:
            out.append(D("compute_root", info.name))
            out += _map(info.name, 0, info.args, dims, lim)
            for u in range(len(info.updates)):
                pure = [a for a in info.args if a in info.update_args[u]]
                out += _map(info.name, u + 1, pure, dims, lim)
    return out


def _scan_in_place(info) -> bool:
    """Whether ``info``'s pure definition is undefined and an update runs along one of its dims
    (``pypto.ops.scan``'s running Funcs)."""
    pure_undefined = all("undef" in str(v) for v in info.func.values())
    return pure_undefined and any(set(info.args) - set(a) for a in info.update_args)


def gpu_family(built, dims: Mapping[str, int], lim: GpuLimits = SAFE_LIMITS) -> str:
    """Which default GPU schedule ``built`` gets at ``dims``: a family name or ``"generic"``."""
    from .gpu_families import choose

    found = choose(built, dims, lim)
    return found[0] if found and _applies(built, found[1]) else "generic"


def gpu_default(built, dims: Mapping[str, int], target: hl.Target | None = None) -> list[Directive]:
    """The default GPU schedule of ``built`` at ``dims``, within ``target``'s limits.

    A specialised schedule is used when the op's structure fits one and it applies cleanly to a
    fresh build of the op; otherwise the generic schedule.
    """
    lim = _LIMITS.get(gpu_api(target) or "", SAFE_LIMITS) if target is not None else SAFE_LIMITS
    from .gpu_families import choose

    found = choose(built, dims, lim)
    if found is not None and _applies(built, found[1]):
        return found[1]
    return generic_gpu(built, dims, lim)


def _applies(built, directives: list[Directive]) -> bool:
    """Whether ``directives`` apply to a fresh build of ``built``'s op (no compile)."""
    from ..errors import ScheduleError
    from .apply import apply_schedule
    from .schedule import Schedule

    from ..compiler.lower import build

    fresh = build(built.op, built.dtypes, built.params)
    try:
        apply_schedule(fresh, Schedule(op=built.op.name, directives=tuple(directives)))
    except ScheduleError:
        return False
    return True
