"""conv2d's register tile per vector width: AVX2's budget (16 registers of 32 bytes) for 8
float32 lanes, AVX-512's (32 of 64 bytes) for 16, whatever the host; the AVX-512 plan compiles
for an AVX-512 target (it runs where the host has one: the conv2d tests then check its values).
Values against float64 NumPy at the host's width."""

from __future__ import annotations

import halide as hl
import numpy as np
import pytest
from helpers import assert_close, rand

import pypto.ops as P
from pypto.compiler import targets
from pypto.compiler.lower import build
from pypto.schedule.apply import apply_schedule
from pypto.schedule.directives import LIMITS
from pypto.schedule.schedule import Schedule
from pypto.schedule.templates import nn as T

PARAMS = {"stride_h": 1, "stride_w": 1, "pad_h": 1, "pad_w": 1, "dil_h": 1, "dil_w": 1,
          "groups": 1}


def _dims(hw, c=64, o=64):
    return {"N": 1, "C": c, "H": hw, "W": hw, "O": o, "CG": c, "KH": 3, "KW": 3,
            "OH": hw, "OW": hw}


def _tile(ds):
    """(accumulators, tap unroll) of a conv2d plan: the product of the acc stage's unrolled and
    vectorized extents in vectors, and whether the kernel columns are unrolled."""
    acc = 1
    for d in ds:
        if d.func == "acc" and d.stage == 0 and d.op == "unroll" and d.get("factor"):
            acc *= d.get("factor")
    taps = any(d.func == "acc" and d.stage == 1 and d.op == "unroll" and d.get("var") == "rxi"
               for d in ds)
    return acc, taps


@pytest.mark.parametrize("lanes, regs, max_acc", [(8, T.REGISTERS, T.MAX_ACC),
                                                  (16, T.WIDE_REGISTERS, T.WIDE_MAX_ACC)])
@pytest.mark.parametrize("hw", [28, 56, 112])
def test_tile_fits_the_register_file_of_the_width(lanes, regs, max_acc, hw):
    built = build(P.conv2d, ("float32",) * 3, PARAMS)
    assert T.register_budget(built, lanes)[:2] == (regs, max_acc)
    nv, rb, ob = T._conv_tile(hw, hw, 64, lanes, T.register_budget(built, lanes))
    assert nv * rb * ob <= max_acc and nv * rb * ob + nv * rb + 1 <= regs
    ds = T._conv2d(built, _dims(hw), lanes)
    acc, taps = _tile(ds)
    assert acc == rb * ob
    if lanes == 16:
        # the wider file holds more than AVX2's 12 accumulators, with the columns unrolled
        assert nv * rb * ob > T.MAX_ACC and taps
        assert lanes * nv * rb * ob * 3 <= LIMITS["unrolled_body"]


def test_the_avx512_plan_compiles_for_an_avx512_target(tmp_path):
    built = build(P.conv2d, ("float32",) * 3, PARAMS)
    ds = T._conv2d(built, _dims(56), 16)
    apply_schedule(built, Schedule(op="conv2d", directives=tuple(ds)))
    target = targets.parse("x86-64-avx512").with_feature(hl.TargetFeature.NoRuntime)
    out = tmp_path / "conv.s"
    built.pipeline.compile_to({hl.OutputFileType.assembly: str(out)}, built.images, "conv", target)
    assert "zmm" in out.read_text()          # 64-byte vectors in the generated code


@pytest.mark.parametrize("hw, c, o", [(56, 64, 64), (13, 5, 21), (30, 16, 33)])
def test_values_at_the_host_width(hw, c, o):
    x, w, b = rand((1, c, hw, hw), seed=1), rand((o, c, 3, 3), seed=2), rand((o,), seed=3)
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    want = np.zeros((1, o, hw, hw)) + b.astype(np.float64)[None, :, None, None]
    for i in range(3):
        for j in range(3):
            want += np.einsum("nchw,oc->nohw", xp[:, :, i:i + hw, j:j + hw],
                              w[:, :, i, j].astype(np.float64))
    assert_close(P.conv2d(x, w, b, padding=1), want.astype(np.float32), rtol=1e-4, atol=1e-4)


# -- output channels as vector lanes ---------------------------------------------------------------
def _conv_ref(x, w, b, stride, pad):
    """float64 direct convolution by kernel taps (einsum per tap), written apart from the op."""
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    oh, ow = (h + 2 * pad - kh) // stride + 1, (wd + 2 * pad - kw) // stride + 1
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    want = np.zeros((n, o, oh, ow)) + b.astype(np.float64)[None, :, None, None]
    for i in range(kh):
        for j in range(kw):
            view = xp[:, :, i:i + stride * (oh - 1) + 1:stride, j:j + stride * (ow - 1) + 1:stride]
            want += np.einsum("nchw,oc->nohw", view, w[:, :, i, j].astype(np.float64))
    return want


def _run_plan(directives, params, dims, arrays, target=None):
    from pypto.compiler.jit import compile_built
    from pypto.runtime import run_kernel

    built = build(P.conv2d, ("float32",) * 3, params)
    k = compile_built(built, Schedule(op="conv2d", directives=tuple(directives)),
                      target or targets.current(), source="test")
    out = [np.full((dims["N"], dims["O"], dims["OH"], dims["OW"]), np.nan, np.float32)]
    run_kernel(k, P.conv2d, arrays, dims, out=out)
    return out[0]


