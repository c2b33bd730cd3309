"""``@pypto.jit``: trace a Python function once per signature, replay it as fused pipelines.

The first call for a new *signature* (argument structure, shapes, dtypes, static Python values,
target) traces: the function runs on :class:`~pypto.frontend.tensor.Tensor` proxies and records a
graph. Later calls with that signature *replay*: the recorded segments run as compiled pipelines
and Python is not run again.

Data-dependent control flow works. When the traced code needs a Python value (``if t:``,
``float(t)``, ``t.item()``), the pending part of the program runs as one pipeline (a *segment*),
the value goes back to Python and tracing continues in a new segment. Values seen before are
replayed without Python: the cache is a tree, segment -> observed value -> next segment. A value
not seen before traces again from the start (and counts toward ``recompile_limit``).

``fullgraph=True`` makes such a break an error naming ``file:line`` and the ops behind the value;
:func:`cond` keeps both branches in one pipeline.

"""

from __future__ import annotations

import collections
import dataclasses
import functools
import threading
import types
import warnings
import weakref
from collections.abc import Callable, Sequence

import numpy as np

from ..errors import (DtypeError, GraphBreakError, ParamError, PerformanceWarning, PyptoError,
                      ScheduleError, ScheduleTooLongError, ShapeError, TraceError,
                      ZeroSizeError)
from ..runtime import as_array
from . import tensor as T
from .graph import Graph, GraphOp, dom

#: Default cap on traces per jitted function (signatures plus newly seen break values).
RECOMPILE_LIMIT = 8
#: Cache misses a jitted function keeps for ``explain()`` (the latest).
_MISSES_KEPT = 64
#: Ops per pipeline before a program is cut into several (Halide's compile time grows faster
#: than linearly with the number of Funcs).
FUNC_BUDGET = 48
#: Pieces of the largest join kept whole in one pipeline: one update stage (block copy) each,
#: and a schedule names stages 0..64.
JOIN_PIECES = 64


def _pointwise(node) -> bool:
    from .graph import is_pointwise

    return node.kind != "op" or is_pointwise(node.op, node.dtypes, node.params)


@dataclasses.dataclass
class Stats:
    """Counters of one jitted function (and, in :data:`GLOBAL`, of all of them)."""

    calls: int = 0
    traces: int = 0
    replays: int = 0
    segments_run: int = 0
    compiles: int = 0          # pipelines compiled (or loaded from the disk cache) in memory
    kernel_reuses: int = 0     # segments that found their compiled pipeline already in memory
    shape_reuses: int = 0      # ... of which a shape-generic pipeline made for other shapes


GLOBAL = Stats()


# -- compiled segments --------------------------------------------------------------------------------

def _reshape_root(t: T.Tensor) -> T.Tensor:
    """The value ``t`` is a reshape of, through a chain of reshapes (``t`` itself if none)."""
    node = t.node
    while node.kind == "view" and node.aux[0] == "reshape" and len(node.inputs) == 1:
        t = node.inputs[0]
        node = t.node
    return t


def _with_anchor_roots(wanted: list[T.Tensor], done) -> list[T.Tensor]:
    """``wanted`` and, after it, each output of an anchor op (a product, a reduction: not
    pointwise, which is lowered in the shape it is read in) not computed already (``done``)
    that a wanted value reshapes but that is not wanted itself: written as the op's own output,
    NumPy then reshapes it. Written in the reshaped form, the op's result was computed into a
    buffer of the pipeline and copied out (the LSTM's input projection, [2048, 2048] copied to
    [32, 64, 2048] every call: 16 MiB more to allocate and write)."""
    have = {(t.node.id, t.index) for t in wanted}
    extra = []
    for t in wanted:
        root = _reshape_root(t)
        key = (root.node.id, root.index)
        if root is not t and not _pointwise(root.node) and key not in have and key not in done:
            have.add(key)
            extra.append(root)
    return wanted + extra


def output_graph(wanted: list[T.Tensor], done=None) -> tuple[Graph, list[T.Tensor], dict]:
    """The pipeline computing ``wanted`` (``done``: values computed already, its inputs):
    ``(graph, written, reshaped)``, ``written`` being ``wanted`` and the op outputs it reshapes
    (:func:`_with_anchor_roots`), ``reshaped`` which of them NumPy makes from another
    (:func:`_reshaped_outputs`; the graph's outputs are the others). A call's pipeline and the
    tuner's capture of a program both come from here, so they have one fingerprint."""
    done = {} if done is None else done
    written = _with_anchor_roots(wanted, done)
    reshaped = _reshaped_outputs(written)
    return Graph([t for i, t in enumerate(written) if i not in reshaped], done), written, reshaped


def _reshaped_outputs(wanted: list[T.Tensor]) -> dict[int, tuple[int, tuple]]:
    """``{i: (j, shape)}``: ``wanted[i]`` and ``wanted[j]`` are reshapes of one another (through
    a chain of reshapes), so ``wanted[i]``'s array is ``wanted[j]``'s reshaped to ``shape``.
    Of each such group the pipeline writes an anchor op's output when one is in it (the op
    computes straight into it), else the one of most dims (its natural shape: an elementwise op
    on a [64, 512] slice is lowered over [64, 512], and writing it flat cost a division per
    element, 15 ns each); the others are not outputs of their own."""
    at = {(t.node.id, t.index): j for j, t in enumerate(wanted)}
    parent: dict[int, int] = {}
    for i, t in enumerate(wanted):
        node = t.node
        while node.kind == "view" and node.aux[0] == "reshape" and len(node.inputs) == 1:
            src = node.inputs[0]
            j = at.get((src.node.id, src.index))
            if j is not None and j != i:
                parent[i] = j
                break
            node = src.node
    groups: dict[int, list[int]] = {}
    for i in range(len(wanted)):
        root = i
        while root in parent:
            root = parent[root]
        groups.setdefault(root, []).append(i)

    def shape(m: int) -> tuple:
        return tuple(wanted[m].node.outs[wanted[m].index][0])

    out: dict[int, tuple[int, tuple]] = {}
    for members in groups.values():
        best = max(members, key=lambda m: (not _pointwise(wanted[m].node), len(shape(m))))
        out.update({m: (best, shape(m)) for m in members if m != best})
    return out


class Segment:
    """One compiled pipeline of a traced program and how to feed it.

    ``reshaped`` (see :func:`_reshaped_outputs`) with ``n_wanted``: the graph holds only the
    other values, and :meth:`run` returns all ``n_wanted``, the reshaped ones as NumPy views of
    the arrays they reshape."""

    def __init__(self, graph: Graph, name: str | None = None, reshaped: dict | None = None,
                 n_wanted: int | None = None):
        self.reshaped = reshaped or {}
        self.n_wanted = n_wanted if reshaped else None
        self.graph = graph
        self.op, self.kernel = _compiled_graph(graph, name)
        self.shapes = [graph.source_shape(i) for i in range(len(graph.sources))]
        self.doms = [dom(s) for s in self.shapes]
        self.out_shapes = [n.outs[k][0] for n, k in graph.outputs]
        self._launchers: dict = {}
        # This graph's outputs (a shape-generic kernel serves graphs of several shapes).
        self._specs = [(dom(n.outs[k][0]), n.outs[k][1]) for n, k in graph.outputs]

    def graph_index(self, i: int) -> int | None:
        """The pipeline output that wanted value ``i`` is, or None when it is a reshaped view of
        another (which a caller's array cannot be written as)."""
        if self.n_wanted is None:
            return i
        if i in self.reshaped:
            return None
        return i - sum(1 for j in self.reshaped if j < i)

    def run(self, arrays: list[np.ndarray], into: dict | None = None) -> list[np.ndarray]:
        """The wanted values for ``arrays``. ``into`` maps wanted values (by index, each a
        pipeline output: :meth:`graph_index`) to caller arrays of their dtype and element count,
        C-contiguous: the kernel writes those in place."""
        from ..errors import ExecutionError

        GLOBAL.segments_run += 1
        if self.graph.checks:
            self.graph.check_values(arrays)
        ins = [a.reshape(d) if a.shape != d else a for a, d in zip(arrays, self.doms)]
        pre = None
        if into:
            pre = [None] * len(self._specs)
            for i, a in into.items():
                g = self.graph_index(i)
                shape = self._specs[g][0]
                # Through 1-D: the strides of a fresh output's (the launcher fixed those), even
                # where a size-1 dim of ``a`` has another stride.
                pre[g] = a.reshape(-1).reshape(shape)
        try:
            outs = self._launch(ins, pre)
        except ExecutionError as e:
            if self.kernel.source.endswith("safe)"):
                raise
            # A schedule that compiled but fails at this shape: the safe default, remembered.
            self.kernel = compile_graph_op(self.op, _target_of(self.kernel), safe_only=True)
            _warn_safe(self.op, e)
            self._launchers.clear()
            outs = self._launch(ins, pre)
        outs = [o.reshape(s) for o, s in zip(outs, self.out_shapes)]
        if self.n_wanted is None:
            return outs
        full: list = [None] * self.n_wanted
        rest = iter(outs)
        for i in range(self.n_wanted):
            if i not in self.reshaped:
                full[i] = next(rest)
        for i, (j, shape) in self.reshaped.items():
            full[i] = full[j].reshape(shape)
        return full

    def _launch(self, ins: list[np.ndarray], pre: list | None = None) -> list[np.ndarray]:
        """Runs the kernel; a disk-cached one through a launcher whose buffer structures are
        built once per layout of the inputs (the call only writes data pointers). ``pre``: per
        output, a caller's array to write (dense, so its layout is a fresh output's) or None."""
        import halide as hl

        from ..infra.pool import program_pool
        from ..runtime import _failure, dense, new_outputs, run_kernel

        kernel = self.kernel
        pool = program_pool()      # the values a program passes on: recycled (infra.pool)
        if pre is None:
            outs = new_outputs(self._specs, pool)
        else:
            fresh = iter(new_outputs([sp for sp, p in zip(self._specs, pre) if p is None], pool))
            outs = [p if p is not None else next(fresh) for p in pre]
        if not kernel.disk:
            return run_kernel(kernel, self.op, ins, {}, outs)
        ins = [dense(a) for a in ins]
        key = tuple((a.strides, a.dtype) for a in ins)
        launch = self._launchers.get(key)
        if launch is None:
            launch = self._launchers[key] = kernel.callable.launcher([*ins, *outs])
        try:
            launch([*ins, *outs])
        except hl.HalideError as e:
            raise _failure(self.op, kernel, e) from None
        return outs


_kernels: dict[tuple, tuple] = {}
_kernels_lock = threading.Lock()
#: Keys being compiled now, each with the lock its compiling thread holds.
_graph_gates: dict[tuple, threading.RLock] = {}


@dataclasses.dataclass
class _Generic:
    """A shape-generic pipeline: the graph it was made from, its binding and what it compiled."""

    op: GraphOp
    kernel: object
    base: list            # the extents of the graph it was made with (the binding's constants)
    fingerprint: str
    directives: tuple


#: Shape-generic pipelines and the last graphs seen, per structure (``shapes.free_key``).
_generic: dict[tuple, list[_Generic]] = {}
_seen_graphs: dict[tuple, list[Graph]] = {}
_SEEN_KEPT = 8


