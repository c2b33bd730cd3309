"""``pypto.Tensor``: a traced value, and the graph it records.

Inside a traced function (``@pypto.jit``, ``@pypto.fuse``, ``check_graph``, a composite op) the
arrays a function receives become Tensors. A Tensor has a concrete shape and dtype, the node that
produces it and the user's ``file:line``; it holds no data. Every PyPTO op accepts Tensors through
its public frontend: ``runtime.call_op`` hands a call with Tensor arguments to :func:`record_op`,
which runs the op's checks exactly as for arrays and records a node instead of running a kernel.

Views (reshape, transpose, broadcasting, basic slicing) and casts are nodes of their own: they cost
nothing once lowered, because the lowering indexes the producer directly.

Arrays that meet a Tensor in an op (weights a function closes over, Python scalars made arrays by a
frontend) become graph *inputs* keyed by shape and dtype, never constants, so a second layer with
other weights reuses the same pipeline.
"""

from __future__ import annotations

import contextvars
import dataclasses
import itertools
import linecache
import math
import operator
import os
import sys
import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import PyptoError, ShapeError, TraceError, ZeroSizeError

_PKG_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_NP_DIR = os.path.dirname(os.path.abspath(np.__file__))
_ids = itertools.count()


def user_frame() -> str:
    """``file:line`` of the innermost caller outside PyPTO and NumPy (the user's line)."""
    f = sys._getframe(1)
    while f is not None:
        fn = os.path.abspath(f.f_code.co_filename)
        if not (fn.startswith(_PKG_DIR + os.sep) or fn.startswith(_NP_DIR + os.sep)):
            return f"{f.f_code.co_filename}:{f.f_lineno}"
        f = f.f_back
    return "<unknown>:0"


def source_line(where: str) -> str:
    """The text of the line ``where`` names, stripped ('' when unknown)."""
    path, _, line = where.rpartition(":")
    try:
        return linecache.getline(path, int(line)).strip()
    except ValueError:
        return ""


class Node:
    """One step of a traced program.

    ``kind`` is ``"input"`` (an array the program reads), ``"op"`` (a PyPTO op call), ``"view"``
    (reshape / permute / broadcast / slice: an index remap) or ``"cast"``. ``outs`` holds the
    (shape, dtype) of each output; op nodes may have several.
    """

    __slots__ = ("id", "kind", "op", "params", "inputs", "outs", "where", "aux", "value",
                 "dims", "dtypes", "checks", "__weakref__")

    def __init__(self, kind: str, inputs: Sequence["Tensor"], outs, where: str, *, op=None,
                 params=None, aux=None, value=None, dims=None, dtypes=None):
        self.id = next(_ids)
        self.kind = kind
        self.op = op
        self.params = dict(params or {})
        self.inputs = tuple(inputs)
        self.outs = tuple((tuple(int(n) for n in s), np.dtype(d)) for s, d in outs)
        self.where = where
        self.aux = aux
        self.value = value       # input nodes: the array (None for a spec)
        self.dims = dict(dims or {})
        self.dtypes = dtypes
        self.checks: list | None = None   # value checks of the program's call (require_values)

    def describe(self) -> str:
        if self.kind == "op":
            ps = ", ".join(f"{k}={v!r}" for k, v in sorted(self.params.items()))
            return f"{self.op.name}({ps})" if ps else self.op.name
        if self.kind in ("view", "cast"):
            return f"{self.kind} {self.aux}"
        return "input"


