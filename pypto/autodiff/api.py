"""``pypto.grad``, ``pypto.value_and_grad`` and ``pypto.vjp``.

Each builds one program that runs the function on Tensors, then its backward
(:func:`~pypto.autodiff.core.backward`), and compiles it with ``@pypto.jit`` machinery
(``fullgraph=True``): the forward and backward lower to fused pipelines, compiled once per
signature and replayed after. Forward values the backward needs are computed in the same
pipelines, so they are kept or recomputed as the fusion decides; nothing is stored between calls.

They accept plain functions of PyPTO ops, ``@pypto.jit`` functions and composite ops, and
compose with tracing: called inside a traced function they record into it (so ``grad`` of a
function that calls ``grad`` works where every rule involved has a rule of its own).
"""

from __future__ import annotations

import functools
import operator
import sys
import weakref
from collections.abc import Callable, Sequence

import numpy as np

from ..errors import GraphBreakError, NotDifferentiableError, ShapeError, TraceError
from ..frontend import tensor as T
from ..frontend.jit import JitFunction, _result_structure
from . import shapes
from .core import backward, is_float

_programs: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _label(fn) -> str:
    return getattr(fn, "name", None) or getattr(fn, "__name__", "fn")


def _index(a) -> int | None:
    """``a`` as an argument number: a Python or NumPy integer (not a bool), else None."""
    if isinstance(a, (bool, np.bool_)):
        return None
    try:
        return operator.index(a)
    except TypeError:
        return None


def _argnums(argnums, n: int, label: str) -> tuple[int, ...]:
    if _index(argnums) is not None:
        items = (argnums,)
    else:
        try:
            items = tuple(argnums)
        except TypeError:
            raise TraceError(f"{label}: argnums {argnums!r} must be an int or a sequence of "
                             f"ints naming positional arguments") from None
    out = []
    for a in items:
        i = _index(a)
        if i is None or not -n <= i < n:
            raise TraceError(f"{label}: argnums {argnums!r} must name positional arguments "
                             f"among the {n} given")
        out.append(i % n)
    return tuple(out)


def _program(fn, mode: str, argnums, says: str | None = None) -> JitFunction:
    """The jitted forward+backward program of ``fn`` (cached per function); its errors name
    the call as ``says`` (the public function the user called: ``grad`` runs
    ``value_and_grad``'s program)."""
    # A def_gradient (or clear_gradient) after a first call makes every jit trace stale
    # (frontend.jit.invalidate_traces): the cached program traces again with the new rule.
    key = (mode, argnums, says)
    try:
        per_fn = _programs.setdefault(fn, {})
    except TypeError:          # not weak-referenceable: build afresh (kernels are still cached)
        per_fn = {}
    prog = per_fn.get(key)
    if prog is None:
        label = _label(fn)

        def program(args, cts, kwargs=None):
            return _traced(fn, label, mode, argnums, args, cts, kwargs, says)

        program.__name__ = f"{mode}_{label}"
        # No recompile limit: past it a jitted function runs its new signatures op by op, but
        # a backward exists only as a trace (the ninth shape of a grad was refused with
        # "argument #0 is ndarray, not an array").
        # A zero-size argument is refused by name: run op by op, as jit runs one, the function
        # would meet arrays where it differentiates traced values.
        prog = per_fn[key] = JitFunction(program, fullgraph=True, name=f"{mode}_{label}",
                                         recompile_limit=sys.maxsize, empty_op_by_op=False)
    return prog


