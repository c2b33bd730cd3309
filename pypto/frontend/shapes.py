"""Shape classes of traced segments: one compiled pipeline for many shapes.

A traced graph holds every extent as a Python int (source shapes, op dims, output shapes). When
a program is called again with new shapes, the retrace gives a graph of the same *structure*
(:func:`free_key`: the graph's key with extents masked) and new numbers. Comparing the two
graphs slot by slot tells which extents follow an input's dimensions: each such extent is bound
to that dimension (or to a product of adjacent ones, as a flattening reshape makes), the others
stay constants. The pipeline is then lowered with those extents read from its input buffers
(:class:`SymInt`), so it runs at any shape whose numbers satisfy the same binding.

A compiled shape-generic pipeline serves a later graph only when (see ``jit._compiled_graph``):

1. the structure is the same (``free_key``);
2. every extent of the new graph equals what the binding gives for its inputs (:func:`fits`);
3. lowering the new graph with the binding gives the same Halide definitions (the algorithm
   fingerprint), and its default schedule is the same directives: the compiled code computes
   exactly the new program, the way the new program's own default would.

0 and 1 are never bound: they change structure (broadcasting, empty loops) and stay in the key.
"""

from __future__ import annotations

import hashlib
import math
from typing import Any

#: A slot: where an extent sits in a graph, in a fixed walk order.
#: ("src", i, axis) | ("dim", node index, dim name) | ("out", node index, output, axis)
Slot = tuple


class SymInt(int):
    """An extent known at trace time (its int value, used for the structure) that the pipeline
    reads from an input's dimensions (``expr``)."""

    expr: Any

    def __new__(cls, value: int, expr: Any):
        obj = int.__new__(cls, value)
        obj.expr = expr
        return obj


def as_expr(n):
    """The Halide form of an extent: the bound expression of a :class:`SymInt`, else the int."""
    return n.expr if isinstance(n, SymInt) else n


def slots(graph) -> list[tuple[Slot, int]]:
    """Every extent of ``graph`` with its slot, in the same order for graphs of one structure."""
    out: list[tuple[Slot, int]] = []
    for i in range(len(graph.sources)):
        for a, n in enumerate(graph.source_shape(i)):
            out.append((("src", i, a), int(n)))
    for idx, node in enumerate(graph.nodes):
        if node.kind == "op":
            for d in sorted(node.dims):
                out.append((("dim", idx, d), int(node.dims[d])))
        for k, (shape, _) in enumerate(node.outs):
            for a, n in enumerate(shape):
                out.append((("out", idx, k, a), int(n)))
    return out


def _mask(n: int):
    return n if n in (0, 1) else "#"


def free_key(graph) -> str:
    """The graph's structural key with every extent other than 0 and 1 masked."""
    parts: list = [("src", tuple(_mask(n) for n in graph.source_shape(i)),
                    graph.source_dtype(i).str) for i in range(len(graph.sources))]
    for node in graph.nodes:
        ins = tuple(graph.ref(t) for t in node.inputs)
        outs = tuple((tuple(_mask(n) for n in s), dt.str) for s, dt in node.outs)
        if node.kind == "op":
            ps = tuple(sorted((k, repr(v)) for k, v in node.params.items()))
            dims = tuple((d, _mask(int(node.dims[d]))) for d in sorted(node.dims))
            parts.append(("op", node.op.name, id(node.op), node.dtypes, ps, dims, ins, outs))
        else:
            aux = node.aux
            if node.kind == "view" and aux[0] in ("reshape", "broadcast"):
                aux = (aux[0], tuple(_mask(int(n)) for n in aux[1]))   # the output's shape
            parts.append((node.kind, repr(aux), ins, outs))
    parts.append(("out", tuple(graph.ref(o) for o in graph.outputs)))
    return hashlib.sha256(repr(parts).encode()).hexdigest()[:16]


