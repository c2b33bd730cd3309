"""Every op that PyTorch also has, checked against PyTorch's own implementation.

The NumPy references next to each kernel were written by the same hands as the kernels; PyTorch
was not. Each op below runs on a small representative input and on a second, odd-sized one (with
other parameters where the op has some), in each float dtype it supports (and its integer dtypes
where PyTorch has them), and must agree with torch within a dtype-aware tolerance.

Where PyTorch has no single op, the check composes documented torch ops (``F.pad`` with
``mode="replicate"`` plus ``F.conv2d`` for the image filters, ``torch.round`` and ``torch.clamp``
for requantize, an int64 ``torch.matmul`` for quantized_matmul); the arithmetic is still torch's.

Ops with no counterpart in torch itself (they live in torchvision, checked when it is installed):
- anchor_boxes: ``torchvision.models.detection.anchor_utils.AnchorGenerator``;
- roi_align: ``torchvision.ops.roi_align``;
- box_iou, box_convert, nms, batched_nms, roi_pool: ``torchvision.ops`` (nms returns a fixed-size
  keep plus a count; torchvision's keep is padded with -1 to compare).
Compositions for the layout ... image nn block: ``median`` is ``torch.quantile(x, 0.5)`` (NumPy's
median; ``torch.median`` takes the lower middle), ``nanmax``/``nanmin`` take ``amax``/``amin`` of
``nan_to_num``, ``sequence_mask`` compares with ``torch.arange``, ``eye`` with an offset is
``ones.triu(k).tril(k)``. ``rotary_embedding`` (no torch op) is Hugging Face's rotate-half
composition ``x * cos + torch.cat([-x2, x1]) * sin``.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import pypto
import pypto.ops as P
from pypto.dtypes import tolerance

torch = pytest.importorskip("torch")
F = torch.nn.functional

FLOATS = ("float32", "float64")


def _rng(size):
    return np.random.default_rng(0 if size == "small" else 1)


def _u(rng, shape, dt, low=-3.0, high=3.0):
    if np.dtype(dt).kind == "f":
        return rng.uniform(low, high, size=shape).astype(dt)
    info = np.iinfo(dt)
    return rng.integers(max(info.min, -100), min(info.max, 100) + 1, size=shape).astype(dt)


def _t(a):
    return torch.from_numpy(np.ascontiguousarray(a))


def _dims(x, axis):
    """A pypto ``axis`` (None, int or tuple) as torch's ``dim``."""
    if axis is None:
        return tuple(range(x.ndim))
    return axis


# -- the cases: name -> (dtypes, make(size, dt) -> (args, kwargs), torch_fn(*tensors, **kwargs)) --
CASES: dict = {}


def case(name, dtypes=FLOATS):
    def wrap(pair):
        make, ref = pair()
        CASES[name] = (dtypes, make, ref)
        return pair
    return wrap


def _shape(size):
    return (4, 8) if size == "small" else (3, 127)


# elementwise, unary: torch function, input range
_UNARY = {
    "abs": (torch.abs, -3, 3, FLOATS + ("int32", "int8")),
    "ceil": (torch.ceil, -3, 3, FLOATS),
    "cos": (torch.cos, -6, 6, FLOATS),
    "erf": (torch.special.erf, -3, 3, FLOATS),
    "exp": (torch.exp, -10, 10, FLOATS),
    "expm1": (torch.special.expm1, -2, 2, FLOATS),
    "floor": (torch.floor, -3, 3, FLOATS),
    "log": (torch.log, 1e-3, 10, FLOATS),
    "log1p": (torch.special.log1p, -0.9, 10, FLOATS),
    "neg": (torch.neg, -3, 3, FLOATS + ("int32", "int8")),
    "reciprocal": (torch.reciprocal, 0.1, 5, FLOATS),
    "relu": (F.relu, -3, 3, FLOATS + ("int32", "int8")),
    "rsqrt": (torch.rsqrt, 1e-2, 10, FLOATS),
    "sigmoid": (torch.special.expit, -20, 20, FLOATS),
    "silu": (F.silu, -20, 20, FLOATS),
    "sin": (torch.sin, -6, 6, FLOATS),
    "softplus": (F.softplus, -25, 25, FLOATS),
    "sqrt": (torch.sqrt, 0, 10, FLOATS),
    "square": (torch.square, -3, 3, FLOATS + ("int32", "int8")),
    "tanh": (torch.tanh, -10, 10, FLOATS),
}


def _unary(fn, low, high):
    def make(size, dt):
        return (_u(_rng(size), _shape(size), dt, low, high),), {}
    return make, lambda x: fn(x)


for _n, (_fn, _lo, _hi, _dts) in _UNARY.items():
    _m, _r = _unary(_fn, _lo, _hi)
    CASES[_n] = (_dts, _m, _r)


@case("round")
def _():
    def make(size, dt):
        rng = _rng(size)
        # Half-integers too: both round half to even.
        x = np.where(rng.random(_shape(size)) < 0.5, rng.integers(-8, 8, _shape(size)) + 0.5,
                     rng.uniform(-5, 5, _shape(size)))
        return (x.astype(dt),), {}
    return make, torch.round


@case("clip", FLOATS + ("int32", "int8"))
def _():
    def make(size, dt):
        x = _u(_rng(size), _shape(size), dt)
        return (x,), ({"min": -1, "max": 2} if size == "small" else {"min": 0})
    return make, lambda x, min=None, max=None: torch.clamp(x, min=min, max=max)


@case("gelu")
def _():
    def make(size, dt):
        return (_u(_rng(size), _shape(size), dt, -6, 6),), \
            {"approximate": "none" if size == "small" else "tanh"}
    return make, lambda x, approximate: F.gelu(x, approximate=approximate)


@case("leaky_relu")
def _():
    def make(size, dt):
        return (_u(_rng(size), _shape(size), dt),), \
            {"negative_slope": 0.01 if size == "small" else 0.3}
    return make, lambda x, negative_slope: F.leaky_relu(x, negative_slope)


# elementwise, binary: the odd size broadcasts a row against a matrix
def _binary(fn, low=-3.0, high=3.0, blow=None, bhigh=None):
    def make(size, dt):
        rng = _rng(size)
        a = _u(rng, _shape(size), dt, low, high)
        bshape = _shape(size) if size == "small" else _shape(size)[-1:]
        b = _u(rng, bshape, dt, low if blow is None else blow, high if bhigh is None else bhigh)
        return (a, b), {}
    return make, fn


_BINARY = {
    "add": (torch.add, FLOATS + ("int32",)),
    "sub": (torch.sub, FLOATS + ("int32",)),
    "mul": (torch.mul, FLOATS + ("int32",)),
    "maximum": (torch.maximum, FLOATS + ("int32",)),
    "minimum": (torch.minimum, FLOATS + ("int32",)),
}
for _n, (_fn, _dts) in _BINARY.items():
    CASES[_n] = (_dts, *_binary(_fn))
CASES["div"] = (FLOATS, *_binary(torch.div, blow=0.2, bhigh=4.0))
CASES["pow"] = (FLOATS, *_binary(torch.pow, 0.05, 4.0, -3.0, 3.0))
CASES["swiglu"] = (FLOATS, *_binary(lambda x, y: F.silu(x) * y, -10.0, 10.0))


def _comparison(fn):
    def make(size, dt):
        rng = _rng(size)
        # Small integers make ties common; floats get a NaN in each operand too.
        a, b = (rng.integers(-3, 4, _shape(size)) for _ in range(2))
        if dt == "bool":
            return (a > 0, b > 0), {}
        a, b = a.astype(dt), b.astype(dt)
        if np.dtype(dt).kind == "f":
            a.flat[0], b.flat[1], a.flat[2], b.flat[2] = np.nan, np.nan, np.nan, np.nan
        return (a, b), {}
    return make, fn


_COMPARE = {"equal": torch.eq, "not_equal": torch.ne, "greater": torch.gt,
            "greater_equal": torch.ge, "less": torch.lt, "less_equal": torch.le}
for _n, _fn in _COMPARE.items():
    CASES[_n] = (FLOATS + ("int32", "int64", "bool"), *_comparison(_fn))


def _logical(fn, arity):
    def make(size, dt):
        rng = _rng(size)
        return tuple(rng.random(_shape(size)) < 0.5 for _ in range(arity)), {}
    return make, fn


CASES["logical_and"] = (("bool",), *_logical(torch.logical_and, 2))
CASES["logical_or"] = (("bool",), *_logical(torch.logical_or, 2))
CASES["logical_not"] = (("bool",), *_logical(torch.logical_not, 1))


@case("where", FLOATS + ("int32",))
def _():
    def make(size, dt):
        rng = _rng(size)
        c = rng.random(_shape(size)) < 0.5
        return (c, _u(rng, _shape(size), dt), _u(rng, _shape(size), dt)), {}
    return make, torch.where


# reductions: small reduces the last axis, the odd size all axes (or axis 0, keepdims)
def _reduction(fn, low=-3.0, high=3.0):
    def make(size, dt):
        rng = _rng(size)
        if size == "small":
            return (_u(rng, (5, 16), dt, low, high),), {"axis": -1}
        return (_u(rng, (3, 7, 11), dt, low, high),), {"axis": 0, "keepdims": True}
    return make, fn


CASES["sum"] = (FLOATS + ("int32",), *_reduction(
    lambda x, axis, keepdims=False: torch.sum(x, dim=axis, keepdim=keepdims)))
CASES["mean"] = (FLOATS, *_reduction(
    lambda x, axis, keepdims=False: torch.mean(x, dim=axis, keepdim=keepdims)))
CASES["prod"] = (FLOATS, *_reduction(
    lambda x, axis, keepdims=False: torch.prod(x, dim=axis, keepdim=keepdims), 0.8, 1.2))
CASES["max"] = (FLOATS + ("int32",), *_reduction(
    lambda x, axis, keepdims=False: torch.amax(x, dim=axis, keepdim=keepdims)))
CASES["min"] = (FLOATS + ("int32",), *_reduction(
    lambda x, axis, keepdims=False: torch.amin(x, dim=axis, keepdim=keepdims)))
CASES["argmax"] = (FLOATS + ("int32",), *_reduction(
    lambda x, axis, keepdims=False: torch.argmax(x, dim=axis, keepdim=keepdims)))
CASES["argmin"] = (FLOATS + ("int32",), *_reduction(
    lambda x, axis, keepdims=False: torch.argmin(x, dim=axis, keepdim=keepdims)))
CASES["logsumexp"] = (FLOATS, *_reduction(
    lambda x, axis, keepdims=False: torch.logsumexp(x, dim=axis, keepdim=keepdims), -30, 30))


