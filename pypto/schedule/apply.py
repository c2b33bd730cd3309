"""Applying a schedule to a built pipeline. The only module that calls Halide's scheduling API.

Each directive is checked against the pipeline's current state (which Funcs exist, which loop
variables each stage has, whether a name is a Var or an RVar) before it is handed to Halide, and a
Halide error is wrapped with the op, the directive's index and its text. Applying never runs code
from the schedule: names are looked up in dictionaries built from the pipeline, nothing else.
"""

from __future__ import annotations

import math
from typing import Any

import halide as hl

from ..errors import ScheduleError, ScheduleTooLongError
from .directives import FUNC_LEVEL, LIMITS, Directive, unrolled_extent
from .schedule import Schedule

_TAIL = {
    "auto": "Auto", "guard_with_if": "GuardWithIf", "shift_inwards": "ShiftInwards",
    "round_up": "RoundUp", "predicate": "Predicate", "predicate_loads": "PredicateLoads",
    "predicate_stores": "PredicateStores", "round_up_and_blend": "RoundUpAndBlend",
    "shift_inwards_and_blend": "ShiftInwardsAndBlend",
}
_MEMORY = {"auto": "Auto", "heap": "Heap", "stack": "Stack", "register": "Register",
           "gpu_shared": "GPUShared", "gpu_texture": "GPUTexture", "locked_cache": "LockedCache",
           "vtcm": "VTCM"}
_PREFETCH = {"clamp": "Clamp", "guard_with_if": "GuardWithIf", "non_faulting": "NonFaulting"}


def _tail(d: Directive):
    return getattr(hl.TailStrategy, _TAIL[d.get("tail", "auto")])


class _Stage:
    """Loop variables of one stage, innermost first, and which of them are RVars."""

    def __init__(self, names, rvars):
        self.names = list(names)
        self.rvars = set(rvars)
        self.extent: dict[str, int] = {}
        self.unrolled = 1


