"""The search space of a program (a backward pass): the fused default's own structure with the
keep-or-recompute choice for each value it keeps, beside the generic anchored space.

Every sample compiles and matches the program's reference; the fused plan with every value kept
and the epilogues on is the default itself; and a join's block-copy updates are never offered
rfactor (they are not reductions: every such trial of conv2d's backward failed to compile).
"""

from __future__ import annotations

import numpy as np
import optuna
import pytest

import pypto.ops as P
from pypto.autodiff.api import backward_program
from pypto.compiler import targets
from pypto.compiler.jit import compile_built
from pypto.compiler.lower import build
from pypto.frontend.graph import fused_schedule
from pypto.infra.inputs import make_inputs
from pypto.runtime import run_kernel
from pypto.schedule.defaults import vector_lanes
from autotune.space import FixedPoint, space_for

CASES = {
    "layer_norm": (P.layer_norm, {"R": 6, "C": 37}, {}),
    "softmax": (P.softmax, {"R": 5, "C": 19}, {}),
    "lstm_cell": (P.lstm_cell, {"B": 3, "IN": 5, "HID": 4, "G": 16}, {}),
    "conv2d": (P.conv2d, {"N": 1, "C": 3, "H": 9, "W": 11, "O": 4, "CG": 3, "KH": 3, "KW": 3},
               {"pad_h": 1, "pad_w": 1}),
}


def _program(name):
    op, dims, params = CASES[name]
    g = backward_program(op, dims, op.dtypes[0], params)
    return g, g.dtypes[0], g.call_dims


def _run(g, dtypes, dims, sched, arrays):
    b = build(g, dtypes, {})
    k = compile_built(b, sched, targets.host(), source="sample")
    return run_kernel(k, g, arrays, dims)


class _Fused:
    """A trial whose plan is the fused one; every other knob drawn at random."""

    def __init__(self, trial):
        self.trial = trial

    def suggest_categorical(self, name, choices):
        return "fused" if name == "plan" else self.trial.suggest_categorical(name, choices)


@pytest.mark.parametrize("name", sorted(CASES))
def test_fused_plan_samples_compile_and_match_the_reference(name):
    g, dtypes, dims = _program(name)
    arrays = make_inputs(g, dtypes, dims, {})
    want = g.kernel_ref(*arrays)
    want = want if isinstance(want, (list, tuple)) else [want]
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=3))
    seen = set()
    for _ in range(4):
        trial = study.ask()
        s = space_for(build(g, dtypes, {}), dims, targets.host()).sample(_Fused(trial))
        seen.add(s.hash)
        got = _run(g, dtypes, dims, s, arrays)
        for a, b in zip(got, want):
            np.testing.assert_allclose(a, b, rtol=2e-4, atol=2e-4, err_msg=name)
        study.tell(trial, 1.0)
    if g.kept_values():
        assert len(seen) > 1, f"{name}: the fused plan does not vary"


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_fused_plan_keeping_everything_is_the_default(name):
    g, dtypes, dims = _program(name)
    b = build(g, dtypes, {})
    lanes = vector_lanes(targets.host(), b.out_dtypes[0])
    point = {"plan": "fused", "fused.epilogues": True,
             **{f"fused.{n}": "keep" for n in g.kept_values()}}
    s = space_for(b, dims, targets.host()).sample(FixedPoint(point))
    assert list(s.directives) == list(fused_schedule(b, dims, lanes))


def test_recomputing_a_kept_value_drops_its_root_and_stays_correct():
    g, dtypes, dims = _program("lstm_cell")
    kept = g.kept_values()
    assert kept, "lstm_cell's backward keeps values for its products"
    b = build(g, dtypes, {})
    lanes = vector_lanes(targets.host(), b.out_dtypes[0])
    s = g.fused_variant(b, dims, lanes, epilogues=True, recompute=frozenset(kept))
    roots = {d.func for d in s.directives if d.op == "compute_root"}
    default_roots = {d.func for d in fused_schedule(b, dims, lanes) if d.op == "compute_root"}
    assert roots < default_roots and default_roots - roots <= set(kept)
    arrays = make_inputs(g, dtypes, dims, {})
    want = g.kernel_ref(*arrays)
    for a, w in zip(_run(g, dtypes, dims, s, arrays), want):
        np.testing.assert_allclose(a, w, rtol=2e-4, atol=2e-4)


def test_joins_are_not_offered_rfactor():
    g, dtypes, dims = _program("conv2d")
    b = build(g, dtypes, {})
    joins = set(g.plan.join_specs)
    assert joins, "conv2d's backward joins its pieces"
    space = space_for(b, dims, targets.host())
    assert not joins & {r.name for r in space.reductions}
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    for _ in range(6):
        trial = study.ask()
        s = space.sample(trial)
        assert not any(d.op == "rfactor" and d.func in joins for d in s.directives)
        study.tell(trial, 1.0)


def test_rfactor_is_offered_only_to_updates_that_reduce():
    """conv2d's backward writes one output (``o2``) by block updates that read nothing of it:
    Halide refuses rfactor there, so offering it failed a trial in two (pypto tune conv2d
    --grad). Every rfactor a sample holds must split an update that reads its own left side."""
    g, dtypes, dims = _program("conv2d")
    b = build(g, dtypes, {})
    copies = {n for n, i in b.funcs.items() if i.updates and not any(i.self_reads)}
    assert "o2" in copies and all(b.funcs[n].self_reads == (True,)
                                  for n in b.funcs if n.endswith("_acc"))
    space = space_for(b, dims, targets.host())
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=3))
    offered = 0
    for _ in range(12):
        trial = study.ask()
        s = space.sample(trial)
        for d in s.directives:
            if d.op == "rfactor":
                offered += 1
                assert b.funcs[d.func].self_reads[d.stage - 1], d
        study.tell(trial, 1.0)
    assert offered, "the space still offers rfactor to the reductions"