def _traced(fn, label, mode, argnums, args, cts, kwargs=None, says=None):
    """Runs inside a trace: the function, then its backward; returns (outputs, gradients).
    ``kwargs`` are passed to the function as they are (never differentiated)."""
    ctx = T.current()
    called = says or mode
    wrt = []
    for i in argnums:
        a = args[i]
        if not isinstance(a, T.Tensor):
            raise NotDifferentiableError(
                f"{called}({label}): argument #{i} is {type(a).__name__}, not an array; "
                f"differentiate with respect to array arguments (argnums)")
        if not is_float(a.dtype):
            raise NotDifferentiableError(
                f"{called}({label}): argument #{i} has dtype {a.dtype.name}; gradients are taken "
                f"with respect to float arrays")
        wrt.append(a)
    start = len(ctx.nodes)
    # Called inside a jitted function (which may break), the function is still one program: a
    # break would hand Python a value whose gradient the backward never sees (``v *
    # float(v)`` got half its gradient there, while the same grad called alone is refused).
    fullgraph, ctx.fullgraph = ctx.fullgraph, True
    try:
        result = fn(*args, **(kwargs or {}))
    except GraphBreakError as e:
        raise GraphBreakError(f"{called}({label}): the function must trace as one program (its "
                              f"backward is compiled with it), but it needs a Python value: "
                              f"{getattr(e, 'need', e)}. Keep both paths in the program with "
                              f"pypto.cond(pred, f, g, *xs) or pypto.ops.where") from None
    finally:
        ctx.fullgraph = fullgraph
    nodes = ctx.nodes[start:]
    struct, leaves = _result_structure(result)
    outs = [x for x in leaves if isinstance(x, T.Tensor)]
    if not outs:
        raise TraceError(f"{called}({label}): the function returns no traced value")
    if mode == "vjp":
        # A constant array among the results (a NumPy array the function returns as it is) is
        # an output of the call, so ``vjp_fn`` takes a gradient for it: dropped here, as none
        # flows back (it was refused: "give one output gradient per output (1), got 2").
        # The PyTorch bridge gives the traced outputs' gradients only.
        arrays = [x for x in leaves if isinstance(x, T.Tensor) or hasattr(x, "shape")]
        if len(arrays) != len(outs) and len(cts) == len(arrays):
            cts = [c for c, x in zip(cts, arrays) if isinstance(x, T.Tensor)]
        # An integer output (topk's or sort's indices, a count) carries no gradient: its
        # cotangent is dropped, as torch and JAX drop them; the float ones are differentiated.
        if len(cts) != len(outs):
            raise ShapeError(f"{called}({label}): give one output gradient per output "
                             f"({len(outs)}), got {len(cts)}")
        kept = [k for k, o in enumerate(outs) if is_float(o.dtype)]
        if not kept:
            o = outs[0]
            raise NotDifferentiableError(
                f"{called}({label}): no output is a float array (output #0 has dtype "
                f"{o.dtype.name}, from {o.node.describe()} at {o.where}); only float outputs "
                f"can be differentiated")
        outs, cts = [outs[k] for k in kept], [cts[k] for k in kept]
    for k, o in enumerate(outs):
        if not is_float(o.dtype):
            raise NotDifferentiableError(
                f"{called}({label}): output #{k} has dtype {o.dtype.name} (from "
                f"{o.node.describe()} at {o.where}); only float outputs can be differentiated")
    if mode in ("grad", "value_and_grad"):
        if len(outs) != 1 or outs[0].size != 1:
            shape = outs[0].shape if len(outs) == 1 else f"{len(outs)} outputs"
            raise ShapeError(f"{called}({label}): the function must return one scalar (size-1) "
                             f"value, got {shape}; use pypto.vjp for other outputs")
        cts = [shapes.ones(outs[0].shape, outs[0].dtype)]
    else:
        cts = [c if isinstance(c, T.Tensor) else T.as_tensor(c) for c in cts]
    grads = backward(nodes, wrt, outs, cts)
    grads = [g if g is None or g.shape == w.shape else g.reshape(w.shape)
             for g, w in zip(grads, wrt)]
    # A vjp's caller has the outputs already: leave them out, so the program computes only
    # the forward values the backward reads.
    return (None if mode == "vjp" else result), grads


def _finish(grads, args, argnums, nested: bool, given=()):
    """Zeros where no gradient reached an argument; copies where one is an argument itself or
    one of the arrays in ``given`` (a vjp's output gradients: the vjp of ``lambda a: a``)."""
    out = []
    for g, i in zip(grads, argnums):
        a = args[i]
        if g is None:
            g = shapes.zeros(a.shape, a.dtype) if nested else np.zeros(np.shape(a),
                                                                         dtype=a.dtype)
        elif not nested and any(g is x for x in (*args, *given)):
            g = np.array(g)
        out.append(g)
    return out


def _check_args(args, label):
    for i, a in enumerate(args):
        if type(a).__module__.partition(".")[0] == "torch":
            raise TraceError(f"{label}: argument #{i} is a torch tensor; pass "
                             f"t.detach().numpy(), or use pypto.torch.op for autograd")


