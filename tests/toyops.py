"""Small ops used by the schedule, database and tuner tests (registered under toy_* names)."""

from __future__ import annotations

import halide as hl
import numpy as np

from pypto.ops import get_op, op
from pypto.errors import UnknownOpError


def _once(name, make):
    try:
        return get_op(name)
    except UnknownOpError:
        return make()


def _make_matmul():
    @op(category="test", inputs={"a": "M K", "b": "K N"}, output="M N",
        reference=lambda a, b: np.matmul(a, b), example={"M": 32, "K": 24, "N": 40})
    def toy_matmul(a, b, *, dims):
        """Plain matrix product with an explicit accumulator."""
        n, m = hl.Var("n"), hl.Var("m")
        k = hl.RDom([hl.Range(0, dims.K)], "k")
        acc = hl.Func("acc")
        acc[n, m] = hl.cast(a.type(), 0)
        acc[n, m] += a[k, m] * b[n, k]
        out = hl.Func("out")
        out[n, m] = acc[n, m]
        return out

    return toy_matmul


def _make_rowsum():
    @op(category="test", inputs={"x": "R C"}, output="R C",
        reference=lambda x: x / (np.abs(x).sum(axis=1, keepdims=True) + 1),
        example={"R": 16, "C": 100})
    def toy_rownorm(x, *, dims):
        """Each row divided by (1 + the sum of its absolute values)."""
        c, r = hl.Var("c"), hl.Var("r")
        k = hl.RDom([hl.Range(0, dims.C)], "j")
        a = hl.Func("absx")
        a[c, r] = hl.abs(x[c, r])
        s = hl.Func("rowsum")
        s[r] = hl.cast(x.type(), 0)
        s[r] += a[k, r]
        out = hl.Func("out")
        out[c, r] = x[c, r] / (s[r] + 1)
        return out

    return toy_rownorm


def _make_scale():
    @op(category="test", inputs={"x": "R C"}, output="R C", reference=lambda x: x * 3 - 1,
        example={"R": 9, "C": 33})
    def toy_scale(x):
        """3x - 1, elementwise."""
        c, r = hl.Var("c"), hl.Var("r")
        out = hl.Func("out")
        out[c, r] = x[c, r] * 3 - 1
        return out

    return toy_scale


toy_matmul = _once("toy_matmul", _make_matmul)
toy_rownorm = _once("toy_rownorm", _make_rowsum)
toy_scale = _once("toy_scale", _make_scale)
