"""Checks of scalar arguments shared by the op frontends: an int, an int or pair of ints, one of a
few names. Each returns the plain Python value or raises a ParamError naming the op, the argument,
what was given and what is expected.

A NumPy integer (``np.int64(3)``, or a 0-d int array) is an int, and a 1-D int array of two is a
pair, as a list is: sizes computed with NumPy reach the ops that way.
"""

from __future__ import annotations

import operator

import numpy as np

from ..errors import ParamError


def _shown(value) -> str:
    if isinstance(value, np.ndarray):
        return f"an array of shape {value.shape} and dtype {value.dtype}"
    return repr(value)


def int_arg(name: str, arg: str, value, low: int | None = None, high: int | None = None) -> int:
    """``value`` as an int in [low, high]: an int, a NumPy integer or a 0-d int array (a bool is not
    one); a ParamError otherwise."""
    if isinstance(value, (bool, np.bool_)) or not hasattr(value, "__index__") or (
            isinstance(value, np.ndarray) and value.ndim != 0):
        raise ParamError(f"{name}: '{arg}' must be an int, got {_shown(value)}")
    try:
        v = operator.index(value)
    except TypeError:       # a 0-d array of a non-integer dtype
        raise ParamError(f"{name}: '{arg}' must be an int, got {_shown(value)}") from None
    if low is not None and v < low or high is not None and v > high:
        bound = (f"in [{low}, {high}]" if low is not None and high is not None
                 else f">= {low}" if low is not None else f"<= {high}")
        raise ParamError(f"{name}: '{arg}' must be {bound}, got {v}")
    return v


def int_seq(name: str, arg: str, value, n: int, low: int | None = None,
            high: int | None = None, want: str | None = None) -> tuple[int, ...]:
    """An int (used ``n`` times) or a sequence of ``n`` ints (a tuple, list or 1-D int array),
    each in [low, high], as a tuple; a ParamError otherwise, saying it wanted ``want``."""
    want = want or ("an int" if n == 1 else f"an int or a sequence of {n} ints")
    if isinstance(value, np.ndarray) and value.ndim == 1:
        value = tuple(value.tolist())
    elif isinstance(value, np.ndarray) and value.ndim > 1:
        raise ParamError(f"{name}: '{arg}' must be {want}, got {_shown(value)}")
    items = tuple(value) if isinstance(value, (tuple, list)) else (value,) * n
    if len(items) != n:
        raise ParamError(f"{name}: '{arg}' must be {want}, got {value!r}")
    out = []
    for v in items:
        if isinstance(v, (bool, np.bool_)) or not hasattr(v, "__index__"):
            raise ParamError(f"{name}: '{arg}' must be {want}, got {_shown(value)}")
        try:
            v = operator.index(v)      # (int() of an array raised a raw TypeError, or truncated)
        except TypeError:
            raise ParamError(f"{name}: '{arg}' must be {want}, got {_shown(value)}") from None
        if low is not None and v < low or high is not None and v > high:
            bound = (f"in [{low}, {high}]" if low is not None and high is not None
                     else f">= {low}" if low is not None else f"<= {high}")
            raise ParamError(f"{name}: '{arg}' must be {bound}, got {value!r}")
        out.append(v)
    return tuple(out)


def int_pair(name: str, arg: str, value, low: int | None = None,
             high: int | None = None) -> tuple[int, int]:
    """An int (used twice) or a pair of ints (a tuple, list or 1-D int array of two), each in
    [low, high]; a ParamError otherwise."""
    return int_seq(name, arg, value, 2, low, high, "an int or a pair of ints")  # type: ignore


def choice(name: str, arg: str, value, allowed) -> str:
    """``value`` when it is one of the strings ``allowed``; a ParamError otherwise (an array that
    holds one of them is not one: ``==`` of it would be an array)."""
    if not isinstance(value, str) or value not in allowed:
        raise ParamError(f"{name}: '{arg}' must be one of {list(allowed)}, got {_shown(value)}")
    return str(value)
