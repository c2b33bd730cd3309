"""The GPU search space: every sample stays within the device's limits and computes the right answer.

Threads per block are read back from the kernel launches Halide itself emits for a CUDA target
(compiled here, never run), not from the space's own bookkeeping; shared memory is checked against
the space's per-buffer estimate, which must account for every buffer a schedule puts in shared
memory. A sample of schedules runs on OpenCL (PoCL) against the NumPy reference, and a short tuning
run on OpenCL stores its winner under the OpenCL family.
"""

import os
import random
import re
import subprocess
import sys

import halide as hl
import numpy as np
import optuna
import pytest

import pypto
from helpers import assert_close, opencl_device
from pypto.bench.inputs import complete_dims, make_inputs
from pypto.compiler import targets
from pypto.compiler.jit import compile_built
from pypto.compiler.lower import build
from pypto.runtime import run_kernel
from pypto.schedule.apply import apply_schedule
from pypto.schedule.directives import Directive
from pypto.schedule.gpu import GpuLimits
from pypto.schedule.schedule import Schedule
from autotune.gpu_space import GpuSpace, gpu_space_for
from autotune.space import FixedPoint, space_for

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OPS = {"matmul": {"M": 20, "K": 9, "N": 33}, "softmax": {"R": 9, "C": 70},
       "sum": {"O": 1, "R": 5000}, "layer_norm": {"R": 7, "C": 50},
       "conv2d": {"N": 1, "C": 3, "H": 9, "W": 8, "O": 4, "CG": 3, "KH": 3, "KW": 3},
       "box_blur": {"B": 1, "H": 12, "W": 20}, "add": {"R": 5, "C": 40}}
LAUNCH = re.compile(r'halide_cuda_run\([^,]+, "([^"]+)", ([^,]+), ([^,]+), ([^,]+), ([^,]+), ([^,]+), '
                    r'([^,]+), ([^,]+),')
optuna.logging.set_verbosity(optuna.logging.ERROR)


def _random_limits(rng: random.Random, api: str = "cuda") -> GpuLimits:
    return GpuLimits(api, rng.choice([64, 128, 256, 512, 1024]),
                     rng.choice([4, 8, 16, 32, 48, 64, 96]) * 1024, rng.choice([8, 16, 32, 64]))


def _setup(name):
    op = pypto.get_op(name)
    params = op.resolve_params({})
    return op, op.dtypes[0], params, complete_dims(op, OPS[name], params)


def _launches(op, dtypes, params, dims, schedule, tmp_path) -> list[tuple[str, list[str]]]:
    """(kernel, [blocks x3, threads x3, shared bytes]) of every launch in the CUDA host code."""
    b = build(op, dtypes, params)
    apply_schedule(b, schedule)
    for im, spec in zip(b.images, op.inputs):
        for i in range(spec.rank):
            im.dim(i).set_bounds(0, dims[spec.dims[spec.rank - 1 - i]])
    path = str(tmp_path / "lowered.stmt")
    b.pipeline.compile_to_lowered_stmt(path, b.images, hl.StmtOutputFormat.Text, targets.parse("cuda"))
    with open(path, "rb") as f:
        text = f.read().decode("utf-8", "replace")
    return [(m.group(1), [m.group(i).strip() for i in range(2, 9)]) for m in LAUNCH.finditer(text)]


@pytest.mark.parametrize("name", sorted(OPS))
def test_samples_respect_random_device_limits(name, tmp_path):
    op, dtypes, params, dims = _setup(name)
    rng = random.Random(name)
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=len(name)))
    kinds = set()
    for _ in range(8):
        limits = _random_limits(rng)
        trial = study.ask()
        space = GpuSpace(build(op, dtypes, params), dims, limits)
        s = space.sample(trial)
        study.tell(trial, 1.0)
        # Valid data: the JSON round trip re-checks every directive against the grammar.
        assert Schedule.loads(s.dumps()) == s
        for d in s.directives:
            Directive.from_json(d.to_json())
        shared = {d.func for d in s.directives if d.op == "store_in" and d.get("memory") == "gpu_shared"}
        assert shared <= set(space.plan.shared), f"unaccounted shared buffers: {shared - set(space.plan.shared)}"
        assert space.plan.shared_bytes <= limits.shared_bytes
        kinds |= {d.op for d in s.directives}
        launches = _launches(op, dtypes, params, dims, s, tmp_path)
        assert launches, "no GPU kernel launched"
        for kernel, args in launches:
            threads = [int(a) for a in args[3:6]]  # literal: thread extents are split factors
            assert np.prod(threads) <= limits.max_threads, (kernel, threads, limits, trial.params)
            if re.fullmatch(r"\d+", args[6]):
                assert int(args[6]) <= limits.shared_bytes, (kernel, args[6], limits)
    assert {"gpu_threads", "gpu_blocks"} <= kinds


