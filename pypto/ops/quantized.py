"""Quantization-aware training and integer inference ops: fake quantization, quantized conv2d,
and int8/uint8 add and relu with requantization.

A real value ``v`` is represented by the integer ``q`` with ``v ~= (q - zero_point) * scale``
(as in ``pypto.ops.quantize``).

- ``fake_quantize_per_tensor_affine(input, scale, zero_point, quant_min, quant_max)`` and
  ``fake_quantize_per_channel_affine(input, scale, zero_point, axis, quant_min, quant_max)``
  are torch's: ``(clamp(round(x * inv) + zero_point, quant_min, quant_max) - zero_point) * s``
  with ``s = float32(scale)`` and ``inv = float32(1 / s)`` (torch's CPU kernel multiplies by the
  float32 reciprocal), rounding half to even; ``x * inv`` is rounded to the input's precision.
  For float64 inputs the per-tensor result is rounded through float32, the per-channel one is
  not: torch's two kernels differ there, and these follow them. +-inf saturate at the clamp
  limits, as torch's per-tensor kernel does (its per-channel kernel maps +inf to
  ``quant_min``, from converting inf to an integer; here both saturate). NaN stays NaN (torch's
  kernels give ``(quant_min - zero_point) * s``, from converting NaN to an integer).
- ``quantized_conv2d(x, w, bias=None, stride, padding, dilation, groups, x_zero_point,
  w_zero_point)``: ``F.conv2d`` of ``x - x_zero_point`` with ``w - w_zero_point`` in exact int32
  arithmetic, plus an int32 ``bias``; padding holds ``x_zero_point`` (real 0). The int32 result
  is the accumulator ``requantize`` takes. Exact while it fits in int32 (always for
  ``C/groups * KH * KW <= 33025`` taps).
- ``quantized_add(a, b, a_scale, a_zero_point, b_scale, b_zero_point, scale, zero_point,
  dtype=None, relu=False)``: ``clip(round(((a - a_zp) a_scale + (b - b_zp) b_scale) * (1 /
  scale)) + zero_point)`` in float64, each step rounded once (the reciprocal is computed once;
  a multiplication is correctly rounded on every target), rounded half to even;
  ``relu=True`` clamps at ``zero_point`` (real 0) first. ``a`` and ``b`` broadcast.
  ``torch.ops.quantized.add`` computes in float32 and can differ by one step at ties.
- ``quantized_relu(q, scale, zero_point, out_scale=None, out_zero_point=None, dtype=None)``:
  ``max(q, zero_point)``, requantized to ``(out_scale, out_zero_point, dtype)`` when given
  (the same float64 rule); without them the result is ``max(q, zero_point)`` exactly, as
  ``torch.nn.quantized.functional.relu``.
"""

from __future__ import annotations

import math
import operator

import halide as hl
import numpy as np

from ..errors import ParamError, ShapeError
from ..runtime import as_array
from ._consts import lit64
from ._op import Param, op
from .nn import _check_out_size, _derive_out, _image, _pair, _window_params
from .quant import _QRANGE, _QTYPE, _check_dtype

_FLOATS = ["float32", "float64"]
_I32 = (1 << 31) - 1


def _scale(name, arg, v):
    if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)):
        raise ParamError(f"{name}: parameter '{arg}' expects a number, got {v!r}")
    if not (math.isfinite(v) and v > 0):
        raise ParamError(f"{name}: parameter '{arg}' must be finite and > 0, got {v!r}")
    return float(v)


def _int(name, arg, v):
    if isinstance(v, (bool, np.bool_)) or not hasattr(v, "__index__"):
        raise ParamError(f"{name}: parameter '{arg}' expects an int, got {v!r}")
    try:
        return operator.index(v)   # (int() of an array of two raised a raw TypeError)
    except TypeError:
        raise ParamError(f"{name}: parameter '{arg}' expects an int, got {v!r}") from None


