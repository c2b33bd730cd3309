"""Losses and distances against formulas written here in float64 NumPy, and against
``torch.nn.functional`` where PyTorch is installed; every public call also runs traced."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import assert_close, rand

import pypto
import pypto.ops as P
from pypto.errors import DtypeError, ParamError, ShapeError

RNG = np.random.default_rng(11)
X = rand((4, 7), seed=1)
T = rand((4, 7), seed=2)


def _red(loss, reduction):
    return {"none": loss, "sum": loss.sum(), "mean": loss.mean()}[reduction]


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_regression_losses(reduction):
    d = X.astype(np.float64) - T
    a = np.abs(d)
    cases = {
        "mse_loss": ({}, d * d),
        "l1_loss": ({}, a),
        "smooth_l1_loss": ({"beta": 0.5}, np.where(a < 0.5, d * d, a - 0.25)),
        "huber_loss": ({"delta": 0.3}, np.where(a <= 0.3, 0.5 * d * d, 0.3 * (a - 0.15))),
    }
    for name, (kw, loss) in cases.items():
        got = getattr(P, name)(X, T, reduction=reduction, **kw)
        assert_close(got, _red(loss, reduction).astype(np.float32), err_msg=name)


def test_kl_div_and_its_reductions():
    logp = np.log(RNG.uniform(0.05, 1, (3, 5))).astype(np.float64)
    t = RNG.uniform(0, 1, (3, 5))
    t[0, 0] = 0.0                                   # 0 * log 0 counts as 0
    pw = np.where(t > 0, t * (np.log(np.where(t > 0, t, 1)) - logp), 0.0)
    assert_close(P.kl_div(logp, t, reduction="none"), pw)
    assert_close(P.kl_div(logp, t, reduction="batchmean"), pw.sum() / 3)
    lt = np.log(t + 0.1)
    assert_close(P.kl_div(logp, lt, reduction="sum", log_target=True),
                 (np.exp(lt) * (lt - logp)).sum())


def test_binary_cross_entropy_family():
    p = RNG.uniform(0, 1, (3, 6))
    p[0, 0], p[0, 1] = 0.0, 1.0                      # logs clamp at -100
    y = RNG.uniform(0, 1, (3, 6))
    w = RNG.uniform(0.5, 2, (6,))
    with np.errstate(divide="ignore"):
        bce = -w * (y * np.maximum(np.log(p), -100) + (1 - y) * np.maximum(np.log(1 - p), -100))
    assert_close(P.binary_cross_entropy(p, y, w, reduction="none"), bce)
    assert_close(P.binary_cross_entropy(p, y), (bce / w).mean())
    z = RNG.normal(0, 8, (3, 6))
    pw = RNG.uniform(0.5, 3, (6,))
    sig = 1 / (1 + np.exp(-z))
    want = -(pw * y * np.log(sig) + (1 - y) * np.log1p(-sig))
    assert_close(P.binary_cross_entropy_with_logits(z, y, pos_weight=pw, reduction="none"),
                 want, rtol=1e-7, atol=1e-9)


def _ce(x, t, w, ignore, eps):
    logp = x - np.log(np.exp(x - x.max(1, keepdims=True)).sum(1, keepdims=True)) - x.max(
        1, keepdims=True)
    rows = []
    for i, c in enumerate(t):
        if c == ignore:
            rows.append((0.0, 0.0))
            continue
        nll = -w[c] * logp[i, c]
        smooth = -(w * logp[i]).sum() / x.shape[1]
        rows.append(((1 - eps) * nll + eps * smooth, w[c]))
    loss, wt = np.array(rows).T
    return loss, wt


@pytest.mark.parametrize("eps", [0.0, 0.1])
def test_cross_entropy_with_weights_ignore_index_and_smoothing(eps):
    x = rand((6, 5), "float64", 3) * 3
    t = np.array([0, 4, -100, 2, 2, 1])
    w = RNG.uniform(0.5, 2, 5)
    loss, wt = _ce(x, t, w, -100, eps)
    assert_close(P.cross_entropy(x, t, w, reduction="none", label_smoothing=eps), loss)
    assert_close(P.cross_entropy(x, t, w, label_smoothing=eps), loss.sum() / wt.sum())
    assert_close(P.cross_entropy(x, t, reduction="sum", label_smoothing=eps),
                 _ce(x, t, np.ones(5), -100, eps)[0].sum())
    logp = x - np.log(np.exp(x).sum(1, keepdims=True))
    assert_close(P.nll_loss(logp, t, w), _ce(x, t, w, -100, 0.0)[0].sum() / wt.sum())


def test_cross_entropy_shapes_and_torch():
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    x = rand((2, 5, 3, 4), seed=4)
    t = RNG.integers(0, 5, (2, 3, 4))
    want = F.cross_entropy(torch.from_numpy(x), torch.from_numpy(t), reduction="none")
    assert_close(P.cross_entropy(x, t, reduction="none"), want.numpy())
    assert_close(P.cross_entropy(x[0, :, 0, 0], t[0, 0, 0]),
                 F.cross_entropy(torch.from_numpy(x[0, :, 0, 0]), torch.tensor(t[0, 0, 0])))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("n,c", [(37, 1000), (300, 333), (2, 64), (513, 129)])
def test_class_rows_and_distances_on_their_row_task_schedules(dtype, n, c):
    # shapes large enough for the row-task schedules (lane partials of each row, parallel blocks
    # of rows, a guarded last vector of a row); odd class counts and row counts
    rng = np.random.default_rng(n + c)
    x = (rng.standard_normal((n, c)) * 4).astype(dtype)
    t = rng.integers(0, c, n)
    t[::7] = -100
    t[1] = c - 1
    w = rng.uniform(0.5, 2, c).astype(dtype)
    x[min(3, n - 1), c - 1] = 40.0          # a row maximum at the last element of its row
    for eps in (0.0, 0.1):
        loss, wt = _ce(x.astype(np.float64), t, w.astype(np.float64), -100, eps)
        assert_close(P.cross_entropy(x, t, w, reduction="none", label_smoothing=eps), loss, dtype)
        assert_close(P.cross_entropy(x, t, w, label_smoothing=eps), loss.sum() / wt.sum(), dtype)
    y = (rng.standard_normal((n, c))).astype(dtype)
    for p in (1.0, 2.0, 3.0):
        want = (np.abs(x.astype(np.float64) - y + 1e-6) ** p).sum(-1) ** (1 / p)
        assert_close(P.pairwise_distance(x, y, p), want, dtype)


def test_class_loss_errors():
    with pytest.raises(ParamError, match=r"target\[2\] = 7 is out of range; valid indices are 0 to 6"):
        P.cross_entropy(X, np.array([0, 1, 7, 2]))
    with pytest.raises(DtypeError, match="class indices"):
        P.cross_entropy(X, np.zeros(4, np.int8))
    with pytest.raises(ShapeError, match="probability target must have the input's shape"):
        P.cross_entropy(X, T[:, :3])      # a float target holds probabilities (T itself is valid)
    with pytest.raises(ShapeError, match="target must have shape"):
        P.nll_loss(X, np.zeros(3, np.int64))
    with pytest.raises(ParamError, match="reduction"):
        P.mse_loss(X, T, reduction="avg")
    with pytest.raises(ShapeError, match="one shape"):
        P.l1_loss(X, T[:2])


def test_distances():
    a, b = rand((3, 6, 4), "float64", 5), rand((6, 4), "float64", 6)
    n1, n2 = np.sqrt((a * a).sum(1)), np.sqrt((b * b).sum(0))
    assert_close(P.cosine_similarity(a, b[None], dim=1),
                 (a * b).sum(1) / (np.maximum(n1, 1e-8) * np.maximum(n2, 1e-8)))
    for p in (1.0, 2.0, 3.0):
        want = (np.abs(a - b + 1e-6) ** p).sum(-1) ** (1 / p)
        assert_close(P.pairwise_distance(a, b, p), want)
        c = rand((3, 5, 4), "float64", 7)
        want = (np.abs(a[:, :, None] - c[:, None]) ** p).sum(-1) ** (1 / p)
        assert_close(P.cdist(a, c, p), want)
    # the batch axes broadcast (torch.cdist's): [3, 6, 4] against [6, 4]
    assert_close(P.cdist(a, b), np.sqrt(((a[:, :, None] - b[None, None]) ** 2).sum(-1)))
    with pytest.raises(ShapeError, match="batch axes"):
        P.cdist(a, rand((2, 6, 4), "float64", 8))


CALLS = {
    "mse_loss": lambda x, t: P.mse_loss(x, t),
    "l1_loss": lambda x, t: P.l1_loss(x, t, reduction="sum"),
    "smooth_l1_loss": lambda x, t: P.smooth_l1_loss(x, t, reduction="none"),
    "huber_loss": lambda x, t: P.huber_loss(x, t, delta=0.5),
    "kl_div": lambda x, t: P.kl_div(x, t * t, reduction="batchmean"),
    "binary_cross_entropy": lambda x, t: P.binary_cross_entropy(x * x * 0.5, t * t * 0.5),
    "binary_cross_entropy_with_logits": lambda x, t: P.binary_cross_entropy_with_logits(
        x, t * t, pos_weight=np.full(7, 2.0, np.float32)),
    "cross_entropy": lambda x, t: P.cross_entropy(x, np.array([0, 6, 3, -100]),
                                                  label_smoothing=0.1),
    "nll_loss": lambda x, t: P.nll_loss(x, np.array([0, 6, 3, 2]), reduction="sum"),
    "cosine_similarity": lambda x, t: P.cosine_similarity(x, t),
    "pairwise_distance": lambda x, t: P.pairwise_distance(x, t),
    "cdist": lambda x, t: P.cdist(x, t),
}


@pytest.mark.parametrize("name", sorted(CALLS))
def test_public_call_runs_traced(name):
    want = CALLS[name](X, T)
    got = pypto.jit(CALLS[name])(X, T)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6, atol=1e-7)
