"""Schedule directives: frozen records named exactly like Halide's scheduling methods.

A directive is ``Directive(op, func, stage, args)``: ``op`` is a Halide method name (``split``,
``vectorize``, ``compute_at``...), ``func`` the Func it acts on, ``stage`` 0 for the pure definition
and k for the k-th update (Halide's ``f.update(k - 1)``), and ``args`` a mapping of named arguments.

The grammar below (:data:`GRAMMAR`) is the only description of what a directive may hold. Checking a
directive against it needs no Halide: types, name syntax, enumerations and every numeric bound are
validated here, so that a hostile or broken file can neither run code nor exhaust the compiler.

Differences from Halide's vocabulary, listed once:
- ``stage`` replaces ``f.update(k)``: stage 0 is the pure definition, stage k is ``update(k - 1)``.
- ``async`` is spelled ``async`` in files (``async_`` in Python, where ``async`` is a keyword).
- ``rfactor`` names the intermediate Func it creates (``intm``), so later directives can schedule it.
- ``wrap`` is Halide's ``f.in_(g)``: a staging copy of ``func`` used by ``consumer``, named ``as``.
- ``specialize`` takes no Expr: its condition is always "dim ``unit_stride`` of every buffer the
  stage touches directly (its own output buffer, the inputs it reads) has stride 1" (dim 0 has it
  by Halide's default). The stage's schedule up to that point is compiled twice, once knowing the
  strides (dense vector loads and stores instead of gathers and scatters), so it comes last.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping
from typing import Any

from ..errors import ScheduleError

NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_$.]{0,63}\Z")

#: Upper bounds on every factor a schedule may ask for. They keep compile time and memory bounded:
#: Halide's compile time grows much faster than the unroll factor (unroll 1024 takes about a minute).
LIMITS = {
    "directives": 1024,      # directives in one schedule (a program joining three 32-step
                             # gradients holds ~400 for its block copies alone)
    "split": 1 << 26,        # split / tile factors (a split costs no compile time; Adams2019
                             # splits a 16M-element loop by 1M)
    "vector": 64,            # vector lanes of one vectorize
    "unroll": 64,            # unroll factor of one loop
    "unrolled_body": 1024,   # product of vector and unroll extents in one stage's loop nest
    "parallel_factor": 1 << 20,
    "bound": 1 << 31,
    "fold": 1 << 16,
    "prefetch_offset": 64,
    "gpu_threads": 1024,     # threads per block
    "vars": 16,              # names in one reorder / reorder_storage
}

TAILS = ("auto", "guard_with_if", "shift_inwards", "round_up", "predicate", "predicate_loads",
         "predicate_stores", "round_up_and_blend", "shift_inwards_and_blend")
MEMORY_TYPES = ("auto", "heap", "stack", "register", "gpu_shared", "gpu_texture", "locked_cache",
                "vtcm")
PREFETCH_STRATEGIES = ("clamp", "guard_with_if", "non_faulting")

# Argument kinds:
#   var      an existing loop variable of the stage        newvar  a fresh variable name
#   vars     a list of existing loop variables              func    an existing Func name
#   int:K    an int bounded by LIMITS[K] (>= 1)             sint    a signed int within +-LIMITS["bound"]
#   enum:X   one of the tuple X above                       bool    true/false
#   pairs    a list of [rvar, newvar] pairs (rfactor)       name    a fresh Func name
# A trailing "?" makes an argument optional; a default of None means "Halide's default".
GRAMMAR: dict[str, tuple[tuple[str, str], ...]] = {
    "split": (("var", "var"), ("outer", "newvar"), ("inner", "newvar"), ("factor", "int:split"),
              ("tail", "enum:TAILS?")),
    "fuse": (("inner", "var"), ("outer", "var"), ("fused", "newvar")),
    "tile": (("x", "var"), ("y", "var"), ("xo", "newvar"), ("yo", "newvar"), ("xi", "newvar"),
             ("yi", "newvar"), ("xfactor", "int:split"), ("yfactor", "int:split"),
             ("tail", "enum:TAILS?")),
    "reorder": (("vars", "vars"),),
    "vectorize": (("var", "var"), ("factor", "int:vector?"), ("tail", "enum:TAILS?")),
    "unroll": (("var", "var"), ("factor", "int:unroll?"), ("tail", "enum:TAILS?")),
    "parallel": (("var", "var"), ("factor", "int:parallel_factor?"), ("tail", "enum:TAILS?")),
    "serial": (("var", "var"),),
    "compute_root": (),
    "compute_at": (("at", "func"), ("var", "atvar")),
    "compute_inline": (),
    "store_root": (),
    "store_at": (("at", "func"), ("var", "atvar")),
    "reorder_storage": (("vars", "purevars"),),
    "fold_storage": (("var", "purevar"), ("extent", "int:fold"), ("fold_forward", "bool?")),
    "store_in": (("memory", "enum:MEMORY_TYPES"),),
    "bound": (("var", "purevar"), ("min", "sint"), ("extent", "int:bound")),
    "bound_extent": (("var", "purevar"), ("extent", "int:bound")),
    "align_bounds": (("var", "purevar"), ("modulus", "int:split"), ("remainder", "sint?")),
    "rfactor": (("pairs", "pairs"), ("intm", "name")),
    "atomic": (("override_associativity_test", "bool?"),),
    "allow_race_conditions": (),
    "async": (),
    "prefetch": (("input", "func"), ("at", "var"), ("from", "var"), ("offset", "int:prefetch_offset?"),
                 ("strategy", "enum:PREFETCH_STRATEGIES?")),
    "wrap": (("consumer", "func"), ("as", "name")),
    "specialize": (("unit_stride", "int:vars"),),
    "gpu_blocks": (("vars", "vars"),),
    "gpu_threads": (("vars", "vars"),),
    "gpu_lanes": (("var", "var"),),
    "gpu_single_thread": (),
    "gpu_tile": (("x", "var"), ("y", "var?"), ("bx", "newvar"), ("by", "newvar?"), ("tx", "newvar"),
                 ("ty", "newvar?"), ("xsize", "int:gpu_threads"), ("ysize", "int:gpu_threads?"),
                 ("tail", "enum:TAILS?")),
}

#: Directives that act on a whole Func (always stage 0) rather than on one stage's loops.
FUNC_LEVEL = {"compute_root", "compute_at", "compute_inline", "store_root", "store_at",
              "reorder_storage", "fold_storage", "store_in", "bound", "bound_extent", "align_bounds",
              "async", "wrap"}

_ENUMS = {"TAILS": TAILS, "MEMORY_TYPES": MEMORY_TYPES, "PREFETCH_STRATEGIES": PREFETCH_STRATEGIES}


@dataclasses.dataclass(frozen=True)
class Directive:
    """One scheduling call: ``op`` on ``func`` (stage ``stage``) with named ``args``."""

    op: str
    func: str
    stage: int = 0
    args: tuple[tuple[str, Any], ...] = ()

    @staticmethod
    def make(op: str, func: str, stage: int = 0, **args) -> "Directive":
        """Builds a directive from keyword arguments, dropping those left at None."""
        items = tuple((k, _freeze(v)) for k, v in sorted(args.items()) if v is not None)
        d = Directive(op, func, stage, items)
        check_directive(d)
        return d

    def get(self, name: str, default=None):
        for k, v in self.args:
            if k == name:
                return v
        return default

    @property
    def kwargs(self) -> dict[str, Any]:
        return dict(self.args)

    def to_json(self) -> dict:
        out: dict[str, Any] = {"op": self.op, "func": self.func}
        if self.stage:
            out["stage"] = self.stage
        if self.args:
            out["args"] = {k: _thaw(v) for k, v in self.args}
        return out

    @staticmethod
    def from_json(obj: Any, where: str = "directive") -> "Directive":
        """Parses and checks one directive object; raises ScheduleError naming ``where``."""
        if not isinstance(obj, Mapping):
            raise ScheduleError(f"{where}: a directive must be an object, got {type(obj).__name__}")
        extra = set(obj) - {"op", "func", "stage", "args"}
        if extra:
            raise ScheduleError(f"{where}: unknown field(s) {sorted(extra)}; "
                                "a directive has op, func, stage and args")
        args = obj.get("args", {})
        if not isinstance(args, Mapping):
            raise ScheduleError(f"{where}: 'args' must be an object")
        stage = obj.get("stage", 0)
        d = Directive(op=obj.get("op"), func=obj.get("func"), stage=stage,
                      args=tuple((k, _freeze(v)) for k, v in sorted(args.items())))
        check_directive(d, where)
        return d

    def __str__(self) -> str:
        stage = f".update({self.stage - 1})" if self.stage else ""
        args = ", ".join(f"{k}={_thaw(v)!r}" for k, v in self.args)
        return f"{self.func}{stage}.{self.op}({args})"


def _freeze(v):
    if isinstance(v, (list, tuple)):
        return tuple(_freeze(x) for x in v)
    return v


def _thaw(v):
    if isinstance(v, tuple):
        return [_thaw(x) for x in v]
    return v


def _fail(d: Directive, where: str, msg: str):
    raise ScheduleError(f"{where} {_short(d.op)} on {_short(d.func)}: {msg}")


def _short(value, most: int = 40) -> str:
    """``repr(value)`` cut to ``most`` characters (a schedule file can hold a 4000-digit number
    or a megabyte string; a message names it, it does not print it)."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10 ** most:
        return f"{'-' if value < 0 else ''}an integer of {len(str(abs(value)))} digits"
    text = repr(value)
    return text if len(text) <= most else f"{text[:most - 5]}...({len(text)} characters)"


