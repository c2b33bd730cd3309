"""The calling convention: checks a call's arrays and parameters, runs the compiled kernel.

NumPy's last axis is Halide's dimension 0; ``hl.Buffer(ndarray)`` reverses the axes, so arrays pass
through without a copy when their innermost axis is dense. Other views (a transpose, a negative
stride) are copied once to a dense array first.

Zero-size arrays: an eager kernel call with a zero-size axis runs no kernel (Halide's buffers and
schedules are made for non-empty extents). It is answered on the checked, first-call path
(:func:`_empty_call`): an empty result as is, a non-empty one by the op's rule (``ops/_empty.py``:
a sum over nothing is 0), or a ShapeError naming the axis; it never makes a fast path.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Mapping, Sequence
from typing import Any

import halide as hl
import numpy as np

from .compiler import diskcache as _diskcache
from .compiler import jit as _jit
from .compiler import targets as _targets
from .errors import DtypeError, ExecutionError, ShapeError
from .infra.pool import active_pool
from .infra.profiling import active as _profiling


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
                f"{arg}.detach() to compute without gradients, or wrap the function with "
                f"pypto.torch.op to carry them through PyPTO ops")
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


def check_inputs(op, arrays: Sequence[np.ndarray], *, empty: bool = False
                 ) -> tuple[tuple[str, ...], dict[str, int]]:
    """Checks dtypes, ranks, sizes and named-dim agreement; returns (dtype signature, dims).

    A zero-size axis is refused unless ``empty`` (an eager call, which then handles it without
    running a kernel: see :func:`_empty_call`)."""
    given = tuple(a.dtype.name for a in arrays)
    if given not in op.dtypes:
        # Name the first argument that fits no signature.
        for i, (spec, dt) in enumerate(zip(op.inputs, given)):
            allowed = {s[i] for s in op.dtypes}
            if dt not in allowed:
                raise DtypeError(f"{op.name}: argument '{spec.name}' has dtype {dt}; expected "
                                 f"{' or '.join(sorted(allowed))}")
        hint = ""
        if all(len(set(sig)) == 1 for sig in op.dtypes):
            # Every signature is one dtype throughout: name the cast NumPy's promotion makes.
            to = np.result_type(*given)
            if (to.name,) * len(given) in op.dtypes:
                casts = " and ".join(f"{t.name}.astype(np.{to.name})"
                                     for t, dt in zip(op.inputs, given) if dt != to.name)
                hint = (f"; {op.name} does not promote mixed dtypes: cast explicitly, e.g. "
                        f"{casts} ({to.name}, NumPy's promotion)")
        raise DtypeError(f"{op.name}: dtypes {dict(zip((t.name for t in op.inputs), given))} "
                         f"do not match; expected {_fmt_sigs(op)}{hint}")
    dims: dict[str, int] = {}
    where: dict[str, str] = {}
    for spec, a in zip(op.inputs, arrays):
        if a.ndim != spec.rank:
            raise ShapeError(f"{op.name}: argument '{spec.name}' must be {spec.rank}-D "
                             f"[{', '.join(spec.dims)}], got shape {a.shape}")
        for axis, (d, n) in enumerate(zip(spec.dims, a.shape)):
            if n == 0 and not empty:
                raise ShapeError(f"{op.name}: argument '{spec.name}' has a zero-size axis {axis} "
                                 f"(dim {d}) in shape {a.shape}; zero-size arrays are not "
                                 f"supported where a kernel is made for the shape (a traced "
                                 f"program, a profile); eager op calls take them")
            if n > 2**31 - 1:
                raise ShapeError(f"{op.name}: argument '{spec.name}' axis {axis} is too large ({n})")
            if d in dims and dims[d] != n:
                raise ShapeError(f"{op.name}: dim {d} is {dims[d]} in {where[d]} but {n} in "
                                 f"'{spec.name}' (axis {axis}); shapes must agree")
            if d not in dims:
                dims[d], where[d] = n, f"'{spec.name}' (axis {axis})"
    return given, dims


def prepare(op, args: Sequence[Any], kwargs: Mapping[str, Any], *, empty: bool = False):
    """Splits a call into arrays and params and checks them: (arrays, dtypes, params, dims).

    With ``empty`` (an eager call) zero-size axes pass the checks, and derived output dims may be
    0 when an input is empty; the caller then runs :func:`_empty_call` instead of a kernel."""
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
    dtypes, dims = check_inputs(op, arrays, empty=empty)
    params = op.resolve_params(kwargs)
    zero = empty and 0 in dims.values()
    try:
        if op.validate is not None:
            op.validate(dims, params)
        if op.derive is not None:
            extra = op.derive(dims, params)
            for d in op.derived_dims:
                n = extra.get(d)
                if n is None or n < 1:
                    if zero and n == 0:
                        dims[d] = 0       # an empty input gives an empty output
                        continue
                    raise ShapeError(f"{op.name}: output dim {d} would be {n} for input dims "
                                     f"{dims} and parameters {params}; the inputs are too small")
                dims[d] = int(n)
    except (ArithmeticError, ValueError, IndexError) as e:
        if not zero or isinstance(e, (ShapeError, ParamError)):
            raise
        # A check or derivation that cannot take a zero extent (a division by it): refused.
        raise empty_refusal(op, arrays) from None
    return arrays, dtypes, params, dims


def empty_refusal(op, arrays: Sequence[np.ndarray], why: str = "") -> ShapeError:
    """The ShapeError of a call with a zero-size input that the op cannot compute, naming the
    argument and axis; ``why`` says what the op would need (else: not supported)."""
    for spec, a in zip(op.inputs, arrays):
        for axis, (d, n) in enumerate(zip(spec.dims, a.shape)):
            if n == 0:
                return ShapeError(
                    f"{op.name}: argument '{spec.name}' has a zero-size axis {axis} (dim {d}) in "
                    f"shape {a.shape}; " + (why or "zero-size arrays are not supported by this "
                                            "op (give it a non-empty array)"))
    return ShapeError(f"{op.name}: {why or 'an empty result is not supported by this op'}")


_empty_dtypes: dict = {}


def _out_dtypes(op, dtypes, params) -> tuple[str, ...]:
    """The kernel's output dtypes for a signature, from its algorithm (built, not compiled)."""
    try:
        key = (op, dtypes, tuple(sorted(params.items())))
        hash(key)
    except TypeError:
        key = None
    got = None if key is None else _empty_dtypes.get(key)
    if got is None:
        from .compiler.lower import build

        got = build(op, dtypes, params).out_dtypes
        if key is not None:
            if len(_empty_dtypes) > 256:
                _empty_dtypes.clear()
            _empty_dtypes[key] = got
    return got


