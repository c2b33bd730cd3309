"""Rules of the losses and distances.

The elementwise losses see [R, C] per-element losses (their reductions are ``sum``/``mean`` ops
with rules of their own); the gradients are PyTorch's, kinks included: ``l1_loss`` passes 0 at
``input == target``, ``smooth_l1_loss``/``huber_loss`` take the quadratic side at ``|d| <
beta`` / ``|d| <= delta``, ``kl_div`` passes nothing to a zero target's entry, and
``binary_cross_entropy`` gives torch's gradients, which are not those of its clamped logs:
``w (x - t) / max(x (1 - x), 1e-12)`` for the input and ``w (log(1 - x) - log(x))`` (unclamped)
for the target; an input outside [0, 1] or NaN makes its loss and gradients NaN.

``cross_entropy``/``nll_loss`` give two outputs, the per-sample loss and its weight
``w[target]``; the rule writes the loss as ``-sum_c A[n, c] log p[n, c]`` with ``A`` built from a
one-hot mask of the (clamped) targets, ignored samples and the smoothing term, so input and
class-weight gradients share one form. Targets are indices (constants).

Distances divide by the distance: where it is 0 the gradient is 0 (PyTorch's choice for norms).
With p = 0 (a count of nonzero differences) nothing flows back; with p = inf the gradient is
``sign(d)`` at the entries whose ``|d|`` is the largest, PyTorch's subgradients: ``cdist`` gives
each tied entry the whole of it, ``pairwise_distance`` (a norm) shares it among the ties.
"""

from __future__ import annotations

import math

import numpy as np

from ... import ops
from ...frontend import tensor as T
from . import Constant, rule
from .indexing import INDEX

#: The gradient of a p = 0 distance: a count of nonzero differences is piecewise constant.
COUNT = Constant("with p = 0 it counts nonzero differences, which is piecewise constant")


def _pair(c, da):
    return [da, -da]


@rule("mse_loss")
def _mse(c):
    x, t = c.inputs
    return _pair(c, 2.0 * (x - t) * c.dy)


@rule("l1_loss")
def _l1(c):
    x, t = c.inputs
    return _pair(c, ops.sign(x - t) * c.dy)


@rule("smooth_l1_loss")
def _smooth_l1(c):
    x, t = c.inputs
    d = x - t
    beta = c.params["beta"]
    if beta == 0:
        return _pair(c, ops.sign(d) * c.dy)
    return _pair(c, ops.where(ops.abs(d) < beta, d * (1.0 / beta), ops.sign(d)) * c.dy)


@rule("huber_loss")
def _huber(c):
    x, t = c.inputs
    d = x - t
    delta = c.params["delta"]
    return _pair(c, ops.where(ops.abs(d) <= delta, d, ops.sign(d) * delta) * c.dy)


@rule("kl_div")
def _kl_div(c):
    x, t = c.inputs
    dy = c.dy
    if c.params["log_target"]:
        e = ops.exp(t)
        return [-e * dy, e * (t - x + 1.0) * dy]
    pos = t > 0
    dt = ops.where(pos, (ops.log(ops.where(pos, t, 1.0)) + 1.0 - x) * dy, 0.0)
    return [-t * dy, dt]


@rule("binary_cross_entropy")
def _bce(c):
    x, t, w = c.inputs
    dy = c.dy
    log_x = ops.log(x)
    log_1x = ops.log1p(-x)
    # torch's gradients, not those of the clamped logs: dx = w (x - t) / max(x (1 - x), 1e-12)
    # (0 at x = t = 0 or 1, where the clamped logs gave 1 and -1; -1e12 for t = 1 at x = 0),
    # and dt = w (log(1 - x) - log(x)) unclamped (inf at x = 0, as torch's -logit(x)).
    # (torch's order: a subnormal x - t divided before the weight scales it)
    dx = dy * (x - t) / ops.maximum(x * (1.0 - x), 1e-12) * w
    # x outside [0, 1] or NaN: the loss is NaN (a NaN log), and so is every gradient
    dx = ops.where(ops.isnan(log_x + log_1x), float("nan"), dx)
    dt = w * (log_1x - log_x) * dy
    dw = ((t - 1.0) * ops.maximum(log_1x, -100.0) - t * ops.maximum(log_x, -100.0)) * dy
    return [dx, dt, dw]