def _qbounds(name, zero_point, quant_min, quant_max):
    qmin, qmax = _int(name, "quant_min", quant_min), _int(name, "quant_max", quant_max)
    if qmin > qmax:
        raise ParamError(f"{name}: quant_min ({qmin}) must be <= quant_max ({qmax})")
    zps = np.atleast_1d(zero_point)
    if np.any(zps < qmin) or np.any(zps > qmax):
        raise ParamError(f"{name}: zero_point must lie in [quant_min, quant_max] = "
                         f"[{qmin}, {qmax}], got {zero_point!r}")
    return qmin, qmax


def _f32(v) -> float:
    return float(np.float32(v))


def _inv32(s: float) -> float:
    return float(np.float32(1.0) / np.float32(s))


# -- fake quantization: NumPy ---------------------------------------------------------------------

def _fake_np(x, s32, inv32, zp, qmin, qmax, round32):
    """The documented rule on an array; ``s32``, ``inv32`` and ``zp`` broadcast against x."""
    x = np.asarray(x)
    dt = x.dtype.type
    with np.errstate(invalid="ignore", over="ignore"):
        prod = x * np.asarray(inv32, dtype=dt)              # rounded in x's precision
        q = np.rint(prod.astype(np.float64)) + zp
        q = np.clip(q, qmin, qmax)
        out = (q - zp) * np.asarray(s32, np.float64)
        out = (out.astype(np.float32) if round32 else out).astype(dt)
    return np.where(np.isnan(x), x, out)


def _fq_tensor_ref(input, scale, zero_point, quant_min, quant_max):     # noqa: A002
    name = "fake_quantize_per_tensor_affine"
    s = _scale(name, "scale", scale)
    zp = _int(name, "zero_point", zero_point)
    qmin, qmax = _qbounds(name, zp, quant_min, quant_max)
    return _fake_np(input, _f32(s), _inv32(_f32(s)), zp, qmin, qmax, True)


def _fq_channel_ref(input, scale, zero_point, axis, quant_min, quant_max):     # noqa: A002
    x = np.asarray(input)
    s = np.asarray(scale, np.float32)
    zp = np.asarray(zero_point).astype(np.int64)
    ax = axis % x.ndim
    shape = [1] * x.ndim
    shape[ax] = x.shape[ax]
    inv = (np.float32(1.0) / s).astype(np.float32)
    return _fake_np(x, s.reshape(shape), inv.reshape(shape), zp.reshape(shape), quant_min,
                    quant_max, False)


# -- fake quantization: kernels -------------------------------------------------------------------

def round_half_even(x):
    """Round half to even, written out: hl.round lowers to a half-away-from-zero rounding on
    the OpenCL target (seen on PoCL), and quantization must agree on ties everywhere."""
    f = hl.floor(x)
    d = x - f
    odd = f - lit64(2.0) * hl.floor(f * lit64(0.5)) if x.type().bits() == 64 else \
        f - hl.cast(x.type(), 2.0) * hl.floor(f * hl.cast(x.type(), 0.5))
    half = hl.cast(x.type(), 0.5)
    one = hl.cast(x.type(), 1.0)
    # Beyond 2**52 (2**23 in float32) every value is an integer, infinities included.
    big = hl.cast(x.type(), 2.0 ** (52 if x.type().bits() == 64 else 23))
    return hl.strict_float(hl.select(hl.abs(x) >= big, x, d > half, f + one, d < half, f,
                                     f + odd))


def _fake_expr(v, s32, inv32, zp, qmin, qmax, round32):
    """The rule in Halide on a float Expr ``v``; ``s32``/``inv32`` float64 Exprs holding float32
    values, ``zp`` an Int(32) Expr; ``round32`` rounds the final product to float32."""
    t = v.type()
    f64 = hl.Float(64)
    prod = hl.cast(f64, hl.strict_float(v * hl.cast(t, inv32)))     # rounded in v's precision
    # Clamped before the integer conversion, so that huge values and infinities saturate.
    q = hl.clamp(round_half_even(prod) + hl.cast(f64, zp), lit64(qmin), lit64(qmax))
    res = hl.strict_float((q - hl.cast(f64, zp)) * s32)
    if round32:
        res = hl.cast(hl.Float(32), res)
    res = hl.cast(t, res)
    # NaN tested on the bits (Halide compiles float comparisons as if no operand were NaN).
    from .elementwise import _is_nan

    return hl.select(_is_nan(v), v, res)


