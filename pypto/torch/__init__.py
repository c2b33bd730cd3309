"""PyPTO inside PyTorch: ``pypto.torch.op`` and ``pypto.torch.Module`` (needs the ``torch`` extra).

``op(fn)`` turns a PyPTO op or a function of PyPTO ops into a PyTorch op, registered with
``torch.library.custom_op``: a forward op, a fake (meta) implementation that gives output shapes
from a trace without running anything, and ``register_autograd`` whose backward is a second
such op (:meth:`TorchOp.backward`) running PyPTO's fused forward+backward program
(:func:`pypto.vjp`) for the float tensors that require a gradient (a float argument that needs
none, boxes or a quantization scale, is left out, as its rule may have no gradient for it).
The backward op has a backward of its own made the same way, so second
and higher derivatives (``create_graph=True``) work. Every op has a fake implementation, so
they also trace under ``torch.compile`` / AOTAutograd.

Memory (CPU): inputs reach PyPTO as ``t.detach().numpy()``, a NumPy view of the same memory (the
same ``data_ptr``; a non-dense view is copied once by the runtime, as for any NumPy view).
The forward's outputs are torch tensors allocated with ``torch.empty`` (shapes from the fake
implementation's trace) and handed to the program as ``out=``: its last pipeline writes them in
place (a result that is an input, or a value computed before a graph break, is copied in). A
function with an ``out`` parameter of its own gets arrays PyPTO allocates instead, wrapped by
``torch.from_numpy`` (no copy either). The backward op is made the same way, so the
gradients are torch tensors the vjp program writes in place.
"""

from __future__ import annotations

import inspect
import itertools
import re
from collections.abc import Callable

import numpy as np
import torch  # the real PyTorch: absolute imports never resolve to this package

from ..autodiff.api import vjp_traceable
from ..errors import DtypeError, GraphBreakError, ParamError, ShapeError, TraceError
from ..frontend import tensor as T
from ..frontend.jit import JitFunction, _result_structure

__all__ = ["Module", "TorchOp", "op", "to_numpy"]

_ids = itertools.count()


def to_numpy(t: "torch.Tensor", what: str = "input", where: str = "pypto.torch") -> np.ndarray:
    """A NumPy view of a CPU tensor's memory (no copy). ``what`` and ``where`` name the
    argument and the op in errors."""
    if not isinstance(t, torch.Tensor):
        return np.asarray(t)
    if t.device.type != "cpu":
        raise DtypeError(f"{where}: {what} is on {t.device}; PyPTO ops run on CPU tensors "
                         f"here (move it with .cpu())")
    _numpy_dtype(str(t.dtype), what, where)
    return t.detach().resolve_conj().resolve_neg().numpy()


def _numpy_dtype(name: str, what: str, where: str) -> np.dtype:
    """The NumPy dtype of the torch dtype called ``name`` ("torch.float32"); a DtypeError naming
    the op and the argument for those NumPy has not (bfloat16, the float8 types, complex32),
    which torch's own ``.numpy()`` refused with "Got unsupported ScalarType"."""
    short = name.replace("torch.", "")
    try:
        if short in ("bfloat16", "complex32", "chalf") or short.startswith("float8"):
            raise TypeError(short)
        return np.dtype(short)
    except TypeError:
        raise DtypeError(f"{where}: {what} is {short}, which NumPy cannot view; cast it to "
                         f"float32") from None


def _from_numpy(a: np.ndarray, inputs) -> "torch.Tensor":
    """``a`` as a torch tensor sharing its memory; a copy only when it is an input's memory
    (a custom op's outputs must not alias its inputs)."""
    a = np.asarray(a)
    if any(np.shares_memory(a, x) for x in inputs) or not a.flags.writeable:
        a = np.array(a)
    return torch.from_numpy(a)