def _empty_call(op, arrays, dtypes, params, dims, out=None, pending=None) -> list[np.ndarray]:
    """A kernel call with a zero-size input, run without a kernel (Halide's buffers and
    schedules are not made for zero extents), on the first-call path only.

    Outputs of zero size are returned as they are (new, or ``out``). Otherwise the op's
    ``empty`` rule fills them (its identity: 0 for a sum over an empty axis, zeros for a
    contraction over K = 0, ...) or refuses with a ShapeError when the op declares none."""
    specs = [(tuple(dims[d] for d in spec.dims), np.dtype(dt))
             for spec, dt in zip(op.outputs, _out_dtypes(op, dtypes, params))]
    if out is not None:
        outs = check_out(op.name, out, specs, [t.name for t in op.outputs])
    else:
        outs = (pending is not None and _fitting(pending, specs)) or new_outputs(specs)
    if all(o.size == 0 for o in outs):
        return list(outs)
    rule = op.empty         # the op's rule (a built-in op's shipped one: ops/_op.py)
    if rule is None:
        raise empty_refusal(op, arrays)
    results = rule(arrays, params, dims, specs)
    results = results if isinstance(results, (tuple, list)) else (results,)
    for o, r in zip(outs, results):
        np.copyto(o, r, casting="unsafe")
    return list(outs)


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
        out = new_outputs(out_specs(op, kernel, dims))
    try:
        # Both kinds of kernel take NumPy arrays: the disk kernel builds halide_buffer_t's, the
        # JIT's hl.Callable converts in C++ (cheaper than an hl.Buffer made here per array).
        kernel.callable(*[dense(a) for a in arrays], *out)
    except hl.HalideError as e:
        raise _failure(op, kernel, e) from None
    return list(out)