def _fq_tensor_frontend(input, scale, zero_point, quant_min, quant_max):     # noqa: A002
    """``torch.fake_quantize_per_tensor_affine``: quantize to [quant_min, quant_max] with
    ``(scale, zero_point)`` and back, any shape (see the module doc)."""
    name = "fake_quantize_per_tensor_affine"
    x = as_array(input, name, "input")
    s = _scale(name, "scale", scale)
    zp = _int(name, "zero_point", zero_point)
    qmin, qmax = _qbounds(name, zp, quant_min, quant_max)
    out = fake_quantize_per_tensor_affine.kernel(x.reshape(-1), scale=s, zero_point=zp,
                                                 quant_min=qmin, quant_max=qmax)
    return out.reshape(x.shape)


def _fq_validate(dims, p):
    name = "fake_quantize_per_tensor_affine"
    _scale(name, "scale", p["scale"])
    _qbounds(name, p["zero_point"], p["quant_min"], p["quant_max"])


_QPARAMS = [Param("quant_min", int, low=-_I32, high=_I32, doc="smallest quantized value"),
            Param("quant_max", int, low=-_I32, high=_I32, doc="largest quantized value")]


@op(category="quantization", inputs={"input": "N"}, output="N", dtypes=_FLOATS,
    params=[Param("scale", float, doc="quantization step (> 0)"),
            Param("zero_point", int, low=-_I32, high=_I32, doc="integer that represents 0.0")]
    + _QPARAMS,
    reference=_fq_tensor_ref, frontend=_fq_tensor_frontend, validate=_fq_validate,
    doc=_fq_tensor_frontend.__doc__, example={"N": 100000})
def fake_quantize_per_tensor_affine(input, *, scale, zero_point, quant_min, quant_max):   # noqa
    """Round to the quantization grid and back, saturating at the clamp limits."""
    n = hl.Var("n")
    s32 = _f32(scale)
    out = hl.Func("out")
    out[n] = _fake_expr(input[n], lit64(s32), lit64(_inv32(s32)),
                        hl.i32(zero_point), quant_min, quant_max, True)
    return out


def _fq_channel_frontend(input, scale, zero_point, axis, quant_min, quant_max):     # noqa: A002
    """``torch.fake_quantize_per_channel_affine``: each slice along ``axis`` with its own
    ``scale[c]`` (float32) and ``zero_point[c]`` (integers); see the module doc."""
    name = "fake_quantize_per_channel_affine"
    x = as_array(input, name, "input")
    s = as_array(scale, name, "scale")
    zp = as_array(zero_point, name, "zero_point")
    if isinstance(axis, bool) or not hasattr(axis, "__index__") or x.ndim == 0 or \
            not -x.ndim <= int(axis) < x.ndim:
        raise ParamError(f"{name}: parameter 'axis' must be an int in [-{x.ndim}, "
                         f"{x.ndim - 1}] for 'input' of shape {tuple(x.shape)}, got {axis!r}")
    ax = int(axis) % x.ndim
    c = x.shape[ax]
    for arg, v in (("scale", s), ("zero_point", zp)):
        if v.ndim != 1 or v.shape[0] != c:
            raise ShapeError(f"{name}: '{arg}' must be 1-D with one entry per channel "
                             f"(input.shape[{axis}] = {c}), got shape {tuple(v.shape)}")
    if zp.dtype.kind not in "iu":
        raise ParamError(f"{name}: 'zero_point' must hold integers, got dtype {zp.dtype}")
    if isinstance(s, np.ndarray):
        if s.dtype.kind not in "iuf":
            raise ParamError(f"{name}: 'scale' must hold numbers, got dtype {s.dtype}")
        if not np.all(np.isfinite(s) & (s > 0)):
            raise ParamError(f"{name}: every 'scale' must be finite and > 0")
    if isinstance(zp, np.ndarray):
        _qbounds(name, zp, quant_min, quant_max)
    qmin, qmax = _int(name, "quant_min", quant_min), _int(name, "quant_max", quant_max)
    if qmin > qmax:
        raise ParamError(f"{name}: quant_min ({qmin}) must be <= quant_max ({qmax})")
    s = s.astype(np.float32) if s.dtype != np.float32 else s
    zp = zp.astype(np.int32) if zp.dtype != np.int32 else zp
    b = math.prod(x.shape[:ax])
    n = math.prod(x.shape[ax + 1:])
    out = fake_quantize_per_channel_affine.kernel(x.reshape(b, c, n), s, zp, quant_min=qmin,
                                                  quant_max=qmax)
    return out.reshape(x.shape)


