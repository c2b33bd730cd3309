"""Reverse mode over a recorded trace: the backward pass as more traced ops.

:func:`backward` walks the nodes a function recorded, last to first, and calls each node's rule
(:mod:`pypto.autodiff.rules`, or a ``@pypto.def_gradient`` override) on the output gradients.
Rules record PyPTO ops into the same trace, so the forward and the backward become one program:
under ``@pypto.jit`` the forward values the backward reads are fused or recomputed like any other
intermediate, and nothing is kept that the backward does not need.

Only *active* values are followed: those that depend on an argument being differentiated. Integer
and bool values carry no gradient. When a gradient would have to pass through one (a cast of a
comparison, an index from argmax), the op that made it decides: a comparison, logical op or mask
is a constant (nothing flows back, as in PyTorch), while argmax, argsort, nms and integer
quantization raise :class:`~pypto.errors.NotDifferentiableError` naming the op and argument. An
index read by a gather (``take_along_axis(x, argmax(x))``) is a constant of the gather: the
question stops there. Every built-in op has one of these decisions or a rule
(:mod:`pypto.autodiff.coverage`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..errors import NotDifferentiableError
from ..frontend import tensor as T
from ..ops.indexing import trusted_indices
from . import shapes
from .rules import RULES, Call, Constant, NotDifferentiable


def is_float(dtype) -> bool:
    return np.dtype(dtype).kind == "f"


def _key(t: T.Tensor) -> tuple[int, int]:
    return (t.node.id, t.index)


def _name(node: T.Node) -> str:
    if node.kind == "op":
        return node.op.name
    if node.kind == "view":
        return f"view:{node.aux[0]}"
    return node.kind


def _arg_names(node: T.Node) -> list[str]:
    if node.kind == "op":
        return [s.name for s in node.op.inputs]
    return ["x"]


#: The dtypes whose pieces are joined (``concat`` has no float16: those are summed as they are).
_JOINABLE = (np.dtype(np.float32), np.dtype(np.float64))


def _base(t: T.Tensor) -> tuple[int, int]:
    """The value ``t`` reshapes (through a chain of reshapes), as a key."""
    while t.node.kind == "view" and t.node.aux[0] == "reshape":
        t = t.node.inputs[0]
    return (t.node.id, t.index)


def _concat(pieces: list, axis: int, joins: dict) -> T.Tensor:
    """``concat(pieces, axis)``, made once per list of values: a join along the first axis of
    pieces that are reshapes of the values an earlier such join concatenated, in the same order,
    is that join reshaped (the same data). The LSTM layer's step gradients were joined twice, as
    the input projection's gradient ([T, B, 4H]) and for the recurrent weight's product
    ([T * B, 4H]): two 16 MiB joins and two transposed copies of them per backward."""
    from .. import ops

    if axis != 0:
        return ops.concat(pieces, axis=axis)
    key = tuple(_base(p) for p in pieces)
    shape = (sum(p.shape[0] for p in pieces),) + tuple(pieces[0].shape[1:])
    done = joins.get(key)
    if done is not None and int(np.prod(shape)) == int(np.prod(done.shape)):
        return done.reshape(shape)
    out = ops.concat(pieces, axis=0)
    joins.setdefault(key, out)
    return out


def _sum(parts: list, joins: dict | None = None) -> T.Tensor:
    """The total of one value's gradient contributions, joined where that is cheaper:

    * slices along one axis: the contiguous runs are concatenated, then padded once;
    * products ``a_i @ b_i`` (a weight's gradient from each step of a loop) are one product of
      the operands concatenated along the contracted axis: one large GEMM instead of many thin
      ones, each reading and writing the whole weight-sized result.

    ``joins`` remembers the concats made (see :func:`_concat`), across the values of one
    backward.
    """
    from .. import ops

    joins = {} if joins is None else joins

    out: list[T.Tensor] = []
    by_axis: dict[int, list[shapes.Unsliced]] = {}
    for p in parts:
        if isinstance(p, shapes.Unsliced):
            ax = p.axis() if p.dy.dtype in _JOINABLE else None
            if ax is None:
                out.append(p.scattered())
            else:
                by_axis.setdefault(ax, []).append(p)
        else:
            out.append(p)
    for ax, group in by_axis.items():
        group.sort(key=lambda p: p.starts[ax])
        run: list[shapes.Unsliced] = []

        def flush():
            if not run:
                return
            dy = run[0].dy if len(run) == 1 else _concat([p.dy for p in run], ax, joins)
            n, start = run[0].shape[ax], run[0].starts[ax]
            out.append(shapes.pad_axis(dy, ax, start, n - start - dy.shape[ax]))
            run.clear()

        for p in group:
            if run and p.starts[ax] != run[-1].starts[ax] + run[-1].dy.shape[ax]:
                flush()
            run.append(p)
        flush()
    products = [g for g in out if g.node.kind == "op" and g.node.op.name == "matmul"
                and g.dtype in _JOINABLE and all(len(x.shape) == 2 for x in g.node.inputs)]
    if len(products) > 1:
        out = [g for g in out if not any(g is p for p in products)]
        products.reverse()      # contributions arrive last step first: join in forward order
        lefts = [p.node.inputs[0] for p in products]
        if all(_transposed(x) for x in lefts):
            # a_i = x_i^T (a weight's gradient dy^T x): join the x_i by rows (contiguous
            # blocks), the same join as the gradient of a stack of the dy_i, which the
            # pipeline then computes once.
            a = _concat([x.node.inputs[0] for x in lefts], 0, joins).T
        else:
            a = ops.concat(lefts, axis=1)
        b = ops.concat([p.node.inputs[1] for p in products], axis=0)
        out.append(ops.matmul.kernel(a, b))
    total = out[0]
    for g in out[1:]:
        total = total + g
    return total


def _transposed(t: T.Tensor) -> bool:
    """``t`` is the transpose view of a matrix."""
    n = t.node
    return n.kind == "view" and n.aux[0] == "permute" and tuple(n.aux[1]) == (1, 0)


class _Walk:
    def __init__(self, nodes: Sequence[T.Node], wrt: Sequence[T.Tensor]):
        self.nodes = list(nodes)
        self.active: set[tuple[int, int]] = {_key(t) for t in wrt}
        self.grads: dict[tuple[int, int], list] = {}   # contributions, summed when read
        self.joins: dict = {}                        # concats made, by the values joined
        self.touched: set[tuple[int, int]] = set()   # non-float values a gradient depends on
        self.regions = _regions(self.nodes)
        self._mark_active()

    def _mark_active(self) -> None:
        for n in self.nodes:
            if any(_key(t) in self.active for t in n.inputs):
                self.active.update((n.id, k) for k in range(len(n.outs)))

    def add(self, t: T.Tensor, g) -> None:
        k = _key(t)
        if k not in self.active:
            return
        if not is_float(t.dtype):
            self.touched.add(k)
            return
        if g is None:
            return
        if isinstance(g, shapes.Unsliced):
            if g.dy.dtype != t.dtype:
                g.dy = g.dy.astype(t.dtype)
        elif g.dtype != t.dtype:
            g = g.astype(t.dtype)
        self.grads.setdefault(k, []).append(g)

    def grad(self, k: tuple[int, int]) -> T.Tensor | None:
        """The gradient of value ``k``: its contributions summed (once; every reader of ``k``
        is processed before ``k``'s producer, so none arrives later)."""
        parts = self.grads.get(k)
        if not parts:
            return None
        if len(parts) == 1 and not isinstance(parts[0], shapes.Unsliced):
            return parts[0]
        total = _sum(parts, self.joins)
        self.grads[k] = [total]
        return total

    def run(self) -> None:
        done: set[int] = set()
        for node in reversed(self.nodes):
            if node.id in done or node.kind == "input":
                continue
            region = self.regions.get(node.id)
            if region is not None and region.id not in done:
                done.add(region.id)
                done.update(region.node_ids)
                self._region(region)
                continue
            self._node(node)

    def _outputs(self, node: T.Node):
        outs = [T.Tensor(node, k) for k in range(len(node.outs))]
        dys = [self.grad((node.id, k)) for k in range(len(node.outs))]
        touched = any((node.id, k) in self.touched for k in range(len(node.outs)))
        return outs, dys, touched

    def _node(self, node: T.Node) -> None:
        outs, dys, touched = self._outputs(node)
        if all(d is None for d in dys) and not touched:
            return
        live = [i for i, t in enumerate(node.inputs) if _key(t) in self.active]
        if not live:
            return
        name = _name(node)
        from .custom import CUSTOM

        fn = CUSTOM.get(name) if node.kind == "op" else None
        entry = fn or RULES.get(name)
        if entry is None and node.kind == "op" and getattr(node.op, "gradient", None) == "halide":
            from .halide_grad import rule_for
            entry = rule_for(node.op)     # checked once per op; raises if it is not accepted
        if isinstance(entry, Constant):
            return
        if isinstance(entry, NotDifferentiable):
            i = next((i for i in live if is_float(node.inputs[i].dtype)), live[0])
            raise NotDifferentiableError(
                f"{name} is not differentiable ({entry.why}): a gradient is asked through its "
                f"argument '{_arg_names(node)[i]}' (at {node.where}). Compute it outside the "
                f"differentiated function, or give it a gradient with "
                f"@pypto.def_gradient(pypto.ops.{name})")
        if all(d is None for d in dys):
            if node.kind == "view" or (node.kind == "cast" and not is_float(node.inputs[0].dtype)):
                for i in live:
                    self.add(node.inputs[i], None)
                return
            raise NotDifferentiableError(
                f"{name} gives a non-float value (at {node.where}) that a gradient depends on: "
                f"the gradient cannot pass through it to argument "
                f"'{_arg_names(node)[live[0]]}'. Compute it outside the differentiated function")
        if touched and node.kind == "op":
            k = next(k for k in range(len(node.outs)) if (node.id, k) in self.touched)
            raise NotDifferentiableError(
                f"{name} gives a non-float output '{node.op.outputs[k].name}' (at {node.where}) "
                f"that a gradient depends on: the gradient cannot pass through it to argument "
                f"'{_arg_names(node)[live[0]]}'. Compute it outside the differentiated function")
        if entry is None:
            raise NotDifferentiableError(
                f"no gradient for op '{name}' (at {node.where}), needed for its argument "
                f"'{_arg_names(node)[live[0]]}'. Define one with @pypto.def_gradient("
                f"pypto.ops.{name}), or mark the argument non-differentiable: "
                f"@pypto.def_gradient(op, nondiff=('{_arg_names(node)[live[0]]}',))")
        dys = [d if d is not None else shapes.zeros(o.shape, o.dtype) for d, o in zip(dys, outs)]
        params = dict(node.params)
        if node.kind != "op":
            params["aux"] = node.aux
        call = Call(op=node.op, inputs=list(node.inputs), outs=outs, dys=dys, params=params,
                    dims=dict(node.dims), live=tuple(live))
        if fn is not None:
            got = fn.apply_op(call, node, live)
        else:
            # A built-in rule's indices are in range by construction or clamped on purpose
            # (grid_sample's gathers of clipped coordinates): no checks, no extra pipelines.
            with trusted_indices():
                got = entry(call)
        for i in live:
            if isinstance(got[i], NotDifferentiable):
                raise NotDifferentiableError(
                    f"{name} is not differentiable in its argument '{_arg_names(node)[i]}' "
                    f"({got[i].why}), and a gradient is asked through it (at {node.where}). "
                    f"Compute that argument outside the differentiated function, or give "
                    f"{name} a gradient with @pypto.def_gradient(pypto.ops.{name})")
            if not isinstance(got[i], Constant):
                self.add(node.inputs[i], got[i])

    def _region(self, region) -> None:
        # An output returned twice has one gradient, its readers' total: the rule gets it once
        # (zeros for the repeat; a gradient is linear in the output gradients).
        keys = [_key(t) for t in region.outputs]
        dys = [self.grad(k) if k not in keys[:i] else None for i, k in enumerate(keys)]
        if all(d is None for d in dys):
            return
        from .custom import tensor_leaves

        def active(t):
            return _key(t) in self.active

        # an argument is live when it is an active Tensor or a list, tuple or dict holding one
        # (the container's Tensors get the gradients the rule returns for its items)
        live = [i for i, a in enumerate(region.values) if any(map(active, tensor_leaves(a)))]
        if not live:
            return
        dys = [d if d is not None else shapes.zeros(o.shape, o.dtype)
               for d, o in zip(dys, region.outputs)]
        got = region.rule.apply_composite(region, dys, live, active)
        for i in live:
            a = region.values[i]
            if isinstance(a, T.Tensor):
                self.add(a, got[i])
            else:
                for t, g in zip(tensor_leaves(a), got[i]):
                    if g is not None:
                        self.add(t, g)


def _regions(nodes) -> dict[int, object]:
    """Node id -> the outermost composite call (with a user gradient) that recorded it."""
    if not nodes:
        return {}
    ctx = T.current()
    found = getattr(ctx, "_pypto_autodiff_regions", []) if ctx is not None else []
    ids = {n.id for n in nodes}
    out: dict[int, object] = {}
    for r in sorted(found, key=lambda r: -len(r.node_ids)):
        if not r.node_ids or not r.node_ids <= ids:
            continue
        for i in r.node_ids:
            out.setdefault(i, r)
    return out


def through(fn, inputs: Sequence, dys: Sequence) -> list:
    """The gradients of ``fn(*inputs)`` weighted by ``dys``, for each float Tensor of ``inputs``
    (None elsewhere), by the rules of the ops ``fn`` records.

    For rules whose op has a plain composition in other differentiable ops (an IoU, a Sobel
    magnitude's linear part): ``fn`` records that composition into the current trace and its
    backward follows; what the backward does not read is left out of the program.
    """
    ctx = T.current()
    start = len(ctx.nodes)
    got = fn(*inputs)
    outs = list(got) if isinstance(got, (tuple, list)) else [got]
    nodes = ctx.nodes[start:]
    wrt, first = [], set()
    for i, t in enumerate(inputs):     # a Tensor given twice gets its whole gradient once
        if isinstance(t, T.Tensor) and is_float(t.dtype) and _key(t) not in {_key(w) for w in wrt}:
            wrt.append(t)
            first.add(i)
    grads = dict(zip(map(_key, wrt), backward(nodes, wrt, outs, list(dys))))
    return [grads[_key(t)] if i in first else None for i, t in enumerate(inputs)]


def backward(nodes: Sequence[T.Node], wrt: Sequence[T.Tensor], outputs: Sequence[T.Tensor],
             cts: Sequence[T.Tensor]) -> list:
    """Gradients of ``outputs`` (weighted by ``cts``) with respect to ``wrt``, as Tensors of the
    current trace (None where an argument does not reach any output)."""
    walk = _Walk(nodes, wrt)
    for t, ct in zip(outputs, cts):
        walk.add(t, ct)
    walk.run()
    return [walk.grad(_key(t)) for t in wrt]
