"""logcumsumexp's first element is log(exp(x0)): -0.0 gives +0.0 there, as torch.logcumsumexp,
PyPTO's own logsumexp and every later element (m + log(s)) give it; it was x0 itself (-0.0)."""

import numpy as np
import pytest

from pypto import ops


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_first_element_negative_zero_is_positive_zero(dt):
    x = np.array([[-0.0, -0.0], [-0.0, 1.0]], dt)
    out = ops.logcumsumexp(x, axis=1)
    assert out[:, 0].tolist() == [0.0, 0.0] and not np.signbit(out[:, 0]).any()
    np.testing.assert_allclose(out[:, 1], [np.log(2.0), np.logaddexp(0.0, 1.0)], rtol=1e-6)
    assert not np.signbit(ops.logsumexp(x[:1, :1], axis=1)).any()


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_long_row_first_element(dt):
    x = np.full(20000, -np.inf, dt)
    x[0] = -0.0
    out = ops.logcumsumexp(x, axis=0)
    assert out[0] == 0 and not np.signbit(out[0])