class TorchOp:
    """A PyPTO function as PyTorch ops, registered per number of tensor arguments."""

    def __init__(self, fn: Callable, name: str | None = None):
        self.fn = fn
        label = name or getattr(fn, "name", None) or getattr(fn, "__name__", "fn")
        self.label = re.sub(r"[^a-zA-Z0-9_]", "_", label).strip("_") or "fn"
        self.jitted = fn if isinstance(fn, JitFunction) else JitFunction(fn, name=self.label)
        self._ops: dict[tuple, "torch.library.CustomOpDef"] = {}
        self._shapes: dict[tuple, list] = {}
        self._traced: dict[tuple, list] = {}    # per output: traced (True) or a constant
        self._backward: dict[tuple, "torch.library.CustomOpDef"] = {}
        self._qualnames: dict[tuple, str] = {}    # (n_in, grads) -> the forward op's name
        self._bound_ops: list[TorchOp] = []      # per set of non-tensor arguments (_bound)
        self._bound_keys: dict[tuple, int] = {}
        self.__doc__ = getattr(fn, "__doc__", None)

    # -- shapes without running: a trace on specs ------------------------------------------------
    def out_specs(self, shapes_dtypes: tuple) -> list[tuple[tuple, np.dtype]]:
        got = self._shapes.get(shapes_dtypes)
        if got is None:
            ctx = T.TraceContext(fullgraph=True, name=self.label)
            token = T.activate(ctx)
            try:
                args = [T.spec_input(s, d, name=f"arg{i}") for i, (s, d) in
                        enumerate(shapes_dtypes)]
                _, leaves = _result_structure(self.fn(*args))
            except GraphBreakError as e:
                raise GraphBreakError(
                    f"pypto.torch.op({self.label}): the function must trace as one program (its "
                    f"output shapes come from a trace without values, and its backward is "
                    f"compiled with it), but it needs a Python value: {getattr(e, 'need', e)}. "
                    f"Keep both paths in the program with pypto.cond(pred, f, g, *xs) or "
                    f"pypto.ops.where") from None
            finally:
                T.deactivate(token)
            # One output per array of the result, a NumPy array (a constant) included: the
            # program's out= has an entry for each (counting traced values only, a function
            # returning a constant array beside them failed with "out= has 1 entry; the
            # function returns 2 arrays"). Only the traced ones take output gradients.
            arrays = [x for x in leaves if isinstance(x, (T.Tensor, np.ndarray))]
            got = [(tuple(x.shape), np.dtype(x.dtype)) for x in arrays]
            if not any(isinstance(x, T.Tensor) for x in arrays):
                raise TraceError(f"pypto.torch.op({self.label}): the function returns no array")
            self._traced[shapes_dtypes] = [isinstance(x, T.Tensor) for x in arrays]
            self._shapes[shapes_dtypes] = got
        return got

    def _stale(self, key: tuple) -> bool:
        """Traces the output specs of ``key`` again; whether they differ from those kept."""
        old = self._shapes.pop(key, None)
        try:
            return self.out_specs(key) != old
        except Exception:
            self._shapes[key] = old
            return False

    def _specs_of(self, tensors) -> tuple:
        return _specs(_key_of(tensors), self.where)

    @property
    def where(self) -> str:
        """How errors name this op."""
        return f"pypto.torch.op({self.label})"

    # -- registration ------------------------------------------------------------------------------
    def _register(self, n_in: int, *, grads: bool = False, qualname: str | None = None):
        """The forward op for ``n_in`` tensors (then, with ``grads``, a list of output
        gradients: the form of a backward op). Its outputs are a list (``Tensor[]``), so the op
        is chosen without knowing how many arrays the function returns: under torch.compile
        that count needed a PyPTO trace on the arguments' sizes, which with dynamic shapes
        are symbolic and cannot be a Dynamo constant (a second shape failed fullgraph).

        The first backward op is registered here too, named after this op: torch.compile's
        cache can hold a compiled backward from an earlier process that calls it by name
        without tracing this op's backward again."""
        fwd = self._ops.get((n_in, grads))
        if fwd is not None:
            return fwd
        uid = next(_ids)
        qualname = qualname or f"{self.label}_{uid}"
        self._qualnames[(n_in, grads)] = qualname
        args = ", ".join([f"Tensor x{i}" for i in range(n_in)] + ["Tensor[] grads"] * grads)
        owner = self

        def flat(xs) -> list:
            return [*xs[:n_in], *xs[n_in]] if grads else list(xs)

        def forward(*xs):
            xs = flat(xs)
            arrays = [to_numpy(x, f"argument #{i}", owner.where) for i, x in enumerate(xs)]
            if owner.jitted._owns_out:
                # Outputs allocated by torch, written in place by the program.
                key = owner._specs_of(xs)
                for retry in (False, True):
                    outs_ = [torch.empty(s, dtype=getattr(torch, np.dtype(d).name))
                             for s, d in owner.out_specs(key)]
                    try:
                        owner.jitted(*arrays, out=tuple(t.numpy() for t in outs_))
                        return outs_
                    except (ShapeError, DtypeError, ParamError):
                        # The shapes kept for these arguments are stale when an array the
                        # function reads by name changed shape (the program traces again,
                        # the kept out= did not fit): trace them again, once.
                        if retry or not owner._stale(key):
                            raise
            res = owner.jitted(*arrays)
            _, leaves = _result_structure(res)
            return [_from_numpy(a, arrays) for a in leaves if hasattr(a, "shape")]

        def forward_fake(*xs):
            xs = flat(xs)
            # Tensors on two devices (a meta tensor with a CPU one: the meta key wins the
            # dispatch, so this runs) would give outputs on the first one's device, left
            # uninitialized: an error, as torch's own ops give.
            for i, x in enumerate(xs):
                if x.device != xs[0].device:
                    raise DtypeError(f"{owner.where}: argument #{i} is on {x.device} but "
                                     f"argument #0 is on {xs[0].device}; pass tensors on one "
                                     f"device (PyPTO ops run on CPU tensors)")
            return [xs[0].new_empty(s, dtype=getattr(torch, np.dtype(d).name))
                    for s, d in owner.out_specs(owner._specs_of(xs))]

        fwd = torch.library.custom_op(f"pypto::{qualname}", forward, mutates_args=(),
                                      schema=f"({args}) -> Tensor[]")
        fwd.register_fake(forward_fake)
        if not grads:
            fwd.register_vmap(_per_sample(fwd, self))

        def setup_context(ctx, inputs, output):
            xs = flat(inputs)
            ctx.save_for_backward(*xs)
            key = owner._specs_of(xs)
            owner.out_specs(key)
            ctx.out_meta = [(o.shape, o.dtype, traced)
                            for o, traced in zip(output, owner._traced[key])]

        def backward(ctx, grads_):
            xs = ctx.saved_tensors
            # The output gradients of the traced outputs (a constant output has none).
            gs = [g.contiguous() if g is not None else xs[0].new_zeros(s, dtype=d)
                  for g, (s, d, traced) in zip(grads_, ctx.out_meta) if traced]
            # No gradient reaches the inputs when no traced output is a float one (only
            # integer outputs and constants): PyPTO's vjp refuses such a function.
            some = any(traced and d.is_floating_point for _, d, traced in ctx.out_meta)
            # Gradients of the float inputs torch asks for: a float input that needs none (a
            # box or a quantization scale given as a tensor) is left out of the vjp program,
            # whose rule may have no gradient for it (the backward failed with
            # NotDifferentiableError though only the image or the input wanted one).
            need = [*ctx.needs_input_grad[:n_in], *ctx.needs_input_grad[n_in]] if grads \
                else list(ctx.needs_input_grad)
            wrt = _wrt(xs, need) if some else (False,) * len(xs)
            flags = wrt if wrt is not None else tuple(x.dtype.is_floating_point for x in xs)
            res = iter(owner.backward(len(xs), wrt=wrt)(*xs, gs) if any(flags) else ())
            got = [next(res) if f else None for f in flags]
            return (*got[:n_in], got[n_in:]) if grads else tuple(got)

        fwd.register_autograd(backward, setup_context=setup_context)
        self._ops[(n_in, grads)] = fwd
        if not grads:
            self.backward(n_in, qualname=f"{qualname}_backward")
        return fwd

    def backward(self, n_in: int, *, qualname: str | None = None, wrt: tuple | None = None):
        """The backward as a PyTorch op of its own, for calls with ``n_in`` tensors: called
        with those tensors and the list of output gradients, it returns the gradients of the
        float tensors among them (with ``wrt``, one flag per tensor, of those flagged only).
        It is the forward op of a ``TorchOp`` of PyPTO's vjp program, so it has a backward
        too: a second derivative (``create_graph=True``, ``gradgradcheck``) runs PyPTO's
        derivative of the vjp program, and so on.

        Without ``wrt``, or with every float tensor flagged, it is the op registered with the
        forward (``<name>_backward``, the program ``pypto tune --grad`` tunes); another
        ``wrt`` is an op of its own, ``<name>_backward_<flags as 0/1>``."""
        key = (n_in, tuple(bool(w) for w in wrt) if wrt is not None else None)
        op = self._backward.get(key)
        if op is None:
            if qualname is None and wrt is not None:
                base = self._qualnames.get((n_in, False))
                if base is not None:
                    qualname = f"{base}_backward_{''.join('01'[w] for w in key[1])}"
            name = f"{self.label}_backward"
            body = JitFunction(_vjp_body(self.fn, n_in, key[1]), fullgraph=True, name=name)
            op = self._backward[key] = TorchOp(body, name=name)._register(
                n_in, grads=True, qualname=qualname)
        return op

    def torch_op(self, *tensors):
        """The registered PyTorch op for calls with these tensors (for ``opcheck``): it returns
        a list of tensors, one per array the function returns."""
        return self._register(_registered(self, len(tensors)))

    def __call__(self, *args, **kwargs):
        if kwargs or any(not isinstance(a, torch.Tensor) for a in args):
            # Numbers, strings and the like (``leaky_relu(x, 0.2)``, ``scale=0.5``) are
            # constants of the program: the function with them bound is an op of its own
            # (one per set of constants), called with the tensors alone.
            op, tensors = self._bound(args, kwargs)
        else:
            op, tensors = self, args
        if not tensors:
            raise TraceError(f"pypto.torch.op({self.label}): called with no tensors; a PyTorch "
                             f"op of a PyPTO function takes at least one tensor")
        return op._call(*tensors)

    def _bound(self, args: tuple, kwargs: dict) -> tuple["TorchOp", list]:
        """The op of ``fn`` with the non-tensor arguments of this call bound, and the tensors
        to call it with (the positional ones, then the keyword ones by name)."""
        names = sorted(kwargs)
        for i, a in enumerate(args):
            _check_const(a, f"argument #{i}", self.where)
        for k in names:
            _check_const(kwargs[k], f"argument {k}=", self.where)
        layout = (tuple(_TENSOR if isinstance(a, torch.Tensor) else a for a in args),
                  tuple((k, _TENSOR if isinstance(kwargs[k], torch.Tensor) else kwargs[k])
                        for k in names))
        tensors = [a for a in args if isinstance(a, torch.Tensor)] + \
            [kwargs[k] for k in names if isinstance(kwargs[k], torch.Tensor)]
        return self._bound_ops[_bound_index(self, layout)], tensors

    def _call(self, *tensors):
        # The backward for the float tensors that require a gradient is registered now, named
        # after the forward (not when torch first runs it): see _registered.
        wrt = _wrt(tensors, [t.requires_grad for t in tensors]) if torch.is_grad_enabled() \
            else None
        outs = self._register(_registered(self, len(tensors), wrt))(*tensors)
        return outs[0] if len(outs) == 1 else tuple(outs)