def value_and_grad(fn: Callable, argnums: int | Sequence[int] = 0, *,
                   _says: str = "value_and_grad") -> Callable:
    """``fn``'s value and its gradient with respect to the arguments ``argnums``.

    ``fn`` must return one scalar (size-1) float value. The gradient is one array (``argnums``
    an int) or a tuple of arrays. Keyword arguments are passed on to ``fn`` and not
    differentiated (``argnums`` counts positional ones).

    Example:
        >>> import numpy as np, pypto
        >>> f = pypto.value_and_grad(lambda x: (x * x).sum())
        >>> v, g = f(np.array([1.0, 2.0], np.float32))   # doctest: +SKIP
        >>> g.tolist()                                    # doctest: +SKIP
        [2.0, 4.0]
    """
    single = _index(argnums) is not None
    label = _label(fn)

    @functools.wraps(fn)
    def run(*args, **kwargs):
        _check_args(args, f"{_says}({label})")
        _check_args(tuple(kwargs.values()), f"{_says}({label})")
        nums = _argnums(argnums, len(args), f"{_says}({label})")
        nested = T.current() is not None
        prog = _program(fn, "value_and_grad", nums, _says)
        value, grads = (prog(tuple(args), None, kwargs) if kwargs else
                        prog(tuple(args), None))
        grads = _finish(grads, args, nums, nested)
        return value, (grads[0] if single else tuple(grads))

    _traceable(run, fn, label, argnums)
    return run


def _traceable(run, fn, label, argnums) -> None:
    """Lets ``pypto.tune(run, *arrays)`` trace the very program ``run`` compiles (value and
    gradients), so the tuned winner is found by its later calls."""
    def body(*targs):
        nums = _argnums(argnums, len(targs), f"value_and_grad({label})")
        return _traced(fn, label, "value_and_grad", nums, tuple(targs), None)

    run.__pypto_traceable__ = body


def grad(fn: Callable, argnums: int | Sequence[int] = 0) -> Callable:
    """The gradient of ``fn`` (one scalar float output) with respect to ``argnums``.

    Example:
        >>> import numpy as np, pypto
        >>> df = pypto.grad(lambda x: pypto.ops.tanh(x).sum())
        >>> df(np.zeros(3, np.float32)).tolist()          # doctest: +SKIP
        [1.0, 1.0, 1.0]
    """
    vg = value_and_grad(fn, argnums, _says="grad")

    @functools.wraps(fn)
    def run(*args, **kwargs):
        return vg(*args, **kwargs)[1]

    run.__pypto_traceable__ = vg.__pypto_traceable__
    return run


def vjp(fn: Callable, *args):
    """``(outputs, vjp_fn)``: ``fn(*args)`` and a function mapping output gradients (one per
    output, same shapes and dtypes) to one gradient per argument (None for non-array ones).
    An integer output (topk's indices) carries no gradient: give None (or zeros) for it.

    ``vjp_fn`` runs the forward again inside the backward program, fused with it, so nothing
    from this call is held in memory.
    """
    label = _label(fn)
    _check_args(args, f"vjp({label})")
    nested = T.current() is not None
    nums = tuple(i for i, a in enumerate(args) if _is_float_array(a))
    outputs = fn(*args) if nested else JitFunction(fn, name=label)(*args) \
        if not isinstance(fn, JitFunction) else fn(*args)
    struct, leaves = _result_structure(outputs)
    out_leaves = [x for x in leaves if hasattr(x, "shape")]

    def vjp_fn(*cts):
        if len(cts) == 1 and isinstance(cts[0], (tuple, list)) and len(out_leaves) > 1:
            cts = tuple(cts[0])
        if len(cts) != len(out_leaves):
            raise ShapeError(f"vjp({label}): give one output gradient per output "
                             f"({len(out_leaves)}), got {len(cts)}")
        checked = []
        for k, (c, o) in enumerate(zip(cts, out_leaves)):
            if c is None and np.dtype(o.dtype).kind != "f":
                c = np.zeros(o.shape, o.dtype)       # an integer output: no gradient flows
            elif c is None:
                raise ShapeError(f"vjp({label}): output gradient #{k} is None; output #{k} is "
                                 f"a float output of shape {tuple(o.shape)} "
                                 f"{np.dtype(o.dtype).name}: give its gradient (np.zeros of "
                                 f"that shape and dtype for none)")
            c = c if isinstance(c, T.Tensor) else np.asarray(c)
            if tuple(c.shape) != tuple(o.shape) or np.dtype(c.dtype) != np.dtype(o.dtype):
                raise ShapeError(f"vjp({label}): output gradient #{k} has shape {tuple(c.shape)} "
                                 f"and dtype {np.dtype(c.dtype).name}; output #{k} has "
                                 f"{tuple(o.shape)} {np.dtype(o.dtype).name}")
            checked.append(c)
        _, grads = _program(fn, "vjp", nums)(tuple(args), list(checked))
        grads = iter(_finish(grads, args, nums, nested, checked))
        return tuple(next(grads) if i in nums else None for i in range(len(args)))

    return outputs, vjp_fn


