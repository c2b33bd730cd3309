"""``@pypto.def_gradient(op)``: a user's gradient for any op (built-in, ``@pypto.op``, composite).

The gradient function takes the op's arguments, then one output gradient per output, and returns
one gradient per argument (None for non-tensor arguments)::

    @pypto.register_op
    def my_quantize(x, bits): ...

    @pypto.def_gradient(my_quantize)
    def my_quantize_grad(x, bits, dy):
        return dy * (x > 0).astype(x.dtype), None

For a kernel op (built-in or ``@pypto.op``) the arguments are the recorded call's: its array
inputs in canonical form (the op's named-dim shapes, e.g. [N] for elementwise ops), then its
params in declaration order. For a composite op they are the values the call received, and the
call is kept as one node of the gradient trace so this function is used instead of the gradients
of the ops inside it; an argument that is a list, tuple or dict of arrays gets a list, tuple or
dict of gradients (one per item, None for the non-tensor ones; a composite whose one argument
is a list may return that list's gradients as they are).

Mistakes are caught early: a wrong number of arguments when the function is defined (or, for a
composite's outputs, at first use); a gradient whose shape or dtype differs from its argument's,
and a missing gradient for an argument that needs one, at first use. An argument that should get
no gradient is named in ``nondiff=``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence

import numpy as np

from ..errors import NotDifferentiableError, OpDefinitionError, PyptoError
from ..frontend import composite as _composite
from ..frontend.jit import invalidate_traces
from ..frontend import tensor as T

#: op name -> the user's rule (looked up before the built-in table).
CUSTOM: dict[str, "UserRule"] = {}

def _changed() -> None:
    """:data:`CUSTOM` changed: every jit trace (gradient programs, jitted steps calling grad,
    the torch bridge's backwards) is stale, so a rule defined, overridden or cleared after a
    function was differentiated applies to its next call."""
    invalidate_traces()


def _positional(fn) -> tuple[int | None, list[str]]:
    """(number of positional parameters, or None for *args; their names)."""
    sig = inspect.signature(fn)
    names, var = [], False
    for p in sig.parameters.values():
        if p.kind == p.VAR_POSITIONAL:
            var = True
        elif p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            names.append(p.name)
    return (None if var else len(names)), names


class UserRule:
    """A gradient function with what is needed to check and call it."""

    def __init__(self, op, fn: Callable, nondiff: Sequence[str]):
        self.op = op
        self.fn = fn
        self.name = op.name
        # one name as a string (a set of its letters named 'a' of (a, scale) non-differentiable)
        self.nondiff = {nondiff} if isinstance(nondiff, str) else set(nondiff)
        self.composite = isinstance(op, _composite.CompositeOp)
        if self.composite:
            # every argument the call binds, keyword-only ones included (in signature order):
            # the gradient function is given them all
            self.arg_names = [p.name for p in inspect.signature(op.fn).parameters.values()
                              if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
        else:
            self.arg_names = [s.name for s in op.inputs] + [p.name for p in op.params]
        unknown = self.nondiff - set(self.arg_names)
        if unknown:
            raise OpDefinitionError(f"def_gradient({self.name}): nondiff names {sorted(unknown)} "
                                    f"are not arguments of {self.name} ({', '.join(self.arg_names)})")
        self.count, _ = _positional(fn)
        self._check_arity(None if self.composite else len(op.outputs))

    def _expected(self, n_out: int) -> str:
        dys = "dy" if n_out == 1 else ", ".join(f"dy{i}" for i in range(n_out))
        return f"fn({', '.join(self.arg_names + [dys])})"

    def _check_arity(self, n_out: int | None) -> None:
        if self.count is None:
            return
        n_args = len(self.arg_names)
        if n_out is None:        # a composite: its outputs are known at the first call
            if self.count <= n_args:
                raise OpDefinitionError(
                    f"def_gradient({self.name}): {self.fn.__name__} takes {self.count} "
                    f"argument(s), but it must take {self.name}'s {n_args} argument(s) "
                    f"({', '.join(self.arg_names)}) and then the output gradient(s): "
                    f"{self._expected(1)}")
            return
        if self.count != n_args + n_out:
            raise OpDefinitionError(
                f"def_gradient({self.name}): {self.fn.__name__} takes {self.count} argument(s), "
                f"but {self.name} has {n_args} argument(s) ({', '.join(self.arg_names)}) and "
                f"{n_out} output(s): write it as {self._expected(n_out)}")

    def _call(self, values: list, dys: list) -> list:
        try:
            got = self.fn(*values, *dys)
        except PyptoError as e:
            raise type(e)(f"{e} (in the gradient of {self.name}, {self.fn.__name__})") from None
        if not isinstance(got, (tuple, list)):
            got = (got,)
        return list(got)

    def _checked(self, got: list, values: list, n_tensors: int, live: Sequence[int],
                 active: Callable = lambda t: True) -> list:
        if len(got) not in (n_tensors, len(values)):
            raise OpDefinitionError(
                f"def_gradient({self.name}): {self.fn.__name__} returned {len(got)} value(s); it "
                f"must return one gradient per argument of {self.name} "
                f"({', '.join(self.arg_names)}), None for the non-tensor ones")
        got = got + [None] * (len(values) - len(got))
        for i in live:
            g, x = got[i], values[i]
            arg = self.arg_names[i] if i < len(self.arg_names) else f"#{i}"
            if g is None and arg in self.nondiff:
                got[i] = None if isinstance(x, T.Tensor) else [None] * len(tensor_leaves(x))
                continue
            got[i] = (self._one(g, x, arg) if isinstance(x, T.Tensor) else
                      self._items(g, x, arg, active))
        return got

    def _missing(self, arg: str, top: str) -> NotDifferentiableError:
        return NotDifferentiableError(
            f"def_gradient({self.name}): {self.fn.__name__} returned None for argument "
            f"'{arg}', whose gradient is needed. Return its gradient, or mark the "
            f"argument non-differentiable: @pypto.def_gradient({self.name}, "
            f"nondiff=('{top}',))")

    def _items(self, g, x, arg: str, active: Callable, top: str | None = None) -> list:
        """The gradients of a list, tuple or dict argument's Tensors (flattened, as
        :func:`tensor_leaves` orders them): ``g`` holds one per item (a dict: per key), None
        for the others."""
        top = top or arg
        if g is None:
            raise self._missing(arg, top)
        if isinstance(x, dict):
            if not isinstance(g, dict) or set(g) - set(x):
                raise OpDefinitionError(
                    f"def_gradient({self.name}): the gradient of '{arg}' (a dict) must be a "
                    f"dict with its keys ({', '.join(map(repr, x))}), a gradient or None each; "
                    f"{self.fn.__name__} returned {type(g).__name__} {g!r:.60}")
            pairs = [(f"{arg}[{k!r}]", g.get(k), x[k]) for k in x]
        elif not isinstance(g, (tuple, list)) or len(g) != len(x):
            raise OpDefinitionError(
                f"def_gradient({self.name}): the gradient of '{arg}' (a {type(x).__name__} of "
                f"{len(x)}) must be a list or tuple of {len(x)} gradients, one per item (None "
                f"for the non-tensor ones); {self.fn.__name__} returned "
                f"{type(g).__name__} {g!r:.60}")
        else:
            pairs = [(f"{arg}[{k}]", gk, xk) for k, (gk, xk) in enumerate(zip(g, x))]
        out: list = []
        for name, gk, xk in pairs:
            if isinstance(xk, T.Tensor):
                if not active(xk):
                    out.append(None)
                elif gk is None:
                    raise self._missing(name, top)
                else:
                    out.append(self._one(gk, xk, name))
            elif tensor_leaves(xk):
                out.extend(self._items(gk, xk, name, active, top))
        return out

    def _one(self, g, x, arg: str):
        """``g`` checked as the gradient of the Tensor ``x`` (a number or array made one)."""
        if g is None:
            raise self._missing(arg, arg)
        if not isinstance(g, T.Tensor):
            try:
                g = T.as_tensor(np.asarray(g, dtype=x.dtype))
            except (TypeError, ValueError):
                raise OpDefinitionError(
                    f"def_gradient({self.name}): {self.fn.__name__} returned "
                    f"{type(g).__name__} {g!r:.60} as the gradient of '{arg}'; return a "
                    f"Tensor or array of its shape, a number, or None") from None
        if tuple(g.shape) != tuple(x.shape):
            if g.size == 1 and g.ndim <= x.ndim:    # a scalar gradient, spread over x
                g = g.reshape(()).broadcast_to(x.shape)
            else:
                raise OpDefinitionError(
                    f"def_gradient({self.name}): the gradient of '{arg}' has shape "
                    f"{tuple(g.shape)}, but '{arg}' has shape {tuple(x.shape)}"
                    f"{' (the canonical form the op is called in)' if not self.composite else ''}")
        if g.dtype != x.dtype:
            raise OpDefinitionError(
                f"def_gradient({self.name}): the gradient of '{arg}' has dtype "
                f"{g.dtype.name}, but '{arg}' is {np.dtype(x.dtype).name}; cast it "
                f"(g.astype(x.dtype))")
        return g

    def apply_op(self, call, node, live) -> list:
        values = list(call.inputs) + [call.params.get(p.name) for p in self.op.params]
        got = self._call(values, call.dys)
        return self._checked(got, values, len(call.inputs), live)[:len(call.inputs)]

    def apply_composite(self, region, dys, live, active: Callable = lambda t: True) -> list:
        """One gradient per argument in ``live``: a Tensor's, or for a list, tuple or dict holding
        Tensors, the flat list of theirs (None for those ``active`` rejects)."""
        self._check_arity(len(region.outputs))
        got = self._call(region.values, dys)
        values = region.values
        if (len(values) == 1 and isinstance(values[0], (tuple, list)) and got
                and len(got) == len(values[0])
                and not all(g is None or isinstance(g, (tuple, list)) for g in got)):
            got = [got]        # one list argument: its items' gradients, as a list of their own
        n_tensors = sum(bool(tensor_leaves(v)) for v in region.values)
        return self._checked(got, region.values, n_tensors, live, active)


def tensor_leaves(v) -> list:
    """The Tensors of a composite's argument: itself, or those of a (nested) list, tuple or
    dict (its values, in its order)."""
    if isinstance(v, T.Tensor):
        return [v]
    if isinstance(v, dict):
        v = list(v.values())
    if isinstance(v, (list, tuple)):
        return [t for item in v for t in tensor_leaves(item)]
    return []


class Region:
    """A composite op's call inside a trace: the nodes it recorded and its bound arguments."""

    def __init__(self, rule: UserRule, values: list, node_ids: set[int], outputs: list):
        self.rule = rule
        self.values = values
        self.node_ids = node_ids
        self.outputs = outputs
        self.id = -min(node_ids) - 1 if node_ids else -1


