"""``pypto.check_graph``: shapes and dtypes of a whole function, without compiling or running.

The function is traced on inputs known only by shape and dtype (:func:`spec`, or arrays). Every
op's own checks run as in a call, so a wrong channel count is the same named-dim error a call
would give, located at the user's ``file:line``. A value needed in Python (``if t:``) would be a
break: the report lists where, and tracing continues with a placeholder (zeros).
"""

from __future__ import annotations

import dataclasses
import sys
import traceback
from collections.abc import Callable

import numpy as np

from ..errors import DtypeError, PyptoError, ShapeError
from .. import runtime as _runtime
from . import tensor as T
from .graph import Graph
from .tensor import Spec


def spec(shape, dtype="float32") -> Spec:
    """An input for :func:`check_graph`: ``pypto.spec((64, 3, 32, 32), "float32")``; an int
    is a 1-d shape, as for ``np.empty``."""
    dims = (shape,) if isinstance(shape, (int, np.integer)) else shape
    try:
        dims = tuple(dims)
    except TypeError:
        dims = None
    if dims is None or not all(isinstance(n, (int, np.integer)) and not isinstance(n, bool)
                               and n >= 0 for n in dims):
        # int() of each entry truncated 2.5 to 2, took -1, and raised ValueError on 'abc'
        raise ShapeError(f"pypto.spec: the shape {shape!r} must be a tuple of non-negative ints "
                         f"(or one int)")
    try:
        dt = np.dtype(dtype)
    except TypeError:
        raise DtypeError(f"pypto.spec: {dtype!r} is not a dtype; give a NumPy dtype or its "
                         f"name, e.g. 'float32'") from None
    return Spec(tuple(int(n) for n in dims), dt)


@dataclasses.dataclass
class GraphReport:
    """What :func:`check_graph` found."""

    ok: bool
    errors: list[str]
    nodes: list[str]
    breaks: list[str]
    outputs: list[tuple[tuple[int, ...], str]]
    bytes_unfused: int       # every op's outputs written to memory, as op-by-op calls do
    bytes_fused: int         # only what escapes a fused pipeline: its outputs
    flops: int

    def __str__(self) -> str:
        lines = [f"check_graph: {'ok' if self.ok else 'ERRORS'}; {len(self.nodes)} ops, "
                 f"{len(self.breaks)} break(s), about {self.flops:,} flops; materialized "
                 f"{self.bytes_fused:,} bytes fused vs {self.bytes_unfused:,} unfused"]
        lines += [f"  error: {e}" for e in self.errors]
        lines += [f"  break: {b}" for b in self.breaks]
        lines += [f"  op: {n}" for n in self.nodes]
        lines += [f"  output: {s} {d}" for s, d in self.outputs]
        return "\n".join(lines)


def _user_location(tb) -> str:
    where = "<unknown>:0"
    for fs in traceback.extract_tb(tb):
        if not (fs.filename.startswith(T._PKG_DIR) or fs.filename.startswith(T._NP_DIR)):
            where = f"{fs.filename}:{fs.lineno}"
    return where


def check_graph(fn: Callable, *specs) -> GraphReport:
    """Checks ``fn(*specs)``'s shapes and dtypes without compiling or running a kernel.

    Returns a :class:`GraphReport`; ``report.ok`` is False when an op rejected its inputs, and
    ``report.errors`` then names every error and its ``file:line``: checking goes on past an
    op's error with a placeholder for its result (what is computed from the placeholder is not
    checked again, so one mistake is reported once).
    """
    ctx = T.TraceContext(name=getattr(fn, "__name__", "fn"))
    breaks: list[str] = []

    def on_break(ctx_, t, why, where):
        breaks.append(f"{why} of a Tensor from {T._ops_behind(t)} at {where} "
                      f"(checked with a placeholder value)")
        return np.zeros(t.shape, t.dtype)

    ctx.on_break = on_break
    ctx.errors = errors = []
    token = T.activate(ctx)
    _runtime.checking += 1
    outs: list = []
    try:
        args = _trace_args(ctx, specs)
        try:
            result = fn(*args)
            from .jit import _refuse_lazy, _result_structure

            _, leaves = _result_structure(result)
            _refuse_lazy(ctx.name, leaves)
            outs = [x for x in leaves if isinstance(x, T.Tensor) and not T.is_poison(x)]
        except PyptoError as e:
            where = _user_location(sys.exc_info()[2])
            text = T.source_line(where)
            errors.append(f"{type(e).__name__}: {e} (at {where}{': ' + text if text else ''})")
    finally:
        _runtime.checking -= 1
        T.deactivate(token)
    ops = [n for n in ctx.nodes if n.kind == "op"]
    unfused = sum(_nbytes(s, d) for n in ops for s, d in n.outs)
    fused = sum(_nbytes(t.shape, t.dtype) for t in outs)
    if outs:
        try:
            Graph(outs)
        except Exception as e:  # a malformed graph is a bug worth reporting, not hiding
            errors.append(f"internal: the graph could not be formed: {e}")
    return GraphReport(ok=not errors, errors=errors,
                       nodes=[f"{n.describe()} -> {[s for s, _ in n.outs]} at {n.where}"
                              for n in ops],
                       breaks=breaks, outputs=[(t.shape, t.dtype.name) for t in outs],
                       bytes_unfused=unfused, bytes_fused=fused,
                       flops=sum(_flops(n) for n in ops))


def _trace_args(ctx: T.TraceContext, args) -> list:
    """``args`` as ``@pypto.jit`` takes them: arrays (NumPy scalars too) and specs become
    Tensors, inside lists, tuples and dicts as well; any other value (an int, a float, a string,
    None) is passed as it is. (Every argument was made an array: ``check_graph(f, spec(...), 2)``
    reported ``x * k`` as a float32-int64 dtype error that the jitted call does not make, and a
    dict argument as a rank-0 Tensor.)"""
    from .jit import _is_array_like

    count = [0]

    def walk(v, where):
        if isinstance(v, Spec) or isinstance(v, np.ndarray) or _is_array_like(v):
            i, count[0] = count[0], count[0] + 1
            if isinstance(v, Spec):
                return T.spec_input(v.shape, v.dtype, name=f"arg{i}", where=where)
            return ctx.input_for(np.asarray(v), name=f"arg{i}", where=where, argument=True)
        if isinstance(v, (list, tuple)):
            out = [walk(x, f"{where}[{j}]") for j, x in enumerate(v)]
            return out if isinstance(v, list) else tuple(out)
        if isinstance(v, dict):
            return {k: walk(x, f"{where}[{k!r}]") for k, x in v.items()}
        return v

    return [walk(a, f"argument #{i}") for i, a in enumerate(args)]


def _nbytes(shape, dtype) -> int:
    n = 1
    for s in shape:
        n *= s
    return n * np.dtype(dtype).itemsize


def _flops(n) -> int:
    """A rough count: contractions 2 per multiply-add, everything else 1 per element touched."""
    dims = n.dims
    out = sum(int(np.prod(s)) if s else 1 for s, _ in n.outs)
    name = n.op.name
    if name in ("matmul", "batch_matmul", "linear"):
        k = dims.get("K", 1)
        return 2 * out * k
    if name in ("conv2d", "depthwise_conv2d"):
        per = dims.get("CG", dims.get("M", 1)) * dims.get("KH", 1) * dims.get("KW", 1)
        return 2 * out * per
    ins = sum(int(np.prod(t.shape)) if t.shape else 1 for t in n.inputs)
    return max(out, ins)