def _is_float_array(a) -> bool:
    dt = getattr(a, "dtype", None)
    return dt is not None and hasattr(a, "shape") and np.dtype(dt).kind == "f"



def vjp_arrays(fn: Callable, args: Sequence, cts: Sequence, argnums: Sequence[int]) -> list:
    """The gradients of ``fn`` at ``args`` weighted by the output gradients ``cts`` (arrays),
    for the arguments ``argnums``, zeros where none reaches one (for the PyTorch bridge)."""
    nums = tuple(argnums)
    _, grads = _program(fn, "vjp", nums)(tuple(args), list(cts))
    return _finish(grads, args, nums, False)


def vjp_traceable(fn: Callable, n_args: int, argnums: Sequence[int]) -> Callable:
    """The body of the program the PyTorch bridge's backward runs for ``fn``: called with
    ``n_args`` arguments then one gradient per output, it returns the gradients of the
    arguments ``argnums`` (zeros where none reaches one). Traced by ``pypto.tune``/``pypto
    tune --grad``, it gives the very graph the backward compiles, so a tuned winner is found by
    later backward calls; the bridge's second derivative differentiates it in turn."""
    label = _label(fn)
    nums = tuple(argnums)

    def body(*targs):
        args = tuple(targs[:n_args])
        _, grads = _traced(fn, label, "vjp", nums, args, list(targs[n_args:]))
        return tuple(shapes.zeros(args[i].shape, args[i].dtype) if g is None else g
                     for g, i in zip(grads, nums))

    body.__name__ = f"vjp_{label}"
    return body


def backward_program(op, dims, dtypes: Sequence[str], params=None):
    """The backward program of ``op``'s public call at the canonical shape ``dims``: a graph op
    whose inputs are the op's arrays and its output gradients and whose outputs are the
    gradients of its float inputs (what ``pypto.torch.op(op)`` runs in ``backward``).

    ``params`` are the public call's keywords (``padding=1`` for conv2d) or the op's canonical
    parameters (``pad_h=1, pad_w=1``); with canonical ones that the public call does not take,
    the program differentiates the canonical-form call ``op.kernel``.
    """
    from ..errors import ParamError
    from ..frontend.programs import trace_graph_op
    from ..infra.inputs import make_inputs

    params = dict(params or {})
    call = op
    try:
        canonical = op.resolve_params(params)
    except ParamError:            # public keywords: the inputs' shapes come from ``dims`` alone
        canonical = op.resolve_params({})
    arrays = make_inputs(op, tuple(dtypes), dims, canonical)
    try:
        outs = op(*arrays, **params)
    except TypeError as e:
        if op.frontend is None or not params:
            raise
        if params.keys() - canonical.keys():
            raise ParamError(
                f"{op.name}: parameters {sorted(params)} mix the public call's keywords and the "
                f"op's canonical parameters ({e}); give either public keywords or only canonical "
                f"ones ({', '.join(sorted(canonical))})") from None
        call = op.kernel
        outs = op.kernel(*arrays, **params)
    outs = list(outs) if isinstance(outs, (tuple, list)) else [outs]
    rng = np.random.default_rng(5)
    cts = [rng.uniform(-1, 1, np.shape(o)).astype(np.asarray(o).dtype) for o in outs]
    nums = [i for i, a in enumerate(arrays) if a.dtype.kind == "f"]
    if not nums:
        raise NotDifferentiableError(f"{op.name} has no float input to differentiate")
    fn = functools.partial(call, **params) if params else call
    body = vjp_traceable(fn, len(arrays), nums)
    return trace_graph_op(body, [*arrays, *cts])
