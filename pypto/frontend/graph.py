"""A traced segment as one Halide pipeline: extraction, lowering, the fused default schedule.

A segment (the nodes needed for some Tensors) becomes an ordinary :class:`~pypto.ops.Op` — a
*graph op* — whose algorithm builds every node's Funcs into one pipeline. Being an op, it reuses
everything ops have: ``lower.build``, the algorithm fingerprint, the compile caches, the schedule
database, the tuner and the AOT path.

Lowering, in short:

- Each node's Funcs are namespaced (``n3_acc``) so schedules can name them.
- Views (reshape, permute, broadcast, slice) and casts are index remaps of their producer; a
  reshape costs nothing (the producer's Func is reused, since C-order flattening is unchanged).
- Pointwise ops (the elementwise families) are *lifted*: built over their inputs' natural shape
  rather than the flat 1-D or 2-D form their eager frontends use, so chains stay plain N-D index
  expressions that Halide inlines into one loop nest.
- Every other op (an *anchor*: reductions, matmul, conv...) is built over its inputs' Funcs.

The fused default schedule: pointwise chains and views are inlined; a pointwise value read by an
anchor is computed once at root (as unfused); an anchor's own schedule (its database entry or its
template) is applied inside its namespace; when an anchor's only consumer is a pointwise chain
ending at an output, the anchor's output-stage schedule moves to that output (an *epilogue*:
``matmul -> bias -> gelu`` is one tiled loop nest).
"""

from __future__ import annotations

import hashlib
import math
import threading
from collections.abc import Mapping, Sequence
from typing import Any

import halide as hl
import numpy as np

from ..dtypes import halide_type
from ..errors import OpDefinitionError, PyptoError
from ..ops._op import ALGORITHM_LOCK, Op
from ..ops.math import cast_expr
from ..schedule.directives import GRAMMAR, Directive
from ..schedule.fit import any_shape
from .shapes import SymInt, as_expr, slots, symbolic
from .tensor import Node, Tensor

D = Directive.make
_RealFunc = hl.Func
_patch_lock = ALGORITHM_LOCK      # hl.Func is patched only while no other thread runs an algorithm


def dom(shape: Sequence[int]) -> tuple[int, ...]:
    """The Halide domain of a value of ``shape``: a 0-d value is a 1-element 1-D Func."""
    return tuple(shape) or (1,)


class Graph:
    """The nodes that compute ``outputs``, reading ``sources`` (inputs or earlier results)."""

    def __init__(self, outputs: Sequence[Tensor], materialized: Mapping | None = None):
        materialized = materialized or {}
        self.outputs = [(t.node, t.index) for t in outputs]
        self.sources: list[tuple[Node, int]] = []
        self.nodes: list[Node] = []
        seen: set[int] = set()
        src_seen: set[tuple[int, int]] = set()

        checked: dict[int, Node] = {}

        def visit(node: Node, k: int) -> None:
            if node.checks:
                checked[node.id] = node
            if (node.id, k) in materialized or node.kind == "input":
                if (node.id, k) not in src_seen:
                    src_seen.add((node.id, k))
                    self.sources.append((node, k))
                return
            if node.id in seen:
                return
            seen.add(node.id)
            for t in node.inputs:
                visit(t.node, t.index)
            self.nodes.append(node)

        # Iterative deepening would be kinder to huge graphs; traced programs stay far below
        # Python's recursion limit per path (one frame per node on the longest chain).
        import sys
        old = sys.getrecursionlimit()
        sys.setrecursionlimit(max(old, 4 * (len(materialized) + 2000)))
        try:
            for node, k in self.outputs:
                visit(node, k)
        finally:
            sys.setrecursionlimit(old)
        self.src_index = {(n.id, k): i for i, (n, k) in enumerate(self.sources)}
        self.checks = self._value_checks(checked.values())
        self.index: dict[int, int] = {}
        self._dedupe()
        self.key = self._key()

    def _value_checks(self, nodes) -> list[tuple]:
        """``(source, views, check, where)`` for each value check (``Tensor.require_values``)
        on a value that is a source seen through views and casts: :meth:`check_values` runs it
        on the source's array, so a program checks the indices it is given as an eager call
        does. A checked value this graph computes and reads itself is listed in
        ``computed_checks`` instead, as (node, k) of the value under its views and casts: a
        program computes it in a pipeline of its own first, where it is then a source (see
        ``_Recorder.run_segment``); a graph lowered whole, as one pipeline, clamps it."""
        out = []
        self.computed_checks: list[tuple[Node, int]] = []
        for node in nodes:
            for k, check, where in node.checks:
                views, n, j = [], node, k
                while (n.id, j) not in self.src_index and n.kind in ("view", "cast"):
                    views.append(n)
                    n, j = n.inputs[0].node, n.inputs[0].index
                if (n.id, j) in self.src_index:
                    out.append((self.src_index[(n.id, j)], views[::-1], check, where))
                elif self._read_inside(node, k):
                    self.computed_checks.append((n, j))
        return out

    def _read_inside(self, node: Node, k: int) -> bool:
        """Whether an op of this graph reads value ``k`` of ``node``, directly or through views
        and casts of it."""
        seen = {(node.id, k)}
        for n in self.nodes:
            hit = any((t.node.id, t.index) in seen for t in n.inputs)
            if hit and n.kind in ("view", "cast"):
                seen.add((n.id, 0))
            elif hit:
                return True
        return False

    def check_values(self, arrays: Sequence[np.ndarray]) -> None:
        """Runs the value checks on the sources' arrays; raises the first failing check's error,
        naming the line that traced it."""
        for i, views, check, where in self.checks:
            a = np.asarray(arrays[i]).reshape(self.source_shape(i))
            for n in views:
                a = _np_step(n, a)
            try:
                check(a)
            except PyptoError as e:
                raise type(e)(f"{e} (traced at {where})") from None

    def _dedupe(self) -> None:
        """Common subexpressions: a node equal to an earlier one (same op, parameters and
        inputs) is that node (``x.min()`` written twice is computed once)."""
        kept: list[Node] = []
        seen: dict[tuple, int] = {}
        for n in self.nodes:
            ins = tuple(self.ref(t) for t in n.inputs)
            if n.kind == "op":
                sig = ("op", n.op.name, id(n.op), n.dtypes,
                       tuple(sorted((k, repr(v)) for k, v in n.params.items())), ins)
            else:
                sig = (n.kind, repr(n.aux), ins, n.outs[0][0], n.outs[0][1].str)
            at = seen.get(sig)
            if at is None:
                at = seen[sig] = len(kept)
                kept.append(n)
            self.index[n.id] = at
        self.nodes = kept

    def source_shape(self, i: int) -> tuple[int, ...]:
        node, k = self.sources[i]
        return node.outs[k][0]

    def source_dtype(self, i: int) -> np.dtype:
        node, k = self.sources[i]
        return node.outs[k][1]

    def ref(self, t: Tensor | tuple) -> tuple:
        node, k = (t.node, t.index) if isinstance(t, Tensor) else t
        if (node.id, k) in self.src_index:
            return ("s", self.src_index[(node.id, k)])
        return ("n", self.index[node.id], k)

    def _key(self) -> str:
        """A structural hash: equal programs on equal shapes and dtypes hash equally."""
        parts = [("src", self.source_shape(i), self.source_dtype(i).str)
                 for i in range(len(self.sources))]
        for n in self.nodes:
            ins = tuple(self.ref(t) for t in n.inputs)
            if n.kind == "op":
                ps = tuple(sorted((k, repr(v)) for k, v in n.params.items()))
                parts.append(("op", n.op.name, n.dtypes, ps, ins,
                              tuple(s for s, _ in n.outs)))
            else:
                parts.append((n.kind, repr(n.aux), ins, n.outs[0][0], n.outs[0][1].str))
        parts.append(("out", tuple(self.ref(o) for o in self.outputs)))
        return hashlib.sha256(repr(parts).encode()).hexdigest()[:16]

    # -- the NumPy reference of the whole segment ---------------------------------------------
    def reference(self, *arrays: np.ndarray) -> list[np.ndarray]:
        """Evaluates the segment with each op's NumPy reference (never with its kernels)."""
        env: dict[tuple, np.ndarray] = {}
        for i, a in enumerate(arrays):
            env[("s", i)] = np.asarray(a).reshape(self.source_shape(i))
        for idx, n in enumerate(self.nodes):
            ins = [env[self.ref(t)] for t in n.inputs]
            if n.kind == "op":
                res = n.op.kernel_ref(*ins, **n.params)
                res = list(res) if isinstance(res, (tuple, list)) else [res]
                for k, (r, (shape, dt)) in enumerate(zip(res, n.outs)):
                    env[("n", idx, k)] = np.asarray(r).astype(dt, copy=False).reshape(shape)
            else:
                env[("n", idx, 0)] = _np_step(n, ins[0])
        return [env[self.ref(o)] for o in self.outputs]