#: Non-tensor arguments a PyTorch op of a PyPTO function takes: they are bound as constants.
_CONSTANT_TYPES = (type(None), bool, int, float, complex, str, np.generic, np.dtype)


#: Marks a tensor's place among the arguments in :func:`_bound_index`'s layout.
_TENSOR = "\x00pypto.tensor"


def _check_const(value, what: str, where: str) -> None:
    """A TraceError for an argument that is neither a tensor nor a constant (an array, an
    object)."""
    if isinstance(value, (tuple, list)):
        for v in value:
            _check_const(v, what, where)
        return
    if isinstance(value, (torch.Tensor, torch.dtype, *_CONSTANT_TYPES)):
        return
    kind = "a NumPy array" if isinstance(value, np.ndarray) else type(value).__name__
    raise TraceError(f"{where}: {what} is {kind}; pass tensors as torch tensors and other "
                     f"arguments as numbers, strings, None or tuples of them (bind anything "
                     f"else first, e.g. with functools.partial)")


def _const_key(value):
    """A hashable key of a constant: its type with its value (``1`` and ``1.0``, or ``0.0``
    and ``-0.0``, are different constants)."""
    if isinstance(value, (tuple, list)):
        return (type(value).__name__, tuple(_const_key(v) for v in value))
    return (type(value).__name__, repr(value))