def _failure(op, kernel, e: Exception) -> ExecutionError:
    msg = str(e).strip().replace("\n", " ")
    hint = ""
    if "accessed at" in msg:
        hint = ("; a split or vector factor of the schedule is larger than this shape allows "
                "(use tail guard_with_if, or a schedule made for this shape)")
    return ExecutionError(f"op {op.name!r} failed at run time ({kernel.source} schedule): "
                          f"{msg}{hint}")


def out_specs(op, kernel, dims: Mapping[str, int]) -> list[tuple[tuple[int, ...], np.dtype]]:
    """(shape, dtype) of each kernel output for ``dims``."""
    return [(tuple(dims[d] for d in spec.dims), np.dtype(dt))
            for spec, dt in zip(op.outputs, kernel.out_dtypes)]


def new_outputs(specs, pool=False) -> list[np.ndarray]:
    """Fresh output arrays, from the memory pool when ``pypto.memory_policy`` asks for one (or
    from ``pool`` when given: None for plain arrays)."""
    pool = active_pool() if pool is False else pool
    if pool is None:
        return [np.empty(shape, dt) for shape, dt in specs]
    return [pool.empty(shape, dt) for shape, dt in specs]


def check_out(op_name: str, out: Any, specs, names: Sequence[str] = (), *,
              reshape: bool = False) -> list[np.ndarray]:
    """Checks a caller's ``out=`` against the outputs a call makes; returns them in kernel shape.

    ``specs`` is a list of (shape, dtype), one per output; ``out`` is an array (one output) or a
    tuple of arrays (NumPy's convention). Each must be a writeable, C-contiguous NumPy array of
    the output's dtype and shape. With ``reshape`` (an ``out=`` a public call hands to its kernel
    through its frontend) an array of another shape with the same element count is viewed in the
    output's shape (the frontend's reshape of the result then lands on it). The arrays returned
    share memory with ``out``: the kernel writes in place.

    Ops declared in new modules need no code of their own for ``out=``: ``Op.__call__`` takes it
    and hands it to this check. A frontend that builds its result without its op's kernel may
    call this with the result's specs to word its errors the same way.

    Raises:
        ParamError: ``out`` is not an array (or tuple of them), the count is wrong, or an array is
            read-only or not C-contiguous.
        DtypeError: an array's dtype is not the output's.
        ShapeError: an array's element count is not the output's.
    """
    outs = out_arrays(op_name, out, len(specs), names)
    views = []
    for i, (o, (shape, dt)) in enumerate(zip(outs, specs)):
        what = _out_name(i, len(specs), names)
        if o.dtype != dt:
            raise DtypeError(f"{op_name}: {what} has dtype {o.dtype}; expected {dt} (the dtype "
                             f"of the result)")
        if o.shape != shape:
            n = 1
            for s in shape:
                n *= s
            if not reshape:
                raise ShapeError(f"{op_name}: {what} has shape {o.shape}; expected {shape} (the "
                                 f"shape of the result)")
            if o.size != n:
                raise ShapeError(f"{op_name}: {what} has shape {o.shape} ({o.size} elements); "
                                 f"the result has {n} elements")
        views.append(o if o.shape == shape else o.reshape(shape))
    return views


def overlaps(outs: Sequence[Any], arrays: Sequence[Any]) -> bool:
    """Whether an output may share memory with an input (by address bounds, so interleaved views
    count too). Kernels read and write in vectors and tiles, and a vector tail shifted inwards
    re-reads elements already written: a call writing over its own input computes into new
    outputs and copies them in, as NumPy does where its loops could not run in place.

    ``arrays`` are a call's arguments as the caller gave them: besides arrays (subclasses
    included), the arrays inside a list or tuple (``concat([a, b], out=...)``) and objects read
    through the array protocols (a CPU torch tensor, which ``as_array`` reads in place) count."""
    for o in outs:
        if isinstance(o, np.ndarray):
            for a in arrays:
                if type(a) is np.ndarray:       # the usual argument: checked without a call
                    if np.may_share_memory(o, a):
                        return True
                elif a is not None and _shares(o, a, 0):
                    return True
    return False