class Applier:
    """Applies directives one by one to ``built`` and keeps a Halide-Python transcript."""

    def __init__(self, built, op_name: str):
        self.built = built
        self.op_name = op_name
        self.funcs: dict[str, Any] = {}
        self.images: dict[str, Any] = {im.name(): im for im in built.images}
        self.stages: dict[tuple[str, int], _Stage] = {}
        self.transcript: list[str] = []
        self.pending: list[tuple[int, Directive]] = []
        for name, info in built.funcs.items():
            if info.is_input:
                continue
            self.funcs[name] = info.func
            self._register(name, info.func)

    def _register(self, name: str, f) -> None:
        self.stages[(name, 0)] = _Stage([a.name() for a in f.args()], ())
        for u in range(f.num_update_definitions()):
            self._refresh(name, u + 1, f, rvars={r.name() for r in f.rvars(u)})

    def _refresh(self, name, stage, f, rvars=None):
        """Reads a stage's loop variables back from Halide (after rfactor, for instance)."""
        text = f.update(stage - 1).dump_argument_list() if stage else ""
        names = [n for n in text.replace("Vars:", "").split() if n != "__outermost"]
        old = self.stages.get((name, stage))
        if rvars is None:
            rvars = {n for n in names if old is None or self._short(n) in old.rvars}
        self.stages[(name, stage)] = _Stage([self._short(n) for n in names],
                                           {self._short(n) for n in rvars})

    @staticmethod
    def _short(n: str) -> str:
        return n.rsplit(".", 1)[-1]

    # -- helpers --------------------------------------------------------------------------------
    def _fail(self, i: int, d: Directive, msg: str):
        raise ScheduleError(f"op {self.op_name!r}, directive #{i} `{d}`: {msg}")

    def _func(self, i, d, name):
        if name not in self.funcs:
            self._fail(i, d, f"no Func named {name!r}; schedulable Funcs: {sorted(self.funcs)}")
        return self.funcs[name]

    def _stage(self, i, d) -> _Stage:
        f = self._func(i, d, d.func)
        key = (d.func, d.stage)
        if key not in self.stages:
            n = f.num_update_definitions()
            self._fail(i, d, f"Func {d.func!r} has stages 0..{n} (0 = pure, k = update k-1); "
                       f"got stage {d.stage}")
        return self.stages[key]

    def _var(self, i, d, st: _Stage, name: str):
        if name not in st.names:
            self._fail(i, d, f"no loop variable {name!r} in {d.func!r} stage {d.stage}; "
                       f"its loops (innermost first): {st.names}")
        return hl.RVar(name) if name in st.rvars else hl.Var(name)

    def _new(self, i, d, st: _Stage, name: str, like_rvar: bool, replacing=()):
        if name in st.names and name not in replacing:
            self._fail(i, d, f"variable {name!r} already exists in {d.func!r} stage {d.stage}")
        return hl.RVar(name) if like_rvar else hl.Var(name)

    def _target(self, d: Directive):
        f = self.funcs[d.func]
        return f.update(d.stage - 1) if d.stage else f

    def _say(self, d: Directive, call: str):
        obj = d.func + (f".update({d.stage - 1})" if d.stage else "")
        self.transcript.append(f"{obj}.{call}")

    # -- the directives -------------------------------------------------------------------------
    def apply(self, i: int, d: Directive) -> None:
        try:
            getattr(self, f"_do_{d.op}")(i, d)
        except (hl.HalideError, RuntimeError, TypeError) as e:
            msg = str(e).strip().replace("\n", " ")
            self._fail(i, d, f"Halide refused it: {msg}")

    def _do_split(self, i, d):
        st = self._stage(i, d)
        old = self._var(i, d, st, d.get("var"))
        rv = d.get("var") in st.rvars
        outer = self._new(i, d, st, d.get("outer"), rv, replacing=(d.get("var"),))
        inner = self._new(i, d, st, d.get("inner"), rv, replacing=(d.get("var"),))
        if d.get("outer") == d.get("inner"):
            self._fail(i, d, "outer and inner must differ")
        self._target(d).split(old, outer, inner, d.get("factor"), _tail(d))
        k = st.names.index(d.get("var"))
        st.names[k:k + 1] = [d.get("inner"), d.get("outer")]
        if rv:
            st.rvars |= {d.get("inner"), d.get("outer")}
        st.extent[d.get("inner")] = d.get("factor")
        self._say(d, f"split({d.get('var')}, {d.get('outer')}, {d.get('inner')}, {d.get('factor')}, "
                     f"hl.TailStrategy.{_TAIL[d.get('tail', 'auto')]})")

    def _do_fuse(self, i, d):
        st = self._stage(i, d)
        a, b = d.get("inner"), d.get("outer")
        va, vb = self._var(i, d, st, a), self._var(i, d, st, b)
        if (a in st.rvars) != (b in st.rvars):
            self._fail(i, d, "cannot fuse a Var with an RVar")
        if a == b:
            self._fail(i, d, "inner and outer must differ")
        rv = a in st.rvars
        fused = self._new(i, d, st, d.get("fused"), rv, replacing=(a, b))
        self._target(d).fuse(va, vb, fused)
        st.names.remove(b)
        st.names[st.names.index(a)] = d.get("fused")
        if rv:
            st.rvars.add(d.get("fused"))
        if a in st.extent and b in st.extent:
            st.extent[d.get("fused")] = st.extent[a] * st.extent[b]
        self._say(d, f"fuse({a}, {b}, {d.get('fused')})")

    def _do_tile(self, i, d):
        x, y = d.get("x"), d.get("y")
        self._do_split(i, Directive.make("split", d.func, d.stage, var=x, outer=d.get("xo"),
                                         inner=d.get("xi"), factor=d.get("xfactor"),
                                         tail=d.get("tail")))
        self._do_split(i, Directive.make("split", d.func, d.stage, var=y, outer=d.get("yo"),
                                         inner=d.get("yi"), factor=d.get("yfactor"),
                                         tail=d.get("tail")))
        self._do_reorder(i, Directive.make("reorder", d.func, d.stage,
                                           vars=[d.get("xi"), d.get("yi"), d.get("xo"), d.get("yo")]))

    def _do_reorder(self, i, d):
        st = self._stage(i, d)
        names = list(d.get("vars"))
        vs = [self._var(i, d, st, n) for n in names]
        self._target(d).reorder(*vs)
        slots = sorted(st.names.index(n) for n in names)
        for slot, n in zip(slots, names):
            st.names[slot] = n
        self._say(d, f"reorder({', '.join(names)})")

    def _lanes(self, i, d, kind: str):
        st = self._stage(i, d)
        name = d.get("var")
        v = self._var(i, d, st, name)
        factor = d.get("factor")
        # Without a factor the loop's extent must be a constant Halide can see: a split factor or
        # a bound we track, or one bounds inference derives from them (which they bound in turn).
        n = unrolled_extent(d, st.extent)
        n = 1 if math.isinf(n) else n
        limit = LIMITS["vector" if kind == "vectorize" else "unroll"]
        if n > limit:
            self._fail(i, d, f"{kind} over {n} lanes exceeds the limit of {limit}; split first")
        if st.unrolled * n > LIMITS["unrolled_body"]:
            self._fail(i, d, f"vectorize x unroll product {st.unrolled * n} in this stage exceeds "
                       f"{LIMITS['unrolled_body']}")
        st.unrolled *= n
        if factor is None:
            getattr(self._target(d), kind)(v)
            self._say(d, f"{kind}({name})")
        else:
            # Halide splits `name` into `name` (outer) and a hidden inner lane variable.
            inner = self._hidden_split(i, d, st, name, v, factor)
            getattr(self._target(d), kind)(inner)
            self._say(d, f"{kind}({name}, {factor}, hl.TailStrategy.{_TAIL[d.get('tail', 'auto')]})")

    def _do_vectorize(self, i, d):
        self._lanes(i, d, "vectorize")

    def _do_unroll(self, i, d):
        self._lanes(i, d, "unroll")

    def _do_parallel(self, i, d):
        st = self._stage(i, d)
        v = self._var(i, d, st, d.get("var"))
        if d.get("factor") is None:
            self._target(d).parallel(v)
            self._say(d, f"parallel({d.get('var')})")
        else:
            self._hidden_split(i, d, st, d.get("var"), v, d.get("factor"))
            self._target(d).parallel(v)
            self._say(d, f"parallel({d.get('var')}, {d.get('factor')})")

    def _hidden_split(self, i, d, st: _Stage, name: str, v, factor: int):
        """``split(name, name, <hidden>, factor)``, as Halide's ``vectorize/unroll/parallel(v,
        factor)`` do, but with an inner name of our own: Halide would name it from a
        process-wide counter (``v268``), which can collide with names an autoscheduler wrote."""
        hidden = f"_pypto_{d.op}{i}"
        rv = name in st.rvars
        inner = self._new(i, d, st, hidden, rv)
        self._target(d).split(v, v, inner, factor, _tail(d))
        k = st.names.index(name)
        st.names[k:k + 1] = [hidden, name]
        if rv:
            st.rvars.add(hidden)
        st.extent[hidden] = factor
        return inner

    def _do_serial(self, i, d):
        st = self._stage(i, d)
        self._target(d).serial(self._var(i, d, st, d.get("var")))
        self._say(d, f"serial({d.get('var')})")

    def _loop_level(self, i, d):
        at = d.get("at")
        g = self._func(i, d, at)
        var = d.get("var")
        for (fname, _stage), st in self.stages.items():
            if fname == at and var in st.names:
                return g, (hl.RVar(var) if var in st.rvars else hl.Var(var))
        # Halide resolves loop levels when it lowers, so a later directive may still create the
        # loop (autoschedulers emit compute_at before the consumer's split); check at the end.
        self.pending.append((i, d))
        return g, hl.Var(var)

    def check_pending(self) -> None:
        for i, d in self.pending:
            at, var = d.get("at"), d.get("var")
            loops = sorted({n for (fn, _s), st in self.stages.items() if fn == at for n in st.names})
            if var not in loops:
                self._fail(i, d, f"{at!r} has no loop {var!r}; its loops: {loops}")

    def _check_not_output(self, i, d):
        self._func(i, d, d.func)
        if any(f.name() == self.funcs[d.func].name() for f in self.built.outputs):
            self._fail(i, d, f"{d.func!r} is an output; outputs are always computed at root")

    def _do_compute_root(self, i, d):
        self._func(i, d, d.func)  # outputs are at root already; saying so again is harmless
        self.funcs[d.func].compute_root()
        self._say(d, "compute_root()")

    def _do_compute_inline(self, i, d):
        self._check_not_output(i, d)
        if self.funcs[d.func].num_update_definitions():
            self._fail(i, d, "a Func with update definitions cannot be inlined")
        self.funcs[d.func].compute_inline()
        self._say(d, "compute_inline()")

    def _do_compute_at(self, i, d):
        self._check_not_output(i, d)
        if d.get("at") == d.func:
            self._fail(i, d, "a Func cannot be computed inside itself")
        g, v = self._loop_level(i, d)
        self.funcs[d.func].compute_at(g, v)
        self._say(d, f"compute_at({d.get('at')}, {d.get('var')})")

    def _do_store_root(self, i, d):
        self._check_not_output(i, d)
        self.funcs[d.func].store_root()
        self._say(d, "store_root()")

    def _do_store_at(self, i, d):
        self._check_not_output(i, d)
        g, v = self._loop_level(i, d)
        self.funcs[d.func].store_at(g, v)
        self._say(d, f"store_at({d.get('at')}, {d.get('var')})")

    def _pure(self, i, d, name):
        f = self._func(i, d, d.func)
        args = [a.name() for a in f.args()]
        if name not in args:
            self._fail(i, d, f"{name!r} is not a pure dimension of {d.func!r}; its dimensions: {args}")
        return hl.Var(name)

    def _note_extent(self, func: str, var: str, extent: int) -> None:
        for (fname, _s), st in self.stages.items():
            if fname == func and var in st.names:
                st.extent[var] = extent

    def _do_reorder_storage(self, i, d):
        vs = [self._pure(i, d, n) for n in d.get("vars")]
        self.funcs[d.func].reorder_storage(vs)
        self._say(d, f"reorder_storage({', '.join(d.get('vars'))})")

    def _do_fold_storage(self, i, d):
        v = self._pure(i, d, d.get("var"))
        self.funcs[d.func].fold_storage(v, d.get("extent"), d.get("fold_forward", True))
        self._say(d, f"fold_storage({d.get('var')}, {d.get('extent')})")

    def _do_store_in(self, i, d):
        self._func(i, d, d.func)
        self.funcs[d.func].store_in(getattr(hl.MemoryType, _MEMORY[d.get("memory")]))
        self._say(d, f"store_in(hl.MemoryType.{_MEMORY[d.get('memory')]})")

    def _do_bound(self, i, d):
        v = self._pure(i, d, d.get("var"))
        self._note_extent(d.func, d.get("var"), d.get("extent"))
        self.funcs[d.func].bound(v, d.get("min"), d.get("extent"))
        self._say(d, f"bound({d.get('var')}, {d.get('min')}, {d.get('extent')})")

    def _do_bound_extent(self, i, d):
        v = self._pure(i, d, d.get("var"))
        self._note_extent(d.func, d.get("var"), d.get("extent"))
        self.funcs[d.func].bound_extent(v, d.get("extent"))
        self._say(d, f"bound_extent({d.get('var')}, {d.get('extent')})")

    def _do_align_bounds(self, i, d):
        v = self._pure(i, d, d.get("var"))
        self.funcs[d.func].align_bounds(v, d.get("modulus"), d.get("remainder", 0))
        self._say(d, f"align_bounds({d.get('var')}, {d.get('modulus')}, {d.get('remainder', 0)})")

    def _do_rfactor(self, i, d):
        st = self._stage(i, d)
        if d.stage == 0:
            self._fail(i, d, "rfactor applies to an update stage (stage >= 1)")
        name = d.get("intm")
        if name in self.funcs or name in self.images:
            self._fail(i, d, f"a Func named {name!r} already exists")
        pairs = []
        for r, v in d.get("pairs"):
            if r not in st.rvars or r not in st.names:
                self._fail(i, d, f"{r!r} is not an RVar of {d.func!r} stage {d.stage}; "
                           f"its RVars: {sorted(n for n in st.names if n in st.rvars)}")
            if v in st.names:
                self._fail(i, d, f"{v!r} already names a loop of this stage")
            pairs.append((hl.RVar(r), hl.Var(v)))
        intm = self.funcs[d.func].update(d.stage - 1).rfactor(pairs)
        self.funcs[name] = intm
        self._register(name, intm)
        f = self.funcs[d.func]
        self._refresh(d.func, d.stage, f, rvars={r for r, _ in d.get("pairs")})
        pv = ", ".join(f"({r}, {v})" for r, v in d.get("pairs"))
        self.transcript.append(f"{name} = {d.func}.update({d.stage - 1}).rfactor([{pv}])")

    def _do_atomic(self, i, d):
        self._stage(i, d)
        if d.stage == 0:
            self._fail(i, d, "atomic applies to an update stage (stage >= 1)")
        self._target(d).atomic(d.get("override_associativity_test", False))
        self._say(d, "atomic()")

    def _do_allow_race_conditions(self, i, d):
        """Lets an update's RVar be vectorized or parallel where Halide cannot prove its writes
        apart (a block copy over a 2-D RDom whose stores never meet: tile's)."""
        self._stage(i, d)
        if d.stage == 0:
            self._fail(i, d, "allow_race_conditions applies to an update stage (stage >= 1)")
        self._target(d).allow_race_conditions()
        self._say(d, "allow_race_conditions()")

    def _do_async(self, i, d):
        self._check_not_output(i, d)
        self.funcs[d.func].async_()
        self._say(d, "async_()")

    def _do_prefetch(self, i, d):
        st = self._stage(i, d)
        src = d.get("input")
        if src not in self.images and src not in self.funcs:
            self._fail(i, d, f"no input or Func named {src!r}; inputs: {sorted(self.images)}")
        obj = self.images.get(src) or self.funcs[src]
        at, frm = self._var(i, d, st, d.get("at")), self._var(i, d, st, d.get("from"))
        strategy = getattr(hl.PrefetchBoundStrategy, _PREFETCH[d.get("strategy", "guard_with_if")])
        self._target(d).prefetch(obj, at, frm, d.get("offset", 1), strategy)
        self._say(d, f"prefetch({src}, {d.get('at')}, {d.get('from')}, {d.get('offset', 1)})")

    def _do_specialize(self, i, d):
        """The stage again, for the case where dim ``unit_stride`` of the buffers it touches has
        stride 1. A stage that touches no buffer with that dim (a Func inside a program) is left
        as it is: the specialization could change nothing there."""
        self._stage(i, d)
        k = d.get("unit_stride")
        info = self.built.funcs.get(d.func)
        if info is None:
            return
        bufs: list[tuple[str, Any]] = []
        if info.is_output:
            outs = self.funcs[d.func].output_buffers()
            bufs += [(f"{d.func}.output_buffers()[{j}]" if len(outs) > 1 else
                      f"{d.func}.output_buffer()", b) for j, b in enumerate(outs)]
        bufs += [(name, im) for name, im in self.images.items()
                 if name in info.calls or f"{name}_im" in info.calls]
        bufs = [(name, b) for name, b in bufs if b.dimensions() > k]
        if not bufs:
            return
        cond = bufs[0][1].dim(k).stride() == 1
        for _, b in bufs[1:]:
            cond = cond & (b.dim(k).stride() == 1)
        self._target(d).specialize(cond)
        text = " & ".join(f"({name}.dim({k}).stride() == 1)" for name, _ in bufs)
        self._say(d, f"specialize({text})")

    def _do_wrap(self, i, d):
        src = d.func
        if src not in self.images and src not in self.funcs:
            self._fail(i, d, f"no input or Func named {src!r}; inputs: {sorted(self.images)}, "
                       f"Funcs: {sorted(self.funcs)}")
        consumer = self._func(i, d, d.get("consumer"))
        name = d.get("as")
        if name in self.funcs or name in self.images:
            self._fail(i, d, f"a Func named {name!r} already exists")
        obj = self.images.get(src) or self.funcs[src]
        w = obj.in_(consumer)
        self.funcs[name] = w
        self._register(name, w)
        self.transcript.append(f"{name} = {src}.in_({d.get('consumer')})")

    def _do_gpu_blocks(self, i, d):
        st = self._stage(i, d)
        vs = [self._var(i, d, st, n) for n in d.get("vars")]
        self._target(d).gpu_blocks(*vs)
        self._say(d, f"gpu_blocks({', '.join(d.get('vars'))})")

    def _do_gpu_threads(self, i, d):
        st = self._stage(i, d)
        vs = [self._var(i, d, st, n) for n in d.get("vars")]
        self._target(d).gpu_threads(*vs)
        self._say(d, f"gpu_threads({', '.join(d.get('vars'))})")

    def _do_gpu_lanes(self, i, d):
        st = self._stage(i, d)
        self._target(d).gpu_lanes(self._var(i, d, st, d.get("var")))
        self._say(d, f"gpu_lanes({d.get('var')})")

    def _do_gpu_single_thread(self, i, d):
        self._stage(i, d)
        self._target(d).gpu_single_thread()
        self._say(d, "gpu_single_thread()")

    def _do_gpu_tile(self, i, d):
        st = self._stage(i, d)
        x = self._var(i, d, st, d.get("x"))
        rv = d.get("x") in st.rvars
        bx, tx = (self._new(i, d, st, d.get(n), rv) for n in ("bx", "tx"))
        if d.get("y") is None:
            self._target(d).gpu_tile(x, bx, tx, d.get("xsize"), _tail(d))
            k = st.names.index(d.get("x"))
            st.names[k:k + 1] = [d.get("tx"), d.get("bx")]
            self._say(d, f"gpu_tile({d.get('x')}, {d.get('bx')}, {d.get('tx')}, {d.get('xsize')})")
            return
        y = self._var(i, d, st, d.get("y"))
        by, ty = (self._new(i, d, st, d.get(n), rv) for n in ("by", "ty"))
        if by is None or ty is None:
            self._fail(i, d, "a 2-D gpu_tile needs by and ty")
        self._target(d).gpu_tile(x, y, bx, by, tx, ty, d.get("xsize"), d.get("ysize"), _tail(d))
        names = [n for n in st.names if n not in (d.get("x"), d.get("y"))]
        st.names = [d.get("tx"), d.get("ty"), d.get("bx"), d.get("by")] + names
        self._say(d, f"gpu_tile({d.get('x')}, {d.get('y')}, {d.get('bx')}, {d.get('by')}, "
                     f"{d.get('tx')}, {d.get('ty')}, {d.get('xsize')}, {d.get('ysize')})")


def apply_schedule(built, schedule: Schedule) -> list[str]:
    """Applies ``schedule`` to ``built`` in place; returns the equivalent Halide Python lines."""
    if len(schedule.directives) > LIMITS["directives"]:
        raise ScheduleTooLongError(f"op {built.op.name!r}: {len(schedule.directives)} directives "
                                   f"exceed the limit of {LIMITS['directives']}")
    applier = Applier(built, built.op.name)
    for i, d in enumerate(schedule.directives):
        if d.op in FUNC_LEVEL and d.func in applier.images and d.op != "wrap":
            applier._fail(i, d, f"{d.func!r} is an input; only wrap applies to inputs")
        applier.apply(i, d)
    applier.check_pending()
    return applier.transcript
