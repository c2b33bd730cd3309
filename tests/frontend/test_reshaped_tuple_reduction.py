"""layer_norm (a reduction whose one-pass moments are a Tuple) on inputs with leading axes, in a
program: its kernel reads the input through a reshape [4, 8, 16] -> [32, 16]. Halide 21 failed
to compile that update vectorized across rows when it read through the reshape's index
arithmetic (at some shapes: [4, 8, 16] and [8, 4, 2, 16], not [2, 16, 32] or [2, 7, 32]), at
every schedule down to the safe default; the program now reads a dense copy."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import pypto

P = pypto.ops
RNG = np.random.default_rng(5)


@pytest.mark.parametrize("shape", [(4, 8, 16), (2, 16, 32), (2, 7, 32), (8, 4, 2, 16)], ids=str)
def test_layer_norm_of_a_batch_in_a_program(shape):
    x = RNG.standard_normal(shape).astype(np.float32)
    c = shape[-1]
    g = RNG.standard_normal(c).astype(np.float32)
    b = RNG.standard_normal(c).astype(np.float32)
    w = RNG.standard_normal((3 * c, c)).astype(np.float32)

    def block(x, g, b, w):
        h = P.layer_norm(x, (c,), g, b)
        return P.linear(P.layer_norm(h, (c,)), w) * 2.0

    with warnings.catch_warnings():
        warnings.simplefilter("error")          # no fall back to the safe default either
        got = pypto.jit(block)(x, g, b, w)
    np.testing.assert_array_equal(got, block(x, g, b, w))
    # independent of the kernels: the formula in float64
    x64 = x.astype(np.float64)
    h = (x64 - x64.mean(-1, keepdims=True)) / np.sqrt(x64.var(-1, keepdims=True) + 1e-5) * g + b
    h = (h - h.mean(-1, keepdims=True)) / np.sqrt(h.var(-1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(got, 2 * h @ w.T.astype(np.float64), rtol=1e-4, atol=1e-4)
