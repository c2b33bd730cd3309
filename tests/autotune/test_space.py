"""The derived search space: every sample is a legal schedule that computes the right answer."""

import numpy as np
import optuna
import pytest

from pypto.bench.inputs import make_inputs
from pypto.compiler import targets
from pypto.compiler.jit import compile_built
from pypto.compiler.lower import build
from pypto.runtime import run_kernel
from pypto.schedule.schedule import Schedule
from toyops import toy_matmul, toy_rownorm, toy_scale
from autotune.space import FixedPoint, space_for

CASES = [(toy_matmul, {"M": 33, "K": 20, "N": 45}), (toy_rownorm, {"R": 19, "C": 77}),
         (toy_scale, {"R": 3, "C": 130})]


@pytest.mark.parametrize("op, dims", CASES, ids=[c[0].name for c in CASES])
def test_random_samples_compile_and_match_numpy(op, dims):
    dtypes = op.dtypes[0]
    arrays = make_inputs(op, dtypes, dims, {})
    want = op.kernel_ref(*arrays)
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=1))
    seen = set()
    for _ in range(12):
        trial = study.ask()
        b = build(op, dtypes, {})
        s = space_for(b, dims, targets.host()).sample(trial)
        assert Schedule.loads(s.dumps()) == s
        seen.add(s.hash)
        k = compile_built(b, s, targets.host(), source="sample")
        got = run_kernel(k, op, arrays, dims)[0]
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
        study.tell(trial, 1.0)
    assert len(seen) > 3  # the space really varies


def test_the_space_offers_rfactor_and_staging_for_reductions():
    b = build(toy_matmul, ("float32", "float32"), {})
    sp = space_for(b, {"M": 64, "K": 64, "N": 64}, targets.host())
    s = sp.sample(FixedPoint({"acc.u0.strategy": "rfactor"}))
    assert any(d.op == "rfactor" for d in s.directives)
    s = sp.sample(FixedPoint({"acc.u0.strategy": "vec_pure", "stage.b.acc": "xo", "acc.at": "xo"}))
    assert any(d.op == "wrap" and d.func == "b" for d in s.directives)


def test_a_producer_placed_inside_its_consumer_is_lifted():
    b = build(toy_rownorm, ("float32",), {})
    sp = space_for(b, {"R": 64, "C": 64}, targets.host())
    # absx (inlinable) read by rowsum; rowsum at "yo", absx asks for "rb" (inside): lifted to "yo".
    s = sp.sample(FixedPoint({"tile_y": 8, "rows": 2, "rowsum.at": "yo", "absx.at": "rb"}))
    at = {d.func: d.get("var") for d in s.directives if d.op == "compute_at"}
    assert at["absx"] == at["rowsum"] == "yo"


def test_hints_fix_or_narrow_a_knob():
    b = build(toy_scale, ("float32",), {})
    sp = space_for(b, {"R": 64, "C": 256}, targets.host())
    sp.hints = {"tile_y": 4}
    fp = FixedPoint({"tile_y": 64})
    sp.sample(fp)
    assert fp.used["tile_y"] == 4


BUILTIN = [("softmax", {"R": 9, "C": 70}), ("sum", {"O": 3, "R": 300}), ("sum", {"O": 1, "R": 5000}),
           ("box_blur", {"B": 1, "H": 20, "W": 40}), ("matmul", {"M": 20, "K": 9, "N": 33})]


@pytest.mark.parametrize("name, dims", BUILTIN, ids=[f"{n}-{'-'.join(map(str, d.values()))}" for n, d in BUILTIN])
def test_random_samples_of_builtin_ops_match_numpy(name, dims):
    import pypto

    op = pypto.get_op(name)
    dtypes = op.dtypes[0]
    params = op.resolve_params({})
    arrays = make_inputs(op, dtypes, dims, params, seed=2)
    want = op.kernel_ref(*arrays, **params)
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=7))
    ok = 0
    for _ in range(6):
        trial = study.ask()
        b = build(op, dtypes, params)
        s = space_for(b, dims, targets.host()).sample(trial)
        k = compile_built(b, s, targets.host(), source="sample")
        got = run_kernel(k, op, arrays, dims)[0]
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * max(1.0, float(np.abs(want).max())))
        ok += 1
        study.tell(trial, 1.0)
    assert ok == 6


def test_template_knobs_are_searched_and_stay_correct():
    import pypto
    from autotune.space import template_seed

    op = pypto.get_op("matmul")
    dims = {"M": 70, "K": 50, "N": 90}
    seed = template_seed("matmul")
    assert seed["plan"] == "template" and "tpl.ry" in seed
    arrays = make_inputs(op, op.dtypes[0], dims, {})
    want = op.kernel_ref(*arrays)
    for point in (seed, dict(seed, **{"tpl.ry": 8, "tpl.reg_vectors": 4, "tpl.kc": 64, "tpl.stage": False})):
        b = build(op, op.dtypes[0], {})
        s = space_for(b, dims, targets.host()).sample(FixedPoint(point))
        k = compile_built(b, s, targets.host(), source="template point")
        np.testing.assert_allclose(run_kernel(k, op, arrays, dims)[0], want, rtol=1e-4, atol=1e-4)
