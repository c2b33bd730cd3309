"""The dtypes PyPTO speaks, and their mapping onto Halide types."""

from __future__ import annotations

import halide as hl
import numpy as np

_HALIDE = {
    "float16": lambda: hl.Float(16),
    "float32": lambda: hl.Float(32),
    "float64": lambda: hl.Float(64),
    "int8": lambda: hl.Int(8),
    "int16": lambda: hl.Int(16),
    "int32": lambda: hl.Int(32),
    "int64": lambda: hl.Int(64),
    "uint8": lambda: hl.UInt(8),
    "uint16": lambda: hl.UInt(16),
    "uint32": lambda: hl.UInt(32),
    "bool": lambda: hl.Bool(),
}

FLOATS = ("float32", "float64", "float16")
FLOAT32_64 = ("float32", "float64")
INTS = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32")
SUPPORTED = tuple(_HALIDE)


def halide_type(name: str) -> hl.Type:
    """The Halide type for a dtype name such as ``"float32"``."""
    return _HALIDE[name]()


def numpy_name(halide_t: hl.Type) -> str:
    """The NumPy dtype name of a Halide type (``hl.Float(32)`` -> ``"float32"``)."""
    if halide_t.is_bool():
        return "bool"
    if halide_t.is_float():
        return f"float{halide_t.bits()}"
    if halide_t.is_uint():
        return f"uint{halide_t.bits()}"
    return f"int{halide_t.bits()}"


def tolerance(dtype: str) -> tuple[float, float]:
    """(rtol, atol) used to compare a result of this dtype with its NumPy reference."""
    return {"float16": (1e-2, 1e-2), "float32": (1e-4, 1e-5), "float64": (1e-9, 1e-12)}.get(
        dtype, (0.0, 0.0)
    )


def canonical(dtype) -> str:
    return np.dtype(dtype).name
