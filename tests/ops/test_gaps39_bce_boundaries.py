"""binary_cross_entropy at and near the ends of [0, 1] against torch: the loss (each log clamped
at -100, log(1 - x) as log1p(-x)) and torch's gradients, which are not those of the clamped
logs: ``w (x - t) / max(x (1 - x), 1e-12)`` for the input (0 at x = t = 0 and x = t = 1, where
the clamped logs' derivative gave 1 and -1) and ``-w logit(x)`` for the target (inf at x = 0).
"""

from __future__ import annotations

import numpy as np
import pytest
from helpers import assert_close

import pypto

torch = pytest.importorskip("torch")
F = torch.nn.functional

_XS = [0.0, 1.0, 1e-45, 3.6e-44, 1e-40, 1e-30, 1e-13, 1e-8, 1e-7, 0.25, 0.5, 1 - 2 ** -24,
       1 - 2 ** -12, 0.999]
_TS = [0.0, 1.0, 0.3, 0.7]


def _grid(dtype):
    x, t = np.meshgrid(np.array(_XS, dtype), np.array(_TS, dtype))
    w = np.linspace(0.5, 2.0, x.size).reshape(x.shape).astype(dtype)
    return x, t, w


def _torch(x, t, w):
    xt = torch.tensor(x, requires_grad=True)
    tt = torch.tensor(t, requires_grad=True)
    loss = F.binary_cross_entropy(xt, tt, weight=torch.tensor(w), reduction="none")
    gx, gt = torch.autograd.grad(loss.sum(), (xt, tt))
    return loss.detach().numpy(), gx.numpy(), gt.numpy()


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_loss_matches_torch_at_the_ends(dtype):
    x, t, w = _grid(dtype)
    want, _, _ = _torch(x, t, w)
    got = pypto.ops.binary_cross_entropy(x, t, w, reduction="none")
    # log1p(-x): a loss of 1e-8 at x = 1e-8, t = 0 (log(1 - x) rounded it to 0)
    assert_close(got, want, rtol=1e-6, atol=0)
    # torch's zero is +0 at x = t = 0
    assert not np.signbit(pypto.ops.binary_cross_entropy(
        np.zeros(1, dtype), np.zeros(1, dtype), reduction="none")[0])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_gradients_match_torch_at_the_ends(dtype):
    x, t, w = _grid(dtype)
    _, gx, gt = _torch(x, t, w)
    dx, dt = pypto.grad(lambda a, b: pypto.ops.binary_cross_entropy(a, b, w, reduction="sum"),
                        argnums=(0, 1))(x, t)
    assert_close(dx, gx, rtol=1e-5, atol=0)
    assert_close(dt, gt, rtol=1e-5, atol=0)


def test_gradient_is_zero_where_input_equals_a_hard_target():
    x = np.array([0.0, 1.0], np.float32)
    t = x.copy()
    g = pypto.grad(lambda a: pypto.ops.binary_cross_entropy(a, t, reduction="sum"))(x)
    np.testing.assert_array_equal(g, [0.0, 0.0])      # the clamped logs' derivative gave 1, -1


def test_input_outside_the_unit_interval_is_still_nan():
    x = np.array([-0.5, 1.5, np.nan], np.float32)
    t = np.ones(3, np.float32)
    assert np.isnan(pypto.ops.binary_cross_entropy(x, t, reduction="none")).all()
    g = pypto.grad(lambda a: pypto.ops.binary_cross_entropy(a, t, reduction="sum"))(x)
    assert np.isnan(g).all()