_SCALARS = (int, float, complex, bool, str, bytes, np.generic)


def _shares(o: np.ndarray, a: Any, depth: int) -> bool:
    """Whether argument ``a`` (any object an op accepts) may share memory with ``o``."""
    if isinstance(a, np.ndarray):
        return np.may_share_memory(o, a)
    if isinstance(a, _SCALARS) or a is None:
        return False
    if isinstance(a, (list, tuple)):
        # The arrays of a sequence argument; a nested list of numbers holds no memory of its own.
        return depth < 8 and any(_shares(o, x, depth + 1) for x in a)
    if any(hasattr(a, p) for p in ("__array_interface__", "__array_struct__", "__array__")):
        try:
            view = np.asarray(a)    # a CPU torch tensor: a view of its memory, not a copy
        except Exception:           # refused (a tensor that requires grad): as_array says why
            return False
        return np.may_share_memory(o, view)
    return False


def _fitting(out: Any, specs) -> list[np.ndarray] | None:
    """``out`` (a public call's) viewed as the kernel's outputs when it fits them exactly in count,
    dtype, element count and layout; else None (the frontend's result is then copied into it)."""
    outs = (out,) if isinstance(out, np.ndarray) else out
    if not isinstance(outs, tuple) or len(outs) != len(specs):
        return None
    views = []
    for o, (shape, dt) in zip(outs, specs):
        n = 1
        for s in shape:
            n *= s
        if (type(o) is not np.ndarray or o.dtype != dt or o.size != n
                or not o.flags.c_contiguous or not o.flags.writeable):
            return None
        views.append(o if o.shape == shape else o.reshape(shape))
    return views


def _out_name(i: int, n: int, names: Sequence[str]) -> str:
    what = f"out[{i}]" if n > 1 else "out"
    return what + (f" ('{names[i]}')" if n > 1 and len(names) == n else "")


def out_arrays(op_name: str, out: Any, n: int | None, names: Sequence[str] = ()) -> tuple:
    """``out`` as a tuple of ``n`` (any number when None) writeable, C-contiguous NumPy arrays
    (what can be checked before a call runs); raises ParamError naming what is wrong otherwise."""
    if type(out) is np.ndarray and (n is None or n == 1):
        flags = out.flags     # the usual call, one dense writeable array: checked in 0.1 us
        if flags.writeable and flags.c_contiguous:
            return (out,)
    from .errors import ParamError

    outs = (out,) if isinstance(out, np.ndarray) else out
    if n is None and isinstance(outs, tuple) and outs:
        n = len(outs)
    if not isinstance(outs, tuple) or len(outs) != n:
        n = n or 1
        want = "an array" if n == 1 else f"a tuple of {n} arrays"
        got = type(out).__name__ + (f" of {len(outs)}" if isinstance(outs, tuple) else "")
        raise ParamError(f"{op_name}: out= must be {want} (one per output), got {got}")
    for i, o in enumerate(outs):
        what = _out_name(i, n, names)
        if type(o) is not np.ndarray:
            raise ParamError(f"{op_name}: {what} must be a NumPy array, got {type(o).__name__}")
        if not o.flags.writeable:
            raise ParamError(f"{op_name}: {what} is read-only; pass a writeable array")
        if not o.flags.c_contiguous:
            raise ParamError(f"{op_name}: {what} must be C-contiguous (a dense array such as "
                             f"np.empty(shape, dtype)), got strides {o.strides}")
    return outs


#: How ``out=`` calls ended: written in place by the kernel, or copied once (see Op._call_into).
out_stats = {"in_place": 0, "copied": 0}


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


