"""Whether a stored schedule can run at another shape: its factors checked against the extents.

A schedule tuned for one shape carries constants (split and tile factors, vector, unroll and
parallel task sizes) that only make sense for extents at least that large. Halide splits a loop of
extent ``e`` by ``f`` according to the split's tail strategy:

- ``guard_with_if`` and the ``predicate*`` tails run at any extent (the tail iterations are
  skipped);
- ``shift_inwards`` (and ``shift_inwards_and_blend``) moves the last block inwards, so it needs
  ``e >= f``: with ``e < f`` the block starts before the loop's minimum and the kernel reads or
  writes out of bounds (Halide's bounds assertion fails at run time);
- ``round_up`` (and ``round_up_and_blend``) computes whole blocks, so it needs ``e`` to be a
  multiple of ``f`` wherever the buffer cannot grow (an output, or a Func reading an input there).

A directive without a tail gets Halide's default: ``shift_inwards`` in a pure definition,
``guard_with_if`` for a reduction variable (an RVar, or a variable split from one) and
``round_up`` for a pure variable of an update definition.

Loop variables are matched to named dims by PyPTO's naming contract: an op's output is defined over
the dims in lower case (``out[n, m]`` for dims ``M, N``), intermediate Funcs reuse those Vars, and a
reduction domain named after a dim (``RDom(..., "k")``, whose variable Halide calls ``k$x``) spans
that dim. A ``wrap`` copy of an input names its variables ``_0, _1, ...`` innermost first, over
the input's dims. Variables made by ``split``, ``tile`` and ``fuse`` get the extents the directive
gives them; any other variable (of an rfactor intermediate, say) is unknown and not checked.

The check is relative to the entry's own shape: a directive is held against the new shape only if
it breaks a requirement there that it met at the shape it was measured at. A Func with a halo, or
one computed per tile, may have loops longer or shorter than its dims; the schedule ran at its own
shape, so only what the new extents change can make it fail. Loops are judged by the full dim: a
``round_up`` split of a Func computed inside a tile that divides the tile but not the dim is
refused though it would run (erring towards the default, never towards a failing kernel). The
check is necessary, not
sufficient: a schedule that passes may still fail at run time, and the call then falls back to the
default schedule (``pypto.compiler.jit``).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping

from .directives import Directive
from .schedule import Schedule

GUARDED = {"guard_with_if", "predicate", "predicate_loads", "predicate_stores"}
SHIFTING = {"shift_inwards", "shift_inwards_and_blend"}
ROUNDING = {"round_up", "round_up_and_blend"}

#: Directives that split a loop: (name of the loop argument, name of the factor argument).
_FACTORS = {"vectorize": ("var", "factor"), "unroll": ("var", "factor"),
            "parallel": ("var", "factor")}


class _Loop:
    """What is known of one loop variable of one stage: its extent (None: unknown), and whether it
    is a reduction variable (whose default tail is guard_with_if)."""

    __slots__ = ("extent", "rvar")

    def __init__(self, extent, rvar: bool):
        self.extent, self.rvar = extent, rvar


class _Numbers:
    """Extents as integers: the loops of one shape."""

    def __init__(self, dims: Mapping[str, int]):
        self.dims = dims

    def dim(self, name: str):
        return self.dims.get(name)

    @staticmethod
    def ceil(e, f: int):
        return math.ceil(e / f)

    @staticmethod
    def mul(a, b):
        return a * b

    @staticmethod
    def need(d: Directive, var: str, tail: str, factor: int, e):
        if tail in SHIFTING and factor > e:
            return f"{d}: {tail} needs the loop {var!r} to be at least {factor} long; it is {e}"
        if tail in ROUNDING and e % factor:
            return f"{d}: {tail} needs the loop {var!r} to be a multiple of {factor}; it is {e}"
        return None


class _Terms:
    """Extents as expressions over the named dims, for a check made later at run time (the
    dispatcher of an any-shape AOT library): ``("dim", "M")``, ``("ceil", e, f)`` (e / f rounded
    up), ``("mul", a, b)`` and ints."""

    def __init__(self, names):
        self.names = set(names)

    def dim(self, name: str):
        return ("dim", name) if name in self.names else None

    @staticmethod
    def ceil(e, f: int):
        return ("ceil", e, f)

    @staticmethod
    def mul(a, b):
        return ("mul", a, b)

    @staticmethod
    def need(d: Directive, var: str, tail: str, factor: int, e):
        if tail in SHIFTING:
            return ("at_least", e, factor)
        if tail in ROUNDING:
            return ("multiple", e, factor)
        return None


def _dim_loop(var: str, ext) -> _Loop:
    """A variable the schedule did not create: a dim's Var (``m``) or RVar (``k$x``), or unknown."""
    base, _, _ = var.partition("$")
    return _Loop(ext.dim(base.upper()), rvar="$" in var)


