"""padding='same' where dilation * (kernel - 1) is odd: torch pads one more on the far side;
conv1d/2d/3d do the same, forward and backward."""

from __future__ import annotations

import numpy as np
import pytest

import pypto

torch = pytest.importorskip("torch")
F = torch.nn.functional
o = pypto.ops
CONVS = {1: (o.conv1d, F.conv1d), 2: (o.conv2d, F.conv2d), 3: (o.conv3d, F.conv3d)}


@pytest.mark.parametrize("nd", [1, 2, 3])
@pytest.mark.parametrize("kernel, dilation", [(4, 1), (2, 3), (4, 2), (3, 1), ((2, 3, 4), 1)])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_same_as_torch(nd, kernel, dilation, dtype):
    ks = kernel[:nd] if isinstance(kernel, tuple) else (kernel,) * nd
    rng = np.random.default_rng(nd)
    x = rng.standard_normal((2, 3) + (6,) * nd).astype(dtype)
    w = rng.standard_normal((4, 3) + ks).astype(dtype)
    b = rng.standard_normal(4).astype(dtype)
    ours, theirs = CONVS[nd]
    got = ours(x, w, b, padding="same", dilation=dilation)
    want = theirs(torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(b), padding="same",
                  dilation=dilation).numpy()
    assert got.shape == want.shape == x.shape[:1] + (4,) + x.shape[2:]
    tol = dict(rtol=1e-5, atol=1e-5) if dtype == "float32" else dict(rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(got, want, **tol)


def test_same_gradients_as_torch_autograd():
    rng = np.random.default_rng(7)
    x, w = rng.standard_normal((1, 2, 7, 6)), rng.standard_normal((3, 2, 4, 3))
    ct = rng.standard_normal((1, 3, 7, 6))
    gx, gw = pypto.grad(lambda x, w: (o.conv2d(x, w, padding="same") * ct).sum(),
                        argnums=(0, 1))(x, w)
    xt, wt = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    (F.conv2d(xt, wt, padding="same") * torch.tensor(ct)).sum().backward()
    np.testing.assert_allclose(gx, xt.grad.numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(gw, wt.grad.numpy(), rtol=1e-12, atol=1e-12)
