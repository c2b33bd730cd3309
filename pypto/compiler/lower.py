"""Building an op's Halide pipeline for concrete dtypes and parameters, and fingerprinting it."""

from __future__ import annotations

import dataclasses
import hashlib
import re
import threading
from collections.abc import Mapping, Sequence
from typing import Any

import halide as hl

from ..dtypes import halide_type, numpy_name
from ..errors import OpDefinitionError

# The op is duck-typed here (``name``, ``inputs``/``outputs`` specs, ``build(images, params,
# dims)``): lowering sits below pypto.ops, which re-exports ``Dims`` as part of its op model.
Op = Any


class Dims:
    """Extents of the named dims inside an algorithm: ``dims.K`` is a Halide Expr.

    Lowering makes one for every build and hands it to the op's algorithm as ``dims``.
    """

    def __init__(self, exprs: Mapping[str, Any]):
        self._exprs = dict(exprs)

    def __getattr__(self, name: str):
        try:
            return self._exprs[name]
        except KeyError:
            raise AttributeError(f"no input dim named {name!r}; known: {sorted(self._exprs)}") from None


@dataclasses.dataclass
class FuncInfo:
    """What a schedule may name in one Func: its pure vars and, per update, its RVars."""

    name: str
    func: Any  # hl.Func
    args: tuple[str, ...]          # pure vars, innermost first
    updates: tuple[tuple[str, ...], ...]  # RVar names of each update definition
    update_args: tuple[tuple[str, ...], ...]  # pure var names appearing in each update's LHS
    is_output: bool
    is_input: bool
    type: str
    calls: frozenset = frozenset()  # base names of the Funcs (and inputs) this one reads
    # Per update: whether it reads the Func at exactly its own left-hand side (f[x] = f[x] + ...),
    # the form of a reduction that rfactor may split; block copies and scans do not.
    self_reads: tuple[bool, ...] = ()


@dataclasses.dataclass
class Built:
    """A freshly built pipeline: its ImageParams, output Funcs, and every Func by name."""

    op: Op
    dtypes: tuple[str, ...]
    params: dict[str, Any]
    images: list[Any]
    outputs: tuple[Any, ...]
    pipeline: Any
    funcs: dict[str, FuncInfo]
    order: list[str] = dataclasses.field(default_factory=list)  # real names by get_func index
    #: Every reduction domain the algorithm made, as text: its bounds and predicates.
    rdoms: tuple[str, ...] = ()

    @property
    def out_dtypes(self) -> tuple[str, ...]:
        return tuple(numpy_name(f.type()) for f in self.outputs)


def _var_names(exprs) -> tuple[str, ...]:
    names = []
    for e in exprs:
        m = re.search(r": (.*)>$", str(e))
        s = m.group(1) if m else str(e)
        if re.fullmatch(r"[A-Za-z_][\w.$]*", s):
            names.append(s)
    return tuple(names)


def _expr_text(e) -> str:
    """An Expr as Halide prints it, without the Python wrapper's ``<halide.Expr ...: >``."""
    m = re.search(r": (.*)>$", str(e), re.S)
    return m.group(1) if m else str(e)


_rdom_log = threading.local()


class _NotedRDom(hl.RDom):
    """``hl.RDom`` that notes its bounds and predicates in the :func:`build` running on this
    thread (``Built.rdoms``); otherwise it is Halide's RDom. Installed as ``halide.RDom`` when
    this module loads, so every algorithm's ``hl.RDom(...)`` makes one."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        log = getattr(_rdom_log, "items", None)
        if log is not None:
            log.append("R " + "; ".join(f"{self[i].min()}, {self[i].extent()}"
                                        for i in range(self.dimensions())))

    def where(self, predicate):
        log = getattr(_rdom_log, "items", None)
        if log is not None:
            log.append(f"W {predicate}")
        return super().where(predicate)


if not issubclass(hl.RDom, _NotedRDom):
    hl.RDom = _NotedRDom


def base_name(name: str) -> str:
    """A Func's name without the ``$N`` suffix Halide adds to keep names unique in a process."""
    return re.sub(r"\$\d+$", "", name)