def test_the_space_offers_shared_staging_and_thread_reductions():
    op, dtypes, params, dims = _setup("softmax")
    lim = GpuLimits("cuda", 256, 48 * 1024, 32)
    sp = GpuSpace(build(op, dtypes, params), dims, lim)
    s = sp.sample(FixedPoint({"tx": 16, "ty": 4, "rx": 1, "ry": 2, "rowmax.at": "block",
                              "rowmax.u0.strategy": "rfactor", "e.at": "thread", "rowsum.at": "thread",
                              "inv.at": "inline", "stage.x.e": "block"}))
    ops = [(d.op, d.func) for d in s.directives]
    assert ("rfactor", "rowmax") in ops and ("wrap", "x") in ops
    rows = 4 * 2  # ty * ry rows of the output per block
    assert sp.plan.shared["rowmax"] == rows * 4
    assert sp.plan.shared["rowmax_u0_lanes"] == rows * 16 * 4  # one partial per row and thread
    assert sp.plan.shared["x_e_stage"] == rows * 70 * 4  # whole rows: the reduction reads them all
    # A device with little shared memory gets none of it.
    tiny = GpuSpace(build(op, dtypes, params), dims, GpuLimits("cuda", 256, 64, 32))
    s2 = tiny.sample(FixedPoint({"tx": 16, "ty": 4, "rx": 1, "ry": 2, "rowmax.at": "block",
                                 "stage.x.e": "block"}))
    assert tiny.plan.shared_bytes <= 64
    assert not any(d.op == "wrap" for d in s2.directives)


def test_a_full_sum_reduces_over_blocks_and_threads():
    op, dtypes, params, dims = _setup("sum")
    sp = GpuSpace(build(op, dtypes, params), dims, GpuLimits("cuda", 128, 4096, 32))
    s = sp.sample(FixedPoint({"acc.at": "root", "acc.u0.strategy": "chunks", "acc.u0.chunk": 4096,
                              "acc.u0.lanes": 1024}))
    assert sum(d.op == "rfactor" for d in s.directives) == 2
    lanes = [d for d in s.directives if d.op == "gpu_threads" and d.func == "acc_u0_lanes"]
    assert lanes and sp.plan.threads["acc_u0_chunks"][0] <= 128  # 1024 asked, clamped


def test_the_tuner_uses_the_gpu_space_for_gpu_targets():
    op, dtypes, params, dims = _setup("add")
    assert isinstance(space_for(build(op, dtypes, params), dims, targets.parse("cuda")), GpuSpace)
    assert not isinstance(space_for(build(op, dtypes, params), dims, targets.host()), GpuSpace)




@pytest.mark.opencl
@pytest.mark.skipif(not opencl_device(), reason="needs an OpenCL device (PoCL)")
@pytest.mark.parametrize("name", ["matmul", "softmax", "sum", "layer_norm"])
def test_sampled_schedules_run_on_opencl_and_match_numpy(name):
    op, dtypes, params, dims = _setup(name)
    target = targets.parse("opencl")
    arrays = make_inputs(op, dtypes, dims, params, seed=4)
    want = op.kernel_ref(*arrays, **params)
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=11))
    for _ in range(2):
        trial = study.ask()
        b = build(op, dtypes, params)
        s = gpu_space_for(b, dims, target).sample(trial)
        k = compile_built(b, s, target, source="gpu sample")
        got = run_kernel(k, op, arrays, dims)[0]
        assert_close(got, want, rtol=1e-4, atol=1e-4 * max(1.0, float(np.abs(want).max())),
                     err_msg=str(trial.params))
        study.tell(trial, 1.0)


@pytest.mark.slow
@pytest.mark.opencl
@pytest.mark.skipif(not opencl_device(), reason="needs an OpenCL device (PoCL)")
def test_tuning_on_opencl_stores_the_winner_under_the_opencl_family(tmp_path):
    from autotune.tuner import TuneConfig, Tuner
    from pypto.database import DirectoryDatabase

    # No baselines: with no default timing to beat, the fastest candidate is stored whatever the
    # noise (the noise rule itself is tested with a fake timer in test_verdict.py).
    cfg = TuneConfig(op="softmax", shape={"R": 16, "C": 64}, target="opencl", trials=3,
                     storage=f"sqlite:///{tmp_path}/study.db", db=str(tmp_path / "db"),
                     baselines=(), progress=False, seed=1, compile_timeout=60,
                     run_timeout=30)
    tuner = Tuner(cfg, say=lambda s: None)
    res = tuner.run()
    study = optuna.load_study(study_name=res.study_name, storage=res.storage)
    searched = [t for t in study.trials if "baseline" not in t.user_attrs]
    assert len(searched) == 3
    assert any(t.state == optuna.trial.TrialState.COMPLETE for t in searched)
    family = targets.family(targets.parse("opencl"))
    assert "opencl" in family
    entries = list(DirectoryDatabase(tmp_path / "db").iter_all())
    assert len(entries) == 1 and entries[0].key.family == family
    assert res.written and family in res.message


def test_bench_cuda_without_a_device_exits_with_one_clear_line():
    if _cuda_device():
        pytest.skip("this machine has a CUDA device")
    p = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "bench_cuda.py"), "--quick"],
                       capture_output=True, text=True, timeout=120, cwd=ROOT,
                       env=dict(os.environ, PYTHONPATH=ROOT))
    assert p.returncode != 0
    lines = [ln for ln in p.stderr.strip().splitlines() if ln.strip()]
    assert len(lines) == 1 and "CUDA" in lines[0], p.stderr


def _cuda_device() -> bool:
    try:
        return bool(hl.host_supports_target_device(targets.parse("cuda")))
    except Exception:
        return False
