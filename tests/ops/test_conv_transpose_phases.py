"""conv_transpose2d with a stride and no dilation along it: each output phase loops over its own
taps only (every s-th tap from the phase's first) and the default schedule blocks each phase
in registers as conv2d's. Checked against torch's F.conv_transpose2d and a NumPy scatter written
here (every input pixel adds w times itself to the outputs it reaches)."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import assert_close, rand

import pypto.ops as P
from pypto.compiler import targets
from pypto.compiler.lower import build
from pypto.ops import get_op
from pypto.schedule.defaults import default_schedule


def scatter(x, w, b, stride, padding, output_padding, groups):
    """The transposed convolution by its definition, in float64 (no dilation)."""
    n, c, h, wd = x.shape
    og, kh, kw = w.shape[1:]
    (sh, sw), (ph, pw), (oh_, ow_) = stride, padding, output_padding
    full_h, full_w = (h - 1) * sh + kh + oh_, (wd - 1) * sw + kw + ow_
    acc = np.zeros((n, groups * og, full_h, full_w))
    cg = c // groups
    for ci in range(c):
        g = ci // cg
        for i in range(h):
            for j in range(wd):
                v = x[:, ci, i, j].astype(np.float64)[:, None, None, None]
                acc[:, g * og:(g + 1) * og, i * sh:i * sh + kh, j * sw:j * sw + kw] += (
                    v * w[ci].astype(np.float64)[None])
    out_h, out_w = (h - 1) * sh - 2 * ph + kh + oh_, (wd - 1) * sw - 2 * pw + kw + ow_
    return (acc[:, :, ph:ph + out_h, pw:pw + out_w] + b[None, :, None, None]).astype(x.dtype)


CASES = [
    # (N, C, (H, W), OG, (KH, KW), stride, padding, output_padding, groups)
    (1, 16, (14, 14), 8, (4, 4), (2, 2), (1, 1), (0, 0), 1),   # the DCGAN-like form
    (2, 5, (7, 9), 7, (3, 3), (2, 2), (1, 1), (1, 0), 1),      # K not a multiple of s: odd W
    (1, 6, (5, 6), 4, (4, 5), (3, 2), (0, 2), (2, 1), 2),      # groups, stride 3
    (1, 3, (6, 5), 3, (2, 2), (3, 3), (0, 0), (0, 0), 1),      # s > K: phases with no tap
    (1, 3, (6, 6), 3, (2, 2), (3, 3), (0, 0), (0, 0), 1),      # a tile narrower than 16 columns
    (1, 4, (9, 11), 5, (3, 4), (1, 2), (1, 1), (0, 1), 1),     # stride along W only
    (1, 4, (9, 11), 5, (4, 3), (2, 1), (2, 0), (1, 0), 1),     # stride along H only
    (3, 8, (3, 40), 9, (4, 4), (2, 2), (1, 1), (1, 1), 1),     # wide rows, tails everywhere
]


@pytest.mark.parametrize("dt", ["float32", "float64"])
@pytest.mark.parametrize("case", CASES, ids=str)
def test_strided_conv_transpose2d_matches_the_scatter(case, dt):
    n, c, size, og, ks, s, p, op_, g = case
    x, w, b = rand((n, c, *size), dt, 1), rand((c, og, *ks), dt, 2), rand((og * g,), dt, 3)
    got = P.conv_transpose2d(x, w, b, stride=s, padding=p, output_padding=op_, groups=g)
    assert_close(got, scatter(x, w, b, s, p, op_, g), dt)


def test_strided_conv_transpose2d_matches_torch():
    torch = pytest.importorskip("torch")
    x, w, b = rand((2, 64, 28, 28), "float32", 4), rand((64, 32, 4, 4), "float32", 5), \
        rand((32,), "float32", 6)
    got = P.conv_transpose2d(x, w, b, stride=2, padding=1)
    want = torch.nn.functional.conv_transpose2d(*map(torch.from_numpy, (x, w, b)), stride=2,
                                                padding=1).numpy()
    assert_close(got, want, "float32")


def test_a_nan_reaches_only_the_outputs_its_taps_touch():
    """A phase skips the taps of other phases instead of multiplying zeros: a NaN input reaches
    exactly its KH x KW window of the output, every other output stays finite."""
    x = rand((1, 3, 6, 7), "float32", 7)
    x[0, 1, 2, 3] = np.nan
    w = np.abs(rand((3, 2, 3, 3), "float32", 8)) + 0.1
    got = P.conv_transpose2d(x, w, stride=2, padding=1)
    reach = np.zeros(got.shape[2:], bool)
    reach[2 * 2 - 1:2 * 2 + 2, 3 * 2 - 1:3 * 2 + 2] = True
    assert np.isnan(got[0][:, reach]).all()
    assert np.isfinite(got[0][:, ~reach]).all()


def test_default_schedule_blocks_each_phase_in_registers():
    """The phases are unrolled outside the reduction (their taps differ), with the sums of a
    tile computed per tile of ``out`` (in registers), not per task in memory."""
    op = get_op("conv_transpose2d")
    params = op.resolve_params({"stride_h": 2, "stride_w": 2, "pad_h": 1, "pad_w": 1})
    built = build(op, ("float32",) * 3, params)
    dims = {"N": 1, "C": 64, "H": 28, "W": 28, "OG": 32, "O": 32, "KH": 4, "KW": 4, "OH": 56,
            "OW": 56}
    ds = default_schedule(built, dims, targets.host()).directives
    at = [d for d in ds if d.op == "compute_at" and d.func == "acc"]
    assert at and at[0].get("var") == "owo"
    unrolled = {d.get("var") for d in ds if d.op == "unroll" and d.func == "acc" and d.stage == 1}
    assert {"pw", "ph"} <= unrolled
    order = next(d.get("vars") for d in ds if d.op == "reorder" and d.func == "acc")
    assert order.index("r$z") < order.index("pw") and order.index("r$z") < order.index("ph")


def test_strided_conv_transpose2d_inside_a_program_with_an_epilogue():
    """In a traced program the phase schedule (with its bounds on ``out``) moves to the
    pointwise chain that ends at the output; the result is the eager one's."""
    import pypto

    x, w = rand((2, 6, 9, 7), "float32", 11), rand((6, 5, 3, 4), "float32", 12)
    f = pypto.jit(lambda x, w: P.relu(P.conv_transpose2d(x, w, stride=2, padding=1)) * 2.0)
    want = np.maximum(scatter(x, w, np.zeros(5, np.float32), (2, 2), (1, 1), (0, 0), 1), 0) * 2
    assert_close(f(x, w), want.astype(np.float32), "float32")


