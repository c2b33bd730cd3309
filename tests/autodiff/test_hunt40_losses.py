"""cross_entropy / nll_loss gradients where every sample is ignored (or weighs 0), against
PyTorch's: an ignored sample passes nothing whatever its output gradient. Under the mean of a
batch whose samples are all ignored that gradient is 1 / 0 (the loss is NaN), and the rules
multiplied inf by the zero mask: NaN for every logit, where PyTorch gives 0."""

from __future__ import annotations

import numpy as np
import pytest
from fd import check_vjp

import pypto

o = pypto.ops
X = np.random.default_rng(3).standard_normal((2, 3))
IGNORED = np.array([-100, -100])


@pytest.mark.parametrize("smoothing", [0.0, 0.2])
def test_cross_entropy_all_ignored_mean_gradient_is_zero(smoothing):
    loss, g = pypto.value_and_grad(
        lambda x: o.cross_entropy(x, IGNORED, label_smoothing=smoothing))(X)
    assert np.isnan(loss)                                     # as PyTorch's (0 / 0)
    np.testing.assert_array_equal(g, np.zeros_like(X))


def test_nll_loss_all_ignored_and_zero_weight():
    g = pypto.grad(lambda x: o.nll_loss(x, IGNORED))(X)
    np.testing.assert_array_equal(g, np.zeros_like(X))
    # a class of weight 0 that every sample targets: the mean is 0 / 0; PyTorch reads only each
    # sample's target entry (NaN there), the other entries get 0
    w = np.array([0.0, 1.0, 1.0])
    g = pypto.grad(lambda x: o.nll_loss(x, np.array([0, 0]), w))(X)
    assert np.all(np.isnan(g[:, 0]))
    np.testing.assert_array_equal(g[:, 1:], np.zeros((2, 2)))


def test_weights_and_partly_ignored_batches_still_match_differences():
    x = np.random.default_rng(4).standard_normal((4, 3))
    t = np.array([2, -100, 0, 2])
    w = np.array([0.5, 1.5, 2.0])
    check_vjp(lambda x, w: o.cross_entropy(x, t, w, label_smoothing=0.1), x, w)
    check_vjp(lambda x, w: o.nll_loss(x, t, w, reduction="sum"), x, w)
