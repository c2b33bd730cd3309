"""Affine (scale, zero point) quantization: float <-> int8/uint8, and integer matmul.

A real value ``v`` is represented by the integer ``q`` with ``v ~= (q - zero_point) * scale``.
Rounding is to the nearest integer, ties to even (like ``np.round``); results outside the
integer type's range saturate at its limits.
"""

from __future__ import annotations

import math

import halide as hl
import numpy as np

from ..errors import ParamError
from ..runtime import as_array
from ._consts import lit, lit64
from ._op import Param, op

_QRANGE = {"int8": (-128, 127), "uint8": (0, 255)}
_QTYPE = {"int8": hl.Int(8), "uint8": hl.UInt(8)}


def _check_scale(name, scale):
    if isinstance(scale, bool) or not isinstance(scale, (int, float, np.integer, np.floating)):
        raise ParamError(f"{name}: parameter 'scale' expects a number, got {scale!r}")
    if not (math.isfinite(scale) and scale > 0):
        raise ParamError(f"{name}: parameter 'scale' must be finite and > 0, got {scale!r}")


def _check_zero_point(name, arg, zp, dtype):
    if isinstance(zp, bool) or not hasattr(zp, "__index__"):
        raise ParamError(f"{name}: parameter '{arg}' expects an int, got {zp!r}")
    lo, hi = _QRANGE[dtype]
    if not lo <= int(zp) <= hi:
        raise ParamError(f"{name}: parameter '{arg}' must be in [{lo}, {hi}] for {dtype}, "
                         f"got {zp!r}")


def _check_dtype(name, dtype):
    if not isinstance(dtype, str):
        try:
            dtype = np.dtype(dtype).name
        except TypeError:
            raise ParamError(f"{name}: parameter 'dtype' must be 'int8' or 'uint8', got "
                             f"{dtype!r}") from None
    if dtype not in _QRANGE:
        raise ParamError(f"{name}: parameter 'dtype' must be 'int8' or 'uint8', got {dtype!r}")
    return dtype


def _flat(x, name, arg):
    x = as_array(x, name, arg)
    return x.reshape(-1), x.shape


def _qvalidate(name):
    def validate(dims, params):
        _check_scale(name, params["scale"])
        _check_zero_point(name, "zero_point", params["zero_point"], params.get("dtype", "int8"))
    return validate


# -- quantize -----------------------------------------------------------------------------------

def _quantize_ref(x, scale, zero_point, dtype="int8"):
    x = np.asarray(x)
    lo, hi = _QRANGE[_check_dtype("quantize", dtype)]
    with np.errstate(invalid="ignore"):
        q = np.round(x / np.float32(scale)) + np.float32(zero_point)
        q = np.clip(q, lo, hi)
        q = np.where(np.isnan(x), zero_point, q)
    return q.astype(dtype)


def _quantize_frontend(x, scale, zero_point, dtype="int8"):
    """``clip(round(x / scale) + zero_point)`` as int8 or uint8, any shape.

    ``x`` is float32 and the division is a float32 division by ``float32(scale)``; rounding is
    half to even. Values beyond the type's range (including +-inf) saturate; NaN maps to
    ``zero_point``. (``torch.quantize_per_tensor`` multiplies by the float32 reciprocal of the
    scale instead, so within an ulp of a half step the two can round apart by one.)
    """
    name = "quantize"
    dtype = _check_dtype(name, dtype)
    flat, shape = _flat(x, name, "x")
    return quantize.kernel(flat, scale=scale, zero_point=zero_point, dtype=dtype).reshape(shape)


@op(category="quantization", inputs={"x": "N"}, output="N", dtypes=["float32"],
    params=[Param("scale", float, doc="quantization step (> 0)"),
            Param("zero_point", int, low=-128, high=255, doc="integer that represents 0.0"),
            Param("dtype", str, "int8", choices=("int8", "uint8"), doc="result type")],
    reference=_quantize_ref, frontend=_quantize_frontend, validate=_qvalidate("quantize"),
    doc=_quantize_frontend.__doc__,
    out_dtype=lambda dtypes, params: params.get("dtype", "int8"), example={"N": 1000})
def quantize(x, *, scale, zero_point, dtype):
    """Affine quantization with round-half-to-even and saturation."""
    n = hl.Var("n")
    lo, hi = _QRANGE[dtype]
    f = hl.Float(32)
    # Strict: a true division (not a multiplication by a rounded reciprocal).
    q = hl.round(hl.strict_float(x[n] / lit(f, scale))) + hl.cast(f, zero_point)
    q = hl.clamp(q, hl.cast(f, lo), hl.cast(f, hi))
    out = hl.Func("out")
    out[n] = hl.select(hl.is_nan(x[n]), hl.cast(_QTYPE[dtype], zero_point),
                       hl.cast(_QTYPE[dtype], q))
    return out


# -- dequantize ---------------------------------------------------------------------------------

def _dequantize_ref(q, scale, zero_point):
    q = np.asarray(q)
    return (q.astype(np.int32) - np.int32(zero_point)).astype(np.float32) * np.float32(scale)


def _dequantize_frontend(q, scale, zero_point):
    """``(q - zero_point) * scale`` as float32, any shape; ``q`` is int8 or uint8.

    The difference is exact (int32); the product is one float32 multiplication by
    ``float32(scale)``.
    """
    name = "dequantize"
    flat, shape = _flat(q, name, "q")
    if flat.dtype.name in _QRANGE:
        _check_zero_point(name, "zero_point", zero_point, flat.dtype.name)
    return dequantize.kernel(flat, scale=scale, zero_point=zero_point).reshape(shape)