def _check_name(value, d, where, arg) -> None:
    if not isinstance(value, str) or not NAME_RE.match(value):
        _fail(d, where, f"'{arg}' must be a name (letters, digits, _ $ .; at most 64), got "
                        f"{_short(value)}")


def _check_int(value, limit_key, d, where, arg) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        _fail(d, where, f"'{arg}' must be an integer, got {_short(value)}")
    hi = LIMITS[limit_key]
    if not 1 <= value <= hi:
        _fail(d, where, f"'{arg}' = {_short(value)} is out of range; allowed 1..{hi}")


def check_directive(d: Directive, where: str = "directive") -> None:
    """Checks one directive against the grammar (no Halide involved)."""
    if not isinstance(d.op, str) or d.op not in GRAMMAR:
        raise ScheduleError(f"{where}: unknown directive {_short(d.op)}; known: {', '.join(sorted(GRAMMAR))}")
    _check_name(d.func, d, where, "func")
    if isinstance(d.stage, bool) or not isinstance(d.stage, int) or not 0 <= d.stage <= 64:
        _fail(d, where, f"'stage' must be an integer 0..64, got {_short(d.stage)}")
    if d.op in FUNC_LEVEL and d.stage:
        _fail(d, where, "acts on the whole Func; give no stage")
    spec = dict(GRAMMAR[d.op])
    given = dict(d.args)
    unknown = set(given) - set(spec)
    if unknown:
        _fail(d, where, f"unknown argument(s) {sorted(unknown)}; expected {list(spec)}")
    for arg, kind in spec.items():
        optional = kind.endswith("?")
        kind = kind.rstrip("?")
        if arg not in given:
            if not optional:
                _fail(d, where, f"missing argument '{arg}'")
            continue
        v = given[arg]
        if kind in ("var", "newvar", "func", "atvar", "purevar", "name"):
            _check_name(v, d, where, arg)
        elif kind in ("vars", "purevars"):
            if not isinstance(v, tuple) or not 1 <= len(v) <= LIMITS["vars"]:
                _fail(d, where, f"'{arg}' must be a list of 1..{LIMITS['vars']} names")
            for x in v:
                _check_name(x, d, where, arg)
            if len(set(v)) != len(v):
                _fail(d, where, f"'{arg}' names a variable twice: {list(v)}")
        elif kind == "pairs":
            if not isinstance(v, tuple) or not 1 <= len(v) <= LIMITS["vars"]:
                _fail(d, where, f"'{arg}' must be a list of [rvar, var] pairs")
            for p in v:
                if not isinstance(p, tuple) or len(p) != 2:
                    _fail(d, where, f"'{arg}' must be a list of [rvar, var] pairs, got {_short(_thaw(p))}")
                for x in p:
                    _check_name(x, d, where, arg)
        elif kind.startswith("int:"):
            _check_int(v, kind[4:], d, where, arg)
        elif kind == "sint":
            if isinstance(v, bool) or not isinstance(v, int) or abs(v) > LIMITS["bound"]:
                _fail(d, where, f"'{arg}' must be an integer within +-{LIMITS['bound']}, got "
                                f"{_short(v)}")
        elif kind.startswith("enum:"):
            allowed = _ENUMS[kind[5:]]
            if v not in allowed:
                _fail(d, where, f"'{arg}' must be one of {list(allowed)}, got {_short(v)}")
        elif kind == "bool":
            if not isinstance(v, bool):
                _fail(d, where, f"'{arg}' must be true or false, got {_short(v)}")
    if d.op == "gpu_tile":
        threads = given.get("xsize", 1) * given.get("ysize", 1)
        if threads > LIMITS["gpu_threads"]:
            _fail(d, where, f"{threads} threads per block exceeds {LIMITS['gpu_threads']}")
        if ("y" in given) != ("ysize" in given):
            _fail(d, where, "give both 'y' and 'ysize' (2-D) or neither (1-D)")


def unrolled_extent(d: Directive, known: Mapping[str, int]) -> int:
    """How many copies of the loop body a vectorize/unroll directive makes (1 for others)."""
    if d.op not in ("vectorize", "unroll", "gpu_lanes"):
        return 1
    f = d.get("factor")
    if f is not None:
        return f
    return known.get(d.get("var"), math.inf)


def rename_funcs(directives, names: Mapping[str, str]) -> list[Directive]:
    """``directives`` with the Funcs they name (the Func acted on, and arguments that name a Func,
    such as ``compute_at``'s ``at`` or ``wrap``'s ``consumer``) renamed by ``names``; others kept.
    A template written for one algorithm's names (the matrix product's ``out`` and ``acc``) then
    schedules the same structure in another op."""
    out = []
    for d in directives:
        args = d.kwargs
        for arg, kind in GRAMMAR.get(d.op, ()):
            if kind.rstrip("?") in ("func", "name") and args.get(arg) in names:
                args[arg] = names[args[arg]]
        out.append(Directive.make(d.op, names.get(d.func, d.func), d.stage, **args))
    return out
