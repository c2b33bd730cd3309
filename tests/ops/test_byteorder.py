"""Inputs in a non-native byte order, and other array-likes, reach every op family correctly.

Halide reads an array's bytes as they lie in memory, so a big-endian array on a little-endian
machine (or the reverse) must be converted to native order before a kernel sees it. The check
here is strict: the same values in swapped byte order give bit-identical results to the native
call, for at least one public call of every op (1-byte dtypes have no byte order, so ops whose
arrays are all 1-byte are left out: dequantize, quantized_matmul and the logical ops).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import pypto
import pypto.ops as P
from pypto.errors import DtypeError
from pypto.runtime import as_array

F32 = "float32"
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _r(shape, dtype=F32, seed=0, low=-1.0, high=1.0):
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind == "f":
        return rng.uniform(low, high, size=shape).astype(dtype)
    return rng.integers(-50, 51, size=shape).astype(dtype)


def _swapped(a):
    """The same values with the opposite byte order (non-native on any machine)."""
    return a.astype(a.dtype.newbyteorder("S"))


# name -> () -> (args, kwargs): one public call per op, small odd shapes.
CALLS = {
    # elementwise (unary)
    **{n: (lambda: ((_r((3, 5)),), {})) for n in (
        "abs", "ceil", "cos", "erf", "exp", "expm1", "floor", "gelu", "leaky_relu", "neg",
        "reciprocal", "relu", "round", "sigmoid", "silu", "sin", "softplus", "square", "tanh")},
    **{n: (lambda: ((_r((3, 5), low=0.1, high=2.0),), {})) for n in ("log", "log1p", "rsqrt",
                                                                      "sqrt")},
    "clip": lambda: ((_r((3, 5)),), {"min": -0.5, "max": 0.25}),
    # elementwise (binary), one of them in int32 and one broadcasting
    **{n: (lambda: ((_r((3, 5)), _r((3, 5), seed=1)), {})) for n in (
        "add", "maximum", "minimum", "mul", "sub", "swiglu")},
    "div": lambda: ((_r((3, 5)), _r((5,), seed=1, low=0.5, high=2.0)), {}),
    "pow": lambda: ((_r((3, 5), low=0.1, high=2.0), _r((3, 5), seed=1)), {}),
    **{n: (lambda: ((_r((3, 5), "int64"), _r((3, 5), "int64", seed=1)), {})) for n in (
        "equal", "not_equal", "greater", "greater_equal", "less", "less_equal")},
    "where": lambda: ((_r((3, 5)) > 0, _r((3, 5), "int32"), _r((3, 5), "int32", seed=1)), {}),
    # reductions: float64 and int32 too
    "sum": lambda: ((_r((4, 7), "float64"),), {"axis": 1}),
    "prod": lambda: ((_r((4, 7), low=0.9, high=1.1),), {}),
    "max": lambda: ((_r((4, 7), "int32"),), {"axis": 0}),
    **{n: (lambda: ((_r((4, 7)),), {"axis": -1})) for n in (
        "argmax", "argmin", "logsumexp", "mean", "min", "std", "var")},
    # norm
    "softmax": lambda: ((_r((3, 7)),), {}),
    "log_softmax": lambda: ((_r((3, 7), "float64"),), {"axis": 0}),
    "layer_norm": lambda: ((_r((3, 7)), _r((7,), seed=1), _r((7,), seed=2)), {}),
    "rms_norm": lambda: ((_r((3, 7)), _r((7,), seed=1)), {}),
    "batch_norm": lambda: ((_r((2, 3, 5)), _r((3,), seed=1), _r((3,), seed=2, low=0.5, high=2),
                            _r((3,), seed=3), _r((3,), seed=4)), {}),
    # linalg
    "matmul": lambda: ((_r((3, 5)), _r((5, 7), seed=1)), {}),
    "batch_matmul": lambda: ((_r((2, 3, 5)), _r((2, 5, 7), seed=1)), {}),
    "linear": lambda: ((_r((3, 5)), _r((7, 5), seed=1), _r((7,), seed=2)), {}),
    "transpose": lambda: ((_r((3, 5), "float64"),), {}),
    "batch_transpose": lambda: ((_r((2, 3, 5, 2)),), {}),
    # attention
    "scaled_dot_product_attention": lambda: ((_r((1, 2, 5, 4)), _r((1, 2, 3, 4), seed=1),
                                              _r((1, 2, 3, 6), seed=2)), {}),
    "masked_attention": lambda: ((_r((2, 2, 5, 4)), _r((2, 2, 3, 4), seed=1),
                                  _r((2, 2, 3, 6), seed=2), np.ones((1, 1, 5, 3), bool),
                                  np.array([5, 2], np.int32), np.array([3, 1], np.int32)),
                                 {"is_causal": True}),
    # nn
    "conv2d": lambda: ((_r((1, 2, 7, 6)), _r((3, 2, 3, 3), seed=1), _r((3,), seed=2)),
                       {"padding": 1}),
    "depthwise_conv2d": lambda: ((_r((1, 3, 7, 6)), _r((3, 1, 3, 3), seed=1)), {}),
    "max_pool2d": lambda: ((_r((1, 2, 7, 6)),), {"kernel_size": 2}),
    "avg_pool2d": lambda: ((_r((1, 2, 7, 6)),), {"kernel_size": 3, "stride": 2}),
    "lstm_cell": lambda: ((_r((2, 3)), _r((2, 4), seed=1), _r((2, 4), seed=2),
                           _r((16, 3), seed=3), _r((16, 4), seed=4), _r((16,), seed=5),
                           _r((16,), seed=6)), {}),
    # image
    "box_blur": lambda: ((_r((2, 7, 9)),), {"size": 3}),
    "gaussian_blur": lambda: ((_r((7, 9)),), {"sigma": 1.0}),
    "sobel": lambda: ((_r((7, 9), "float64"),), {}),
    "resize_bilinear": lambda: ((_r((7, 9)),), {"height": 5, "width": 11}),
    "roi_align": lambda: ((_r((1, 2, 8, 9)),
                           np.array([[0, 1.0, 1.5, 6.0, 7.0], [0, 0.0, 0.0, 3.0, 4.0]], F32)),
                          {"output_size": 2}),
    # quant (int8/uint8 arrays have one byte: nothing to swap)
    "quantize": lambda: ((_r((3, 5)),), {"scale": 0.05, "zero_point": 3}),
    "requantize": lambda: ((_r((3, 5), "int32"),), {"scale": 0.5, "zero_point": -2}),
}

ONE_BYTE_ONLY = {"dequantize", "quantized_matmul", "logical_and", "logical_or", "logical_not"}
NO_ARRAY_INPUT = {"anchor_boxes"}   # sizes/ratios are read as float64 sequences

# -- layout, indexing, creation, scans, sorting, losses, distances, detection, image nn --------
_I64 = "int64"
_BOXES = np.array([[1.0, 2.0, 9.0, 8.0], [2.0, 2.0, 10.0, 9.0], [20.0, 1.0, 25.0, 7.0]], F32)
CALLS.update({
    "concat": lambda: ((_r((2, 3, 5)),), {"axis": 1}),
    "stack": lambda: ((_r((2, 3, 5), "int32"),), {"axis": 2}),
    "split": lambda: ((_r((4, 5)),), {"indices_or_sections": 2}),
    "pad": lambda: ((_r((3, 5)),), {"pad": (1, 2), "mode": "reflect"}),
    "tile": lambda: ((_r((3, 5)),), {"reps": (2, 1)}),
    "repeat": lambda: ((_r((3, 5), _I64),), {"repeats": 2, "axis": 0}),
    "flip": lambda: ((_r((3, 5)),), {"axis": 1}),
    "roll": lambda: ((_r((3, 5)),), {"shift": 2}),
    **{n: (lambda: ((_r((3, 5), "float64"),), {"k": 1})) for n in ("tril", "triu")},
    "diag": lambda: ((_r((4,)),), {"k": -1}),
    "diagonal": lambda: ((_r((3, 5)),), {"offset": 1}),
    "take_along_axis": lambda: ((_r((3, 5)), np.array([[0], [4], [-1]], _I64)), {"axis": 1}),
    "gather": lambda: ((_r((3, 5)),), {"dim": 1, "index": np.array([[0, 1], [4, 4], [2, 3]])}),
    "index_select": lambda: ((_r((3, 5)),), {"dim": 1, "index": np.array([4, 0], "int32")}),
    "embedding": lambda: ((np.array([2, 0, 2], _I64), _r((3, 5))), {}),
    "one_hot": lambda: ((np.array([2, 0, 3], _I64),), {"num_classes": 4}),
    "scatter_add": lambda: ((_r((3, 5)),), {"dim": 1, "src": _r((3, 2), seed=1),
                                            "index": np.array([[0, 0], [4, 1], [2, 2]])}),
    "masked_fill": lambda: ((_r((3, 5)), _r((5,)) > 0), {"value": 9.0}),
    "sequence_mask": lambda: ((np.array([0, 2, 5], _I64),), {"max_len": 5}),
    **{n: (lambda: ((_r((4, 7)),), {"axis": -1})) for n in (
        "all", "any", "count_nonzero", "vector_norm", "nansum", "nanmean", "nanmax", "nanmin",
        "median")},
    **{n: (lambda: ((_r((4, 7)),), {"axis": 1})) for n in (
        "cumsum", "cumprod", "cummax", "cummin", "logcumsumexp", "sort", "argsort")},
    "topk": lambda: ((_r((4, 7)),), {"k": 3}),
    **{n: (lambda: ((_r((3, 5)), _r((3, 5), seed=1, low=0.1, high=0.9)), {})) for n in (
        "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "kl_div",
        "binary_cross_entropy_with_logits", "cosine_similarity", "pairwise_distance", "cdist")},
    "binary_cross_entropy": lambda: ((_r((3, 5), low=0.1, high=0.9),
                                      _r((3, 5), seed=1, low=0.0, high=1.0)), {}),
    **{n: (lambda: ((_r((3, 5)), np.array([0, 4, -100], _I64)), {})) for n in (
        "cross_entropy", "nll_loss")},
    "group_norm": lambda: ((_r((2, 4, 5)),), {"num_groups": 2}),
    "instance_norm": lambda: ((_r((2, 3, 5)),), {}),
    "adaptive_avg_pool2d": lambda: ((_r((1, 2, 7, 6)),), {"output_size": (3, 2)}),
    "global_avg_pool2d": lambda: ((_r((1, 2, 7, 6)),), {}),
    "pixel_shuffle": lambda: ((_r((1, 4, 3, 5)),), {"upscale_factor": 2}),
    "pixel_unshuffle": lambda: ((_r((1, 1, 4, 6)),), {"downscale_factor": 2}),
    "upsample_nearest": lambda: ((_r((2, 3, 5)),), {"scale_factor": 2}),
    "box_iou": lambda: ((_BOXES, _BOXES[:2]), {}),
    "box_convert": lambda: ((_BOXES,), {"in_fmt": "xyxy", "out_fmt": "cxcywh"}),
    "nms": lambda: ((_BOXES, np.array([0.5, 0.9, 0.2], F32)), {"iou_threshold": 0.3}),
    "batched_nms": lambda: ((_BOXES, np.array([0.5, 0.9, 0.2], F32),
                             np.array([0, 1, 0], _I64)), {"iou_threshold": 0.3}),
    "roi_pool": lambda: ((_r((1, 2, 8, 9)),
                          np.array([[0, 1.0, 1.5, 6.0, 7.0], [0, 0.0, 0.0, 3.0, 4.0]], F32)),
                         {"output_size": 2}),
})
NO_ARRAY_INPUT = NO_ARRAY_INPUT | {"eye", "arange"}     # they take numbers only
# -- end of the layout ... image nn block ------------------------------------------------------

# -- math, arith, activations (pypto/ops/{math,arith,activations}.py) ----------------------------
CALLS.update({
    **{n: (lambda: ((_r((3, 5)),), {})) for n in (
        "atan", "asin", "acos", "tan", "sinh", "cosh", "asinh", "atanh", "exp2", "cbrt", "sign",
        "trunc", "deg2rad", "rad2deg", "isnan", "isinf", "isfinite", "signbit", "nan_to_num",
        "hardsigmoid", "hardswish", "mish", "elu", "selu", "celu", "softsign", "hardtanh",
        "relu6", "tanhshrink", "hardshrink", "softshrink", "log_sigmoid", "softmin")},
    **{n: (lambda: ((_r((3, 6)),), {})) for n in ("glu", "geglu")},
    **{n: (lambda: ((_r((3, 5), low=1.0, high=3.0),), {})) for n in ("acosh", "log2", "log10")},
    "logit": lambda: ((_r((3, 5), low=0.05, high=0.95),), {"eps": 0.01}),
    "threshold": lambda: ((_r((3, 5)),), {"threshold": 0.1, "value": -1.0}),
    "cast": lambda: ((_r((3, 5), low=-50, high=50),), {"dtype": "int16"}),
    "bitwise_not": lambda: ((_r((3, 5), "int32"),), {}),
    **{n: (lambda: ((_r((3, 5)), _r((3, 5), seed=1, low=0.5, high=2.0)), {})) for n in (
        "atan2", "hypot", "copysign", "fmod", "remainder", "floor_divide", "fmax", "fmin",
        "logaddexp", "logaddexp2", "heaviside")},
    "lerp": lambda: ((_r((3, 5)), _r((5,), seed=1), _r((3, 5), seed=2, low=0, high=1)), {}),
    **{n: (lambda: ((_r((3, 5), "int32"), _r((3, 5), "int32", seed=1)), {})) for n in (
        "bitwise_and", "bitwise_or", "bitwise_xor")},
    **{n: (lambda: ((_r((3, 5), "int64"), np.abs(_r((3, 5), "int64", seed=1)) % 60), {}))
       for n in ("left_shift", "right_shift")},
    "prelu": lambda: ((_r((2, 3, 5)), _r((3,), seed=1)), {}),
})
# -- end of the math, arith, activations block ---------------------------------------------------

# -- conv, pool, rnn, rotary and grid ops --------------------------------------------------------
_ANG = np.linspace(-2.0, 2.0, 5 * 3).reshape(5, 3)
_ANG = np.concatenate([_ANG, _ANG], axis=-1)
CALLS.update({
    "conv1d": lambda: ((_r((2, 4, 9)), _r((6, 2, 3), seed=1), _r((6,), seed=2)),
                       {"padding": 1, "groups": 2}),
    "conv3d": lambda: ((_r((1, 2, 4, 5, 6)), _r((3, 2, 2, 3, 3), seed=1)), {"stride": 2}),
    "conv_transpose1d": lambda: ((_r((2, 3, 7)), _r((3, 2, 4), seed=1), _r((2,), seed=2)),
                                 {"stride": 2, "padding": 1}),
    "conv_transpose2d": lambda: ((_r((1, 2, 5, 4), "float64"), _r((2, 3, 3, 3), "float64", seed=1)),
                                 {"stride": (2, 1), "output_padding": (1, 0)}),
    "max_pool1d": lambda: ((_r((2, 3, 9)),), {"kernel_size": 3, "stride": 2, "padding": 1}),
    "avg_pool1d": lambda: ((_r((2, 3, 9)),), {"kernel_size": 2}),
    "max_pool3d": lambda: ((_r((1, 2, 5, 6, 7)),), {"kernel_size": 2}),
    "avg_pool3d": lambda: ((_r((1, 2, 5, 6, 7)),), {"kernel_size": 3, "stride": 2, "padding": 1,
                                                     "count_include_pad": False}),
    "rotary_embedding": lambda: ((_r((2, 3, 5, 6)), np.cos(_ANG).astype(F32),
                                  np.sin(_ANG).astype(F32)), {}),
    "gru_cell": lambda: ((_r((2, 3)), _r((2, 4), seed=1), _r((12, 3), seed=2),
                          _r((12, 4), seed=3), _r((12,), seed=4), _r((12,), seed=5)), {}),
    "rnn_cell": lambda: ((_r((2, 3)), _r((2, 4), seed=1), _r((4, 3), seed=2),
                          _r((4, 4), seed=3)), {"nonlinearity": "relu"}),
    "affine_grid": lambda: ((_r((2, 2, 3)),), {"size": (2, 1, 5, 7)}),
    "grid_sample": lambda: ((_r((2, 3, 6, 7)), _r((2, 4, 5, 2), seed=1, low=-1.2, high=1.2)),
                            {}),
})
# -- end of the conv, pool, rnn, rotary and grid block -------------------------------------------

# -- morphology, filters, colour, warps, histograms, contractions, quantized ops -----------------
CALLS.update({
    "dilate": lambda: ((_r((2, 7, 9)),), {"kernel": 3}),
    "erode": lambda: ((_r((7, 9), "float64"),), {"kernel": (2, 3)}),
    "morph_open": lambda: ((_r((7, 9)),), {"kernel": [[0, 1, 0], [1, 1, 1], [0, 1, 0]]}),
    "morph_close": lambda: ((_r((7, 9)),), {}),
    "median_blur": lambda: ((_r((2, 7, 9)),), {"ksize": 5}),
    "laplacian": lambda: ((_r((7, 9), "float64"),), {"ksize": 3}),
    "bilateral_filter": lambda: ((_r((7, 9)),), {"d": 5, "sigma_color": 0.5,
                                                  "sigma_space": 1.0}),
    "integral_image": lambda: ((_r((2, 7, 9)),), {}),
    **{n: (lambda: ((_r((3, 2, 5), low=0.0, high=1.0),), {})) for n in (
        "rgb_to_gray", "rgb_to_hsv", "hsv_to_rgb", "rgb_to_yuv")},
    "yuv_to_rgb": lambda: ((_r((4, 3), "float64"),), {"axis": -1}),
    "resize_nearest": lambda: ((_r((2, 7, 9)),), {"height": 5, "width": 13}),
    "resize_bicubic": lambda: ((_r((7, 9), "float64"),), {"height": 11, "width": 4}),
    "warp_affine": lambda: ((_r((2, 7, 9)), np.array([[1.0, 0.2, 0.5], [-0.1, 0.9, 1.0]])), {}),
    "warp_perspective": lambda: ((_r((7, 9)), np.array([[1.0, 0.2, 0.5], [-0.1, 0.9, 1.0],
                                                        [0.01, 0.0, 1.0]], F32)), {}),
    "histogram": lambda: ((_r((3, 7)),), {"bins": 5, "range": (-1, 1)}),
    "einsum": lambda: ((_r((3, 5)), _r((5, 4), seed=1)), {"subscripts": "ij,jk->ki"}),
    "outer": lambda: ((_r((3,), "int64"), _r((5,), "int64", seed=1)), {}),
    "addmm": lambda: ((_r((4,)), _r((3, 5), seed=1), _r((5, 4), seed=2)), {"beta": 0.5}),
    "baddbmm": lambda: ((_r((2, 3, 4), "float64"), _r((2, 3, 5), "float64", seed=1),
                         _r((2, 5, 4), "float64", seed=2)), {"alpha": 2.0}),
    "trace": lambda: ((_r((2, 4, 3), "int32"),), {"axis1": 1, "axis2": 2}),
    "fake_quantize_per_tensor_affine": lambda: ((_r((3, 5), "float64"),), {
        "scale": 0.1, "zero_point": 2, "quant_min": -128, "quant_max": 127}),
    "fake_quantize_per_channel_affine": lambda: ((_r((3, 5)), np.array([0.1, 0.2, 0.05], F32),
                                                  np.array([0, 3, -2], "int32")),
                                                 {"axis": 0, "quant_min": -8, "quant_max": 7}),
    "quantized_conv2d": lambda: ((np.arange(60, dtype=np.uint8).reshape(1, 3, 4, 5),
                                  (np.arange(54) % 7 - 3).astype(np.int8).reshape(2, 3, 3, 3),
                                  np.array([100, -7], "int32")),
                                 {"padding": 1, "x_zero_point": 9}),
})
ONE_BYTE_ONLY = ONE_BYTE_ONLY | {"equalize_hist",    # uint8 images only
                                 "quantized_add", "quantized_relu"}
# -- end of the morphology ... quantized block ----------------------------------------------------


def test_every_op_with_a_multibyte_array_is_covered():
    names = {op.name for op in pypto.ops.builtin_ops()}
    assert names - ONE_BYTE_ONLY - NO_ARRAY_INPUT == set(CALLS)


@pytest.mark.parametrize("name", sorted(CALLS))
def test_swapped_byte_order_gives_the_native_result(name):
    args, kwargs = CALLS[name]()
    fn = getattr(P, name)
    want = fn(*args, **kwargs)
    swapped = [_swapped(a) if a.dtype.itemsize > 1 else a for a in args]
    assert any(not a.dtype.isnative for a in swapped)
    got = fn(*swapped, **kwargs)
    for g, w in zip(got if isinstance(got, tuple) else (got,),
                    want if isinstance(want, tuple) else (want,)):
        g, w = np.asarray(g), np.asarray(w)
        assert g.dtype == w.dtype and g.dtype.isnative, name
        np.testing.assert_array_equal(g, w, err_msg=name)


def test_the_issue_examples_give_the_right_values():
    x = np.arange(6, dtype=">f4").reshape(2, 3)
    e = np.exp(np.arange(3.0) - 2.0)
    np.testing.assert_allclose(P.softmax(x), np.tile(e / e.sum(), (2, 1)), rtol=1e-6)
    assert P.sum(np.ones(4, ">f8")) == 4.0


def test_the_canonical_kernel_call_converts_too():
    x = _r((3, 7))
    np.testing.assert_array_equal(P.softmax.kernel(_swapped(x)), P.softmax.kernel(x))


def test_a_non_native_transposed_view_is_converted():
    # A transposed big-endian view: order and layout are both fixed, values kept.
    x = _swapped(_r((5, 3))).T
    np.testing.assert_array_equal(P.exp(x), P.exp(np.ascontiguousarray(x.astype(F32))))


def test_native_arrays_pass_through_without_a_copy():
    x = _r((3, 4))
    assert as_array(x, "op", "x") is x
    y = as_array(_swapped(x), "op", "x")
    assert y.dtype.isnative and y.dtype == x.dtype
    np.testing.assert_array_equal(y, x)


class _Interface:
    """Exposes only the array interface (no ``__array__``), like some foreign buffers."""

    def __init__(self, a):
        self._a = a
        self.__array_interface__ = a.__array_interface__


def test_an_object_with_only_the_array_interface_is_accepted():
    x = _r((3, 4))
    np.testing.assert_array_equal(P.exp(_Interface(x)), P.exp(x))
    np.testing.assert_array_equal(P.exp(_Interface(_swapped(x))), P.exp(x))


def test_a_torch_tensor_that_requires_grad_raises_a_dtype_error_saying_what_to_do():
    torch = pytest.importorskip("torch")
    t = torch.ones(2, 3, requires_grad=True)
    with pytest.raises(DtypeError, match=r"requires grad.*\.detach\(\)"):
        P.softmax(t)
    with pytest.raises(DtypeError, match="argument 'b'"):
        P.matmul(np.ones((2, 3), np.float32), torch.ones(3, 2, requires_grad=True))
    with pytest.raises(DtypeError, match=r"jit: argument 'args\[0\]' is a torch tensor that "
                                         r"requires grad; pass args\[0\]\.detach\(\)"):
        pypto.jit(lambda a: a * 2)(t)
    # Detached, the same tensor is read in place of an array.
    np.testing.assert_allclose(P.softmax(t.detach()), np.full((2, 3), 1 / 3, np.float32),
                               rtol=1e-6)


_ISSUE_EXAMPLES = """
import numpy as np, pypto.ops as P
print(P.softmax(np.arange(6, dtype='>f4').reshape(2, 3))[0].tolist())
print(float(P.sum(np.ones(4, '>f8'))))
"""


def test_the_issue_examples_through_the_disk_cache(tmp_path):
    # The on-disk kernels are called through ctypes, which took the swapped bytes silently
    # (the in-memory JIT's hl.Buffer refused them with a bare ValueError instead).
    env = dict(os.environ, PYPTO_CACHE_DIR=str(tmp_path / "cache"), PYTHONPATH=ROOT)
    for _ in range(2):      # a cold cache, then kernels loaded from it
        out = subprocess.run([sys.executable, "-c", _ISSUE_EXAMPLES], env=env, text=True,
                             capture_output=True, timeout=300)
        assert out.returncode == 0, out.stderr
        row, total = out.stdout.split("\n")[:2]
        e = np.exp(np.arange(3.0) - 2.0)
        np.testing.assert_allclose(json.loads(row), e / e.sum(), rtol=1e-6)
        assert float(total) == 4.0