def run_as_call(op, dtypes, params, dims: Mapping[str, int], arrays: Sequence[np.ndarray],
                out: Any = None, *, pending: Any = None):
    """Runs the kernel a call picks on checked arrays; returns (outputs, kernel).

    ``out`` (an array or a tuple, as the caller gave it) is checked by :func:`check_out` and
    written in place; without it the outputs are new (see ``pypto.memory_policy``).

    A stored schedule tuned for another shape may not fit this one: when it fails at run time,
    the default schedule runs instead (and is remembered for this call's key).
    """
    from .compiler.jit import fallback_kernel, get_kernel

    kernel = get_kernel(op, dtypes, params, dims)
    specs = out_specs(op, kernel, dims)
    dest = None
    if out is not None:
        outs = check_out(op.name, out, specs, [t.name for t in op.outputs])
        if overlaps(outs, arrays):
            dest, outs = outs, new_outputs(specs)
    else:
        outs = (pending is not None and _fitting(pending, specs)) or new_outputs(specs)
    try:
        return _into(dest, run_kernel(kernel, op, arrays, dims, outs)), kernel
    except ExecutionError as e:
        if not kernel.source.startswith("database"):
            raise
        err = e
    kernel = fallback_kernel(op, dtypes, params, dims, kernel, err)
    return _into(dest, run_kernel(kernel, op, arrays, dims, outs)), kernel


def _into(dest: list[np.ndarray] | None, outs: list[np.ndarray]) -> list[np.ndarray]:
    """``outs`` copied into ``dest`` (the caller's out= where it overlapped an input)."""
    if dest is None:
        return outs
    for d, o in zip(dest, outs):
        np.copyto(d, o)
    return dest


#: Plug-in point of the program frontend (``pypto.frontend``, a layer above this one): the traced
#: Tensor type, and the function that records an op call inside a trace instead of running it.
_TRACED: tuple = ()
_tracing: Any = None     # () -> the active trace context or None
_record: Any = None      # (op, arrays, dtypes, params, dims) -> output Tensors
_as_tensor: Any = None   # array -> a Tensor of the active trace (an input of the program)
#: (op, x of shape [R, O], params) -> op's [O, R] reduction of ``x.T``, run as a one-op program
#: whose schedule reads the rows in place (a reduction over leading axes; see ops.reduce).
_leading_reduce: Any = None

#: Set by the frontend: ``join_many(arrays, axis)``, a concat of many NumPy arrays in one pass
#: (a one-op program; the kernel joins two at a time).
_join_many: Any = None


#: Set while ``pypto.check_graph`` runs (by the frontend): public op calls then go through
#: ``checked_call``, which records an op's error and gives a placeholder so checking goes on.
checking = 0
checked_call: Any = None


def traced(values: Sequence[Any]) -> bool:
    """True when any of ``values`` is a traced Tensor (frontends then keep everything traced)."""
    return bool(_TRACED) and any(type(v) in _TRACED for v in values)


def as_traced(values: Sequence[Any]) -> list:
    """``values`` with every array made a Tensor of the active trace (call when :func:`traced`)."""
    return [v if type(v) in _TRACED else _as_tensor(v) for v in values]