@case("var")
def _():
    def make(size, dt):
        rng = _rng(size)
        if size == "small":
            return (_u(rng, (5, 16), dt),), {"axis": 1}
        return (_u(rng, (3, 7, 11), dt),), {"axis": None, "ddof": 1}
    return make, lambda x, axis, ddof=0: torch.var(x, dim=_dims(x, axis), correction=ddof)


@case("std")
def _():
    make = CASES["var"][1]
    return make, lambda x, axis, ddof=0: torch.std(x, dim=_dims(x, axis), correction=ddof)


# norm
@case("softmax")
def _():
    def make(size, dt):
        if size == "small":
            return (_u(_rng(size), (4, 16), dt, -10, 10),), {}
        return (_u(_rng(size), (3, 129, 5), dt, -10, 10),), {"axis": 1}
    return make, lambda x, axis=-1: F.softmax(x, dim=axis)


@case("log_softmax")
def _():
    make = CASES["softmax"][1]
    return make, lambda x, axis=-1: F.log_softmax(x, dim=axis)


@case("layer_norm")
def _():
    def make(size, dt):
        rng = _rng(size)
        c = 16 if size == "small" else 131
        x = _u(rng, (4, c) if size == "small" else (2, 3, c), dt)
        if size == "small":
            return (x, _u(rng, (c,), dt), _u(rng, (c,), dt)), {}
        return (x,), {"eps": 1e-3}
    return make, lambda x, gamma=None, beta=None, eps=1e-5: F.layer_norm(
        x, x.shape[-1:], gamma, beta, eps)


@case("rms_norm")
def _():
    def make(size, dt):
        rng = _rng(size)
        if size == "small":
            return (_u(rng, (4, 16), dt), _u(rng, (16,), dt)), {}
        return (_u(rng, (2, 3, 131), dt),), {"eps": 1e-3}
    return make, lambda x, gamma=None, eps=1e-6: F.rms_norm(x, x.shape[-1:], gamma, eps)


@case("batch_norm")
def _():
    def make(size, dt):
        rng = _rng(size)
        shape, c = ((2, 4, 3, 5), 4) if size == "small" else ((3, 7, 13), 7)
        x, m = _u(rng, shape, dt), _u(rng, (c,), dt)
        v = _u(rng, (c,), dt, 0.1, 3.0)
        if size == "small":
            return (x, m, v, _u(rng, (c,), dt), _u(rng, (c,), dt)), {}
        return (x, m, v), {"eps": 1e-3}
    return make, lambda x, mean, var, gamma=None, beta=None, eps=1e-5: F.batch_norm(
        x, mean, var, gamma, beta, training=False, eps=eps)


# linalg
@case("matmul")
def _():
    def make(size, dt):
        rng = _rng(size)
        m, k, n = (4, 8, 6) if size == "small" else (7, 131, 5)
        return (_u(rng, (m, k), dt, -1, 1), _u(rng, (k, n), dt, -1, 1)), {}
    return make, torch.matmul


@case("batch_matmul")
def _():
    def make(size, dt):
        rng = _rng(size)
        b, m, k, n = (2, 4, 8, 6) if size == "small" else (3, 7, 131, 5)
        return (_u(rng, (b, m, k), dt, -1, 1), _u(rng, (b, k, n), dt, -1, 1)), {}
    return make, torch.bmm


@case("linear")
def _():
    def make(size, dt):
        rng = _rng(size)
        if size == "small":
            return (_u(rng, (4, 8), dt, -1, 1), _u(rng, (6, 8), dt, -1, 1),
                    _u(rng, (6,), dt)), {}
        return (_u(rng, (2, 3, 131), dt, -1, 1), _u(rng, (5, 131), dt, -1, 1)), {}
    return make, lambda x, w, b=None: F.linear(x, w, b)


@case("transpose", FLOATS + ("int8",))
def _():
    def make(size, dt):
        if size == "small":
            return (_u(_rng(size), (4, 8), dt),), {}
        return (_u(_rng(size), (3, 5, 7), dt),), {"axes": (1, 2, 0)}
    return make, lambda x, axes=None: x.permute(*(axes or range(x.ndim)[::-1]))


@case("batch_transpose", FLOATS + ("int8",))
def _():
    def make(size, dt):
        return (_u(_rng(size), (2, 4, 8, 3) if size == "small" else (3, 7, 5, 1), dt),), {}
    return make, lambda x: x.transpose(1, 2)


# attention
@case("scaled_dot_product_attention")
def _():
    def make(size, dt):
        rng = _rng(size)
        b, h, s, l, d, e = (1, 2, 4, 6, 8, 8) if size == "small" else (2, 3, 7, 13, 5, 3)
        q, k, v = (_u(rng, sh, dt, -1, 1) for sh in ((b, h, s, d), (b, h, l, d), (b, h, l, e)))
        return (q, k, v), ({} if size == "small" else {"scale": 0.7})
    return make, lambda q, k, v, scale=None: F.scaled_dot_product_attention(q, k, v,
                                                                            scale=scale)


@case("masked_attention")
def _():
    def make(size, dt):
        rng = _rng(size)
        b, h, s, l, d, e = (2, 2, 4, 6, 8, 8) if size == "small" else (3, 2, 7, 13, 5, 3)
        q, k, v = (_u(rng, sh, dt, -1, 1) for sh in ((b, h, s, d), (b, h, l, d), (b, h, l, e)))
        mask = rng.random((b, 1, s, l)) < 0.7
        q_len = rng.integers(0, s + 1, b).astype(np.int32)
        kv_len = rng.integers(1, l + 1, b).astype(np.int32)
        return (q, k, v, mask, q_len, kv_len), ({} if size == "small" else {"is_causal": True})

    def ref(q, k, v, mask, q_len, kv_len, is_causal=False):
        B, H, S, L = q.shape[0], q.shape[1], q.shape[2], k.shape[2]
        allow = (mask.expand(B, H, S, L)
                 & (torch.arange(L)[None, None, None, :] < kv_len[:, None, None, None])
                 & (torch.arange(S)[None, None, :, None] < q_len[:, None, None, None]))
        if is_causal:
            allow = allow & torch.ones(S, L, dtype=torch.bool).tril()
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=allow)
        return torch.where(allow.any(-1, keepdim=True), out, torch.zeros((), dtype=out.dtype))
    return make, ref


# nn
@case("conv2d")
def _():
    def make(size, dt):
        rng = _rng(size)
        if size == "small":
            return (_u(rng, (1, 3, 8, 8), dt, -1, 1), _u(rng, (4, 3, 3, 3), dt, -1, 1),
                    _u(rng, (4,), dt)), {"padding": 1}
        return (_u(rng, (2, 4, 11, 13), dt, -1, 1), _u(rng, (6, 2, 3, 2), dt, -1, 1)), \
            {"stride": (2, 1), "padding": (1, 0), "dilation": (1, 2), "groups": 2}
    return make, lambda x, w, b=None, stride=1, padding=0, dilation=1, groups=1: F.conv2d(
        x, w, b, stride, padding, dilation, groups)


@case("depthwise_conv2d")
def _():
    def make(size, dt):
        rng = _rng(size)
        if size == "small":
            return (_u(rng, (1, 3, 8, 8), dt, -1, 1), _u(rng, (3, 1, 3, 3), dt, -1, 1)), {}
        return (_u(rng, (2, 5, 11, 13), dt, -1, 1), _u(rng, (5, 1, 3, 5), dt, -1, 1)), \
            {"stride": 2, "padding": (1, 2)}
    return make, lambda x, w, stride=1, padding=0: F.conv2d(x, w, None, stride, padding, 1,
                                                            x.shape[1])


@case("max_pool2d")
def _():
    def make(size, dt):
        rng = _rng(size)
        if size == "small":
            return (_u(rng, (1, 2, 8, 8), dt),), {"kernel_size": 2}
        return (_u(rng, (2, 3, 11, 13), dt),), {"kernel_size": 3, "stride": (2, 1),
                                                "padding": 1}
    return make, lambda x, kernel_size, stride=None, padding=0: F.max_pool2d(
        x, kernel_size, stride, padding)


@case("avg_pool2d")
def _():
    def make(size, dt):
        rng = _rng(size)
        if size == "small":
            return (_u(rng, (1, 2, 8, 8), dt),), {"kernel_size": 2}
        return (_u(rng, (2, 3, 11, 13), dt),), {"kernel_size": 3, "stride": 2, "padding": 1,
                                                "count_include_pad": False}
    return make, lambda x, kernel_size, stride=None, padding=0, count_include_pad=True: \
        F.avg_pool2d(x, kernel_size, stride, padding, count_include_pad=count_include_pad)


@case("lstm_cell")
def _():
    def make(size, dt):
        rng = _rng(size)
        b, i, h = (2, 3, 4) if size == "small" else (5, 7, 3)
        arrs = [_u(rng, sh, dt, -1, 1) for sh in ((b, i), (b, h), (b, h), (4 * h, i),
                                                   (4 * h, h), (4 * h,), (4 * h,))]
        return (tuple(arrs) if size == "small" else tuple(arrs[:5])), {}
    return make, lambda x, h, c, w_ih, w_hh, b_ih=None, b_hh=None: torch.lstm_cell(
        x, (h, c), w_ih, w_hh, b_ih, b_hh)


# image: torch has these filters only as compositions (replicated edges, then a convolution)
def _img(size, dt):
    return _u(_rng(size), (2, 8, 8) if size == "small" else (3, 13, 11), dt)


