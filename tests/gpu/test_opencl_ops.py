"""Every op with its default GPU schedule, run on OpenCL (PoCL on the CPU) and checked against NumPy.

Shapes are tiny (each kernel is compiled by PoCL, about a second each); a second set of shapes
makes each specialised GPU family (row reduction, full reduction, matrix product) be chosen, with
rows longer than a block and matrices larger than a tile with ragged edges.
"""

from __future__ import annotations

import pytest

import pypto
from helpers import assert_close, opencl_device
from pypto.bench.inputs import complete_dims, make_inputs
from pypto.compiler.lower import build
from pypto.runtime import observe
from pypto.schedule.gpu import gpu_family, gpu_limits

#: Parameters for ops that have required ones (small, valid values).
PARAMS = {
    "anchor_boxes": dict(feat_h=2, feat_w=3, stride_h=16.0, stride_w=16.0),
    "resize_bilinear": dict(height=5, width=7),
    "roi_align": dict(pooled_height=2, pooled_width=3),
    "avg_pool2d": dict(kernel_h=2, kernel_w=3),
    "max_pool2d": dict(kernel_h=2, kernel_w=3),
    "dequantize": dict(scale=0.5, zero_point=3),
    "quantize": dict(scale=0.5, zero_point=3),
    "requantize": dict(scale=0.5, zero_point=3),
    "threshold": dict(threshold=0.5, value=-1.0),
    "max_pool1d": dict(kernel=3), "avg_pool1d": dict(kernel=2),
    "max_pool3d": dict(kernel_d=2, kernel_h=3, kernel_w=2),
    "avg_pool3d": dict(kernel_d=3, kernel_h=2, kernel_w=2),
    "affine_grid": dict(height=5, width=7),
    # image ops added for issue 15 (morphology ... quantized ops)
    **{n: dict(height=5, width=7) for n in ("resize_nearest", "resize_bicubic", "warp_affine",
                                             "warp_perspective")},
    "fake_quantize_per_tensor_affine": dict(scale=0.05, zero_point=3, quant_min=-128,
                                            quant_max=127),
    "fake_quantize_per_channel_affine": dict(quant_min=-128, quant_max=127),
    "quantized_add": dict(a_scale=0.5, a_zero_point=1, b_scale=0.25, b_zero_point=-2, scale=0.4,
                          zero_point=3),
}
#: Shapes that the op's example cannot be shrunk to by clipping each dim.
SHAPES = {"lstm_cell": {"B": 2, "IN": 5, "HID": 4, "G": 16}}
#: Largest extent of any dim in the all-ops run.
SMALL = 20

#: (op, shape, the GPU family its default schedule must use).
FAMILY_CASES = [
    ("matmul", {"M": 70, "N": 45, "K": 37}, "matmul"),
    ("batch_matmul", {"B": 2, "M": 40, "N": 33, "K": 20}, "matmul"),
    ("linear", {"R": 40, "I": 20, "O": 36}, "matmul"),
    ("quantized_matmul", {"M": 33, "N": 40, "K": 19}, "matmul"),
    ("softmax", {"R": 3, "C": 700}, "row_reduction"),
    ("log_softmax", {"R": 3, "C": 300}, "row_reduction"),
    ("layer_norm", {"R": 3, "C": 300}, "row_reduction"),
    ("rms_norm", {"R": 3, "C": 300}, "row_reduction"),
    ("sum", {"O": 5, "R": 300}, "row_reduction"),
    ("argmax", {"O": 5, "R": 300}, "row_reduction"),
    ("var", {"O": 5, "R": 300}, "row_reduction"),
    ("sum", {"O": 1, "R": 20000}, "full_reduction"),
    ("argmin", {"O": 2, "R": 20000}, "full_reduction"),
    ("logsumexp", {"O": 1, "R": 20000}, "full_reduction"),
]


def small_case(op) -> tuple[dict, dict]:
    """(params, dims) of a tiny call of ``op``."""
    params = op.resolve_params(PARAMS.get(op.name, {}))
    shape = SHAPES.get(op.name) or {d: min(v, SMALL) for d, v in (op.example or {}).items()}
    if not shape:
        shape = {d: 4 for d in op.input_dims}
    return params, complete_dims(op, shape, params)




needs_opencl = pytest.mark.skipif(not opencl_device(), reason="needs an OpenCL device (PoCL)")


def _run_and_check(op, dtypes, params, dims):
    ins = make_inputs(op, dtypes, dims, params)
    want = op.kernel_ref(*ins, **params)
    with observe() as calls, pypto.target("opencl"):
        got = op.kernel(*ins, **params)
    assert calls and "opencl" in calls[-1][4].target, "the call did not run on the OpenCL target"
    got = got if isinstance(got, tuple) else (got,)
    want = want if isinstance(want, tuple) else (want,)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert_close(g, w, err_msg=f"{op.name} {dtypes} {dims}")


@pytest.mark.opencl
@needs_opencl
@pytest.mark.parametrize("name", [o.name for o in pypto.ops.builtin_ops()])
def test_every_op_on_opencl_matches_numpy(name):
    op = pypto.get_op(name)
    params, dims = small_case(op)
    _run_and_check(op, op.dtypes[0], params, dims)


@pytest.mark.opencl
@needs_opencl
# exp, sin, log, erf, acos and cbrt: Halide's OpenCL C prints float64 literals through float32;
# their float64 constants are built from bits (pypto/ops/_consts.py) and must reach the device
# exactly.
@pytest.mark.parametrize("name", ["add", "softmax", "sum", "matmul", "transpose", "exp", "sin",
                                  "log", "erf", "acos", "cbrt"])
def test_second_dtype_on_opencl_matches_numpy(name):
    op = pypto.get_op(name)
    params, dims = small_case(op)
    _run_and_check(op, op.dtypes[1], params, dims)


#: Ops whose float64 form needs a constant float32 cannot hold (a 1/9, colour matrices, a reciprocal
#: of a pooling window or a grid size): each was wrong on OpenCL while its constants were plain
#: float64 literals, which Halide's OpenCL C prints through float32 (see ``pypto/ops/_consts.py``).
FLOAT64_CONSTANT_OPS = ["box_blur", "gaussian_blur", "rgb_to_gray", "rgb_to_hsv", "rgb_to_yuv",
                        "yuv_to_rgb", "roi_align", "affine_grid", "avg_pool2d", "avg_pool3d"]


@pytest.mark.opencl
@needs_opencl
@pytest.mark.parametrize("name", FLOAT64_CONSTANT_OPS)
def test_float64_constants_reach_opencl_exactly(name):
    op = pypto.get_op(name)
    dtypes = next(d for d in op.dtypes if "float64" in tuple(d))
    params, dims = small_case(op)
    _run_and_check(op, dtypes, params, dims)


@pytest.mark.opencl
@needs_opencl
@pytest.mark.parametrize("name,shape,family", FAMILY_CASES,
                         ids=[f"{n}-{f}-{'x'.join(map(str, s.values()))}" for n, s, f in FAMILY_CASES])
def test_gpu_family_schedules_on_opencl_match_numpy(name, shape, family):
    op = pypto.get_op(name)
    params = op.resolve_params({})
    dims = complete_dims(op, shape, params)
    built = build(op, op.dtypes[0], params)
    assert gpu_family(built, dims, gpu_limits("opencl")) == family
    _run_and_check(op, op.dtypes[0], params, dims)
