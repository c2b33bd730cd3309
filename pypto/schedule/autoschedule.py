"""Importing Halide's autoschedulers (Adams2019, Mullapudi2016, Li2018) as PyPTO schedules.

Each autoscheduler runs on the op's pipeline for a concrete shape and returns its schedule as C++
source text. That text is never compiled or executed: a small strict parser reads the only
constructs the autoschedulers emit (Func/Var/RVar declarations and chains of scheduling calls) and
turns them into directives. Anything else is a ScheduleError, so an unexpected emitter change is
reported, not guessed at.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

import halide as hl

from ..errors import ScheduleError
from .directives import Directive
from .schedule import Schedule

AUTOSCHEDULERS = {"adams2019": "Adams2019", "mullapudi2016": "Mullapudi2016", "li2018": "Li2018"}
_loaded: set[str] = set()

_TAILS = {"Auto": "auto", "GuardWithIf": "guard_with_if", "ShiftInwards": "shift_inwards",
          "RoundUp": "round_up", "Predicate": "predicate", "PredicateLoads": "predicate_loads",
          "PredicateStores": "predicate_stores", "RoundUpAndBlend": "round_up_and_blend",
          "ShiftInwardsAndBlend": "shift_inwards_and_blend"}
_MEMORY = {"Auto": "auto", "Heap": "heap", "Stack": "stack", "Register": "register",
           "GPUShared": "gpu_shared", "GPUTexture": "gpu_texture", "LockedCache": "locked_cache"}


def load_plugin(name: str) -> str:
    """Loads an autoscheduler plugin shipped in the halide wheel; returns Halide's name for it."""
    key = name.lower()
    if key not in AUTOSCHEDULERS:
        raise ScheduleError(f"unknown autoscheduler {name!r}; known: {', '.join(AUTOSCHEDULERS)}")
    if key not in _loaded:
        lib = os.path.join(os.path.dirname(hl.__file__), "lib64", f"libautoschedule_{key}.so")
        if not os.path.exists(lib):
            raise ScheduleError(f"the {AUTOSCHEDULERS[key]} plugin is missing ({lib}); "
                                "reinstall the halide wheel")
        hl.load_plugin(lib)
        _loaded.add(key)
    return AUTOSCHEDULERS[key]


def set_estimates(built, dims: Mapping[str, int]) -> None:
    """Tells Halide the concrete extents of every input and output (autoschedulers need them)."""
    op = built.op
    for spec, im in zip(op.inputs, built.images):
        im.set_estimates([(0, dims[d]) for d in reversed(spec.dims)])
    for spec, f in zip(op.outputs, built.outputs):
        f.set_estimates([(0, dims[d]) for d in reversed(spec.dims)])


def autoschedule(built, dims: Mapping[str, int], name: str, target: hl.Target,
                 parallelism: int = 2) -> tuple[list[Directive], str]:
    """Runs autoscheduler ``name`` on ``built`` (which it schedules in place).

    Returns the schedule as directives and the C++ text it was parsed from.
    """
    hl_name = load_plugin(name)
    set_estimates(built, dims)
    params = {"parallelism": str(parallelism)}
    try:
        result = built.pipeline.apply_autoscheduler(target, hl.AutoschedulerParams(hl_name, params))
    except hl.HalideError as e:
        raise ScheduleError(f"op {built.op.name!r}: {hl_name} failed: {str(e).strip()}") from None
    text = result.schedule_source
    return parse_source(text, built), text


# -- the parser ------------------------------------------------------------------------------------
_TOKEN = re.compile(r"\s*(?:(?P<num>-?\d+)|(?P<id>[A-Za-z_][A-Za-z0-9_$]*(?:::[A-Za-z_]\w*)*)"
                    r"|(?P<str>\"[^\"\n]*\")|(?P<p>[().,{}\[\]=;]))")


