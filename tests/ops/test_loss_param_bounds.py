"""Loss parameters torch refuses or accepts, checked the same way here."""

import numpy as np
import pytest

from pypto import ops
from pypto.errors import ParamError

RNG = np.random.default_rng(1)
X, T = RNG.random(5).astype(np.float32), RNG.random(5).astype(np.float32)


@pytest.mark.parametrize("delta", [0.0, -0.0, 0, -1.0, float("nan")])
def test_huber_delta_must_be_positive(delta):
    # torch: "huber_loss does not support non-positive values for delta"; delta=0 was taken
    with pytest.raises(ParamError, match="huber_loss: parameter 'delta' must be > 0"):
        ops.huber_loss(X, T, delta=delta)


def test_huber_small_delta_and_smooth_l1_zero_beta_still_work():
    d = np.abs(X.astype(np.float64) - T)
    np.testing.assert_allclose(ops.huber_loss(X, T, delta=1e-3, reduction="none"),
                               np.where(d <= 1e-3, 0.5 * d * d, 1e-3 * (d - 0.5e-3)), rtol=1e-5)
    np.testing.assert_allclose(ops.smooth_l1_loss(X, T, beta=0.0, reduction="none"), d, rtol=1e-6)


def test_kl_div_log_target_takes_a_numpy_bool():
    # np.True_ was refused ("expects a bool"): NumPy 2's bool scalar type is named "bool"
    lx = np.log(X)
    np.testing.assert_array_equal(ops.kl_div(lx, T, log_target=np.bool_(True)),
                                  ops.kl_div(lx, T, log_target=True))