@torch.compiler.assume_constant_result
def _bound_index(owner: TorchOp, layout: tuple) -> int:
    """The index in ``owner._bound_ops`` of the op of ``owner.fn`` with the constants of
    ``layout`` bound (``(positional, ((name, value), ...))``, :data:`_TENSOR` where a tensor
    goes), made on first use. torch.compile keeps the result as a constant, as for
    :func:`_registered`."""
    pos, kw = layout
    key = (tuple(_const_key(a) for a in pos), tuple((k, _const_key(v)) for k, v in kw))
    got = owner._bound_keys.get(key)
    if got is not None:
        return got
    fn = owner.fn

    def bound(*tensors):
        it = iter(tensors)
        args = [next(it) if isinstance(a, str) and a == _TENSOR else a for a in pos]
        kwargs = {k: next(it) if isinstance(v, str) and v == _TENSOR else v for k, v in kw}
        return fn(*args, **kwargs)

    got = owner._bound_keys[key] = len(owner._bound_ops)
    owner._bound_ops.append(TorchOp(bound, name=f"{owner.label}_bound{got}"))
    return got


@torch.compiler.assume_constant_result
def _registered(owner: TorchOp, n_in: int, wrt: tuple | None = None) -> int:
    """Registers ``owner``'s op for ``n_in`` tensors, and the backward op for the tensors
    ``wrt`` flags (those that require a gradient: torch.compile's cache can hold a compiled
    backward that calls it by name without tracing it again); returns ``n_in``. torch.compile
    runs it as it is and keeps the result as a constant: Dynamo cannot trace
    ``torch.library``, and the op's lookup after it reads the registered op from
    ``owner._ops``."""
    owner._register(n_in)
    if wrt is not None and any(wrt):
        owner.backward(n_in, wrt=wrt)
    return n_in