def _tokens(text: str) -> list[tuple[str, str]]:
    text = re.sub(r"//[^\n]*", "", text)
    out, pos = [], 0
    while pos < len(text):
        if text[pos:].strip() == "":
            break
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            raise ScheduleError(f"autoscheduler output: cannot read {text[pos:pos + 40]!r}")
        kind = m.lastgroup
        out.append((kind, m.group(kind)))
        pos = m.end()
    return out


class _Parser:
    def __init__(self, text: str, built):
        self.toks = _tokens(text)
        self.i = 0
        self.built = built
        self.funcs: dict[str, str] = {}   # C++ identifier -> PyPTO Func name
        self.vars: dict[str, str] = {}    # C++ identifier -> loop variable name
        self.out: list[Directive] = []
        self.base = {info.func.name(): n for n, info in built.funcs.items()}

    # token helpers
    def peek(self, k=0):
        j = self.i + k
        return self.toks[j] if j < len(self.toks) else ("eof", "")

    def take(self, value=None, kind=None):
        t = self.peek()
        if (value is not None and t[1] != value) or (kind is not None and t[0] != kind):
            want = value or kind
            raise ScheduleError(f"autoscheduler output: expected {want!r}, found {t[1]!r} "
                                f"(token {self.i})")
        self.i += 1
        return t[1]

    def parse(self) -> list[Directive]:
        while self.peek()[0] != "eof":
            t = self.peek()[1]
            if t in ("{", "}", ";"):
                self.i += 1
            elif t == "Func":
                self._func_decl()
            elif t in ("Var", "RVar"):
                self._var_decl()
            else:
                self._chain()
        return self.out

    def _func_decl(self):
        self.take("Func")
        ident = self.take(kind="id")
        self.take("=")
        self.take("pipeline.get_func" if self.peek()[1] == "pipeline.get_func" else "pipeline")
        if self.peek()[1] == ".":
            self.take(".")
            self.take("get_func")
        self.take("(")
        idx = int(self.take(kind="num"))
        self.take(")")
        self.take(";")
        if not 0 <= idx < len(self.built.order):
            raise ScheduleError(f"autoscheduler output: no Func #{idx} in the pipeline")
        real = self.built.order[idx]
        self.funcs[ident] = self.base.get(real, real)

    def _stage_ref(self):
        """IDENT [.update(N)] -> (func name, stage)."""
        ident = self.take(kind="id")
        func = self.funcs.get(ident) or self.base.get(ident) or ident
        stage = 0
        if self.peek()[1] == "." and self.peek(1)[1] == "update":
            self.take(".")
            self.take("update")
            self.take("(")
            # update() is update(0)
            stage = (int(self.take(kind="num")) if self.peek()[0] == "num" else 0) + 1
            self.take(")")
        return func, stage

    def _var_decl(self):
        self.take()
        ident = self.take(kind="id")
        if self.peek()[1] == "=":
            # Var n = f.args()[j];
            self.take("=")
            func, _ = self._stage_ref()
            self.take(".")
            self.take("args")
            self.take("(")
            self.take(")")
            j = self._index()
            self.vars[ident] = self._initial(func, 0)[j]
        else:
            self.take("(")
            if self.peek()[0] == "str":
                self.vars[ident] = self.take(kind="str").strip('"')
            else:
                # Var m(out.get_schedule().dims()[1].var)  /  ...rvars()[0].var
                func, stage = self._stage_ref()
                self.take(".")
                self.take("get_schedule")
                self.take("(")
                self.take(")")
                self.take(".")
                which = self.take(kind="id")
                self.take("(")
                self.take(")")
                j = self._index()
                self.take(".")
                self.take("var")
                names = self._initial(func, stage)
                if which == "rvars":
                    names = list(self.built.funcs[func].updates[stage - 1])
                elif which != "dims":
                    raise ScheduleError(f"autoscheduler output: unsupported {which}()")
                self.vars[ident] = names[j]
            self.take(")")
        self.take(";")

    def _index(self) -> int:
        self.take("[")
        j = int(self.take(kind="num"))
        self.take("]")
        return j

    def _initial(self, func: str, stage: int) -> list[str]:
        if func not in self.built.funcs:
            raise ScheduleError(f"autoscheduler output names unknown Func {func!r}")
        info = self.built.funcs[func]
        if stage == 0:
            return list(info.args)
        return list(info.updates[stage - 1]) + list(info.update_args[stage - 1])

    def _arg(self):
        kind, val = self.peek()
        if val == "{":
            self.take("{")
            items = []
            while self.peek()[1] != "}":
                items.append(self._arg())
                if self.peek()[1] == ",":
                    self.take(",")
            self.take("}")
            return items
        self.take()
        if kind == "num":
            return int(val)
        if "::" in val:
            return val.split("::")[-1]
        return self.vars.get(val, val)

    def _chain(self):
        # ``f_intm = f.update(0).rfactor({{r, v}})...``: the chain goes on with the new Func
        named = None
        if self.peek()[0] == "id" and self.peek(1)[1] == "=":
            named = self.take(kind="id")
            self.take("=")
        func, stage = self._stage_ref()
        while self.peek()[1] == ".":
            self.take(".")
            method = self.take(kind="id")
            self.take("(")
            args = []
            while self.peek()[1] != ")":
                args.append(self._arg())
                if self.peek()[1] == ",":
                    self.take(",")
            self.take(")")
            if method == "rfactor":
                if named is None:
                    raise ScheduleError(f"autoscheduler output: rfactor on {func} names no "
                                        f"Func (expected NAME = {func}.update(N).rfactor(...))")
                pairs = args[0] if len(args) == 1 and isinstance(args[0], list) else args
                self.out.append(Directive.make("rfactor", func, stage, pairs=pairs,
                                               intm=named))
                self.funcs[named] = named
                func, stage = named, 0
                continue
            self.out.append(self._directive(func, stage, method, args))
        if self.peek()[1] == ";":     # Halide's text sometimes leaves one out
            self.take(";")

    def _directive(self, func, stage, m, a) -> Directive:
        D = Directive.make

        def tail(k):
            return _TAILS[a[k]] if len(a) > k else None

        try:
            if m == "split":
                return D("split", func, stage, var=a[0], outer=a[1], inner=a[2], factor=a[3],
                         tail=tail(4))
            if m == "fuse":
                return D("fuse", func, stage, inner=a[0], outer=a[1], fused=a[2])
            if m == "reorder":
                names = a[0] if len(a) == 1 and isinstance(a[0], list) else a
                return D("reorder", func, stage, vars=names)
            if m in ("vectorize", "unroll", "parallel"):
                return D(m, func, stage, var=a[0], factor=a[1] if len(a) > 1 else None,
                         tail=tail(2))
            if m == "serial":
                return D("serial", func, stage, var=a[0])
            if m in ("compute_root", "compute_inline", "store_root"):
                return D(m, func)
            if m in ("compute_at", "store_at"):
                at = self.funcs.get(a[0]) or self.base.get(a[0]) or a[0]
                return D(m, func, at=at, var=a[1])
            if m == "store_in":
                return D("store_in", func, memory=_MEMORY[a[0]])
            if m == "reorder_storage":
                return D("reorder_storage", func, vars=a)
            if m == "bound":
                return D("bound", func, var=a[0], min=a[1], extent=a[2])
        except (IndexError, KeyError, TypeError) as e:
            raise ScheduleError(f"autoscheduler output: malformed {m}{tuple(a)} on {func}: {e}") from None
        raise ScheduleError(f"autoscheduler output: unsupported call .{m}() on {func}")


def parse_source(text: str, built) -> list[Directive]:
    """Directives from an autoscheduler's C++ schedule text, read as data (never compiled)."""
    return _Parser(text, built).parse()


def import_schedule(op, dtypes, params, dims, name: str, target: hl.Target) -> Schedule:
    """Runs autoscheduler ``name`` for a concrete call and returns its schedule as data."""
    from ..compiler.lower import build, fingerprint

    built = build(op, dtypes, params)
    fp = fingerprint(built)
    directives, _ = autoschedule(built, dims, name, target)
    return Schedule(op=op.name, directives=tuple(directives), fingerprint=fp)
