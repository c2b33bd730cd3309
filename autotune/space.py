"""Search spaces derived from an op's algorithm, expressed the Optuna define-by-run way.

Nothing here is written per op. The space is read off the pipeline's structure:

* the first output is tiled: ``x`` (innermost dim) by ``tile_x``, the next dim by ``tile_y``; inside
  a tile, vectors of ``vec`` lanes, ``tile_x / vec`` vector groups and register rows (``rows``)
  that may be unrolled; the outer tile loops run in parallel;
* every other Func is placed: inlined (pure Funcs only), at root, or at one of the output's loop
  levels ``yo`` (a row of tiles), ``xo`` (one tile) or ``rb`` (one register block) — a placement
  inside a consumer's placement is lifted to it, so every sample is legal;
* every reduction (an update definition) picks a strategy: vectorize its innermost pure dim with the
  reduction loops inside the lanes (``vec_pure``), or ``rfactor`` its innermost reduction loop into
  vector-wide partial results, or, for a reduction whose output is tiny (a full sum), a parallel
  two-level ``rfactor`` over chunks (``par_rfactor``); and it may unroll its reduction loop;
* every input that a reduction reads may be staged (copied) at a tile level;
* an op whose default template declares knobs (matmul's register block, tile and k-block sizes)
  also offers ``plan = "template"``, which searches those knobs instead of the generic structure.

An op may add hints (``Op.tune_hints``: fixed values or narrowed choices per knob). Every sampled
point becomes a :class:`~pypto.schedule.schedule.Schedule`, so whatever the tuner finds is stored,
read and replayed like any other schedule.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, Protocol

from pypto.schedule.defaults import template_knobs, template_schedule, vector_lanes
from pypto.schedule.directives import LIMITS, Directive
from pypto.schedule.schedule import Schedule

D = Directive.make
LEVELS = ("root", "yo", "xo", "rb")  # outermost to innermost
MAX_UNROLL_BODY = 64


class Suggest(Protocol):
    """What the space needs of a trial (an Optuna trial, or a fixed dict for replays)."""

    def suggest_categorical(self, name: str, choices: list) -> Any: ...


class FixedPoint:
    """A point given as a dict; unknown knobs take their first choice (for seeds and tests)."""

    def __init__(self, params: Mapping[str, Any]):
        self.params = dict(params)
        self.used: dict[str, Any] = {}

    def suggest_categorical(self, name, choices):
        v = self.params.get(name, choices[0])
        if v not in choices:
            v = choices[0]
        self.used[name] = v
        return v


def splittable(info, u: int) -> bool:
    """Whether update ``u`` of a Func may be split by rfactor: it reads the Func at its own
    left-hand side (a reduction). Block copies (a program's joins, concat) and scans do not, and
    Halide refuses them (every conv2d backward trial once failed to compile on that)."""
    reads = getattr(info, "self_reads", ())
    return u < len(reads) and reads[u]


def _pow2s(lo: int, hi: int) -> list[int]:
    out, v = [], lo
    while v <= hi:
        out.append(v)
        v *= 2
    return out or [lo]


@dataclasses.dataclass
class Space:
    """The tunable structure of one op at one shape and target."""

    built: Any
    dims: Mapping[str, int]
    lanes: int
    hints: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    def __post_init__(self):
        funcs = self.built.funcs
        self.outputs = [i for i in funcs.values() if i.is_output]
        self.anchor = self.outputs[0]
        self.others = [i for i in funcs.values() if not i.is_input and not i.is_output]
        self.consumers: dict[str, set[str]] = {n: set() for n in funcs}
        for info in funcs.values():
            for c in info.calls:
                self.consumers.setdefault(c, set()).add(info.name)
        # A program's joins have update stages that are block copies, not reductions: they are
        # scheduled as copies (and rfactor is offered only to updates that reduce).
        joins = getattr(getattr(self.built.op, "plan", None), "join_specs", {}) or {}
        self.reductions = [i for i in funcs.values()
                           if not i.is_input and i.updates and i.name not in joins]

    # -- helpers ------------------------------------------------------------------------------
    def extent(self, var: str) -> int | None:
        return self.dims.get(var.upper())

    def _choose(self, t: Suggest, name: str, choices: list, valid: list | None = None):
        return choose(t, self.hints, name, choices, valid)

    # -- sampling -----------------------------------------------------------------------------
    def sample(self, t: Suggest) -> Schedule:
        """Draws one point and returns its schedule (legal by construction)."""
        op = self.built.op
        if hasattr(op, "fused_variant"):
            # A program: the fused default's structure with its choices (anchors moved onto
            # their pointwise consumers or not; each kept value kept or recomputed where it is
            # read), or the generic anchored space below.
            if self._choose(t, "plan", ["fused", "generic"]) == "fused":
                epilogues = self._choose(t, "fused.epilogues", [True, False])
                again = frozenset(n for n in op.kept_values() if n in self.built.funcs and
                                  self._choose(t, f"fused.{n}", ["keep", "recompute"]) ==
                                  "recompute")
                return op.fused_variant(self.built, self.dims, self.lanes, epilogues=epilogues,
                                        recompute=again)
        knobs = template_knobs(self.built.op.name)
        if knobs and self._choose(t, "plan", ["template", "generic"]) == "template":
            values = {k: self._choose(t, f"tpl.{k}", list(v)) for k, v in knobs.items()}
            return Schedule(op=self.built.op.name, directives=tuple(
                template_schedule(self.built, self.dims, self.lanes, values)))
        directives: list[Directive] = []
        a = self.anchor
        x = a.args[0]
        y = a.args[1] if len(a.args) > 1 else None
        ex = self.extent(x) or 1
        ey = (self.extent(y) or 1) if y else 1
        vec_valid = [v for v in (self.lanes, 2 * self.lanes) if v <= max(ex, 1)] or \
            [v for v in _pow2s(1, self.lanes) if v <= ex] or [1]
        vec = self._choose(t, "vec", vec_valid)
        strategies = {r.name: self._strategies(r, vec, t) for r in self.reductions}
        levels_present = ["root"]
        names: dict[str, tuple[str, str]] = {}
        if ex >= vec and vec > 1:
            groups = self._choose(t, "tile_x_vectors", [1, 2, 4, 8, 16, 32],
                                  [g for g in (1, 2, 4, 8, 16, 32) if g * vec <= ex])
            tx = groups * vec
            directives.append(D("split", a.name, var=x, outer="xo", inner="xi", factor=tx))
            directives.append(D("split", a.name, var="xi", outer="xg", inner="xv", factor=vec))
            unroll_x = self._choose(t, "unroll_x", [True, False]) and groups <= 8
            x_loops = ["xv", "xg"]
            names["xo"] = (a.name, "xo")
        else:
            tx, groups, unroll_x, x_loops = ex, 1, False, [x]
        rows = 1
        if y:
            all_ty = [1, 2, 4, 8, 16, 32, 64, 128]
            ty = self._choose(t, "tile_y", all_ty, [v for v in all_ty if v <= ey])
            if ty > 1:
                row_valid = [r for r in (1, 2, 4, 8) if r <= ty and ty % r == 0
                             and r * (groups if unroll_x else 1) <= MAX_UNROLL_BODY]
                rows = self._choose(t, "rows", [1, 2, 4, 8], row_valid)
                directives.append(D("split", a.name, var=y, outer="yo", inner="yi", factor=ty))
                if rows > 1:
                    directives.append(D("split", a.name, var="yi", outer="yb", inner="yr", factor=rows))
                    y_inner = ["yr", "yb"]
                    names["rb"] = (a.name, "yb")
                else:
                    y_inner = ["yi"]
                    names["rb"] = (a.name, "yi")
                names["yo"] = (a.name, "yo")
                outer_x = ["xo"] if "xo" in names else []
                order = x_loops + y_inner + outer_x + ["yo"]
                directives.append(D("reorder", a.name, vars=order))
            else:
                outer_x = ["xo"] if "xo" in names else []
                names["yo"] = (a.name, y)
                order = x_loops + outer_x + [y]
                if len(order) > 1:
                    directives.append(D("reorder", a.name, vars=order))
        # Parallel: the outermost loop with work in it.
        outer_dims = [d for d in a.args[2:] if (self.extent(d) or 1) > 1]
        par = outer_dims[-1] if outer_dims else (names["yo"][1] if y and ey > 1 else
                                                 ("xo" if "xo" in names else None))
        if par:
            directives.append(D("parallel", a.name, var=par))
        if vec > 1 and ex >= vec:
            directives.append(D("vectorize", a.name, var="xv"))
            if unroll_x and groups > 1:
                directives.append(D("unroll", a.name, var="xg"))
        if rows > 1 and self._choose(t, "unroll_rows", [True, False]):
            directives.append(D("unroll", a.name, var="yr"))
        for lv in ("yo", "xo", "rb"):
            if lv in names:
                levels_present.append(lv)
        # Placement of every other Func, lifted so that no producer sits inside a consumer.
        level: dict[str, str] = {}
        for info in self.others:
            valid = list(levels_present)
            if not info.updates:
                valid = ["inline"] + valid
            if any(c in {o.name for o in self.outputs[1:]} for c in self.consumers[info.name]):
                valid = ["root"]  # read by a second output: it cannot live in the first's loops
            level[info.name] = self._choose(t, f"{info.name}.at", ["inline", *LEVELS], valid)
        staged = {}
        for r in self.reductions:
            if any(st in ("rfactor", "par_rfactor") for st, _ in strategies[r.name]):
                continue  # rfactor rewrites the consumer; a staging copy would lose its reader
            for src in sorted(r.calls):
                if src.endswith("_im") and self.built.funcs.get(src) and self.built.funcs[src].is_input:
                    at = self._choose(t, f"stage.{src[:-3]}.{r.name}", ["none", *LEVELS[1:]],
                                      ["none"] + levels_present[1:])
                    if at != "none":
                        staged[f"{src[:-3]}_{r.name}_stage"] = (src[:-3], r.name, at)
                        level[f"{src[:-3]}_{r.name}_stage"] = at
        level = self._repair(level, staged)
        for name, (src, consumer, _) in staged.items():
            directives.append(D("wrap", src, consumer=consumer, **{"as": name}))
        for info in self.others:
            directives += self._place(info.name, level[info.name], names, vec, t, info)
        for name in staged:
            directives += self._place(name, level[name], names, vec, t, None)  # a copy
        for r in self.reductions:
            directives += self._reduce(r, vec, strategies[r.name])
        return Schedule(op=self.built.op.name, directives=tuple(directives))

    def _repair(self, level: dict[str, str], staged) -> dict[str, str]:
        readers: dict[str, set[str]] = {n: set(c) for n, c in self.consumers.items()}
        for name, (src, consumer, _) in staged.items():
            readers.setdefault(name, set()).add(consumer)
        return lift_to_consumers(level, readers, self.anchor.name, {o.name for o in self.outputs},
                                 LEVELS)

    def _place(self, name, lv, names, vec, t, info) -> list[Directive]:
        out: list[Directive] = []
        if lv == "inline":
            return [D("compute_inline", name)]
        if lv == "root":
            out.append(D("compute_root", name))
        else:
            at_func, at_var = names[lv]
            out.append(D("compute_at", name, at=at_func, var=at_var))
        if info is None:
            # A staging copy of an input: Halide names its pure vars _0 (innermost), _1, ...
            return out + ([D("vectorize", name, var="_0", factor=vec, tail="guard_with_if")]
                          if vec > 1 else [])
        args = info.args
        if args and vec > 1 and (self.extent(args[0]) or vec) >= vec:
            out.append(D("vectorize", name, var=args[0], factor=vec, tail="guard_with_if"))
        if lv == "root" and len(args) > 1 and (self.extent(args[-1]) or 2) > 1:
            out.append(D("parallel", name, var=args[-1]))
        return out

    def _strategies(self, r, vec, t) -> list[tuple[str, dict]]:
        """Per update of reduction ``r``: (strategy, its knobs)."""
        out = []
        small = all((self.extent(a) or 1) <= 1 for a in r.args)
        for u, rvars in enumerate(r.updates):
            pure = [a for a in r.args if a in r.update_args[u]]
            valid = []
            if pure and (self.extent(pure[0]) or 0) >= vec > 1:
                valid.append("vec_pure")
            splits = rvars and splittable(r, u)
            if vec > 1 and splits:
                valid.append("rfactor")
            if small and r.is_output and splits:
                valid.append("par_rfactor")
            valid.append("serial")
            strat = self._choose(t, f"{r.name}.u{u}.strategy",
                                 ["vec_pure", "rfactor", "par_rfactor", "serial"], valid)
            knobs = {"unroll": self._choose(t, f"{r.name}.u{u}.unroll", [1, 2, 4])}
            if strat == "par_rfactor":
                knobs["chunk"] = self._choose(t, f"{r.name}.u{u}.chunk", [1 << 12, 1 << 14, 1 << 16])
            out.append((strat, knobs))
        return out

    def _reduce(self, r, vec, strategies) -> list[Directive]:
        out: list[Directive] = []
        for u, rvars in enumerate(r.updates):
            stage = u + 1
            strat, knobs = strategies[u]
            if not rvars:
                continue
            if strat == "serial":
                out.append(D("serial", r.name, stage, var=rvars[-1]))  # scheduled, on purpose
                continue
            pure = [a for a in r.args if a in r.update_args[u]]
            r0 = rvars[0]
            if strat == "vec_pure":
                p0 = pure[0]
                out += [D("split", r.name, stage, var=p0, outer=f"{p0}_o", inner=f"{p0}_v",
                          factor=vec, tail="guard_with_if"),
                        D("reorder", r.name, stage, vars=[f"{p0}_v", *rvars, f"{p0}_o"]),
                        D("vectorize", r.name, stage, var=f"{p0}_v")]
                k = knobs["unroll"]
                if k > 1:
                    out.append(D("unroll", r.name, stage, var=r0, factor=k))
            elif strat == "rfactor":
                intm = f"{r.name}_u{u}_partial"
                out += [D("split", r.name, stage, var=r0, outer="r_o", inner="r_v", factor=vec),
                        D("rfactor", r.name, stage, pairs=[["r_v", "lane"]], intm=intm),
                        D("compute_at", intm, at=r.name, var=pure[-1] if pure else "r_v"),
                        D("vectorize", intm, var="lane"),
                        D("reorder", intm, 1, vars=["lane", "r_o", *rvars[1:]]),
                        D("vectorize", intm, 1, var="lane")]
                k = knobs["unroll"]
                if k > 1:
                    out.append(D("unroll", intm, 1, var="r_o", factor=k))
            elif strat == "par_rfactor":
                chunk = knobs["chunk"]
                intm = f"{r.name}_u{u}_chunks"
                out += [D("split", r.name, stage, var=r0, outer="r_c", inner="r_i", factor=chunk),
                        D("split", r.name, stage, var="r_i", outer="r_io", inner="r_v", factor=vec),
                        D("rfactor", r.name, stage, pairs=[["r_c", "chunk"], ["r_v", "lane"]],
                          intm=intm),
                        D("compute_root", intm),
                        D("vectorize", intm, var="lane"),
                        D("reorder", intm, 1, vars=["lane", "r_io", *rvars[1:], "chunk"]),
                        D("vectorize", intm, 1, var="lane"),
                        D("parallel", intm, 1, var="chunk")]
                k = knobs["unroll"]
                if k > 1:
                    out.append(D("unroll", intm, 1, var="r_io", factor=k))
        return out


def template_seed(op_name: str) -> dict[str, Any] | None:
    """The knob values of an op's default template (enqueued first, so search starts there)."""
    knobs = template_knobs(op_name)
    if not knobs:
        return None
    return {"plan": "template", **{f"tpl.{k}": v[0] for k, v in knobs.items()}}


def space_for(built, dims: Mapping[str, int], target) -> Space:
    if target.has_gpu_feature():  # blocks, threads and shared memory instead of vectors and cores
        from .gpu_space import gpu_space_for

        return gpu_space_for(built, dims, target)
    dtype = built.out_dtypes[0]
    lanes = vector_lanes(target, dtype if dtype != "bool" else "uint8")
    hints = getattr(built.op, "tune_hints", None) or {}
    return Space(built=built, dims=dims, lanes=lanes, hints=hints)


assert LIMITS["unroll"] >= MAX_UNROLL_BODY


def lift_to_consumers(level: dict[str, str], readers, anchor: str, outputs: set[str],
                      levels: tuple[str, ...]) -> dict[str, str]:
    """Lifts each producer to at most its consumers' level; inline consumers pass theirs through.

    ``levels`` runs outermost first ("root" ... innermost); a producer read by another output
    than the ``anchor`` must be at root. A placement inside its consumer would be illegal in
    Halide, so this is the legality repair both search spaces apply to sampled placements.
    """
    rank = {lv: i for i, lv in enumerate(levels)}
    inner = len(levels) - 1

    def limit(name: str, seen=()) -> int:
        best = inner
        for c in readers.get(name, ()):
            if c == anchor:
                continue
            if c in outputs:
                return 0
            if c in seen:
                continue
            lv = level.get(c)
            if lv == "inline":
                best = min(best, limit(c, seen + (c,)))
            elif lv is not None:
                best = min(best, rank[lv])
        return best

    changed = True
    while changed:
        changed = False
        for name, lv in list(level.items()):
            if lv == "inline":
                continue
            cap = limit(name)
            if rank[lv] > cap:
                level[name] = levels[cap]
                changed = True
    return level


def choose(t, hints: Mapping, name: str, choices: list, valid: list | None = None):
    """Suggests ``name`` from a fixed list (Optuna needs one per name) and clamps to ``valid``.

    A value outside ``valid`` becomes the largest valid value below it (or the smallest valid
    one), so a trial's effective schedule is always legal; hints fix or narrow a knob.
    """
    hint = hints.get(name)
    if hint is not None and not isinstance(hint, (list, tuple)):
        choices = [hint]
    elif hint is not None:
        choices = [c for c in choices if c in hint] or choices
    v = t.suggest_categorical(name, list(choices))
    if valid is None or v in valid:
        return v
    if not valid:
        return choices[0]
    if not isinstance(v, (int, float)) or isinstance(v, bool):
        return valid[0]
    try:
        below = [c for c in valid if c <= v]
        return max(below) if below else min(valid)
    except TypeError:  # a list of names: no order to clamp along
        return valid[0]
