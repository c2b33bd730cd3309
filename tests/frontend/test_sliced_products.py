"""Programs that read only part of a product: ``linear(x, w, b)[0:64] + 1`` and the like.

A value computed at root is computed over what its readers need, so the producer's schedule must
be made for the part read, not for its whole extent: a row tile of 512 shifted inwards to stay
within the 64 rows computed read the input 448 rows before its start, and the program ran at the
safe default. Each program here must run with its full fused default (no fallback, no
PerformanceWarning) and match NumPy, written independently of the kernels.
"""

import warnings

import numpy as np
import pytest

import pypto
from helpers import program_segments
from pypto.errors import PerformanceWarning

P = pypto.ops
RNG = np.random.default_rng(23)


def _f32(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def _conv_ref(x, w, b):
    """conv2d, stride 1, no padding, as sums over the taps (NCHW, OIHW)."""
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    out = np.zeros((n, o, h - kh + 1, wd - kw + 1), np.float64)
    for i in range(kh):
        for j in range(kw):
            patch = x[:, :, i:i + h - kh + 1, j:j + wd - kw + 1].astype(np.float64)
            out += np.einsum("nchw,oc->nohw", patch, w[:, :, i, j].astype(np.float64))
    return out + b[None, :, None, None]


def _softmax_ref(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


_segments = program_segments


def _run_fused(fn, *arrays):
    """``fn`` jitted and called on ``arrays``; asserts each pipeline ran its full fused default
    (the first attempt: the outputs' ``bound`` directives are there, the ``bare`` retry leaves
    them out) and that no fallback warning was given."""
    f = pypto.jit(fn)
    with warnings.catch_warnings():
        warnings.simplefilter("error", PerformanceWarning)
        got = f(*arrays)
    segs = _segments(f)
    assert segs
    for seg in segs:
        assert seg.kernel.source == "default (fused)", seg.kernel.source
        assert any(d.op == "bound" and d.func.startswith("o") for d in
                   seg.kernel.schedule.directives), "the bare retry ran, not the full default"
    return np.asarray(got), f


X, W, B = _f32(512, 256), _f32(128, 256), _f32(128)
XO, WO, BO = _f32(77, 45), _f32(33, 45), _f32(33)
XC, WC, BC = _f32(2, 3, 20, 21), _f32(4, 3, 3, 3), _f32(4)
E = _f32(300, 70)


def _lin(x, w, b):
    return x.astype(np.float64) @ w.T.astype(np.float64) + b


CASES = {
    # the reported program, and slices at the middle and at the end
    "linear_start": (lambda x, w, b: P.linear(x, w, b)[0:64] + 1.0, (X, W, B),
                     lambda x, w, b: _lin(x, w, b)[0:64] + 1),
    "linear_middle": (lambda x, w, b: P.linear(x, w, b)[200:264] * 2.0, (X, W, B),
                      lambda x, w, b: _lin(x, w, b)[200:264] * 2),
    "linear_end": (lambda x, w, b: P.linear(x, w, b)[448:] - 1.0, (X, W, B),
                   lambda x, w, b: _lin(x, w, b)[448:] - 1),
    "linear_columns": (lambda x, w, b: P.linear(x, w, b)[:, 5:17] + 1.0, (X, W, B),
                       lambda x, w, b: _lin(x, w, b)[:, 5:17] + 1),
    "linear_odd": (lambda x, w, b: P.linear(x, w, b)[3:10, 1:30] + 1.0, (XO, WO, BO),
                   lambda x, w, b: _lin(x, w, b)[3:10, 1:30] + 1),
    "linear_last_row": (lambda x, w, b: P.linear(x, w, b)[76:77] + 1.0, (XO, WO, BO),
                        lambda x, w, b: _lin(x, w, b)[76:77] + 1),
    "linear_slice_of_slice": (lambda x, w, b: P.linear(x, w, b)[100:300][10:20] + 1.0,
                              (X, W, B), lambda x, w, b: _lin(x, w, b)[110:120] + 1),
    "linear_reversed": (lambda x, w, b: P.linear(x, w, b)[60:5:-3] + 1.0, (X, W, B),
                        lambda x, w, b: _lin(x, w, b)[60:5:-3] + 1),
    "linear_then_sum": (lambda x, w, b: P.linear(x, w, b)[0:64].sum(axis=1), (X, W, B),
                        lambda x, w, b: _lin(x, w, b)[0:64].sum(axis=1)),
    "matmul_block": (lambda x, w: P.matmul(x, w)[100:130, 3:9] + 1.0, (X, W.T.copy()),
                     lambda x, w: (x.astype(np.float64) @ w)[100:130, 3:9] + 1),
    "matmul_two_slices": (lambda x, w: P.matmul(x, w)[0:10] + P.matmul(x, w)[20:30],
                          (X, W.T.copy()),
                          lambda x, w: (x.astype(np.float64) @ w)[0:10]
                          + (x.astype(np.float64) @ w)[20:30]),
    "matmul_strided": (lambda x, w: P.matmul(x, w)[1:300:7] + 1.0, (X, W.T.copy()),
                       lambda x, w: (x.astype(np.float64) @ w)[1:300:7] + 1),
    "matmul_of_a_slice": (lambda x, w: P.matmul((x * 2.0)[0:5], w) + 1.0, (X, W.T.copy()),
                          lambda x, w: (x[0:5] * 2).astype(np.float64) @ w + 1),
    "batched_matmul": (lambda a, c: P.matmul(a, c)[1:2, 7:20] + 1.0,
                       (_f32(3, 40, 30), _f32(3, 30, 50)),
                       lambda a, c: (a.astype(np.float64) @ c)[1:2, 7:20] + 1),
    "conv2d_rows": (lambda x, w, b: P.conv2d(x, w, b)[:, :, 5:9] + 1.0, (XC, WC, BC),
                    lambda x, w, b: _conv_ref(x, w, b)[:, :, 5:9] + 1),
    "conv2d_corner": (lambda x, w, b: P.conv2d(x, w, b)[1:, 2:, :, 15:] * 3.0, (XC, WC, BC),
                      lambda x, w, b: _conv_ref(x, w, b)[1:, 2:, :, 15:] * 3),
    "elementwise_chain": (lambda x: (P.tanh(x * 0.5) + 1.0)[10:13, 3:60] * 2.0, (E,),
                          lambda x: (np.tanh(x.astype(np.float64) * 0.5) + 1)[10:13, 3:60] * 2),
    "row_sums": (lambda x: P.sum(x, axis=1)[3:6] + 1.0, (E,),
                 lambda x: x.astype(np.float64).sum(axis=1)[3:6] + 1),
    "softmax_block": (lambda x: P.softmax(x)[5:9, 2:5] + 1.0, (E,),
                      lambda x: _softmax_ref(x.astype(np.float64))[5:9, 2:5] + 1),
    # read through a reshape: the LSTM's input projection, one step of it
    "linear_reshaped_step": (lambda x, w, b: P.linear(x, w, b).reshape(8, 64, 128)[0] + 1.0,
                             (X, W, B), lambda x, w, b: _lin(x, w, b)[0:64] + 1),
    "linear_reshaped_middle": (lambda x, w, b: P.linear(x, w, b).reshape(8, 64, 128)[3] * 2.0,
                               (X, W, B), lambda x, w, b: _lin(x, w, b)[192:256] * 2),
    "linear_reshaped_flat": (lambda x, w, b: P.linear(x, w, b).reshape(-1)[130:390] + 1.0,
                             (X, W, B), lambda x, w, b: _lin(x, w, b).reshape(-1)[130:390] + 1),
}


@pytest.mark.parametrize("name", list(CASES))
def test_a_program_reading_part_of_a_value_runs_its_fused_default(name):
    fn, arrays, ref = CASES[name]
    got, _ = _run_fused(fn, *arrays)
    want = ref(*arrays)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=2e-4, atol=2e-3)


def test_the_products_schedule_is_made_for_the_rows_read():
    """The reported program: linear's own schedule (its parallel tiles, not the structural
    default) over the 64 rows read, no loop split wider than that."""
    got, f = _run_fused(lambda x, w, b: P.linear(x, w, b)[0:64] + 1.0, X, W, B)
    np.testing.assert_allclose(got, _lin(X, W, B)[0:64] + 1, rtol=2e-4, atol=2e-3)
    (seg,) = _segments(f)
    (anchor,) = seg.op.plan.anchors
    name = anchor["outs"][0]
    mine = [d for d in seg.kernel.schedule.directives if d.func == name]
    assert any(d.op == "parallel" for d in mine)
    row_var = seg.op.plan.funcs[name].func.args()[1].name()
    splits = [d for d in mine if d.op == "split" and d.get("var") == row_var]
    assert splits and all(d.get("factor") <= 64 for d in splits)


def test_the_part_read_through_a_reshape():
    """linear [512, 128] read as [8, 64, 128] at step 3: rows 192-256 of it; read flat at
    elements 130-390: rows 1-4 (bounds exact where the corners' rows agree, whole after)."""
    from pypto.frontend.graph import _flat_bounds

    assert _flat_bounds([(3, 4), (0, 64), (0, 128)], (8, 64, 128), (512, 128)) == \
        [(192, 256), (0, 128)]
    assert _flat_bounds([(130, 390)], (512 * 128,), (512, 128)) == [(1, 4), (0, 128)]
    assert _flat_bounds([(1, 2), (5, 6)], (4, 10), (2, 20)) == [(0, 1), (15, 16)]
    got, f = _run_fused(lambda x, w, b: P.linear(x, w, b).reshape(8, 64, 128)[3] + 1.0, X, W, B)
    (seg,) = _segments(f)
    (anchor,) = seg.op.plan.anchors
    from pypto.frontend.graph import _anchor_region

    region, dims = _anchor_region(anchor, seg.op.plan)
    assert list(region.values()) == [((192, 256), (0, 128))] and dims["R"] == 64


def test_the_part_read_and_the_dims_it_needs():
    """conv2d's output read at [:, :, 5:9, 4:15]: the box read, and conv2d's dims for it."""
    from pypto.frontend.graph import _anchor_region

    got, f = _run_fused(lambda x, w, b: P.conv2d(x, w, b)[:, :, 5:9, 4:15] + 1.0, XC, WC, BC)
    np.testing.assert_allclose(got, _conv_ref(XC, WC, BC)[:, :, 5:9, 4:15] + 1,
                               rtol=2e-4, atol=2e-3)
    (seg,) = _segments(f)
    low = seg.op.plan
    (anchor,) = low.anchors
    region, dims = _anchor_region(anchor, low)
    assert list(region.values()) == [((0, 2), (0, 4), (5, 9), (4, 15))]
    assert dims["OH"] == 4 and dims["OW"] == 11
    assert dims["N"] == 2 and dims["O"] == 4 and dims["H"] == 20 and dims["W"] == 21


def test_a_bound_of_the_ops_schedule_becomes_the_part_read():
    """An op whose own schedule bounds its output from 0 (a colour conversion's channel axis):
    given a part read that starts elsewhere, the bound is that part (a bound from 0 would
    compute channels the readers do not read, or too few of those they do)."""
    from pypto.compiler import targets
    from pypto.frontend.graph import _anchor_directives, _region_dims

    x = RNG.random((2, 3, 40, 50)).astype(np.float32)
    got, f = _run_fused(lambda x: P.rgb_to_hsv(x) + 0.5, x)
    want = np.asarray(pypto.get_op("rgb_to_hsv").reference(x)) + 0.5
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    (seg,) = _segments(f)
    low = seg.op.plan
    (anchor,) = low.anchors
    (name,) = anchor["outs"]
    shape = low.funcs[name].shape
    assert shape[1] == 3
    region = {name: ((0, shape[0]), (1, 3), (0, shape[2]))}
    dims = _region_dims(anchor, anchor["node"], low, region)
    assert dims["C"] == 2
    ds = _anchor_directives(anchor, anchor["node"], targets.current(), {}, region, dims)
    whole = _anchor_directives(anchor, anchor["node"], targets.current(), {})
    assert [(d.get("min"), d.get("extent")) for d in whole
            if d.op == "bound" and d.func == name] == [(0, 3)]
    assert [(d.get("min"), d.get("extent")) for d in ds
            if d.op == "bound" and d.func == name] == [(1, 2)]