# -- conv_transpose1d: the same phases along one axis ------------------------------------------
def scatter1d(x, w, b, stride, padding, output_padding, groups):
    """The 1-D transposed convolution by its definition, in float64 (no dilation)."""
    n, c, length = x.shape
    og, k = w.shape[1:]
    acc = np.zeros((n, groups * og, (length - 1) * stride + k + output_padding))
    cg = c // groups
    for ci in range(c):
        g = ci // cg
        for i in range(length):
            acc[:, g * og:(g + 1) * og, i * stride:i * stride + k] += (
                x[:, ci, i].astype(np.float64)[:, None, None] * w[ci].astype(np.float64)[None])
    out_len = (length - 1) * stride - 2 * padding + k + output_padding
    return (acc[:, :, padding:padding + out_len] + b[None, :, None]).astype(x.dtype)


CASES_1D = [
    # (N, C, L, OG, K, stride, padding, output_padding, groups)
    (8, 32, 512, 16, 4, 2, 1, 0, 1),       # the generator-like form: tiles, tasks of chunks
    (1, 16, 300, 7, 4, 2, 1, 1, 1),        # one sample: chunks shared out, tails everywhere
    (2, 5, 9, 7, 3, 2, 1, 1, 1),           # K not a multiple of s, fewer outputs than a tile
    (1, 6, 40, 4, 5, 3, 2, 2, 2),          # groups, stride 3
    (1, 3, 6, 3, 2, 3, 0, 0, 1),           # s > K: phases with no tap; a 12-wide tile
]


@pytest.mark.parametrize("dt", ["float32", "float64"])
@pytest.mark.parametrize("case", CASES_1D, ids=str)
def test_strided_conv_transpose1d_matches_the_scatter(case, dt):
    n, c, length, og, k, s, p, op_, g = case
    x, w, b = rand((n, c, length), dt, 1), rand((c, og, k), dt, 2), rand((og * g,), dt, 3)
    got = P.conv_transpose1d(x, w, b, stride=s, padding=p, output_padding=op_, groups=g)
    assert_close(got, scatter1d(x, w, b, s, p, op_, g), dt)


def test_strided_conv_transpose1d_matches_torch():
    torch = pytest.importorskip("torch")
    x, w, b = rand((8, 128, 512), "float32", 4), rand((128, 64, 4), "float32", 5), \
        rand((64,), "float32", 6)
    got = P.conv_transpose1d(x, w, b, stride=2, padding=1)
    want = torch.nn.functional.conv_transpose1d(*map(torch.from_numpy, (x, w, b)), stride=2,
                                                padding=1).numpy()
    assert_close(got, want, "float32")


def test_a_nan_reaches_only_the_outputs_its_taps_touch_1d():
    x = rand((1, 3, 40), "float32", 7)
    x[0, 1, 17] = np.nan
    w = np.abs(rand((3, 2, 3), "float32", 8)) + 0.1
    got = P.conv_transpose1d(x, w, stride=2, padding=1)
    reach = np.zeros(got.shape[2], bool)
    reach[17 * 2 - 1:17 * 2 + 2] = True
    assert np.isnan(got[0][:, reach]).all()
    assert np.isfinite(got[0][:, ~reach]).all()


def test_conv_transpose1d_default_schedule_blocks_each_phase_in_registers():
    op = get_op("conv_transpose1d")
    params = op.resolve_params({"stride": 2, "pad": 1})
    built = build(op, ("float32",) * 3, params)
    dims = {"N": 8, "C": 128, "L": 512, "OG": 64, "O": 64, "K": 4, "OL": 1024}
    ds = default_schedule(built, dims, targets.host()).directives
    at = [d for d in ds if d.op == "compute_at" and d.func == "acc"]
    assert at and at[0].get("var") == "olo"
    unrolled = {d.get("var") for d in ds if d.op == "unroll" and d.func == "acc" and d.stage == 1}
    assert "pl" in unrolled
    order = next(d.get("vars") for d in ds if d.op == "reorder" and d.func == "acc")
    assert order.index("r$y") < order.index("pl")


def test_strided_conv_transpose1d_inside_a_program_with_an_epilogue():
    import pypto

    x, w = rand((2, 6, 37), "float32", 11), rand((6, 5, 4), "float32", 12)
    f = pypto.jit(lambda x, w: P.relu(P.conv_transpose1d(x, w, stride=2, padding=1)) * 2.0)
    want = np.maximum(scatter1d(x, w, np.zeros(5, np.float32), 2, 1, 0, 1), 0) * 2
    assert_close(f(x, w), want.astype(np.float32), "float32")