def _dq_validate(dims, params):
    _check_scale("dequantize", params["scale"])


@op(category="quantization", inputs={"q": "N"}, output="N", dtypes=["int8", "uint8"],
    params=[Param("scale", float, doc="quantization step (> 0)"),
            Param("zero_point", int, low=-128, high=255, doc="integer that represents 0.0")],
    reference=_dequantize_ref, frontend=_dequantize_frontend, validate=_dq_validate,
    doc=_dequantize_frontend.__doc__,
    out_dtype=lambda dtypes, params: "float32", example={"N": 1000})
def dequantize(q, *, scale, zero_point):
    """Affine dequantization to float32."""
    n = hl.Var("n")
    out = hl.Func("out")
    diff = hl.cast(hl.Int(32), q[n]) - zero_point
    out[n] = hl.cast(hl.Float(32), diff) * lit(hl.Float(32), scale)
    return out


# -- quantized_matmul ---------------------------------------------------------------------------

def _qmm_ref(a, b, a_zero_point=0, b_zero_point=0):
    a, b = np.asarray(a), np.asarray(b)
    return np.matmul(a.astype(np.int32) - np.int32(a_zero_point),
                     b.astype(np.int32) - np.int32(b_zero_point))


def _qmm_frontend(a, b, a_zero_point=0, b_zero_point=0):
    """Integer matmul ``(a - a_zero_point) @ (b - b_zero_point)`` with exact int32 accumulation.

    ``a`` is ``[M, K]`` and ``b`` is ``[K, N]``, int8 or uint8 (int8 x int8, uint8 x uint8, or
    uint8 x int8); the result is int32. Each zero point must lie in its input's range. The sum
    is exact while it fits in int32 (always for K <= 2**31 // 255**2 = 33025).
    """
    name = "quantized_matmul"
    a, b = as_array(a, name, "a"), as_array(b, name, "b")
    for arg, arr, zp in (("a_zero_point", a, a_zero_point), ("b_zero_point", b, b_zero_point)):
        if arr.dtype.name in _QRANGE:
            _check_zero_point(name, arg, zp, arr.dtype.name)
    return quantized_matmul.kernel(a, b, a_zero_point=a_zero_point, b_zero_point=b_zero_point)


@op(category="quantization", inputs={"a": "M K", "b": "K N"}, output="M N",
    dtypes=[("int8", "int8"), ("uint8", "uint8"), ("uint8", "int8")],
    params=[Param("a_zero_point", int, 0, low=-128, high=255, doc="zero point of a"),
            Param("b_zero_point", int, 0, low=-128, high=255, doc="zero point of b")],
    reference=_qmm_ref, frontend=_qmm_frontend,
    doc=_qmm_frontend.__doc__,
    out_dtype=lambda dtypes, params: "int32", example={"M": 64, "K": 96, "N": 80})
def quantized_matmul(a, b, *, a_zero_point, b_zero_point, dims):
    """int8/uint8 matmul accumulated in int32."""
    n, m = hl.Var("n"), hl.Var("m")
    k = hl.RDom([hl.Range(0, dims.K)], "k")
    i32 = hl.Int(32)
    acc = hl.Func("acc")
    acc[n, m] = hl.cast(i32, 0)
    acc[n, m] += ((hl.cast(i32, a[k, m]) - a_zero_point) * (hl.cast(i32, b[n, k]) - b_zero_point))
    out = hl.Func("out")
    out[n, m] = acc[n, m]
    return out


# -- requantize ---------------------------------------------------------------------------------

def _requantize_ref(acc, scale, zero_point, dtype="int8"):
    acc = np.asarray(acc)
    lo, hi = _QRANGE[_check_dtype("requantize", dtype)]
    q = np.round(acc.astype(np.float64) * float(scale)) + zero_point
    return np.clip(q, lo, hi).astype(dtype)


def _requantize_frontend(acc, scale, zero_point, dtype="int8"):
    """``clip(round(acc * scale) + zero_point)`` from int32 to int8 or uint8, any shape.

    The product is computed in float64 (exact for every int32 and one rounding of ``scale``),
    rounded half to even, offset and saturated.
    """
    name = "requantize"
    dtype = _check_dtype(name, dtype)
    flat, shape = _flat(acc, name, "acc")
    return requantize.kernel(flat, scale=scale, zero_point=zero_point, dtype=dtype).reshape(shape)


@op(category="quantization", inputs={"acc": "N"}, output="N", dtypes=["int32"],
    params=[Param("scale", float, doc="multiplier from accumulator units to output steps"),
            Param("zero_point", int, low=-128, high=255, doc="output zero point"),
            Param("dtype", str, "int8", choices=("int8", "uint8"), doc="result type")],
    reference=_requantize_ref, frontend=_requantize_frontend, validate=_qvalidate("requantize"),
    doc=_requantize_frontend.__doc__,
    out_dtype=lambda dtypes, params: params.get("dtype", "int8"), example={"N": 1000})
def requantize(acc, *, scale, zero_point, dtype):
    """int32 accumulator to int8/uint8: scale in float64, round half to even, saturate."""
    n = hl.Var("n")
    lo, hi = _QRANGE[dtype]
    f = hl.Float(64)
    q = hl.round(hl.strict_float(hl.cast(f, acc[n]) * lit64(scale))) + hl.cast(f, zero_point)
    out = hl.Func("out")
    out[n] = hl.cast(_QTYPE[dtype], hl.clamp(q, lit64(lo), lit64(hi)))
    return out