def _compiled_graph(graph: Graph, name: str | None = None, target=None):
    """(graph op, kernel) for ``graph``, compiled once per process for its structural key.

    A graph of a structure seen before at other shapes reuses a shape-generic pipeline when one
    fits (see ``frontend.shapes``); the second shape of a structure compiles one, when every
    extent that changed follows an input's dimensions and no stored schedule is tuned for it.
    """
    from ..compiler import targets

    target = target or targets.current()
    key = (graph.key, name, str(target))
    with _kernels_lock:
        got = _kernels.get(key)
        gate = _graph_gates.setdefault(key, threading.RLock()) if got is None else None
    if got is not None:
        GLOBAL.kernel_reuses += 1
        return got
    # One compile per key: two jitted functions (or threads) lowering one graph at once wait
    # for the first one's kernel instead of compiling it again.
    with gate:
        with _kernels_lock:
            got = _kernels.get(key)
        if got is not None:
            GLOBAL.kernel_reuses += 1
            return got
        try:
            return _compile_graph(graph, name, target, key)
        finally:
            with _kernels_lock:
                _graph_gates.pop(key, None)


def _compile_graph(graph: Graph, name: str | None, target, key: tuple):
    """:func:`_compiled_graph` past its cache: a shape-generic pipeline that serves ``graph``,
    a new generic one, or a kernel for these shapes; kept under ``key``."""
    from . import shapes

    fkey = (shapes.free_key(graph), name, str(target))
    with _kernels_lock:
        gens = list(_generic.get(fkey, ()))
        seen = [g for g in _seen_graphs.get(fkey, ()) if g.key != graph.key]
        _seen_graphs[fkey] = [*seen, graph][-_SEEN_KEPT:]
    for gen in gens:
        if _serves(gen, graph, target):
            GLOBAL.kernel_reuses += 1
            GLOBAL.shape_reuses += 1
            with _kernels_lock:
                _kernels[key] = (gen.op, gen.kernel)
            return gen.op, gen.kernel
    op = GraphOp(graph, name=name)
    got = None
    if seen and not target.has_gpu_feature():
        got = _make_generic(graph, seen, op, name, target, fkey)
    if got is None:
        kernel = compile_graph_op(op, target)
        got = (op, kernel)
    GLOBAL.compiles += 1
    with _kernels_lock:
        _kernels[key] = got
    return got


def _generic_name(name: str | None, fkey: tuple) -> str:
    return f"{name or 'g'}_shapes_{fkey[0]}"


def _probe(graph: Graph, binding: list, name: str, target):
    """(op, built, fingerprint, default directives) of ``graph`` lowered shape-generically."""
    from ..compiler.lower import build, fingerprint
    from ..schedule.defaults import vector_lanes
    from .graph import fused_schedule

    op = GraphOp(graph, name=name, binding=binding)
    built = build(op, op.dtypes[0], {})
    out_dt = built.out_dtypes[0] if built.out_dtypes else "float32"
    lanes = vector_lanes(target, out_dt if out_dt != "bool" else "uint8")
    directives = tuple(fused_schedule(built, op.call_dims, lanes))
    return op, built, fingerprint(built), directives


def _serves(gen: _Generic, graph: Graph, target) -> bool:
    """True when ``gen``'s compiled pipeline computes ``graph`` exactly as ``graph``'s own
    default would: the extents fit the binding, the lowering and the default schedule agree."""
    from . import shapes

    if not shapes.fits(graph, gen.op.binding, gen.base):
        return False
    try:
        _, _, fp, directives = _probe(graph, gen.op.binding, gen.op.name, target)
    except PyptoError:
        return False
    return fp == gen.fingerprint and directives == gen.directives


def _make_generic(graph: Graph, seen: list[Graph], op: GraphOp, name, target, fkey):
    """A shape-generic (op, kernel) for ``graph`` (``seen``: earlier graphs of its structure),
    or None when the shapes or a stored schedule do not allow one."""
    from ..compiler.lower import build, fingerprint
    from ..database.lookup import lookup
    from ..schedule.schedule import Schedule
    from . import shapes

    binding = shapes.bind(seen, graph)
    if binding is None:
        return None
    try:
        # A schedule tuned for this program at this shape beats a shape-generic default.
        static = build(op, op.dtypes[0], {})
        if lookup(op, fingerprint(static), op.dtypes[0], {}, op.call_dims, target) is not None:
            return None
    except PyptoError:
        pass
    try:
        gop, built, fp, directives = _probe(graph, binding, _generic_name(name, fkey), target)
        kernel = compile_graph_op(gop, target, Schedule(op=gop.name, directives=directives),
                                  source="default (fused, shape-generic)")
    except PyptoError:
        return None
    gen = _Generic(gop, kernel, [n for _, n in shapes.slots(graph)], fp, directives)
    with _kernels_lock:
        _generic.setdefault(fkey, []).append(gen)
    return gop, kernel


def _target_of(kernel):
    from ..compiler import targets

    return targets.parse(kernel.target)


def compile_graph_op(op: GraphOp, target, schedule=None, *, safe_only: bool = False,
                     source: str = "given", database: bool = True):
    """Compiles a graph op: the given schedule, else its database entry (unless ``database`` is
    False), else the fused default (and the safe default when the fused one cannot apply)."""
    from ..compiler.jit import compile_built
    from ..compiler.lower import build, fingerprint
    from ..database.lookup import lookup
    from ..errors import CompileError, ScheduleError
    from ..schedule.defaults import vector_lanes
    from ..schedule.schedule import Schedule
    from .graph import fused_schedule

    dtypes = op.dtypes[0]
    dims = op.call_dims
    built = build(op, dtypes, {})
    fp = fingerprint(built)
    if schedule is None and database:
        found = None
        try:
            found = lookup(op, fp, dtypes, {}, dims, target)
        except PyptoError:
            found = None
        if found is not None:
            schedule, source = found.schedule, found.source
    out_dt = built.out_dtypes[0] if built.out_dtypes else "float32"
    lanes = vector_lanes(target, out_dt if out_dt != "bool" else "uint8")
    attempts = []
    if schedule is not None and not safe_only:
        attempts.append((schedule, source))
    if target.has_gpu_feature():
        attempts.append((None, "default"))
    else:
        if not safe_only:
            attempts.append((Schedule(op=op.name, directives=tuple(
                fused_schedule(built, dims, lanes))), "default (fused)"))
            attempts.append((Schedule(op=op.name, directives=tuple(
                fused_schedule(built, dims, lanes, bare=True))), "default (fused)"))
            attempts.append((Schedule(op=op.name, directives=tuple(
                fused_schedule(built, dims, lanes, bare=True, epilogues=False))),
                "default (fused, no epilogues)"))
        attempts.append((Schedule(op=op.name, directives=tuple(
            fused_schedule(built, dims, lanes, safe=True))), "default (fused, safe)"))
    from ..schedule.defaults import default_schedule

    last = None
    for sched, src in attempts:
        b = build(op, dtypes, {})
        if sched is None:
            sched = default_schedule(b, dims, target)
        try:
            kernel = compile_built(b, sched, target, source=src, fp=fp, persist=True)
        except (ScheduleError, CompileError) as e:
            if src == "given" or isinstance(e, ScheduleTooLongError):
                # Too long a schedule: the caller cuts the program into smaller pipelines
                # rather than fall back to the safe default (12 LSTM steps ran 30x slower so).
                raise
            last = e
            continue
        if last is not None and src.endswith("safe)"):
            _warn_safe(op, last)
        return kernel
    raise last


def _warn_safe(op, why: Exception) -> None:
    """Says that a program runs at its safe default (every op's result at root, structural
    schedules: up to ~30x slower than fused), and why; once per program."""
    first = str(why).strip().splitlines()[0] if str(why).strip() else type(why).__name__
    warnings.warn(f"program {op.name}: its fused default schedule could not be applied "
                  f"({first[:300]}); it runs with the safe default, which can be much slower. "
                  "Results are correct. Tune it (pypto.tune) or report the message.",
                  PerformanceWarning, stacklevel=4)


# -- the trace tree ---------------------------------------------------------------------------------

class _Step:
    """A segment of a recorded path and what follows it: a break (children by observed value)
    or the end (the result's structure)."""

    def __init__(self, segment: Segment, sources: list, produced: list):
        self.segment = segment
        self.sources = sources        # per graph source: ("arg", i) | ("const", array) | ("val", key)
        self.produced = produced      # per graph output: the value key it defines
        self.brk: tuple | None = None  # (value key, why, where)
        self.observed = None           # the break's value key; None: the next step follows as is
        self.children: dict = {}
        self.result = None            # pytree of ("val", key) / ("arg", i) / ("const", array)
        #                               / ("np", NumPy array returned as is) / ("py", value)
        self.result_specs: list | None = None   # (shape, dtype) of each array of the result
        self.placement: tuple | None = None     # per array of the result: produced index or None
        #: On a tree's root: the arrays the function read besides its arguments (closed over,
        #: globals, attributes of an argument), each with the path it was found by.
        self.consts: list[_Const] = []
        #: On a tree's root: the Python numbers the function reads by name (see
        #: :func:`_find_scalars`), each as (path, key, value); the trace baked them in, so a
        #: replay checks they are unchanged (:func:`_scalars_moved`).
        self.scalars: list[tuple] = []
        #: On a tree's root: the function's ``__defaults__`` and ``__kwdefaults__`` the trace
        #: saw (a default it used is baked in; see :func:`_defaults_moved`), or None.
        self.defaults: tuple | None = None
        #: On a tree's root: the argument structure, when calls of this signature run op by op
        #: (it has a zero-size array: no kernel to make, the eager ops give the empty results).
        self.eager = None


