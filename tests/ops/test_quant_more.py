"""Fake quantization, quantized_conv2d, quantized_add and quantized_relu
(pypto/ops/quantized.py).

Fake quantization must equal torch's bit for bit (ties included); the integer ops are checked
against loop-by-loop NumPy written here and F.conv2d on shifted values (exact in float64), on
sizes 1, odd and several vectors/threads, views, every declared dtype, traced, with ``out=``,
and on the error cases.
"""

from __future__ import annotations

import numpy as np
import pytest

import pypto
import pypto.ops as P
from helpers import assert_close, rand
from pypto import runtime
from pypto.errors import DtypeError, ParamError, ShapeError

torch = pytest.importorskip("torch")
F = torch.nn.functional
SIZES = [(1,), (7,), (3, 1001), (2, 3, 50, 60)]


def _ints(shape, dtype, seed=0):
    info = np.iinfo(dtype)
    return np.random.default_rng(seed).integers(info.min, info.max + 1, shape).astype(dtype)


# -- fake quantization --------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_fake_quantize_per_tensor_equals_torch(dtype):
    for k, shape in enumerate(SIZES):
        x = rand(shape, dtype, seed=k, low=-4.0, high=4.0)
        for scale, zp, lo, hi in ((0.05, 3, -128, 127), (0.1, 0, 0, 255), (1 / 3, -5, -10, 10),
                                  (0.017, 100, 0, 65535)):
            got = P.fake_quantize_per_tensor_affine(x, scale, zp, lo, hi)
            want = torch.fake_quantize_per_tensor_affine(torch.from_numpy(x), scale, zp, lo,
                                                         hi).numpy()
            np.testing.assert_array_equal(got, want)
            np.testing.assert_array_equal(got, P.fake_quantize_per_tensor_affine.reference(
                x, scale, zp, lo, hi))
    # Ties (values half-way between steps) round to even, as torch's nearbyint does.
    half = ((np.arange(-40, 40) + 0.5) * np.float32(0.25)).astype(dtype)
    np.testing.assert_array_equal(
        P.fake_quantize_per_tensor_affine(half, 0.25, 0, -128, 127),
        torch.fake_quantize_per_tensor_affine(torch.from_numpy(half), 0.25, 0, -128, 127))
    # Views.
    x = rand((20, 30), dtype)[::3, 1::2]
    np.testing.assert_array_equal(
        P.fake_quantize_per_tensor_affine(x, 0.1, 1, -8, 7),
        torch.fake_quantize_per_tensor_affine(torch.from_numpy(x.copy()), 0.1, 1, -8, 7))


def test_fake_quantize_nan_and_inf():
    x = np.array([np.nan, np.inf, -np.inf, 1e30, -1e30, 0.26], np.float32)
    got = P.fake_quantize_per_tensor_affine(x, 0.1, 2, -128, 127)
    assert np.isnan(got[0])
    np.testing.assert_array_equal(got[1:], np.float32([12.5, -13.0, 12.5, -13.0, 0.3]))
    got = P.fake_quantize_per_channel_affine(x.reshape(1, 6), np.float32([0.1]),
                                             np.int32([2]), 0, -128, 127)
    assert np.isnan(got[0, 0]) and got[0, 1] == np.float32(12.5)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_fake_quantize_per_channel_equals_torch(dtype):
    rng = np.random.default_rng(3)
    for shape, axis in (((1, 1), 0), ((5, 7), 0), ((5, 7), 1), ((2, 16, 30, 31), 1),
                        ((3, 4, 9), 2), ((64, 300), 0)):
        x = rand(shape, dtype, seed=len(shape), low=-3.0, high=3.0)
        c = shape[axis]
        s = rng.uniform(0.005, 0.1, c).astype(np.float32)
        z = rng.integers(-5, 6, c).astype(np.int32)
        got = P.fake_quantize_per_channel_affine(x, s, z, axis, -128, 127)
        want = torch.fake_quantize_per_channel_affine(
            torch.from_numpy(x), torch.from_numpy(s), torch.from_numpy(z), axis, -128,
            127).numpy()
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(got, P.fake_quantize_per_channel_affine.reference(
            x, s, z, axis, -128, 127))
    # Scales and zero points given as lists or other dtypes; a negative axis.
    x = rand((4, 3), dtype)
    np.testing.assert_array_equal(
        P.fake_quantize_per_channel_affine(x, [0.1, 0.2, 0.3], [0, 1, 2], -1, 0, 15),
        P.fake_quantize_per_channel_affine(x, np.float32([0.1, 0.2, 0.3]), np.int32([0, 1, 2]),
                                           1, 0, 15))


