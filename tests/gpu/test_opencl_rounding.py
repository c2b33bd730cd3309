"""Rounding at exact halves on the OpenCL target (PoCL): every op that rounds to an integer
rounds ties to even there as on the host (np.rint), vectorized and in the tail."""

from __future__ import annotations

import numpy as np
import pytest

import pypto
from helpers import opencl_device
from pypto.runtime import observe

o = pypto.ops
needs_opencl = pytest.mark.skipif(not opencl_device(), reason="needs an OpenCL device (PoCL)")
HALVES = np.tile(np.arange(-64, 65) * 0.5, 9)            # 1161 values: ties, integers


def _on_opencl(fn):
    with observe() as calls, pypto.target("opencl"):
        got = fn()
    assert calls and "opencl" in calls[-1][4].target, "the call did not run on OpenCL"
    return got


CASES = {
    "round float32": (lambda: o.round(HALVES.astype(np.float32)), np.rint(HALVES)),
    "round float64": (lambda: o.round(HALVES), np.rint(HALVES)),
    "quantize": (lambda: o.quantize(HALVES.astype(np.float32), 1.0, 0, "int8"),
                 np.clip(np.rint(HALVES), -128, 127)),
    "requantize": (lambda: o.requantize((HALVES * 4).astype(np.int32), 0.25, 3, "int8"),
                   np.rint(HALVES) + 3),
    "fake_quantize_per_tensor": (
        lambda: o.fake_quantize_per_tensor_affine(HALVES.astype(np.float32), 1.0, 0, -128, 127),
        np.clip(np.rint(HALVES), -128, 127)),
    "quantized_add": (
        lambda: o.quantized_add((HALVES * 2).astype(np.int8), np.zeros(1, np.int8), 0.5, 0,
                                1.0, 0, 1.0, 0),
        np.rint(HALVES)),
}


@pytest.mark.opencl
@needs_opencl
@pytest.mark.parametrize("case", sorted(CASES))
def test_ties_round_to_even_on_opencl(case):
    fn, want = CASES[case]
    host = fn()
    got = _on_opencl(fn)
    np.testing.assert_array_equal(np.asarray(host, np.float64), want)
    np.testing.assert_array_equal(np.asarray(got, np.float64), want)


@pytest.mark.opencl
@needs_opencl
def test_grid_sample_nearest_ties_on_opencl():
    x = np.arange(2 * 9 * 9, dtype=np.float32).reshape(2, 1, 9, 9)
    # align_corners: pixel = (g + 1) / 2 * 8, so g = k / 8 - 1 lands on k / 2 (ties at odd k).
    k = np.arange(17)
    g = (k / 8.0 - 1).astype(np.float32)
    grid = np.stack(np.broadcast_arrays(g[None, :], g[:, None]), -1)[None].repeat(2, 0)
    kw = dict(mode="nearest", padding_mode="zeros", align_corners=True)
    host = o.grid_sample(x, grid, **kw)
    got = _on_opencl(lambda: o.grid_sample(x, grid, **kw))
    idx = np.rint(k / 2).astype(int)
    want = x[:, :, idx[:, None], idx[None, :]]
    np.testing.assert_array_equal(host, want)
    np.testing.assert_array_equal(got, want)