class _Recorder:
    """Turns a live trace into :class:`_Step` s as it breaks and ends."""

    def __init__(self, fn_name: str, seg_name: str | None, arg_nodes: dict[int, int]):
        self.fn_name = fn_name
        self.seg_name = seg_name
        self.arg_nodes = arg_nodes    # input node id -> position among the flattened args
        self.steps: list[_Step] = []
        self.added = False
        self.values: dict[tuple, np.ndarray] = {}
        self.pending_break = None
        #: Cut before a pipeline that reads a checked value it computes (off under @fuse: one
        #: pipeline, whose kernels clamp such indices).
        self.check_computed = True

    def source_ref(self, ctx, node, k):
        if (node.id, k) in ctx.materialized:
            return ("val", (node.id, k))
        if node.id in self.arg_nodes:
            return ("arg", self.arg_nodes[node.id])
        if node.value is None:
            raise TraceError(f"{self.fn_name}: an input known only by its shape reached a "
                             f"kernel (at {node.where})")
        return ("const", node.value)

    def run_segment(self, ctx, wanted: list[T.Tensor], budget: int | None = None,
                    whole_joins: bool = True) -> list[np.ndarray]:
        """Runs the pipeline(s) computing ``wanted``: one, or a cut program of several when it
        has more than ``budget`` ops or its schedule more directives than one may hold.
        ``whole_joins``: a tree of concat nodes counts as the one Func it lowers to, and no
        cut falls inside it (False once a pipeline of whole joins was still too long)."""
        budget = FUNC_BUDGET if budget is None else budget
        pending = [t for t in wanted if (t.node.id, t.index) not in ctx.materialized]
        if pending and len(pending) < len(wanted):
            # Values computed already are not outputs again: each was a copy of a whole array
            # (the backward of a 32-step lstm_cell loop wanted 103 of them with one sum, and
            # their copies alone passed the directive limit of one schedule).
            self.run_segment(ctx, pending, budget, whole_joins)
            return [self._value_of(ctx, t) for t in wanted]
        graph = Graph(wanted, ctx.materialized)
        if graph.computed_checks and self.check_computed:
            # Indices the program computes and then reads (a gather of an argmax plus an
            # offset) are checked as a program's arguments are: a pipeline computes them
            # first, and the next checks them before it reads them (fused, the kernel clamps).
            first = {(n.id, j): T.Tensor(n, j) for n, j in graph.computed_checks}
            self.run_segment(ctx, list(first.values()), budget, whole_joins)
            return self.run_segment(ctx, wanted, budget, whole_joins)
        inner = _join_inner(graph) if whole_joins else {}
        ops = [n for n in graph.nodes if n.kind == "op" and n.id not in inner]
        if len(ops) > budget:
            # Halide's compile time grows faster than linearly with the Funcs of a pipeline:
            # cut. The first part ends at the op that reaches the budget; every value of it
            # that the rest reads is materialized (a reduction output where possible).
            last = ops[budget - 1]
            for n in ops[budget // 2:budget]:
                if not _pointwise(n):
                    last = n
            head = graph.nodes[:graph.nodes.index(last) + 1]
            ids = {n.id for n in head}
            # A join's inner concats go with its root: never cut inside a tree (the partial
            # join was materialized, and the tree computed again in the next pipeline).
            for n in reversed(head):
                if n.id in inner and inner[n.id] not in ids:
                    ids.discard(n.id)
            need: dict[tuple[int, int], T.Tensor] = {}
            # Readers after the cut, and the inner concats deferred to their join's pipeline:
            # the pieces those read are computed here. (Left out, an LSTM's stacked outputs of
            # the first steps stayed uncomputed in every later cut, which then held that many
            # ops fewer: pipelines of 11 ops, then a product alone, in turn.)
            later = graph.nodes[len(head):] + [n for n in head if n.id not in ids]
            for n in later:
                for t in n.inputs:
                    if t.node.id in ids:
                        need[(t.node.id, t.index)] = t
            for t in wanted:
                if t.node.id in ids:
                    need[(t.node.id, t.index)] = t
            self.run_segment(ctx, list(need.values()), budget, whole_joins)
            return self.run_segment(ctx, wanted, budget, whole_joins)
        if not graph.nodes:   # the values are inputs or computed already
            self.added = False
            return [self._value_of(ctx, t) for t in wanted]
        n_wanted = len(wanted)
        # A wanted value that is a reshape of another wanted value (or of an op's output) is
        # not an output of its own (a copy): NumPy reshapes the other's array (the forward of an
        # LSTM step wrote 5 of its 12 values for the backward twice, flat and as [B, H]).
        graph, written, reshaped = output_graph(wanted, ctx.materialized)
        self.added = True
        try:
            seg = Segment(graph, self.seg_name, reshaped, len(written))
        except ScheduleError as e:
            # Ops whose schedules are long (a backward's anchors) can pass the op budget and
            # still exceed the directives one schedule may hold: cut at half as many ops.
            if not isinstance(e, ScheduleTooLongError):
                raise
            if len(ops) >= 2:
                return self.run_segment(ctx, wanted, max(1, len(ops) // 2), whole_joins)
            if inner:
                # What is left is one op and whole joins (a join's block copies are directives
                # of their own: value_and_grad of a 32-step lstm_cell loop reached 530 so):
                # the joins' trees are cut too.
                n_ops = sum(n.kind == "op" for n in graph.nodes)
                return self.run_segment(ctx, wanted, max(1, n_ops // 2), False)
            raise
        refs = [self.source_ref(ctx, n, k) for n, k in graph.sources]
        arrays = [self._resolve(ctx, r, n, k) for r, (n, k) in zip(refs, graph.sources)]
        outs = seg.run(arrays)
        produced = [(t.node.id, t.index) for t in written] if reshaped else \
            [(n.id, k) for n, k in graph.outputs]
        for key, o in zip(produced, outs):
            ctx.materialized[key] = o
        self.steps.append(_Step(seg, refs, produced))
        return outs[:n_wanted]

    def _resolve(self, ctx, ref, node, k):
        if ref[0] == "val":
            return ctx.materialized[ref[1]]
        return node.value

    def _value_of(self, ctx, t: T.Tensor) -> np.ndarray:
        key = (t.node.id, t.index)
        if key in ctx.materialized:
            return ctx.materialized[key]
        return t.node.value

    def on_break(self, ctx, t: T.Tensor, why: str, where: str) -> np.ndarray:
        live = _live_tensors(ctx, exclude=(t.node.id, t.index))
        wanted = [t] + live
        self.run_segment(ctx, wanted)
        key = (t.node.id, t.index)
        computed = key in ctx.materialized
        value = ctx.materialized[key] if computed else self._value_of(ctx, t)
        if not self.added:   # nothing ran: a step that only branches
            self.steps.append(_Step(None, [], []))
        if not computed:     # the value is an input (or a constant) of the program
            self.steps[-1].input_ref = self.source_ref(ctx, t.node, t.index)
        self.steps[-1].brk = (key, why, where)
        self.steps[-1].observed = _break_key(value, why)
        return value


def _join_inner(graph: Graph) -> dict[int, int]:
    """The ``concat`` nodes of ``graph`` whose only reader is another ``concat`` (inner nodes of
    a join tree, which the lowering folds into the root's one Func): id -> the reader's id. They
    do not count toward the op budget: 32 pieces joined as a binary tree are 31 nodes but one
    Func, and counted, an LSTM backward's joins alone filled two pipelines."""
    from .graph import _is_join

    readers: dict[tuple, list] = {}
    for n in graph.nodes:
        for t in n.inputs:
            readers.setdefault((t.node.id, t.index), []).append(n)
    outs = {(n.id, k) for n, k in graph.outputs}
    inner = {}
    for n in graph.nodes:
        if not _is_join(n) or (n.id, 0) in outs:
            continue
        rs = readers.get((n.id, 0), [])
        if len(rs) == 1 and _is_join(rs[0]):
            inner[n.id] = rs[0].id

    def root(i):
        while i in inner:
            i = inner[i]
        return i

    # A tree of more pieces than a schedule can name update stages (one block copy each) is
    # not kept whole: its nodes count, and cuts may fall inside it.
    pieces: dict[int, int] = {}
    for n in graph.nodes:
        if _is_join(n) and (n.id in inner or any(inner.get(t.node.id) == n.id
                                                 for t in n.inputs)):
            pieces[root(n.id)] = pieces.get(root(n.id), 0) + sum(
                inner.get(t.node.id) != n.id for t in n.inputs)
    return {i: r for i, r in inner.items() if pieces.get(root(i), 0) <= JOIN_PIECES}


def _live_tensors(ctx, exclude) -> list[T.Tensor]:
    """Tensors still referenced by Python at a break: their values must outlive the segment.

    A Tensor the trace itself holds (as an input of a later node) but Python no longer does is
    not live: whatever needs it after the break is recomputed from what is live, so a segment
    materializes the values the program can still reach, not every intermediate. The count is
    conservative: any reference it cannot account for keeps the Tensor live.
    """
    import sys

    held: dict[int, int] = {}
    for node in ctx.nodes:
        for t in node.inputs:
            held[id(t)] = held.get(id(t), 0) + 1
    out = []
    for key, ref in list(ctx.refs.items()):
        if key in ctx.materialized or key == exclude:
            continue
        t = ref()
        if t is None or t.node.kind == "input":
            continue
        # References: ``t`` here, getrefcount's argument, and one per node input holding it.
        if sys.getrefcount(t) - 2 - held.get(id(t), 0) > 0:
            out.append(t)
        del t
    return out


def _break_key(value: np.ndarray, why: str):
    """The key of an observed break value: its bytes, so -0.0 and 0.0 take their own branches
    (``math.copysign``, ``1 / v``) and a NaN matches the NaN seen before (by ``item()`` it never
    did: every call retraced)."""
    a = np.asarray(value)
    if a.size == 1:
        if why in ("bool", "int"):
            # Python sees only bool(value) or int(value): keyed by that (``if t.sum():`` and
            # ``int(t.max())`` traced again for every new float value, up to the limit).
            try:
                return (why, "py", bool(a) if why == "bool" else int(a))
            except (ValueError, OverflowError, TypeError):
                pass          # int(nan): the call raises as it did when traced
        return (why, a.dtype.str, a.tobytes())
    return (why, a.dtype.str, a.shape, a.tobytes())


def _break_value(key) -> object:
    """The Python value a size-1 break key stands for (for :meth:`JitFunction.explain`)."""
    if len(key) == 3 and key[1] == "py":
        return key[2]
    return np.frombuffer(key[2], np.dtype(key[1]))[0].item() if len(key) == 3 else "<array>"


# -- arguments --------------------------------------------------------------------------------------

def _flatten(tree, leaves: list, path=(), objs: list | None = None):
    """A hashable structure of ``tree`` with arrays replaced by their position in ``leaves``,
    and instances of user classes (``self`` of a jitted method, a layer passed in) by their
    class and state (:func:`_state_key`), the object itself appended to ``objs``."""
    if isinstance(tree, np.ndarray) or _is_array_like(tree):
        if type(tree) is not np.ndarray or not tree.dtype.isnative:
            # The eager ops' door: bytes swapped to native order (the kernels read raw bytes;
            # '>f8' came out as garbage), a torch tensor that requires grad refused by name.
            tree = as_array(tree, "jit", _arg_name(path))
        leaves.append(tree)
        return ("A", len(leaves) - 1)
    if isinstance(tree, (list, tuple)):
        kind = "L" if isinstance(tree, list) else "T"
        return (kind, tuple(_flatten(x, leaves, path + (i,), objs) for i, x in enumerate(tree)))
    if isinstance(tree, dict):
        # In the dict's own order: sorted, the function saw {'b': x, 'a': y} as {'a': y,
        # 'b': x} (concat(list(d.values())) joined them the other way round), and keys of
        # mixed types ({1: x, 'a': y}) raised TypeError from sorted().
        return ("D", tuple((k, _flatten(v, leaves, path + (k,), objs)) for k, v in tree.items()))
    if type(tree) is float:
        # By bits: -0.0 == 0.0 shared a trace (x * -0.0 replayed x * 0.0), and NaN != NaN
        # made every call with a NaN a new signature (a recompile storm). (NumPy scalars are
        # arrays above.)
        return ("F", tree.hex())
    if type(tree) is complex:
        return ("C", tree.real.hex(), tree.imag.hex())
    if isinstance(tree, (bool, int, float, complex, str, type(None), np.generic)):
        return ("P", type(tree).__name__, tree)
    if objs is not None and _by_state(tree):
        # Not by identity: every new instance of a layer traced again (past recompile_limit:
        # eagerly) and the cache kept each one alive. Its arrays are read again on each call
        # (the trace's constants found through it), its other state is part of the key.
        objs.append(tree)
        return ("I", type(tree), _state_key(tree), len(objs) - 1)
    try:
        hash(tree)
    except TypeError:
        raise TraceError(f"argument {_arg_name(path)} of type {type(tree).__name__} cannot be "
                         "part of a jitted function's signature (it is not hashable): pass "
                         "arrays, Python scalars, strings, None, or lists/tuples/dicts of them "
                         "(a tuple for a set or a slice)") from None
    return ("O", type(tree).__name__, tree)


def _arg_name(path: tuple) -> str:
    """``args[1][0]`` / ``keyword 'k'['a']`` for a path into ``(args, kwargs)`` (it read
    ``(0, 1, 0)``)."""
    if len(path) < 2:
        return "the arguments"
    head = f"args[{path[1]}]" if path[0] == 0 else f"keyword {path[1]!r}"
    return head + "".join(f"[{p!r}]" for p in path[2:])


def _is_array_like(x) -> bool:
    return hasattr(x, "__array_interface__") or type(x).__module__.partition(".")[0] == "torch"


def _by_state(obj) -> bool:
    """Whether ``obj`` is an instance keyed by its class and state: a user class's object with
    its own attributes and identity equality (a class defining ``__eq__``/``__hash__`` keeps
    them; functions, modules, classes and jitted functions are keyed as themselves)."""
    t = type(obj)
    got = _by_state_types.get(t)
    if got is None:
        if len(_by_state_types) > 1024:
            _by_state_types.clear()
        got = _by_state_types[t] = (t.__hash__ is object.__hash__ and t.__eq__ is object.__eq__
                                    and _plain_object(obj) and not issubclass(t, JitFunction))
    return got


_by_state_types: dict[type, bool] = {}      # per class: the checks above read only the class


#: How deep and wide :func:`_state_key` looks into an instance (``self.blocks[0].norm.eps``).
_STATE_DEPTH = 4
_STATE_WIDTH = 256


class _Unkeyable(Exception):
    """An instance's state that :func:`_state_key` cannot make a key of."""


def _state_key(obj):
    """A hashable snapshot of what a trace can read from an instance: its attributes, arrays by
    shape, dtype and strides (a replay reads them again where the trace found them), numbers
    by type and bits, strings, None and containers by value, nested instances the same way,
    other objects (functions, classes) as themselves. None when it is too deep, too wide or
    holds something unhashable: the instance is then keyed by identity (held weakly)."""
    budget = [_STATE_WIDTH]
    seen: set = set()

    def walk(v, depth):
        budget[0] -= 1
        if budget[0] < 0:
            raise _Unkeyable
        t = type(v)
        if t is np.ndarray:
            return ("a", v.shape, v.dtype, v.strides)
        if t is float:
            return (t, v.hex())
        if t in _PLAIN_VALUES:
            return (t, v)
        if isinstance(v, _NUMBERS):
            return _number_key(v)
        if depth <= 0 or id(v) in seen:
            if id(v) in seen:
                return ("cycle",)
            raise _Unkeyable
        if t in (list, tuple):
            seen.add(id(v))
            return (t, tuple(walk(x, depth - 1) for x in v))
        if t is dict:
            seen.add(id(v))
            return (t, tuple((k, walk(x, depth - 1)) for k, x in v.items()))
        if _by_state(v):
            seen.add(id(v))
            return ("i", t, tuple((k, walk(x, depth - 1)) for k, x in vars(v).items()))
        if isinstance(v, types.MethodType):      # self.act = self.relu: not the instance itself
            return ("m", v.__func__, walk(v.__self__, depth - 1))
        try:
            hash(v)
        except TypeError:
            raise _Unkeyable from None
        return ("o", v)

    seen.add(id(obj))
    out = []
    try:
        for k, v in vars(obj).items():      # the common attributes first, without a call
            t = type(v)
            out.append((k, ("a", v.shape, v.dtype, v.strides) if t is np.ndarray else
                        (t, v.hex()) if t is float else (t, v) if t in _PLAIN_VALUES else
                        walk(v, _STATE_DEPTH)))
    except _Unkeyable:
        return None
    return tuple(out)


_PLAIN_VALUES = frozenset((str, type(None), bytes, bool, int))


def _unflatten(struct, leaves, objs=()):
    kind = struct[0]
    if kind in ("A", "X"):
        return leaves[struct[1]]
    if kind == "I":
        return objs[struct[3]]
    if kind == "L":
        return [_unflatten(s, leaves, objs) for s in struct[1]]
    if kind == "T":
        return tuple(_unflatten(s, leaves, objs) for s in struct[1])
    if kind == "D":
        return {k: _unflatten(s, leaves, objs) for k, s in struct[1]}
    if kind == "F":
        return float.fromhex(struct[1])
    if kind == "C":
        return complex(float.fromhex(struct[1]), float.fromhex(struct[2]))
    return struct[2] if kind in ("P", "O") else struct[1]


_target_names: dict[int, tuple] = {}


def _target_name(target) -> str:
    """``str(target)``, remembered per Target object (the hot path asks on every call)."""
    got = _target_names.get(id(target))
    if got is None or got[0] is not target:
        if len(_target_names) > 64:     # targets made per `with pypto.target(...)`: stay small
            _target_names.clear()
        got = _target_names[id(target)] = (target, str(target))
    return got[1]


#: Bumped when something every trace baked in changes: a gradient rule defined or cleared
#: (``def_gradient``) after a trace that differentiated through the op. Traces keyed with an
#: older generation are stale: the next call traces again.
_generation = 0


def invalidate_traces() -> None:
    """Makes every cached trace stale (see ``_generation``)."""
    global _generation
    _generation += 1


def _signature(struct, leaves, target: str):
    return (struct, tuple((a.shape, a.dtype.str) for a in leaves), (target, _generation))


def _unkeyed(struct) -> bool:
    """Whether ``struct`` holds an instance whose state could not be made a key."""
    kind = struct[0]
    if kind == "I":
        return struct[2] is None
    if kind in ("L", "T"):
        return any(_unkeyed(s) for s in struct[1])
    if kind == "D":
        return any(_unkeyed(s) for _, s in struct[1])
    return False


def _pinned_key(key: tuple, objs: list) -> tuple:
    """``key`` for these very instances: by identity (the entry is dropped when one dies, see
    :meth:`JitFunction._forget_with`); an object without weak references is held."""
    ids = []
    for o in objs:
        try:
            weakref.ref(o)
            ids.append(id(o))
        except TypeError:
            ids.append(o)
    return (*key, tuple(ids))


def _all_found(steps: list, consts: list) -> bool:
    """Whether every array a recorded path reads besides its arguments was found by name, or
    holds one value (the ops make a Python number an array of one element: the numbers of an
    instance are in its key)."""
    refs = [r for st in steps for r in (*st.sources, *(st.result[1] if st.result else ()))]
    wanted = {id(r[1]) for r in refs if r[0] in ("const", "np") and isinstance(r[1], np.ndarray)
              and r[1].size > 1}
    return wanted <= {id(c.array) for c in consts}


def _explain_miss(old_keys, new_key) -> str:
    """Which guard failed: the closest earlier signature and what differs from it."""
    if not old_keys:
        return "first call"
    struct, arrays, target = new_key[:3]
    best = None
    for k in old_keys:
        diffs = []
        if k[2][0] != target[0]:
            diffs.append(f"target {k[2][0]} -> {target[0]}")
        elif k[2][1] != target[1]:
            diffs.append("a gradient rule was defined or cleared since the trace "
                         "(def_gradient / clear_gradient)")
        if k[0] != struct:
            diffs.append(_struct_diff(k[0], struct) or
                         "argument structure or a static (non-array) argument changed: "
                         f"{_short(k[0])} -> {_short(struct)}")
        if len(k[1]) == len(arrays):
            for i, (a, b) in enumerate(zip(k[1], arrays)):
                if a[0] != b[0]:
                    diffs.append(f"array #{i} shape {a[0]} -> {b[0]}")
                if a[1] != b[1]:
                    diffs.append(f"array #{i} dtype {np.dtype(a[1]).name} -> {np.dtype(b[1]).name}")
        else:
            diffs.append(f"{len(k[1])} -> {len(arrays)} arrays")
        if best is None or len(diffs) < len(best):
            best = diffs
    return "; ".join(best or ["an unknown guard"])


def _struct_diff(a, b, where: str = "the arguments") -> str | None:
    """The first place two argument structures differ, in words (an instance's attribute by
    name: ``argument #1 .scale changed from 2.0 to 3.0``); None when not found."""
    if a == b:
        return None
    if a[0] == b[0] and a[0] in ("L", "T") and len(a[1]) == len(b[1]):
        for i, (x, y) in enumerate(zip(a[1], b[1])):
            sub = (("args", "kwargs")[i] if where == "the arguments" else f"{where}[{i}]")
            if where == "args":
                sub = f"argument #{i}"
            got = _struct_diff(x, y, sub)
            if got:
                return got
    if a[0] == b[0] == "D":
        da, db = dict(a[1]), dict(b[1])
        for k in da.keys() & db.keys():
            got = _struct_diff(da[k], db[k], f"keyword {k!r}" if where == "kwargs"
                               else f"{where}[{k!r}]")
            if got:
                return got
    if a[0] == b[0] == "I" and a[1] is b[1] and a[2] is not None and b[2] is not None:
        sa, sb = dict(a[2]), dict(b[2])
        for k in sa.keys() | sb.keys():
            if sa.get(k) != sb.get(k):
                return (f"{where} ({a[1].__name__}) .{k} changed from "
                        f"{_state_text(sa.get(k))} to {_state_text(sb.get(k))}")
    return None


def _state_text(v) -> str:
    """A value of :func:`_state_key` as the user wrote it (numbers and strings), else short."""
    if v is None:
        return "(absent)"
    if v[0] is float:
        return repr(float.fromhex(v[1]))
    if v[0] in (int, bool, str, type(None)) and len(v) == 2:
        return repr(v[1])
    if v[0] == "a":
        return f"an array {np.dtype(v[2]).name}{list(v[1])}"
    return _short(v, 60)


def _short(x, limit=120) -> str:
    s = repr(x)
    return s if len(s) <= limit else s[:limit] + "..."


# -- the decorator ----------------------------------------------------------------------------------

class JitFunction:
    """A traced-and-replayed function (see the module docstring). Made by :func:`jit`."""

    def __init__(self, fn: Callable, *, fullgraph: bool = False,
                 recompile_limit: int = RECOMPILE_LIMIT, name: str | None = None,
                 fuse: bool = False, empty_op_by_op: bool = True):
        # Above @staticmethod / @classmethod in a class body: the function inside, bound as
        # they bind it (the instance was passed to a static method as its first argument, and a
        # classmethod was refused as "not a function").
        self._binds = "instance"
        if isinstance(fn, (staticmethod, classmethod)):
            self._binds = "class" if isinstance(fn, classmethod) else "nothing"
            fn = fn.__func__
        _check_options("pypto.fuse" if fuse else "pypto.jit", fn, fullgraph, recompile_limit)
        functools.update_wrapper(self, fn)
        self.fn = fn
        self.fullgraph = fullgraph or fuse
        self.fuse = fuse
        self.recompile_limit = recompile_limit
        self.name = name or getattr(fn, "__name__", "fn")
        self.op_name = _op_name(self.name)
        # The name of its pipelines (database key): a fused function's own; a plain jit's graphs
        # are named by their structural hash.
        self.seg_name = self.op_name if fuse else None
        self.stats = Stats()
        self._cache: dict[tuple, _Step] = {}
        self._fast: dict[tuple, _Step] = {}      # arrays-only calls: (shapes/dtypes, target)
        # The last _MISSES_KEPT misses for explain() (a varying static argument past the limit
        # added one per call, and one lock per signature below: without bound), and how many.
        self._misses: collections.deque[str] = collections.deque(maxlen=_MISSES_KEPT)
        self._n_misses = 0
        self._lock = threading.RLock()
        self._tracing: dict = {}      # signature -> the lock its trace holds
        self._limit_hit = False
        #: Keys (of instances by state) whose trace read an array of the instance it could not
        #: read again: those calls are keyed by the instances' identity (:func:`_pinned_key`).
        self._pinned: set = set()
        # ``out=`` is the program's (its arrays written in place) unless the function has a
        # parameter of that name itself.
        #: A call with a zero-size value runs op by op (False: refused, naming the array; a
        #: gradient program exists only as a trace).
        self._empty_op_by_op = empty_op_by_op
        self._owns_out = _owns_out(fn)

    def __get__(self, obj, objtype=None):
        if self._binds == "instance":
            return self if obj is None else _BoundJit(self, obj)
        if self._binds == "class":
            return _BoundJit(self, objtype if objtype is not None else type(obj))
        return self

    # The function's own defaults, read and set as on a plain function: set on the wrapper,
    # ``f.__defaults__ = (5.0,)`` reached nothing and calls kept the old default.
    @property
    def __defaults__(self):
        return self.fn.__defaults__

    @__defaults__.setter
    def __defaults__(self, value):
        self.fn.__defaults__ = value

    @property
    def __kwdefaults__(self):
        return self.fn.__kwdefaults__

    @__kwdefaults__.setter
    def __kwdefaults__(self, value):
        self.fn.__kwdefaults__ = value

    def __call__(self, *args, **kwargs):
        from ..compiler import targets

        into = None
        if kwargs and "out" in kwargs and self._owns_out:
            kwargs = dict(kwargs)
            into = kwargs.pop("out")
        if T.current() is not None:   # called inside another trace: inline into it
            if into is not None:
                raise ParamError(f"{self.name}: out= is for calls on arrays; inside a traced "
                                 f"function the result is a value of that program")
            return self.fn(*args, **kwargs)
        self.stats.calls += 1
        GLOBAL.calls += 1
        tname = _target_name(targets.current())
        fast = None
        if not kwargs and all(type(a) is np.ndarray and a.dtype.isnative for a in args):
            # The common call, arrays only: its key needs no walk over the arguments.
            fast = (tuple((a.shape, a.dtype.str) for a in args), tname, _generation)
            root = self._fast.get(fast)
            if root is not None:
                out = self._counted_replay(root, args, into, args)
                if not isinstance(out, _Miss) and out is not _MISS:
                    return out
        leaves: list[np.ndarray] = []
        objs: list = []
        struct = _flatten((args, kwargs), leaves, (), objs)
        key = _signature(struct, leaves, tname)
        if objs and (key in self._pinned or _unkeyed(struct)):
            key = _pinned_key(key, objs)
        with self._lock:
            root = self._cache.get(key)
            if root is not None and fast is not None:
                self._fast[fast] = root
        if root is not None:
            out = self._counted_replay(root, leaves, into, args, objs)
            if isinstance(out, _Miss):
                # An array the function reads by name is now another shape or dtype: trace
                # again and keep only the new tree for this signature.
                reason = out.reason
                with self._lock:
                    if self._cache.get(key) is root:
                        del self._cache[key]
                    self._fast = {k: v for k, v in self._fast.items() if v is not root}
            elif out is not _MISS:
                return out
            else:
                reason = "a break value not seen before"
        else:
            reason = _explain_miss(list(self._cache), key)
        # One trace of a signature at a time: threads making its first call at once wait for
        # the first one's trace and replay it (each trace counts toward recompile_limit).
        with self._lock:
            gate = self._tracing.setdefault(key, threading.RLock())
        try:
            with gate:
                with self._lock:
                    now = self._cache.get(key)
                if now is not None and now is not root:
                    out = self._counted_replay(now, leaves, into, args, objs)
                    if not isinstance(out, _Miss) and out is not _MISS:
                        return out
                return self._trace(key, struct, leaves, reason, into, objs)
        finally:
            with self._lock:        # threads waiting hold it already; later ones find the cache
                if self._tracing.get(key) is gate:
                    del self._tracing[key]

    def _forget_with(self, key, objs) -> None:
        """Drops the trace of ``key`` (keyed by the identity of ``objs``) when one of them dies:
        the cache must not keep them alive, nor hand their trace to a later object that reuses
        the address."""
        me = weakref.ref(self)

        def forget(_ref=None):
            jf = me()
            if jf is not None:
                with jf._lock:
                    jf._cache.pop(key, None)

        for o in objs:
            try:
                weakref.finalize(o, forget)
            except TypeError:       # no weak references (__slots__): kept, as a key holds it
                pass

    def _counted_replay(self, root: _Step, leaves, into=None, args=(), objs=()):
        if root.eager is not None:
            return self._eager(root.eager, leaves, into, objs)
        d = root.defaults
        if d is not None and (self.fn.__defaults__ is not d[0]
                              or self.fn.__kwdefaults__ is not d[1]):
            moved = _defaults_moved(root, self.fn)
            if moved is not None:
                return moved
        if root.scalars:
            moved = _scalars_moved(root.scalars, self.fn, args)
            if moved is not None:
                return moved
        subs = _rebound(root.consts, self.fn, args) if root.consts else None
        if isinstance(subs, _Miss):
            return subs
        out = self._replay(root, leaves, into, subs)
        if out is not _MISS:
            self.stats.replays += 1
            GLOBAL.replays += 1
        return out

    # -- tracing ------------------------------------------------------------------------------
    def _trace(self, key, struct, leaves, reason: str, into=None, objs=()):
        if any(a.size == 0 for a in leaves):
            if not self._empty_op_by_op:
                i, shape = next((i, a.shape) for i, a in enumerate(leaves) if a.size == 0)
                raise ShapeError(f"{self.name}: array #{i} of this call has shape {shape}; this "
                                 f"program exists only as a trace, made for its shapes, and they "
                                 f"take no zero extents: call it with non-empty arrays")
            return self._run_empty(key, struct, leaves, into, objs, "a zero-size array")
        if self.stats.traces >= self.recompile_limit:
            msg = (f"{self.name}: recompile limit ({self.recompile_limit}) reached; the last miss: "
                   f"{reason}. Further new signatures run eagerly (op by op). Raise it with "
                   f"@pypto.jit(recompile_limit=N), or make the varying argument an array")
            if not self._limit_hit:
                warnings.warn(msg, RuntimeWarning, stacklevel=3)
                self._limit_hit = True
            self._miss(f"not traced (limit): {reason}")
            return self._eager(struct, leaves, into, objs)
        try:
            out = self._trace_once(key, struct, leaves, into, objs)
        except ZeroSizeError:
            # A zero-size value made inside (x[:0]): a kernel cannot be made for it.
            if not self._empty_op_by_op:
                self._miss(f"{reason} (the trace raised ZeroSizeError; not counted toward "
                           f"recompile_limit)")
                raise
            return self._run_empty(key, struct, leaves, into, objs, "a zero-size value inside")
        except BaseException as e:
            # A trace that raised left nothing in the cache: it does not count toward
            # recompile_limit (three calls with a bad argument used up a limit of 3, and every
            # later call of the function, good ones too, ran eagerly).
            self._miss(f"{reason} (the trace raised {type(e).__name__}; not counted toward "
                       f"recompile_limit)")
            raise
        self._miss(reason)
        self.stats.traces += 1
        GLOBAL.traces += 1
        return out

    def _run_empty(self, key, struct, leaves, into, objs, what: str):
        """Runs the call op by op, and every later call of its signature (the eager ops take
        zero-size arrays and give empty results, and a reduction's identity, as NumPy does);
        it does not count toward recompile_limit."""
        root = _Step(None, [], [])
        root.eager = struct
        with self._lock:
            self._cache[key] = root
        self._miss(f"{what}: this signature runs op by op")
        return self._eager(struct, leaves, into, objs)

    def _miss(self, text: str) -> None:
        with self._lock:
            self._misses.append(text)
            self._n_misses += 1

    def _eager(self, struct, leaves, into=None, objs=()):
        """The function run op by op on the arrays (no trace, nothing cached), its results
        written into ``out=`` when given."""
        args, kwargs = _unflatten(struct, leaves, objs)
        result = self.fn(*args, **kwargs)
        if into is None:
            return result
        res_struct, res_leaves = _result_structure(result)
        arrays = [j for j, x in enumerate(res_leaves) if isinstance(x, np.ndarray)]
        outs = self._checked_out(into, [(x.shape, x.dtype) for x in
                                        (res_leaves[j] for j in arrays)])
        for j, o in zip(arrays, outs):
            if o is not None:
                np.copyto(o, res_leaves[j])
                res_leaves[j] = o
        return _rebuild(res_struct, res_leaves)

    def _trace_once(self, key, struct, leaves, into=None, objs=()):
        ctx = T.TraceContext(fullgraph=self.fullgraph, name=self.name)
        token = T.activate(ctx)
        arg_nodes: dict[int, int] = {}
        rec = _Recorder(self.name, self.seg_name, arg_nodes)
        rec.check_computed = not self.fuse
        ctx.on_break = rec.on_break
        try:
            tensors = []
            for i, a in enumerate(leaves):
                t = ctx.input_for(a, name=f"arg{i}", where=f"argument #{i} of {self.name}",
                                  argument=True)
                arg_nodes[t.node.id] = i
                tensors.append(t)
            args, kwargs = _unflatten(struct, tensors, objs)
            state = _instance_state((args, kwargs))
            try:
                result = self.fn(*args, **kwargs)
            except GraphBreakError as e:
                if self.fuse:
                    from ..errors import FusionError

                    raise FusionError(f"@pypto.fuse {self.name}: cannot give one pipeline: "
                                      f"{e}") from None
                raise
            except PyptoError as e:
                raise _located(e) from None
            _refuse_stored(self.name, state)
            res_struct, res_leaves = _result_structure(result)
            _refuse_lazy(self.name, res_leaves)
            tensors_out = [x for x in res_leaves if isinstance(x, T.Tensor)]
            computed = rec.run_segment(ctx, tensors_out) if tensors_out else []
            # A value returned twice is one array, as on replays (and as Python returns it).
            first: dict = {}
            computed = [first.setdefault((t.node.id, t.index), a)
                        for t, a in zip(tensors_out, computed)]
            n_segments = len([s for s in rec.steps if s.segment is not None])
            if self.fuse and n_segments > 1:
                from ..errors import FusionError

                n_ops = sum(n.kind == "op" for n in ctx.nodes)
                why = (f"it has {n_ops} ops and one pipeline holds at most {FUNC_BUDGET} (or a "
                       f"schedule's directives)" if n_ops > FUNC_BUDGET else
                       "its schedule would pass the directives one pipeline may hold")
                raise FusionError(f"@pypto.fuse {self.name}: the function ran as {n_segments} "
                                  f"pipelines, not one: {why}. Use @pypto.jit, which cuts it "
                                  f"into pipelines, or fuse smaller functions")
        finally:
            T.deactivate(token)
        # Link the recorded steps into the tree under this signature.
        end = rec.steps[-1] if rec.steps and rec.steps[-1].brk is None else None
        if end is None:
            end = _Step(None, [], [])
            rec.steps.append(end)
        end.result = (res_struct, [self._result_ref(ctx, x, arg_nodes) for x in res_leaves])
        # out= has one entry per array of the result: traced values and NumPy arrays alike.
        end.result_specs = [(tuple(x.shape), np.dtype(x.dtype)) for x in res_leaves
                            if isinstance(x, (T.Tensor, np.ndarray))]
        pos = _unflatten(struct, leaves, objs)[0]
        rec.steps[0].consts = _find_consts(rec.steps, self.fn, pos)
        rec.steps[0].scalars = _find_scalars(self.fn, pos)
        if isinstance(self.fn, (types.FunctionType, types.MethodType)):
            rec.steps[0].defaults = (self.fn.__defaults__, self.fn.__kwdefaults__)
        if objs and len(key) == 3 and not _all_found(rec.steps, rec.steps[0].consts):
            # It read an array it did not find by name (np.exp(self.w), made outside the
            # traced ops): the trace holds that instance's value, so it is that instance's.
            with self._lock:
                self._pinned.add(key)
            key = _pinned_key(key, objs)
        if len(key) == 4:
            self._forget_with(key, objs)
        self._link(key, rec.steps)
        outs = self._checked_out(into, end.result_specs) if into is not None else None
        vals = iter(computed)
        out_leaves = []
        j = 0
        for x in res_leaves:
            if isinstance(x, (T.Tensor, np.ndarray)):
                v = next(vals) if isinstance(x, T.Tensor) else x
                if outs is not None and outs[j] is not None:
                    np.copyto(outs[j], v)     # the first call computes, then copies in
                    v = outs[j]
                j += 1
                x = v
            out_leaves.append(x)
        return _rebuild(res_struct, out_leaves)

    def _checked_out(self, into, specs: list) -> list:
        """A caller's ``out=``, one entry per array of the result (None: a fresh one), checked
        against the result's shapes and dtypes before anything is written."""
        n = len(specs)
        outs = [into] if isinstance(into, np.ndarray) else into
        if not isinstance(outs, (tuple, list)):
            raise ParamError(f"{self.name}: out= must be an array or a tuple of arrays (one per "
                             f"array the function returns; None for one to allocate), got "
                             f"{type(into).__name__}")
        if len(outs) != n:
            raise ParamError(f"{self.name}: out= has {len(outs)} entr{'y' if len(outs) == 1 else 'ies'}; "
                             f"the function returns {n} array{'s' if n != 1 else ''} (None for "
                             f"one to allocate)")
        for j, (o, (shape, dt)) in enumerate(zip(outs, specs)):
            if o is None:
                continue
            what = "out" if n == 1 else f"out[{j}]"
            if type(o) is not np.ndarray:
                raise ParamError(f"{self.name}: {what} must be a NumPy array or None, got "
                                 f"{type(o).__name__}")
            if not o.flags.writeable:
                raise ParamError(f"{self.name}: {what} is read-only; pass a writeable array")
            if not o.flags.c_contiguous:
                raise ParamError(f"{self.name}: {what} must be C-contiguous (a dense array such "
                                 f"as np.empty(shape, dtype)), got strides {o.strides}")
            if o.dtype != dt:
                raise DtypeError(f"{self.name}: {what} has dtype {o.dtype}; expected {dt} (the "
                                 f"dtype of the result)")
            if o.shape != tuple(shape):
                raise ShapeError(f"{self.name}: {what} has shape {o.shape}; expected "
                                 f"{tuple(shape)} (the shape of the result)")
        if n > 1:
            # Two results written into one memory: the last written was returned as both.
            given = [(j, o) for j, o in enumerate(outs) if o is not None]
            for k, (j, o) in enumerate(given):
                for i, p in given[k + 1:]:
                    if np.may_share_memory(o, p):
                        raise ParamError(f"{self.name}: out[{j}] and out[{i}] share memory; "
                                         f"each result needs an array of its own")
        return list(outs)

    def _result_ref(self, ctx, x, arg_nodes):
        if isinstance(x, T.Tensor):
            key = (x.node.id, x.index)
            if key in ctx.materialized:
                return ("val", key)
            if x.node.id in arg_nodes:
                return ("arg", arg_nodes[x.node.id])
            return ("const", x.node.value)
        if isinstance(x, np.ndarray):
            return ("np", x)        # a NumPy array the function returns as it is
        return ("py", x)

    def _link(self, key, steps: list[_Step]) -> None:
        """Adds a recorded path (steps joined by observed break values) to the tree of ``key``."""
        for s_, nxt in zip(steps, steps[1:]):
            s_.children[s_.observed] = nxt
        with self._lock:
            cur = self._cache.get(key)
            if cur is None:
                self._cache[key] = steps[0]
                return
            known = {id(c.array) for c in cur.consts}
            cur.consts += [c for c in steps[0].consts if id(c.array) not in known]
            cur.scalars = steps[0].scalars
            for i, s_ in enumerate(steps[:-1]):   # the tree holds this path up to a new value
                if cur.brk is None and cur.result is not None:
                    return
                nxt = cur.children.get(s_.observed)
                if nxt is None:
                    cur.children[s_.observed] = steps[i + 1]
                    return
                cur = nxt

    # -- replay -------------------------------------------------------------------------------
    def _replay(self, step: _Step, leaves: list[np.ndarray], into=None, subs=None):
        """Runs a recorded tree on ``leaves``; ``subs`` maps id(array) of a constant recorded at
        trace time to the array the function would read now (see :func:`_rebound`)."""
        values: dict[tuple, np.ndarray] = {}

        def const(a):
            return subs.get(id(a), a) if subs else a

        outs = placed = None
        while True:
            final = step.brk is None and step.result is not None
            if final and into is not None:
                outs = self._checked_out(into, step.result_specs)
                placed = self._placed(step, outs, leaves)
            if step.segment is not None:
                arrays = []
                for ref in step.sources:
                    kind = ref[0]
                    arrays.append(leaves[ref[1]] if kind == "arg" else
                                  const(ref[1]) if kind == "const" else values[ref[1]])
                ran = step.segment.run(arrays, placed)
                for key, o in zip(step.produced, ran):
                    values[key] = o
            if step.brk is None and step.result is None:     # a cut: the next part follows
                step = step.children[None]
                continue
            if step.brk is None:
                struct, refs = step.result
                out = []
                j = 0
                for ref in refs:
                    kind = ref[0]
                    v = (leaves[ref[1]] if kind == "arg" else
                         values[ref[1]] if kind == "val" else
                         const(ref[1]) if kind in ("const", "np") else ref[1])
                    if kind != "py":
                        if outs is not None and outs[j] is not None:
                            if not placed or step.placement[j] not in placed:
                                np.copyto(outs[j], v)
                            v = outs[j]
                        j += 1
                    out.append(v)
                return _rebuild(struct, out)
            key, why, _where = step.brk
            value = values.get(key)
            if value is None:
                ref = getattr(step, "input_ref", None)
                value = leaves[ref[1]] if ref and ref[0] == "arg" else \
                    (const(ref[1]) if ref[0] == "const" else ref[1]) if ref else None
            nxt = step.children.get(_break_key(value, why))
            if nxt is None:
                return _MISS
            step = nxt

    @staticmethod
    def _placed(step: _Step, outs: list, leaves) -> dict | None:
        """{produced value: caller array} for the arrays of ``out=`` that the last pipeline can
        write in place: those the pipeline computes as its own outputs, once each, when no
        caller array overlaps an argument (which the pipeline may still be reading)."""
        from ..runtime import overlaps

        if step.placement is None:
            placement, used = [], set()
            for ref in step.result[1]:
                if ref[0] == "py":
                    continue
                p = None        # an argument, a constant or a NumPy result is copied in
                if (ref[0] == "val" and step.segment is not None and ref[1] in step.produced
                        and ref[1] not in used):
                    p = step.produced.index(ref[1])
                    if step.segment.graph_index(p) is None:
                        p = None
                    else:
                        used.add(ref[1])
                placement.append(p)
            step.placement = tuple(placement)
        into = {p: o for p, o in zip(step.placement, outs) if p is not None and o is not None}
        if into and overlaps(list(into.values()), leaves):
            return None
        return into

    # -- introspection ------------------------------------------------------------------------
    def explain(self, *args, **kwargs) -> str:
        """The segments, pipelines and Funcs this call runs, and every cache miss so far with
        the guard that failed."""
        from ..compiler import targets

        leaves: list[np.ndarray] = []
        objs: list = []
        struct = _flatten((args, kwargs), leaves, (), objs)
        key = _signature(struct, leaves, str(targets.current()))
        if objs and (key in self._pinned or _unkeyed(struct)):
            key = _pinned_key(key, objs)
        lines = [f"jit function {self.name}: {self.stats.traces} trace(s), "
                 f"{self.stats.replays} replay(s), {len(self._cache)} signature(s)"]
        root = self._cache.get(key)
        if root is None:
            lines.append(f"this call would trace: {_explain_miss(list(self._cache), key)}")
        else:
            lines.append("this call replays:")
            seen = set()
            stack = [(root, 0)]
            while stack:
                step, depth = stack.pop()
                if id(step) in seen:
                    continue
                seen.add(id(step))
                pad = "  " * (depth + 1)
                if step.segment is not None:
                    seg = step.segment
                    funcs = sorted(seg.op.plan.funcs) if seg.op.plan else []
                    lines.append(f"{pad}segment: pipeline {seg.op.name} ({len(seg.graph.nodes)} "
                                 f"nodes: {', '.join(n.describe() for n in seg.graph.nodes[:12])}"
                                 f"{' ...' if len(seg.graph.nodes) > 12 else ''}); schedule "
                                 f"{seg.kernel.source}; Funcs: {', '.join(funcs)}")
                if step.brk is not None:
                    lines.append(f"{pad}break: {step.brk[1]} at {step.brk[2]}; seen values: "
                                 f"{[_break_value(k) for k in step.children]}")
                for child in step.children.values():
                    stack.append((child, depth + (step.brk is not None)))
        lines.append("cache misses:")
        first = self._n_misses - len(self._misses)
        if first:
            lines.append(f"  ({first} earlier not kept)")
        lines += [f"  {first + i + 1}. {m}" for i, m in enumerate(self._misses)] or ["  none"]
        return "\n".join(lines)


class _BoundJit:
    """A jitted function defined in a class body, read from an instance: calls pass the
    instance first, as a bound method does. (A functools.partial had no ``explain``,
    ``stats`` or ``__wrapped__``: ``layer.forward.explain(x)`` was an AttributeError.)"""

    __slots__ = ("jit", "obj")

    def __init__(self, jit: JitFunction, obj):
        self.jit, self.obj = jit, obj

    def __call__(self, *args, **kwargs):
        return self.jit(self.obj, *args, **kwargs)

    def explain(self, *args, **kwargs) -> str:
        """:meth:`JitFunction.explain` of this call (the instance passed first)."""
        return self.jit.explain(self.obj, *args, **kwargs)

    @property
    def stats(self) -> Stats:
        return self.jit.stats       # one per function, shared by its instances

    @property
    def __wrapped__(self):
        """The plain method, bound to the instance: it runs op by op, untraced."""
        import types

        return types.MethodType(self.jit.fn, self.obj)

    @property
    def __name__(self) -> str:
        return self.jit.name

    @property
    def __self__(self):
        return self.obj

    @property
    def __func__(self):
        return self.jit.fn

    def __repr__(self) -> str:
        return f"<bound jitted method {self.jit.name} of {self.obj!r}>"


_MISS = object()


class _Miss:
    """A replay refused before it ran, with the reason (an array read by name changed)."""

    def __init__(self, reason: str):
        self.reason = reason


@dataclasses.dataclass
class _Const:
    """An array a traced function read besides its arguments, and where it was found: ``path``
    starts at the function (``("fn",)``) or a positional argument (``("arg", i)``) and steps
    through closure cells, globals, attributes, items (see :func:`_follow`)."""

    array: np.ndarray
    path: tuple
    shape: tuple          # of the array at ``path`` when traced (the constant, or its base)
    dtype: np.dtype
    strides: tuple
    #: When the constant is a view the function made of the array at ``path`` (``self.w.T``):
    #: its byte offset into that array, shape and strides, to make the same view of a new one.
    view: tuple | None = None


#: How many steps from the function or an argument :func:`_find_consts` looks for an array
#: (a closure cell of the function a program wraps, then an attribute of the object in it).
_FIND_DEPTH = 3
_FIND_WIDTH = 256


def _children(obj):
    """(step, value) pairs one step below ``obj``: a function's closure cells and the globals
    its code names, an object's attributes (its ``__dict__``, no properties run), a dict's,
    list's or tuple's items."""
    import types

    if isinstance(obj, (np.ndarray, type, types.ModuleType, str, bytes)):
        return []
    if isinstance(obj, functools.partial):
        return [(("item", i), a) for i, a in enumerate(obj.args)] + [(("pfunc", 0), obj.func)]
    if isinstance(obj, (types.MethodType, _BoundJit)):
        return [(("mself", 0), obj.__self__), (("mfunc", 0), obj.__func__)]
    if isinstance(obj, types.FunctionType):
        names = obj.__code__.co_freevars
        out = [(("cell", i, names[i]), c.cell_contents)
               for i, c in enumerate(obj.__closure__ or ()) if _cell_full(c)]
        g = obj.__globals__
        out += [(("global", n), g[n]) for n in obj.__code__.co_names if n in g]
        return out[:_FIND_WIDTH]
    if isinstance(obj, dict):
        return [(("item", k), v) for k, v in list(obj.items())[:_FIND_WIDTH]]
    if isinstance(obj, (list, tuple)):
        return [(("item", i), v) for i, v in enumerate(obj[:_FIND_WIDTH])]
    d = getattr(obj, "__dict__", None)
    if isinstance(d, dict):
        return [(("attr", k), v) for k, v in list(d.items())[:_FIND_WIDTH]]
    return []


def _cell_full(cell) -> bool:
    try:
        cell.cell_contents
    except ValueError:
        return False
    return True


def _follow(path: tuple, fn, args):
    """The object at ``path`` now (raises LookupError, AttributeError or ValueError when it is
    gone)."""
    obj = fn if path[0] == ("fn",) else args[path[0][1]]
    for kind, k, *_ in path[1:]:
        if kind == "cell":
            obj = obj.__closure__[k].cell_contents
        elif kind == "global":
            obj = obj.__globals__[k]
        elif kind == "attr":
            obj = vars(obj)[k]
        elif kind == "pfunc":
            obj = obj.func
        elif kind == "mself":
            obj = obj.__self__
        elif kind == "mfunc":
            obj = obj.__func__
        else:
            obj = obj.args[k] if isinstance(obj, functools.partial) else obj[k]
    return obj


def _find_consts(steps: list[_Step], fn, args) -> list[_Const]:
    """The recorded constants of ``steps`` that ``fn`` reads by name: found from the function
    (closure cells, globals) or its positional arguments within _FIND_DEPTH steps. A replay
    reads them again there (:func:`_rebound`), so rebinding a closed-over weight, a global or
    a layer's attribute to a new array takes effect, as an argument does. Arrays made inside
    the function, or reached only through other functions' code, stay what the trace saw."""
    refs = [r for st in steps for r in (*st.sources, *(st.result[1] if st.result else ()))]
    wanted = {id(r[1]): r[1] for r in refs
              if r[0] in ("const", "np") and isinstance(r[1], np.ndarray)}
    if not wanted:
        return []
    # views the function made (w.T, w[0]) of arrays that own their memory: by that owner
    by_base: dict[int, list[np.ndarray]] = {}
    for a in wanted.values():
        if isinstance(a.base, np.ndarray) and a.base.base is None:
            by_base.setdefault(id(a.base), []).append(a)
    found: dict[int, tuple] = {}
    views: dict[int, tuple] = {}
    frontier = [((("fn",),), fn)]
    frontier += [((("arg", i),), a) for i, a in enumerate(args) if not isinstance(a, np.ndarray)]
    seen = {id(fn)} | {id(a) for _, a in frontier}
    for _ in range(_FIND_DEPTH):
        nxt = []
        for path, obj in frontier:
            for step, child in _children(obj):
                if isinstance(child, np.ndarray):
                    if id(child) in wanted and id(child) not in found:
                        found[id(child)] = path + (step,)
                    for v in by_base.get(id(child), ()):
                        views.setdefault(id(v), (path + (step,), child))
                    continue
                if id(child) not in seen:
                    seen.add(id(child))
                    # A bound method's self and function, a partial's function and arguments:
                    # the same level (jit(net.__call__) missed self.layers[0].w, one step
                    # deeper than jit(net) finds it, and replayed the old weight).
                    wrapper = step[0] in ("mself", "mfunc", "pfunc") or (
                        step[0] == "item" and isinstance(obj, functools.partial))
                    (frontier if wrapper else nxt).append((path + (step,), child))
        frontier = nxt
        if len(found) == len(wanted):
            break
    out = [_Const(wanted[i], p, wanted[i].shape, wanted[i].dtype, wanted[i].strides)
           for i, p in found.items()]
    for i, (p, base) in views.items():
        if i not in found:
            v = wanted[i]
            off = v.__array_interface__["data"][0] - base.__array_interface__["data"][0]
            out.append(_Const(v, p, base.shape, base.dtype, base.strides,
                              (off, v.shape, v.strides)))
    return out


_NUMBERS = (bool, int, float, complex, np.number, np.bool_)


def _number_key(v) -> tuple:
    """A Python or NumPy number as a comparable key, by type and bits: -0.0 is not 0.0, and a
    NaN is the NaN it was."""
    if isinstance(v, float):
        return (type(v), v.hex())
    if isinstance(v, complex):
        return (type(v), v.real.hex(), v.imag.hex())
    if isinstance(v, np.generic):
        return (type(v), v.tobytes())
    return (type(v), v)


def _find_scalars(fn, args=()) -> list[tuple]:
    """The numbers ``fn`` reads by name, which a trace bakes into its program: its closure
    variables and the globals its code names, those of the functions it names the same way
    (a helper it calls, the function ``grad`` wraps), and through a bound method or a partial,
    the function's and ``self``'s attributes; within ``_FIND_DEPTH`` steps. Also the number
    attributes of the objects among its positional ``args`` (``self`` of a method jitted in
    its class body, a config object passed in: keyed by identity, the object is the same one
    when its attributes change), and those of an object a closure variable or global holds
    whose names the function's code reads (``cfg.scale``). (path, key, value) triples."""
    import types

    out = []
    frontier = [((("fn",),), fn)]
    seen = {id(fn)}
    for i, a in enumerate(args):
        if isinstance(a, (types.FunctionType, types.MethodType, functools.partial)):
            # a function passed in (an activation): the numbers it reads, as the function's
            if id(a) not in seen:
                seen.add(id(a))
                frontier.append(((("arg", i),), a))
            continue
        if isinstance(a, (np.ndarray, list, tuple, dict, str, bytes, type(None), *_NUMBERS)):
            continue     # arrays are arguments; containers and numbers are in the signature
        if _by_state(a) and _state_key(a) is not None:
            continue     # its numbers are in the signature too (see _flatten)
        out += [((("arg", i), step), _number_key(v), v) for step, v in _children(a)
                if step[0] in ("attr", "item") and isinstance(v, _NUMBERS)]
    for _ in range(_FIND_DEPTH):
        nxt = []
        for path, obj in frontier:
            for step, child in _children(obj):
                if isinstance(child, _NUMBERS):
                    out.append((path + (step,), _number_key(child), child))
                elif (isinstance(obj, types.FunctionType) and step[0] in ("cell", "global")
                      and _plain_object(child)):
                    # ``cfg.scale``: the attributes of a closed-over or global object that the
                    # code names (a replay read the number the first trace saw).
                    names = obj.__code__.co_names
                    out += [(path + (step, st), _number_key(v), v) for st, v in _children(child)
                            if st[0] == "attr" and st[1] in names and isinstance(v, _NUMBERS)]
                elif id(child) not in seen and (
                        step[0] in ("mself", "mfunc", "pfunc")
                        or isinstance(child, types.FunctionType) and step[0] in ("cell", "global")):
                    # functions it calls (a helper, the function grad wraps) read theirs too
                    seen.add(id(child))
                    nxt.append((path + (step,), child))
        frontier = nxt
    return out[:_FIND_WIDTH]


def _plain_object(obj) -> bool:
    """An instance whose attributes are its own data (not a function, class, module, array,
    container or number)."""
    import types

    return (isinstance(getattr(obj, "__dict__", None), dict) and not isinstance(
        obj, (type, types.ModuleType, types.FunctionType, types.MethodType, functools.partial,
              np.ndarray, list, tuple, dict, *_NUMBERS)))


def _scalars_moved(scalars: list[tuple], fn, args=()) -> "_Miss | None":
    """A :class:`_Miss` naming the first number of ``scalars`` that is not what the trace saw.
    (On the replay path: the same object as before is taken as unchanged without a key, and
    a closure variable or global of ``fn`` itself is read directly.)"""
    for path, key, was in scalars:
        try:
            if len(path) == 2 and path[0] == ("fn",) and path[1][0] == "global":
                now = fn.__globals__[path[1][1]]
            else:
                now = _follow(path, fn, args)
        except (LookupError, AttributeError, ValueError, TypeError):
            return _Miss(f"{_describe(path)} is gone")
        if now is was:
            continue
        if not isinstance(now, _NUMBERS) or _number_key(now) != key:
            return _Miss(f"{_describe(path)} changed from {was!r} to {now!r} (a traced program "
                         f"holds the numbers it read by name; pass one that changes as an "
                         f"argument)")
    return None


def _defaults_moved(root: _Step, fn) -> "_Miss | None":
    """A :class:`_Miss` when ``fn``'s default arguments are not the ones its trace saw (they were
    replaced: a replay gave the old default); None when only the tuple is new, its values the
    same (then it is remembered, so the next call's check is two identity tests again)."""
    now = (fn.__defaults__, fn.__kwdefaults__)
    for was, new, what in zip(root.defaults, now, ("__defaults__", "__kwdefaults__")):
        if was is new:
            continue
        old_items = () if was is None else tuple(was.items()) if isinstance(was, dict) else was
        new_items = () if new is None else tuple(new.items()) if isinstance(new, dict) else new
        if len(old_items) != len(new_items) or not all(
                _same_default(a, b) for a, b in zip(old_items, new_items)):
            return _Miss(f"the function's {what} changed from {_short(was, 60)} to "
                         f"{_short(new, 60)}")
    root.defaults = now
    return None


def _same_default(a, b) -> bool:
    if a is b:
        return True
    if type(a) is not type(b) or isinstance(a, np.ndarray):
        return False
    if isinstance(a, tuple):        # a (name, value) pair of __kwdefaults__, or a tuple default
        return len(a) == len(b) and all(_same_default(x, y) for x, y in zip(a, b))
    if isinstance(a, _NUMBERS):
        return _number_key(a) == _number_key(b)
    return _same_value(a, b)


def _describe(path: tuple) -> str:
    text = "the function" if path[0] == ("fn",) else f"argument #{path[0][1]}"
    for kind, k, *name in path[1:]:
        text += {"cell": f" -> closure variable {name[0] if name else k!r}",
                 "global": f" -> global {k!r}", "attr": f".{k}", "item": f"[{k!r}]"}.get(kind, "")
    return text


def _rebound(consts: list[_Const], fn, args):
    """{id(recorded array): the array there now} for the constants that were rebound to an
    array of the same shape, dtype and strides (the pipeline reads it as it is); a
    :class:`_Miss` when one is now something else (the function is traced again)."""
    subs = None
    for c in consts:
        try:
            now = _follow(c.path, fn, args)
        except (LookupError, AttributeError, ValueError, TypeError):
            return _Miss(f"the array at {_describe(c.path)} is gone")
        if now is (c.array if c.view is None else c.array.base):     # unchanged
            continue
        if not (type(now) is np.ndarray and now.shape == c.shape and now.dtype == c.dtype
                and now.strides == c.strides):
            what = (f"{now.dtype}{list(now.shape)}" if isinstance(now, np.ndarray)
                    else type(now).__name__)
            return _Miss(f"the array at {_describe(c.path)} was rebound from "
                         f"{c.dtype}{list(c.shape)} to {what}")
        if c.view is not None:
            off, shape, strides = c.view
            try:
                now = np.ndarray(shape, c.dtype, buffer=now, offset=off, strides=strides)
            except (TypeError, ValueError):
                return _Miss(f"the array at {_describe(c.path)} was rebound to one whose view "
                             f"cannot be made the same way")
        subs = subs or {}
        subs[id(c.array)] = now
    return subs


def _check_options(what: str, fn, fullgraph, recompile_limit) -> None:
    """Refuses a decorator's bad configuration when it is made, by name (``pypto.jit(5)`` was
    accepted and failed at the call with "'int' object is not callable"; a recompile_limit of
    "3" or None with a raw TypeError from a comparison at the first call)."""
    from ..errors import ArgumentError

    if not callable(fn):
        raise ArgumentError(f"{what}: expected a function to trace, got {type(fn).__name__} "
                            f"{_short(fn, 60)}; use it as @{what} or @{what}(...) on a def")
    if not isinstance(fullgraph, (bool, np.bool_)):
        raise ArgumentError(f"{what}: fullgraph must be True or False, got {fullgraph!r}")
    if isinstance(recompile_limit, (bool, np.bool_)) or not isinstance(
            recompile_limit, (int, np.integer)) or recompile_limit < 0:
        raise ArgumentError(f"{what}: recompile_limit must be a whole number >= 0 (traces per "
                            f"function; 0 runs every call op by op), got {recompile_limit!r}")


def _op_name(name: str) -> str:
    """A function's name as an op name (lower case identifier)."""
    import re

    s = re.sub(r"[^a-z0-9_]", "_", name.lower()).strip("_") or "fn"
    return s if s[0].isalpha() else f"f_{s}"


def _owns_out(fn: Callable) -> bool:
    """Whether ``out=`` on a jitted ``fn`` is the program's: unless ``fn`` names a parameter
    ``out`` itself (keyword-only or positional), which then receives it as before."""
    import inspect

    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return True
    p = params.get("out")
    return p is None or p.kind is inspect.Parameter.VAR_KEYWORD


def _result_structure(result):
    leaves: list = []

    def walk(x):
        if isinstance(x, T.Tensor):
            leaves.append(x)
            return ("X", len(leaves) - 1)
        if isinstance(x, (list, tuple)):
            return ("L" if isinstance(x, list) else "T", tuple(walk(y) for y in x))
        if isinstance(x, dict):
            return ("D", tuple((k, walk(v)) for k, v in x.items()))
        leaves.append(x)
        return ("X", len(leaves) - 1)

    return walk(result), leaves


def _refuse_lazy(name: str, leaves) -> None:
    """Raises TraceError when a traced function returns a generator or coroutine: its body
    runs after the call returned, when the trace (and its Tensors) are gone, and a replay
    handed back the same exhausted object (an empty ``list(f(x))`` from the second call on)."""
    import types

    for x in leaves:
        if isinstance(x, (types.GeneratorType, types.CoroutineType, types.AsyncGeneratorType)):
            raise TraceError(f"{name} returned a {type(x).__name__} ({getattr(x, '__name__', '')})"
                             f": it would run after the traced call has ended, outside the "
                             f"program; return the values instead, e.g. a list or tuple "
                             f"(return list(...) or [... for ...])")


#: How deep :func:`_instance_state` follows instances held by the arguments (``self.cell.c``).
_STORE_DEPTH = 3


def _instance_state(args) -> list[tuple]:
    """``(object, a copy of its attributes)`` for each user object the arguments hold (``self``
    of a jitted method and the modules in its attributes), read before a trace runs the
    function, so that :func:`_refuse_stored` can see what the function stored on them."""
    import types

    found: list[tuple] = []
    seen: set[int] = set()

    def walk(v, depth):
        if depth < 0 or id(v) in seen:
            return
        if isinstance(v, (list, tuple)):
            seen.add(id(v))
            for x in v:
                walk(x, depth)
            return
        if isinstance(v, dict):
            seen.add(id(v))
            for x in v.values():
                walk(x, depth)
            return
        d = getattr(v, "__dict__", None)
        if type(d) is not dict or isinstance(v, (type, types.ModuleType, types.FunctionType,
                                                  JitFunction, T.Tensor, np.ndarray)):
            return
        seen.add(id(v))
        found.append((v, dict(d)))
        for x in d.values():
            walk(x, depth - 1)

    walk(args, _STORE_DEPTH)
    return found


def _refuse_stored(name: str, state: list[tuple]) -> None:
    """Raises TraceError when the traced call stored a Tensor on an argument's object
    (``self.h = self.h + x``): the Tensor dies with the trace and a replay does not run the
    assignment, so the next calls read a dead Tensor or stale state. The object's attributes
    are put back as they were before the call."""
    def holds(v) -> bool:
        if isinstance(v, T.Tensor):
            return True
        if isinstance(v, (list, tuple)):
            return any(isinstance(x, T.Tensor) for x in v)
        if isinstance(v, dict):
            return any(isinstance(x, T.Tensor) for x in v.values())
        return False

    for obj, before in state:
        stored = [k for k, v in vars(obj).items() if v is not before.get(k, _MISS) and holds(v)]
        if not stored:
            continue
        for k in list(vars(obj)):
            if k not in before:
                del obj.__dict__[k]
        obj.__dict__.update(before)
        attr = stored[0]
        cls = type(obj).__name__
        raise TraceError(f"{name} stored a traced value in {cls}.{attr}: a program's Tensors "
                         f"exist only while it is traced, and later calls replay it without "
                         f"running Python, so the attribute would not follow the calls. Return "
                         f"the new value and assign it after the call, e.g. "
                         f"'out, m.{attr} = m.step(x)' ({cls}.{attr} is left as it was)")


def _rebuild(struct, leaves):
    """The inverse of :func:`_result_structure` (its "X" leaves are the same as "A" ones)."""
    return _unflatten(struct, leaves)


def _located(e: PyptoError) -> PyptoError:
    """``e`` with the user's ``file:line`` (and the line's text) appended."""
    import sys
    import traceback

    where = None
    for fs in reversed(traceback.extract_tb(sys.exc_info()[2])):
        fn = fs.filename
        if not (fn.startswith(T._PKG_DIR) or fn.startswith(T._NP_DIR)):
            where = f"{fn}:{fs.lineno}"
            break
    if where is None or "(traced at" in str(e):
        return e
    text = T.source_line(where)
    try:
        return type(e)(f"{e} (traced at {where}{': ' + text if text else ''})")
    except TypeError:
        return e


def jit(fn: Callable | None = None, *, fullgraph: bool = False,
        recompile_limit: int = RECOMPILE_LIMIT):
    """Traces ``fn`` per signature and replays it as fused pipelines.

    Example:
        >>> import numpy as np, pypto
        >>> @pypto.jit
        ... def f(x):
        ...     return pypto.ops.tanh(0.5 * x + 0.1) * pypto.ops.sigmoid(x) + 1
        >>> f(np.zeros(4, np.float32)).tolist()
        [1.0498339..., ...]  # doctest: +SKIP
    """
    def wrap(f):
        return JitFunction(f, fullgraph=fullgraph, recompile_limit=recompile_limit)

    return wrap(fn) if fn is not None else wrap


def fuse(fn: Callable | None = None, *, recompile_limit: int = RECOMPILE_LIMIT):
    """Like :func:`jit`, but guarantees one pipeline: a break or a second pipeline raises
    :class:`~pypto.errors.FusionError` naming the op and the reason."""
    def wrap(f):
        return JitFunction(f, fuse=True, recompile_limit=recompile_limit)

    return wrap(fn) if fn is not None else wrap


def cond(pred, true_fn: Callable, false_fn: Callable, *operands):
    """``true_fn(*operands)`` where ``pred`` holds, else ``false_fn(*operands)``, as one program.

    With a traced ``pred`` both branches are traced and combined with ``where`` (so no break);
    their results must have the same structure, shapes (after broadcasting with ``pred``) and
    dtypes. With a Python bool only the chosen branch runs.
    """
    from .. import ops

    if isinstance(pred, (bool, int, float, np.bool_, np.number)):
        # A Python value (an int flag too: it was a where() of an int64 'cond', refused as
        # "must be a bool array"): only the chosen branch runs.
        return true_fn(*operands) if pred else false_fn(*operands)
    a, b = true_fn(*operands), false_fn(*operands)
    sa, la = _result_structure(a)
    sb, lb = _result_structure(b)
    if sa != sb:
        raise TraceError("pypto.cond: the two branches return different structures "
                         f"({_short(sa)} vs {_short(sb)})")
    p = pred
    if getattr(p, "dtype", None) is not None and np.dtype(p.dtype) != np.bool_:
        p = p != 0
    out = []
    for i, (x, y) in enumerate(zip(la, lb)):
        dx, dy = getattr(x, "dtype", None), getattr(y, "dtype", None)
        if not isinstance(x, (T.Tensor, np.ndarray, *_NUMBERS)) or not isinstance(
                y, (T.Tensor, np.ndarray, *_NUMBERS)):
            # A string, None or another object in both branches: the same one is the result
            # (it was where() of it: "argument 'a' must be a NumPy array, got str").
            if x is y or type(x) is type(y) and _same_value(x, y):
                out.append(x)
                continue
            raise TraceError(f"pypto.cond: the branches return {_short(x, 40)} and "
                             f"{_short(y, 40)} at result leaf #{i}; values that are not arrays "
                             f"or numbers must be the same in both branches")
        if dx is not None and dy is not None and np.dtype(dx) != np.dtype(dy):
            raise TraceError(f"pypto.cond: the branches return dtypes {np.dtype(dx).name} and "
                             f"{np.dtype(dy).name}; cast one of them")
        out.append(ops.where(p, x, y))
    return _rebuild(sa, out)


def _same_value(x, y) -> bool:
    try:
        return bool(x == y)
    except Exception:      # an object whose == is not a truth value
        return False


_leading: dict = {}


def leading_reduce(op, x: np.ndarray, params: dict) -> np.ndarray:
    """``op``'s [O, R] reduction of ``x.T`` for ``x`` of shape [R, O] (a reduction over leading
    axes, called by the reduction frontends): a one-op program, whose fused default schedule
    reduces chunks of rows in parallel into partial rows, every load contiguous."""
    key = (op.name, tuple(sorted(params.items())))
    fn = _leading.get(key)
    if fn is None:
        kw = dict(params)

        def reduce_rows(x):
            return op.kernel(x.T, **kw)

        reduce_rows.__name__ = f"{op.name}_over_rows"
        fn = _leading[key] = JitFunction(reduce_rows, name=reduce_rows.__name__)
    return fn(x)



_joins: "collections.OrderedDict[tuple, JitFunction]" = collections.OrderedDict()
_JOINS_KEPT = 128


def join_many(arrays: Sequence[np.ndarray], axis: int) -> np.ndarray:
    """``concat(arrays, axis)`` of three or more NumPy arrays (called by the concat and stack
    frontends): a one-op program, lowered as one Func with a block copy per array. The kernel
    joins two arrays at a time, so a tree of them passes over the data log2(n) times: 32 arrays
    of 64x2048 took 35 ms that way, NumPy 2.3. One traced function per signature (the most
    recently used are kept), so no signature counts against another's recompile limit."""
    from ..ops.layout import join_tree

    key = (axis, tuple((a.shape, a.dtype.str) for a in arrays))
    with _join_lock:
        fn = _joins.get(key)
        if fn is None:
            def join(*xs):
                return join_tree(list(xs), axis)

            join.__name__ = f"concat_{len(arrays)}"
            fn = _joins[key] = JitFunction(join, name=join.__name__)
            while len(_joins) > _JOINS_KEPT:
                _joins.popitem(last=False)
        else:
            _joins.move_to_end(key)
    return fn(*arrays)


_join_lock = threading.Lock()