def _fq_channel_kernel_ref(input, scale, zero_point, quant_min, quant_max):     # noqa: A002
    return _fq_channel_ref(input, scale, zero_point, 1, quant_min, quant_max)


def _fq_channel_inputs(dims, dtypes, params, rng):
    b, c, n = dims["B"], dims["C"], dims["N"]
    x = rng.uniform(-2.0, 2.0, (b, c, n)).astype(dtypes[0])
    s = rng.uniform(0.01, 0.05, c).astype(np.float32)
    lo, hi = params["quant_min"], params["quant_max"]
    zp = rng.integers(lo, hi + 1, c).astype(np.int32)
    return [x, s, zp]


@op(category="quantization", inputs={"input": "B C N", "scale": "C", "zero_point": "C"},
    output="B C N", dtypes=[("float32", "float32", "int32"), ("float64", "float32", "int32")],
    params=_QPARAMS, reference=_fq_channel_ref, kernel_reference=_fq_channel_kernel_ref,
    frontend=_fq_channel_frontend, doc=_fq_channel_frontend.__doc__,
    validate=lambda d, p: _qbounds("fake_quantize_per_channel_affine", p["quant_min"],
                                   p["quant_min"], p["quant_max"]),
    make_inputs=_fq_channel_inputs, example={"B": 4, "C": 16, "N": 4096})
def fake_quantize_per_channel_affine(input, scale, zero_point, *, quant_min, quant_max):  # noqa
    """Per channel: the per-tensor rule with that channel's scale and zero point."""
    n, c, b = hl.Var("n"), hl.Var("c"), hl.Var("b")
    f32, f64 = hl.Float(32), hl.Float(64)
    s = scale[c]
    inv = hl.strict_float(hl.f32(1.0) / s)           # float32 reciprocal, as torch
    out = hl.Func("out")
    out[n, c, b] = _fake_expr(input[n, c, b], hl.cast(f64, s),
                              hl.cast(f64, hl.cast(f32, inv)), hl.cast(hl.Int(32), zero_point[c]),
                              quant_min, quant_max, False)
    return out


# -- quantized_conv2d -----------------------------------------------------------------------------

