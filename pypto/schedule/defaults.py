"""Built-in default schedules, as data: one place that says how an untuned op is computed.

The generic default is derived from the pipeline's structure, so a user's op with no hints gets a
schedule that is not naive: every output is vectorized along its innermost dimension and parallel
over an outer one; cheap pure producers stay inlined (Halide's default); every Func with an update
definition (a reduction) is computed per parallel task of its consumer, with its pure dimension
vectorized and the reduction loop inside the vector lanes.

An op may register a hand-written template with :func:`template` when the generic rule is far from
good (matmul's register blocking, a full reduction's rfactor). A template returns directives; the
schedule database replaces either with a tuned schedule.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import halide as hl

from ..dtypes import halide_type
from .directives import Directive
from .schedule import Schedule

D = Directive.make
_TEMPLATES: dict[str, Callable] = {}
_KNOBS: dict[str, dict[str, tuple]] = {}

#: Elements per parallel task, aiming at a few tasks per core without tiny tasks. Work is
#: parallel only when it makes at least two such tasks: below that, dispatching to the thread pool
#: costs more than it saves. Measured here (2 cores, kernel alone, float32 add): a row-parallel
#: [256, 128] add took 28.7 us against 9.7 us serial, [512, 64] 22.3 against 11.1, [128, 128]
#: 10.8 against 6.8; in tasks of 16K elements it matched serial (9.3, 10.1, 6.0 us). A cheap pass
#: over 16K floats takes about 4 us, an exp about 20-40 us.
MIN_TASK_ELEMS = 1 << 14

#: An output parallel over its outermost dim alone when that has at least this many rows; fewer
#: (three images of a batch) make too few tasks to share out (three on two threads: one thread
#: runs two, a third of the time idle), so the dim inside joins it and tasks are cut from both.
#: resize_bilinear of 3 x 1024^2 to 1536^2, two threads, ``out=``: 8.2 ms parallel over the
#: three images, torch 5.6.
MIN_PARALLEL_ROWS = 16


def template(op_name: str, knobs: Mapping[str, tuple] | None = None):
    """Registers ``fn(built, dims, lanes, **knobs) -> list[Directive]`` as ``op_name``'s default.

    ``knobs`` names the template's tunable constants and their candidate values (the first is the
    default). The tuner searches them beside the generic space, so a template is a starting point,
    not a ceiling. The template must give a legal schedule for every combination.
    """

    def wrap(fn):
        _TEMPLATES[op_name] = fn
        if knobs:
            _KNOBS[op_name] = {k: tuple(v) for k, v in knobs.items()}
        return fn

    return wrap


def template_knobs(op_name: str) -> dict[str, tuple]:
    """The tunable constants of ``op_name``'s template (empty when it has none)."""
    _load_templates()
    return dict(_KNOBS.get(op_name, {}))


def template_schedule(built, dims: Mapping[str, int], lanes: int, values: Mapping) -> list:
    """The directives of ``built.op``'s template with its knobs set to ``values``."""
    _load_templates()
    return _TEMPLATES[built.op.name](built, dims, lanes, **values)


def vector_lanes(target: hl.Target, dtype: str) -> int:
    """The target's natural vector width for ``dtype`` (8 float32 lanes on AVX2)."""
    try:
        n = target.natural_vector_size(halide_type(dtype))
    except Exception:  # targets without a vector unit description
        n = 4
    return max(1, int(n))


def _extent(dims: Mapping[str, int], var: str) -> int | None:
    return dims.get(var.upper())


def _pow2_at_most(n: int, cap: int) -> int:
    p = 1
    while p * 2 <= min(n, cap):
        p *= 2
    return p


