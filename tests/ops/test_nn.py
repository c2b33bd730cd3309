"""The nn family: conv2d, depthwise_conv2d, max_pool2d, avg_pool2d and lstm_cell vs NumPy."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import assert_close, rand

from pypto.errors import DtypeError, ParamError, ShapeError
from pypto.ops import get_op

conv2d = get_op("conv2d")
depthwise = get_op("depthwise_conv2d")
max_pool = get_op("max_pool2d")
avg_pool = get_op("avg_pool2d")
lstm = get_op("lstm_cell")

FLOATS = ["float32", "float64"]


def _direct_conv(x, w, b, stride, padding, dilation, groups):
    """A loop-by-loop conv2d in float64, independent of the op's reference."""
    (sh, sw), (ph, pw), (dh, dw) = stride, padding, dilation
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    oh = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    ow = (wd + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    og = o // groups
    out = np.zeros((n, o, oh, ow))
    x64, w64 = x.astype(np.float64), w.astype(np.float64)
    for oc in range(o):
        g = oc // og
        for i in range(oh):
            for j in range(ow):
                for a in range(kh):
                    for bb in range(kw):
                        r, s = i * sh + a * dh - ph, j * sw + bb * dw - pw
                        if 0 <= r < h and 0 <= s < wd:
                            xs = x64[:, g * cg:(g + 1) * cg, r, s]
                            out[:, oc, i, j] += xs @ w64[oc, :, a, bb]
    if b is not None:
        out += b.astype(np.float64)[None, :, None, None]
    return out


# -- conv2d ----------------------------------------------------------------------------------------
CONV_CASES = [
    # (N, C, H, W, O, KH, KW, stride, padding, dilation, groups)
    (1, 1, 1, 1, 1, 1, 1, 1, 0, 1, 1),
    (2, 4, 11, 13, 6, 3, 2, 1, 0, 1, 1),
    (1, 3, 127, 7, 2, 3, 3, 1, 1, 1, 1),
    (1, 2, 3, 1000, 3, 1, 3, 1, (0, 1), 1, 1),
    (2, 5, 17, 19, 7, 3, 3, 2, 1, 1, 1),
    (1, 4, 16, 21, 4, 3, 3, (2, 1), (1, 2), 1, 1),
    (1, 3, 15, 14, 5, 3, 3, 1, 2, 2, 1),
    (1, 2, 12, 20, 3, 2, 3, 1, 0, (2, 3), 1),
    (2, 4, 9, 10, 8, 3, 3, 1, 1, 1, 2),
    (1, 6, 10, 9, 9, 3, 1, 2, 1, 1, 3),
    (3, 2, 6, 6, 2, 6, 6, 1, 0, 1, 1),
    (1, 16, 20, 24, 20, 3, 3, 1, 1, 1, 1),
]
CONV_IDS = ["1x1", "odd", "h127", "w1000", "stride2", "stride21_pad12", "dilation2",
            "dilation23", "groups2", "groups3_stride2", "full_window", "c16"]


def _conv_arrays(case, dtype="float32"):
    n, c, h, w, o, kh, kw, stride, padding, dilation, groups = case
    arrays = (rand((n, c, h, w), dtype, 1), rand((o, c // groups, kh, kw), dtype, 2),
              rand((o,), dtype, 3))
    return arrays, dict(stride=stride, padding=padding, dilation=dilation, groups=groups)


@pytest.mark.parametrize("case", CONV_CASES, ids=CONV_IDS)
def test_conv2d_matches_reference(case):
    (x, wt, b), kw = _conv_arrays(case)
    got = conv2d(x, wt, b, **kw)
    assert got.dtype == np.float32
    assert_close(got, conv2d.reference(x, wt, b, **kw))


@pytest.mark.parametrize("case", [CONV_CASES[i] for i in (4, 5, 6, 8, 9)],
                         ids=["stride2", "stride21_pad12", "dilation2", "groups2", "groups3"])
def test_conv2d_matches_direct_loops(case):
    (x, wt, b), kw = _conv_arrays(case)
    pair = lambda v: v if isinstance(v, tuple) else (v, v)  # noqa: E731
    want = _direct_conv(x, wt, b, pair(kw["stride"]), pair(kw["padding"]), pair(kw["dilation"]),
                        kw["groups"])
    assert_close(conv2d.reference(x, wt, b, **kw), want.astype(np.float32))
    assert_close(conv2d(x, wt, b, **kw), want.astype(np.float32))


@pytest.mark.parametrize("dtype", FLOATS)
def test_conv2d_dtypes_and_no_bias(dtype):
    # The "groups2" case: float32 reuses its compiled kernel.
    x, wt = rand((2, 4, 9, 10), dtype, 7), rand((8, 2, 3, 3), dtype, 8)
    got = conv2d(x, wt, stride=1, padding=1, groups=2)
    assert got.dtype == np.dtype(dtype)
    assert_close(got, conv2d.reference(x, wt, None, padding=1, groups=2))


def test_conv2d_depthwise_groups():
    x, wt = rand((1, 8, 12, 13), seed=9), rand((8, 1, 3, 3), seed=10)
    got = conv2d(x, wt, padding=1, groups=8)
    assert_close(got, conv2d.reference(x, wt, padding=1, groups=8))
    assert_close(got, depthwise(x, wt, padding=1))


def test_conv2d_suite_shape():
    # The benchmark shape, at float32 accuracy: each output sums 576 products, so the absolute
    # tolerance is scaled by that count.
    x, wt = rand((1, 64, 56, 56), seed=11), rand((64, 64, 3, 3), seed=12)
    got = conv2d(x, wt, padding=1)
    assert_close(got, conv2d.reference(x, wt, padding=1), atol=576 * 1e-7)


# The tests below reuse the shapes and parameters of CONV_CASES, so their kernels are compiled once.
def test_conv2d_noncontiguous_inputs():
    # "dilation2": x [1, 3, 15, 14], w [5, 3, 3, 3], padding 2, dilation 2.
    x = rand((1, 6, 14, 15), seed=13).transpose(0, 1, 3, 2)[:, ::2]    # transposed, every other C
    wt = rand((5, 6, 6, 3), seed=14)[:, ::-2, ::2]                  # reversed channels, step rows
    b = rand((10,), seed=15)[::2]                                       # strided bias
    assert not x.flags.c_contiguous and not wt.flags.c_contiguous
    got = conv2d(x, wt, b, padding=2, dilation=2)
    assert_close(got, conv2d.reference(np.ascontiguousarray(x), np.ascontiguousarray(wt),
                                       np.ascontiguousarray(b), padding=2, dilation=2))
    # "stride2": x [2, 5, 17, 19] as a step slice, w [7, 5, 3, 3], padding 1.
    step = rand((2, 5, 34, 57), seed=16)[:, :, ::2, ::3]
    wt = rand((7, 5, 3, 3), seed=17)
    assert_close(conv2d(step, wt, stride=2, padding=1),
                 conv2d.reference(step.copy(), wt, stride=2, padding=1))


def test_conv2d_unbatched_and_lists():
    # "h127" without its batch axis, then "groups2" (float64) from nested lists.
    x, wt = rand((3, 127, 7), seed=18), rand((2, 3, 3, 3), seed=19)
    got = conv2d(x, wt, np.zeros(2, np.float32), padding=1)
    assert got.shape == (2, 127, 7)
    assert_close(got, conv2d.reference(x, wt, padding=1))
    x, wt = rand((2, 4, 9, 10), "float64", 20), rand((8, 2, 3, 3), "float64", 21)
    got = conv2d(x.tolist(), wt.tolist(), [0.5] * 8, padding=1, groups=2)
    assert got.dtype == np.float64
    assert_close(got, conv2d.reference(x, wt, np.full(8, 0.5), padding=1, groups=2))


def test_conv2d_kernel_form_and_example():
    # "stride21_pad12" through the canonical kernel call.
    (x, wt, b), _ = _conv_arrays(CONV_CASES[5])
    params = dict(stride_h=2, stride_w=1, pad_h=1, pad_w=2)
    assert_close(conv2d.kernel(x, wt, b, **params), conv2d.kernel_ref(x, wt, b, **params))
    ex = conv2d.example
    arrays = [rand(tuple(ex[d] for d in spec.dims), seed=22 + i)
              for i, spec in enumerate(conv2d.inputs)]
    assert_close(conv2d.kernel(*arrays), conv2d.kernel_ref(*arrays))


def test_conv2d_nan_and_inf_propagate():
    (x, wt, b), kw = _conv_arrays(CONV_CASES[1])
    x[0, 1, 2, 3] = np.nan
    x[1, 0, 10, 12] = np.inf
    got = conv2d(x, wt, b, **kw)
    want = conv2d.reference(x, wt, b, **kw)
    assert np.isnan(got).sum() == np.isnan(want).sum() > 0
    assert np.isinf(got).sum() == np.isinf(want).sum() > 0
    assert_close(got, want)


def test_conv2d_errors():
    x, wt = rand((1, 6, 8, 8)), rand((4, 3, 3, 3))
    with pytest.raises(ShapeError, match="C=6 channels but w expects 3"):
        conv2d(x, wt)
    with pytest.raises(ParamError, match="groups=4 must divide both the input channels C=6"):
        conv2d(x, rand((4, 1, 3, 3)), groups=4)
    with pytest.raises(ParamError, match="output channels O=3"):
        conv2d(x, rand((3, 3, 3, 3)), groups=2)
    with pytest.raises(ParamError, match="'groups' must be a positive int, got 0"):
        conv2d(x, wt, groups=0)
    with pytest.raises(ShapeError, match="output would be 0 x 0"):
        conv2d(rand((1, 3, 2, 2)), wt)
    with pytest.raises(ShapeError, match="dilated kernel window 5 x 5"):
        conv2d(rand((1, 3, 4, 4)), wt, dilation=2)
    with pytest.raises(ParamError, match="'stride' must be >= 1, got 0"):
        conv2d(x, rand((4, 6, 3, 3)), stride=0)
    with pytest.raises(ParamError, match=r"'stride' must be >= 1, got \(1, 0\)"):
        conv2d(x, rand((4, 6, 3, 3)), stride=(1, 0))
    with pytest.raises(ParamError, match="'padding' must be >= 0, got -1"):
        conv2d(x, rand((4, 6, 3, 3)), padding=-1)
    with pytest.raises(ParamError, match="'dilation' must be >= 1"):
        conv2d(x, rand((4, 6, 3, 3)), dilation=0)
    with pytest.raises(ParamError, match="'stride' must be an int or a pair of ints"):
        conv2d(x, rand((4, 6, 3, 3)), stride=(1, 2, 3))
    with pytest.raises(ParamError, match="'padding' must be an int or a pair of ints"):
        conv2d(x, rand((4, 6, 3, 3)), padding=1.5)
    with pytest.raises(DtypeError, match="'x' has dtype int32"):
        conv2d(x.astype(np.int32), rand((4, 6, 3, 3)))
    with pytest.raises(DtypeError, match="do not match"):
        conv2d(x, rand((4, 6, 3, 3), "float64"), np.zeros(4, np.float32))
    with pytest.raises(ShapeError, match=r"'x' must be 4-D \[N, C, H, W\]"):
        conv2d(rand((6, 8)), wt)
    with pytest.raises(ShapeError, match=r"'w' must be 4-D"):
        conv2d(x, rand((4, 6, 3)))
    with pytest.raises(ShapeError, match="dim O is 4 in 'w'"):
        conv2d(x, rand((4, 6, 3, 3)), np.zeros(5, np.float32))
    assert conv2d(rand((0, 6, 8, 8)), rand((4, 6, 3, 3))).shape == (0, 4, 6, 6)   # empty batch


# -- depthwise_conv2d ------------------------------------------------------------------------------
DW_CASES = [
    # (N, C, H, W, KH, KW, stride, padding)
    (1, 1, 1, 1, 1, 1, 1, 0),
    (1, 3, 7, 7, 3, 3, 1, 1),
    (2, 5, 11, 13, 3, 3, 2, 1),
    (1, 2, 127, 5, 3, 3, 1, 0),
    (1, 2, 3, 1000, 1, 5, 1, (0, 2)),
    (1, 7, 9, 20, 5, 5, (1, 2), 2),
    (3, 1, 6, 9, 2, 4, 3, 1),
    (1, 16, 28, 28, 3, 3, 1, 1),
]


@pytest.mark.parametrize("case", DW_CASES, ids=lambda c: "x".join(map(str, c[:6])))
def test_depthwise_matches_reference(case):
    n, c, h, w, kh, kw, stride, padding = case
    x, wt = rand((n, c, h, w), seed=30), rand((c, 1, kh, kw), seed=31)
    got = depthwise(x, wt, stride=stride, padding=padding)
    assert_close(got, depthwise.reference(x, wt, stride=stride, padding=padding))
    assert_close(got, conv2d.reference(x, wt, stride=stride, padding=padding, groups=c))


@pytest.mark.parametrize("dtype", FLOATS)
def test_depthwise_dtypes_noncontiguous_unbatched(dtype):
    # The shape of the (2, 5, 11, 13) case: x transposed with every other channel, w reversed.
    x = rand((2, 10, 13, 11), dtype, 32).transpose(0, 1, 3, 2)[:, ::2]
    wt = rand((5, 1, 5, 3), dtype, 33)[:, :, ::-2]
    got = depthwise(x, wt, stride=2, padding=1)
    assert got.dtype == np.dtype(dtype)
    assert_close(got, depthwise.reference(x.copy(), wt.copy(), stride=2, padding=1))
    if dtype == "float32":
        got = depthwise(x[1], wt, stride=2, padding=1)
        assert got.shape == (5, 6, 7)
        assert_close(got, depthwise.reference(x[1].copy(), wt.copy(), stride=2, padding=1))


def test_depthwise_suite_shape():
    x, wt = rand((1, 256, 56, 56), seed=34), rand((256, 1, 3, 3), seed=35)
    assert_close(depthwise(x, wt, padding=1), depthwise.reference(x, wt, padding=1))


def test_depthwise_errors():
    x = rand((1, 4, 8, 8))
    with pytest.raises(ShapeError, match=r"w must be \[C, 1, KH, KW\].*got 2"):
        depthwise(x, rand((4, 2, 3, 3)))
    with pytest.raises(ShapeError, match="dim C is 4 in 'x'"):
        depthwise(x, rand((3, 1, 3, 3)))
    with pytest.raises(ShapeError, match="output would be"):
        depthwise(x, rand((4, 1, 9, 3)))
    with pytest.raises(ParamError, match="'stride' must be >= 1, got 0"):
        depthwise(x, rand((4, 1, 3, 3)), stride=0)
    with pytest.raises(ParamError, match="'padding' must be >= 0"):
        depthwise(x, rand((4, 1, 3, 3)), padding=(0, -2))
    with pytest.raises(DtypeError, match="float32 or float64"):
        depthwise(x.astype(np.float16), rand((4, 1, 3, 3), "float16"))


# -- pooling ---------------------------------------------------------------------------------------
POOL_CASES = [
    # (N, C, H, W, kernel_size, stride, padding)
    (1, 1, 1, 1, 1, None, 0),
    (1, 3, 7, 7, 2, None, 0),
    (2, 3, 11, 13, 3, 2, 1),
    (1, 2, 127, 9, 3, 1, 1),
    (1, 1, 3, 1000, (1, 4), None, 0),
    (2, 4, 10, 9, (3, 2), (2, 1), (1, 1)),
    (1, 5, 8, 8, 8, None, 4),
    (1, 16, 56, 56, 3, 2, 1),
]


@pytest.mark.parametrize("case", POOL_CASES, ids=lambda c: "x".join(map(str, c[:4])))
@pytest.mark.parametrize("the_op", [max_pool, avg_pool], ids=["max", "avg"])
def test_pool_matches_reference(the_op, case):
    n, c, h, w, k, s, p = case
    x = rand((n, c, h, w), seed=40)
    got = the_op(x, k, s, p)
    assert_close(got, the_op.reference(x, k, s, p))


@pytest.mark.parametrize("case", [POOL_CASES[2], POOL_CASES[5], POOL_CASES[6]],
                         ids=["k3s2p1", "k32s21p1", "k8p4"])
def test_avg_pool_without_counting_padding(case):
    n, c, h, w, k, s, p = case
    x = rand((n, c, h, w), seed=41)
    got = avg_pool(x, k, s, p, count_include_pad=False)
    want = avg_pool.reference(x, k, s, p, count_include_pad=False)
    assert_close(got, want)
    if p:
        assert not np.allclose(got, avg_pool.reference(x, k, s, p))


def test_pool_windows_by_hand():
    x = np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)
    assert_close(max_pool(x, 2), np.array([[[[5, 7], [13, 15]]]], np.float32))
    assert_close(avg_pool(x, 2), np.array([[[[2.5, 4.5], [10.5, 12.5]]]], np.float32))
    neg = -1 - x
    # -inf padding never wins a max; zero padding counts in the mean.
    assert_close(max_pool(neg, 2, 2, 1)[0, 0, 0], np.array([-1, -2, -4], np.float32))
    assert_close(avg_pool(neg, 2, 2, 1)[0, 0, 0], np.array([-0.25, -2.5 / 4 * 2, -4 / 4],
                                                           np.float32))


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("the_op", [max_pool, avg_pool], ids=["max", "avg"])
def test_pool_dtypes_noncontiguous_unbatched(the_op, dtype):
    x = rand((2, 6, 11, 13), dtype, 42).transpose(0, 1, 3, 2)[:, 1::2]   # [2, 3, 13, 11]
    got = the_op(x, 3, 2, 1)
    assert got.dtype == np.dtype(dtype)
    assert_close(got, the_op.reference(x.copy(), 3, 2, 1))
    if dtype == "float32":
        assert_close(the_op(x[0], (2, 3)), the_op.reference(x[0].copy(), (2, 3)))


def test_max_pool_nan_and_inf():
    x = rand((1, 2, 6, 6), seed=44)
    x[0, 0, 1, 1] = np.nan       # its 2x2 window becomes NaN, wherever the NaN sits in it
    x[0, 0, 4, 5] = np.nan
    x[0, 1, 0, 0] = np.inf
    x[0, 1, 5, 5] = -np.inf
    got = max_pool(x, 2)
    want = max_pool.reference(x, 2)
    assert np.isnan(got[0, 0, 0, 0]) and np.isnan(got[0, 0, 2, 2])
    assert got[0, 1, 0, 0] == np.inf
    assert_close(got, want)
    allneg = np.full((1, 1, 2, 2), -np.inf, np.float32)
    assert_close(max_pool(allneg, 2, padding=1), np.full((1, 1, 2, 2), -np.inf, np.float32))
    assert np.isnan(avg_pool(x, 2)[0, 0, 0, 0])


def test_pool_errors():
    x = rand((1, 2, 6, 6))
    for the_op in (max_pool, avg_pool):
        name = the_op.name
        with pytest.raises(ParamError, match=f"{name}: 'padding' must be at most half"):
            the_op(x, 3, padding=2)
        with pytest.raises(ParamError, match="'kernel_size' must be >= 1"):
            the_op(x, 0)
        with pytest.raises(ParamError, match="'stride' must be >= 1, got 0"):
            the_op(x, 2, 0)
        with pytest.raises(ShapeError, match="output would be 0 x 3"):
            the_op(x, (7, 2))
        with pytest.raises(ShapeError, match=r"'x' must be 4-D"):
            the_op(rand((6, 6)), 2)
        with pytest.raises(DtypeError, match="'x' has dtype int64"):
            the_op(np.ones((1, 1, 4, 4), np.int64), 2)
    with pytest.raises(ParamError, match="'count_include_pad' must be a bool"):
        avg_pool(x, 2, count_include_pad="yes")
    for the_op in (max_pool, avg_pool):
        name = the_op.name
        with pytest.raises(ParamError, match=f"{name}: 'ceil_mode' must be a bool, got 'no'"):
            the_op(x, 2, ceil_mode="no")
        with pytest.raises(ShapeError, match=r"output would be 0 x 5 with ceil_mode=True; the "
                                             r"padded input 6 x 6 must be longer than the kernel "
                                             r"9 x 2 less the stride 3 x 1"):
            the_op(x, (9, 2), (3, 1), ceil_mode=True)
        with pytest.raises(ParamError, match=f"{name}: 'padding' must be at most half"):
            the_op(x, 3, padding=2, ceil_mode=True)
        with pytest.raises(ShapeError, match=r"'x' must be 4-D"):
            the_op(rand((6, 6)), 2, ceil_mode=True)


# -- lstm_cell -------------------------------------------------------------------------------------
def _lstm_args(b, n_in, hid, dtype="float32", seed=50, scale=1.0):
    shapes = [(b, n_in), (b, hid), (b, hid), (4 * hid, n_in), (4 * hid, hid), (4 * hid,),
              (4 * hid,)]
    return [rand(s, dtype, seed + i, -scale, scale) for i, s in enumerate(shapes)]


def _lstm_by_hand(x, h, c, w_ih, w_hh, b_ih, b_hh):
    sig = lambda v: 0.5 * (1 + np.tanh(0.5 * v))  # noqa: E731
    z = x @ w_ih.T + b_ih + h @ w_hh.T + b_hh
    hid = h.shape[-1]
    i, f, g, o = (z[..., k * hid:(k + 1) * hid] for k in range(4))
    c2 = sig(f) * c + sig(i) * np.tanh(g)
    return sig(o) * np.tanh(c2), c2


LSTM_CASES = [(1, 1, 1, "float32"), (3, 7, 5, "float32"), (7, 3, 127, "float32"),
              (2, 1000, 3, "float32"), (12, 32, 64, "float32"), (3, 7, 5, "float64")]


@pytest.mark.parametrize("b, n_in, hid, dtype", LSTM_CASES)
def test_lstm_cell_matches_reference(b, n_in, hid, dtype):
    args = _lstm_args(b, n_in, hid, dtype, scale=0.5)
    h2, c2 = lstm(*args)
    want_h, want_c = lstm.reference(*args)
    assert h2.dtype == c2.dtype == np.dtype(dtype)
    assert_close(h2, want_h)
    assert_close(c2, want_c)
    by_hand = _lstm_by_hand(*(a.astype(np.float64) for a in args))
    assert_close(h2, by_hand[0].astype(dtype))
    assert_close(c2, by_hand[1].astype(dtype))


def test_lstm_cell_saturates_without_nan():
    args = _lstm_args(3, 7, 5, scale=40.0)
    h2, c2 = lstm(*args)
    assert np.isfinite(h2).all() and np.isfinite(c2).all()
    want_h, want_c = lstm.reference(*args)
    assert_close(h2, want_h)
    assert_close(c2, want_c, rtol=1e-4, atol=1e-4 * np.abs(want_c).max())


def test_lstm_cell_optional_biases_unbatched_noncontiguous():
    x, h, c, w_ih, w_hh, b_ih, b_hh = _lstm_args(3, 7, 5)
    got = lstm(x, h, c, w_ih, w_hh)
    assert_close(got[0], lstm.reference(x, h, c, w_ih, w_hh)[0])
    got = lstm(x[1], h[1], c[1], w_ih, w_hh, b_ih, b_hh)
    assert got[0].shape == got[1].shape == (5,)
    want = lstm.reference(x, h, c, w_ih, w_hh, b_ih, b_hh)
    assert_close(got[0], want[0][1])
    assert_close(got[1], want[1][1])
    w_t = np.ascontiguousarray(w_ih.T).T         # Fortran-ordered weights
    hs = rand((3, 10), seed=60)[:, ::2]          # strided hidden state
    got = lstm(x, hs, c, w_t, w_hh, b_ih, b_hh)
    want = lstm.reference(x, hs.copy(), c, w_ih, w_hh, b_ih, b_hh)
    assert_close(got[0], want[0])
    assert_close(got[1], want[1])


def test_lstm_cell_errors():
    x, h, c, w_ih, w_hh, b_ih, b_hh = _lstm_args(2, 3, 4)
    with pytest.raises(ShapeError, match="4 \\* hidden = 16 rows"):
        lstm(x, h, c, w_ih[:12], w_hh[:12], b_ih[:12], b_hh[:12])
    with pytest.raises(ShapeError, match="dim B is 2 in 'x'"):
        lstm(x, h[:1], c, w_ih, w_hh, b_ih, b_hh)
    with pytest.raises(ShapeError, match="dim IN is 3 in 'x'"):
        lstm(x, h, c, w_ih[:, :2], w_hh, b_ih, b_hh)
    with pytest.raises(ShapeError, match="dim G is 16"):
        lstm(x, h, c, w_ih, w_hh, b_ih[:8], b_hh)
    with pytest.raises(DtypeError, match="do not match"):
        lstm(x.astype(np.float64), h, c, w_ih, w_hh, b_ih, b_hh)
    with pytest.raises(ShapeError, match=r"'c' must be 2-D"):
        lstm(x, h, c[0][None, None], w_ih, w_hh, b_ih, b_hh)


# -- against PyTorch, when it is installed -----------------------------------------------------
def test_against_torch():
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    x, wt, b = rand((2, 6, 11, 12), seed=70), rand((4, 3, 3, 2), seed=71), rand((4,), seed=72)
    t = torch.from_numpy
    kw = dict(stride=(2, 1), padding=(1, 2), dilation=(1, 2), groups=2)
    assert_close(conv2d(x, wt, b, **kw), F.conv2d(t(x), t(wt), t(b), **kw).numpy())
    assert_close(max_pool(x, 3, 2, 1), F.max_pool2d(t(x), 3, 2, 1).numpy())
    assert_close(avg_pool(x, 3, 2, 1, count_include_pad=False),
                 F.avg_pool2d(t(x), 3, 2, 1, count_include_pad=False).numpy())
    # ceil_mode: the last column of windows overhangs the input (more in test_pool_ceil_mode.py)
    assert_close(max_pool(x, 3, 2, 1, ceil_mode=True),
                 F.max_pool2d(t(x), 3, 2, 1, ceil_mode=True).numpy())
    for include in (True, False):
        assert_close(avg_pool(x, 3, 2, 1, True, include),
                     F.avg_pool2d(t(x), 3, 2, 1, True, include).numpy())
    args = _lstm_args(3, 5, 4)
    cell = torch.nn.LSTMCell(5, 4)
    with torch.no_grad():
        for p, a in zip([cell.weight_ih, cell.weight_hh, cell.bias_ih, cell.bias_hh], args[3:]):
            p.copy_(t(a))
        h2, c2 = cell(t(args[0]), (t(args[1]), t(args[2])))
    got = lstm(*args)
    assert_close(got[0], h2.numpy())
    assert_close(got[1], c2.numpy())


@pytest.mark.parametrize("kw", [1, 2, 5])
def test_conv2d_default_for_3_columns_on_other_kernel_widths(kw):
    # The default splits the kernel columns by the shape's KW (3 here) and unrolls them; a
    # schedule stored at that shape and reused at another (nearest-shape lookup) must still sum
    # every column: fewer (a partial split) or more (a second split iteration), never past KW.
    import halide as hl

    from pypto.compiler.jit import get_kernel
    from pypto.compiler.lower import build
    from pypto.runtime import run_kernel
    from pypto.schedule.defaults import default_schedule

    params = dict(stride_h=1, stride_w=1, pad_h=1, pad_w=1, dil_h=1, dil_w=1, groups=1)
    dt = ("float32",) * 3
    three = dict(N=1, C=5, H=12, W=19, O=7, CG=5, KH=3, KW=3, OH=12, OW=19)
    sched = default_schedule(build(conv2d, dt, params), three, hl.get_jit_target_from_environment())
    assert any(d.op == "split" and d.get("var") == "r$x" and d.get("factor") == 3
               for d in sched.directives)
    x, wt, b = rand((1, 5, 12, 19), seed=31), rand((7, 5, 3, kw), seed=32), rand((7,), seed=33)
    dims = dict(three, KW=kw, OW=19 + 2 - kw + 1)
    got = run_kernel(get_kernel(conv2d, dt, params, dims, schedule=sched), conv2d, [x, wt, b],
                     dims)[0]
    assert_close(got, conv2d.reference(x, wt, b, padding=1))