def _same(a, b) -> bool:
    """Whether two extents are the same at every shape the pipeline serves: equal constants,
    or one symbolic extent (a shape-generic pipeline's extents that only agree at the traced
    shape are not the same)."""
    if isinstance(a, SymInt) or isinstance(b, SymInt):
        return (isinstance(a, SymInt) and isinstance(b, SymInt)
                and (a.expr is b.expr or str(a.expr) == str(b.expr)))
    return int(a) == int(b)


def _np_step(n: Node, a: np.ndarray) -> np.ndarray:
    """A view or cast node applied to the array of its input."""
    if n.kind == "cast":
        with np.errstate(all="ignore"):
            return a.astype(n.outs[0][1])
    return _np_view(a, n.aux, n.outs[0][0])


def _np_view(a: np.ndarray, aux: tuple, shape) -> np.ndarray:
    kind = aux[0]
    if kind == "reshape":
        return a.reshape(shape)
    if kind == "permute":
        return a.transpose(aux[1])
    if kind == "broadcast":
        return np.broadcast_to(a, shape)
    if kind == "slice":
        idx = tuple(slice(s, s + st * n if s + st * n >= 0 else None, st)
                    for s, st, n in zip(aux[1], aux[2], shape))
        return a[idx]
    raise OpDefinitionError(f"unknown view {aux!r}")


# -- lowering ---------------------------------------------------------------------------------------

class _NoLift(Exception):
    """The op's algorithm is not a plain pointwise definition: build it in its canonical form."""


def _vars(prefix: str, shape) -> list:
    """Halide Vars for a domain, innermost first, named ``{prefix}{axis}`` (NumPy axis)."""
    d = dom(shape)
    return [hl.Var(f"{prefix}{len(d) - 1 - i}") for i in range(len(d))]


def _call(func, shape, idx_np: Sequence) -> Any:
    """``func`` at a NumPy-order index over its domain (0-d values sit at [0])."""
    if not shape:
        return func[0]
    return func[list(reversed(list(idx_np)))]


class _Val:
    __slots__ = ("func", "shape", "name", "kind", "source")

    def __init__(self, func, shape, name: str, kind: str, source: str | None = None):
        self.func = func
        self.shape = dom(shape)   # the domain the Func is defined over
        self.name = name          # the Func's base name
        self.kind = kind          # input | view | pointwise | anchor | output
        self.source = source      # views: the Func they read


