"""Scaled dot-product attention, as in ``torch.nn.functional.scaled_dot_product_attention``.

``out = softmax(q @ k^T * scale) @ v`` over the last axis, with ``q`` [B, H, S, D],
``k`` [B, H, L, D] and ``v`` [B, H, L, E]; ``scale`` defaults to ``1 / sqrt(D)``. The softmax
subtracts each row's maximum before exponentiating, so large scores do not overflow. float16
inputs are computed in float32 and the result is rounded to float16. Leading dims other than
[B, H] (none, or more) broadcast against each other like batch dims.
"""

from __future__ import annotations

import math

import halide as hl
import numpy as np

from ..errors import ShapeError
from ..runtime import as_array
from ._op import Param, op


def _sdpa_ref(q, k, v, scale=None):
    q, k, v = (np.asarray(x) for x in (q, k, v))
    half = q.dtype == np.float16
    if half:
        q, k, v = (x.astype(np.float32) for x in (q, k, v))
    if scale is None:
        scale = 1.0 / math.sqrt(q.shape[-1])
    s = np.matmul(q, np.swapaxes(k, -1, -2)) * np.asarray(scale, dtype=q.dtype)
    s = s - s.max(axis=-1, keepdims=True)
    p = np.exp(s)
    p = p / p.sum(axis=-1, keepdims=True)
    out = np.matmul(p, v)
    return out.astype(np.float16) if half else out


def _writable(a: np.ndarray) -> np.ndarray:
    return a if a.flags.writeable else np.array(a, order="C")


def _sdpa_frontend(q, k, v, scale=None):
    """Attention over arrays [..., S, D], [..., L, D], [..., L, E] whose leading dims broadcast."""
    name = "scaled_dot_product_attention"
    q = as_array(q, name, "q")
    k = as_array(k, name, "k")
    v = as_array(v, name, "v")
    for arg, x, dims in (("q", q, "S, D"), ("k", k, "L, D"), ("v", v, "L, E")):
        if x.ndim < 2:
            raise ShapeError(f"{name}: argument '{arg}' must have at least 2 dimensions "
                             f"[..., {dims}], got shape {x.shape}")
    kw = {} if scale is None else {"scale": scale}
    if q.ndim == k.ndim == v.ndim == 4 and q.shape[:2] == k.shape[:2] == v.shape[:2]:
        return scaled_dot_product_attention.kernel(q, k, v, **kw)
    if q.shape[-1] != k.shape[-1]:
        raise ShapeError(f"{name}: dim D is {q.shape[-1]} in 'q' (its last axis) but "
                         f"{k.shape[-1]} in 'k' (its last axis); shapes must agree")
    if k.shape[-2] != v.shape[-2]:
        raise ShapeError(f"{name}: dim L is {k.shape[-2]} in 'k' (axis -2) but {v.shape[-2]} in "
                         f"'v' (axis -2); shapes must agree")
    try:
        batch = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    except ValueError:
        raise ShapeError(f"{name}: the leading dims of 'q' {q.shape[:-2]}, 'k' {k.shape[:-2]} "
                         f"and 'v' {v.shape[:-2]} cannot be broadcast together") from None
    nb = int(np.prod(batch, dtype=np.int64))

    def canon(x):
        x = np.broadcast_to(x, batch + x.shape[-2:])
        return _writable(x).reshape((1, nb) + x.shape[-2:])

    out = scaled_dot_product_attention.kernel(canon(q), canon(k), canon(v), **kw)
    return out.reshape(batch + out.shape[-2:])


@op(category="nn", inputs={"q": "B H S D", "k": "B H L D", "v": "B H L E"}, output="B H S E",
    dtypes=["float32", "float64", "float16"],
    params=[Param("scale", float, default=None,
                  doc="multiplies q @ k^T before the softmax; default 1/sqrt(D)")],
    reference=_sdpa_ref, frontend=_sdpa_frontend,
    example={"B": 1, "H": 2, "S": 40, "D": 16, "L": 24, "E": 8})
def scaled_dot_product_attention(q, k, v, *, scale=None, dims):
    """``softmax(q @ k^T * scale) @ v`` per batch entry and head: q [B, H, S, D], k [B, H, L, D],
    v [B, H, L, E] -> [B, H, S, E]; ``scale`` defaults to 1/sqrt(D)."""
    t = q.type()
    acc_t = hl.Float(32) if t.bits() == 16 else t
    e, l, s, h, b = (hl.Var(n) for n in ("e", "l", "s", "h", "b"))
    rd = hl.RDom([hl.Range(0, dims.D)], "dd")
    rmax = hl.RDom([hl.Range(0, dims.L)], "lm")
    rsum = hl.RDom([hl.Range(0, dims.L)], "ls")
    rv = hl.RDom([hl.Range(0, dims.L)], "lv")
    if scale is None:
        factor = hl.cast(acc_t, 1.0) / hl.sqrt(hl.cast(acc_t, dims.D))
    else:
        # Through f64: a bare Python float becomes a float32 constant in Halide, which
        # lost float64 precision (0.7 gave results 1.8e-6 off in relative terms).
        factor = hl.cast(acc_t, hl.f64(scale))

    # Raw scores q . k for every (query s, key l).
    scores = hl.Func("scores")
    scores[l, s, h, b] = hl.cast(acc_t, 0)
    scores[l, s, h, b] += hl.cast(acc_t, q[rd.x, s, h, b]) * hl.cast(acc_t, k[rd.x, l, h, b])
    # Row maximum of the scaled scores (any sign of scale).
    rowmax = hl.Func("rowmax")
    rowmax[s, h, b] = hl.cast(acc_t, -math.inf)
    rowmax[s, h, b] = hl.max(rowmax[s, h, b], scores[rmax.x, s, h, b] * factor)
    # Unnormalized probabilities, their row sums, and the weighted values.
    p = hl.Func("p")
    p[l, s, h, b] = hl.exp(scores[l, s, h, b] * factor - rowmax[s, h, b])
    denom = hl.Func("denom")
    denom[s, h, b] = hl.cast(acc_t, 0)
    denom[s, h, b] += p[rsum.x, s, h, b]
    num = hl.Func("num")
    num[e, s, h, b] = hl.cast(acc_t, 0)
    num[e, s, h, b] += p[rv.x, s, h, b] * hl.cast(acc_t, v[e, rv.x, h, b])
    out = hl.Func("out")
    out[e, s, h, b] = hl.cast(t, num[e, s, h, b] / denom[s, h, b])
    return out


# These frontends depend only on their arguments' dtypes, shapes and parameters, never on array
# values: a repeated call may skip them (runtime.call_public records what they did once).
for _fe in (_sdpa_frontend,):
    _fe.shape_only = True