def _candidates(src: list[tuple]) -> list[tuple]:
    """Products of input dimensions an extent may follow, simplest first: one axis, adjacent
    axes of one input (a flattening reshape), then two axes of any inputs (``M*N`` when an op's
    eager form flattens its output). Each is a tuple of (input, axis) factors."""
    singles = [((i, a),) for i, s in enumerate(src) for a in range(len(s))]
    spans = [tuple((i, a) for a in range(a0, a1)) for i, s in enumerate(src)
             for a0 in range(len(s)) for a1 in range(a0 + 2, len(s) + 1)]
    spans.sort(key=len)
    pairs = [p + q for k, p in enumerate(singles) for q in singles[k + 1:]]
    return singles + spans + pairs


def _value(bound: tuple, src: list[tuple]) -> int:
    factors, mul, div = bound
    return math.prod(src[i][a] for i, a in factors) * mul // div


def _explain(cands: list[tuple], srcs: list, values: list[int]) -> tuple | None:
    """The simplest binding that gives ``values`` (one per graph) from the graphs' inputs: a
    product of input dimensions, else such a product times or over a constant (``M*4`` after
    a reshape, ``N/4`` from a ``-1``)."""
    prods = [[math.prod(src[i][a] for i, a in c) for src in srcs] for c in cands]
    for c, ps in zip(cands, prods):
        if ps == values:
            return (c, 1, 1)
    for c, ps in zip(cands, prods):
        if all(v % p == 0 for v, p in zip(values, ps)) and len({v // p for v, p in
                                                                  zip(values, ps)}) == 1:
            return (c, values[0] // ps[0], 1)
        if all(v and p % v == 0 for v, p in zip(values, ps)) and len({p // v for v, p in
                                                                       zip(values, ps)}) == 1:
            return (c, 1, ps[0] // values[0])
    return None


def bind(seen: list, new) -> list | None:
    """Per slot of ``new``: ``None`` (a constant) or the input dimensions whose product it is,
    read off ``new`` and earlier graphs of its structure (``seen``): an extent that differs
    between any of them is bound to the simplest product of input dimensions that gives it in
    every one. ``None`` when no extent changed, or one changed in a way no input dimension
    explains."""
    graphs = [*seen, new]
    table = [slots(g) for g in graphs]
    if any(len(t) != len(table[-1]) or any(a[0] != b[0] for a, b in zip(t, table[-1]))
           for t in table):
        return None
    srcs = [[tuple(g.source_shape(i)) for i in range(len(g.sources))] for g in graphs]
    if any([len(s) for s in src] != [len(s) for s in srcs[-1]] for src in srcs):
        return None
    cands = _candidates(srcs[-1])
    out: list = []
    for k in range(len(table[-1])):
        values = [t[k][1] for t in table]
        if len(set(values)) == 1:
            out.append(None)
            continue
        got = _explain(cands, srcs, values)
        if got is None:
            return None
        out.append(got)
    return out if any(b is not None for b in out) else None


def fits(graph, binding: list, base: list[int]) -> bool:
    """True when every extent of ``graph`` is what ``binding`` gives for its inputs (``base``:
    the constants, the extents of the graph the binding was made with)."""
    got = slots(graph)
    if len(got) != len(binding):
        return False
    src = [tuple(graph.source_shape(i)) for i in range(len(graph.sources))]
    for (slot, n), b, c in zip(got, binding, base):
        if n != (c if b is None else _value(b, src)):
            return False
    return True


def symbolic(graph, binding: list, images) -> dict[Slot, int]:
    """``slot -> extent`` for lowering ``graph`` over ``images``: a :class:`SymInt` reading the
    inputs' dimensions where ``binding`` says so, else the int."""
    exts: dict[int, list] = {}
    for i, im in enumerate(images):
        shape = graph.source_shape(i)
        exts[i] = [im.dim(len(shape) - 1 - a).extent() for a in range(len(shape))]
    table: dict[Slot, int] = {}
    for (slot, n), b in zip(slots(graph), binding):
        if b is None:
            table[slot] = n
            continue
        factors, mul, div = b
        expr = None
        for i, a in factors:
            expr = exts[i][a] if expr is None else expr * exts[i][a]
        if mul != 1:
            expr = expr * mul
        if div != 1:
            expr = expr / div     # exact: every shape that fits the binding divides evenly
        table[slot] = SymInt(n, expr)
    return table
