"""cross_entropy with class-probability targets (a float target of the input's shape), as
torch.nn.functional.cross_entropy: values, weights, label smoothing, reductions, K-dim inputs,
in programs, and gradients in both the input and the target."""

from __future__ import annotations

import numpy as np
import pytest

import pypto
from pypto.errors import DtypeError, ParamError, ShapeError

torch = pytest.importorskip("torch")
F = torch.nn.functional
o = pypto.ops


def _case(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape).astype(dtype)
    axis = 0 if len(shape) == 1 else 1
    t = rng.random(shape).astype(dtype)
    t /= t.sum(axis=axis, keepdims=True)
    w = rng.uniform(0.5, 2, shape[axis]).astype(dtype)
    return x, t, w


@pytest.mark.parametrize("shape", [(5,), (1, 1), (3, 5), (3, 5, 2, 3)])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("label_smoothing", [0.0, 0.2])
@pytest.mark.parametrize("weighted", [False, True])
def test_as_torch(shape, dtype, reduction, label_smoothing, weighted):
    x, t, w = _case(shape, dtype)
    w = w if weighted else None
    got = o.cross_entropy(x, t, w, reduction=reduction, label_smoothing=label_smoothing)
    want = F.cross_entropy(torch.from_numpy(x), torch.from_numpy(t),
                           None if w is None else torch.from_numpy(w), reduction=reduction,
                           label_smoothing=label_smoothing).numpy()
    tol = dict(rtol=1e-5, atol=1e-6) if dtype == "float32" else dict(rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(got, want, **tol)
    assert np.shape(got) == want.shape and np.asarray(got).dtype == want.dtype


def test_one_hot_probabilities_equal_class_indices():
    x, _, w = _case((6, 4), "float64", seed=1)
    idx = np.array([0, 3, 1, 1, 2, 0])
    probs = np.eye(4)[idx]
    np.testing.assert_allclose(o.cross_entropy(x, probs, w, reduction="none"),
                               o.cross_entropy(x, idx, w, reduction="none"), rtol=1e-13)


def test_gradients_in_input_and_target_as_torch_autograd():
    x, t, w = _case((3, 5, 2), "float64", seed=2)
    g = pypto.grad(lambda x, t: o.cross_entropy(x, t, w, label_smoothing=0.1), argnums=(0, 1))
    gx, gt = g(x, t)
    xt = torch.tensor(x, requires_grad=True)
    tt = torch.tensor(t, requires_grad=True)
    F.cross_entropy(xt, tt, torch.tensor(w), label_smoothing=0.1).backward()
    np.testing.assert_allclose(gx, xt.grad.numpy(), rtol=1e-11, atol=1e-13)
    np.testing.assert_allclose(gt, tt.grad.numpy(), rtol=1e-11, atol=1e-13)


def test_in_a_program():
    x, t, _ = _case((4, 3), "float32", seed=3)
    f = pypto.jit(lambda x, t: o.cross_entropy(x, t) * 2.0)
    want = 2 * F.cross_entropy(torch.from_numpy(x), torch.from_numpy(t)).item()
    assert float(f(x, t)) == pytest.approx(want, rel=1e-5)


def test_errors():
    x, t, w = _case((3, 5), "float32")
    with pytest.raises(ShapeError, match=r"must have the input's shape \(3, 5\), got \(3, 4\)"):
        o.cross_entropy(x, t[:, :4])
    with pytest.raises(DtypeError, match="must have the input's dtype"):
        o.cross_entropy(x, t.astype(np.float64))
    with pytest.raises(ParamError, match="ignore_index applies to class-index targets"):
        o.cross_entropy(x, t, ignore_index=1)
    with pytest.raises(ShapeError, match=r"weight must have shape \(5,\)"):
        o.cross_entropy(x, t, w[:4])
    with pytest.raises(ParamError, match="'reduction' must be one of"):
        o.cross_entropy(x, t, reduction="avg")