def test_fake_quantize_errors():
    x = rand((4, 5))
    with pytest.raises(ParamError, match="'scale' must be finite and > 0"):
        P.fake_quantize_per_tensor_affine(x, 0.0, 0, -128, 127)
    with pytest.raises(ParamError, match="quant_min \\(5\\) must be <= quant_max \\(4\\)"):
        P.fake_quantize_per_tensor_affine(x, 0.1, 4, 5, 4)
    with pytest.raises(ParamError, match="zero_point must lie in \\[quant_min, quant_max\\]"):
        P.fake_quantize_per_tensor_affine(x, 0.1, 200, -128, 127)
    with pytest.raises(ShapeError, match="'scale' must be 1-D with one entry per channel"):
        P.fake_quantize_per_channel_affine(x, np.ones(4, np.float32), np.zeros(5, np.int32), 1,
                                           -128, 127)
    with pytest.raises(ParamError, match="'axis' must be an int in"):
        P.fake_quantize_per_channel_affine(x, np.ones(5, np.float32), np.zeros(5, np.int32), 2,
                                           -128, 127)
    with pytest.raises(ParamError, match="every 'scale' must be finite and > 0"):
        P.fake_quantize_per_channel_affine(x, -np.ones(5), np.zeros(5, np.int32), 1, -128, 127)
    with pytest.raises(ParamError, match="'zero_point' must hold integers"):
        P.fake_quantize_per_channel_affine(x, np.ones(5), np.zeros(5), 1, -128, 127)
    with pytest.raises(DtypeError, match="fake_quantize_per_tensor_affine.*'input'.*int32"):
        P.fake_quantize_per_tensor_affine(np.zeros(3, np.int32), 0.1, 0, -128, 127)


# -- quantized_conv2d ---------------------------------------------------------------------------

