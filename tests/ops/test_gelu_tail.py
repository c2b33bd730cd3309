"""gelu (erf form) keeps relative accuracy where its value is tiny: below x = -4,
0.5 x (1 + erf(x / sqrt 2)) cancelled (float32 lost every digit by x = -6 and read 0 by x = -8;
float64 the same below about -8). Checked against 0.5 x erfc(-x / sqrt 2) from math.erfc per
element in float64, and the gradient rule against a central difference of the forward."""

import math

import numpy as np
import pytest

import pypto
from pypto import ops


def _ref(x):
    return np.array([0.5 * t * math.erfc(-t / math.sqrt(2.0)) for t in x.astype(np.float64).tolist()])


@pytest.mark.parametrize("dt, lo, ulps", [(np.float32, -14.0, 8), (np.float64, -37.0, 8)])
def test_gelu_relative_accuracy_down_to_underflow(dt, lo, ulps):
    x = np.concatenate([np.linspace(lo, 3.0, 4001), [-1.7677, -1.7678, -1.1931, -1.1932]]).astype(dt)
    got = np.asarray(ops.gelu(x)).astype(np.float64)
    want = _ref(x)
    normal = np.abs(want) >= np.finfo(dt).tiny
    err = np.abs(got - want)[normal] / np.spacing(np.abs(want[normal]).astype(dt)).astype(np.float64)
    if dt == np.float64:    # the reference rounds -x / sqrt 2; erfc's relative slope is 2 a**2 = x**2
        err = err / (1.0 + x[normal].astype(np.float64) ** 2)
    assert err.max() <= ulps, (x[normal][np.argmax(err)], err.max())
    # below the normal range an error of a couple of the smallest subnormals
    sub = np.abs(got - want)[~normal] / np.finfo(dt).smallest_subnormal
    assert sub.size == 0 or sub.max() <= 2
    assert (got[x < 0] <= 0).all()


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_gelu_tail_values_nonzero_where_they_are_representable(dt):
    x = np.array([-6.0, -8.0, -10.0], dt)
    got = np.asarray(ops.gelu(x)).astype(np.float64)
    np.testing.assert_allclose(got, _ref(x), rtol=8 * np.finfo(dt).eps * (1 + 100 * (dt == np.float64)))


def test_gelu_gradient_agrees_with_the_forward_in_the_tail():
    x = np.array([-7.0, -5.0, -3.0, -1.8, -1.5, -1.0, -0.3, 0.4, 2.0])
    h = 1e-6
    fd = (np.asarray(ops.gelu(x + h)) - np.asarray(ops.gelu(x - h))) / (2 * h)
    g = pypto.grad(lambda t: ops.sum(ops.gelu(t)))(x)
    np.testing.assert_allclose(np.asarray(g), fd, rtol=1e-6, atol=1e-12)