def _record_composite(cop, impl, args, kwargs):
    """The composite hook: a call of a composite with a user gradient is remembered as one
    region of the trace (its nodes still compute its value)."""
    rule = CUSTOM.get(cop.name)
    ctx = T.current()
    if rule is None or rule.op is not cop or ctx is None:
        return impl(*args, **kwargs)
    start = len(ctx.nodes)
    out = impl(*args, **kwargs)
    try:
        bound = inspect.signature(cop.fn).bind(*args, **kwargs)
        bound.apply_defaults()
        values = list(bound.args) + list(bound.kwargs.values())
    except TypeError:
        values = list(args) + list(kwargs.values())
    values = [v if not isinstance(v, np.ndarray) else T.as_tensor(v) for v in values]
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    if not all(isinstance(o, T.Tensor) for o in outs):
        return out
    ids = {n.id for n in ctx.nodes[start:]}
    # An output the call did not make (an argument returned as it is, a value made before the
    # call) would share its gradient with the value's other readers: the rule would read their
    # gradients as its output's and add them again. Each such output becomes a view of its own,
    # made inside the call. (An output returned twice is the walk's: core._Walk._region.)
    made: dict = {}
    for k, t in enumerate(outs):
        key = (t.node.id, t.index)
        if t.node.id not in ids and t.node.kind != "poison":
            if key not in made:
                made[key] = T.view(t, ("reshape", tuple(t.shape)), tuple(t.shape))
            outs[k] = made[key]
    if made:
        ids = {n.id for n in ctx.nodes[start:]}
        if not isinstance(out, (tuple, list)):
            out = outs[0]
        elif hasattr(out, "_fields"):                  # a named tuple
            out = type(out)(*outs)
        else:
            out = type(out)(outs)
    regions = getattr(ctx, "_pypto_autodiff_regions", None)
    if regions is None:
        regions = ctx._pypto_autodiff_regions = []
    regions.append(Region(rule, values, ids, outs))
    return out


