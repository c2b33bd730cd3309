"""Autoscheduler output is read as data: Li2018's rfactor chains (``f_intm = f.update(0)
.rfactor(...)...``, and the ``;`` Halide's text sometimes leaves out after them)."""

from __future__ import annotations

import numpy as np

import pypto
from pypto.compiler import targets
from pypto.compiler.jit import compile_built
from pypto.compiler.lower import build
from pypto.runtime import prepare, run_kernel
from pypto.schedule.autoschedule import parse_source
from pypto.schedule.schedule import Schedule

# Li2018's schedule of softmax's row sum at R=8, C=64 (its text, as the plugin printed it)
LI2018_ROWSUM = """
rowsum.compute_root()
    .split(r,v7,v8,4,ShiftInwards)
    .reorder(v8,v7)
    .parallel(v7)
    .vectorize(v8)
;
rowsum.update(0)
    .split(k$x,r48,r49,8,GuardWithIf)
;
rowsum_intm = rowsum.update(0)
    .rfactor({{r48,v12}})
    .compute_root()
    .split(v12,v21,v22,4,ShiftInwards)
    .reorder(v22,v21)
    .parallel(v21)
    .vectorize(v22)
;
rowsum_intm.update()
    .split(v12,v23,v24,4,GuardWithIf)
    .reorder(r49,v24,v23)
    .parallel(v23)
    .vectorize(v24)
rowsum.update(0)
    .split(r,v26,v27,4,GuardWithIf)
    .reorder(r48,v27,v26)
    .parallel(v26)
    .vectorize(v27)
;
"""


def test_an_rfactor_chain_is_read_and_runs_correctly():
    op = pypto.get_op("softmax")
    built = build(op, ("float32",), {})
    ds = parse_source(LI2018_ROWSUM, built)
    rf = [d for d in ds if d.op == "rfactor"]
    assert len(rf) == 1 and rf[0].func == "rowsum" and rf[0].stage == 1
    assert dict(rf[0].args)["intm"] == "rowsum_intm"
    assert [d.func for d in ds].count("rowsum_intm") == 9        # compute_root + 4, update + 4
    x = np.random.default_rng(0).standard_normal((8, 64)).astype(np.float32)
    arrays, dtypes, params, dims = prepare(op, [x], {})
    k = compile_built(built, Schedule(op="softmax", directives=tuple(ds)), targets.current(),
                      source="test")
    got = run_kernel(k, op, arrays, dims)[0]
    e = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(got, e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-7)