class Tensor:
    """A traced array: shape, dtype, the producing node and the user's ``file:line``.

    Supports Python operators (``+ - * / ** @``, unary ``-``, ``abs``, comparisons giving bool
    masks), the methods NumPy users reach for (``sum/mean/max/min/prod/var/std(axis, keepdims)``,
    ``argmax/argmin``, ``reshape``, ``transpose``/``.T``, basic slicing, ``astype``) and mixing with
    Python scalars and NumPy arrays. Asking for its value as a Python value (``if t:``,
    ``float(t)``, ``t.item()``, ``np.asarray(t)``) is a *break*: under ``@pypto.jit`` the pending
    program runs and tracing continues with the concrete value; under ``fullgraph=True`` it is
    an error naming the line.
    """

    __slots__ = ("node", "index", "shape", "dtype", "where", "__weakref__")
    __array_priority__ = 1000

    def __init__(self, node: Node, index: int = 0):
        self.node = node
        self.index = index
        shape, dtype = node.outs[index]
        self.shape = shape
        self.dtype = dtype
        self.where = node.where

    # -- array-like attributes the frontends read ---------------------------------------------
    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def flags(self):
        return _FLAGS

    @property
    def T(self) -> "Tensor":  # noqa: N802 - NumPy's name
        return self.transpose()

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d pypto.Tensor")
        return self.shape[0]

    def __iter__(self):
        if not self.shape:
            raise TypeError("iteration over a 0-d pypto.Tensor")
        for i in range(self.shape[0]):
            yield self[i]

    def __repr__(self) -> str:
        return (f"pypto.Tensor(shape={self.shape}, dtype={self.dtype.name}, "
                f"from {self.node.describe()} at {self.where})")

    # -- views and casts ----------------------------------------------------------------------
    def reshape(self, *shape) -> "Tensor":
        if self.node.kind == "poison":
            return self
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        shape = _resolve_shape(shape, self.size, self.shape)
        if shape == self.shape:
            return self
        return view(self, ("reshape", shape), shape)

    def ravel(self) -> "Tensor":
        return self.reshape(-1)

    flatten = ravel

    def transpose(self, *axes) -> "Tensor":
        if self.node.kind == "poison":
            return self
        if len(axes) == 1 and isinstance(axes[0], (tuple, list)):
            axes = tuple(axes[0])
        n = self.ndim
        if not axes:
            axes = tuple(range(n))[::-1]
        axes = _axes("transpose", axes, n)
        if sorted(axes) != list(range(n)):
            raise ShapeError(f"transpose: axes {axes} are not a permutation of {n} axes")
        if axes == tuple(range(n)):
            return self
        return view(self, ("permute", axes), tuple(self.shape[a] for a in axes))

    def swapaxes(self, a: int, b: int) -> "Tensor":
        if self.node.kind == "poison":
            return self
        axes = list(range(self.ndim))
        a, b = _axes("swapaxes", (a, b), self.ndim, repeat=True)
        axes[a], axes[b] = axes[b], axes[a]
        return self.transpose(axes)

    def broadcast_to(self, shape) -> "Tensor":
        if self.node.kind == "poison":
            return self
        shape = tuple(int(n) for n in shape)
        try:
            if np.broadcast_shapes(self.shape, shape) != shape:
                raise ValueError
        except ValueError:
            raise ShapeError(f"cannot broadcast a Tensor of shape {self.shape} to {shape} "
                             f"(at {user_frame()})") from None
        if shape == self.shape:
            return self
        return view(self, ("broadcast", shape), shape)

    def squeeze(self, axis=None) -> "Tensor":
        if self.node.kind == "poison":
            return self
        if axis is None:
            axes = [i for i, n in enumerate(self.shape) if n == 1]
        else:
            axes = _axes("squeeze", axis if isinstance(axis, (tuple, list)) else (axis,),
                         self.ndim)
            bad = [a for a in axes if self.shape[a] != 1]
            if bad:
                raise ShapeError(f"squeeze: axis {bad[0]} has size {self.shape[bad[0]]}, not 1")
        return self.reshape(tuple(n for i, n in enumerate(self.shape) if i not in axes))

    def astype(self, dtype, copy: bool = True) -> "Tensor":
        if self.node.kind == "poison":
            return self
        dt = np.dtype(dtype)
        if dt == self.dtype:
            return self
        from ..dtypes import halide_type

        try:
            halide_type(dt.name)
        except Exception:
            raise TraceError(f"astype: dtype {dt.name} is not supported in a PyPTO program "
                             f"(at {user_frame()})") from None
        node = Node("cast", [self], [(self.shape, dt)], user_frame(), aux=dt.name)
        return _record(node)[0]

    def require_values(self, check) -> None:
        """Has every call of the program run ``check(array)`` on this value's array before the
        pipeline that reads it: the value checks an op's frontend makes on arrays (indices in
        range) for the values a traced program receives. ``check`` raises the eager call's
        error. A value the pipeline computes itself has no array to check before the run."""
        n = self.node
        if n.checks is None:
            n.checks = []
        n.checks.append((self.index, check, user_frame()))

    def copy(self) -> "Tensor":
        return self

    def __getitem__(self, key) -> "Tensor":
        if self.node.kind == "poison":
            return self
        return _index(self, key)

    def __setitem__(self, key, value):
        raise TraceError(f"a pypto.Tensor cannot be assigned in place (at {user_frame()}); "
                         "Tensors are values: build a new one, e.g. with pypto.ops.where(mask, "
                         "new, old)")

    # -- reductions as methods ----------------------------------------------------------------
    def _reduce(self, name, axis, keepdims, **kw):
        from .. import ops

        return getattr(ops, name)(self, axis=axis, keepdims=keepdims, **kw)

    def sum(self, axis=None, keepdims=False):
        return self._reduce("sum", axis, keepdims)

    def mean(self, axis=None, keepdims=False):
        return self._reduce("mean", axis, keepdims)

    def max(self, axis=None, keepdims=False):
        return self._reduce("max", axis, keepdims)

    def min(self, axis=None, keepdims=False):
        return self._reduce("min", axis, keepdims)

    def prod(self, axis=None, keepdims=False):
        return self._reduce("prod", axis, keepdims)

    def var(self, axis=None, ddof=0, keepdims=False):
        return self._reduce("var", axis, keepdims, ddof=ddof)

    def std(self, axis=None, ddof=0, keepdims=False):
        return self._reduce("std", axis, keepdims, ddof=ddof)

    def argmax(self, axis=None, keepdims=False):
        return self._reduce("argmax", axis, keepdims)

    def argmin(self, axis=None, keepdims=False):
        return self._reduce("argmin", axis, keepdims)

    def all(self, axis=None, keepdims=False):
        return self._reduce("all", axis, keepdims)

    def any(self, axis=None, keepdims=False):
        return self._reduce("any", axis, keepdims)

    # -- other NumPy methods, as the ops they name -------------------------------------------------
    def _scan(self, name, axis):
        from .. import ops

        if axis is None:            # NumPy's default: over the flattened array
            return getattr(ops, name)(self.reshape(-1), axis=0)
        return getattr(ops, name)(self, axis=axis)

    def cumsum(self, axis=None):
        return self._scan("cumsum", axis)

    def cumprod(self, axis=None):
        return self._scan("cumprod", axis)

    def clip(self, min=None, max=None):  # noqa: A002 - NumPy's names
        from .. import ops

        return ops.clip(self, min, max)

    def round(self, decimals=0):  # noqa: A003
        from .. import ops

        if decimals != 0:
            raise TraceError(f"round: decimals={decimals!r} is not supported in a PyPTO program "
                             f"(at {user_frame()}); scale first, e.g. round(x * 100) / 100")
        return ops.round(self)

    def argsort(self, axis=-1):
        from .. import ops

        return ops.argsort(self, axis=axis)

    def repeat(self, repeats, axis=None):
        from .. import ops

        return ops.repeat(self, repeats, axis=axis)

    def diagonal(self, offset=0, axis1=0, axis2=1):
        from .. import ops

        return ops.diagonal(self, offset, axis1, axis2)

    def trace(self, offset=0, axis1=0, axis2=1):
        from .. import ops

        return ops.trace(self, offset, axis1, axis2)

    def dot(self, b):
        from .. import ops

        nd = max(self.ndim, np.ndim(b))
        if nd > 2:
            raise TraceError(f"dot: a Tensor's dot takes 1-D and 2-D operands (got {self.ndim}-D "
                             f"and {np.ndim(b)}-D, at {user_frame()}); use pypto.ops.matmul or "
                             "pypto.ops.einsum for stacks")
        return ops.matmul(self, b)

    def sort(self, axis=-1):
        raise TraceError(f"sort: a pypto.Tensor cannot be sorted in place (at {user_frame()}); "
                         "Tensors are values: use s = pypto.ops.sort(t, axis)")

    # -- operators ----------------------------------------------------------------------------
    def __add__(self, o):
        return _binop("add", self, o)

    def __radd__(self, o):
        return _binop("add", o, self)

    def __sub__(self, o):
        return _binop("sub", self, o)

    def __rsub__(self, o):
        return _binop("sub", o, self)

    def __mul__(self, o):
        return _binop("mul", self, o)

    def __rmul__(self, o):
        return _binop("mul", o, self)

    def __truediv__(self, o):
        return _binop("div", self, o)

    def __rtruediv__(self, o):
        return _binop("div", o, self)

    def __pow__(self, o):
        if isinstance(o, (int, float)) and not isinstance(o, bool) and o == 2:
            return _unop("square", self)
        return _binop("pow", self, o)

    def __rpow__(self, o):
        return _binop("pow", o, self)

    def __matmul__(self, o):
        return _binop("matmul", self, o)

    def __rmatmul__(self, o):
        return _binop("matmul", o, self)

    def __neg__(self):
        return _unop("neg", self)

    def __pos__(self):
        return self

    def __abs__(self):
        return _unop("abs", self)

    def __gt__(self, o):
        return _binop("greater", self, o)

    def __ge__(self, o):
        return _binop("greater_equal", self, o)

    def __lt__(self, o):
        return _binop("less", self, o)

    def __le__(self, o):
        return _binop("less_equal", self, o)

    def __eq__(self, o):  # noqa: D105 - an elementwise mask, as in NumPy
        return _binop("equal", self, o)

    def __ne__(self, o):
        return _binop("not_equal", self, o)

    def __floordiv__(self, o):
        return _binop("floor_divide", self, o)

    def __rfloordiv__(self, o):
        return _binop("floor_divide", o, self)

    def __mod__(self, o):
        return _binop("remainder", self, o)

    def __rmod__(self, o):
        return _binop("remainder", o, self)

    # ``& | ^ ~`` as in NumPy: logical on bool masks, bitwise on integers (``t & 3`` of an int
    # Tensor was logical_and, refused as "expected bool"); shifts on integers.
    def __and__(self, o):
        return _bitop("and", self, o)

    def __rand__(self, o):
        return _bitop("and", o, self)

    def __or__(self, o):
        return _bitop("or", self, o)

    def __ror__(self, o):
        return _bitop("or", o, self)

    def __xor__(self, o):
        return _binop("bitwise_xor", self, o)

    def __rxor__(self, o):
        return _binop("bitwise_xor", o, self)

    def __invert__(self):
        return _unop("logical_not" if self.dtype == np.bool_ else "bitwise_not", self)

    def __lshift__(self, o):
        return _binop("left_shift", self, o)

    def __rlshift__(self, o):
        return _binop("left_shift", o, self)

    def __rshift__(self, o):
        return _binop("right_shift", self, o)

    def __rrshift__(self, o):
        return _binop("right_shift", o, self)

    def __divmod__(self, o):
        return _binop("floor_divide", self, o), _binop("remainder", self, o)

    def __rdivmod__(self, o):
        return _binop("floor_divide", o, self), _binop("remainder", o, self)

    def __round__(self, ndigits=None):
        # NumPy's round(array): the array rounded (was a TypeError: no __round__)
        return self.round(0 if ndigits is None else ndigits)

    def __contains__(self, value) -> bool:
        # NumPy's ``value in array``: one break on (t == value).any(), not one per element
        return bool((self == value).any())

    __hash__ = object.__hash__

    # -- breaks: a Python value is needed -----------------------------------------------------
    def __bool__(self) -> bool:
        return bool(_concrete(self, "bool"))

    def __float__(self) -> float:
        return float(_concrete(self, "float"))

    def __int__(self) -> int:
        return int(_concrete(self, "int"))

    def __index__(self) -> int:
        if self.dtype.kind not in "iub":
            raise TypeError(f"only integer Tensors can be used as an index, not {self.dtype}")
        return int(_concrete(self, "int"))

    def item(self):
        return _concrete(self, "item").item()

    def tolist(self):
        return _concrete(self, "tolist").tolist()

    def __format__(self, spec: str) -> str:
        # f"{loss:.3f}" of a 0-d Tensor formats its value, as NumPy's 0-d arrays do (a break
        # that says so; it was "unsupported format string passed to Tensor.__format__");
        # without a spec, the Tensor's description (no break).
        if not spec:
            return repr(self)
        if self.ndim:
            raise TypeError(f"unsupported format string {spec!r} for a pypto.Tensor of shape "
                            f"{self.shape} (as for NumPy arrays: only 0-d ones take one)")
        return format(_concrete(self, "format").item(), spec)

    def numpy(self) -> np.ndarray:
        return np.array(_concrete(self, "numpy"))

    def __array__(self, dtype=None, copy=None):
        a = _concrete(self, "array")
        return a.astype(dtype) if dtype is not None else a

    # -- NumPy protocols ----------------------------------------------------------------------
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        # ndarray (op) Tensor lands here: run PyPTO's op on both.
        name = _UFUNC_OPS.get(ufunc.__name__) if method == "__call__" and not kwargs else None
        if name is not None:
            if len(inputs) == 2:
                return _binop(name, *inputs)
            return _unop(name, inputs[0])
        raise TraceError(_numpy_on_tensor(f"np.{ufunc.__name__}", ufunc.__name__))

    def __array_function__(self, func, types, args, kwargs):
        handler = _ARRAY_FUNCS.get(func.__name__)
        if handler is None:
            raise TraceError(_numpy_on_tensor(f"np.{func.__name__}", func.__name__))
        return handler(*args, **kwargs)