def _per_sample(fwd, owner: TorchOp) -> Callable:
    """``torch.func.vmap``'s rule for a forward op: the op once per sample of the batched
    arguments, the results stacked along dim 0 (torch cannot make this fallback for an op that
    returns a list of tensors). A PyPTO function is compiled for its shapes, so a batch of
    samples is a loop of calls, not one larger kernel."""
    def rule(info, in_dims, *xs):
        size = info.batch_size
        if size == 0:
            # No sample to run (stacking none failed with an IndexError): empty outputs of the
            # shapes one sample's outputs have.
            one = [(x.shape[:d] + x.shape[d + 1:] if d is not None else x.shape, x.dtype)
                   for x, d in zip(xs, in_dims)]
            key = tuple((tuple(int(n) for n in s), str(dt)) for s, dt in one)
            outs = [xs[0].new_empty((0, *s), dtype=getattr(torch, np.dtype(d).name))
                    for s, d in owner.out_specs(_specs(key, owner.where))]
            return outs, [0] * len(outs)
        per = [[x.select(d, b) if d is not None else x for x, d in zip(xs, in_dims)]
               for b in range(size)]
        outs = [fwd(*args) for args in per]
        stacked = [torch.stack([o[k] for o in outs]) for k in range(len(outs[0]))]
        return stacked, [0] * len(stacked)

    return rule