class Lowering:
    """Builds a :class:`Graph`'s Funcs over the graph op's input images."""

    def __init__(self, graph: Graph, images: Sequence[Any], binding: list | None = None):
        self.g = graph
        self.vals: dict[tuple, _Val] = {}
        self.funcs: dict[str, _Val] = {}
        self.reshapes: dict[tuple, _Val] = {}
        self.readers: dict[str, list[tuple[str, Any]]] = {}
        self.anchors: list[dict] = []
        self.materialize: set[str] = set()
        #: each pointwise value's operands (Func names) and op (see ``_keep_shared_chains``)
        self.operands: dict[str, list[str]] = {}
        self.op_names: dict[str, str] = {}
        #: materialized for a reader that is not a reduction (one that may read it many times)
        self.mat_keep: set[str] = set()
        self.expanding: set[str] = set()      # broadcast views (each element read many times)
        self.transposed: set[str] = set()     # permute views that move the innermost axis
        self.reindexed: set[str] = set()      # views reading across their source: permutes,
        #                                       strided or reversed slices, and views of those
        self.outputs: list[_Val] = []
        #: program outputs defined as soon as the anchor op they copy is lowered (see
        #: ``_output_early``): the value's ref -> (output index, Func, _Val)
        self.early: dict[tuple, list] = {}
        #: slice views: their Func's name -> (starts, steps), per axis of their source
        self.slices: dict[str, tuple] = {}
        #: concat results joined into the concat that reads them (see ``_join``): their pieces
        self.joins: dict[tuple, list] = {}
        self.join_specs: dict[str, dict] = {}     # a join's Func name -> how it is defined
        #: who reads each value: node indices, None for a program output
        self.consumers: dict[tuple, list] = {}
        for i, node in enumerate(graph.nodes):
            for t in node.inputs:
                self.consumers.setdefault(graph.ref(t), []).append(i)
        for o in graph.outputs:
            self.consumers.setdefault(graph.ref(o), []).append(None)
        # Every extent, by slot: ints, or (a shape-generic lowering) SymInts read from the inputs.
        self.ext = (symbolic(graph, binding, images) if binding is not None
                    else dict(slots(graph)))
        for i, im in enumerate(images):
            name = im.name()
            v = _Val(im, self.src_shape(i), name, "input")
            self.vals[("s", i)] = v
            self.funcs[name] = v

    # -- extents ----------------------------------------------------------------------------------
    def src_shape(self, i: int) -> tuple:
        return tuple(self.ext[("src", i, a)] for a in range(len(self.g.source_shape(i))))

    def out_shape(self, idx: int, k: int) -> tuple:
        shape = self.g.nodes[idx].outs[k][0]
        return tuple(self.ext[("out", idx, k, a)] for a in range(len(shape)))

    def shape_of(self, t) -> tuple:
        """The shape of a node input (a Tensor or a (node, k) pair) as this lowering sees it."""
        ref = self.g.ref(t)
        return self.src_shape(ref[1]) if ref[0] == "s" else self.out_shape(ref[1], ref[2])

    def node_dims(self, idx: int) -> dict:
        return {d: self.ext[("dim", idx, d)] for d in self.g.nodes[idx].dims}

    # -- values ---------------------------------------------------------------------------------
    def _new(self, name: str, shape, kind: str, source: str | None = None):
        f = _RealFunc(name)
        v = _Val(f, shape, name, kind, source)
        self.funcs[name] = v
        return f, v

    def read(self, ref: tuple, shape, reader: tuple[str, Any]) -> _Val:
        """The value of ``ref`` as a Func over ``dom(shape)`` (a reshape Func when needed)."""
        v = self.vals[ref]
        want = dom(shape)
        if v.shape != want:
            key = (ref, want)
            r = self.reshapes.get(key)
            if r is None:
                f, r = self._new(f"rs{len(self.reshapes)}_{v.name}", want, "view", v.name)
                vs = _vars("x", want)
                idx_np = list(reversed(vs))
                have = list(v.shape)
                # Axes the two shapes share at either end map one to one; only the axes between
                # are flattened and split again. (A product reading 32 joined [64, 2048] steps
                # as [2048, 2048] divided every index of its inner loop by 2048 and took twice
                # as long; now only the row index is split, by 64.)
                head = 0
                while (head < min(len(want), len(have)) - 1 and _same(want[head], have[head])):
                    head += 1
                tail = 0
                while (tail < min(len(want), len(have)) - head
                       and _same(want[-1 - tail], have[-1 - tail])):
                    tail += 1
                mid_want = list(range(head, len(want) - tail))
                mid_have = list(range(head, len(have) - tail))
                flat = 0
                stride = 1
                for axis in reversed(mid_want):
                    flat = flat + idx_np[axis] * stride
                    stride = stride * as_expr(want[axis])
                mid_idx = []
                stride = 1
                for k, axis in enumerate(reversed(mid_have)):
                    n = as_expr(have[axis])
                    last = k == len(mid_have) - 1
                    mid_idx.insert(0, flat // stride if last else (flat // stride) % n)
                    stride = stride * n
                src_idx = (idx_np[:head] + mid_idx
                           + idx_np[len(want) - tail:])
                f[vs] = v.func[list(reversed(src_idx))]
                self.reshapes[key] = r
                if v.name in self.reindexed:
                    self.reindexed.add(r.name)
                self.readers.setdefault(v.name, []).append(("view", r.name))
            v = r
        self.readers.setdefault(v.name, []).append(reader)
        return v

    def _plan_early_outputs(self) -> None:
        """Program outputs that are an anchor op's result which other values of the program
        read too. Such an output is defined right after its op, and those readers read the
        output: the op's loop nest then moves onto the output (its epilogue) and writes it
        once. Defined last, as a copy, the op computed into a buffer of the pipeline that the
        output copied (the LSTM's input projection, read by the steps of its pipeline: a
        16 MiB buffer allocated, written and copied every call)."""
        for k, (node, j) in enumerate(self.g.outputs):
            ref = self.g.ref((node, j))
            if ref[0] != "n" or ref in self.early:
                continue
            n = self.g.nodes[ref[1]]
            if (n.kind != "op" or len(n.outs) != 1 or _is_join(n)
                    or is_pointwise(n.op, n.dtypes, n.params)):
                continue
            if any(c is not None for c in self.consumers.get(ref, [])):
                self.early[ref] = [k, None, None]

    def _output_early(self, ref: tuple) -> None:
        """Defines the program output planned for ``ref`` (an anchor's value just lowered) as
        a copy of it; later readers of the value read the output."""
        k = self.early[ref][0]
        sv = self.vals[ref]
        shape = self.out_shape(ref[1], ref[2])
        if sv.shape != dom(shape):
            del self.early[ref]          # written in another shape: the output copies it
            return
        f, v = self._new(f"o{k}", shape, "output")
        vs = [hl.Var(f"o{k}_{a}") for a in reversed(range(len(dom(shape))))]
        src = self.read(ref, shape, ("output", f"o{k}"))
        f[vs] = src.func[vs]
        self.early[ref] = [k, f, v]
        self.vals[ref] = v

    def lower(self) -> tuple:
        self._plan_early_outputs()
        for idx, n in enumerate(self.g.nodes):
            if n.kind == "view":
                self._view(idx, n)
            elif n.kind == "cast":
                self._cast(idx, n)
            else:
                self._op(idx, n)
        self._keep_shared_chains()
        # A pointwise value whose one reader is a reduction is folded into the reduction's loop
        # (which reads each element once), not written out and read back: the layer_norm
        # backward's (x - mean)^2, g * xhat and dy * xhat were passes of their own (its
        # vjp(jit) backward at 4096x1024, one thread: ~94 -> ~66 ms CPU, under load).
        for name in list(self.materialize):
            if name not in self.mat_keep and self._uses(name) == 1:
                self.materialize.discard(name)
        outs = []
        early = {e[0]: e for e in self.early.values() if e[1] is not None}
        for k, (node, j) in enumerate(self.g.outputs):
            if k in early:
                outs.append(early[k][1])
                self.outputs.append(early[k][2])
                continue
            shape = self.shape_of((node, j))
            f, v = self._new(f"o{k}", shape, "output")
            vs = [hl.Var(f"o{k}_{a}") for a in reversed(range(len(dom(shape))))]
            sv = self.vals[self.g.ref((node, j))]
            spec = self.join_specs.get(sv.name)
            if spec is not None and not self.readers.get(sv.name) and sv.shape == dom(shape):
                # A join read only by this output is the output (no copy of a whole buffer).
                a = spec["anchor"]
                a["outs"], a["is_output"] = [f"o{k}"], True
                a["join"] = (a["join"][0], a["join"][1], self._define_join(f, vs, spec))
                self.readers[sv.name] = [("output", f"o{k}")]
            else:
                src = self.read(self.g.ref((node, j)), shape, ("output", f"o{k}"))
                f[vs] = src.func[vs]
                self._keep_if_shared(sv)
            outs.append(f)
            self.outputs.append(v)
        return tuple(outs)

    def _keep_shared_chains(self) -> None:
        """A pointwise value read more than once is computed once (at root) rather than inlined
        into each reader when what its readers would recompute, ``(reads - 1) * weight`` of its
        inlined expression (an op weighs 1, one of APPROXIMATED weighs APPROXIMATION_WEIGHT),
        reaches APPROXIMATION_WEIGHT. Inlined, every reader recomputed the chain below it, and
        a recurrence unrolled in one pipeline recomputed every earlier step: an LSTM's cell
        state, read by its step's output and by the next step, made four steps in one pipeline
        cost 1.6 ms a step against 0.98 for one step alone ([64, 512], two threads). Cheap
        chains stay inlined (a norm's backward folds ``(x - mean) * rstd`` into each of its
        reductions, see ``lower``)."""
        cost: dict[str, int] = {}

        def ops_in(name: str) -> int:
            v = self.funcs.get(name)
            while v is not None and v.kind == "view" and name not in self.materialize:
                if name in self.expanding:
                    return 0    # a broadcast value: computed once per row it is broadcast from
                name = v.source
                v = self.funcs.get(name) if name else None
            if v is None or v.kind != "pointwise" or name in self.materialize:
                return 0
            return cost.get(name, 0)

        for name, v in list(self.funcs.items()):       # in the order they were defined
            if v.kind != "pointwise" or name in self.materialize:
                continue
            own = APPROXIMATION_WEIGHT if self.op_names.get(name) in APPROXIMATED else 1
            n = own + sum(ops_in(src) for src in self.operands.get(name, ()))
            if (self._uses(name) - 1) * n >= APPROXIMATION_WEIGHT:
                self.materialize.add(name)
                self.mat_keep.add(name)
                n = 0
            cost[name] = n

    def _keep_if_shared(self, sv: _Val) -> None:
        """A pointwise value written as an output that other values read too is computed once
        (at root; the output copies it), not inlined into the output and again into each
        reader: an LSTM step's forward wrote its gates, cell and tanh(cell) for the backward,
        and every output recomputed the chain of exponentials below it (0.2-0.5 ms per
        [64, 512] output, one thread, against ~0.03 for the value alone)."""
        src = sv
        while src.kind == "view" and src.source in self.funcs:
            src = self.funcs[src.source]
        if src.kind == "pointwise" and self._uses(src.name) > 1:
            self.materialize.add(src.name)
            self.mat_keep.add(src.name)

    def _uses(self, name: str) -> int:
        """How many reads of Func ``name`` there are, through views (2 for a broadcast one)."""
        return sum((2 if who in self.expanding else self._uses(who)) if kind == "view" else 1
                   for kind, who in self.readers.get(name, []))

    def _view(self, idx: int, n: Node) -> None:
        kind = n.aux[0]
        src_t = n.inputs[0]
        ref = self.g.ref(src_t)
        if kind == "reshape":
            self.vals[("n", idx, 0)] = self.vals[ref]   # same elements in the same C order
            return
        shape = self.out_shape(idx, 0)
        s_in = self.shape_of(src_t)
        src = self.read(ref, s_in, ("view", f"n{idx}_view"))
        f, v = self._new(f"n{idx}_view", shape, "view", src.name)
        vs = _vars("x", shape)
        out_idx = list(reversed(vs)) if shape else []
        if kind == "permute":
            in_idx = [None] * len(out_idx)
            for i, a in enumerate(n.aux[1]):
                in_idx[a] = out_idx[i]
        elif kind == "broadcast":
            lead = len(shape) - len(s_in)
            in_idx = [hl.Expr(0) if s_in[j] == 1 and shape[lead + j] != 1 else out_idx[lead + j]
                      for j in range(len(s_in))]
            if any(shape[j] != 1 for j in range(lead)) or any(
                    s_in[j] == 1 and shape[lead + j] != 1 for j in range(len(s_in))):
                self.expanding.add(f"n{idx}_view")
        elif kind == "slice":
            in_idx = [st + sp * o for st, sp, o in zip(n.aux[1], n.aux[2], out_idx)]
            self.slices[f"n{idx}_view"] = (tuple(n.aux[1]), tuple(n.aux[2]))
        else:
            raise OpDefinitionError(f"unknown view {n.aux!r}")
        f[vs] = _call(src.func, s_in, in_idx)
        self.vals[("n", idx, 0)] = v
        if kind == "permute" and n.aux[1] and n.aux[1][-1] != len(n.aux[1]) - 1:
            self.transposed.add(v.name)     # its innermost axis reads across rows
        if (src.name in self.reindexed or kind == "permute" and list(n.aux[1]) != sorted(n.aux[1])
                or kind == "slice" and any(sp != 1 for sp in n.aux[2])):
            self.reindexed.add(v.name)

    def _cast(self, idx: int, n: Node) -> None:
        src = self.vals[self.g.ref(n.inputs[0])]
        src = self.read(self.g.ref(n.inputs[0]), src.shape, ("pointwise", f"n{idx}_cast"))
        f, v = self._new(f"n{idx}_cast", src.shape, "pointwise")
        vs = _vars("x", src.shape)
        e = src.func[vs]
        f[vs] = cast_expr(e if isinstance(e, hl.Expr) else hl.Expr(e), n.aux)   # ops.cast's rules
        self.vals[("n", idx, 0)] = v
        self.operands[v.name] = [src.name]

    def _op(self, idx: int, n: Node) -> None:
        from ..ops._op import Dims

        op = n.op
        if _is_join(n) and self._join(idx, n):
            return
        prefix = f"n{idx}_"
        dims = Dims({d: e.expr if isinstance(e, SymInt) else hl.Expr(int(e))
                     for d, e in self.node_dims(idx).items()})
        if is_pointwise(op, n.dtypes, n.params):
            try:
                self._lift(idx, n, prefix, dims)
                return
            except _NoLift:
                pass
        ins = [self.read(self.g.ref(t), self.shape_of(t), ("anchor", idx)) for t in n.inputs]
        with _named(prefix):
            outs = op.build([_In(v.func) for v in ins], n.params, dims)
        names = []
        for k, f in enumerate(outs):
            v = _Val(f, self.out_shape(idx, k), _base(f.name()), "anchor")
            self.vals[("n", idx, k)] = v
            self.funcs[v.name] = v
            names.append(v.name)
        for v in ins:       # a pointwise value an anchor reads is computed once, not per read
            # (A transposed operand stays a view: measured on matmul's backward at 512, a
            # dense copy first made it slower, 8.5 against 5.9 ms; the product stages it.)
            src = v
            while src.kind == "view" and src.source in self.funcs:
                src = self.funcs[src.source]
            if src.kind == "pointwise":
                self.materialize.add(src.name)
                if op.category != "reduction":
                    self.mat_keep.add(src.name)
        self.anchors.append({"idx": idx, "node": n, "prefix": prefix, "outs": names,
                             "inputs": {spec.name: v.name for spec, v in zip(op.inputs, ins)}})
        if ("n", idx, 0) in self.early:
            self._output_early(("n", idx, 0))

    def _join(self, idx: int, n: Node) -> bool:
        """A tree of ``concat`` nodes (a join of many pieces: the eager frontend and the gradient
        sums build binary trees) lowered as one Func: an undefined pure definition and one block
        copy (update) per piece, over the pieces' own N-D shapes where they agree on the joined
        axis, so neither the intermediate joins nor the frontend's flattening reshapes (index
        division per element) are computed. 32 pieces of 64x2048 joined as a tree took 70 ms in a
        program, NumPy 3.3. A concat whose only reader is another concat only records its pieces.
        False (lower it as the op) when a piece is empty."""
        pieces: list[tuple[tuple, tuple]] = []
        for t in n.inputs:
            ref = self.g.ref(t)
            if ref in self.joins:
                pieces += self.joins.pop(ref)
            else:
                pieces.append((ref, self.shape_of(t)))
        if any(isinstance(s[1], int) and s[1] == 0 for _, s in pieces):
            return False
        key = ("n", idx, 0)
        cons = self.consumers.get(key, [])
        if len(cons) == 1 and cons[0] is not None and _is_join(self.g.nodes[cons[0]]):
            self.joins[key] = pieces
            return True
        nat = _join_axis([self.vals[r].shape for r, _ in pieces], self.node_dims(idx)["O"])
        if nat is not None:
            ax, shapes = nat
            ext = [s[ax] for s in shapes]
            out_shape = shapes[0][:ax] + (sum(ext),) + shapes[0][ax + 1:]
        else:                           # the op's own [O, A] form
            ax, shapes = 1, [s for _, s in pieces]
            ext = [s[1] for s in shapes]
            out_shape = self.out_shape(idx, 0)
        srcs = [self.read(r, s, ("anchor", idx)) for (r, _), s in zip(pieces, shapes)]
        name = f"n{idx}_join"
        f, v = self._new(name, out_shape, "anchor")
        spec = {"srcs": srcs, "ext": ext, "ax": ax, "type": halide_type(n.outs[0][1].name)}
        rnames = self._define_join(f, _vars(f"n{idx}_j", out_shape), spec)
        self.vals[key] = v
        spec["anchor"] = {"idx": idx, "node": n, "prefix": f"n{idx}_", "outs": [name],
                          "inputs": {}, "join": (len(out_shape) - 1 - ax, ext, rnames)}
        self.anchors.append(spec["anchor"])
        self.join_specs[name] = spec
        return True

    @staticmethod
    def _define_join(f, vs: list, spec: dict) -> list[str]:
        """Defines ``f`` over Vars ``vs`` (innermost first) as the join ``spec``: undefined,
        then one block copy per piece; the names of the copies' RVars."""
        f[vs] = hl.undef(spec["type"])
        np_idx = list(reversed(vs))
        ax = spec["ax"]
        off, rnames = 0, []
        for k, (src, e) in enumerate(zip(spec["srcs"], spec["ext"])):
            r = hl.RDom([hl.Range(0, as_expr(e))], f"{_base(f.name())}_r{k}")
            lhs, rhs = list(np_idx), list(np_idx)
            lhs[ax], rhs[ax] = r.x + as_expr(off), r.x
            f[[_expr(x) for x in reversed(lhs)]] = _call(src.func, src.shape, rhs)
            rnames.append(r.x.name())
            off = off + e
        return rnames

    def _lift(self, idx: int, n: Node, prefix: str, dims) -> None:
        op = n.op
        canon = [d.lower() for d in reversed(op.outputs[0].dims)]
        in_vals = [self.vals[self.g.ref(t)] for t in n.inputs]
        shapes = {v.shape for v in in_vals}
        out_shape = self.out_shape(idx, 0)
        if len(shapes) == 1 and math.prod(next(iter(shapes))) == math.prod(dom(out_shape)):
            nat = next(iter(shapes))
        else:
            nat = dom(out_shape)
        ins = [self.read(self.g.ref(t), nat, ("pointwise", idx)) for t in n.inputs]
        vs = _vars(f"{prefix}x", nat)
        wrapped = [_LiftIn(v.func, canon, vs) for v in ins]
        with _named(prefix, lift=(canon, vs)):
            outs = op.build(wrapped, n.params, dims)
        f = outs[0]
        if len(outs) != 1 or f.num_update_definitions() or not isinstance(f, _LiftFunc):
            raise _NoLift
        v = _Val(f, nat, _base(f.name()), "pointwise")
        self.vals[("n", idx, 0)] = v
        self.funcs[v.name] = v
        self.operands[v.name] = [x.name for x in ins]
        self.op_names[v.name] = op.name


#: Pointwise ops whose kernels evaluate a polynomial or rational approximation per element (an
#: exp, a log, a trig function), and what one weighs against a plain arithmetic op when the
#: lowering decides whether a shared value is recomputed by each reader or computed once (see
#: ``Lowering._keep_shared_chains``).
APPROXIMATED = frozenset({
    "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sigmoid", "log_sigmoid", "tanh",
    "sinh", "cosh", "asinh", "acosh", "atanh", "sin", "cos", "tan", "asin", "acos", "atan",
    "atan2", "erf", "gelu", "silu", "swiglu", "softplus", "mish", "elu", "selu", "celu", "pow",
    "logit", "logaddexp", "logaddexp2", "cbrt", "tanhshrink", "geglu", "glu"})
APPROXIMATION_WEIGHT = 8


def _is_join(n: Node) -> bool:
    """True for a node of the built-in ``concat`` op (lowered by ``Lowering._join``)."""
    from ..ops.layout import concat

    return n.kind == "op" and n.op is concat


def _join_axis(shapes: list, o) -> tuple[int, list] | None:
    """The N-D form of a join of values of ``shapes`` that the concat op sees as [O, A_k]: the
    axis and the shapes, when every value has the same rank and the same extents but on one axis,
    whose leading extents multiply to ``O``; None when they do not (or are not all known)."""
    if not all(isinstance(x, int) for s in shapes for x in s) or not isinstance(o, int):
        return None
    rank = len(shapes[0])
    if any(len(s) != rank for s in shapes):
        return None
    for ax in range(rank):
        lead, tail = shapes[0][:ax], shapes[0][ax + 1:]
        if math.prod(lead) == o and all(s[:ax] == lead and s[ax + 1:] == tail for s in shapes):
            return ax, [tuple(s) for s in shapes]
    return None


def _join_directives(name: str, info, join: tuple, shape, lanes: int) -> list[Directive]:
    """A join's block copies (updates), each in memory order: vectorized along the innermost
    axis, the outermost run in parallel when the block is large enough."""
    from ..schedule.defaults import MIN_TASK_ELEMS

    pos, ext, rnames = join
    out = []
    for u, (e, rname) in enumerate(zip(ext, rnames)):
        st = u + 1
        names = list(info.args)
        names[pos] = rname
        exts = list(reversed(shape))
        exts[pos] = e
        total = math.prod(exts)
        ds = []
        inner = names[0]
        base = inner.replace("$", "_")
        if len(names) == 1 and total >= 2 * MIN_TASK_ELEMS:
            ds += [D("split", name, st, var=inner, outer=f"{base}_t", inner=f"{base}_b",
                     factor=MIN_TASK_ELEMS),
                   D("parallel", name, st, var=f"{base}_t")]
            inner = f"{base}_b"
        elif len(names) > 1 and exts[-1] >= 2 and total >= 2 * MIN_TASK_ELEMS:
            ds.append(D("parallel", name, st, var=names[-1]))
        if len(names) > 1:        # memory order (an update's RVars are innermost by default)
            ds.insert(0, D("reorder", name, st, vars=names))
        if exts[0] >= lanes:
            b = inner.replace("$", "_")
            ds += [D("split", name, st, var=inner, outer=f"{b}_o", inner=f"{b}_v",
                     factor=lanes, tail="guard_with_if"),
                   D("vectorize", name, st, var=f"{b}_v")]
        if not ds:
            ds.append(D("serial", name, st, var=names[0]))
        out += ds
    return out


def _base(name: str) -> str:
    import re

    return re.sub(r"\$\d+$", "", name)


def _expr(x):
    return x if isinstance(x, hl.Expr) else hl.Expr(x)


class _In:
    """An anchor's input: a Func (or image) that, like an ImageParam, gives Exprs when indexed."""

    def __init__(self, func):
        self.func = func

    def __getitem__(self, key):
        return _expr(self.func[key])

    def type(self):
        return self.func.type()

    def name(self):
        return self.func.name()

    def dimensions(self):
        return self.func.dimensions()


class _LiftIn:
    """An input of a lifted pointwise op: indexing it at the op's canonical Vars reads the
    producer at the natural N-D Vars."""

    def __init__(self, func, canon, vs):
        self.func, self.canon, self.vs = func, canon, vs

    def __getitem__(self, key):
        return _expr(self.func[_map_key(key, self.canon, self.vs)])

    def type(self):
        return self.func.type()

    def name(self):
        return self.func.name()

    def dimensions(self):
        return len(self.canon)


def _map_key(key, canon, vs):
    items = list(key) if isinstance(key, (tuple, list)) else [key]
    names = []
    for k in items:
        if not isinstance(k, hl.Var):
            raise _NoLift
        names.append(k.name())
    if names != list(canon):
        raise _NoLift
    return vs


class _LiftFunc(_RealFunc):
    """A Func of a lifted op: definitions and calls at the canonical Vars use the N-D Vars."""

    _canon: list = []
    _vs: list = []
    _active = True      # only while its op is being built; afterwards it is a plain Func

    def __setitem__(self, key, value):
        if self._active:
            key = _map_key(key, self._canon, self._vs)
        super().__setitem__(key, value)

    def __getitem__(self, key):
        if self._active:
            key = _map_key(key, self._canon, self._vs)
        return super().__getitem__(key)


class _named:
    """While active, ``hl.Func(name)`` in op algorithms makes ``{prefix}{name}`` (and, for a
    lifted op, a :class:`_LiftFunc`)."""

    def __init__(self, prefix: str, lift=None):
        self.prefix, self.lift = prefix, lift

    def __enter__(self):
        prefix, lift = self.prefix, self.lift
        base = _LiftFunc if lift else _RealFunc

        class Named(base):
            if lift:
                _canon, _vs = lift

            def __init__(self, *args):
                args = list(args)
                for i, a in enumerate(args):
                    if isinstance(a, str):
                        args[i] = prefix + a
                if not args:
                    args = [prefix + "f"]
                super().__init__(*args)

        _patch_lock.acquire()
        hl.Func = Named
        self.cls = Named
        return self

    def __exit__(self, *exc):
        self.cls._active = False
        hl.Func = _RealFunc
        _patch_lock.release()
        return False


_pointwise_cache: dict = {}


def is_pointwise(op: Op, dtypes, params) -> bool:
    """True for ops whose output element depends only on the input elements at the same index
    (one output, every input with the output's dims, no reduction)."""
    if op.category != "elementwise" or len(op.outputs) != 1:
        return False
    out = op.outputs[0].dims
    if any(t.dims != out for t in op.inputs):
        return False
    key = (op.name, id(op), dtypes, tuple(sorted((k, repr(v)) for k, v in params.items())))
    got = _pointwise_cache.get(key)
    if got is None:
        from ..compiler.lower import build

        built = build(op, dtypes, params)
        got = all(not i.updates for i in built.funcs.values() if not i.is_input)
        _pointwise_cache[key] = got
    return got


# -- the graph op -----------------------------------------------------------------------------------

def _as_outputs(graph: Graph, values: list):
    """The reference's values in the graph op's output form (a 0-d value is a 1-element 1-D
    output, as the kernel writes it)."""
    outs = [np.asarray(v).reshape(dom(node.outs[k][0])) for v, (node, k) in
            zip(values, graph.outputs)]
    return tuple(outs) if len(outs) > 1 else outs[0]


class GraphOp(Op):
    """A traced segment as an op: inputs ``i0..``, outputs ``o0..``, every dim named per axis
    (``I0_1`` is axis 1 of input 0). ``call_dims`` holds the extents of every dim."""

    def __init__(self, graph: Graph, name: str | None = None, doc: str = "",
                 binding: list | None = None):
        import inspect

        self.graph = graph
        self.plan: Lowering | None = None
        #: Shape-generic (see ``frontend.shapes``): extents bound to input dimensions are read
        #: from the buffers, so the compiled pipeline serves every shape that fits the binding.
        self.binding = binding
        self.generic = binding is not None
        inputs = {f"i{k}": " ".join(f"I{k}_{a}" for a in range(len(dom(graph.source_shape(k)))))
                  for k in range(len(graph.sources))}
        outputs = {}
        fixed: dict[str, int] = {}
        self.call_dims: dict[str, int] = {}
        for k in range(len(graph.sources)):
            for a, n in enumerate(dom(graph.source_shape(k))):
                self.call_dims[f"I{k}_{a}"] = n
        for k, (node, j) in enumerate(graph.outputs):
            shape = dom(node.outs[j][0])
            outputs[f"o{k}"] = " ".join(f"O{k}_{a}" for a in range(len(shape)))
            fixed.update({f"O{k}_{a}": n for a, n in enumerate(shape)})
        self.call_dims.update(fixed)
        sig = tuple(graph.source_dtype(i).name for i in range(len(graph.sources)))

        def algorithm(*images):
            low = Lowering(graph, images, binding)
            outs = low.lower()
            self.plan = low
            return outs

        algorithm.__name__ = name or f"g_{graph.key}"
        algorithm.__signature__ = inspect.Signature(
            [inspect.Parameter(f"i{k}", inspect.Parameter.POSITIONAL_ONLY)
             for k in range(len(graph.sources))])
        def derive(dims, params):
            # The output dims, and the extent of every loop variable of the program's Funcs that
            # is unambiguous (schedules and the tuner's space read extents by variable name).
            return {**self.func_extents(), **fixed}

        super().__init__(name=name or f"g_{graph.key}", category="program", algorithm=algorithm,
                         inputs=inputs, outputs=outputs, dtypes=[sig],
                         reference=lambda *a: _as_outputs(graph, graph.reference(*a)),
                         derive=derive if fixed else None,
                         doc=doc or f"a traced program of {len(graph.nodes)} nodes")
        self.schedule_template = fused_schedule

    def func_extents(self) -> dict[str, int]:
        """``VAR -> extent`` for every Func variable whose name gives one extent in the program
        (the lowering's own variables are unique per node; an op's own may repeat)."""
        if getattr(self, "_extents", None) is None:
            if self.plan is None:
                from ..compiler.lower import build

                build(self, self.dtypes[0], {})
            seen: dict[str, set] = {}
            for v in self.plan.funcs.values():
                if v.kind == "input":
                    continue
                try:
                    names = [a.name() for a in v.func.args()]
                except Exception:
                    continue
                for nm, n in zip(names, reversed(v.shape)):
                    seen.setdefault(nm.upper(), set()).add(int(n))
            self._extents = {k: next(iter(v)) for k, v in seen.items() if len(v) == 1}
        return dict(self._extents)

    def kept_values(self) -> list[str]:
        """The pointwise values the fused default computes once and keeps (the tuner may have
        them recomputed where they are read instead; see :func:`fused_schedule`)."""
        if self.plan is None:
            from ..compiler.lower import build

            build(self, self.dtypes[0], {})
        return sorted(self.plan.materialize)

    def fused_variant(self, built, dims: Mapping[str, int], lanes: int, *, epilogues: bool,
                      recompute: frozenset):
        """The fused default with the tuner's choices: anchors moved onto their pointwise
        consumers or not, and which kept values are recomputed instead."""
        from ..schedule.schedule import Schedule

        return Schedule(op=self.name, directives=tuple(
            fused_schedule(built, dims, lanes, epilogues=epilogues, recompute=recompute)))

    def unfused_schedule(self, dims: Mapping[str, int], target):
        """The program as op-by-op calls would run it (the tuner's "unfused" baseline)."""
        from ..compiler.lower import build
        from ..schedule.defaults import vector_lanes
        from ..schedule.schedule import Schedule

        built = build(self, self.dtypes[0], {})
        lanes = vector_lanes(target, built.out_dtypes[0] if built.out_dtypes[0] != "bool"
                             else "uint8")
        return Schedule(op=self.name, directives=tuple(
            fused_schedule(built, dims, lanes, unfused=True)))


def fused_schedule(built, dims: Mapping[str, int], lanes: int, *, safe: bool = False,
                   unfused: bool = False, bare: bool = False, epilogues: bool = True,
                   recompute: frozenset = frozenset()) -> list:
    """The fused default schedule of a graph op (see the module docstring).

    ``safe`` skips epilogues and the anchors' own schedules: every anchor output is computed at
    root with the structural default. It is the fallback when the full default cannot apply.
    ``unfused`` is the program as op-by-op calls would run it: every op's result is computed at
    root (anchors with their own schedules, pointwise ops with the structural default), views
    stay free index remaps. The tuner measures it as a baseline, so a tuned program is never
    slower than its ops run one by one. ``bare`` leaves out the outputs' ``bound`` directives.
    ``epilogues=False`` keeps the anchors' own schedules but computes every anchor output at
    root: the step between the full default and ``safe`` (an lstm_cell at the structural
    default ran about 30x slower than with its own schedule). ``recompute`` names pointwise
    values the default keeps (computed once at root, ``Lowering.materialize``) that are instead
    inlined, recomputed wherever they are read: the tuner's keep-or-recompute choice (a value
    an anchor's schedule moved onto, an epilogue, is always kept).
    """
    from ..compiler import targets
    from ..schedule.defaults import output_directives

    op = built.op
    low: Lowering = op.plan
    target = targets.current()
    out: list[Directive] = []
    extents: dict[str, int] = {}

    def ext_of(v: _Val, names) -> bool:
        """Records the extents ``v`` is computed over (what its readers read of it); True
        when that is less than its shape (its vector loops then guard their tails)."""
        box = _read_box(low, v.name) if v.name in low.funcs else None
        shape = v.shape if box is None else tuple(hi - lo for lo, hi in box)
        for nm, n in zip(names, reversed(shape)):
            extents[nm.upper()] = n
        return box is not None

    claimed: dict[str, tuple[str, dict]] = {}      # anchor output -> (func, var map)
    if unfused:
        low = _Unfused(low)
    if not safe and not unfused and epilogues:
        for a in low.anchors:
            if len(a["outs"]) != 1:
                continue
            info = built.funcs.get(a["outs"][0])
            if info is None or info.updates:    # a Func with updates cannot be inlined away
                continue
            tgt = _epilogue(low, a["outs"][0])
            # One loop nest per Func: where two anchors feed the same epilogue (a gradient
            # summed over the steps of an LSTM, ``a @ b + c @ d``), the first moves onto it and
            # the second is computed at root (both moved there split its loops twice, failed to
            # compile, and the whole pipeline fell back to the safe default, 15x slower).
            if tgt is not None and tgt[0] not in {f for f, _ in claimed.values()}:
                claimed[a["outs"][0]] = tgt
    handled: set[str] = set()
    plans: list = []              # per anchor: its directives (None: the structural default)
    dense: list[str] = []         # reindexed operands made dense once, before their readers
    for a in low.anchors:
        n: Node = a["node"]
        if "join" in a:
            plans.append((a, None, False))
            continue
        column = None if safe else _column_reduction(a, n, low, built, claimed, lanes)
        directives = column if column is not None or safe else \
            _anchor_directives(a, n, target, claimed, *_anchor_region(a, low),
                               unused=_has_unused_output(a, low))
        plans.append((a, directives, column is not None))
        if directives is None or column is not None or n.op.category == "reduction":
            continue
        # An operand read through a permute or a strided or reversed slice, that the anchor's
        # schedule does not stage itself (matmul packs its B, not its A), is made dense once:
        # a^T @ g at 1024 read through the view took 2.3x the time of a @ b, and 1.2x with the
        # copy first; conv2d's input gradient read its flipped, transposed weights through
        # index arithmetic in the innermost loop. (A reduction reads such a view in place: a
        # dense copy first made a column sum slower, 116 against 69 ms.)
        staged = {d.func for d in directives if d.op == "wrap"}
        for vname in a["inputs"].values():
            if vname in low.reindexed and vname not in staged and vname in built.funcs \
                    and vname not in low.materialize and vname not in dense:
                dense.append(vname)
    # An anchor with a Tuple-valued reduction (layer_norm's one-pass moments) reads an operand
    # reshaped across axes from a dense copy: Halide 21 failed to compile such an update,
    # vectorized across rows, while it read through the reshape's div/mod index ("Symbol not
    # found: t53.s"; layer_norm of a [4, 8, 16] input in any program, at every schedule).
    reshaped = {r.name for r in low.reshapes.values()}
    for a in low.anchors:
        if "join" in a or not any(
                name.startswith(a["prefix"]) and info.updates and info.func.outputs() > 1
                for name, info in built.funcs.items()):
            continue
        for vname in a["inputs"].values():
            if vname in reshaped and vname in built.funcs and vname not in low.materialize \
                    and vname not in dense:
                dense.append(vname)
    for k, (a, directives, is_column) in enumerate(plans):
        if is_column and any(v in dense for v in a["inputs"].values()):
            # Its view is made dense for another reader: the op's own schedule reads the copy.
            plans[k] = (a, _anchor_directives(a, a["node"], target, claimed,
                                              *_anchor_region(a, low),
                                              unused=_has_unused_output(a, low)), False)
    for a, directives, _ in plans:
        for name in a["outs"]:
            if name not in claimed and name in built.funcs:   # (an unused output is no Func)
                out.append(D("compute_root", name))
        if "join" in a:
            (name,) = a["outs"]
            out += _join_directives(name, built.funcs[name], a["join"], low.funcs[name].shape,
                                    lanes)
            handled.add(name)
            continue
        if directives is None:
            for name in a["outs"]:
                if name in claimed:
                    continue
                info = built.funcs.get(name)
                if info is None:
                    continue
                part = ext_of(low.funcs[name], info.args)
                out += output_directives(name, info.args, extents, lanes,
                                         tail="guard_with_if" if part else None)
                for u in range(len(info.updates)):
                    from ..schedule.defaults import _update_directives
                    out += _update_directives(info, u, extents, lanes)
            for name, info in built.funcs.items():
                # The anchor's own Funcs with update definitions are never inlined (Halide would
                # compute them inside every use): each at root, its updates vectorized.
                if (not name.startswith(a["prefix"]) or info.is_output or name in a["outs"]
                        or not info.updates):
                    continue
                out.append(D("compute_root", name))
                for u in range(len(info.updates)):
                    from ..schedule.defaults import _update_directives
                    out += _update_directives(info, u, extents, lanes)
        else:
            out += _present(directives, built.funcs, {im.name() for im in built.images})
            handled |= {f for f, _ in claimed.values()}
    # Intermediates are computed over what their readers need, which can be less than a vector
    # (a diagonal reads two elements of a row of five): their vector loops guard the tail, where
    # shifting the last vector inwards would read before the start of an input.
    for vname in dense:
        info = built.funcs[vname]
        out.append(D("compute_root", vname))
        ext_of(low.funcs[vname], info.args)
        tiled = None
        if vname in low.transposed:
            from ..schedule.templates.linalg import transpose_directives
            tiled = transpose_directives(vname, info.args,
                                         [extents[a.upper()] for a in info.args], lanes)
        out += tiled or output_directives(vname, info.args, extents, lanes, tail="guard_with_if")
    for name in sorted(low.materialize):
        info = built.funcs.get(name)
        if info is None or (name in recompute and name not in handled):
            continue
        out.append(D("compute_root", name))
        if name not in handled:      # else an anchor's schedule moved onto it (an epilogue)
            ext_of(low.funcs[name], info.args)
            out += output_directives(name, info.args, extents, lanes, tail="guard_with_if")
    for v in low.outputs:
        info = built.funcs[v.name]
        if not bare and not getattr(op, "generic", False):
            # Known extents let Halide simplify the index arithmetic of reshapes away (``bare``
            # leaves them out: a bound can keep an anchor's own schedule from compiling).
            for nm, n in zip(info.args, reversed(v.shape)):
                out.append(D("bound", v.name, var=nm, min=0, extent=int(n)))
        if v.name not in handled:
            ext_of(v, info.args)
            out += output_directives(v.name, info.args, extents, lanes)
    return out


def _flat_bounds(box, read_as: tuple, shape: tuple) -> list:
    """The bounding box in ``shape`` of a box of the same elements read as ``read_as`` (C order):
    the box lies between the flat positions of its first and last corners, so its bounds are
    exact along the leading axes where those corners agree, and whole after the first axis where
    they differ."""
    def flat(index, dims):
        f = 0
        for i, n in zip(index, dims):
            f = f * n + i
        return f

    def unflat(f, dims):
        out = []
        for n in reversed(dims):
            f, r = divmod(f, n)
            out.append(r)
        return out[::-1]

    first = unflat(flat([lo for lo, _ in box], read_as), shape)
    last = unflat(flat([hi - 1 for _, hi in box], read_as), shape)
    got, agree = [], True
    for a, b, n in zip(first, last, shape):
        got.append((a, b + 1) if agree else (0, n))
        agree = agree and a == b
    return got


def _read_box(low: "Lowering", name: str, _depth: int = 0) -> tuple | None:
    """The part of Func ``name`` its readers read, ``((lo, hi), ...)`` per NumPy axis, when
    they are all slices (of slices) that leave some of it unread; None when it is read whole
    (or its extents are not known numbers). A Func computed at root is computed over what its
    readers need: ``linear(x, w, b)[0:64]`` computes 64 of 512 rows, and a schedule made for
    512 (a row tile of 512, shifted inwards to stay within the rows computed) read the input
    448 rows before its start; the program ran at the safe default."""
    shape = low.funcs[name].shape
    readers = low.readers.get(name, [])
    if not readers or _depth > 32 or not all(isinstance(e, int) and e > 0 for e in shape):
        return None
    box = None
    reshaped = {r.name for r in low.reshapes.values()}
    for kind, who in readers:
        if kind == "view" and who in reshaped:
            # Read through a reshape (``linear(...).reshape(T, B, N)[0]``): the part read of
            # the reshaped Func, mapped back to this one's shape.
            sub = _read_box(low, who, _depth + 1)
            rshape = low.funcs[who].shape
            if sub is None or not all(isinstance(e, int) and e > 0 for e in rshape):
                return None
            got = _flat_bounds(sub, tuple(rshape), tuple(shape))
            box = got if box is None else [(min(a, c), max(b, d)) for (a, b), (c, d) in
                                           zip(box, got)]
            continue
        sl = low.slices.get(who) if kind == "view" else None
        if sl is None or len(sl[0]) != len(shape):
            return None
        starts, steps = sl
        if not all(isinstance(v, int) for v in (*starts, *steps)):
            return None
        sub = _read_box(low, who, _depth + 1)
        vshape = low.funcs[who].shape
        if len(vshape) != len(shape) or not all(isinstance(e, int) and e > 0 for e in vshape):
            return None
        if sub is None:
            sub = tuple((0, e) for e in vshape)
        got = []
        for (lo, hi), st, sp in zip(sub, starts, steps):
            first, last = st + sp * lo, st + sp * (hi - 1)
            got.append((min(first, last), max(first, last) + 1))
        box = got if box is None else [(min(a, c), max(b, d)) for (a, b), (c, d) in
                                       zip(box, got)]
    box = tuple((max(lo, 0), min(hi, e)) for (lo, hi), e in zip(box, shape))
    if any(hi <= lo for lo, hi in box) or all(lo == 0 and hi == e
                                              for (lo, hi), e in zip(box, shape)):
        return None
    return box


def _column_reduction(a: dict, n: Node, low: "Lowering", built, claimed,
                      lanes: int) -> list[Directive] | None:
    """A reduction over a transposed view (``x.sum(axis=0)``, the bias and norm gradients) read
    row by row, in place: the reduced axis is cut into chunks reduced in parallel into partial
    rows (``rfactor``), each row vectorized across the kept axis, so every load is contiguous;
    the partial rows are added last. The op's own schedule vectorizes along the reduced axis,
    which a transposed view makes a gather: ``(x * y).sum(axis=0)`` at 4096x1024 took 69 ms that
    way (116 with a dense copy first), NumPy 9.6. None when the anchor is not such a reduction.
    """
    if n.op.category != "reduction" or len(a["outs"]) != 1 or _read_box(low, a["outs"][0]):
        return None
    views = [v for v in a["inputs"].values() if v in low.transposed]
    if len(views) != 1 or not low.funcs[views[0]].shape:
        return None
    rows = low.funcs[views[0]].shape[-1]
    out_name = a["outs"][0]
    tgt, _ = claimed.get(out_name, (out_name, {}))
    tinfo = built.funcs.get(tgt)
    if tinfo is None or len(tinfo.args) != 1 or not isinstance(rows, int) or rows < 64:
        return None
    width = low.funcs[tgt].shape[-1] if low.funcs[tgt].shape else 1
    if not isinstance(width, int) or width < lanes:
        return None
    parts = max(1, min(16, rows // 64))
    chunk = -(-rows // parts)
    out = [D("vectorize", tgt, var=tinfo.args[0], factor=lanes)]
    found = False
    for name, info in built.funcs.items():
        if not name.startswith(a["prefix"]) or info.is_input or name == tgt:
            continue
        if not info.updates:
            if name not in a["outs"]:
                return None      # another stage of the op's own: keep its schedule
            continue
        if (len(info.updates) != 1 or len(info.args) != 1 or len(info.updates[0]) != 1
                or tuple(info.update_args[0]) != tuple(info.args) or found
                or "," in info.type):      # a tuple-valued reduction: keep the op's
            return None
        p, r = info.args[0], info.updates[0][0]
        part = f"{name}_rows"
        # The updates guard their tail: rounded up, a width of 300 read the rows at 303 and the
        # program (the layer_norm backward's column sums) ran at the safe default.
        out += [D("compute_root", name), D("vectorize", name, var=p, factor=lanes),
                D("split", name, 1, var=r, factor=chunk, outer="cro", inner="cri"),
                D("rfactor", name, 1, pairs=[["cro", "cu"]], intm=part),
                D("vectorize", name, 1, var=p, factor=lanes, tail="guard_with_if"),
                D("compute_root", part), D("vectorize", part, var=p, factor=lanes),
                D("reorder", part, 1, vars=[p, "cri", "cu"]),
                D("vectorize", part, 1, var=p, factor=lanes, tail="guard_with_if"),
                D("parallel", part, 1, var="cu")]
        found = True
    return out if found else None


def _present(directives, funcs, images=()) -> list:
    """The directives that name Funcs or inputs (``images``) of the pipeline, or Funcs an earlier
    directive creates (a ``wrap``'s staging copy, an ``rfactor``'s intermediate): an anchor's
    Funcs that the program does not use (an unused output) drop out with their directives.
    (A staging ``wrap`` of a program input, matmul's packed B, is kept: without it a fused
    matmul ran 2.5x slower than the op alone, 40 against 15.6 ms at 256x1024x4096.)"""
    known = set(funcs) | set(images)
    renames: dict[str, dict] = {}    # a wrap of a Func keeps the Func's loop names, not _0, _1
    out = []
    for d in directives:
        if d.func not in known or d.get("at", d.func) not in known:
            continue
        vmap = renames.get(d.func)
        if vmap:
            args = d.kwargs
            for arg, kind in GRAMMAR.get(d.op, ()):
                if kind.rstrip("?") in _VAR_KINDS and args.get(arg) is not None and \
                        not (kind.rstrip("?") == "atvar"):
                    v = args[arg]
                    args[arg] = ([vmap.get(x, x) for x in v] if isinstance(v, (list, tuple))
                                 else vmap.get(v, v))
            d = D(d.op, d.func, d.stage, **args)
        out.append(d)
        for arg, kind in GRAMMAR.get(d.op, ()):
            if kind.rstrip("?") == "name" and d.get(arg):
                known.add(d.get(arg))
        info = funcs.get(d.func)
        if d.op == "wrap" and info is not None and not info.is_input:
            renames[d.get("as")] = {f"_{k}": a for k, a in enumerate(info.args)}
        elif d.op == "wrap" and vmap:      # a wrap of that wrap (a panel cut from a row copy)
            renames[d.get("as")] = vmap
    return out


def _epilogue(low: Lowering, name: str):
    """Where anchor output ``name`` can move its loop nest: (func, {old var: new var}) or None."""
    v = low.funcs[name]
    cur = name
    while True:
        readers = low.readers.get(cur, [])
        if len(readers) != 1:
            return None
        kind, who = readers[0]
        if kind == "output":
            target = low.funcs[who]
            break
        if kind != "pointwise":
            return None
        nxt = low.vals.get(("n", who, 0))
        if nxt is None or nxt.shape != v.shape:
            return None
        if nxt.name in low.materialize:
            target = nxt
            break
        cur = nxt.name
    if target.shape != v.shape:
        return None
    old = [a.name() for a in v.func.args()]
    new = [a.name() for a in target.func.args()]
    if len(old) != len(new):
        return None
    return target.name, dict(zip(old, new))


class _Unfused:
    """A view of a lowering in which every pointwise op's value is materialized too."""

    def __init__(self, low: Lowering):
        self.__dict__.update(low.__dict__)
        self.materialize = set(low.materialize) | {
            v.name for v in low.funcs.values()
            if v.kind == "pointwise" and v.name not in {o.name for o in low.outputs}}


_VAR_KINDS = {"var", "vars", "purevar", "purevars", "atvar"}


def _has_unused_output(a: dict, low) -> bool:
    """Whether an output of a multi-output anchor is read by no one (nor is a program output)."""
    return len(a["outs"]) > 1 and any(not low.readers.get(name) for name in a["outs"])


def _anchor_region(a: dict, low: "Lowering") -> tuple[dict, dict | None]:
    """``({output Func: box}, dims)`` for the anchor's outputs that its readers read only part
    of (see :func:`_read_box`), and the op's dims as they need them (None: none is)."""
    if "join" in a:
        return {}, None
    boxes = {}
    for name in a["outs"]:
        box = _read_box(low, name) if name in low.funcs else None
        if box is not None:
            boxes[name] = box
    return boxes, (_region_dims(a, a["node"], low, boxes) if boxes else None)


def _region_dims(a: dict, n: Node, low: "Lowering", region: dict) -> dict:
    """The anchor op's dims as its readers need them: an output dim of which only part is read
    takes the extent read (the largest over the outputs and axes that name it)."""
    dims = dict(n.dims)
    need: dict[str, int] = {}
    for spec, name in zip(n.op.outputs, a["outs"]):
        if not low.readers.get(name):
            continue           # an unused output needs nothing
        shape = low.funcs[name].shape
        box = region.get(name)
        if len(spec.dims) != len(shape):
            box = None         # (a 0-d output: a 1-element Func)
        for ax, d in enumerate(spec.dims):
            e = box[ax][1] - box[ax][0] if box is not None else dims.get(d)
            if isinstance(e, int):
                need[d] = max(need.get(d, 0), e)
    for d, e in need.items():
        if isinstance(dims.get(d), int) and 0 < e < dims[d]:
            dims[d] = e
    return dims


def _anchor_directives(a: dict, n: Node, target, claimed, region: dict | None = None,
                       region_dims: dict | None = None,
                       unused: bool = False) -> list[Directive] | None:
    """The anchor op's own schedule (database entry, else its default), renamed into the graph.

    ``region`` (see :func:`_anchor_region`): outputs its readers read only part of. The
    schedule is then the op's default for the extents read (``region_dims``), and a ``bound``
    on such an output is the part read (a tile made for the whole extent, shifted inwards to
    stay within the part computed, reads before the start of the inputs). ``unused``: an output
    of the op is read by no one, so its inner Funcs may be computed over less than the op's
    dims (lstm_cell's gates, when only its ``c`` is read, over 3 of the 4 gates): every factor
    then guards its tail (:func:`pypto.schedule.fit.any_shape`)."""
    from ..compiler.lower import build, fingerprint
    from ..database.lookup import lookup
    from ..schedule.defaults import default_schedule

    op = n.op
    built = build(op, n.dtypes, n.params)
    prefix = a["prefix"]
    dims = region_dims if region else n.dims
    region = {name[len(prefix):]: box for name, box in (region or {}).items()
              if name.startswith(prefix)}
    found = None
    if not region:      # (a stored entry is for the whole extents: it may not fit the part)
        try:
            found = lookup(op, fingerprint(built), n.dtypes, n.params, n.dims, target)
        except Exception:   # a broken database must not break a program: use the default
            found = None
    if found is not None and found.distance > 0:
        # A nearest-shape entry may not fit this shape (a tile larger than an extent); a call
        # would fall back at run time, a fused pipeline cannot: only exact entries are used.
        found = None
    sched = found.schedule if found is not None else default_schedule(built, dims, target)
    if unused:
        sched = any_shape(sched)
    inputs = a["inputs"]
    names: dict[str, str] = dict(inputs)        # an input, by its name or its Func's
    for fname in built.funcs:
        if fname in inputs:
            names[fname] = inputs[fname]
        elif fname.endswith("_im") and fname[:-3] in inputs:
            names[fname] = inputs[fname[:-3]]
        else:
            names[fname] = prefix + fname
    var_maps: dict[str, dict] = {}
    for out_name in a["outs"]:
        if out_name in claimed:
            tgt, vmap = claimed[out_name]
            names[out_name[len(prefix):]] = tgt
            var_maps[tgt] = vmap
    result = []
    for d in sched.directives:
        if d.op == "bound" and d.stage == 0 and d.func in region and d.func in built.funcs:
            args = list(built.funcs[d.func].args)
            if d.get("var") in args:
                lo, hi = region[d.func][len(args) - 1 - args.index(d.get("var"))]
                d = D("bound", d.func, var=d.get("var"), min=lo, extent=hi - lo)
        for arg, kind in GRAMMAR.get(d.op, ()):      # Funcs a directive creates (rfactor, wrap)
            if kind.rstrip("?") == "name" and d.get(arg):
                names.setdefault(d.get(arg), prefix + d.get(arg))
        func = names.get(d.func)
        if func is None:
            return None
        args = d.kwargs
        kinds = dict(GRAMMAR.get(d.op, ()))
        for arg, kind in kinds.items():
            kind = kind.rstrip("?")
            if arg not in args or args[arg] is None:
                continue
            val = args[arg]
            if kind == "func":
                if val not in names:
                    return None
                args[arg] = names[val]
            elif kind == "name":
                args[arg] = prefix + val
            elif kind in _VAR_KINDS:
                owner = args.get("at") if kind == "atvar" else func   # "at" is renamed already
                vmap = var_maps.get(owner)
                if vmap:
                    args[arg] = ([vmap.get(x, x) for x in val] if isinstance(val, (list, tuple))
                                 else vmap.get(val, val))
        result.append(D(d.op, func, d.stage, **args))
    return result