class _Flags:
    c_contiguous = True      # a Tensor has no memory layout of its own: treat it as dense
    f_contiguous = False
    writeable = True
    aligned = True


_FLAGS = _Flags()

_UFUNC_OPS = {
    "add": "add", "subtract": "sub", "multiply": "mul", "true_divide": "div", "divide": "div",
    "power": "pow", "maximum": "maximum", "minimum": "minimum", "matmul": "matmul",
    "greater": "greater", "greater_equal": "greater_equal", "less": "less",
    "less_equal": "less_equal", "equal": "equal", "not_equal": "not_equal", "negative": "neg",
    "absolute": "abs", "logical_and": "logical_and", "logical_or": "logical_or",
    "logical_not": "logical_not", "floor_divide": "floor_divide", "remainder": "remainder",
    "bitwise_and": "bitwise_and", "bitwise_or": "bitwise_or", "bitwise_xor": "bitwise_xor",
    "invert": "bitwise_not", "left_shift": "left_shift", "right_shift": "right_shift",
}


def _numpy_on_tensor(what: str, name: str) -> str:
    from .. import ops as _ops

    where = user_frame()
    alt = {"absolute": "abs", "fabs": "abs", "negative": "neg", "subtract": "sub",
           "multiply": "mul", "true_divide": "div", "divide": "div", "power": "pow",
           "amax": "max", "amin": "min", "concatenate": "concat"}.get(name, name)
    try:
        _ops.get_op(alt)
        hint = f"use pypto.ops.{alt}(...) (or the Tensor method) instead"
    except PyptoError:
        hint = "use the PyPTO op that does this (`pypto ops` lists them)"
    return (f"{what} was applied to a pypto.Tensor at {where}: NumPy functions cannot trace "
            f"PyPTO programs; {hint}")