def _conv_np(x, w, bias, stride, padding, dilation, groups, xz, wz):
    """Direct loops over output positions and taps, in Python ints via int64 arrays."""
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    (sh, sw), (ph, pw), (dh, dw) = stride, padding, dilation
    oh = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    ow = (wd + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    out = np.zeros((n, o, oh, ow), np.int64)
    xs = x.astype(np.int64) - xz
    ws = w.astype(np.int64) - wz
    per = o // groups
    for oc in range(o):
        g = oc // per
        for i in range(oh):
            for j in range(ow):
                total = np.zeros(n, np.int64)
                for a in range(kh):
                    for b in range(kw):
                        r, s = i * sh + a * dh - ph, j * sw + b * dw - pw
                        if 0 <= r < h and 0 <= s < wd:
                            total += xs[:, g * cg:(g + 1) * cg, r, s] @ ws[oc, :, a, b]
                out[:, oc, i, j] = total + (0 if bias is None else int(bias[oc]))
    return out.astype(np.int32)


@pytest.mark.parametrize("xdt,wdt", [("uint8", "int8"), ("int8", "int8"), ("uint8", "uint8")])
def test_quantized_conv2d(xdt, wdt):
    for k, (xs, ws, kw) in enumerate((
            ((1, 1, 1, 1), (1, 1, 1, 1), {}),
            ((2, 3, 7, 9), (4, 3, 3, 3), {"padding": 1}),
            ((1, 4, 9, 11), (6, 2, 2, 3), {"stride": 2, "padding": (1, 2), "dilation": (2, 1),
                                           "groups": 2}),
            ((2, 16, 20, 37), (24, 16, 3, 3), {"padding": 1}))):
        x, w = _ints(xs, xdt, k), _ints(ws, wdt, k + 1)
        bias = np.random.default_rng(k).integers(-9999, 9999, ws[0]).astype(np.int32)
        xz = 128 if xdt == "uint8" else -3
        wz = 5 if wdt == "uint8" else -2
        full = dict(stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1)
        for key, v in kw.items():
            full[key] = v if isinstance(v, tuple) or key == "groups" else (v, v)
        got = P.quantized_conv2d(x, w, bias, **kw, x_zero_point=xz, w_zero_point=wz)
        want = _conv_np(x, w, bias, full["stride"], full["padding"], full["dilation"],
                        full["groups"], xz, wz)
        assert got.dtype == np.int32
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(got, P.quantized_conv2d.reference(
            x, w, bias, **kw, x_zero_point=xz, w_zero_point=wz))
        tw = F.conv2d(torch.from_numpy(x.astype(np.float64) - xz),
                      torch.from_numpy(w.astype(np.float64) - wz),
                      torch.from_numpy(bias.astype(np.float64)), **kw)
        np.testing.assert_array_equal(got, tw.numpy().astype(np.int32))


def test_quantized_conv2d_exact_at_extremes_views_and_unbatched():
    # Every product at its largest: 255 * 255 * 3 * 3 * 64 = 37,454,400 per output, exact.
    x = np.full((1, 64, 5, 5), 255, np.uint8)
    w = np.full((2, 64, 3, 3), -128, np.int8)
    got = P.quantized_conv2d(x, w, w_zero_point=127)
    assert (got == 255 * (-255) * 9 * 64).all()
    # Padding holds the zero point: a constant image of x_zero_point gives the bias alone.
    x = np.full((1, 2, 4, 4), 77, np.uint8)
    bias = np.int32([5, -6, 7])
    got = P.quantized_conv2d(x, _ints((3, 2, 3, 3), "int8"), bias, padding=2, x_zero_point=77)
    assert (got == bias[None, :, None, None]).all()
    xv = _ints((2, 3, 20, 20), "uint8")[:, :, ::2, 1::2]
    w = _ints((4, 3, 3, 3), "int8", 1)
    np.testing.assert_array_equal(P.quantized_conv2d(xv, w, padding=1),
                                  P.quantized_conv2d(np.ascontiguousarray(xv), w, padding=1))
    np.testing.assert_array_equal(P.quantized_conv2d(xv[0], w), P.quantized_conv2d(xv, w)[0])


def test_quantized_conv2d_errors():
    x, w = _ints((1, 4, 5, 5), "uint8"), _ints((2, 4, 3, 3), "int8")
    with pytest.raises(ParamError, match="'x_zero_point' must be in \\[0, 255\\] for uint8"):
        P.quantized_conv2d(x, w, x_zero_point=-1)
    with pytest.raises(ParamError, match="groups=3 must divide"):
        P.quantized_conv2d(x, w, groups=3)
    with pytest.raises(ShapeError, match="x has C=4 channels but w expects"):
        P.quantized_conv2d(x, _ints((2, 3, 3, 3), "int8"))
    with pytest.raises(DtypeError, match="quantized_conv2d.*'x'.*float32"):
        P.quantized_conv2d(x.astype(np.float32), w)


# -- quantized_add and quantized_relu -----------------------------------------------------------

def _requant(real, scale, zp, dtype, relu=False):
    info = np.iinfo(dtype)
    q = np.rint(real * (1.0 / scale)) + zp
    if relu:
        q = np.maximum(q, zp)
    return np.clip(q, info.min, info.max).astype(dtype)


@pytest.mark.parametrize("dtype", ["int8", "uint8"])
def test_quantized_add(dtype):
    zp = 3 if dtype == "int8" else 128
    for k, shape in enumerate(SIZES):
        a, b = _ints(shape, dtype, k), _ints(shape, dtype, k + 7)
        for relu in (False, True):
            got = P.quantized_add(a, b, 0.05, zp, 0.1, zp - 2, 0.12, zp + 1, relu=relu)
            real = (a.astype(np.float64) - zp) * 0.05 + (b.astype(np.float64) - zp + 2) * 0.1
            np.testing.assert_array_equal(got, _requant(real, 0.12, zp + 1, dtype, relu))
    # Broadcasting, mixed input types, the output type, views.
    a, b = _ints((4, 9), "int8"), _ints((9,), "uint8", 1)
    got = P.quantized_add(a[:, ::-1], b, 0.5, 0, 0.25, 128, 0.3, 10, dtype="uint8")
    real = a[:, ::-1].astype(np.float64) * 0.5 + (b.astype(np.float64) - 128) * 0.25
    np.testing.assert_array_equal(got, _requant(real, 0.3, 10, "uint8"))
    # Sums that land half-way between steps round to even.
    a = np.int8([1, 3, 5, -1, -3])
    got = P.quantized_add(a, np.zeros(5, np.int8), 0.5, 0, 1.0, 0, 1.0, 0)
    np.testing.assert_array_equal(got, [0, 2, 2, 0, -2])


@pytest.mark.parametrize("dtype", ["int8", "uint8"])
def test_quantized_relu(dtype):
    zp = 5 if dtype == "int8" else 120
    for k, shape in enumerate(SIZES):
        q = _ints(shape, dtype, k)
        got = P.quantized_relu(q, 0.1, zp)
        assert got.dtype == np.dtype(dtype)
        np.testing.assert_array_equal(got, np.maximum(q, zp).astype(dtype))
        got = P.quantized_relu(q, 0.1, zp, out_scale=0.05, out_zero_point=0, dtype="uint8")
        real = (np.maximum(q.astype(np.int64), zp) - zp) * 0.1
        np.testing.assert_array_equal(got, _requant(real, 0.05, 0, "uint8"))
    q = _ints((10, 10), dtype)[::2, ::-3]
    np.testing.assert_array_equal(P.quantized_relu(q, 1.0, zp), np.maximum(q, zp))


def test_quantized_elementwise_against_torch_quantized_tensors():
    # torch's quantized relu keeps the parameters: max(q, zero_point).
    x = torch.randn(100, generator=torch.Generator().manual_seed(0))
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        qx = torch.quantize_per_tensor(x, 0.05, 10, torch.quint8)
        want = torch.relu(qx).int_repr().numpy()
        qa = torch.quantize_per_tensor(x, 0.05, 3, torch.qint8)
        qb = torch.quantize_per_tensor(x.flip(0), 0.1, -2, torch.qint8)
        qs = torch.ops.quantized.add(qa, qb, 0.12, 5)
    got = P.quantized_relu(qx.int_repr().numpy(), 0.05, 10)
    np.testing.assert_array_equal(got, want)
    got = P.quantized_add(qa.int_repr().numpy(), qb.int_repr().numpy(), 0.05, 3, 0.1, -2, 0.12,
                          5)
    # torch computes in float32: it may differ by one step where the sum is near a tie.
    diff = np.abs(got.astype(int) - qs.int_repr().numpy().astype(int))
    assert diff.max() <= 1 and (diff == 0).mean() > 0.95


def test_quantized_elementwise_errors():
    a = _ints((5,), "int8")
    with pytest.raises(DtypeError, match="quantized_add: argument 'b' must be int8 or uint8"):
        P.quantized_add(a, a.astype(np.int16), 0.1, 0, 0.1, 0, 0.1, 0)
    with pytest.raises(ParamError, match="'b_scale' must be finite and > 0"):
        P.quantized_add(a, a, 0.1, 0, -1.0, 0, 0.1, 0)
    with pytest.raises(ParamError, match="'zero_point' must be in \\[0, 255\\] for uint8"):
        P.quantized_add(a, a, 0.1, 0, 0.1, 0, 0.1, -3, dtype="uint8")
    with pytest.raises(ShapeError, match="cannot be broadcast together"):
        P.quantized_add(a, _ints((4,), "int8"), 0.1, 0, 0.1, 0, 0.1, 0)
    with pytest.raises(ParamError, match="'dtype' must be 'int8' or 'uint8'"):
        P.quantized_relu(a, 0.1, 0, dtype="int16")
    with pytest.raises(DtypeError, match="quantized_relu: argument 'q' must be int8 or uint8"):
        P.quantized_relu(a.astype(np.float32), 0.1, 0)


def test_quantized_ops_run_traced_and_write_out():
    x = rand((2, 3, 8, 9), low=-2.0, high=2.0)
    s, z = np.float32([0.1, 0.05, 0.2]), np.int32([0, 3, -1])

    @pypto.jit
    def f(v):
        a = P.fake_quantize_per_tensor_affine(v, 0.1, 0, -128, 127)
        b = P.fake_quantize_per_channel_affine(v, s, z, 1, -128, 127)
        return a + b

    want = P.fake_quantize_per_tensor_affine(x, 0.1, 0, -128, 127) + \
        P.fake_quantize_per_channel_affine(x, s, z, 1, -128, 127)
    assert_close(f(x), want)
    q = _ints((2, 3, 8, 9), "int8")
    g = pypto.jit(lambda a: P.quantized_relu(P.quantized_add(a, a, 0.1, 0, 0.1, 0, 0.3, 2),
                                             0.3, 2))
    np.testing.assert_array_equal(g(q), P.quantized_relu(P.quantized_add(
        q, q, 0.1, 0, 0.1, 0, 0.3, 2), 0.3, 2))
    u, w = _ints((1, 3, 6, 7), "uint8"), _ints((4, 3, 3, 3), "int8")
    h = pypto.jit(lambda a, b: P.quantized_conv2d(a, b, padding=1, x_zero_point=100))
    np.testing.assert_array_equal(h(u, w), P.quantized_conv2d(u, w, padding=1,
                                                              x_zero_point=100))
    for name, args, kw in (
            ("fake_quantize_per_tensor_affine", (x, 0.1, 0, -128, 127), {}),
            ("quantized_conv2d", (u, w), {"padding": 1}),
            ("quantized_add", (q, q, 0.1, 0, 0.1, 0, 0.3, 2), {})):
        want = getattr(P, name)(*args, **kw)
        buf = np.empty_like(want)
        before = dict(runtime.out_stats)
        assert getattr(P, name)(*args, out=buf, **kw) is buf
        np.testing.assert_array_equal(buf, want)
        assert runtime.out_stats["in_place"] == before["in_place"] + 1, name
