"""PyPTO: tensor operators written once as Halide algorithms, with schedules kept apart as data.

    >>> import numpy as np, pypto
    >>> x = np.arange(6, dtype=np.float32).reshape(2, 3)
    >>> pypto.ops.softmax(x, axis=-1).shape
    (2, 3)
"""

from __future__ import annotations

from . import nn, ops
from .autodiff import def_gradient, grad, value_and_grad, vjp
from .bench.profile import profile
from .compiler.targets import target
from .database import add_path as add_schedule_path
from .database import explain
from .errors import (ArgumentError, CompileError, DatabaseError, DatabaseWarning, DtypeError, ExecutionError, FusionError,
                     GraphBreakError, InputError, NotDifferentiableError, OpDefinitionError,
                     ParamError, PerformanceWarning, PyptoError,
                     RecompileLimitError, ScheduleError, ShapeError,
                     StaleScheduleError, TargetError, TraceError, UnknownOpError,
                     ZeroSizeError)
from .frontend import (Tensor, check_graph, cond, fuse, jit, register_op, spec,
                       target_specific, tune)
from .infra.pool import memory_policy
from .infra.version import __version__
from .ops import Op, Param, get_op, list_ops, op
from .ops._consts import lit as constant
from .schedule.directives import Directive
from .schedule.schedule import Schedule

__all__ = [
    "ArgumentError", "CompileError", "DatabaseError", "DatabaseWarning", "Directive", "DtypeError", "ExecutionError", "FusionError",
    "GraphBreakError", "InputError", "NotDifferentiableError", "Op", "OpDefinitionError", "Param",
    "ParamError", "PerformanceWarning", "PyptoError", "RecompileLimitError", "Schedule", "ScheduleError", "ShapeError",
    "StaleScheduleError", "TargetError", "Tensor", "TraceError", "UnknownOpError", "ZeroSizeError", "__version__",
    "add_schedule_path", "check_graph", "cond", "constant", "def_gradient", "explain", "fuse", "get_op",
    "grad", "jit", "list_ops", "memory_policy", "nn", "op", "ops", "profile", "register_op", "spec",
    "target", "target_specific", "tune", "value_and_grad", "vjp",
]