@rule("binary_cross_entropy_with_logits")
def _bce_logits(c):
    x, t, w, pw = c.inputs
    dy = c.dy
    sp_pos, sp_neg = ops.softplus(x), ops.softplus(-x)
    dx = w * ((1.0 - t) * ops.sigmoid(x) - pw * t * ops.sigmoid(-x)) * dy
    dt = w * (pw * sp_neg - sp_pos) * dy
    dw = ((1.0 - t) * sp_pos + pw * t * sp_neg) * dy
    dpw = w * t * sp_neg * dy
    return [dx, dt, dw, dpw]


# -- cross_entropy and nll_loss --------------------------------------------------------------------

def _class_masks(target, n_cls: int, ignore_index: int, dtype):
    """(M, ok): M[n, c] = 1.0 where c is sample n's class and n is not ignored; ok[n] = 1.0
    where n is not ignored. Targets out of range are clamped, as the kernel does."""
    t = target.astype(np.int32)
    ok = t != ignore_index
    k = ops.where(t < 0, 0, ops.where(t > n_cls - 1, n_cls - 1, t))
    cls = T.as_tensor(np.arange(n_cls, dtype=np.int32)).reshape(1, n_cls)
    n = t.shape[0]
    hit = (k.reshape(n, 1) == cls) & ok.reshape(n, 1)
    return hit.astype(dtype), ok.astype(dtype)


def _weight_grad(c, m, per_class):
    """d weight: sum_n (per_class[n, c] + dwt[n] M[n, c]), per_class already holding the loss
    part."""
    return (per_class + ops.where(m > 0.0, c.dys[1].reshape(-1, 1), 0.0)).sum(axis=0)


@rule("cross_entropy")
def _cross_entropy(c):
    x, target, w = c.inputs
    n, n_cls = x.shape
    ls = c.params["label_smoothing"]
    m, ok = _class_masks(target, n_cls, c.params["ignore_index"], x.dtype)
    wr = w.reshape(1, n_cls)
    # loss[n] = -sum_c A[n, c] logp[n, c], with B = A / w (the part that is not the weight).
    b = m * (1.0 - ls) if ls > 0 else m
    if ls > 0:
        b = b + ok.reshape(n, 1) * (ls / n_cls)
    a = b * wr
    # An ignored sample passes nothing whatever its output gradient (PyTorch's): under the mean
    # of a batch whose samples are all ignored that gradient is 1 / 0, and inf * 0 made NaN.
    kept = ok.reshape(n, 1) > 0.0
    dy = ops.where(kept, c.dys[0].reshape(n, 1), 0.0)
    p = ops.softmax.kernel(x)
    dx = -dy * (a - p * a.sum(axis=1, keepdims=True))
    dw = None
    if c.wants(2):
        logp = ops.log_softmax.kernel(x)
        dw = _weight_grad(c, m, -dy * b * logp)
    return [dx, INDEX, dw]


@rule("nll_loss")
def _nll_loss(c):
    x, target, w = c.inputs
    n, n_cls = x.shape
    m, _ = _class_masks(target, n_cls, c.params["ignore_index"], x.dtype)
    # only each kept sample's target entry is read (PyTorch's): elsewhere nothing flows, even
    # with an inf output gradient (the mean of a batch whose samples are all ignored)
    hit = m > 0.0
    dy = c.dys[0].reshape(n, 1)
    dx = ops.where(hit, -dy * w.reshape(1, n_cls), 0.0)
    dw = _weight_grad(c, m, ops.where(hit, -dy * x, 0.0)) if c.wants(2) else None
    return [dx, INDEX, dw]


