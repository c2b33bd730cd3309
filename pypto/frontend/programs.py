"""Tracing a whole function into one graph op, for tuning and AOT builds.

``pypto.tune(fn, *arrays)`` and ``pypto tune file.py:NAME`` tune a program as one unit: the
function is traced once on its example inputs (a data-dependent break is an error here: a tuned
unit is one pipeline), the graph is written as data (:mod:`.serial`) for the tuner's worker
processes, and the winner is stored in the schedule database under the program's name and graph
fingerprint, where later calls of the same program at the same shapes find it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any


from ..errors import FusionError, GraphBreakError, ShapeError
from . import tensor as T
from .graph import GraphOp


def program_name(fn) -> str | None:
    """The op name a program's pipelines are stored under (None: the graph's hash)."""
    from .composite import CompositeOp
    from .jit import JitFunction

    if isinstance(fn, CompositeOp):
        return fn.name
    if isinstance(fn, JitFunction):
        return fn.seg_name
    return None


def trace_graph_op(fn: Callable, inputs: Sequence[Any], kwargs: Mapping | None = None,
                   name: str | None = None) -> GraphOp:
    """``fn`` traced on ``inputs`` (arrays, or :func:`~pypto.frontend.check.spec` s) as one
    graph op; raises FusionError when the function breaks (it would not be one pipeline)."""
    from .composite import CompositeOp
    from .jit import JitFunction

    # A function that runs a program of its own (pypto.grad's) says how to trace that program.
    body = getattr(fn, "__pypto_traceable__", None) or (
        fn.implementation() if isinstance(fn, CompositeOp) else (
            fn.fn if isinstance(fn, JitFunction) else fn))
    label = getattr(fn, "name", getattr(fn, "__name__", "fn"))
    ctx = T.TraceContext(fullgraph=True, name=label)
    token = T.activate(ctx)
    try:
        args = T.trace_inputs(ctx, inputs)
        try:
            result = body(*args, **(kwargs or {}))
        except GraphBreakError as e:
            raise FusionError(f"{label}: a program is tuned and built as one pipeline, but it "
                              f"breaks: {e}") from None
        from .jit import _result_structure, output_graph

        _, leaves = _result_structure(result)
        outs = [x for x in leaves if isinstance(x, T.Tensor)]
        if not outs:
            raise FusionError(f"{label}: the function returns no traced value")
        return GraphOp(output_graph(outs)[0], name=name or program_name(fn))
    finally:
        T.deactivate(token)


def tune(fn: Callable, *arrays, trials: int = 30, target: str = "host",
         timeout_s: float | None = None, db: str | None = None, storage: str | None = None,
         baselines: Sequence[str] = ("default", "unfused"), say: Callable[[str], None] = print,
         **kwargs):
    """Tunes a program (jitted function, composite op or plain function of PyPTO ops) as one
    unit at the shapes of ``arrays``; stores the winner where later calls find it.

    Returns the tuner's result (its table, winner and message).
    """
    from autotune.tuner import TuneConfig, Tuner   # the tuner is a layer above: imported lazily

    from ..database.lookup import user_root
    from . import serial

    op = trace_graph_op(fn, arrays, kwargs)
    spec = serial.save(op.graph, name=op.name)
    root = db or user_root()
    if root is None:
        raise ShapeError("no schedule database to write to: give db=PATH or unset "
                         "PYPTO_USER_SCHEDULES=off")
    cfg = TuneConfig(op=spec, shape={d: op.call_dims[d] for d in op.input_dims},
                     dtypes=op.dtypes[0], target=target, trials=trials, timeout_s=timeout_s,
                     db=str(root), storage=storage, baselines=tuple(baselines))
    return Tuner(cfg, say=say).run()