# -- recording --------------------------------------------------------------------------------------

class TraceContext:
    """The state of one trace: its nodes, how breaks are served, and what it recorded."""

    def __init__(self, *, on_break=None, fullgraph: bool = False, name: str = "program"):
        self.nodes: list[Node] = []
        self.on_break = on_break        # fn(ctx, tensor, why) -> np.ndarray, or None: error
        self.fullgraph = fullgraph
        self.name = name
        self.materialized: dict[tuple[int, int], np.ndarray] = {}
        self.breaks: list[dict] = []
        self.array_inputs: dict[int, Node] = {}   # id(array) -> its input node
        self.linear_zeros: dict = {}   # (n, dtype) -> the zero bias of a @ w.T recorded as linear
        self.refs: dict[tuple[int, int], Any] = {}  # (node id, output) -> weakref to its Tensor
        self.errors: list[str] | None = None        # check_graph: every op error, then go on
        self._keep: list = []                     # arrays that input nodes refer to

    def input_for(self, array: np.ndarray, name: str | None = None, where: str = "",
                  argument: bool = False) -> "Tensor":
        """The Tensor standing for ``array``: one input node per array object read by the
        function, but one per position for its arguments (``argument=True``). A trace of
        ``f(x, x)`` whose two arguments shared a node replayed ``f(x, y)`` as ``f(y, y)``, and
        its gradients were the sum of both."""
        node = None if argument else self.array_inputs.get(id(array))
        if node is None or node.value is not array:
            node = Node("input", [], [(array.shape, array.dtype)], where or user_frame(),
                        value=array, aux=name)
            if not argument:
                self.array_inputs[id(array)] = node
            self._keep.append(array)
            self.nodes.append(node)
        t = Tensor(node)
        self.refs[(node.id, 0)] = weakref.ref(t)
        return t


