"""``pypto.target``: short names, full strings, nesting, errors, and calls that really run on the GPU."""

from __future__ import annotations

import doctest

import halide as hl
import numpy as np
import pytest

import pypto
from helpers import assert_close
from pypto.compiler import targets
from pypto.errors import TargetError
from pypto.runtime import observe
from pypto.schedule.gpu import GpuLimits, gpu_limits
from test_opencl_ops import needs_opencl

F = hl.TargetFeature


@pytest.mark.parametrize("name,feature", [
    ("cuda", F.CUDACapability70), ("cuda-sm80", F.CUDACapability80), ("cuda:86", F.CUDACapability86),
    ("cuda-sm_75", F.CUDACapability75), ("cuda61", F.CUDACapability61), ("CUDA-SM86", F.CUDACapability86),
    ("opencl", F.OpenCL), ("vulkan", F.Vulkan), ("metal", F.Metal),
    ("host-cuda-cuda_capability_50", F.CUDACapability50), ("x86-64-linux-opencl", F.OpenCL),
])
def test_names_map_to_features(name, feature):
    t = targets.parse(name)
    assert t.has_feature(feature)
    assert t.has_gpu_feature()


def test_cuda_capability_is_exact_when_halide_knows_it():
    t = targets.parse("cuda-sm75")
    assert not t.has_feature(F.CUDACapability80) and t.has_feature(F.CUDACapability75)


@pytest.mark.parametrize("name,match", [
    ("cuda-sm20", "too old"), ("nope", "unknown target 'nope'.*cuda-smXX"), ("cuda-smx", "unknown"),
    ("cuda-sm99", r"capability 99 is unknown to this Halide; known: 30, .*, 80, 86 .*'cuda-sm86'"),
    ("cuda:90", "capability 90 is unknown"), ("cuda-sm_62", "capability 62 is unknown"),
    ("", "must be a name"),
])
def test_unknown_names_are_clear_errors(name, match):
    with pytest.raises(TargetError, match=match):
        targets.parse(name)
    with pytest.raises(TargetError):
        with pypto.target(name):
            pass


def test_nesting_restores_the_outer_target():
    outer = targets.current()
    with pypto.target("opencl") as a:
        assert targets.current().has_feature(F.OpenCL) and a.has_feature(F.JIT)
        with pypto.target("cuda-sm80"):
            assert targets.current().has_feature(F.CUDA)
            assert not targets.current().has_feature(F.OpenCL)
        assert targets.current().has_feature(F.OpenCL)
    assert str(targets.current()) == str(outer)


def test_gpu_limits_per_api():
    assert gpu_limits("cuda") == GpuLimits(api="cuda", max_threads=1024, shared_bytes=48 * 1024, warp=32)
    assert gpu_limits("opencl").max_threads == 256 and gpu_limits("opencl").shared_bytes == 32 * 1024
    assert gpu_limits(targets.parse("vulkan")).api == "vulkan"
    assert gpu_limits("metal").api == "metal"
    with pytest.raises(TargetError, match="no GPU feature"):
        gpu_limits("host")


def test_docstring_examples():
    import pypto.schedule.gpu as gpu

    for mod in (targets, gpu):
        res = doctest.testmod(mod)
        assert res.attempted >= 1 and res.failed == 0


@pytest.mark.opencl
@needs_opencl
def test_calls_inside_the_context_run_on_opencl_with_numpy_in_and_out():
    x = np.random.default_rng(0).uniform(-1, 1, size=(3, 40)).astype(np.float32)
    with observe() as calls:
        with pypto.target("opencl"):
            got = pypto.ops.softmax(x)
        host = pypto.ops.softmax(x)
    assert isinstance(got, np.ndarray) and got.dtype == np.float32 and got.shape == x.shape
    e = np.exp(x - x.max(axis=1, keepdims=True))
    assert_close(got, e / e.sum(axis=1, keepdims=True))
    assert_close(host, got)
    kernels = [c[4] for c in calls]
    assert "opencl" in kernels[0].target and "opencl" not in kernels[1].target
    assert any("gpu_" in line for line in kernels[0].python)  # a GPU schedule was applied