def _tail(d: Directive, loop: _Loop) -> str:
    tail = d.get("tail")
    if tail not in (None, "auto"):
        return tail
    if d.stage == 0:
        return "shift_inwards"
    return "guard_with_if" if loop.rvar else "round_up"


def problems(schedule: Schedule, dims: Mapping[str, int],
             inputs: Mapping[str, tuple[str, ...]] | None = None) -> list[tuple[int, str]]:
    """Each (directive index, reason) whose factor the extents ``dims`` cannot take.

    ``inputs`` maps the op's input names to their dims (outermost first, as ops declare them), so
    that the loops of a ``wrap`` copy of an input are known.
    """
    return _walk(schedule, _Numbers(dims), inputs)


def requirements(schedule: Schedule, stored: Mapping[str, int],
                 inputs: Mapping[str, tuple[str, ...]] | None = None) -> list[tuple]:
    """What :func:`unfit` checks, as terms to evaluate at run time: each ``("at_least", e, f)``
    (the loop extent ``e`` must be at least ``f``) or ``("multiple", e, f)``, with ``e`` a term of
    :class:`_Terms` over the dims of ``stored``; only requirements met at ``stored`` count.

    >>> from pypto.schedule.directives import Directive
    >>> s = Schedule("op", (Directive.make("split", "out", var="n", outer="no", inner="ni",
    ...                                    factor=8, tail="shift_inwards"),
    ...                     Directive.make("parallel", "out", var="no", factor=4)))
    >>> requirements(s, {"N": 64})
    [('at_least', ('dim', 'N'), 8), ('at_least', ('ceil', ('dim', 'N'), 8), 4)]
    """
    ok_before = {i for i, _ in problems(schedule, stored, inputs)}
    return [need for i, need in _walk(schedule, _Terms(stored), inputs) if i not in ok_before]


def holds(need: tuple, dims: Mapping[str, int]) -> bool:
    """Whether a requirement of :func:`requirements` holds at ``dims`` (its Python reading)."""
    def value(t):
        if isinstance(t, int):
            return t
        if t[0] == "dim":
            return dims[t[1]]
        if t[0] == "ceil":
            return math.ceil(value(t[1]) / t[2])
        return value(t[1]) * value(t[2])

    kind, e, f = need
    return value(e) >= f if kind == "at_least" else value(e) % f == 0


def any_shape(schedule: Schedule) -> Schedule:
    """``schedule`` made to run at every extent: each split, vector, unroll and task factor
    guards its tail (``guard_with_if``) instead of shifting it inwards or rounding it up, and
    ``bound`` directives (which pin an extent) are left out. Used where the extents are not
    known when the schedule is made: the last variant of an any-shape AOT library, and an op in
    a fused program whose Funcs are computed over less than the op's dims."""
    ds = []
    for d in schedule.directives:
        if d.op in ("bound", "bound_extent"):
            continue
        factor = {"tile": "xfactor", "gpu_tile": "xsize"}.get(d.op, "factor")
        if d.op in ("split", "tile", "gpu_tile", "vectorize", "unroll", "parallel") \
                and d.get(factor) is not None:
            d = Directive.make(d.op, d.func, d.stage, **{**d.kwargs, "tail": "guard_with_if"})
        ds.append(d)
    return dataclasses.replace(schedule, directives=tuple(ds))