class _Plan:
    """What the checks of one call signature produced, kept so that the next call with the same
    signature (op, arrays' dtypes, shapes and strides, parameters, target) skips them: the kernel,
    a launcher with prepared buffer structures, and the outputs' shapes and dtypes."""

    __slots__ = ("op", "kernel", "launch", "launch_views", "specs", "strides", "shapes", "dtypes",
                 "params", "dims", "gen")

    def __init__(self, op, kernel, arrays, outs, dtypes, params, dims):
        self.op, self.kernel = op, kernel
        self.specs = [(o.shape, o.dtype) for o in outs]
        # C-order strides, as np.empty makes them (an out= given with other strides on a length-1
        # axis is still C-contiguous, but takes the checked way).
        self.strides = [_c_strides(o.shape, o.itemsize) for o in outs]
        outs = [np.lib.stride_tricks.as_strided(o, strides=st) for o, st in zip(outs, self.strides)]
        self.dtypes, self.params, self.dims = dtypes, params, dims
        self.gen = _jit.generation
        self.shapes = shapes = [a.shape for a in [*arrays, *outs]]   # the kernel's, in order
        if kernel.disk:
            # The launcher reads only each array's data pointer: arrays of another shape holding
            # the same bytes in the same order (a frontend's reshape) run as they are.
            self.launch = self.launch_views = kernel.callable.launcher([*arrays, *outs])
        else:
            fn = kernel.callable
            self.launch = lambda all_arrays: fn(*all_arrays)
            self.launch_views = lambda all_arrays: fn(*[a.reshape(s) for a, s in
                                                        zip(all_arrays, shapes)])

    def outputs(self, out) -> list[np.ndarray] | None:
        """The arrays to write: new ones, or ``out`` when it fits exactly (else None)."""
        if out is None:
            pool = active_pool()
            if pool is None:
                return [np.empty(shape, dt) for shape, dt in self.specs]
            return [pool.empty(shape, dt) for shape, dt in self.specs]
        outs = (out,) if type(out) is np.ndarray else out
        if type(outs) is not tuple or len(outs) != len(self.specs):
            return None
        for o, (shape, dt), strides in zip(outs, self.specs, self.strides):
            if (type(o) is not np.ndarray or o.shape != shape or o.dtype != dt
                    or o.strides != strides or not o.flags.writeable):
                return None
        return list(outs)


def _c_strides(shape: tuple[int, ...], itemsize: int) -> tuple[int, ...]:
    out, step = [], itemsize
    for n in reversed(shape):
        out.append(step)
        step *= n
    return tuple(reversed(out))


def _signature(args: Sequence[Any], kwargs: Mapping[str, Any]) -> tuple | None:
    """What the checks of a call depend on, as a hashable key; None when an argument is not a
    plain NumPy array (traced Tensors, lists, torch tensors go the checked way every time)."""
    key: list = []
    for a in args:
        if type(a) is not np.ndarray:
            return None
        key += (a.dtype, a.shape, a.strides)
    for k, v in kwargs.items():
        # The type too: True == 1 but bool is not an int parameter; a float zero by its repr:
        # -0.0 == 0.0, and a kernel made for one wrote the other's sign (masked_fill, pad).
        key += (k, type(v), repr(v) if isinstance(v, _FLOATS) and v == 0 else v)
    return tuple(key)


_FLOATS = _jit.FLOAT_TYPES


#: The ``out=`` an ``Op.__call__`` passes down to its own kernel call through its frontend:
#: [op, out, taken]. Set only while a public call with ``out=`` runs.
pending_out: contextvars.ContextVar[list | None] = contextvars.ContextVar("pypto_out", default=None)