# -- distances -------------------------------------------------------------------------------------

def _safe_inverse(v):
    """1 / v where v > 0, else 0."""
    return ops.where(v > 0, 1.0 / ops.where(v > 0, v, 1.0), 0.0)


@rule("cosine_similarity")
def _cosine_similarity(c):
    a, b = c.inputs
    o, r, i = a.shape
    eps = c.params["eps"]
    n1 = ops.sqrt((a * a).sum(axis=1))
    n2 = ops.sqrt((b * b).sum(axis=1))
    n1c, n2c = ops.maximum(n1, eps), ops.maximum(n2, eps)
    y = c.y
    inv12 = (1.0 / (n1c * n2c)).reshape(o, 1, i)
    # d max(|a|, eps) / da = a / |a| where |a| > eps: the term -y a / |a|**2 there.
    k1 = ops.where(n1 > eps, y / (n1c * n1c), 0.0).reshape(o, 1, i)
    k2 = ops.where(n2 > eps, y / (n2c * n2c), 0.0).reshape(o, 1, i)
    dy = c.dy.reshape(o, 1, i)
    return [dy * (b * inv12 - a * k1), dy * (a * inv12 - b * k2)]


def _norm_weight(d, out, dy, p: float):
    """d ||d||_p / dd weighted by dy: dy sign(d) |d|**(p-1) / out**(p-1) (0 where out == 0).
    ``out``/``dy`` broadcast against ``d``."""
    if p == 1:
        return dy * ops.sign(d)
    if p == 2:
        return dy * _safe_inverse(out) * d
    scale = dy * _safe_inverse(ops.pow(out, p - 1.0))
    return scale * ops.sign(d) * ops.pow(ops.abs(d), p - 1.0)


def _at_max(d, axis: int):
    """1.0 where ``|d|`` is the largest along ``axis`` (every tie), else 0.0; the maximum is
    taken here from ``d`` itself, so that it matches ``d``'s rounding exactly."""
    a = ops.abs(d)
    return (a == a.max(axis=axis, keepdims=True)).astype(d.dtype)


@rule("pairwise_distance")
def _pairwise_distance(c):
    a, b = c.inputs
    rows = a.shape[0]
    p = c.params["p"]
    if p == 0:
        return [COUNT, COUNT]
    d = a - b + c.params["eps"]
    if p == math.inf:       # torch's norm: the ties share the gradient
        hit = _at_max(d, 1)
        share = _safe_inverse(hit.sum(axis=1, keepdims=True))
        g = c.dy.reshape(rows, 1) * share * hit * ops.sign(d)
        return [g, -g]
    g = _norm_weight(d, c.y.reshape(rows, 1), c.dy.reshape(rows, 1), p)
    return [g, -g]


@rule("cdist")
def _cdist(c):
    a, b = c.inputs
    p = c.params["p"]
    if p == 0:
        return [COUNT, COUNT]
    bs, pn, m = a.shape
    qn = b.shape[1]
    if p == 2:      # two batched products instead of the [B, P, Q, M] differences
        w = c.dy * _safe_inverse(c.y)                                    # [B, P, Q]
        bmm = ops.batch_matmul.kernel
        da = a * w.sum(axis=2, keepdims=True) - bmm(w, b)
        db = b * w.sum(axis=1).reshape(bs, qn, 1) - bmm(w.transpose(0, 2, 1), a)
        return [da, db]
    d = a.reshape(bs, pn, 1, m) - b.reshape(bs, 1, qn, m)
    if p == math.inf:       # torch's cdist: every tie gets the whole gradient
        g = c.dy.reshape(bs, pn, qn, 1) * _at_max(d, 3) * ops.sign(d)
    else:
        g = _norm_weight(d, c.y.reshape(bs, pn, qn, 1), c.dy.reshape(bs, pn, qn, 1), p)
    return [g.sum(axis=2), -g.sum(axis=1)]
