"""NumPy's array methods on pypto.Tensor (all, any, cumsum, cumprod, clip, round, argsort, repeat,
diagonal, trace, dot): the same results, shapes and dtypes as NumPy's, in a program; those a
value cannot have (in-place sort) name what to write instead."""

from __future__ import annotations

import numpy as np
import pytest

import pypto
from pypto.errors import TraceError

RNG = np.random.default_rng(12)
X = RNG.standard_normal((3, 4)).astype(np.float32)
V = np.arange(4, dtype=np.float32)

CASES = {
    "all": lambda a: (a > 0).all(axis=1),
    "any": lambda a: (a > -0.5).any(),
    "cumsum flat": lambda a: a.cumsum(),
    "cumsum axis": lambda a: a.cumsum(1),
    "cumprod": lambda a: a.cumprod(axis=0),
    "clip": lambda a: a.clip(-0.5, 0.5),
    "round": lambda a: (a * 3).round(),
    "argsort": lambda a: a.argsort(),
    "repeat": lambda a: a.repeat(2, axis=1),
    "diagonal": lambda a: a.diagonal(1),
    "trace": lambda a: a.trace(),
    "dot": lambda a: a.dot(V),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_method_matches_numpy(name):
    fn = CASES[name]
    got, want = pypto.jit(fn)(X), fn(X)
    assert np.shape(got) == np.shape(want)
    assert np.asarray(got).dtype == np.asarray(want).dtype
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_gradient_through_methods():
    g = pypto.grad(lambda a: (a.clip(-0.5, 0.5) * a.cumsum(1)).sum())(X)
    eps, num = 1e-3, np.zeros_like(X, dtype=np.float64)
    f = lambda a: float((np.clip(a, -0.5, 0.5) * np.cumsum(a, 1)).sum())
    x64 = X.astype(np.float64)
    for i in np.ndindex(X.shape):
        d = np.zeros_like(x64)
        d[i] = eps
        num[i] = (f(x64 + d) - f(x64 - d)) / (2 * eps)
    np.testing.assert_allclose(g, num, rtol=1e-3, atol=1e-3)


def test_methods_a_value_cannot_have():
    with pytest.raises(TraceError, match="cannot be sorted in place.*pypto.ops.sort"):
        pypto.jit(lambda a: a.sort())(X)
    with pytest.raises(TraceError, match="decimals=2 is not supported"):
        pypto.jit(lambda a: a.round(2))(X)
    with pytest.raises(TraceError, match="dot: a Tensor's dot takes 1-D and 2-D"):
        pypto.jit(lambda a: a.reshape(3, 4, 1).dot(V))(X)