def call_op(op, args: Sequence[Any], kwargs: Mapping[str, Any], out: Any = None):
    """``op(*arrays, **params)`` on NumPy arrays: check, compile (cached), run.

    Inside a traced function the same checks run, then the call is recorded as a node of the
    program (its arrays become program inputs) instead of running a kernel.

    A call whose signature (dtypes, shapes, strides, parameters) was checked and run before
    takes a fast path: no checks, the cached kernel, prepared buffer structures. Every check
    depends only on that signature, so a call that would fail a check never takes it.
    """
    if _tracing is not None and _tracing() is not None:
        arrays, dtypes, params, dims = prepare(op, args, kwargs)
        if out is not None:
            from .errors import ParamError

            raise ParamError(f"{op.name}: out= cannot be used inside a traced program (its "
                             f"values are not computed yet); assign the result instead")
        outs = _record(op, arrays, dtypes, params, dims)
        return outs[0] if len(outs) == 1 else tuple(outs)
    pending = None
    if out is None:
        pend = pending_out.get()
        if pend is not None and pend[0] is op:
            pending, pend[0], pend[2] = pend[1], None, True   # offered once, to this op's kernel
    cache = op.__dict__.get("_fast")
    key = None
    if cache is not None and _targets._current.get() is None and _profiling() is None:
        try:
            key = _signature(args, kwargs)
            plan = None if key is None else cache.get(key)
        except TypeError:          # an unhashable parameter value: checked every time
            key = plan = None
        if plan is not None and plan.gen == _jit.generation:
            if pending is None:
                outs = plan.outputs(out)
                if out is not None and outs is not None and overlaps(outs, args):
                    outs = None     # writes over an input: the checked way computes and copies
            else:
                # The public call's out= offered through its frontend: written in place when it
                # fits the kernel's outputs exactly (viewed in their shapes), else the checked way.
                outs = _fitting(pending, plan.specs)
                if outs is not None and any(o.strides != st for o, st in zip(outs, plan.strides)):
                    outs = None
            if outs is not None:
                try:
                    plan.launch([*args, *outs])
                except hl.HalideError as e:
                    raise _failure(op, plan.kernel, e) from None
                seen = _observers.get()
                if seen is not None:
                    seen.append((op, plan.dtypes, plan.params, plan.dims, plan.kernel))
                rec = _recording.get()
                if rec is not None:
                    rec.append((op, plan, args, outs))
                if out is not None:
                    return out      # the caller's own object back, as NumPy does
                return outs[0] if len(outs) == 1 else tuple(outs)
    arrays, dtypes, params, dims = prepare(op, args, kwargs, empty=True)
    if 0 in dims.values():
        outs = _empty_call(op, arrays, dtypes, params, dims, out, pending)
        rec = _recording.get()
        if rec is not None:
            rec.append(None)     # no kernel ran: this signature keeps its frontend
        if out is not None:
            return out
        return outs[0] if len(outs) == 1 else tuple(outs)
    outs, kernel = run_as_call(op, dtypes, params, dims, arrays, out, pending=pending)
    seen = _observers.get()
    if seen is not None:
        seen.append((op, dtypes, params, dims, kernel))
    plan = None
    if key is not None and all(a is v and a.ndim and dense(a) is a for a, v in zip(arrays, args)):
        if len(cache) > 64:
            cache.clear()   # a bounded cache: a model's shapes repeat, a sweep's do not
        plan = cache[key] = _Plan(op, kernel, arrays, outs, dtypes, params, dims)
    rec = _recording.get()
    if rec is not None:
        rec.append((op, plan, args, outs))
    if out is not None:
        return out
    return outs[0] if len(outs) == 1 else tuple(outs)


# -- the public call's fast path --------------------------------------------------------------------
# A frontend (the NumPy-style call: broadcasting, axes, any rank) maps its arguments to the
# kernel's canonical form. For a frontend declared shape-only (``frontend.shape_only = True``:
# what it does depends on its arguments' dtypes, shapes, strides and parameters, never on array
# values), the first call of a signature is recorded; when it ran exactly one kernel, of its own
# op, on reshapes of its own arrays (same memory, C order) and returned reshapes of the kernel's
# outputs, later calls of that signature go straight to the kernel with the public arrays.

_recording: contextvars.ContextVar[list | None] = contextvars.ContextVar("pypto_rec", default=None)
_UNPLANNED = False   # a signature whose frontend does more than reshape: it always runs


class _PublicPlan:
    __slots__ = ("kplan", "sources", "identity", "specs", "scalar", "gen")

    def __init__(self, kplan: _Plan, sources, specs, scalar: bool, nargs: int):
        self.kplan, self.sources, self.specs, self.scalar = kplan, sources, specs, scalar
        self.identity = sources == list(range(nargs))   # the kernel takes the arguments in order
        self.gen = kplan.gen

    def outputs(self, out):
        if out is None:
            pool = active_pool()
            if pool is None:
                return [np.empty(shape, dt) for shape, dt in self.specs]
            return [pool.empty(shape, dt) for shape, dt in self.specs]
        outs = (out,) if type(out) is np.ndarray else out
        if self.scalar or type(outs) is not tuple or len(outs) != len(self.specs):
            return None
        for o, (shape, dt) in zip(outs, self.specs):
            if (type(o) is not np.ndarray or o.shape != shape or o.dtype != dt
                    or not o.flags.c_contiguous or not o.flags.writeable):
                return None
        return list(outs)