_ctx: contextvars.ContextVar[TraceContext | None] = contextvars.ContextVar("pypto_trace",
                                                                          default=None)


def current() -> TraceContext | None:
    return _ctx.get()


def activate(ctx: TraceContext):
    return _ctx.set(ctx)


def deactivate(token) -> None:
    _ctx.reset(token)


def _context() -> TraceContext:
    ctx = _ctx.get()
    if ctx is None:
        raise TraceError("this pypto.Tensor belongs to a trace that has ended; Tensors live only "
                         "inside the traced function (return it to get an array)")
    return ctx


@dataclasses.dataclass(frozen=True)
class Spec:
    """An input known by shape and dtype only (``pypto.spec``)."""

    shape: tuple[int, ...]
    dtype: np.dtype


def trace_inputs(ctx: TraceContext, inputs) -> list[Tensor]:
    """Tensors for a traced function's arguments: arrays, or specs known by shape and dtype."""
    out = []
    for i, a in enumerate(inputs):
        if isinstance(a, Spec):
            out.append(spec_input(a.shape, a.dtype, name=f"arg{i}", where=f"argument #{i}"))
        else:
            out.append(ctx.input_for(np.asarray(a), name=f"arg{i}", where=f"argument #{i}",
                                     argument=True))
    return out


def poison(where: str) -> Tensor:
    """A placeholder for the result of a call that failed its checks (``check_graph`` goes on
    past the error; whatever is computed from it is not checked again)."""
    node = Node("poison", [], [((), np.float32)], where)
    return Tensor(node)


def is_poison(x) -> bool:
    return isinstance(x, Tensor) and x.node.kind == "poison"


def checked_call(op, call, args, kwargs, out):
    """An op's public call inside ``check_graph``: an error is recorded with the user's line and
    a placeholder returned; a call on a placeholder is not checked again."""
    ctx = current()
    if ctx is None or ctx.errors is None:
        return call(args, kwargs, out)
    if any(is_poison(a) for a in (*args, *kwargs.values())) or any(
            is_poison(a) for v in args if isinstance(v, (list, tuple)) for a in v):
        return poison(user_frame())
    try:
        return call(args, kwargs, out)
    except PyptoError as e:
        where = user_frame()
        text = source_line(where)
        ctx.errors.append(f"{type(e).__name__}: {e} (at {where}{': ' + text if text else ''})")
        return poison(where)


def spec_input(shape, dtype, name: str | None = None, where: str = "") -> Tensor:
    """A Tensor for an input known only by shape and dtype (``check_graph``)."""
    node = Node("input", [], [(tuple(shape), dtype)], where or user_frame(), value=None, aux=name)
    _context().nodes.append(node)
    return Tensor(node)


def _record(node: Node) -> list[Tensor]:
    ctx = _context()
    ctx.nodes.append(node)
    out = [Tensor(node, i) for i in range(len(node.outs))]
    for t in out:
        ctx.refs[(node.id, t.index)] = weakref.ref(t)
    return out


def view(t: Tensor, aux: tuple, shape: tuple) -> Tensor:
    node = Node("view", [t], [(shape, t.dtype)], user_frame(), aux=aux)
    return _record(node)[0]


def as_tensor(value: Any, ctx: TraceContext | None = None) -> Tensor:
    """``value`` as a Tensor of the current trace (arrays become inputs)."""
    if isinstance(value, Tensor):
        return value
    ctx = ctx or _context()
    return ctx.input_for(np.asarray(value))