def _qconv_ref(x, w, bias=None, stride=1, padding=0, dilation=1, groups=1, x_zero_point=0,
               w_zero_point=0):
    x, w = np.asarray(x), np.asarray(w)
    unbatched = x.ndim == 3
    if unbatched:
        x = x[None]
    (sh, sw), (ph, pw), (dh, dw) = (_pair(v, "ref", a, lo) for v, a, lo in (
        (stride, "stride", 1), (padding, "padding", 0), (dilation, "dilation", 1)))
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    oh = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    ow = (wd + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    xs = np.pad(x.astype(np.int64) - x_zero_point, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    ws = w.astype(np.int64) - w_zero_point
    out = np.zeros((n, o, oh, ow), np.int64)
    per = o // groups
    for oc in range(o):
        g = oc // per
        for i in range(kh):
            for j in range(kw):
                patch = xs[:, g * cg:(g + 1) * cg, i * dh: i * dh + sh * (oh - 1) + 1: sh,
                           j * dw: j * dw + sw * (ow - 1) + 1: sw]
                out[:, oc] += np.einsum("nchw,c->nhw", patch, ws[oc, :, i, j])
    if bias is not None:
        out += np.asarray(bias, np.int64)[None, :, None, None]
    out = out.astype(np.int32)
    return out[0] if unbatched else out


def _qconv_kernel_ref(x, w, bias, *, stride_h=1, stride_w=1, pad_h=0, pad_w=0, dil_h=1,
                      dil_w=1, groups=1, x_zero_point=0, w_zero_point=0):
    return _qconv_ref(x, w, bias, (stride_h, stride_w), (pad_h, pad_w), (dil_h, dil_w), groups,
                      x_zero_point, w_zero_point)


def _qconv_frontend(x, w, bias=None, stride=1, padding=0, dilation=1, groups=1, x_zero_point=0,
                    w_zero_point=0):
    """Integer 2-D convolution of NCHW ``x`` with OIHW ``w`` (int8/uint8), like ``F.conv2d`` of
    ``x - x_zero_point`` and ``w - w_zero_point``, accumulated exactly in int32 plus an int32
    ``bias``; padding counts as ``x_zero_point`` (real 0)."""
    name = "quantized_conv2d"
    x, unbatched = _image(x, name)
    w = as_array(w, name, "w")
    sh, sw = _pair(stride, name, "stride", 1)
    ph, pw = _pair(padding, name, "padding", 0)
    dh, dw = _pair(dilation, name, "dilation", 1)
    if isinstance(groups, bool) or not hasattr(groups, "__index__") or int(groups) < 1:
        raise ParamError(f"{name}: 'groups' must be a positive int, got {groups!r}")
    for arg, arr, zp in (("x_zero_point", x, x_zero_point), ("w_zero_point", w, w_zero_point)):
        zp = _int(name, arg, zp)
        if arr.dtype.name in _QRANGE:
            lo, hi = _QRANGE[arr.dtype.name]
            if not lo <= zp <= hi:
                raise ParamError(f"{name}: parameter '{arg}' must be in [{lo}, {hi}] for "
                                 f"{arr.dtype.name}, got {zp}")
    if bias is None:
        bias = np.zeros(w.shape[0] if w.ndim == 4 else 1, np.int32)
    else:
        bias = as_array(bias, name, "bias")
    out = quantized_conv2d.kernel(x, w, bias, stride_h=sh, stride_w=sw, pad_h=ph, pad_w=pw,
                                  dil_h=dh, dil_w=dw, groups=int(groups),
                                  x_zero_point=int(x_zero_point), w_zero_point=int(w_zero_point))
    return out[0] if unbatched else out


def _qconv_validate(dims, p):
    g = p["groups"]
    name = "quantized_conv2d"
    if dims["C"] % g or dims["O"] % g:
        raise ParamError(f"{name}: groups={g} must divide both the input channels "
                         f"C={dims['C']} and the output channels O={dims['O']}")
    if dims["CG"] * g != dims["C"]:
        raise ShapeError(f"{name}: x has C={dims['C']} channels but w expects {dims['CG']} x "
                         f"groups={g} = {dims['CG'] * g} (w is [O, C/groups, KH, KW])")
    _check_out_size(name, dims, p, dims["KH"], dims["KW"], (p["dil_h"], p["dil_w"]))


def _qconv_inputs(dims, dtypes, params, rng):
    def q(shape, dt):
        lo, hi = _QRANGE[dt]
        return rng.integers(lo, hi + 1, shape).astype(dt)
    x = q((dims["N"], dims["C"], dims["H"], dims["W"]), dtypes[0])
    w = q((dims["O"], dims["CG"], dims["KH"], dims["KW"]), dtypes[1])
    bias = rng.integers(-5000, 5000, dims["O"]).astype(np.int32)
    return [x, w, bias]


@op(category="quantization", inputs={"x": "N C H W", "w": "O CG KH KW", "bias": "O"},
    output="N O OH OW",
    dtypes=[("uint8", "int8", "int32"), ("int8", "int8", "int32"), ("uint8", "uint8", "int32")],
    params=_window_params(dilation=True, groups=True) + [
        Param("x_zero_point", int, 0, low=-128, high=255, doc="zero point of x"),
        Param("w_zero_point", int, 0, low=-128, high=255, doc="zero point of w")],
    reference=_qconv_ref, kernel_reference=_qconv_kernel_ref, frontend=_qconv_frontend,
    validate=_qconv_validate, derive=_derive_out(True, dilation=True),
    make_inputs=_qconv_inputs, doc=_qconv_frontend.__doc__,
    out_dtype=lambda dtypes, params: "int32",
    example={"N": 2, "C": 8, "H": 17, "W": 19, "O": 8, "CG": 8, "KH": 3, "KW": 3})
def quantized_conv2d(x, w, bias, *, stride_h, stride_w, pad_h, pad_w, dil_h, dil_w, groups,
                     x_zero_point, w_zero_point, dims):
    """conv2d's loop structure on zero-point-shifted integers, accumulated in int32."""
    ow, oh, o, n = hl.Var("ow"), hl.Var("oh"), hl.Var("o"), hl.Var("n")
    iw, ih, ic, inb = hl.Var("iw"), hl.Var("ih"), hl.Var("ic"), hl.Var("inb")
    i16, i32 = hl.Int(16), hl.Int(32)
    xp = hl.Func("x_pad")          # shifted to real 0 = 0, and 0 outside the image
    inside = (iw >= 0) & (iw < dims.W) & (ih >= 0) & (ih < dims.H)
    xp[iw, ih, ic, inb] = hl.select(
        inside, hl.cast(i16, x[hl.clamp(iw, 0, dims.W - 1), hl.clamp(ih, 0, dims.H - 1), ic, inb])
        - hl.i16(x_zero_point), hl.i16(0))
    r = hl.RDom([hl.Range(0, dims.KW), hl.Range(0, dims.KH), hl.Range(0, dims.CG)], "r")
    chan = r.z if groups == 1 else (o / (dims.O / groups)) * dims.CG + r.z
    wv = hl.cast(i32, w[r.x, r.y, r.z, o]) - w_zero_point
    acc = hl.Func("acc")
    acc[ow, oh, o, n] = bias[o]
    acc[ow, oh, o, n] += wv * hl.cast(i32, xp[ow * stride_w + r.x * dil_w - pad_w,
                                                oh * stride_h + r.y * dil_h - pad_h, chan, n])
    out = hl.Func("out")
    out[ow, oh, o, n] = acc[ow, oh, o, n]
    return out


# -- quantized_add and quantized_relu -----------------------------------------------------------

def _requant_np(real, scale, zero_point, dtype, relu=False):
    lo, hi = _QRANGE[dtype]
    q = np.rint(real * (1.0 / scale)) + zero_point
    if relu:
        q = np.maximum(q, zero_point)
    return np.clip(q, lo, hi).astype(dtype)


def _qadd_ref(a, b, a_scale, a_zero_point, b_scale, b_zero_point, scale, zero_point,
              dtype=None, relu=False):
    a, b = np.asarray(a), np.asarray(b)
    real = (a.astype(np.float64) - a_zero_point) * a_scale + \
        (b.astype(np.float64) - b_zero_point) * b_scale
    return _requant_np(real, scale, zero_point, dtype or a.dtype.name, relu)


def _qadd_kernel_ref(a, b, a_scale, a_zero_point, b_scale, b_zero_point, scale, zero_point,
                     dtype="int8", relu=False):
    return _qadd_ref(a, b, a_scale, a_zero_point, b_scale, b_zero_point, scale, zero_point,
                     dtype, relu)


def _check_zp(name, arg, zp, dtype):
    zp = _int(name, arg, zp)
    lo, hi = _QRANGE[dtype]
    if not lo <= zp <= hi:
        raise ParamError(f"{name}: parameter '{arg}' must be in [{lo}, {hi}] for {dtype}, "
                         f"got {zp}")
    return zp


def _qadd_frontend(a, b, a_scale, a_zero_point, b_scale, b_zero_point, scale, zero_point,
                   dtype=None, relu=False):
    """Adds two quantized tensors and requantizes the sum (``torch.ops.quantized.add``, or
    ``add_relu`` with ``relu=True``); ``dtype`` (int8/uint8) defaults to ``a``'s. Shapes
    broadcast. See the module doc for the exact rule."""
    name = "quantized_add"
    a, b = as_array(a, name, "a"), as_array(b, name, "b")
    for arg, x in (("a", a), ("b", b)):
        if x.dtype.name not in _QRANGE:
            from ..errors import DtypeError

            raise DtypeError(f"{name}: argument '{arg}' must be int8 or uint8, got {x.dtype}")
    dtype = _check_dtype(name, dtype if dtype is not None else a.dtype.name)
    params = dict(a_scale=_scale(name, "a_scale", a_scale),
                  a_zero_point=_check_zp(name, "a_zero_point", a_zero_point, a.dtype.name),
                  b_scale=_scale(name, "b_scale", b_scale),
                  b_zero_point=_check_zp(name, "b_zero_point", b_zero_point, b.dtype.name),
                  scale=_scale(name, "scale", scale),
                  zero_point=_check_zp(name, "zero_point", zero_point, dtype), dtype=dtype,
                  relu=relu)
    try:
        shape = np.broadcast_shapes(a.shape, b.shape)
    except ValueError:
        raise ShapeError(f"{name}: 'a' {tuple(a.shape)} and 'b' {tuple(b.shape)} cannot be "
                         f"broadcast together") from None
    if tuple(a.shape) != shape:
        a = np.broadcast_to(a, shape)
    if tuple(b.shape) != shape:
        b = np.broadcast_to(b, shape)
    a, b = (np.array(v) if isinstance(v, np.ndarray) and not v.flags.writeable else v
            for v in (a, b))
    return quantized_add.kernel(a.reshape(-1), b.reshape(-1), **params).reshape(shape)


def _requant_expr(real, scale, zero_point, dtype, relu):
    lo, hi = _QRANGE[dtype]
    q = round_half_even(hl.strict_float(real * lit64(1.0 / scale))) + lit64(zero_point)
    if relu:
        q = hl.max(q, lit64(zero_point))
    return hl.cast(_QTYPE[dtype], hl.clamp(q, lit64(lo), lit64(hi)))


_OUTQ = [Param("scale", float, doc="output scale (> 0)"),
         Param("zero_point", int, low=-128, high=255, doc="output zero point"),
         Param("dtype", str, "int8", choices=("int8", "uint8"), doc="output type")]


def _qadd_validate(dims, p):
    name = "quantized_add"
    for arg in ("a_scale", "b_scale", "scale"):
        _scale(name, arg, p[arg])
    _check_zp(name, "zero_point", p["zero_point"], p["dtype"])


@op(category="quantization", inputs={"a": "N", "b": "N"}, output="N",
    dtypes=[("int8", "int8"), ("uint8", "uint8"), ("uint8", "int8"), ("int8", "uint8")],
    params=[Param("a_scale", float, doc="scale of a"),
            Param("a_zero_point", int, low=-128, high=255, doc="zero point of a"),
            Param("b_scale", float, doc="scale of b"),
            Param("b_zero_point", int, low=-128, high=255, doc="zero point of b")] + _OUTQ
    + [Param("relu", bool, False, doc="clamp the sum at real 0")],
    reference=_qadd_ref, kernel_reference=_qadd_kernel_ref, frontend=_qadd_frontend,
    validate=_qadd_validate, doc=_qadd_frontend.__doc__,
    out_dtype=lambda dtypes, params: params.get("dtype", "int8"), example={"N": 100000})
def quantized_add(a, b, *, a_scale, a_zero_point, b_scale, b_zero_point, scale, zero_point,
                  dtype, relu):
    """Dequantize both in float64, add, requantize (round half to even, saturate)."""
    n = hl.Var("n")
    f64 = hl.Float(64)
    real = hl.strict_float((hl.cast(f64, a[n]) - lit64(a_zero_point)) * lit64(a_scale)
                           + (hl.cast(f64, b[n]) - lit64(b_zero_point)) * lit64(b_scale))
    out = hl.Func("out")
    out[n] = _requant_expr(real, scale, zero_point, dtype, relu)
    return out


def _qrelu_ref(q, scale, zero_point, out_scale=None, out_zero_point=None, dtype=None):
    q = np.asarray(q)
    kept = np.maximum(q.astype(np.int64), zero_point)
    if out_scale is None and out_zero_point is None and dtype in (None, q.dtype.name):
        return kept.astype(q.dtype)
    real = (kept - zero_point).astype(np.float64) * scale
    out_scale = scale if out_scale is None else out_scale
    out_zero_point = zero_point if out_zero_point is None else out_zero_point
    return _requant_np(real, out_scale, out_zero_point, dtype or q.dtype.name)


def _qrelu_kernel_ref(q, scale, zero_point, out_scale, out_zero_point, dtype):
    return _qrelu_ref(q, scale, zero_point, out_scale, out_zero_point, dtype)


def _qrelu_frontend(q, scale, zero_point, out_scale=None, out_zero_point=None, dtype=None):
    """ReLU of a quantized tensor: ``max(q, zero_point)`` (real ``max(v, 0)``), requantized to
    ``(out_scale, out_zero_point, dtype)`` when any is given (each defaults to the input's);
    any shape. See the module doc for the exact rule."""
    name = "quantized_relu"
    q = as_array(q, name, "q")
    if q.dtype.name not in _QRANGE:
        from ..errors import DtypeError

        raise DtypeError(f"{name}: argument 'q' must be int8 or uint8, got {q.dtype}")
    s = _scale(name, "scale", scale)
    zp = _check_zp(name, "zero_point", zero_point, q.dtype.name)
    dtype = _check_dtype(name, dtype if dtype is not None else q.dtype.name)
    os_ = s if out_scale is None else _scale(name, "out_scale", out_scale)
    ozp = zp if out_zero_point is None else _check_zp(name, "out_zero_point", out_zero_point,
                                                      dtype)
    if out_zero_point is None:
        _check_zp(name, "zero_point", zp, dtype)
    out = quantized_relu.kernel(q.reshape(-1), scale=s, zero_point=zp, out_scale=os_,
                                out_zero_point=ozp, dtype=dtype)
    return out.reshape(q.shape)


def _qrelu_validate(dims, p):
    name = "quantized_relu"
    _scale(name, "scale", p["scale"])
    _scale(name, "out_scale", p["out_scale"])
    _check_zp(name, "out_zero_point", p["out_zero_point"], p["dtype"])


@op(category="quantization", inputs={"q": "N"}, output="N", dtypes=["int8", "uint8"],
    params=[Param("scale", float, 1.0, doc="input scale (> 0)"),
            Param("zero_point", int, 0, low=-128, high=255, doc="input zero point"),
            Param("out_scale", float, 1.0, doc="output scale (> 0)"),
            Param("out_zero_point", int, 0, low=-128, high=255, doc="output zero point"),
            Param("dtype", str, "int8", choices=("int8", "uint8"), doc="output type")],
    reference=_qrelu_ref, kernel_reference=_qrelu_kernel_ref, frontend=_qrelu_frontend,
    validate=_qrelu_validate, doc=_qrelu_frontend.__doc__,
    out_dtype=lambda dtypes, params: params.get("dtype", "int8"), example={"N": 100000})
def quantized_relu(q, *, scale, zero_point, out_scale, out_zero_point, dtype):
    """max(q, zero_point); requantized through float64 unless the parameters are unchanged."""
    n = hl.Var("n")
    i32 = hl.Int(32)
    kept = hl.max(hl.cast(i32, q[n]), zero_point)
    out = hl.Func("out")
    same = out_scale == scale and out_zero_point == zero_point and q.type() == _QTYPE[dtype]
    if same:
        out[n] = hl.cast(_QTYPE[dtype], kept)
    else:
        real = hl.strict_float(hl.cast(hl.Float(64), kept - zero_point) * lit64(scale))
        out[n] = _requant_expr(real, out_scale, out_zero_point, dtype, False)
    return out


for _fe in (_fq_tensor_frontend, _qrelu_frontend):
    _fe.shape_only = True
