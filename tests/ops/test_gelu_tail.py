"""gelu (erf form) far below zero: the value and its gradient keep relative accuracy where
0.5 x (1 + erf(x / sqrt 2)) cancels. References: math.erfc per element, in float64."""

import math

import numpy as np
import pytest

import pypto
from pypto import ops


def _gelu64(v):
    return 0.5 * v * math.erfc(-v / math.sqrt(2.0))


def _gelu_grad64(v):     # Phi(x) + x phi(x), Phi through erfc (no cancellation)
    return 0.5 * math.erfc(-v / math.sqrt(2.0)) + v * math.exp(-0.5 * v * v) / math.sqrt(
        2.0 * math.pi)


def test_float32_gelu_keeps_relative_accuracy_in_the_tail():
    x = np.linspace(-13.0, -1.0, 20001).astype(np.float32)      # results stay normal floats
    want = np.array([_gelu64(v) for v in x.astype(np.float64)])
    got = ops.gelu(x).astype(np.float64)
    ulps = np.abs(got - want) / np.spacing(np.abs(want).astype(np.float32)).astype(np.float64)
    assert ulps.max() <= 8, (ulps.max(), x[np.argmax(ulps)])


def test_gelu_gradient_matches_central_differences_near_zero_and_above():
    x = np.array([-2.5, -1.2, -0.9, -0.3, 0.0, 0.7, 2.5])
    g = np.asarray(pypto.grad(lambda v: ops.sum(ops.gelu(v)))(x))
    h = 1e-6
    fd = np.array([(_gelu64(v + h) - _gelu64(v - h)) / (2 * h) for v in x])
    np.testing.assert_allclose(g, fd, rtol=1e-7, atol=1e-9)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gelu_gradient_keeps_relative_accuracy_in_the_tail(dtype):
    x = np.array([-12.0, -9.0, -6.5, -4.5, -3.0], dtype)
    g = np.asarray(pypto.grad(lambda v: ops.sum(ops.gelu(v)))(x)).astype(np.float64)
    want = np.array([_gelu_grad64(v) for v in x.astype(np.float64)])
    h = 1e-6    # the analytic form agrees with central differences of the float64 reference
    fd = np.array([(_gelu64(v + h) - _gelu64(v - h)) / (2 * h) for v in x.astype(np.float64)])
    np.testing.assert_allclose(want, fd, rtol=1e-6)
    np.testing.assert_allclose(g, want, rtol=1e-5 if dtype == np.float32 else 1e-10)