def _same_bytes(a, b) -> bool:
    """True when ``b`` is a reshape of ``a``: both C-ordered views of the same memory."""
    return (type(a) is np.ndarray and type(b) is np.ndarray and a.dtype == b.dtype
            and a.size == b.size and a.flags.c_contiguous and b.flags.c_contiguous
            and _diskcache.data_address(a) == _diskcache.data_address(b))


def _public_plan(op, args, rec: list, result) -> _PublicPlan | None:
    if len(rec) != 1 or rec[0] is None:
        return None
    kop, kplan, kargs, kouts = rec[0]
    if kop is not op or kplan is None:
        return None
    sources = []
    for ka in kargs:
        js = [j for j, a in enumerate(args) if _same_bytes(a, ka)]
        if len(js) != 1:
            # No argument, or several holding the same bytes (add(a, a)): which one a later
            # call's kernel argument comes from is ambiguous, so this signature keeps the
            # frontend.
            return None
        sources.append(js[0])
    results = result if isinstance(result, tuple) else (result,)
    if len(results) != len(kouts):
        return None
    if len(kouts) == 1 and isinstance(result, np.generic) and kouts[0].size == 1 \
            and result.dtype == kouts[0].dtype:
        return _PublicPlan(kplan, sources, [(kouts[0].shape, kouts[0].dtype)], True, len(args))
    if not all(_same_bytes(k, r) for k, r in zip(kouts, results)):
        return None
    return _PublicPlan(kplan, sources, [(r.shape, r.dtype) for r in results], False, len(args))


def call_public(op, args: Sequence[Any], kwargs: Mapping[str, Any], out: Any = None):
    """The public call of an op with a shape-only frontend (see above); ``out`` as in NumPy."""
    outer = _recording.get()
    if outer is not None:
        outer.append(None)   # a public call inside a recorded frontend: that one is not a reshape
    key = None
    if ((_tracing is None or _tracing() is None) and _targets._current.get() is None
            and _profiling() is None):
        # The signature, written out here: this is the hot path of every repeated call.
        key = []
        for a in args:
            if type(a) is not np.ndarray:
                key = None
                break
            key += (a.dtype, a.shape, a.strides)
    if key is not None:
        for k, v in kwargs.items():
            key += (k, type(v), repr(v) if isinstance(v, _FLOATS) and v == 0 else v)
        key = tuple(key)
        try:
            p = op._public.get(key)
        except TypeError:      # an unhashable parameter value
            p = key = None
        if p and p.gen == _jit.generation:
            if out is None:
                pool = active_pool()
                outs = ([np.empty(shape, dt) for shape, dt in p.specs] if pool is None
                        else [pool.empty(shape, dt) for shape, dt in p.specs])
            else:
                outs = p.outputs(out)
                if outs is not None and overlaps(outs, args):
                    outs = None     # writes over an input: the frontend's way, then a copy
            if outs is not None:
                kp = p.kplan
                try:
                    kp.launch_views([*args, *outs] if p.identity else
                                    [*[args[j] for j in p.sources], *outs])
                except hl.HalideError as e:
                    raise _failure(op, kp.kernel, e) from None
                seen = _observers.get()
                if seen is not None:
                    seen.append((op, kp.dtypes, kp.params, kp.dims, kp.kernel))
                if p.scalar:
                    return outs[0].reshape(-1)[0]
                if out is not None:
                    out_stats["in_place"] += len(outs)
                    return out
                return outs[0] if len(outs) == 1 else tuple(outs)
        elif p is _UNPLANNED:
            key = None
    if key is None:
        return op._call_into(args, kwargs, out) if out is not None else op.frontend(*args, **kwargs)
    plans = op._public
    rec: list = []
    token = _recording.set(rec)
    try:
        result = op._call_into(args, kwargs, out) if out is not None else op.frontend(*args,
                                                                                   **kwargs)
    finally:
        _recording.reset(token)
    plan = _public_plan(op, args, rec, result)
    if plan is not None or out is None:   # an out= that was copied into says nothing of the rest
        if len(plans) > 64:
            plans.clear()
        plans[key] = plan if plan is not None else _UNPLANNED
    return result