def _vjp_body(fn: Callable, n_in: int, wrt: tuple | None = None) -> Callable:
    """``body(*xs, *grads)``: the gradients of ``fn`` at its ``n_in`` arguments ``xs`` with
    respect to the float ones (those flagged in ``wrt``, when given), weighted by the output
    gradients: the program :func:`pypto.autodiff.api.vjp_traceable` gives (what ``pypto tune
    OP --grad`` tunes)."""
    def body(*xg):
        nums = tuple(i for i in range(n_in) if np.dtype(xg[i].dtype).kind == "f"
                     and (wrt is None or wrt[i]))
        return vjp_traceable(fn, n_in, nums)(*xg)

    return body


def _wrt(tensors, need) -> tuple | None:
    """Per tensor: whether its gradient is wanted (``need``, torch's ``requires_grad`` or
    ``needs_input_grad``) and it is a float tensor (the others get none); None when that is
    every float tensor (the backward registered with the forward)."""
    floats = tuple(t.dtype.is_floating_point for t in tensors)
    wrt = tuple(bool(n) and f for f, n in zip(floats, need))
    return None if wrt == floats else wrt


def _key_of(tensors) -> tuple:
    """(shape, torch dtype name) per tensor (int() of a symbolic size, in a fake implementation
    under torch.compile with dynamic shapes, specializes on its value: a PyPTO program is
    traced and compiled for concrete shapes)."""
    return tuple((tuple(int(n) for n in t.shape), str(t.dtype)) for t in tensors)


def _specs(key: tuple, where: str = "pypto.torch") -> tuple:
    """(shape, NumPy dtype) per argument of ``key`` (see :func:`_key_of`)."""
    return tuple((shape, _numpy_dtype(dt, f"argument #{i}", where))
                 for i, (shape, dt) in enumerate(key))


def op(fn: Callable, *, name: str | None = None) -> TorchOp:
    """``fn`` (a PyPTO op, composite op, ``@pypto.jit`` function or function of PyPTO ops) as a
    PyTorch op with forward and backward. Its arguments must all be tensors: bind the others
    first (``functools.partial``).

    Example:
        >>> import torch, pypto, pypto.torch
        >>> gelu = pypto.torch.op(pypto.ops.gelu)
        >>> x = torch.randn(8, requires_grad=True)
        >>> gelu(x).sum().backward()                       # doctest: +SKIP
    """
    return TorchOp(fn, name=name)


class Module(torch.nn.Module):
    """A ``torch.nn.Module`` around a PyPTO function ``fn(*params, *inputs)``: the keyword
    arrays become ``torch.nn.Parameter`` s, in the order given, passed before the inputs."""

    def __init__(self, fn: Callable, **params):
        super().__init__()
        self.op = op(fn)
        self._names = list(params)
        for name, value in params.items():
            t = value if isinstance(value, torch.Tensor) else torch.from_numpy(np.array(value))
            self.register_parameter(name, torch.nn.Parameter(t.detach().clone()))
        sig = None
        try:
            sig = inspect.signature(fn)
        except (TypeError, ValueError):
            pass
        if sig is not None:
            pos = [p for p in sig.parameters.values()
                   if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
            if len(pos) < len(params):
                raise TraceError(f"pypto.torch.Module: {len(params)} parameters given but the "
                                 f"function takes {len(pos)} positional arguments")

    def forward(self, *inputs, **kwargs):
        return self.op(*[getattr(self, n) for n in self._names], *inputs, **kwargs)
