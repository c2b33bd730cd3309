"""Signed zeros of the piecewise activations, against torch's results where those are the sensible
ones (np.signbit compared, not only ==).

- elu, selu, celu: x at and around 0 (slope 1 on the right), so both zeros stay as they are;
  elu(+0.0, alpha < 0) was -0.0 (alpha * expm1(+0.0)) and celu(-0.0) +0.0 (the two branch zeros
  added), as was celu of a negative x whose x / alpha underflows.
- leaky_relu with a negative slope is >= 0 everywhere, so -0.0 gives +0.0 (torch too; torch's
  -0.0 at +0.0 comes from +0.0 * slope and is not followed).
- tanhshrink is odd and ~x**3 / 3 near 0, so -0.0 stays -0.0 (torch's x - tanh(x) gives +0.0
  there; PyPTO keeps the sign, as its series does for every tiny negative x).
"""

import numpy as np
import pytest

from pypto import ops

DTYPES = [np.float32, np.float64]


def _bits(a):
    a = np.asarray(a)
    return list(zip(a.tolist(), np.signbit(a).tolist()))


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("alpha", [1.0, 2.0, -0.5])
def test_elu_and_celu_keep_both_zeros(dt, alpha):
    x = np.array([0.0, -0.0], dt)
    assert _bits(ops.elu(x, alpha)) == _bits(x)
    assert _bits(ops.celu(x, alpha)) == _bits(x)


@pytest.mark.parametrize("dt", DTYPES)
def test_selu_keeps_both_zeros(dt):
    x = np.array([0.0, -0.0], dt)
    assert _bits(ops.selu(x)) == _bits(x)


@pytest.mark.parametrize("dt", DTYPES)
def test_celu_of_an_underflowing_negative_is_a_negative_zero(dt):
    tiny = np.finfo(dt).smallest_subnormal
    out = ops.celu(np.array([-tiny, tiny], dt), 2.0)       # -tiny / 2 rounds to -0.0
    assert np.signbit(out).tolist() == [True, False]
    assert out[0] == 0 and out[1] == tiny


@pytest.mark.parametrize("dt", DTYPES)
def test_leaky_relu_negative_slope_gives_positive_zeros(dt):
    x = np.array([0.0, -0.0, -2.0, 3.0], dt)
    out = ops.leaky_relu(x, -0.5)
    assert _bits(out) == [(0.0, False), (0.0, False), (1.0, False), (3.0, False)]
    # a slope >= 0 keeps -0.0 (x * slope, as torch)
    assert _bits(ops.leaky_relu(x[:2], 0.01)) == _bits(x[:2])


@pytest.mark.parametrize("dt", DTYPES)
def test_tanhshrink_is_odd_at_zero(dt):
    tiny = np.finfo(dt).smallest_subnormal
    out = ops.tanhshrink(np.array([0.0, -0.0, tiny, -tiny], dt))
    assert (out == 0).all()
    assert np.signbit(out).tolist() == [False, True, False, True]