@pytest.mark.parametrize("n, c, o, hw, k, stride, tile", [
    (1, 64, 64, 56, 3, 1, (28, 1)),      # the ResNet layer: two tiles per row
    (2, 16, 32, 30, 3, 1, (7, 4)),       # tiles overlapping at the row's end and the bottom
    (1, 8, 16, 23, 5, 2, (5, 3)),        # stride 2, 5 x 5 taps, tails both ways
    (3, 3, 16, 20, 1, 1, (6, 2)),        # 1 x 1 taps, three channels in
])
def test_a_channel_lane_plan_is_right(n, c, o, hw, k, stride, tile):
    pad = k // 2
    params = {**PARAMS, "stride_h": stride, "stride_w": stride, "pad_h": pad, "pad_w": pad}
    oh = (hw + 2 * pad - k) // stride + 1
    dims = {"N": n, "C": c, "H": hw, "W": hw, "O": o, "CG": c, "KH": k, "KW": k, "OH": oh,
            "OW": oh}
    x, w, b = rand((n, c, hw, hw), seed=4), rand((o, c, k, k), seed=5), rand((o,), seed=6)
    built = build(P.conv2d, ("float32",) * 3, params)
    ds = T._conv2d_channel_lanes(built, dims, 16, *tile)
    assert any(d.op == "wrap" for d in ds)      # the weights are restaged, channels innermost
    got = _run_plan(ds, params, dims, [x, w, b])
    assert_close(got, _conv_ref(x, w, b, stride, pad).astype(np.float32), rtol=1e-4, atol=1e-4)


def test_the_avx2_channel_lane_plan_is_right():
    dims = _dims(30, 16, 24)
    x, w, b = rand((1, 16, 30, 30), seed=7), rand((24, 16, 3, 3), seed=8), rand((24,), seed=9)
    built = build(P.conv2d, ("float32",) * 3, PARAMS)
    ds = T._conv2d_channel_lanes(built, dims, 8, 6, 2)
    target = targets.parse("x86-64-avx2") if targets.current().has_feature(
        hl.TargetFeature.AVX2) else None
    got = _run_plan(ds, PARAMS, dims, [x, w, b], target)
    assert_close(got, _conv_ref(x, w, b, 1, 1).astype(np.float32), rtol=1e-4, atol=1e-4)


def test_the_default_takes_channel_lanes_where_the_column_tile_wastes_work():
    built = build(P.conv2d, ("float32",) * 3, PARAMS)
    # 56 columns in vectors of 16: the last vector of a row is half outside; 28 x 1 pixels fit
    assert T._channel_lane_tile(built, _dims(56), 16) == (28, 1)
    # 112 columns are whole vectors; 28 x 28 is too small to pay for restaging the weights
    assert T._channel_lane_tile(built, _dims(112), 16) is None
    assert T._channel_lane_tile(built, _dims(28), 16) is None
    # output channels that are not whole vectors, and grouped convolutions, keep the columns
    assert T._channel_lane_tile(built, _dims(56, 64, 40), 16) is None
    grouped = build(P.conv2d, ("float32",) * 3, {**PARAMS, "groups": 2})
    assert T._channel_lane_tile(grouped, {**_dims(56), "CG": 32}, 16) is None
    # the template itself: channel lanes at 56, columns at 112
    assert any(d.op == "wrap" for d in T._conv2d_default(built, _dims(56), 16))
    assert not any(d.op == "wrap" for d in T._conv2d_default(built, _dims(112), 16))


def test_the_stride1_transposed_convolution_takes_the_channel_lane_plan():
    """conv_transpose2d at stride 1 has conv2d's loops (its weight [C, O, KH, KW] restaged
    with O innermost): the plan is taken where conv2d's would be, and is right."""
    torch = pytest.importorskip("torch")

    from pypto.compiler.jit import compile_built
    from pypto.runtime import run_kernel
    from pypto.schedule.templates import conv as TC

    params = {"stride_h": 1, "stride_w": 1, "pad_h": 1, "pad_w": 1, "out_pad_h": 0,
              "out_pad_w": 0, "dil_h": 1, "dil_w": 1, "groups": 1}
    dims = {"N": 1, "C": 24, "H": 40, "W": 40, "OG": 32, "KH": 3, "KW": 3, "O": 32, "OH": 40,
            "OW": 40}
    built = build(P.conv_transpose2d, ("float32",) * 3, params)
    ds = TC._stride1_as_conv2d(built, dims, 16)
    assert any(d.op == "wrap" for d in ds)
    x, w, b = rand((1, 24, 40, 40), seed=10), rand((24, 32, 3, 3), seed=11), rand((32,), seed=12)
    k = compile_built(built, Schedule(op="conv_transpose2d", directives=tuple(ds)),
                      targets.current(), source="test")
    out = [np.full((1, 32, 40, 40), np.nan, np.float32)]
    run_kernel(k, P.conv_transpose2d, [x, w, b], dims, out=out)
    want = torch.nn.functional.conv_transpose2d(
        torch.from_numpy(x).double(), torch.from_numpy(w).double(), torch.from_numpy(b).double(),
        padding=1).numpy()
    assert_close(out[0], want.astype(np.float32), rtol=1e-4, atol=1e-4)
