"""Rules of the recurrent cells (gru_cell, rnn_cell), rotary_embedding and masked_attention.

* gru_cell, rnn_cell: the gates are recomputed (two matmuls on the stacked gate weights, which
  the kernels see as [G, HID, IN]), then the chain rule; the weight gradients are the products of
  the gate gradients with x and h, as lstm_cell's rule does.
* rotary_embedding: out = x cos + rot(x) sin with rot(x) = (-x2, x1) over the two halves, so
  dx = dy cos + rot^T(dy sin) with rot^T(u) = (u2, -u1); cos and sin get dy x and dy rot(x),
  summed over the heads they broadcast over.
* masked_attention: scaled_dot_product_attention's rule on the masked weights: the softmax is
  recomputed over the allowed keys (lengths, causal rule, boolean mask; rows attending nothing
  are 0 and send nothing back). A float mask is added to the scores, so it gets the score
  gradient (summed over the axes it broadcasts over), as in PyTorch; the lengths and a boolean
  mask are constants. float16 is computed in float32, as the forward does.
"""

from __future__ import annotations

import math

import numpy as np

from ... import ops
from ...frontend import tensor as T
from .. import shapes
from . import Constant, rule
from .nn import _stack_columns

_MASKS = Constant("lengths and boolean masks are constants to the gradient")


def _flat_weights(c):
    x, h, w_ih, w_hh, b_ih, b_hh = c.inputs
    g, hid = w_ih.shape[:2]
    return (x, h, w_ih.reshape(g * hid, x.shape[1]), w_hh.reshape(g * hid, h.shape[1]),
            b_ih.reshape(g * hid), b_hh.reshape(g * hid))


def _cell_weight_grads(c, d_ih, d_hh):
    """(dx, dh from the gates, dw_ih, dw_hh, db_ih, db_hh) from the gate gradients."""
    x, h, w_ih, w_hh, b_ih, b_hh = c.inputs
    _, _, wi, wh, _, _ = _flat_weights(c)
    mm = ops.matmul.kernel
    return (mm(d_ih, wi), mm(d_hh, wh), mm(d_ih.T, x).reshape(w_ih.shape),
            mm(d_hh.T, h).reshape(w_hh.shape), d_ih.sum(axis=0).reshape(b_ih.shape),
            d_hh.sum(axis=0).reshape(b_hh.shape))


@rule("rnn_cell")
def _rnn_cell(c):
    """y = act(x w_ih^T + b_ih + h w_hh^T + b_hh): the pre-activation's gradient from y."""
    y, dy = c.y, c.dy
    if c.params["nonlinearity"] == "tanh":
        d = dy * (1.0 - y * y)
    else:
        d = ops.where(y > 0.0, dy, 0.0)
    dx, dh, dwi, dwh, dbi, dbh = _cell_weight_grads(c, d, d)
    return [dx, dh, dwi, dwh, dbi, dbh]


@rule("gru_cell")
def _gru_cell(c):
    """r, z sigmoids, n = tanh(i_n + r h_n), y = (1 - z) n + z h."""
    x, h, wi, wh, bi, bh = _flat_weights(c)
    dy = c.dy
    hid = h.shape[1]
    gi = ops.linear.kernel(x, wi, bi)
    gh = ops.linear.kernel(h, wh, bh)
    r = ops.sigmoid(gi[:, 0:hid] + gh[:, 0:hid])
    z = ops.sigmoid(gi[:, hid:2 * hid] + gh[:, hid:2 * hid])
    hn = gh[:, 2 * hid:]
    n = ops.tanh(gi[:, 2 * hid:] + r * hn)
    dn = dy * (1.0 - z) * (1.0 - n * n)           # the gradient of n's pre-activation
    dr = dn * hn * r * (1.0 - r)
    dz = dy * (h - n) * z * (1.0 - z)
    d_ih = _stack_columns([dr, dz, dn])
    d_hh = _stack_columns([dr, dz, dn * r])
    dx, dh, dwi, dwh, dbi, dbh = _cell_weight_grads(c, d_ih, d_hh)
    return [dx, dh + dy * z, dwi, dwh, dbi, dbh]


