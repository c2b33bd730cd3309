"""A two-layer MLP trained for 50 SGD steps with PyPTO gradients, against PyTorch autograd."""

from __future__ import annotations

import numpy as np
import pytest

import pypto

torch = pytest.importorskip("torch")
o = pypto.ops


@pypto.jit
def mlp_loss(w1, b1, w2, b2, x, y):
    h = o.tanh(o.linear(x, w1, b1))
    d = o.linear(h, w2, b2) - y
    return (d * d).mean()


def test_mlp_sgd_matches_torch_every_step():
    rng = np.random.default_rng(7)
    x = rng.standard_normal((32, 5)).astype(np.float32)
    y = rng.standard_normal((32, 3)).astype(np.float32)
    params = [rng.standard_normal((16, 5)).astype(np.float32) * 0.5,
              np.zeros(16, np.float32),
              rng.standard_normal((3, 16)).astype(np.float32) * 0.5,
              np.zeros(3, np.float32)]
    ref = [torch.tensor(p, requires_grad=True) for p in params]
    tx, ty = torch.from_numpy(x), torch.from_numpy(y)
    step = pypto.value_and_grad(mlp_loss, argnums=(0, 1, 2, 3))
    lr = 0.2
    losses = []
    for _ in range(50):
        loss, grads = step(*params, x, y)
        params = [p - np.float32(lr) * g for p, g in zip(params, grads)]
        h = torch.tanh(tx @ ref[0].T + ref[1])
        loss_ref = ((h @ ref[2].T + ref[3] - ty) ** 2).mean()
        for p in ref:
            p.grad = None
        loss_ref.backward()
        with torch.no_grad():
            for p in ref:
                p -= lr * p.grad
        np.testing.assert_allclose(float(loss), loss_ref.item(), rtol=2e-5)
        losses.append(float(loss))
    assert losses[-1] < 0.8 * losses[0]       # it trains
