"""Rules of the contraction ops (kernel shapes): einsum's batched product [B, M, K] x [B, K, N],
outer, addmm, baddbmm and trace.

The products' gradients are products of the same kernels (so a float16 product keeps its
float32 accumulation): dA = dY B^T and dB = A^T dY, times ``alpha`` for addmm/baddbmm, whose
``input`` gets ``beta dY`` (zero when beta is 0, as in PyTorch). einsum's frontend expresses
diagonals, sums and transposes with their own ops, whose rules take care of them. trace spreads
each plane's gradient along its ``offset`` diagonal (a constant mask).
"""

from __future__ import annotations

import numpy as np

from ... import ops
from ...frontend import tensor as T
from .. import shapes
from . import rule


def _bt(t):
    return t.transpose(0, 2, 1)


@rule("einsum")
def _einsum(c):
    a, b = c.inputs
    k = ops.einsum.kernel
    return [k(c.dy, _bt(b)) if c.wants(0) else None, k(_bt(a), c.dy) if c.wants(1) else None]


@rule("outer")
def _outer(c):
    a, b = c.inputs
    m, n = c.dy.shape
    return [shapes.total(c.dy * b.reshape(1, n), 1), shapes.total(c.dy * a.reshape(m, 1), 0)]


def _product_grads(c, product, zeros_like, transpose):
    """(d input, d mat1, d mat2) of beta * input + alpha * mat1 @ mat2 via ``product``."""
    inp, m1, m2 = c.inputs
    beta, alpha = c.params["beta"], c.params["alpha"]
    dy = c.dy
    d_in = dy * beta if beta != 0 else shapes.zeros(inp.shape, inp.dtype)
    d1 = product(zeros_like(m1.shape, dy.dtype), dy, transpose(m2), alpha) if c.wants(1) else None
    d2 = product(zeros_like(m2.shape, dy.dtype), transpose(m1), dy, alpha) if c.wants(2) else None
    return [d_in, d1, d2]


@rule("addmm")
def _addmm(c):
    def product(z, x, y, alpha):
        return ops.addmm.kernel(z, x, y, beta=0.0, alpha=alpha)
    return _product_grads(c, product, shapes.zeros, lambda t: t.T)


@rule("baddbmm")
def _baddbmm(c):
    def product(z, x, y, alpha):
        return ops.baddbmm.kernel(z, x, y, beta=0.0, alpha=alpha)
    return _product_grads(c, product, shapes.zeros, _bt)


@rule("trace")
def _trace(c):
    x = c.inputs[0]
    b, r, cols = x.shape
    diag = T.as_tensor(np.eye(r, cols, k=c.params["offset"], dtype=x.dtype))
    return [c.dy.reshape(b, 1, 1) * diag]