def _walk(schedule: Schedule, ext, inputs) -> list[tuple[int, object]]:
    loops: dict[tuple[str, int], dict[str, _Loop]] = {}
    out: list[tuple[int, object]] = []
    inputs = inputs or {}

    def loop(d: Directive, var: str) -> _Loop:
        stage = loops.setdefault((d.func, d.stage), {})
        if var not in stage:
            stage[var] = _dim_loop(var, ext)
        return stage[var]

    def split(i: int, d: Directive, var, outer, inner, factor) -> None:
        if not isinstance(var, str) or not isinstance(factor, int):
            return
        lp = loop(d, var)
        e = lp.extent
        why = None if e is None else ext.need(d, var, _tail(d, lp), factor, e)
        if why:
            out.append((i, why))
        stage = loops[(d.func, d.stage)]
        if isinstance(inner, str):
            stage[inner] = _Loop(factor, lp.rvar)   # a guarded tail keeps the loop, masked
        if isinstance(outer, str):
            stage[outer] = _Loop(None if e is None else ext.ceil(e, factor), lp.rvar)

    for i, d in enumerate(schedule.directives):
        if d.op == "split":
            split(i, d, d.get("var"), d.get("outer"), d.get("inner"), d.get("factor"))
        elif d.op == "tile":
            split(i, d, d.get("x"), d.get("xo"), d.get("xi"), d.get("xfactor"))
            split(i, d, d.get("y"), d.get("yo"), d.get("yi"), d.get("yfactor"))
        elif d.op == "gpu_tile":
            split(i, d, d.get("x"), d.get("bx"), d.get("tx"), d.get("xsize"))
            if d.get("y") is not None:
                split(i, d, d.get("y"), d.get("by"), d.get("ty"), d.get("ysize"))
        elif d.op in _FACTORS and d.get("factor") is not None:
            var = d.get("var")
            split(i, d, var, None, None, d.get("factor"))
        elif d.op == "wrap" and d.func in inputs and isinstance(d.get("as"), str):
            names = inputs[d.func][::-1]   # Halide's dimension 0 is the last NumPy axis
            loops[(d.get("as"), 0)] = {f"_{j}": _Loop(ext.dim(n), False)
                                       for j, n in enumerate(names)}
        elif d.op == "fuse":
            a, b = loop(d, d.get("inner")), loop(d, d.get("outer"))
            e = ext.mul(a.extent, b.extent) if a.extent is not None and b.extent is not None \
                else None
            loops[(d.func, d.stage)][d.get("fused")] = _Loop(e, a.rvar or b.rvar)
    return out


def unfit(schedule: Schedule, stored: Mapping[str, int], new: Mapping[str, int],
          inputs: Mapping[str, tuple[str, ...]] | None = None) -> str | None:
    """Why ``schedule``, measured at the dims ``stored``, cannot run at the dims ``new`` (None: it
    can, as far as its factors tell). Only requirements met at ``stored`` count.

    >>> from pypto.schedule.directives import Directive
    >>> s = Schedule("op", (Directive.make("vectorize", "out", var="n", factor=16),))
    >>> unfit(s, {"N": 64}, {"N": 32}) is None
    True
    >>> print(unfit(s, {"N": 64}, {"N": 3}))
    out.vectorize(factor=16, var='n'): shift_inwards needs the loop 'n' to be at least 16 long; it is 3
    """
    ok_before = {i for i, _ in problems(schedule, stored, inputs)}
    for i, why in problems(schedule, new, inputs):
        if i not in ok_before:
            return why
    return None
