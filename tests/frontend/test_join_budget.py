"""The op budget of one pipeline (``FUNC_BUDGET``) counts a tree of ``concat`` nodes as the one
Func it is lowered to: a join of many pieces does not cut a program into several pipelines, and
a cut never falls inside a tree (a partial join materialized, the tree built again after it).
Values are checked against NumPy; the pipelines run are counted."""

import sys

import numpy as np

import pypto
from pypto import ops
from pypto.frontend import stats as STATS

jit_mod = sys.modules["pypto.frontend.jit"]

RNG = np.random.default_rng(5)


def _pipelines(f, *args):
    """(result, pipelines one replay of ``f`` runs)."""
    f(*args)
    before = STATS.segments_run
    out = f(*args)
    return out, STATS.segments_run - before


def test_a_join_of_more_pieces_than_the_budget_is_one_pipeline():
    n = jit_mod.FUNC_BUDGET + 12
    x = RNG.standard_normal((n, 3, 16)).astype(np.float32)
    f = pypto.jit(lambda x: ops.concat([x[i] for i in range(n)], axis=0) * 2.0)
    out, runs = _pipelines(f, x)
    np.testing.assert_array_equal(out, np.concatenate(list(x), axis=0) * 2)
    assert runs == 1


def test_pieces_computed_in_the_program_and_their_join_stay_together():
    n = 40                      # 40 products, 39 concat nodes, one add: 42 Funcs, under budget
    x = RNG.standard_normal((n, 8, 32)).astype(np.float32)
    f = pypto.jit(lambda x: ops.concat([x[i] * float(i + 1) for i in range(n)], axis=1) + 1.0)
    out, runs = _pipelines(f, x)
    want = np.concatenate([x[i] * np.float32(i + 1) for i in range(n)], axis=1) + 1
    np.testing.assert_allclose(out, want, rtol=1e-6)
    assert runs == 1
    joins = [a for a in next(iter(f._cache.values())).segment.op.plan.anchors if "join" in a]
    assert len(joins) == 1 and len(joins[0]["join"][1]) == n


def test_a_program_over_budget_is_cut_outside_its_joins():
    # 70 pointwise steps feeding a join of 35 pieces: over budget, so cut; every join anchor
    # of every pipeline is a whole tree (35 pieces), never a part of one.
    n = 35
    x = RNG.standard_normal((n, 4, 16)).astype(np.float32)

    def prog(x):
        pieces = [ops.tanh(x[i] * float(i + 1)) for i in range(n)]
        return ops.concat(pieces, axis=0) - 0.5

    f = pypto.jit(prog)
    out, runs = _pipelines(f, x)
    want = np.concatenate([np.tanh(x[i] * np.float32(i + 1)) for i in range(n)], axis=0) - 0.5
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-6)
    assert runs >= 2
    steps = list(f._cache.values())
    segs = []
    step = steps[0]
    while step is not None:
        if step.segment is not None:
            segs.append(step.segment)
        step = next(iter(step.children.values()), None) if step.children else None
    pieces = [len(a["join"][1]) for s in segs for a in s.op.plan.anchors if "join" in a]
    assert pieces == [n]



def test_a_join_of_more_pieces_than_a_schedule_has_stages_is_cut():
    """A join lowered as one Func has one update stage per piece, and a schedule names stages
    up to 64: a tree of more pieces is cut (it raised a ScheduleError kept whole)."""
    n = jit_mod.JOIN_PIECES + 36
    x = RNG.standard_normal((n, 2, 16)).astype(np.float32)
    f = pypto.jit(lambda x: ops.concat([x[i] for i in range(n)], axis=0) * 2.0)
    out, runs = _pipelines(f, x)
    np.testing.assert_array_equal(out, np.concatenate(list(x), axis=0) * 2)
    assert runs >= 2


def test_values_computed_already_are_not_copied_again():
    """At a break the live values are computed; a later pipeline that returns them with one
    more value computes only that one (each was a copy of a whole array: 150 of them passed the
    directive limit of one schedule, and with one op left to cut the call failed)."""
    n = 150
    x = RNG.standard_normal((8, 16)).astype(np.float32)

    def prog(x):
        vals = [x * float(i + 1) for i in range(n)]
        if float(vals[0].sum()) > -1e30:       # a break: vals are live, so computed
            extra = vals[1].sum()
        return vals + [extra]

    f = pypto.jit(prog)
    f(x)
    out = f(x)
    for i in range(n):
        np.testing.assert_array_equal(out[i], x * np.float32(i + 1))
    np.testing.assert_allclose(out[n], (x * 2).astype(np.float64).sum(), rtol=1e-5)
    step = next(iter(f._cache.values()))
    last = step
    while last.children:
        last = next(iter(last.children.values()))
    assert last.segment is not None and len(last.segment.graph.outputs) == 1


def _segments_in_order(f):
    segs, step = [], next(iter(f._cache.values()))
    while step is not None:
        if step.segment is not None:
            segs.append(step.segment)
        step = next(iter(step.children.values()), None) if step.children else None
    return segs


def test_pieces_of_a_deferred_join_are_computed_where_they_are_cut():
    """A recurrence whose states are stacked at the end (an LSTM layer's outputs): a cut keeps
    the stack's inner concats for the join's pipeline, and computes the pieces before the cut
    there and then. Left uncomputed, they stayed in every later cut's first part, which then
    held that many ops fewer: 32 LSTM steps ran as 52 pipelines of 11 ops, then of one product
    and of 10 ops in turn (now 8 of 44-47)."""
    n, budget = 30, 12
    x = RNG.standard_normal((n, 4, 8)).astype(np.float32)
    w = (RNG.standard_normal((8, 8)) * 0.3).astype(np.float32)

    def prog(x, w):
        h, outs = x[0], []
        for t in range(n):
            h = ops.tanh(ops.matmul(h, w) + x[t])      # three ops per step
            outs.append(h)
        return ops.stack(outs), h

    old = jit_mod.FUNC_BUDGET
    jit_mod.FUNC_BUDGET = budget
    try:
        f = pypto.jit(prog)
        out, runs = _pipelines(f, x, w)
    finally:
        jit_mod.FUNC_BUDGET = old
    h, want = x[0].astype(np.float64), []
    for t in range(n):
        h = np.tanh(h @ w + x[t])
        want.append(h)
    np.testing.assert_allclose(out[0], np.stack(want), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(out[1], want[-1], rtol=1e-4, atol=1e-5)
    segs = _segments_in_order(f)
    sizes = [sum(nd.kind == "op" and nd.op.name != "concat" for nd in s.graph.nodes)
             for s in segs]
    assert runs == len(segs)
    # every cut but the last holds at least half the budget of step ops, and no step op is
    # computed twice (3 per step, in all)
    assert all(k >= budget // 2 for k in sizes[:-1]), sizes
    assert sum(sizes) == 3 * n, sizes
