"""Programs, not just ops: ``pypto.Tensor`` tracing, ``@pypto.jit``, ``@pypto.fuse``,
``pypto.cond``, ``pypto.check_graph`` and composite ops (``register_op``, ``target_specific``).

This layer sits above the ops and the runtime: it plugs its Tensor type and its recorder into
``runtime.call_op`` (the one door every op call goes through) when it is imported.
"""

from __future__ import annotations

from .. import runtime as _runtime
from .check import GraphReport, check_graph, spec
from .composite import CompositeOp, register_op, target_specific
from .jit import GLOBAL as stats
from .programs import tune
from .jit import JitFunction, cond, fuse, jit
from .tensor import Tensor, as_tensor, checked_call, current, record_op

_runtime._TRACED = (Tensor,)
_runtime._tracing = current
_runtime._record = record_op
_runtime._as_tensor = as_tensor
_runtime.checked_call = checked_call

from . import serial as _serial  # noqa: E402,F401  (registers the program loader of the database)
from .jit import join_many as _join_many  # noqa: E402
from .jit import leading_reduce as _leading_reduce  # noqa: E402

_runtime._leading_reduce = _leading_reduce
_runtime._join_many = _join_many

__all__ = ["CompositeOp", "GraphReport", "JitFunction", "Tensor", "check_graph", "cond", "fuse",
           "jit", "register_op", "spec", "stats", "target_specific", "tune"]
