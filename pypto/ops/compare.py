"""Comparisons and logical ops: NumPy's ``greater``, ``equal``... returning bool masks.

They broadcast like NumPy (the binary ops' frontend) and give ``bool`` arrays, the masks
``where`` takes. Comparisons with NaN are false, except ``not_equal`` (true), as in IEEE 754 and
NumPy. ``logical_and``, ``logical_or`` and ``logical_not`` take bool arrays.
"""

from __future__ import annotations

import halide as hl
import numpy as np

from . import binary as _bin
from . import elementwise as _ew
from ._op import op

_TYPES = ("float32", "float64", "float16", "int8", "int16", "int32", "int64", "uint8", "bool")


def _compare(name: str, fn, reference, doc: str, dtypes=_TYPES):
    def algorithm(a, b):
        c, r = hl.Var("c"), hl.Var("r")
        out = hl.Func("out")
        out[c, r] = fn(a[c, r], b[c, r])
        return out

    the_op = op(category="elementwise", inputs={"a": "R C", "b": "R C"}, output="R C",
                dtypes=list(dtypes), reference=reference,
                frontend=_bin._frontend(name, ("a", "b")), example=dict(_bin._EXAMPLE),
                name=name, doc=doc)(algorithm)
    _bin._OPS[name] = the_op
    return the_op


def _eq(a, b):
    # Halide simplifies a float a == b to !(a < b) && !(b < a), which is true when either is
    # NaN; under strict_float it keeps the IEEE comparison (NaN equals nothing).
    return hl.strict_float(a == b) if a.type().is_float() else a == b


def _ne(a, b):
    return hl.strict_float(a != b) if a.type().is_float() else a != b


greater = _compare("greater", lambda a, b: a > b, lambda a, b: np.greater(a, b),
                   "a > b elementwise (bool), broadcasting like NumPy.")
# Halide spells a >= b as !(a < b), which is true for NaN: ask for the IEEE answer explicitly.
greater_equal = _compare("greater_equal", lambda a, b: (a > b) | _eq(a, b),
                         lambda a, b: np.greater_equal(a, b), "a >= b elementwise (bool).")
less = _compare("less", lambda a, b: a < b, lambda a, b: np.less(a, b),
                "a < b elementwise (bool).")
less_equal = _compare("less_equal", lambda a, b: (a < b) | _eq(a, b),
                      lambda a, b: np.less_equal(a, b), "a <= b elementwise (bool).")
equal = _compare("equal", _eq, lambda a, b: np.equal(a, b),
                 "a == b elementwise (bool); NaN equals nothing.")
not_equal = _compare("not_equal", _ne, lambda a, b: np.not_equal(a, b),
                     "a != b elementwise (bool); NaN differs from everything.")
logical_and = _compare("logical_and", lambda a, b: a & b, lambda a, b: np.logical_and(a, b),
                       "Elementwise AND of two bool arrays.", dtypes=("bool",))
logical_or = _compare("logical_or", lambda a, b: a | b, lambda a, b: np.logical_or(a, b),
                      "Elementwise OR of two bool arrays.", dtypes=("bool",))
# Not ~x: on OpenCL a bool is a byte, and its bitwise complement is still true.
logical_not = _ew._unary("logical_not", lambda x: hl.select(x, hl.cast(hl.Bool(), 0),
                                                            hl.cast(hl.Bool(), 1)),
                         lambda x: np.logical_not(x),
                         "Elementwise NOT of a bool array.", dtypes=("bool",))