def build(op: Op, dtypes: Sequence[str], params: Mapping[str, Any]) -> Built:
    """Runs the op's algorithm on fresh ImageParams and collects its Funcs."""
    images = [hl.ImageParam(halide_type(dt), spec.rank, spec.name)
              for spec, dt in zip(op.inputs, dtypes)]
    exprs: dict[str, Any] = {}
    for spec, im in zip(op.inputs, images):
        for axis, d in enumerate(spec.dims):
            exprs.setdefault(d, im.dim(spec.rank - 1 - axis).extent())
    outer = getattr(_rdom_log, "items", None)
    _rdom_log.items = rdoms = []
    try:
        outputs = op.build(images, params, Dims(exprs))
    except hl.HalideError as e:
        raise OpDefinitionError(f"op {op.name!r}: the algorithm failed to build: {e}") from None
    finally:
        _rdom_log.items = outer
    for spec, f in zip(op.outputs, outputs):
        want = tuple(d.lower() for d in reversed(spec.dims))
        got = tuple(a.name() for a in f.args())
        if got != want:
            raise OpDefinitionError(
                f"op {op.name!r}: output {spec.name!r} must be defined over Vars {want} "
                f"(the dims {spec.dims} in lower case, innermost first), got {got}")
    pipeline = hl.Pipeline(list(outputs))
    out_names = {f.name() for f in outputs}
    in_names = {im.name() for im in images}
    funcs: dict[str, FuncInfo] = {}
    order: list[str] = []
    i = 0
    while True:
        try:
            f = pipeline.get_func(i)
        except hl.HalideError:
            break
        i += 1
        real = f.name()
        order.append(real)
        name = base_name(real)
        is_input = name in in_names or name.endswith("_im") and name[:-3] in in_names
        if name in funcs:
            raise OpDefinitionError(f"op {op.name!r}: two Funcs are named {name!r}; name every Func")
        n_up = f.num_update_definitions() if not is_input else 0
        updates, uargs, self_reads = [], [], []
        for u in range(n_up):
            updates.append(tuple(r.name() for r in f.rvars(u)))
            uargs.append(_var_names(f.update_args(u)))
            lhs = [_expr_text(a) for a in f.update_args(u)]
            here = f"{real}({', '.join(lhs)})"
            self_reads.append(any(here in _expr_text(v) for v in f.update_values(u)))
        funcs[name] = FuncInfo(
            name=name, func=f, args=tuple(a.name() for a in f.args()) if not is_input else (),
            updates=tuple(updates), update_args=tuple(uargs), is_output=real in out_names,
            is_input=is_input, self_reads=tuple(self_reads),
            type=",".join(numpy_name(t) for t in f.types()) if f.defined() or is_input else "")
    base_of = {real: base_name(real) for real in order}
    call_re = re.compile(r"([A-Za-z_][\w$.]*)\(")
    for info in funcs.values():
        if info.is_input:
            continue
        f = info.func
        text = " ".join(str(v) for v in f.values())
        for u in range(len(info.updates)):
            text += " " + " ".join(str(v) for v in _update_values(f, u))
            text += " " + " ".join(str(a) for a in f.update_args(u))
        info.calls = frozenset(base_of[n] for n in call_re.findall(text)
                               if n in base_of and base_of[n] != info.name)
    return Built(op=op, dtypes=tuple(dtypes), params=dict(params), images=images,
                 outputs=outputs, pipeline=pipeline, funcs=funcs, order=order,
                 rdoms=tuple(rdoms))


_UNIQUE = re.compile(r"\$\d+")


def _normalized(text: str) -> str:
    """``text`` without Halide's process-wide unique suffixes and temporaries' numbers."""
    text = _UNIQUE.sub("", text)
    # Halide names common subexpressions t123 from a process-wide counter: number them by order
    # of appearance so that equal algorithms print equally in every build and process.
    temps: dict[str, str] = {}
    return re.sub(r"\bt\d+\b", lambda m: temps.setdefault(m.group(0), f"t#{len(temps)}"), text)


def rdom_digest(built: Built) -> str:
    """A hash of the algorithm's reduction domains (bounds and predicates), which Halide's Python
    API does not expose from a Func, so :func:`fingerprint` cannot see them: an op whose edit
    changed only a reduction's extent kept its fingerprint. The compile cache keys kernels by it
    too (see ``compiler.jit.compile_built``); ''  when there are none."""
    if not built.rdoms:
        return ""
    return hashlib.sha256(_normalized("\n".join(built.rdoms)).encode()).hexdigest()[:16]


def fingerprint(built: Built) -> str:
    """A stable hash of the algorithm's structure: every Func's definitions, types and names.

    It is computed from the pipeline Halide holds (not the Python source), so it changes when the
    math changes and stays put when only comments or formatting do.
    """
    lines = [f"op={built.op.name};in={[str(s) for s in built.op.inputs]};dtypes={built.dtypes}"]
    for info in built.funcs.values():
        lines.append(f"F {info.name} {info.type} in={info.is_input} out={info.is_output}")
        if info.is_input:
            continue
        f = info.func
        lines.append(f"  {info.args} = {[str(v) for v in f.values()]}")
        for u in range(len(info.updates)):
            vals = [str(v) for v in _update_values(f, u)]
            lines.append(f"  U{u} {[str(a) for a in f.update_args(u)]} = {vals}")
    text = _normalized("\n".join(lines))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _update_values(f, u):
    try:
        return [f.update_value(u)]
    except hl.HalideError:
        t = f.update_values(u)
        return [t[i] for i in range(t.size())] if hasattr(t, "size") else [t]