def record_op(op, arrays, dtypes, params, dims) -> list[Tensor]:
    """Records ``op`` on checked arguments (Tensors or arrays); returns its output Tensors.

    Called by ``runtime.call_op`` once the op's own checks have passed, so a traced call fails
    exactly where an eager call would, with the same message.
    """
    from ..compiler.lower import build

    ctx = _context()
    ins = [a if isinstance(a, Tensor) else ctx.input_for(a) for a in arrays]
    if op.name == "matmul" and _is_transpose(ins[1]):
        src = _transposed_source(ins[1].node.inputs[0])
        if src is not None:
            return record_op(op, [ins[0], src], dtypes, params, dims)
        return _as_linear(ctx, ins[0], ins[1].node.inputs[0], dtypes, dims)
    built = _out_types(op, dtypes, params, build)
    outs = [(tuple(dims[d] for d in spec.dims), dt) for spec, dt in zip(op.outputs, built)]
    node = Node("op", ins, outs, user_frame(), op=op, params=params, dims=dims, dtypes=dtypes)
    return _record(node)


def _is_transpose(t: Tensor) -> bool:
    """True for ``w.T`` of a traced matrix ``w`` (a view that swaps its two axes)."""
    n = t.node
    return n.kind == "view" and n.aux == ("permute", (1, 0)) and len(n.inputs[0].shape) == 2


def _transposed_source(t: Tensor) -> Tensor | None:
    """``s`` when ``t`` is ``ops.transpose(s)`` of a traced matrix: then ``a @ t.T`` is ``a @ s``,
    a product that reads ``s`` as it is stored. A layer that transposes a weight once for its
    forward products (the LSTM layer's recurrent weight) gets products with ``t.T`` from their
    gradient rules; recorded as ``linear(a, t)``, each re-staged all of ``t`` (1 MiB per step of
    the LSTM layer's backward: 0.44 of the step's 1.6 ms)."""
    n = t.node
    if n.kind == "op" and n.op.name == "transpose" and len(n.inputs) == 1 \
            and len(n.inputs[0].shape) == 2 and n.inputs[0].dtype == t.dtype:
        return n.inputs[0]
    return None


def _as_linear(ctx, a: Tensor, w: Tensor, dtypes, dims) -> list[Tensor]:
    """``a @ w.T`` recorded as ``linear(a, w, 0)``: linear's kernel reads the weight [N, K] as it
    is stored, a panel of weight rows at a time, as ``ops.matmul`` does for NumPy's ``w.T``.
    In a program, matmul read the view through a plain copy per tile, gathering along a stride
    (``jit(lambda h, w: matmul(h, w.T))`` at 64x512x2048 took 2.9 ms against 2.1 for the op)."""
    from ..ops.linalg import linear

    dt = np.dtype(dtypes[1])
    zeros = ctx.linear_zeros.get((w.shape[0], dt.str))
    if zeros is None:
        zeros = ctx.linear_zeros[(w.shape[0], dt.str)] = np.zeros(w.shape[0], dt)
    bias = ctx.input_for(zeros)
    lin_dims = {"R": dims["M"], "I": dims["K"], "O": dims["N"]}
    return record_op(linear, [a, w, bias], (dtypes[0], dtypes[1], dtypes[1]), {}, lin_dims)


_types_cache: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _out_types(op, dtypes, params, build) -> tuple[str, ...]:
    per_op = _types_cache.setdefault(op, {})
    key = (dtypes, tuple(sorted((k, repr(v)) for k, v in params.items())))
    got = per_op.get(key)
    if got is None:
        got = per_op[key] = build(op, dtypes, params).out_dtypes
    return got


def _concrete(t: Tensor, why: str) -> np.ndarray:
    ctx = _context()
    key = (t.node.id, t.index)
    if key in ctx.materialized:
        return ctx.materialized[key]
    where = user_frame()
    if ctx.fullgraph or ctx.on_break is None:
        from ..errors import GraphBreakError

        chain = _ops_behind(t)
        need = (f"{ctx.name}: the value of a traced Tensor is needed in Python ({why}) at "
                f"{where}{': ' + source_line(where) if source_line(where) else ''}; it is "
                f"computed by {chain}")
        err = GraphBreakError(
            f"{need}. Under fullgraph=True this is an error: use pypto.cond(pred, f, g, *xs) "
            f"or pypto.ops.where to keep both paths in the program, or drop fullgraph=True to "
            f"let the program break here")
        err.need = need       # for callers that must trace one program, with their own advice
        raise err
    value = ctx.on_break(ctx, t, why, where)
    ctx.materialized[key] = value
    return value


def _ops_behind(t: Tensor, limit: int = 6) -> str:
    seen, out, stack = set(), [], [t.node]
    while stack and len(out) < limit:
        n = stack.pop()
        if n.id in seen:
            continue
        seen.add(n.id)
        if n.kind == "op":
            out.append(f"{n.op.name} (at {n.where})")
        stack.extend(i.node for i in n.inputs)
    return ", ".join(out) if out else "an input"


