"""The calling convention: checks a call's arrays and parameters, runs the compiled kernel.

NumPy's last axis is Halide's dimension 0; ``hl.Buffer(ndarray)`` reverses the axes, so arrays pass
through without a copy when their innermost axis is dense. Other views (a transpose, a negative
stride) are copied once to a dense array first.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Mapping, Sequence
from typing import Any

import halide as hl
import numpy as np

from .errors import DtypeError, ExecutionError, ShapeError


def _fmt_sigs(op) -> str:
    if all(len(set(s)) == 1 for s in op.dtypes):
        names = ", ".join(s[0] for s in op.dtypes)
        return names if len(op.inputs) == 1 else f"{names} (all inputs the same dtype)"
    return " or ".join("(" + ", ".join(f"{t.name}={dt}" for t, dt in zip(op.inputs, s)) + ")"
                       for s in op.dtypes)


def as_array(value: Any, op_name: str, arg: str) -> np.ndarray:
    """``value`` as a NumPy array in native byte order: the one door every op input goes through.

    Anything NumPy can read without guessing is accepted: arrays, nested lists and numbers, and
    objects exposing the array protocols (a CPU torch tensor, for one). Halide reads raw bytes, so
    an array in the other byte order ('>f4' on a little-endian machine) is converted here, once;
    a native array is returned as is, without a copy.
    """
    if type(value) in _TRACED:       # a pypto.Tensor inside a traced function
        return value
    if not isinstance(value, np.ndarray):
        if getattr(value, "requires_grad", False) is True and \
                type(value).__module__.partition(".")[0] == "torch":
            # Reading it would drop the gradient silently (and torch refuses with a raw error).
            raise DtypeError(
                f"{op_name}: argument '{arg}' is a torch tensor that requires grad; pass "
                f"{arg}.detach() to compute without gradients (the upcoming pypto.torch bridge "
                f"will carry gradients through PyPTO ops)")
        if not (isinstance(value, (list, tuple, int, float, np.generic))
                or any(hasattr(value, p) for p in ("__array__", "__array_interface__",
                                                    "__array_struct__"))):
            raise DtypeError(f"{op_name}: argument '{arg}' must be a NumPy array, got "
                             f"{type(value).__name__}")
        try:
            value = np.asarray(value)
        except (ValueError, TypeError, RuntimeError) as e:
            raise DtypeError(f"{op_name}: argument '{arg}' is not an array ({e})") from None
    if not value.dtype.isnative:
        # astype to the same dtype in native order swaps the bytes (one copy, values unchanged).
        value = value.astype(value.dtype.newbyteorder("="))
    return value


def check_inputs(op, arrays: Sequence[np.ndarray]) -> tuple[tuple[str, ...], dict[str, int]]:
    """Checks dtypes, ranks, sizes and named-dim agreement; returns (dtype signature, dims)."""
    given = tuple(a.dtype.name for a in arrays)
    if given not in op.dtypes:
        # Name the first argument that fits no signature.
        for i, (spec, dt) in enumerate(zip(op.inputs, given)):
            allowed = {s[i] for s in op.dtypes}
            if dt not in allowed:
                raise DtypeError(f"{op.name}: argument '{spec.name}' has dtype {dt}; expected "
                                 f"{' or '.join(sorted(allowed))}")
        raise DtypeError(f"{op.name}: dtypes {dict(zip((t.name for t in op.inputs), given))} "
                         f"do not match; expected {_fmt_sigs(op)}")
    dims: dict[str, int] = {}
    where: dict[str, str] = {}
    for spec, a in zip(op.inputs, arrays):
        if a.ndim != spec.rank:
            raise ShapeError(f"{op.name}: argument '{spec.name}' must be {spec.rank}-D "
                             f"[{', '.join(spec.dims)}], got shape {a.shape}")
        for axis, (d, n) in enumerate(zip(spec.dims, a.shape)):
            if n == 0:
                raise ShapeError(f"{op.name}: argument '{spec.name}' has a zero-size axis {axis} "
                                 f"(dim {d}) in shape {a.shape}; zero-size arrays are not supported")
            if n > 2**31 - 1:
                raise ShapeError(f"{op.name}: argument '{spec.name}' axis {axis} is too large ({n})")
            if d in dims and dims[d] != n:
                raise ShapeError(f"{op.name}: dim {d} is {dims[d]} in {where[d]} but {n} in "
                                 f"'{spec.name}' (axis {axis}); shapes must agree")
            if d not in dims:
                dims[d], where[d] = n, f"'{spec.name}' (axis {axis})"
    return given, dims


def prepare(op, args: Sequence[Any], kwargs: Mapping[str, Any]):
    """Splits a call into arrays and params and checks them: (arrays, dtypes, params, dims)."""
    from .errors import ParamError

    names = [t.name for t in op.inputs]
    kwargs = dict(kwargs)
    if len(args) > len(names):
        raise ParamError(f"{op.name}: takes {len(names)} array argument(s) ({', '.join(names)}) "
                         f"and keyword parameters; got {len(args)} positional")
    values = list(args)
    for n in names[len(args):]:
        if n not in kwargs:
            raise ParamError(f"{op.name}: missing array argument '{n}'")
        values.append(kwargs.pop(n))
    arrays = [as_array(v, op.name, n) for v, n in zip(values, names)]
    dtypes, dims = check_inputs(op, arrays)
    params = op.resolve_params(kwargs)
    if op.validate is not None:
        op.validate(dims, params)
    if op.derive is not None:
        extra = op.derive(dims, params)
        for d in op.derived_dims:
            n = extra.get(d)
            if n is None or n < 1:
                raise ShapeError(f"{op.name}: output dim {d} would be {n} for input dims {dims} "
                                 f"and parameters {params}; the inputs are too small")
            dims[d] = int(n)
    return arrays, dtypes, params, dims


def dense(a: np.ndarray) -> np.ndarray:
    """``a`` itself when Halide can read it in place, else a dense copy."""
    if a.ndim == 0:
        return a.reshape(1)
    if (a.strides[-1] == a.itemsize and all(s >= 0 for s in a.strides) and a.flags.aligned
            and a.flags.writeable):  # hl.Buffer refuses read-only arrays
        return a
    return np.array(a, order="C")  # a fresh, dense, writeable copy


def run_kernel(kernel, op, arrays: Sequence[np.ndarray], dims: Mapping[str, int],
               out: Sequence[np.ndarray] | None = None) -> list[np.ndarray]:
    """Runs a compiled kernel on checked arrays; returns the output arrays."""
    if out is None:
        out = [np.empty(tuple(dims[d] for d in spec.dims), dtype=dt)
               for spec, dt in zip(op.outputs, kernel.out_dtypes)]
    try:
        if kernel.disk:
            kernel.callable(*[dense(a) for a in arrays], *out)
        else:
            kernel.callable(*[hl.Buffer(dense(a)) for a in arrays], *[hl.Buffer(o) for o in out])
    except hl.HalideError as e:
        msg = str(e).strip().replace("\n", " ")
        hint = ""
        if "accessed at" in msg:
            hint = ("; a split or vector factor of the schedule is larger than this shape allows "
                    "(use tail guard_with_if, or a schedule made for this shape)")
        raise ExecutionError(f"op {op.name!r} failed at run time ({kernel.source} schedule): "
                             f"{msg}{hint}") from None
    return list(out)


_observers: contextvars.ContextVar[list | None] = contextvars.ContextVar("pypto_observe",
                                                                      default=None)


@contextlib.contextmanager
def observe():
    """Collects ``(op, dtypes, params, dims, kernel)`` for every kernel call made inside."""
    calls: list = []
    token = _observers.set(calls)
    try:
        yield calls
    finally:
        _observers.reset(token)


def run_as_call(op, dtypes, params, dims: Mapping[str, int], arrays: Sequence[np.ndarray]):
    """Runs the kernel a call picks on checked arrays; returns (outputs, kernel).

    A stored schedule tuned for another shape may not fit this one: when it fails at run time,
    the default schedule runs instead (and is remembered for this call's key).
    """
    from .compiler.jit import fallback_kernel, get_kernel

    kernel = get_kernel(op, dtypes, params, dims)
    try:
        return run_kernel(kernel, op, arrays, dims), kernel
    except ExecutionError:
        if not kernel.source.startswith("database"):
            raise
    kernel = fallback_kernel(op, dtypes, params, dims, kernel)
    return run_kernel(kernel, op, arrays, dims), kernel


#: Plug-in point of the program frontend (``pypto.frontend``, a layer above this one): the traced
#: Tensor type, and the function that records an op call inside a trace instead of running it.
_TRACED: tuple = ()
_tracing: Any = None     # () -> the active trace context or None
_record: Any = None      # (op, arrays, dtypes, params, dims) -> output Tensors
_as_tensor: Any = None   # array -> a Tensor of the active trace (an input of the program)


def traced(values: Sequence[Any]) -> bool:
    """True when any of ``values`` is a traced Tensor (frontends then keep everything traced)."""
    return bool(_TRACED) and any(type(v) in _TRACED for v in values)


def as_traced(values: Sequence[Any]) -> list:
    """``values`` with every array made a Tensor of the active trace (call when :func:`traced`)."""
    return [v if type(v) in _TRACED else _as_tensor(v) for v in values]


def call_op(op, args: Sequence[Any], kwargs: Mapping[str, Any]):
    """``op(*arrays, **params)`` on NumPy arrays: check, compile (cached), run.

    Inside a traced function the same checks run, then the call is recorded as a node of the
    program (its arrays become program inputs) instead of running a kernel.
    """
    arrays, dtypes, params, dims = prepare(op, args, kwargs)
    if _tracing is not None and _tracing() is not None:
        outs = _record(op, arrays, dtypes, params, dims)
        return outs[0] if len(outs) == 1 else tuple(outs)
    outs, kernel = run_as_call(op, dtypes, params, dims, arrays)
    seen = _observers.get()
    if seen is not None:
        seen.append((op, dtypes, params, dims, kernel))
    return outs[0] if len(outs) == 1 else tuple(outs)
