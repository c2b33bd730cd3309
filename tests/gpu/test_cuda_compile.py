"""Every op's default GPU schedule compiles for CUDA here (no GPU needed); Vulkan and Metal for a few.

``Pipeline.compile_to_module`` lowers the pipeline and runs the device code generator (LLVM's NVPTX
backend for CUDA), leaving the device code in a buffer of the module; it skips the slower host
code generation, so each op costs about half a second.
"""

from __future__ import annotations

import re

import halide as hl
import pytest

import pypto
from pypto.compiler import targets
from pypto.compiler.lower import build
from pypto.schedule.apply import apply_schedule
from pypto.schedule.defaults import default_schedule
from test_opencl_ops import FAMILY_CASES, small_case


def device_code(op, dtypes, params, dims, target: str) -> bytes:
    """The device code Halide generates for ``op`` with its default schedule on ``target``."""
    t = targets.parse(target)
    built = build(op, dtypes, params)
    apply_schedule(built, default_schedule(built, dims, t))
    module = built.pipeline.compile_to_module(built.images, f"pypto_{op.name}", t)
    codes = [b for b in module.buffers() if b.name().endswith("_gpu_source_kernels")]
    assert len(codes) == 1, f"{op.name}: expected one device code buffer, got {[b.name() for b in module.buffers()]}"
    return bytes(memoryview(codes[0]))


@pytest.mark.parametrize("name", [o.name for o in pypto.ops.builtin_ops()])
def test_every_op_compiles_to_ptx(name):
    op = pypto.get_op(name)
    params, dims = small_case(op)
    ptx = device_code(op, op.dtypes[0], params, dims, "cuda")
    assert b".target sm_70" in ptx
    assert re.search(rb"\.entry\s+\w+", ptx), "no kernel entry point in the PTX"


@pytest.mark.parametrize("name,shape,family", FAMILY_CASES,
                         ids=[f"{n}-{f}-{'x'.join(map(str, s.values()))}" for n, s, f in FAMILY_CASES])
def test_gpu_families_compile_to_ptx_with_shared_memory(name, shape, family):
    from pypto.bench.inputs import complete_dims

    op = pypto.get_op(name)
    params = op.resolve_params({})
    ptx = device_code(op, op.dtypes[0], params, complete_dims(op, shape, params), "cuda-sm80")
    assert b".target sm_80" in ptx
    # Every specialised family exchanges data between the threads of a block.
    assert b"bar.sync" in ptx and b"ld.shared" in ptx, f"{name}: no shared memory traffic"


def test_capability_reaches_the_ptx():
    op = pypto.get_op("relu")
    params, dims = small_case(op)
    assert b".target sm_86" in device_code(op, op.dtypes[0], params, dims, "cuda:86")
    assert b".target sm_61" in device_code(op, op.dtypes[0], params, dims, "cuda-sm61")


def _compile_or_skip(op, target):
    params, dims = small_case(op)
    try:
        return device_code(op, op.dtypes[0], params, dims, target)
    except hl.HalideError as e:
        if "not built" in str(e) or "not enabled" in str(e):  # a wheel without this backend
            pytest.skip(f"this Halide cannot compile for {target}: {str(e).strip()[:200]}")
        raise


#: Metal has no float64: these ops' algorithms hold a float64 constant that Metal refuses.
_F64_CONSTANT = pytest.mark.xfail(raises=hl.HalideError, strict=True,
                                  reason="Metal does not support 64-bit floating point literals")


@pytest.mark.parametrize("name", ["relu", "softmax", "sum", "matmul"])
def test_vulkan_compiles_to_spirv(name):
    code = _compile_or_skip(pypto.get_op(name), "vulkan")
    assert len(code) > 16


@pytest.mark.parametrize("name", ["relu", "add", "transpose", "matmul",
                                  pytest.param("softmax", marks=_F64_CONSTANT),
                                  pytest.param("sum", marks=_F64_CONSTANT)])
def test_metal_compiles_to_metal_source(name):
    code = _compile_or_skip(pypto.get_op(name), "metal")
    assert b"kernel" in code