# -- rotary_embedding ------------------------------------------------------------------------------

@rule("rotary_embedding")
def _rotary(c):
    """Kernel shapes: x [B, H, S, 2, E]; cos, sin [B, S, 2, E] (broadcast over H)."""
    x, cos, sin = c.inputs
    dy = c.dy
    b, _, s, two, e = x.shape
    cos_b, sin_b = cos.reshape(b, 1, s, two, e), sin.reshape(b, 1, s, two, e)
    def signed(t, first, second):
        """``t`` with its halves swapped (axis 3 reversed), times (first, second)."""
        sign = T.as_tensor(np.array([[first], [second]], dtype=t.dtype))
        return shapes.flip_axes(t, (3,)) * sign

    out = [None, None, None]
    if c.wants(0):
        out[0] = dy * cos_b + signed(dy * sin_b, 1.0, -1.0)
    if c.wants(1):
        out[1] = (dy * x).sum(axis=1)
    if c.wants(2):
        out[2] = (dy * signed(x, -1.0, 1.0)).sum(axis=1)
    return out


# -- masked_attention ------------------------------------------------------------------------------

@rule("masked_attention")
def _masked_attention(c):
    q, k, v, mask, q_len, kv_len = c.inputs
    b, hh, s, d = q.shape
    l, e = k.shape[2], v.shape[3]
    dt = q.dtype
    work = np.float32 if dt == np.float16 else dt
    q, k, v, do = (t.astype(work) if t.dtype != work else t for t in (q, k, v, c.dy))
    boolean = mask.dtype == np.bool_
    scale = c.params.get("scale")
    scale = 1.0 / math.sqrt(d) if scale is None else scale
    full = (b, hh, s, l)
    allowed = ((T.as_tensor(np.arange(l, dtype=np.int32)).reshape(1, 1, 1, l)
                < kv_len.reshape(b, 1, 1, 1))
               & (T.as_tensor(np.arange(s, dtype=np.int32)).reshape(1, 1, s, 1)
                  < q_len.reshape(b, 1, 1, 1))).broadcast_to(full)
    if c.params.get("is_causal"):
        allowed = allowed & T.as_tensor(np.tril(np.ones((s, l), bool)))
    if boolean:
        allowed = allowed & mask.broadcast_to(full)
    bh = b * hh
    bmm = ops.batch_matmul.kernel
    q2, k2, v2 = q.reshape(bh, s, d), k.reshape(bh, l, d), v.reshape(bh, l, e)
    scores = (bmm(q2, k2.transpose(0, 2, 1)) * scale).reshape(full)
    if not boolean:
        scores = scores + mask.astype(work).broadcast_to(full)
    neg_inf = shapes.scalar(-math.inf, work)
    rowmax = ops.where(allowed, scores, neg_inf).max(axis=3, keepdims=True)
    shift = ops.where(rowmax == neg_inf, 0.0, rowmax)
    p = ops.where(allowed, ops.exp(scores - shift), 0.0)
    denom = p.sum(axis=3, keepdims=True)
    p = (p / ops.where(denom > 0.0, denom, 1.0)).reshape(bh, s, l)
    do = do.reshape(bh, s, e)
    dv = bmm(p.transpose(0, 2, 1), do)
    dp = bmm(do, v2.transpose(0, 2, 1))
    ds = p * (dp - (dp * p).sum(axis=2, keepdims=True))       # d scores (after scaling)
    dq = bmm(ds * scale, k2)
    dk = bmm((ds * scale).transpose(0, 2, 1), q2)
    out = [dq.reshape(q.shape), dk.reshape(k.shape), dv.reshape(v.shape), _MASKS,
           _MASKS, _MASKS]
    if not boolean and c.wants(3):
        dm = ds.reshape(full)
        axes = tuple(i for i in range(4) if mask.shape[i] == 1 and full[i] != 1)
        if axes:
            dm = dm.sum(axis=axes, keepdims=True)
        out[3] = dm
    return out
