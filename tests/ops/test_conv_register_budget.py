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