def _filter(x, kernel):
    """Cross-correlates each [H, W] image of x [B, H, W] with a [kh, kw] kernel, edges replicated."""
    kh, kw = kernel.shape
    xp = F.pad(x[:, None], (kw // 2, kw // 2, kh // 2, kh // 2), mode="replicate")
    return F.conv2d(xp, kernel[None, None].to(x.dtype))[:, 0]


@case("box_blur")
def _():
    def make(size, dt):
        return (_img(size, dt),), {"size": 3 if size == "small" else 5}
    return make, lambda x, size=3: F.avg_pool2d(
        F.pad(x[:, None], (size // 2,) * 4, mode="replicate"), size, 1)[:, 0]


@case("gaussian_blur")
def _():
    def make(size, dt):
        return (_img(size, dt),), ({"sigma": 1.0} if size == "small"
                                   else {"sigma": 0.7, "radius": 2})

    def ref(x, sigma=1.0, radius=None):
        r = int(4 * sigma + 0.5) if radius is None else radius
        i = torch.arange(-r, r + 1, dtype=torch.float64)
        w = torch.exp(-i**2 / (2 * sigma**2))
        w = (w / w.sum()).to(x.dtype)
        return _filter(_filter(x, w[None, :]), w[:, None])
    return make, ref


@case("sobel")
def _():
    def make(size, dt):
        return (_img(size, dt),), {}

    def ref(x):
        kx = torch.tensor([[-1.0, 0, 1], [-2, 0, 2], [-1, 0, 1]], dtype=torch.float64)
        return torch.sqrt(_filter(x, kx) ** 2 + _filter(x, kx.T) ** 2)
    return make, ref


@case("resize_bilinear")
def _():
    def make(size, dt):
        if size == "small":
            return (_img(size, dt),), {"height": 16, "width": 5}
        return (_img(size, dt),), {"height": 7, "width": 29, "align_corners": True}
    return make, lambda x, height, width, align_corners=False: F.interpolate(
        x[None], size=(height, width), mode="bilinear", align_corners=align_corners)[0]


# quantization: torch's quantized tensors for (de)quantize, compositions for the rest
_QT = {"int8": "qint8", "uint8": "quint8"}


def _quantized(fn_name):
    """A torch quantized-tensor function; skips where torch has dropped them (deprecated)."""
    fn = getattr(torch, fn_name, None)
    if fn is None:
        pytest.skip(f"torch {torch.__version__} has no {fn_name}")

    def call(*args):
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*quantized tensor creation.*deprecated")
            return fn(*args)
    return call


@case("quantize", ("float32",))
def _():
    def make(size, dt):
        x = _u(_rng(size), _shape(size), dt, -8, 8)
        return (x,), ({"scale": 0.05, "zero_point": 3} if size == "small"
                      else {"scale": 0.03, "zero_point": 120, "dtype": "uint8"})
    return make, lambda x, scale, zero_point, dtype="int8": _quantized("quantize_per_tensor")(
        x, scale, zero_point, getattr(torch, _QT[dtype])).int_repr()


@case("dequantize", ("int8", "uint8"))
def _():
    def make(size, dt):
        info = np.iinfo(dt)
        q = _rng(size).integers(info.min, info.max + 1, _shape(size)).astype(dt)
        return (q,), ({"scale": 0.05, "zero_point": 3} if size == "small"
                      else {"scale": 0.37, "zero_point": -5 if dt == "int8" else 200})
    return make, lambda q, scale, zero_point: _quantized("_make_per_tensor_quantized_tensor")(
        q, scale, zero_point).dequantize()


@case("requantize", ("int32",))
def _():
    def make(size, dt):
        acc = _rng(size).integers(-5000, 5000, _shape(size)).astype(dt)
        return (acc,), ({"scale": 0.02, "zero_point": 3} if size == "small"
                        else {"scale": 0.5, "zero_point": 100, "dtype": "uint8"})

    def ref(acc, scale, zero_point, dtype="int8"):
        info = np.iinfo(dtype)
        q = torch.round(acc.to(torch.float64) * scale) + zero_point
        return torch.clamp(q, info.min, info.max).to(getattr(torch, dtype))
    return make, ref


@case("quantized_matmul", ("int8", "uint8"))
def _():
    def make(size, dt):
        rng = _rng(size)
        info = np.iinfo(dt)
        m, k, n = (4, 8, 6) if size == "small" else (7, 131, 5)
        a, b = (rng.integers(info.min, info.max + 1, sh).astype(dt) for sh in ((m, k), (k, n)))
        zp = 0 if size == "small" else (-3 if dt == "int8" else 128)
        return (a, b), {"a_zero_point": zp, "b_zero_point": zp // 2}
    return make, lambda a, b, a_zero_point=0, b_zero_point=0: torch.matmul(
        a.to(torch.int64) - a_zero_point, b.to(torch.int64) - b_zero_point).to(torch.int32)


# torchvision: checked when it is installed
@case("roi_align", ("float32", "float64"))
def _():
    def make(size, dt):
        rng = _rng(size)
        n, c, h, w = (1, 2, 8, 8) if size == "small" else (2, 3, 13, 11)
        x = _u(rng, (n, c, h, w), dt)
        k = 3 if size == "small" else 7
        xy = rng.uniform(-1, max(h, w), (k, 2, 2))
        boxes = np.concatenate([rng.integers(0, n, (k, 1)), xy.min(1), xy.max(1)], 1).astype(dt)
        if size == "small":
            return (x, boxes), {"output_size": 2}
        return (x, boxes), {"output_size": (3, 2), "spatial_scale": 0.5, "sampling_ratio": 3,
                            "aligned": True}

    def ref(x, boxes, output_size, spatial_scale=1.0, sampling_ratio=2, aligned=False):
        tv = pytest.importorskip("torchvision")
        return tv.ops.roi_align(x, boxes, output_size, spatial_scale, sampling_ratio, aligned)
    return make, ref


# -- layout, indexing, creation, scans, sorting, losses, distances, detection, image nn --------
# (one block for the ops of pypto/ops/{layout,indexing,creation,scan,sorting,losses,distance,
# detection,spatial,resample}.py; the torchvision ones are checked when torchvision installs)
_ANY = FLOATS + ("int32", "int64")


def _pair_of(size, dt, shape_small, shape_odd, low=-3.0, high=3.0):
    rng = _rng(size)
    shape = shape_small if size == "small" else shape_odd
    return _u(rng, shape, dt, low, high), _u(rng, shape, dt, low, high)


@case("concat", _ANY)
def _():
    def make(size, dt):
        a, b = _pair_of(size, dt, (2, 3), (5, 7))
        return (np.stack([a, b, a]),), {"axis": 1 if size == "small" else 0}
    return make, lambda t, axis=0: torch.cat(t.unbind(0), dim=axis)


@case("stack", _ANY)
def _():
    make = CASES["concat"][1]
    return make, lambda t, axis=0: torch.stack(t.unbind(0), dim=axis)


@case("split", _ANY)
def _():
    def make(size, dt):
        if size == "small":
            return (_u(_rng(size), (6, 4), dt),), {"indices_or_sections": 3}
        return (_u(_rng(size), (5, 9), dt),), {"indices_or_sections": [2, 7], "axis": 1}
    return make, lambda x, indices_or_sections, axis=0: torch.tensor_split(
        x, indices_or_sections, dim=axis)


@case("pad")
def _():
    def make(size, dt):
        x = _u(_rng(size), (1, 2, 5, 6) if size == "small" else (2, 3, 7), dt)
        if size == "small":
            return (x, (1, 2, 3, 0)), {"mode": "reflect"}
        return (x, (2, 3)), {"mode": "constant", "value": 1.5}
    return make, lambda x, pad, mode="constant", value=0.0: F.pad(
        x, tuple(int(v) for v in pad), mode=mode, **({"value": value} if mode == "constant"
                                                     else {}))


@case("tile", _ANY)
def _():
    def make(size, dt):
        x = _u(_rng(size), (2, 3) if size == "small" else (3, 1, 4), dt)
        return (x,), {"reps": (2, 2) if size == "small" else (1, 3, 2)}
    return make, lambda x, reps: torch.tile(x, reps)


@case("repeat", _ANY)
def _():
    def make(size, dt):
        x = _u(_rng(size), (2, 3) if size == "small" else (3, 1, 4), dt)
        return (x,), {"repeats": 2, "axis": 1 if size == "small" else 2}
    return make, lambda x, repeats, axis: torch.repeat_interleave(x, repeats, dim=axis)


@case("flip", _ANY)
def _():
    def make(size, dt):
        x = _u(_rng(size), (2, 3) if size == "small" else (3, 5, 4), dt)
        return (x,), {"axis": (0, 1) if size == "small" else (0, 2)}
    return make, lambda x, axis: torch.flip(x, dims=axis)


@case("roll", _ANY)
def _():
    def make(size, dt):
        x = _u(_rng(size), (2, 3) if size == "small" else (3, 5, 4), dt)
        return (x,), {"shift": 2 if size == "small" else (1, -3), "axis": 1 if size == "small"
                      else (0, 2)}
    return make, lambda x, shift, axis: torch.roll(x, shift, dims=axis)


for _n, _fn in (("tril", torch.tril), ("triu", torch.triu)):
    CASES[_n] = (_ANY, lambda size, dt: ((_u(_rng(size), (4, 6) if size == "small" else
                                              (2, 7, 5), dt),), {"k": 0 if size == "small"
                                                                 else -2}),
                 (lambda f: lambda x, k=0: f(x, k))(_fn))


@case("diag", _ANY)
def _():
    def make(size, dt):
        if size == "small":
            return (_u(_rng(size), (5,), dt),), {"k": 1}
        return (_u(_rng(size), (6, 4), dt),), {"k": -2}
    return make, lambda v, k=0: torch.diag(v, k)


@case("diagonal", _ANY)
def _():
    def make(size, dt):
        x = _u(_rng(size), (4, 6) if size == "small" else (3, 5, 7), dt)
        return (x,), ({"offset": 1} if size == "small" else
                      {"offset": -1, "axis1": 2, "axis2": 1})
    return make, lambda x, offset=0, axis1=0, axis2=1: torch.diagonal(x, offset, axis1, axis2)


@case("eye", _ANY)
def _():
    def make(size, dt):
        return (), ({"N": 4, "dtype": dt} if size == "small" else
                    {"N": 5, "M": 7, "k": 2, "dtype": dt})
    return make, lambda N, M=None, k=0, dtype="float32": torch.ones(
        N, N if M is None else M, dtype=getattr(torch, dtype)).triu(k).tril(k)


@case("arange", _ANY)
def _():
    def make(size, dt):
        return (), ({"start": 3, "stop": 17, "step": 2, "dtype": dt} if size == "small" else
                    {"start": 10, "stop": -3, "step": -3, "dtype": dt})
    return make, lambda start, stop, step, dtype: torch.arange(start, stop, step,
                                                               dtype=getattr(torch, dtype))


def _indices(rng, high, shape, low=0):
    return rng.integers(low, high, shape).astype(np.int64)


@case("take_along_axis", _ANY)
def _():
    def make(size, dt):
        rng = _rng(size)
        x = _u(rng, (3, 5, 4), dt)
        return (x, _indices(rng, 5, (3, 2, 4) if size == "small" else (3, 7, 4))), {"axis": 1}
    return make, lambda x, idx, axis: torch.take_along_dim(x, idx, dim=axis)


@case("gather", _ANY)
def _():
    def make(size, dt):
        rng = _rng(size)
        x = _u(rng, (3, 5, 4), dt)
        return (x, 2, _indices(rng, 4, (2, 5, 6) if size == "odd" else (3, 5, 2))), {}
    return make, lambda x, dim, idx: torch.gather(x, int(dim), idx)


@case("index_select", _ANY)
def _():
    def make(size, dt):
        rng = _rng(size)
        return (_u(rng, (3, 5, 4), dt), 1, _indices(rng, 5, (7,))), {}
    return make, lambda x, dim, idx: torch.index_select(x, int(dim), idx)


@case("embedding")
def _():
    def make(size, dt):
        rng = _rng(size)
        return (_indices(rng, 10, (4,) if size == "small" else (2, 7)), _u(rng, (10, 3), dt)), {}
    return make, F.embedding


@case("one_hot", ("int64", "int32"))
def _():
    def make(size, dt):
        return (_indices(_rng(size), 6, (5,) if size == "small" else (2, 7)).astype(dt),), \
            {"num_classes": 6}
    return make, lambda t, num_classes: F.one_hot(t.to(torch.int64), num_classes)


@case("scatter_add", _ANY)
def _():
    def make(size, dt):
        rng = _rng(size)
        x = _u(rng, (3, 5, 4), dt)
        return (x, 1, _indices(rng, 5, (3, 6, 4)), _u(rng, (3, 6, 4), dt)), {}
    return make, lambda x, dim, idx, src: torch.scatter_add(x, int(dim), idx, src)


@case("masked_fill", _ANY)
def _():
    def make(size, dt):
        rng = _rng(size)
        x = _u(rng, (4, 6) if size == "small" else (3, 5, 7), dt)
        return (x, rng.random(x.shape[-1:]) < 0.5, 2), {}
    return make, lambda x, m, value: x.masked_fill(m, int(value))


@case("sequence_mask", ("int64", "int32"))
def _():
    def make(size, dt):
        return (_indices(_rng(size), 6, (5,) if size == "small" else (2, 3)).astype(dt),), \
            {"max_len": 6}
    return make, lambda n, max_len: torch.arange(max_len) < n[..., None]


# reductions and scans
CASES["all"] = (_ANY, *_reduction(lambda x, axis, keepdims=False: torch.all(
    x != 0, dim=axis, keepdim=keepdims), -1, 1))
CASES["any"] = (_ANY, *_reduction(lambda x, axis, keepdims=False: torch.any(
    x != 0, dim=axis, keepdim=keepdims), -1, 1))
CASES["count_nonzero"] = (_ANY, *_reduction(lambda x, axis, keepdims=False: torch.sum(
    x != 0, dim=axis, keepdim=keepdims)))
CASES["nansum"] = (FLOATS, *_reduction(lambda x, axis, keepdims=False: torch.nansum(
    x, dim=axis, keepdim=keepdims)))
CASES["nanmean"] = (FLOATS, *_reduction(lambda x, axis, keepdims=False: torch.nanmean(
    x, dim=axis, keepdim=keepdims)))
CASES["nanmax"] = (FLOATS, *_reduction(lambda x, axis, keepdims=False: torch.amax(
    torch.nan_to_num(x, nan=-float("inf")), dim=axis, keepdim=keepdims)))
CASES["nanmin"] = (FLOATS, *_reduction(lambda x, axis, keepdims=False: torch.amin(
    torch.nan_to_num(x, nan=float("inf")), dim=axis, keepdim=keepdims)))


@case("vector_norm")
def _():
    def make(size, dt):
        x = _u(_rng(size), (5, 16) if size == "small" else (3, 7, 11), dt)
        return (x,), ({"ord": 1, "axis": -1} if size == "small" else
                      {"ord": 3.0, "axis": (0, 2), "keepdims": True})
    return make, lambda x, ord=2, axis=None, keepdims=False: torch.linalg.vector_norm(
        x, ord, dim=axis, keepdim=keepdims)


def _scan_case(fn, dtypes=FLOATS, low=-3.0, high=3.0):
    def make(size, dt):
        x = _u(_rng(size), (4, 9) if size == "small" else (3, 7, 5), dt, low, high)
        return (x,), {"axis": -1 if size == "small" else 1}
    return dtypes, make, lambda x, axis: fn(x, axis)


CASES["cumsum"] = _scan_case(lambda x, a: torch.cumsum(x, a), _ANY)
CASES["cumprod"] = _scan_case(lambda x, a: torch.cumprod(x, a), FLOATS, 0.8, 1.2)
CASES["logcumsumexp"] = _scan_case(lambda x, a: torch.logcumsumexp(x, a))
CASES["cummax"] = _scan_case(lambda x, a: tuple(torch.cummax(x, a)), _ANY)
CASES["cummin"] = _scan_case(lambda x, a: tuple(torch.cummin(x, a)), _ANY)


def _sort_case(fn):
    def make(size, dt):
        x = _u(_rng(size), (4, 9) if size == "small" else (3, 7, 5), dt)
        return (x,), ({"axis": -1} if size == "small" else {"axis": 1, "descending": True})
    return _ANY, make, fn


CASES["sort"] = _sort_case(lambda x, axis, descending=False: torch.sort(
    x, dim=axis, descending=descending, stable=True)[0])
CASES["argsort"] = _sort_case(lambda x, axis, descending=False: torch.sort(
    x, dim=axis, descending=descending, stable=True)[1])


@case("topk")
def _():
    def make(size, dt):     # distinct values: torch's order among ties is unspecified
        x = _rng(size).permutation(60).reshape(4, 15).astype(dt) / 7
        return (x,), ({"k": 3} if size == "small" else {"k": 3, "dim": 0, "largest": False})
    return make, lambda x, k, dim=-1, largest=True: tuple(torch.topk(x, k, dim, largest))


@case("median")
def _():
    def make(size, dt):
        x = _u(_rng(size), (4, 9) if size == "small" else (3, 8, 5), dt)
        return (x,), {"axis": -1 if size == "small" else 1}
    return make, lambda x, axis: torch.quantile(x, 0.5, dim=axis)    # NumPy's median


# losses and distances
def _loss_case(fn, low=-3.0, high=3.0, tlow=None, thigh=None, **extra):
    def make(size, dt):
        rng = _rng(size)
        shape = (4, 8) if size == "small" else (3, 5, 7)
        x = _u(rng, shape, dt, low, high)
        t = _u(rng, shape, dt, low if tlow is None else tlow, high if thigh is None else thigh)
        return (x, t), dict(extra, reduction="none" if size == "small" else "mean")
    return FLOATS, make, fn


CASES["mse_loss"] = _loss_case(F.mse_loss)
CASES["l1_loss"] = _loss_case(F.l1_loss)
CASES["smooth_l1_loss"] = _loss_case(F.smooth_l1_loss, beta=0.7)
CASES["huber_loss"] = _loss_case(F.huber_loss, delta=0.6)
CASES["kl_div"] = _loss_case(F.kl_div, -4.0, -0.1, 0.0, 1.0)
CASES["binary_cross_entropy"] = _loss_case(F.binary_cross_entropy, 0.01, 0.99, 0.0, 1.0)
CASES["binary_cross_entropy_with_logits"] = _loss_case(F.binary_cross_entropy_with_logits,
                                                       -8.0, 8.0, 0.0, 1.0)


def _class_case(fn, log_probs):
    def make(size, dt):
        rng = _rng(size)
        shape = (6, 5) if size == "small" else (2, 5, 3, 4)
        x = _u(rng, shape, dt)
        if log_probs:
            x = (x - np.log(np.exp(x.astype(np.float64)).sum(1, keepdims=True))).astype(dt)
        t = _indices(rng, 5, (shape[0],) + shape[2:])
        t.flat[1] = -100
        if size == "small":
            return (x, t, _u(rng, (5,), dt, 0.5, 2.0)), {}
        return (x, t), dict({"reduction": "sum"}, **({} if log_probs else
                                                     {"label_smoothing": 0.1}))
    return FLOATS, make, fn


CASES["cross_entropy"] = _class_case(F.cross_entropy, False)
CASES["nll_loss"] = _class_case(F.nll_loss, True)


@case("cosine_similarity")
def _():
    def make(size, dt):
        a, b = _pair_of(size, dt, (4, 8), (3, 5, 7))
        return (a, b), ({} if size == "small" else {"dim": 2})
    return make, lambda a, b, dim=1: F.cosine_similarity(a, b, dim)


@case("pairwise_distance")
def _():
    def make(size, dt):
        a, b = _pair_of(size, dt, (4, 8), (3, 5, 7))
        return (a, b), ({} if size == "small" else {"p": 3.0, "keepdim": True})
    return make, lambda a, b, p=2.0, keepdim=False: F.pairwise_distance(a, b, p,
                                                                        keepdim=keepdim)


@case("cdist")
def _():
    def make(size, dt):
        rng = _rng(size)
        if size == "small":
            return (_u(rng, (4, 6), dt), _u(rng, (5, 6), dt)), {}
        return (_u(rng, (2, 3, 7), dt), _u(rng, (2, 9, 7), dt)), {"p": 1.0}
    return make, lambda a, b, p=2.0: torch.cdist(a, b, p)


# image nn
@case("group_norm")
def _():
    def make(size, dt):
        rng = _rng(size)
        if size == "small":
            return (_u(rng, (2, 6, 4, 5), dt), 3, _u(rng, (6,), dt), _u(rng, (6,), dt)), {}
        return (_u(rng, (3, 4, 7), dt), 2), {"eps": 1e-3}
    return make, lambda x, g, w=None, b=None, eps=1e-5: F.group_norm(x, int(g), w, b, eps)


@case("instance_norm")
def _():
    def make(size, dt):
        rng = _rng(size)
        x = _u(rng, (2, 3, 4, 5) if size == "small" else (3, 4, 7), dt)
        return (x,), ({} if size == "small" else {"eps": 1e-3})
    return make, lambda x, eps=1e-5: F.instance_norm(x, eps=eps)


@case("adaptive_avg_pool2d")
def _():
    def make(size, dt):
        x = _u(_rng(size), (1, 2, 8, 8) if size == "small" else (2, 3, 11, 13), dt)
        return (x,), {"output_size": 2 if size == "small" else (4, 5)}
    return make, F.adaptive_avg_pool2d


@case("global_avg_pool2d")
def _():
    def make(size, dt):
        return (_u(_rng(size), (1, 2, 8, 8) if size == "small" else (2, 3, 11, 13), dt),), {}
    return make, lambda x: F.adaptive_avg_pool2d(x, 1)


@case("pixel_shuffle", _ANY)
def _():
    def make(size, dt):
        x = _u(_rng(size), (1, 8, 3, 4) if size == "small" else (2, 18, 5, 3), dt)
        return (x, 2 if size == "small" else 3), {}
    return make, lambda x, r: F.pixel_shuffle(x, int(r))


@case("pixel_unshuffle", _ANY)
def _():
    def make(size, dt):
        x = _u(_rng(size), (1, 2, 6, 4) if size == "small" else (2, 3, 9, 6), dt)
        return (x, 2 if size == "small" else 3), {}
    return make, lambda x, r: F.pixel_unshuffle(x, int(r))


@case("upsample_nearest")     # (torch has no integer nearest upsampling)
def _():
    def make(size, dt):
        x = _u(_rng(size), (1, 2, 5, 4) if size == "small" else (2, 3, 7, 9), dt)
        return (x,), ({"scale_factor": 2} if size == "small" else {"size": (11, 5)})
    return make, lambda x, size=None, scale_factor=None: F.interpolate(
        x, size=size, scale_factor=scale_factor, mode="nearest")


# detection: torchvision's ops, checked when it is installed
def _tv_boxes(rng, n, dt):
    xy = rng.uniform(0, 40, (n, 2))
    return np.concatenate([xy, xy + rng.uniform(2, 30, (n, 2))], 1).astype(dt)


@case("box_iou")
def _():
    def make(size, dt):
        rng = _rng(size)
        return (_tv_boxes(rng, 4 if size == "small" else 13, dt), _tv_boxes(rng, 7, dt)), {}
    return make, lambda a, b: pytest.importorskip("torchvision").ops.box_iou(a, b)


@case("box_convert")
def _():
    def make(size, dt):
        return (_tv_boxes(_rng(size), 5, dt),), ({"in_fmt": "xyxy", "out_fmt": "cxcywh"}
                                                 if size == "small" else
                                                 {"in_fmt": "xywh", "out_fmt": "xyxy"})
    return make, lambda b, in_fmt, out_fmt: pytest.importorskip(
        "torchvision").ops.box_convert(b, in_fmt, out_fmt)


def _tv_nms(*args):
    tv = pytest.importorskip("torchvision")
    *arrs, thr = args
    keep = tv.ops.batched_nms(*arrs, thr) if len(arrs) == 3 else tv.ops.nms(*arrs, thr)
    full = torch.full((arrs[0].shape[0],), -1, dtype=torch.int64)
    full[:len(keep)] = keep
    return full, torch.tensor(len(keep))


@case("nms")
def _():
    def make(size, dt):    # distinct scores: torchvision's order among ties is unspecified
        rng = _rng(size)
        n = 10 if size == "small" else 70
        return (_tv_boxes(rng, n, dt), rng.permutation(n).astype(dt), 0.3), {}
    return make, lambda b, s, thr: _tv_nms(b, s, float(thr))


@case("batched_nms")
def _():
    def make(size, dt):
        rng = _rng(size)
        n = 10 if size == "small" else 70
        return (_tv_boxes(rng, n, dt), rng.permutation(n).astype(dt), _indices(rng, 3, (n,)),
                0.4), {}
    return make, lambda b, s, i, thr: _tv_nms(b, s, i, float(thr))


@case("roi_pool")
def _():
    make = CASES["roi_align"][1]

    def ref(x, boxes, output_size, spatial_scale=1.0, **_):
        tv = pytest.importorskip("torchvision")
        return tv.ops.roi_pool(x, boxes, output_size, spatial_scale)

    def make_pool(size, dt):
        args, kw = make(size, dt)
        return args, {k: v for k, v in kw.items() if k in ("output_size", "spatial_scale")}
    return make_pool, ref
# -- end of the layout ... image nn block ------------------------------------------------------


# -- math, arith, activations (pypto/ops/{math,arith,activations}.py) ----------------------------
# torch has no cbrt: it is checked against sign(x) * |x| ** (1/3) in torch; geglu against
# torch.chunk plus F.gelu. Everything else is one torch function.
_MATH_UNARY = {
    "atan": (torch.atan, -8, 8), "asin": (torch.asin, -1, 1), "acos": (torch.acos, -1, 1),
    "tan": (torch.tan, -1.5, 1.5), "sinh": (torch.sinh, -10, 10), "cosh": (torch.cosh, -10, 10),
    "asinh": (torch.asinh, -50, 50), "acosh": (torch.acosh, 1, 50),
    "atanh": (torch.atanh, -0.99, 0.99), "exp2": (torch.exp2, -20, 20),
    "log2": (torch.log2, 1e-3, 100), "log10": (torch.log10, 1e-3, 100),
    "cbrt": (lambda x: torch.sign(x) * torch.abs(x) ** (1.0 / 3.0), -30, 30),
    "trunc": (torch.trunc, -5, 5), "deg2rad": (torch.deg2rad, -400, 400),
    "rad2deg": (torch.rad2deg, -7, 7), "hardsigmoid": (F.hardsigmoid, -5, 5),
    "hardswish": (F.hardswish, -5, 5), "mish": (F.mish, -20, 20), "selu": (F.selu, -5, 5),
    "softsign": (F.softsign, -10, 10), "relu6": (F.relu6, -3, 9),
    "tanhshrink": (F.tanhshrink, -4, 4), "log_sigmoid": (F.logsigmoid, -30, 30),
}
for _n, (_fn, _lo, _hi) in _MATH_UNARY.items():
    CASES[_n] = (FLOATS, *_unary(_fn, _lo, _hi))
CASES["sign"] = (FLOATS + ("int32", "int8"), *_unary(torch.sign, -3, 3))
CASES["bitwise_not"] = (("int32", "int64", "int8"), *_unary(torch.bitwise_not, -3, 3))


def _with_specials(fn, params_odd=None):
    def make(size, dt):
        x = _u(_rng(size), _shape(size), dt)
        x.flat[:5] = [np.nan, np.inf, -np.inf, -0.0, 0.0]
        return (x,), ({} if size == "small" else dict(params_odd or {}))
    return make, fn


for _n, _fn in (("isnan", torch.isnan), ("isinf", torch.isinf), ("isfinite", torch.isfinite),
                ("signbit", torch.signbit)):
    CASES[_n] = (FLOATS, _with_specials(_fn)[0], lambda x, _f=_fn: _f(x))
CASES["nan_to_num"] = (FLOATS, *_with_specials(
    lambda x, nan=0.0, posinf=None, neginf=None: torch.nan_to_num(x, nan, posinf, neginf),
    {"nan": 2.0, "posinf": 9.0, "neginf": -9.0}))


@case("cast", FLOATS + ("int32", "int8"))
def _():
    def make(size, dt):
        return (_u(_rng(size), _shape(size), dt, -100, 100),), \
            {"dtype": "int16" if size == "small" else "float16"}
    return make, lambda x, dtype: x.to(getattr(torch, dtype))


_MATH_BINARY = {
    "atan2": (torch.atan2, FLOATS, -3, 3, -3, 3), "hypot": (torch.hypot, FLOATS, -3, 3, -3, 3),
    "copysign": (torch.copysign, FLOATS, -3, 3, -3, 3),
    "fmod": (torch.fmod, ("float32", "float64", "int32", "int64"), -20, 20, 0.5, 4),
    "remainder": (torch.remainder, ("float32", "float64", "int32", "int64"), -20, 20, -4, -0.5),
    "floor_divide": (torch.floor_divide, ("float32", "float64", "int32", "int64"), -20, 20, 0.5, 4),
    "fmax": (torch.fmax, FLOATS + ("int32",), -3, 3, -3, 3),
    "fmin": (torch.fmin, FLOATS + ("int32",), -3, 3, -3, 3),
    "logaddexp": (torch.logaddexp, FLOATS, -30, 30, -30, 30),
    "logaddexp2": (torch.logaddexp2, FLOATS, -30, 30, -30, 30),
    "heaviside": (torch.heaviside, FLOATS, -2, 2, -1, 1),
    "bitwise_and": (torch.bitwise_and, ("int32", "int64", "int8"), -3, 3, -3, 3),
    "bitwise_or": (torch.bitwise_or, ("int32", "int64", "int8"), -3, 3, -3, 3),
    "bitwise_xor": (torch.bitwise_xor, ("int32", "int64", "int8"), -3, 3, -3, 3),
}
for _n, (_fn, _dts, _lo, _hi, _blo, _bhi) in _MATH_BINARY.items():
    CASES[_n] = (_dts, *_binary(_fn, _lo, _hi, _blo, _bhi))


def _shifts(fn):
    def make(size, dt):
        rng = _rng(size)
        a = _u(rng, _shape(size), dt)
        return (a, rng.integers(0, np.dtype(dt).itemsize * 8, _shape(size)).astype(dt)), {}
    return make, fn


CASES["left_shift"] = (("int32", "int64", "int8"), *_shifts(torch.bitwise_left_shift))
CASES["right_shift"] = (("int32", "int64", "int8"), *_shifts(torch.bitwise_right_shift))


@case("lerp")
def _():
    def make(size, dt):
        rng = _rng(size)
        a, b = _u(rng, _shape(size), dt), _u(rng, _shape(size), dt)
        w = _u(rng, _shape(size) if size == "small" else (1,), dt, -0.5, 1.5)
        return (a, b, w), {}
    return make, torch.lerp


def _act(fn, params_small, params_odd, low=-6.0, high=6.0):
    def make(size, dt):
        return (_u(_rng(size), _shape(size), dt, low, high),), \
            (params_small if size == "small" else params_odd)
    return make, fn


CASES["elu"] = (FLOATS, *_act(lambda x, alpha=1.0: F.elu(x, alpha), {}, {"alpha": 0.3}))
CASES["celu"] = (FLOATS, *_act(lambda x, alpha=1.0: F.celu(x, alpha), {}, {"alpha": 2.5}))
CASES["hardtanh"] = (FLOATS, *_act(lambda x, min_val=-1.0, max_val=1.0: F.hardtanh(
    x, min_val, max_val), {}, {"min_val": -0.5, "max_val": 2.0}))
CASES["hardshrink"] = (FLOATS, *_act(lambda x, lambd=0.5: F.hardshrink(x, lambd), {},
                                     {"lambd": 1.25}))
CASES["softshrink"] = (FLOATS, *_act(lambda x, lambd=0.5: F.softshrink(x, lambd), {},
                                     {"lambd": 1.25}))
CASES["threshold"] = (FLOATS, *_act(lambda x, threshold, value: F.threshold(x, threshold, value),
                                    {"threshold": 0.5, "value": -2.0},
                                    {"threshold": -1.0, "value": 0.0}))
CASES["logit"] = (FLOATS, *_act(lambda x, eps=None: torch.logit(x, eps), {}, {"eps": 0.2},
                                0.01, 0.99))


def _halves(size, dt):
    return _u(_rng(size), (4, 8) if size == "small" else (3, 6, 5), dt)


@case("glu")
def _():
    def make(size, dt):
        return (_halves(size, dt),), ({} if size == "small" else {"axis": 1})
    return make, lambda x, axis=-1: F.glu(x, dim=axis)


@case("geglu")
def _():
    def make(size, dt):
        return (_halves(size, dt),), ({} if size == "small" else {"axis": 1,
                                                                  "approximate": "tanh"})

    def ref(x, axis=-1, approximate="none"):
        a, b = torch.chunk(x, 2, dim=axis)
        return a * F.gelu(b, approximate=approximate)
    return make, ref


@case("softmin")
def _():
    make = CASES["softmax"][1]
    return make, lambda x, axis=-1: F.softmin(x, dim=axis)


@case("prelu")
def _():
    def make(size, dt):
        rng = _rng(size)
        if size == "small":
            return (_u(rng, (2, 3, 4, 5), dt), _u(rng, (3,), dt, 0, 1)), {}
        return (_u(rng, (3, 127), dt), _u(rng, (1,), dt, 0, 1)), {}
    return make, F.prelu
# -- end of the math, arith, activations block ---------------------------------------------------


# -- conv, pool, rnn, rotary and grid ops (pypto/ops/{conv,pool,rnn,rotary,grid}.py) -------------
@case("conv1d")
def _():
    def make(size, dt):
        rng = _rng(size)
        if size == "small":
            return (_u(rng, (2, 3, 16), dt, -1, 1), _u(rng, (4, 3, 3), dt, -1, 1),
                    _u(rng, (4,), dt)), {"padding": 1}
        return (_u(rng, (3, 6, 37), dt, -1, 1), _u(rng, (9, 2, 4), dt, -1, 1)), \
            {"stride": 2, "padding": 3, "dilation": 2, "groups": 3}
    return make, lambda x, w, b=None, stride=1, padding=0, dilation=1, groups=1: F.conv1d(
        x, w, b, stride, padding, dilation, groups)


@case("conv3d")
def _():
    def make(size, dt):
        rng = _rng(size)
        if size == "small":
            return (_u(rng, (1, 2, 5, 6, 7), dt, -1, 1), _u(rng, (3, 2, 3, 3, 3), dt, -1, 1),
                    _u(rng, (3,), dt)), {"padding": 1}
        return (_u(rng, (2, 4, 7, 9, 11), dt, -1, 1), _u(rng, (6, 2, 2, 3, 3), dt, -1, 1)), \
            {"stride": (1, 2, 3), "padding": (1, 0, 2), "dilation": (2, 1, 1), "groups": 2}
    return make, lambda x, w, b=None, stride=1, padding=0, dilation=1, groups=1: F.conv3d(
        x, w, b, stride, padding, dilation, groups)


def _convt_ref(fn):
    return lambda x, w, b=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1: fn(
        x, w, b, stride, padding, output_padding, groups, dilation)


@case("conv_transpose1d")
def _():
    def make(size, dt):
        rng = _rng(size)
        if size == "small":
            return (_u(rng, (2, 4, 9), dt, -1, 1), _u(rng, (4, 3, 4), dt, -1, 1),
                    _u(rng, (3,), dt)), {"stride": 2, "padding": 1}
        return (_u(rng, (3, 6, 13), dt, -1, 1), _u(rng, (6, 2, 5), dt, -1, 1)), \
            {"stride": 3, "padding": 2, "output_padding": 1, "groups": 3, "dilation": 2}
    return make, _convt_ref(F.conv_transpose1d)


@case("conv_transpose2d")
def _():
    def make(size, dt):
        rng = _rng(size)
        if size == "small":
            return (_u(rng, (1, 4, 6, 7), dt, -1, 1), _u(rng, (4, 3, 4, 4), dt, -1, 1),
                    _u(rng, (3,), dt)), {"stride": 2, "padding": 1}
        return (_u(rng, (2, 4, 5, 9), dt, -1, 1), _u(rng, (4, 3, 3, 2), dt, -1, 1)), \
            {"stride": (3, 1), "padding": (1, 0), "output_padding": (2, 0), "groups": 2,
             "dilation": (1, 2)}
    return make, _convt_ref(F.conv_transpose2d)


def _pool_case(kind, nsp):
    fn = getattr(F, f"{kind}_pool{nsp}d")

    def make(size, dt):
        rng = _rng(size)
        if size == "small":
            shape = (2, 3, 16) if nsp == 1 else (1, 2, 6, 8, 8)
            return (_u(rng, shape, dt),), {"kernel_size": 2}
        shape = (3, 5, 37) if nsp == 1 else (2, 3, 7, 9, 11)
        kw = {"kernel_size": 3, "stride": 2, "padding": 1} if nsp == 1 else \
            {"kernel_size": (2, 3, 3), "stride": (1, 2, 3), "padding": (1, 1, 0)}
        if kind == "avg":
            kw["count_include_pad"] = False
        return (_u(rng, shape, dt),), kw
    return make, lambda x, **kw: fn(x, **kw)


for _kind in ("max", "avg"):
    for _nsp in (1, 3):
        _m, _r = _pool_case(_kind, _nsp)
        CASES[f"{_kind}_pool{_nsp}d"] = (FLOATS, _m, _r)


@case("rotary_embedding")
def _():
    # torch has no rotary op: the rotate-half form composed from torch.cat (as Hugging Face writes
    # it), with cos/sin built from angles at full width.
    def make(size, dt):
        rng = _rng(size)
        b, h, s, d = (1, 2, 5, 8) if size == "small" else (3, 4, 7, 6)
        ang = rng.uniform(-4, 4, (s, d // 2) if size == "small" else (b, 1, s, d // 2))
        ang = np.concatenate([ang, ang], axis=-1)
        return (_u(rng, (b, h, s, d), dt), np.cos(ang).astype(dt), np.sin(ang).astype(dt)), {}

    def ref(x, cos, sin):
        half = x.shape[-1] // 2
        return x * cos + torch.cat([-x[..., half:], x[..., :half]], dim=-1) * sin
    return make, ref


def _cell_case(gates):
    def make(size, dt):
        rng = _rng(size)
        b, i, h = (2, 3, 4) if size == "small" else (5, 7, 3)
        arrs = [_u(rng, sh, dt, -1, 1) for sh in ((b, i), (b, h), (gates * h, i),
                                                   (gates * h, h), (gates * h,), (gates * h,))]
        return (tuple(arrs) if size == "small" else tuple(arrs[:4])), {}
    return make


@case("gru_cell")
def _():
    return _cell_case(3), lambda x, h, w_ih, w_hh, b_ih=None, b_hh=None: torch.gru_cell(
        x, h, w_ih, w_hh, b_ih, b_hh)


@case("rnn_cell")
def _():
    make = _cell_case(1)

    def make_both(size, dt):
        args, kw = make(size, dt)
        return args, ({} if size == "small" else {"nonlinearity": "relu"})

    def ref(x, h, w_ih, w_hh, b_ih=None, b_hh=None, nonlinearity="tanh"):
        fn = torch.rnn_tanh_cell if nonlinearity == "tanh" else torch.rnn_relu_cell
        return fn(x, h, w_ih, w_hh, b_ih, b_hh)
    return make_both, ref


@case("affine_grid")
def _():
    def make(size, dt):
        rng = _rng(size)
        if size == "small":
            return (_u(rng, (2, 2, 3), dt, -1, 1),), {"size": (2, 3, 5, 7)}
        return (_u(rng, (3, 2, 3), dt, -1, 1),), {"size": (3, 1, 9, 4), "align_corners": True}
    return make, lambda theta, size, align_corners=False: F.affine_grid(
        theta, list(size), align_corners=align_corners)


@case("grid_sample")
def _():
    def make(size, dt):
        rng = _rng(size)
        if size == "small":
            # Positions past the image edges too, where zeros padding reads 0.
            return (_u(rng, (2, 3, 6, 7), dt), _u(rng, (2, 4, 5, 2), dt, -1.2, 1.2)), {}
        return (_u(rng, (1, 4, 9, 5), dt), _u(rng, (1, 7, 3, 2), dt, -1.5, 1.5)), \
            {"padding_mode": "border", "align_corners": True}
    return make, lambda x, grid, mode="bilinear", padding_mode="zeros", align_corners=False: \
        F.grid_sample(x, grid, mode=mode, padding_mode=padding_mode, align_corners=align_corners)
# -- end of the conv, pool, rnn, rotary and grid block --------------------------------------------


# -- morphology, filters, colour, warps, histograms, contractions, quantized ops -----------------
# (pypto/ops/{morphology,filters,color,warp,histograms,contraction,quantized}.py)
def _se_max(x, mask, sign=1.0):
    """Grey dilation of [B, H, W] by a 0/1 ``mask`` anchored at its center, taps outside the
    image ignored (padding with -inf, then the masked maximum of F.unfold's windows); erosion
    with ``sign=-1``. Computed in float64 (exact for uint8)."""
    mask = torch.as_tensor(np.asarray(mask, dtype=bool))
    kh, kw = mask.shape
    xd = x.to(torch.float64) * sign
    b, h, w = xd.shape
    xp = F.pad(xd[:, None], (kw // 2, kw - 1 - kw // 2, kh // 2, kh - 1 - kh // 2),
               value=-float("inf"))
    cols = F.unfold(xp, (kh, kw))[:, mask.reshape(-1)]
    return (cols.amax(dim=1).reshape(b, h, w) * sign).to(x.dtype)


def _se_mask(kernel):
    if isinstance(kernel, int):
        return np.ones((kernel, kernel), bool)
    if isinstance(kernel, tuple):
        return np.ones(kernel, bool)
    return np.asarray(kernel, bool)


_MORPH_DTS = FLOATS + ("uint8",)
_CROSS = np.array([[0, 1, 0], [1, 1, 1], [0, 1, 0]])


def _morph_make(size, dt):
    rng = _rng(size)
    if np.dtype(dt).kind == "u":
        x = rng.integers(0, 256, (2, 8, 8) if size == "small" else (3, 13, 11)).astype(dt)
    else:
        x = _img(size, dt)
    return (x,), ({"kernel": 3} if size == "small" else {"kernel": _CROSS})


CASES["dilate"] = (_MORPH_DTS, _morph_make, lambda x, kernel=3: _se_max(x, _se_mask(kernel)))
CASES["erode"] = (_MORPH_DTS, _morph_make,
                  lambda x, kernel=3: _se_max(x, _se_mask(kernel), -1.0))
CASES["morph_open"] = (_MORPH_DTS, _morph_make, lambda x, kernel=3: _se_max(
    _se_max(x, _se_mask(kernel), -1.0), _se_mask(kernel)))
CASES["morph_close"] = (_MORPH_DTS, _morph_make, lambda x, kernel=3: _se_max(
    _se_max(x, _se_mask(kernel)), _se_mask(kernel), -1.0))
def _replicated_windows(x, k):
    """[B, H, W] -> [B, k*k, H, W]: each pixel's k x k window, edges replicated (float64)."""
    b, h, w = x.shape
    xp = F.pad(x.to(torch.float64)[:, None], (k // 2,) * 4, mode="replicate")
    return F.unfold(xp, (k, k)).reshape(b, k * k, h, w)


@case("median_blur", _MORPH_DTS)
def _():
    def make(size, dt):
        (x,), _ = _morph_make(size, dt)
        if np.dtype(dt).kind == "f":
            x.flat[5] = np.nan
        return (x,), {"ksize": 3 if size == "small" else 5}
    # An odd number of values: torch.median's lower middle is the middle.
    return make, lambda x, ksize=3: _replicated_windows(x, ksize).median(dim=1).values.to(x.dtype)


@case("laplacian")
def _():
    def make(size, dt):
        return (_img(size, dt),), {"ksize": 1 if size == "small" else 3}

    def ref(x, ksize=1):
        k = [[0, 1, 0], [1, -4, 1], [0, 1, 0]] if ksize == 1 else [[2, 0, 2], [0, -8, 0],
                                                                   [2, 0, 2]]
        return _filter(x, torch.tensor(k, dtype=torch.float64))
    return make, ref


@case("bilateral_filter")
def _():
    def make(size, dt):
        if size == "small":
            return (_img(size, dt),), {"d": 5, "sigma_color": 0.5, "sigma_space": 1.5}
        return (_img(size, dt),), {"d": 0, "sigma_color": 2.0, "sigma_space": 2.1}

    def ref(x, d, sigma_color, sigma_space):
        r = d // 2 if d > 0 else round(1.5 * sigma_space)
        win = _replicated_windows(x, 2 * r + 1)
        i, j = torch.meshgrid(torch.arange(-r, r + 1.0), torch.arange(-r, r + 1.0),
                              indexing="ij")
        d2 = (i * i + j * j).reshape(-1).to(torch.float64)
        keep = d2 <= r * r
        win, d2 = win[:, keep], d2[keep]
        wt = torch.exp(-d2[None, :, None, None] / (2 * sigma_space ** 2)
                       - (win - x.to(torch.float64)[:, None]) ** 2 / (2 * sigma_color ** 2))
        return ((wt * win).sum(1) / wt.sum(1)).to(x.dtype)
    return make, ref


@case("integral_image", _MORPH_DTS)
def _():
    def make(size, dt):
        return _morph_make(size, dt)[0], {}

    def ref(x):
        acc = torch.int64 if not x.is_floating_point() else torch.float64
        out = torch.cumsum(torch.cumsum(x.to(acc), -2), -1)
        return out.to(torch.int32 if not x.is_floating_point() else x.dtype)
    return make, ref
# colour conversions: torch has none; torchvision's formulas composed from torch ops (its
# _rgb2hsv and _hsv2rgb, without the clamp it applies to p, q, t) and BT.601 matrices.
def _rgb_make(size, dt):
    rng = _rng(size)
    if np.dtype(dt).kind == "u":
        return (rng.integers(0, 256, (2, 3, 4, 5) if size == "small" else (3, 7, 3)).astype(dt),
                ), ({} if size == "small" else {"axis": -1})
    x = rng.uniform(0, 1, (2, 3, 4, 5) if size == "small" else (3, 7, 3)).astype(dt)
    return (x,), ({} if size == "small" else {"axis": -1})


def _on_axis(fn):
    """A torch function of channels-first [.., 3, ...] made to take axis= like the ops."""
    def ref(x, axis=-3):
        return torch.movedim(fn(torch.movedim(x, axis, 0)), 0, axis)
    return ref


def _t_gray(x):
    if x.dtype == torch.uint8:
        s = x[0].long() * 299 + x[1].long() * 587 + x[2].long() * 114
        return torch.div(s + 500, 1000, rounding_mode="floor").to(torch.uint8)[None]
    return (0.299 * x[0] + 0.587 * x[1] + 0.114 * x[2])[None]


def _t_hsv(x):
    r, g, b = x.to(torch.float64)
    maxc, minc = torch.max(torch.max(r, g), b), torch.min(torch.min(r, g), b)
    eqc = maxc == minc
    cr = maxc - minc
    s = cr / torch.where(eqc, torch.ones_like(maxc), maxc)
    div = torch.where(eqc, torch.ones_like(cr), cr)
    rc, gc, bc = (maxc - r) / div, (maxc - g) / div, (maxc - b) / div
    hr = (maxc == r) * (bc - gc)
    hg = ((maxc == g) & (maxc != r)) * (2.0 + rc - bc)
    hb = ((maxc != g) & (maxc != r)) * (4.0 + gc - rc)
    h = torch.fmod((hr + hg + hb) / 6.0 + 1.0, 1.0)
    return torch.stack([h, s, maxc]).to(x.dtype)


def _t_rgb(x):
    h, s, v = x.to(torch.float64)
    i = torch.floor(h * 6.0)
    f = h * 6.0 - i
    i = i.to(torch.int64) % 6
    p, q, t = v * (1.0 - s), v * (1.0 - s * f), v * (1.0 - s * (1.0 - f))
    mask = i[None] == torch.arange(6).reshape((6,) + (1,) * i.dim())
    sectors = ((v, q, p, p, t, v), (t, v, v, q, p, p), (p, p, t, v, v, q))
    return torch.stack([(mask * torch.stack(c)).sum(0) for c in sectors]).to(x.dtype)


_YUV = torch.tensor([[0.299, 0.587, 0.114],
                     [-0.436 * 0.299 / 0.886, -0.436 * 0.587 / 0.886, 0.436],
                     [0.615, -0.615 * 0.587 / 0.701, -0.615 * 0.114 / 0.701]], dtype=torch.float64)


def _t_mix(m):
    return lambda x: torch.einsum("ij,j...->i...", m, x.to(torch.float64)).to(x.dtype)


CASES["rgb_to_gray"] = (_MORPH_DTS, _rgb_make, _on_axis(_t_gray))
CASES["rgb_to_hsv"] = (FLOATS, _rgb_make, _on_axis(_t_hsv))
CASES["hsv_to_rgb"] = (FLOATS, _rgb_make, _on_axis(_t_rgb))
CASES["rgb_to_yuv"] = (FLOATS, _rgb_make, _on_axis(_t_mix(_YUV)))
CASES["yuv_to_rgb"] = (FLOATS, _rgb_make, _on_axis(_t_mix(torch.linalg.inv(_YUV))))
@case("resize_nearest", _MORPH_DTS)
def _():
    def make(size, dt):
        (x,), _ = _morph_make(size, dt)
        if size == "small":
            return (x,), {"height": 16, "width": 5}
        return (x,), {"height": 7, "width": 29, "mode": "nearest-exact"}
    return make, lambda x, height, width, mode="nearest": F.interpolate(
        x[None], size=(height, width), mode=mode)[0]


@case("resize_bicubic")
def _():
    def make(size, dt):
        if size == "small":
            return (_img(size, dt),), {"height": 16, "width": 5}
        return (_img(size, dt),), {"height": 7, "width": 29, "align_corners": True}
    return make, lambda x, height, width, align_corners=False: F.interpolate(
        x[None], size=(height, width), mode="bicubic", align_corners=align_corners)[0]


def _warp_sample(x, inv, size, perspective):
    """x [..., H, W] sampled at inv (3 x 3, destination -> source pixel coordinates) through
    F.grid_sample (bilinear, zeros, align_corners=True: pixel centers at the normalized ends)."""
    h, w = x.shape[-2:]
    oh, ow = size if size is not None else (h, w)
    yy, xx = torch.meshgrid(torch.arange(oh, dtype=torch.float64),
                            torch.arange(ow, dtype=torch.float64), indexing="ij")
    src = torch.einsum("ij,jhw->ihw", inv, torch.stack([xx, yy, torch.ones_like(xx)]))
    sx, sy = (src[0] / src[2], src[1] / src[2]) if perspective else (src[0], src[1])
    grid = torch.stack([2 * sx / (w - 1) - 1, 2 * sy / (h - 1) - 1], -1)[None]
    x4 = x.reshape(1, -1, h, w).to(torch.float64)
    out = F.grid_sample(x4, grid, mode="bilinear", padding_mode="zeros", align_corners=True)
    return out.reshape(x.shape[:-2] + (oh, ow)).to(x.dtype)


def _warp_case(rows):
    def make(size, dt):
        rng = _rng(size)
        x = _img(size, dt)
        m = np.eye(3)[:rows] + rng.uniform(-0.2, 0.2, (rows, 3)) * np.array([1, 1, 10])
        if rows == 3:
            m[2] = [2e-3, -1e-3, 1.0]
        if size == "small":
            return (x, m), {}
        return (x, m), {"size": (9, 14), "inverse_map": True}

    def ref(x, matrix, size=None, inverse_map=False):
        full = torch.eye(3, dtype=torch.float64)
        full[:rows] = matrix
        inv = full if inverse_map else torch.linalg.inv(full)
        return _warp_sample(x, inv, size, rows == 3)
    return make, ref


CASES["warp_affine"] = (FLOATS, *_warp_case(2))
CASES["warp_perspective"] = (FLOATS, *_warp_case(3))
@case("histogram", FLOATS + ("uint8", "int32"))
def _():
    def make(size, dt):
        rng = _rng(size)
        if np.dtype(dt).kind in "iu":
            return (rng.integers(0, 200, (5, 37)).astype(dt),), \
                ({"bins": 20, "range": (0, 200)} if size == "small" else {"bins": 7})
        x = rng.normal(0, 1, (5, 37) if size == "small" else (1001,)).astype(dt)
        return (x,), ({"bins": 8, "range": (-2, 2)} if size == "small" else {"bins": 13})

    def ref(x, bins=10, range=None):
        xd = x.to(torch.float64)
        lo, hi = (float(xd.min()), float(xd.max())) if range is None else map(float, range)
        counts = torch.histc(xd, bins, lo, hi).to(torch.int64)
        # The documented edges, i * step + lo and hi at the end (torch.linspace rounds
        # differently in the last bit).
        edges = torch.arange(bins + 1, dtype=torch.float64) * ((hi - lo) / bins) + lo
        edges[-1] = hi
        return counts, edges
    return make, ref


@case("equalize_hist", ("uint8",))
def _():
    # torch has no equalization (torchvision's equalize follows PIL, not OpenCV): the
    # documented cv2.equalizeHist formula composed from torch.bincount, cumsum and round.
    def make(size, dt):
        rng = _rng(size)
        shape = (2, 8, 9) if size == "small" else (3, 17, 13)
        return (np.minimum(rng.exponential(30.0, shape), 255).astype(dt),), {}

    def ref(x):
        out = torch.empty_like(x)
        for i, img in enumerate(x.reshape(-1, *x.shape[-2:])):
            hist = torch.bincount(img.reshape(-1).long(), minlength=256)
            first = hist[hist > 0][0]
            scale = torch.tensor(255.0, dtype=torch.float32) / (img.numel() - first).float()
            lut = torch.round((torch.cumsum(hist, 0) - first).float() * scale)
            out.reshape(-1, *x.shape[-2:])[i] = lut.clamp(0, 255).to(torch.uint8)[img.long()]
        return out
    return make, ref
# linear algebra: torch.einsum (subscripts by keyword: every positional argument is an array
# here), torch.outer, torch.addmm, torch.baddbmm; trace of stacks through torch.diagonal
@case("einsum")
def _():
    def make(size, dt):
        rng = _rng(size)
        if size == "small":
            return (_u(rng, (2, 3, 4), dt), _u(rng, (2, 5, 4), dt)), {"subscripts": "bik,bjk->bij"}
        return (_u(rng, (3, 1, 7), dt), _u(rng, (7, 5), dt), _u(rng, (5,), dt)), \
            {"subscripts": "...ij,jk,k->...i"}
    return make, lambda *ops, subscripts: torch.einsum(subscripts, *ops)


@case("outer", FLOATS + ("int32", "int64"))
def _():
    def make(size, dt):
        rng = _rng(size)
        return (_u(rng, (4,) if size == "small" else (37,), dt), _u(rng, (6,) if size == "small"
                                                                     else (1,), dt)), {}
    return make, torch.outer


@case("addmm")
def _():
    def make(size, dt):
        rng = _rng(size)
        if size == "small":
            return (_u(rng, (4, 6), dt), _u(rng, (4, 8), dt), _u(rng, (8, 6), dt)), {}
        return (_u(rng, (5,), dt), _u(rng, (7, 131), dt), _u(rng, (131, 5), dt)), \
            {"beta": 0.5, "alpha": -2.0}
    return make, lambda c, a, b, beta=1, alpha=1: torch.addmm(c, a, b, beta=beta, alpha=alpha)


@case("baddbmm")
def _():
    def make(size, dt):
        rng = _rng(size)
        if size == "small":
            return (_u(rng, (2, 4, 6), dt), _u(rng, (2, 4, 8), dt), _u(rng, (2, 8, 6), dt)), {}
        return (_u(rng, (1, 5), dt), _u(rng, (3, 7, 33), dt), _u(rng, (3, 33, 5), dt)), \
            {"beta": 0.0, "alpha": 1.5}
    return make, lambda c, a, b, beta=1, alpha=1: torch.baddbmm(c, a, b, beta=beta, alpha=alpha)


@case("trace", FLOATS + ("int32", "int64"))
def _():
    def make(size, dt):
        rng = _rng(size)
        if size == "small":
            return (_u(rng, (5, 5), dt),), {}
        return (_u(rng, (3, 6, 4), dt),), {"offset": -2, "axis1": 1, "axis2": 0}

    def ref(x, offset=0, axis1=0, axis2=1):
        if x.dim() == 2 and offset == 0:
            return torch.trace(x)
        return torch.diagonal(x, offset, axis1, axis2).sum(-1)
    return make, ref
# quantization: torch's fake quantization; torch.ops.quantized computes in float32, so the
# integer ops are checked against their documented float64 rule composed from torch ops, and
# quantized_conv2d against F.conv2d on the zero-point-shifted values in float64 (exact here)
@case("fake_quantize_per_tensor_affine")
def _():
    def make(size, dt):
        x = _u(_rng(size), _shape(size), dt, -3, 3)
        if size == "small":
            return (x,), {"scale": 0.05, "zero_point": 3, "quant_min": -128, "quant_max": 127}
        return (x,), {"scale": 0.017, "zero_point": 0, "quant_min": 0, "quant_max": 255}
    return make, lambda x, **kw: torch.fake_quantize_per_tensor_affine(x, **kw)


@case("fake_quantize_per_channel_affine")
def _():
    def make(size, dt):
        rng = _rng(size)
        shape, axis = ((2, 3, 4, 5), 1) if size == "small" else ((7, 13), 0)
        c = shape[axis]
        return (_u(rng, shape, dt, -3, 3), rng.uniform(0.01, 0.1, c).astype(np.float32),
                rng.integers(-3, 4, c).astype(np.int32)), \
            {"axis": axis, "quant_min": -128, "quant_max": 127}
    return make, lambda x, s, z, **kw: torch.fake_quantize_per_channel_affine(x, s, z, **kw)


@case("quantized_conv2d", ("uint8", "int8"))
def _():
    def make(size, dt):
        rng = _rng(size)
        info = np.iinfo(dt)
        if size == "small":
            x = rng.integers(info.min, info.max + 1, (1, 3, 6, 7)).astype(dt)
            w = rng.integers(-128, 128, (4, 3, 3, 3)).astype(np.int8)
            return (x, w, rng.integers(-999, 999, 4).astype(np.int32)), \
                {"padding": 1, "x_zero_point": 128 if dt == "uint8" else 5}
        x = rng.integers(info.min, info.max + 1, (2, 4, 9, 11)).astype(dt)
        w = rng.integers(-128, 128, (6, 2, 2, 3)).astype(np.int8)
        return (x, w), {"stride": 2, "padding": (1, 2), "dilation": (2, 1), "groups": 2,
                        "x_zero_point": 3, "w_zero_point": -2}

    def ref(x, w, bias=None, stride=1, padding=0, dilation=1, groups=1, x_zero_point=0,
            w_zero_point=0):
        xd, wd = x.to(torch.float64) - x_zero_point, w.to(torch.float64) - w_zero_point
        b = None if bias is None else bias.to(torch.float64)
        return F.conv2d(xd, wd, b, stride, padding, dilation, groups).to(torch.int32)
    return make, ref


def _t_requant(real, scale, zero_point, dtype, relu=False):
    info = np.iinfo(dtype)
    q = torch.round(real * (1.0 / scale)) + zero_point
    if relu:
        q = torch.clamp(q, min=zero_point)
    return torch.clamp(q, info.min, info.max).to(getattr(torch, dtype))


@case("quantized_add", ("int8", "uint8"))
def _():
    def make(size, dt):
        rng = _rng(size)
        info = np.iinfo(dt)
        a = rng.integers(info.min, info.max + 1, _shape(size)).astype(dt)
        b = rng.integers(info.min, info.max + 1, _shape(size)[-1:]).astype(dt)
        zp = 3 if dt == "int8" else 130
        kw = {"a_scale": 0.05, "a_zero_point": zp, "b_scale": 0.1, "b_zero_point": zp - 5,
              "scale": 0.12, "zero_point": zp + 1}
        return (a, b), (kw if size == "small" else dict(kw, relu=True))

    def ref(a, b, a_scale, a_zero_point, b_scale, b_zero_point, scale, zero_point, dtype=None,
            relu=False):
        real = (a.double() - a_zero_point) * a_scale + (b.double() - b_zero_point) * b_scale
        return _t_requant(real, scale, zero_point, dtype or str(a.dtype)[6:], relu)
    return make, ref


@case("quantized_relu", ("int8", "uint8"))
def _():
    def make(size, dt):
        rng = _rng(size)
        info = np.iinfo(dt)
        q = rng.integers(info.min, info.max + 1, _shape(size)).astype(dt)
        if size == "small":
            return (q,), {"scale": 0.1, "zero_point": 7}
        return (q,), {"scale": 0.1, "zero_point": 7, "out_scale": 0.03, "out_zero_point": 0,
                      "dtype": "uint8"}

    def ref(q, scale, zero_point, out_scale=None, out_zero_point=None, dtype=None):
        kept = torch.clamp(q.long(), min=zero_point)
        if out_scale is None:
            return kept.to(q.dtype)
        return _t_requant((kept - zero_point).double() * scale, out_scale, out_zero_point, dtype)
    return make, ref
# -- end of the morphology ... quantized block ----------------------------------------------------


ANCHOR_CALLS = {
    "small": {"feat_h": 2, "feat_w": 3, "stride": 16, "sizes": (32, 64), "ratios": (0.5, 1.0)},
    "odd": {"feat_h": 5, "feat_w": 7, "stride": (8, 4), "sizes": (13.0,),
            "ratios": (0.5, 1.0, 2.0), "dtype": "float64"},
}


def test_every_op_is_checked_or_listed():
    missing = {op.name for op in pypto.ops.builtin_ops()} - set(CASES) - {"anchor_boxes"}
    assert not missing, (f"ops {sorted(missing)} have no PyTorch cross-check: add a case to "
                         f"CASES, or list the op in the module docstring with the reason")


def _close(got, want, dt, name):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, f"{name}: shape {got.shape} != torch {want.shape}"
    rtol, atol = tolerance(dt) if np.dtype(dt).kind == "f" else (0.0, 0.0)
    if got.dtype.kind == "f" or want.dtype.kind == "f":
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol,
                                   atol=atol, equal_nan=True, err_msg=name)
    else:
        np.testing.assert_array_equal(got, want, err_msg=name)


@pytest.mark.parametrize("size", ["small", "odd"])
@pytest.mark.parametrize("name,dt", [(n, d) for n, (dts, _, _) in sorted(CASES.items())
                                      for d in dts])
def test_op_agrees_with_torch(name, dt, size):
    _, make, ref = CASES[name]
    args, kwargs = make(size, dt)
    want = ref(*[_t(a) for a in args], **kwargs)
    got = getattr(P, name)(*args, **kwargs)
    if isinstance(want, tuple):
        assert isinstance(got, tuple) and len(got) == len(want), name
        for g, w in zip(got, want):
            _close(g, w.numpy(), dt, name)
    else:
        _close(got, want.numpy(), dt, name)


@pytest.mark.parametrize("size", ["small", "odd"])
def test_anchor_boxes_agree_with_torchvision(size):
    pytest.importorskip("torchvision")
    from torchvision.models.detection.anchor_utils import AnchorGenerator

    kw = ANCHOR_CALLS[size]
    dt = getattr(torch, kw.get("dtype", "float32"))
    gen = AnchorGenerator(sizes=(tuple(kw["sizes"]),), aspect_ratios=(tuple(kw["ratios"]),))
    gen.set_cell_anchors(dt, torch.device("cpu"))
    st = kw["stride"] if isinstance(kw["stride"], tuple) else (kw["stride"],) * 2
    want = gen.grid_anchors([[kw["feat_h"], kw["feat_w"]]],
                            [[torch.tensor(st[0]), torch.tensor(st[1])]])[0]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = P.anchor_boxes(**kw)
    _close(got, want.numpy(), kw.get("dtype", "float32"), "anchor_boxes")