_composite._call_hook = _record_composite


def def_gradient(op, *, nondiff: str | Sequence[str] = ()) -> Callable:
    """Defines (or overrides) the gradient of ``op``: a built-in op, a ``@pypto.op`` or a
    composite op, given as the op or its name.

    Args:
        op: the op whose gradient this is.
        nondiff: the name, or names, of arguments that get no gradient (the function may
            return None there).

    Example:
        >>> import pypto
        >>> @pypto.register_op
        ... def clipped(x, bound):
        ...     return pypto.ops.clip(x, -bound, bound)
        >>> @pypto.def_gradient(clipped)
        ... def clipped_grad(x, bound, dy):
        ...     return dy, None          # straight-through
    """
    from ..ops import get_op

    target = get_op(op) if isinstance(op, str) else op
    if not hasattr(target, "name") or not (isinstance(target, _composite.CompositeOp)
                                           or hasattr(target, "outputs")):
        raise OpDefinitionError(f"def_gradient: {op!r} is not a PyPTO op; pass an op "
                                f"(pypto.ops.NAME, a @pypto.op or a @pypto.register_op function)")

    def wrap(fn):
        if not callable(fn):
            raise OpDefinitionError(f"def_gradient({target.name}): {fn!r} is not a function")
        CUSTOM[target.name] = UserRule(target, fn, nondiff)
        _changed()
        return fn

    return wrap


def clear_gradient(op) -> None:
    """Removes a user gradient (the built-in rule, if any, applies again)."""
    if CUSTOM.pop(op if isinstance(op, str) else op.name, None) is not None:
        _changed()