def _resolve_shape(shape, size: int, old) -> tuple[int, ...]:
    try:
        shape = tuple(operator.index(n) for n in shape)
    except TypeError:
        raise TraceError(f"reshape: the new shape must be ints, got {shape!r}") from None
    if shape.count(-1) > 1:
        raise ShapeError(f"reshape: at most one -1 in {shape}")
    if -1 in shape:
        rest = math.prod(n for n in shape if n != -1)
        if rest == 0 or size % rest:
            raise ShapeError(f"cannot reshape a Tensor of shape {old} into {shape}")
        shape = tuple(size // rest if n == -1 else n for n in shape)
    if math.prod(shape) != size or any(n < 0 for n in shape):
        raise ShapeError(f"cannot reshape a Tensor of shape {old} (size {size}) into {shape}")
    return shape


def _index(t: Tensor, key) -> Tensor:
    """Basic indexing: ints, slices, None, Ellipsis and True (NumPy's rules); a view of ``t``."""
    if not isinstance(key, tuple):
        key = (key,)
    if any(isinstance(k, (Tensor, np.ndarray, list)) for k in key):
        raise TraceError(f"indexing a pypto.Tensor with an array or Tensor at {user_frame()} is "
                         "not supported in a program; for indices use pypto.ops.index_select "
                         "(t, idx) or pypto.ops.take_along_axis, for masks pypto.ops.where, "
                         "or give a Python int (int(i)) or a slice")
    flags = [k for k in key if isinstance(k, (bool, np.bool_))]
    if flags and not all(flags):
        raise ZeroSizeError(f"indexing a Tensor with False at {user_frame()} gives an empty result; "
                         "zero-size values are not supported inside a traced program")
    n_real = sum(1 for k in key if _consumes_axis(k))
    if n_real > t.ndim:
        raise ShapeError(f"too many indices for a Tensor of rank {t.ndim}: {key!r}")
    if sum(1 for k in key if k is Ellipsis) > 1:
        raise TraceError("an index can only have a single ellipsis ('...')")
    full = []
    for k in key:
        if k is Ellipsis:
            full += [slice(None)] * (t.ndim - n_real)
        else:
            full.append(k)
    full += [slice(None)] * (t.ndim - sum(1 for k in full if _consumes_axis(k)))
    starts, steps, sizes, out_shape = [], [], [], []
    advanced = []           # (position in full, position in out_shape) of ints and flags
    axis = 0
    for pos, k in enumerate(full):
        if k is None:
            out_shape.append(1)
            continue
        if isinstance(k, (bool, np.bool_)):
            advanced.append((pos, len(out_shape)))
            continue
        n = t.shape[axis]
        if isinstance(k, slice):
            s, e, st = k.indices(n)
            cnt = len(range(s, e, st))
            starts.append(s)
            steps.append(st)
            sizes.append(cnt)
            out_shape.append(cnt)
        else:
            try:
                i = operator.index(k)
            except TypeError:
                raise TraceError(f"unsupported index {k!r} for a pypto.Tensor") from None
            if not -n <= i < n:
                raise ShapeError(f"index {i} is out of bounds for axis {axis} with size {n}")
            advanced.append((pos, len(out_shape)))
            starts.append(i % n)
            steps.append(1)
            sizes.append(1)
        axis += 1
    if flags:
        # NumPy: a True index is a 0-d boolean array, so it and the ints are advanced indices,
        # broadcast to one new axis of length 1: where they stand when they are side by side,
        # else first.
        places = [p for p, _ in advanced]
        side_by_side = places[-1] - places[0] + 1 == len(places)
        out_shape.insert(advanced[0][1] if side_by_side else 0, 1)
    if any(s == 0 for s in sizes):
        raise ZeroSizeError(f"the slice {key!r} of a Tensor of shape {t.shape} is empty; zero-size "
                         "values are not supported inside a traced program")
    out = t
    if tuple(sizes) != t.shape or any(s != 0 for s in starts) or any(s != 1 for s in steps):
        out = view(t, ("slice", tuple(starts), tuple(steps)), tuple(sizes))
    return out.reshape(tuple(out_shape))


def _axes(what: str, axes, ndim: int, repeat: bool = False) -> tuple:
    """``axes`` as non-negative ints below ``ndim`` (NumPy's AxisError as a ShapeError: an axis
    out of range is refused, not wrapped), each named once unless ``repeat``."""
    out = []
    for a in axes:
        if isinstance(a, (bool, np.bool_)) or not hasattr(a, "__index__"):
            raise TraceError(f"{what}: axes must be ints, got {a!r}")
        i = operator.index(a)
        if not -ndim <= i < ndim:
            raise ShapeError(f"{what}: axis {i} is out of bounds for a Tensor of rank {ndim} "
                             f"(axes run from {-ndim} to {ndim - 1})")
        out.append(i % ndim)
    if not repeat and len(set(out)) != len(out):
        raise ShapeError(f"{what}: an axis is named twice in {tuple(axes)!r}")
    return tuple(out)


def _consumes_axis(k) -> bool:
    """Whether index entry ``k`` takes an axis of the Tensor (None, ``...`` and flags do not)."""
    return k is not None and k is not Ellipsis and not isinstance(k, (bool, np.bool_))


def _binop(name: str, a, b):
    from .. import ops

    return getattr(ops, name)(a, b)


def _bitop(kind: str, a, b):
    """``a & b`` / ``a | b``: logical when every array operand is bool (the masks of
    ``pypto.ops.where``), else bitwise."""
    masks = all(getattr(x, "dtype", np.bool_) == np.bool_ for x in (a, b)
                if not isinstance(x, (bool, int)))
    masks = masks and not any(type(x) is int for x in (a, b))
    return _binop(f"logical_{kind}" if masks else f"bitwise_{kind}", a, b)


def _unop(name: str, a):
    from .. import ops

    return getattr(ops, name)(a)


def _np_transpose(a, axes=None):
    return a.transpose(axes) if axes is not None else a.transpose()


def _np_moveaxis(a, source, destination):
    n = a.ndim
    src = _axes("moveaxis", source if isinstance(source, (tuple, list)) else (source,), n)
    dst = _axes("moveaxis", destination if isinstance(destination, (tuple, list)) else
                (destination,), n)
    if len(src) != len(dst):
        raise ShapeError(f"moveaxis: source {source!r} and destination {destination!r} must "
                         f"name as many axes")
    order = [i for i in range(n) if i not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return a.transpose(order)


def _np_expand_dims(a, axis):
    axes = axis if isinstance(axis, (tuple, list)) else (axis,)
    n = a.ndim + len(axes)
    axes = sorted(_axes("expand_dims", axes, n))
    shape = list(a.shape)
    for x in axes:
        shape.insert(x, 1)
    return a.reshape(tuple(shape))


def _np_reshape(a, shape=None, order="C", *, newshape=None, copy=None):
    """``np.reshape`` of a Tensor, in C or Fortran order (order was ignored: ``np.reshape(t,
    s, order="F")`` and ``np.ravel(t, order="F")`` gave the C-order result)."""
    shape = newshape if shape is None else shape
    if shape is None:
        raise TraceError(f"np.reshape of a pypto.Tensor needs a shape (at {user_frame()})")
    if order in ("C", "A", "K"):        # a Tensor is laid out in C order
        return a.reshape(shape)
    if order != "F":
        raise TraceError(f"np.reshape: order must be 'C', 'F', 'A' or 'K', got {order!r} "
                         f"(at {user_frame()})")
    # Fortran order: the C-order reshape of the axes reversed, reversed back.
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    shape = _resolve_shape(shape, a.size, a.shape)
    return a.transpose().reshape(shape[::-1]).transpose()


#: What ``initial=`` combines with a reduction's result (NumPy starts the reduction there).
_INITIAL = {"sum": "add", "prod": "mul", "max": "maximum", "min": "minimum"}


def _np_reduce(name):
    def f(a, axis=None, keepdims=False, **kw):
        if kw.get("out") is not None or kw.get("dtype") is not None:
            raise TraceError(_numpy_on_tensor(f"np.{name} with out=/dtype=", name))
        where = kw.pop("where", True)
        if where is not True:
            # Ignored, np.sum(t, where=mask) summed every element.
            raise TraceError(f"np.{name} with where= was applied to a pypto.Tensor at "
                             f"{user_frame()}; mask first instead, e.g. "
                             f"pypto.ops.where(mask, t, identity).{name}(axis)")
        initial = kw.pop("initial", np._NoValue)
        kw.pop("out", None)
        kw.pop("dtype", None)
        if kw:
            raise TraceError(f"np.{name}: {', '.join(sorted(kw))} is not supported on a "
                             f"pypto.Tensor (at {user_frame()})")
        r = getattr(a, name)(axis=axis, keepdims=keepdims)
        if initial is np._NoValue:
            return r
        if name not in _INITIAL:
            raise TraceError(f"np.{name}: initial= is not supported on a pypto.Tensor (at "
                             f"{user_frame()})")
        # NumPy starts the reduction at ``initial`` (it was ignored: np.max(t, initial=100)
        # gave the plain max). In the result's dtype, as NumPy's reduction keeps it.
        return _binop(_INITIAL[name], r, np.asarray(initial, r.dtype))
    return f


def _np_where(cond, a=None, b=None):
    if a is None:
        raise TraceError(_numpy_on_tensor("np.where(cond) (one argument)", "where"))
    from .. import ops

    return ops.where(cond, a, b)


_ARRAY_FUNCS = {
    "transpose": _np_transpose,
    "moveaxis": _np_moveaxis,
    "swapaxes": lambda a, a1, a2: a.swapaxes(a1, a2),
    "reshape": _np_reshape,
    "ravel": lambda a, order="C": _np_reshape(a, -1, order),
    "broadcast_to": lambda a, shape, subok=False: as_tensor(a).broadcast_to(shape),
    "squeeze": lambda a, axis=None: a.squeeze(axis),
    "expand_dims": _np_expand_dims,
    "shape": lambda a: a.shape,
    "ndim": lambda a: a.ndim,
    "size": lambda a, axis=None: a.size if axis is None else a.shape[axis],
    "sum": _np_reduce("sum"), "mean": _np_reduce("mean"), "max": _np_reduce("max"),
    "min": _np_reduce("min"), "amax": _np_reduce("max"), "amin": _np_reduce("min"),
    "prod": _np_reduce("prod"),
    "where": _np_where,
    "result_type": lambda *a: np.result_type(*[x.dtype if isinstance(x, Tensor) else x
                                               for x in a]),
    "copy": lambda a, **kw: a,
    "ascontiguousarray": lambda a, **kw: a,
}
