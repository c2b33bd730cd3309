"""Rules of the linear-algebra ops: each product's gradients are two products with transposes
(views: the kernels read them in place, no transposed copy is made)."""

from __future__ import annotations

from ... import ops
from . import rule


def _mm(a, b):
    return ops.matmul.kernel(a, b)


def _bmm(a, b):
    return ops.batch_matmul.kernel(a, b)


@rule("matmul")
def _matmul(c):
    a, b = c.inputs
    return [_mm(c.dy, b.T), _mm(a.T, c.dy)]


@rule("batch_matmul")
def _batch_matmul(c):
    a, b = c.inputs
    return [_bmm(c.dy, b.transpose(0, 2, 1)), _bmm(a.transpose(0, 2, 1), c.dy)]


@rule("linear")
def _linear(c):
    x, w, _ = c.inputs
    return [_mm(c.dy, w), _mm(c.dy.T, x), c.dy.sum(axis=0)]


@rule("transpose")
def _transpose(c):
    return [ops.transpose.kernel(c.dy)]


@rule("batch_transpose")
def _batch_transpose(c):
    return [ops.batch_transpose.kernel(c.dy)]