def output_directives(name: str, args, dims, lanes: int, stage: int = 0,
                      tail: str | None = None, task: int = MIN_TASK_ELEMS,
                      fuse_rows: bool = False) -> list[Directive]:
    """Vectorize the innermost dim, parallelize an outer one (or blocks of a 1-D output).
    ``tail`` is the vector loop's tail strategy (``guard_with_if`` for a Func computed over
    less than its full extent, which shifting a vector inwards would read before its input).
    ``task`` is the elements of a parallel task (see MIN_TASK_ELEMS).

    With ``fuse_rows``, an outermost dim of fewer than MIN_PARALLEL_ROWS is fused with the dim
    inside it, and the tasks are cut from the two (see MIN_PARALLEL_ROWS). Only for Funcs that
    nothing is computed at: a Func computed per task would then be recomputed per smaller task
    (a per-image statistic once per block of rows)."""
    out: list[Directive] = []
    vt = {} if tail is None else {"tail": tail}
    inner = args[0]
    n0 = _extent(dims, inner) or 0
    total = 1
    for a in args:
        total *= _extent(dims, a) or 1
    vec = _pow2_at_most(n0, lanes) if n0 >= 4 else 1
    flat = all((_extent(dims, a) or 2) == 1 for a in args[1:])
    if len(args) == 1 or flat:
        # A 1-D output, or one whose outer dims are all 1 (a [1, N] row, as a program's
        # reshapes often leave one): blocks of the one long dim are the tasks.
        if n0 >= 2 * task:
            block = task
            out.append(D("split", name, stage, var=inner, outer=f"{inner}o", inner=f"{inner}i",
                         factor=block))
            out.append(D("parallel", name, stage, var=f"{inner}o"))
            inner = f"{inner}i"
        if vec > 1:
            out.append(D("vectorize", name, stage, var=inner, factor=vec, **vt))
        return out
    if vec > 1:
        out.append(D("vectorize", name, stage, var=inner, factor=vec, **vt))
    if total >= 2 * task:   # at least two tasks' worth (see MIN_TASK_ELEMS)
        outer = [a for a in args[1:] if (_extent(dims, a) or 2) > 1]
        if outer:
            par = outer[-1]
            rows = _extent(dims, par) or 0
            if fuse_rows and 0 < rows < MIN_PARALLEL_ROWS and len(outer) >= 2:
                inside = outer[-2]
                n_in = _extent(dims, inside)
                if n_in and list(args).index(inside) == list(args).index(par) - 1:
                    fused = f"{inside}_{par}"
                    out.append(D("fuse", name, stage, inner=inside, outer=par, fused=fused))
                    par, rows = fused, rows * n_in
            inner_elems = max(1, total // max(rows, 1))
            per_task = max(1, task // inner_elems)
            if per_task == 1:
                out.append(D("parallel", name, stage, var=par))   # a row is a task's worth
            elif rows >= 2 * per_task:
                # Rows in tasks of about ``task`` elements; one row each would make tasks
                # too small to pay for their dispatch.
                out.append(D("split", name, stage, var=par, outer=f"{par}o", inner=f"{par}i",
                             factor=per_task))
                out.append(D("parallel", name, stage, var=f"{par}o"))
    return out


def parallel_var(directives: list[Directive], name: str) -> str | None:
    for d in directives:
        if d.op == "parallel" and d.func == name and d.stage == 0:
            return d.get("var")
    return None


def generic(built, dims: Mapping[str, int], lanes: int) -> list[Directive]:
    """The structural default described in the module docstring."""
    out: list[Directive] = []
    outputs = [i for i in built.funcs.values() if i.is_output]
    # Reductions inside are computed per task of the output: its tasks stay whole rows of its
    # outermost dim (see output_directives).
    alone = not any(i.updates for i in built.funcs.values() if not (i.is_input or i.is_output))
    for o in outputs:
        out += output_directives(o.name, o.args, dims, lanes, fuse_rows=alone)
        for u in range(len(o.updates)):
            out += _update_directives(o, u, dims, lanes)
    anchor = outputs[0]
    at = parallel_var(out, anchor.name)
    for info in built.funcs.values():
        if info.is_input or info.is_output or not info.updates:
            continue
        if at is not None and len(outputs) == 1:  # a Func read by two outputs lives at root
            out.append(D("compute_at", info.name, at=anchor.name, var=at))
        else:
            out.append(D("compute_root", info.name))
        n0 = _extent(dims, info.args[0]) if info.args else None
        if n0 and n0 >= lanes:
            out.append(D("vectorize", info.name, var=info.args[0], factor=lanes))
        for u in range(len(info.updates)):
            out += _update_directives(info, u, dims, lanes)
    return out


def _update_directives(info, u: int, dims, lanes: int) -> list[Directive]:
    """Vectorize an update along its innermost pure var, with the reduction loops inside it."""
    pure = [a for a in info.args if a in info.update_args[u]]
    if not pure:
        return []
    p0 = pure[0]
    n0 = _extent(dims, p0)
    if not n0 or n0 < lanes:
        return []
    stage = u + 1
    lane, rest = f"{p0}_v", f"{p0}_o"
    rvars = list(info.updates[u])
    return [
        D("split", info.name, stage, var=p0, outer=rest, inner=lane, factor=lanes,
          tail="guard_with_if"),
        D("reorder", info.name, stage, vars=[lane, *rvars, rest]),
        D("vectorize", info.name, stage, var=lane),
    ]


_LOADED = False


def _load_templates() -> None:
    """Imports every template module once. (Keyed on a flag, not on an empty registry: a
    template module imported first by itself used to leave the other families unregistered,
    and their ops silently ran the structural default - baddbmm 25-38 ms against about 4.)"""
    global _LOADED
    if _LOADED:
        return
    _LOADED = True
    # Every module of the templates package, found by listing it (not from pypto.ops' family list,
    # which sits above this layer): a family without templates simply has no module there.
    import importlib
    import pkgutil

    from . import templates

    for mod in pkgutil.iter_modules(templates.__path__):
        importlib.import_module(f"{templates.__name__}.{mod.name}")


def _is_builtin(op) -> bool:
    """Templates are written for the built-in op of their name: a user's op that reuses the
    name (unregistered, or in its own module) gets the structural default instead."""
    return getattr(op.algorithm, "__module__", "").startswith("pypto.ops.")


def default_schedule(built, dims: Mapping[str, int], target: hl.Target) -> Schedule:
    """The default schedule of ``built`` for concrete ``dims`` on ``target``."""
    _load_templates()
    dtype = built.out_dtypes[0]
    lanes = vector_lanes(target, dtype if dtype != "bool" else "uint8")
    if target.has_gpu_feature():
        from .gpu import gpu_default

        directives = gpu_default(built, dims, target)
    elif getattr(built.op, "schedule_template", None) is not None:   # a traced program
        directives = built.op.schedule_template(built, dims, lanes)
    elif built.op.name in _TEMPLATES and _is_builtin(built.op):
        directives = _TEMPLATES[built.op.name](built, dims, lanes)
    else:
        directives = generic(built, dims, lanes)
    return Schedule(op=built.op.name, directives=tuple(directives))
