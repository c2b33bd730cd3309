"""layer_norm and rms_norm in torch.nn.functional's form ``(x, normalized_shape, weight, bias,
eps)``, over one or several trailing axes, beside PyPTO's earlier ``(x, gamma, beta, eps)``."""

from __future__ import annotations

import numpy as np
import pytest

import pypto
import pypto.ops as P
from pypto.errors import ParamError, ShapeError

RNG = np.random.default_rng(31)
X = RNG.standard_normal((3, 5, 6)).astype(np.float32)
W1, B1 = RNG.standard_normal(6).astype(np.float32), RNG.standard_normal(6).astype(np.float32)
W2 = RNG.standard_normal((5, 6)).astype(np.float32)
B2 = RNG.standard_normal((5, 6)).astype(np.float32)


def _ln64(x, axes, w=None, b=None, eps=1e-5):
    """The float64 formula, written out here."""
    x = x.astype(np.float64)
    d = x - x.mean(axis=axes, keepdims=True)
    out = d / np.sqrt((d * d).mean(axis=axes, keepdims=True) + eps)
    return out * (1 if w is None else w) + (0 if b is None else b)


CASES = [
    ("torch form, last axis", lambda: P.layer_norm(X, (6,), W1, B1), (2,), W1, B1, 1e-5),
    ("torch form, two axes", lambda: P.layer_norm(X, (5, 6), W2, B2, 1e-3), (1, 2), W2, B2, 1e-3),
    ("keywords", lambda: P.layer_norm(X, [5, 6], weight=W2, bias=B2, eps=1e-3), (1, 2), W2, B2,
     1e-3),
    ("an int", lambda: P.layer_norm(X, 6, W1), (2,), W1, None, 1e-5),
    ("no affine", lambda: P.layer_norm(X, (3, 5, 6)), (0, 1, 2), None, None, 1e-5),
    ("earlier form", lambda: P.layer_norm(X, W1, B1), (2,), W1, B1, 1e-5),
    ("earlier form, eps", lambda: P.layer_norm(X, W1, B1, 1e-2), (2,), W1, B1, 1e-2),
    ("gamma/beta keywords", lambda: P.layer_norm(X, gamma=W1, beta=B1, eps=1e-2), (2,), W1, B1,
     1e-2),
    ("gamma positional, beta keyword", lambda: P.layer_norm(X, W1, beta=B1), (2,), W1, B1, 1e-5),
]


@pytest.mark.parametrize("name, call, axes, w, b, eps", CASES, ids=[c[0] for c in CASES])
def test_layer_norm_forms(name, call, axes, w, b, eps):
    np.testing.assert_allclose(call(), _ln64(X, axes, w, b, eps), rtol=1e-5, atol=2e-6)


def test_rms_norm_forms():
    def rms64(axes, w, eps):
        x = X.astype(np.float64)
        return x / np.sqrt((x * x).mean(axis=axes, keepdims=True) + eps) * w
    np.testing.assert_allclose(P.rms_norm(X, (6,), W1), rms64((2,), W1, 1e-6), rtol=1e-5)
    np.testing.assert_allclose(P.rms_norm(X, (5, 6), W2, 1e-3), rms64((1, 2), W2, 1e-3),
                               rtol=1e-5)
    # torch's eps=None: the dtype's machine epsilon
    np.testing.assert_allclose(P.rms_norm(X, (5, 6), W2, None),
                               rms64((1, 2), W2, float(np.finfo(np.float32).eps)), rtol=1e-5)
    np.testing.assert_allclose(P.rms_norm(X, W1, 1e-3), rms64((2,), W1, 1e-3), rtol=1e-5)
    np.testing.assert_allclose(P.rms_norm(X, gamma=W1), rms64((2,), W1, 1e-6), rtol=1e-5)


def test_torch_agrees():
    torch = pytest.importorskip("torch")
    F, T = torch.nn.functional, torch.from_numpy
    np.testing.assert_allclose(P.layer_norm(X, torch.Size([5, 6]), W2, B2),
                               F.layer_norm(T(X), (5, 6), T(W2), T(B2)).numpy(), atol=2e-6)
    np.testing.assert_allclose(P.rms_norm(X, (5, 6), W2, None),
                               F.rms_norm(T(X), (5, 6), T(W2)).numpy(), atol=2e-6)


def test_program_and_gradient_over_two_axes():
    torch = pytest.importorskip("torch")
    F, T = torch.nn.functional, torch.from_numpy

    def f(x, w, b):
        y = P.layer_norm(x, (5, 6), w, b)
        return P.sum(y * y * 0.5 + y)

    assert np.isclose(pypto.jit(f)(X, W2, B2), f(X, W2, B2), rtol=1e-6)
    grads = pypto.grad(f, argnums=(0, 1, 2))(X, W2, B2)
    ts = [T(a.copy()).requires_grad_() for a in (X, W2, B2)]
    y = F.layer_norm(ts[0], (5, 6), ts[1], ts[2])
    (0.5 * y * y + y).sum().backward()
    for g, t in zip(grads, ts):
        np.testing.assert_allclose(g, t.grad.numpy(), atol=1e-5)


def test_errors_name_what_is_wrong():
    with pytest.raises(ShapeError, match=r"normalized_shape \[6, 5\] must be the trailing 2 axes "
                                         r"of x, whose shape is \[3, 5, 6\]"):
        P.layer_norm(X, (6, 5))
    with pytest.raises(ShapeError, match=r"'weight' must have the normalized shape \[6\], got "
                                         r"\[5, 6\]"):
        P.layer_norm(X, (6,), W2)
    with pytest.raises(ShapeError, match="normalized_shape is empty"):
        P.layer_norm(X, ())
    with pytest.raises(ParamError, match="give the scale once, as 'gamma' or as torch's 'weight'"):
        P.layer_norm(X, (6,), W1, gamma=W1)
    with pytest.raises(ParamError, match="got an array where eps goes"):
        P.layer_norm(X, W1, B1, B1)
    with pytest.raises(ShapeError, match="trailing 4 axes"):
        P.rms_norm(X, (2, 3, 5, 6))
