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

from ..errors import DtypeError, ParamError, ShapeError
from ..runtime import as_array
from ._consts import lit
from ._op import Param, op
from .elementwise import kernel_exp


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


def _dense_to(x: np.ndarray, shape: tuple) -> np.ndarray:
    """``x`` broadcast to ``shape`` as an array a kernel reads in place: ``x`` itself when it has
    that shape already (NumPy's broadcast view of it would be read-only, and copied), else a
    dense copy of the broadcast."""
    shape = tuple(shape)
    if tuple(x.shape) == shape:
        return x
    return _writable(np.broadcast_to(x, shape))


def _stack(x: np.ndarray, batch: tuple) -> np.ndarray:
    """``x`` [..., M, N] with its leading dims broadcast to ``batch`` (see :func:`_dense_to`)."""
    return _dense_to(x, tuple(batch) + tuple(x.shape[-2:]))


def _sdpa_frontend(q, k, v, scale=None, *, attn_mask=None, is_causal=False, lengths=None,
                   kv_lengths=None):
    """Attention over arrays [..., S, D], [..., L, D], [..., L, E] whose leading dims broadcast.

    ``attn_mask`` (bool: True attends; or float: added to the scaled scores) broadcasts to
    [..., S, L] as in torch; ``is_causal`` lets query s attend keys l <= s (give one of
    ``attn_mask`` and ``is_causal``, as torch requires: for both, fold the causal mask into
    ``attn_mask``, e.g. ``attn_mask & np.tril(np.ones((S, L), bool))``); ``lengths`` [B] (and
    ``kv_lengths`` [B], default ``lengths``) give each batch entry's valid queries and keys
    (inputs [B, H, S, D] or [B, S, D]): padded keys are not attended, padded query rows are 0.
    A query row that may attend no key gives 0 (torch gives NaN there).
    """
    name = "scaled_dot_product_attention"
    q = as_array(q, name, "q")
    k = as_array(k, name, "k")
    v = as_array(v, name, "v")
    for arg, x, dims in (("q", q, "S, D"), ("k", k, "L, D"), ("v", v, "L, E")):
        if x.ndim < 2:
            raise ShapeError(f"{name}: argument '{arg}' must have at least 2 dimensions "
                             f"[..., {dims}], got shape {x.shape}")
    kw = {} if scale is None else {"scale": scale}
    if attn_mask is not None and is_causal:
        raise ParamError(f"{name}: give attn_mask or is_causal=True, not both (torch refuses the "
                         f"pair); to apply both, fold the causal mask into attn_mask: a bool mask "
                         f"& np.tril(np.ones((S, L), bool)), or a float mask + np.where(np.tril("
                         f"np.ones((S, L), bool)), 0.0, -np.inf)")
    if attn_mask is not None or is_causal or lengths is not None or kv_lengths is not None:
        return _masked_frontend(q, k, v, attn_mask, bool(is_causal), lengths, kv_lengths, kw)
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
        return _stack(x, batch).reshape((1, nb) + x.shape[-2:])

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
    t, acc_t, (e, l, s, h, b), factor, scores = _scores(q, k, dims, scale)
    rmax = hl.RDom([hl.Range(0, dims.L)], "lm")
    # Row maximum of the scaled scores (any sign of scale).
    rowmax = hl.Func("rowmax")
    rowmax[s, h, b] = hl.cast(acc_t, -math.inf)
    rowmax[s, h, b] = hl.max(rowmax[s, h, b], scores[rmax.x, s, h, b] * factor)
    # Unnormalized probabilities, their row sums, and the weighted values.
    p = hl.Func("p")
    p[l, s, h, b] = kernel_exp(scores[l, s, h, b] * factor - rowmax[s, h, b])
    denom, num = _weighted(p, v, acc_t, (e, l, s, h, b), dims)
    out = hl.Func("out")
    out[e, s, h, b] = hl.cast(t, num[e, s, h, b] / denom[s, h, b])
    return out


def _scores(q, k, dims, scale):
    """What both attention ops start from: the output type, the accumulation type, the Vars
    (e, l, s, h, b), the scale factor and the raw scores q . k for every (query s, key l)."""
    t = q.type()
    acc_t = hl.Float(32) if t.bits() == 16 else t
    e, l, s, h, b = (hl.Var(n) for n in ("e", "l", "s", "h", "b"))
    rd = hl.RDom([hl.Range(0, dims.D)], "dd")
    if scale is None:
        factor = hl.cast(acc_t, 1.0) / hl.sqrt(hl.cast(acc_t, dims.D))
    else:
        # Through f64: a bare Python float becomes a float32 constant in Halide, which
        # lost float64 precision (0.7 gave results 1.8e-6 off in relative terms).
        factor = lit(acc_t, scale)
    scores = hl.Func("scores")
    scores[l, s, h, b] = hl.cast(acc_t, 0)
    scores[l, s, h, b] += hl.cast(acc_t, q[rd.x, s, h, b]) * hl.cast(acc_t, k[rd.x, l, h, b])
    return t, acc_t, (e, l, s, h, b), factor, scores


def _weighted(p, v, acc_t, vs, dims):
    """(row sums of the unnormalized probabilities ``p``, their product with ``v``)."""
    e, l, s, h, b = vs
    rsum = hl.RDom([hl.Range(0, dims.L)], "ls")
    rv = hl.RDom([hl.Range(0, dims.L)], "lv")
    denom = hl.Func("denom")
    denom[s, h, b] = hl.cast(acc_t, 0)
    denom[s, h, b] += p[rsum.x, s, h, b]
    num = hl.Func("num")
    num[e, s, h, b] = hl.cast(acc_t, 0)
    num[e, s, h, b] += p[rv.x, s, h, b] * hl.cast(acc_t, v[e, rv.x, h, b])
    return denom, num


# -- masks, causal attention and variable-length batches -------------------------------------

def _masked_ref(q, k, v, mask, q_len, kv_len, scale=None, is_causal=False):
    """NumPy reference of the masked kernel (canonical form), row by row."""
    q, k, v, mask = (np.asarray(x) for x in (q, k, v, mask))
    half = q.dtype == np.float16
    work = np.float32 if half else q.dtype.type
    q, k, v = (x.astype(work) for x in (q, k, v))
    B, H, S, Dd = q.shape
    L, E = k.shape[2], v.shape[3]
    factor = (1.0 / math.sqrt(Dd)) if scale is None else scale
    out = np.zeros((B, H, S, E), work)
    full = np.broadcast_to(mask, (B, H, S, L))
    for b in range(B):
        for h in range(H):
            for s in range(min(int(q_len[b]), S)):
                keys = np.arange(L) < int(kv_len[b])
                if is_causal:
                    keys &= np.arange(L) <= s
                row = (k[b, h] @ q[b, h, s]) * work(factor)
                if full.dtype == np.bool_:
                    keys &= full[b, h, s]
                else:
                    row = row + full[b, h, s].astype(work)
                keys &= row > -np.inf
                if not keys.any():
                    continue
                z = np.where(keys, row - row[keys].max(), -np.inf)
                w = np.exp(z)
                out[b, h, s] = (w / w.sum()) @ v[b, h]
    return out.astype(np.float16) if half else out


def _lengths(name, arg, x, B, limit):
    a = np.asarray(x)
    if a.ndim != 1 or a.shape[0] != B:
        raise ShapeError(f"{name}: '{arg}' must hold one length per batch entry (shape ({B},)), "
                         f"got shape {a.shape}")
    if a.dtype.kind not in "iu":
        raise DtypeError(f"{name}: '{arg}' must be integers, got {a.dtype.name}")
    if (a < 0).any() or (a > limit).any():
        raise ShapeError(f"{name}: '{arg}' must lie in [0, {limit}], got {a.tolist()}")
    return a.astype(np.int32)


def _masked_frontend(q, k, v, attn_mask, is_causal, lengths, kv_lengths, kw):
    name = "scaled_dot_product_attention"
    squeeze = False
    if lengths is not None or kv_lengths is not None:
        if not (q.ndim == k.ndim == v.ndim and q.ndim in (3, 4)):
            raise ShapeError(f"{name}: 'lengths' needs inputs [B, H, S, D] or [B, S, D], got "
                             f"q {q.shape}, k {k.shape}, v {v.shape}")
        if q.ndim == 3:
            q, k, v, squeeze = q[:, None], k[:, None], v[:, None], True
            if attn_mask is not None and np.ndim(attn_mask) == 3:
                attn_mask = np.asarray(attn_mask)[:, None]
    batch = None
    if q.ndim == k.ndim == v.ndim == 4 and q.shape[:2] == k.shape[:2] == v.shape[:2]:
        cq, ck, cv = q, k, v
    else:
        if q.shape[-1] != k.shape[-1] or k.shape[-2] != v.shape[-2]:
            raise ShapeError(f"{name}: q {q.shape}, k {k.shape}, v {v.shape} must agree on D "
                             f"(last axis of q and k) and L (axis -2 of k and v)")
        try:
            batch = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
        except ValueError:
            raise ShapeError(f"{name}: the leading dims of 'q' {q.shape[:-2]}, 'k' "
                             f"{k.shape[:-2]} and 'v' {v.shape[:-2]} cannot be broadcast "
                             f"together") from None
        # [first leading dim, the rest]: with lengths the first is B, one length per entry (a
        # single row of all entries gave every entry the first length)
        lead = batch[0] if batch else 1
        rest = int(np.prod(batch[1:], dtype=np.int64))
        cq, ck, cv = (_stack(x, batch).reshape((lead, rest) + x.shape[-2:]) for x in (q, k, v))
    B, H, S, L = cq.shape[0], cq.shape[1], cq.shape[2], ck.shape[2]
    if attn_mask is None:
        mask = np.ones((1, 1, 1, 1), np.bool_)
    else:
        mask = as_array(attn_mask, name, "attn_mask")
        if mask.dtype != np.bool_ and mask.dtype != cq.dtype:
            raise DtypeError(f"{name}: attn_mask must be bool (True attends) or {cq.dtype.name} "
                             f"like q (added to the scores), got {mask.dtype.name}")
        want = (batch if batch is not None else q.shape[:-2]) + (S, L)
        try:
            full = np.broadcast_shapes(mask.shape, want)
        except ValueError:
            full = None
        if full != tuple(want):
            raise ShapeError(f"{name}: attn_mask of shape {mask.shape} does not broadcast to "
                             f"the scores' shape {tuple(want)} ([..., S, L])")
        if batch is not None:
            mask = _dense_to(mask, want).reshape((B, H, S, L))
        else:
            mask = mask.reshape((1,) * (4 - mask.ndim) + mask.shape)
    if lengths is None and kv_lengths is None:
        q_len = np.full(B, S, np.int32)
        kv_len = np.full(B, L, np.int32)
    else:
        q_len = (_lengths(name, "lengths", lengths, B, S) if lengths is not None
                 else np.full(B, S, np.int32))
        kv_len = (_lengths(name, "kv_lengths", kv_lengths, B, L) if kv_lengths is not None
                  else _lengths(name, "lengths", lengths, B, L))
    out = masked_attention.kernel(cq, ck, cv, mask, q_len, kv_len, is_causal=is_causal, **kw)
    if squeeze:
        return out[:, 0]
    if batch is not None:
        return out.reshape(batch + out.shape[-2:])
    return out


def _masked_public_ref(q, k, v, mask, q_len, kv_len, scale=None, is_causal=False):
    return _masked_ref(q, k, v, mask, q_len, kv_len, scale, is_causal)


_MASK_SIGS = [(t, t, t, m, "int32", "int32") for t in ("float32", "float64", "float16")
              for m in ("bool", t)]


def _masked_inputs(dims, dtypes, params, rng):
    t = dtypes[0]
    q, k, v = (rng.uniform(-1, 1, size=[dims[d] for d in spec]).astype(t)
               for spec in (("B", "H", "S", "D"), ("B", "H", "L", "D"), ("B", "H", "L", "E")))
    mshape = [dims[d] for d in ("MB", "MH", "MS", "ML")]
    if dtypes[3] == "bool":
        mask = rng.random(mshape) < 0.8
    else:
        mask = np.where(rng.random(mshape) < 0.8, 0.0, -np.inf).astype(dtypes[3])
    q_len = rng.integers(0, dims["S"] + 1, size=dims["B"]).astype(np.int32)
    kv_len = rng.integers(1, dims["L"] + 1, size=dims["B"]).astype(np.int32)
    return [q, k, v, mask, q_len, kv_len]


def _masked_validate(d, p):
    for m, full in (("MB", "B"), ("MH", "H"), ("MS", "S"), ("ML", "L")):
        if d[m] not in (1, d[full]):
            raise ShapeError(f"masked_attention: mask dim {m} is {d[m]}; it must be 1 "
                             f"(broadcast) or {full}={d[full]}")


@op(category="nn",
    inputs={"q": "B H S D", "k": "B H L D", "v": "B H L E", "mask": "MB MH MS ML",
            "q_len": "B", "kv_len": "B"},
    output="B H S E", dtypes=_MASK_SIGS,
    params=[Param("scale", float, default=None,
                  doc="multiplies q @ k^T before the softmax; default 1/sqrt(D)"),
            Param("is_causal", bool, False, doc="query s attends keys l <= s only")],
    reference=_masked_public_ref, kernel_reference=_masked_ref, validate=_masked_validate,
    make_inputs=_masked_inputs,
    example={"B": 2, "H": 2, "S": 12, "D": 8, "L": 10, "E": 4, "MB": 2, "MH": 1, "MS": 12,
             "ML": 10})
def masked_attention(q, k, v, mask, q_len, kv_len, *, scale=None, is_causal=False, dims):
    """Attention with a mask, a causal rule and per-batch lengths: query s of batch b attends
    key l when ``l < kv_len[b]``, ``s < q_len[b]``, ``l <= s`` (causal) and the mask allows it
    (bool: True; float: added to the scaled score, -inf forbids). Rows attending no key are 0.
    ``mask`` dims are 1 (broadcast) or the full B, H, S, L. The public form is
    ``scaled_dot_product_attention(..., attn_mask=, is_causal=, lengths=, kv_lengths=)``."""
    t, acc_t, (e, l, s, h, b), factor, scores = _scores(q, k, dims, scale)
    rmax = hl.RDom([hl.Range(0, dims.L)], "lm")

    def pick(dim, var):
        return hl.select(dim == 1, 0, var)

    m = mask[pick(dims.ML, l), pick(dims.MS, s), pick(dims.MH, h), pick(dims.MB, b)]
    boolean = mask.type().is_bool()
    allowed = hl.Func("allowed")
    ok = (l < kv_len[b]) & (s < q_len[b])
    if is_causal:
        ok = ok & (l <= s)
    if boolean:
        ok = ok & m
    allowed[l, s, h, b] = ok
    scaled = hl.Func("scaled")
    scaled[l, s, h, b] = scores[l, s, h, b] * factor + (hl.cast(acc_t, 0) if boolean
                                                        else hl.cast(acc_t, m))
    neg_inf = hl.cast(acc_t, -math.inf)
    rowmax = hl.Func("rowmax")
    rowmax[s, h, b] = neg_inf
    rowmax[s, h, b] = hl.max(rowmax[s, h, b],
                             hl.select(allowed[rmax.x, s, h, b], scaled[rmax.x, s, h, b],
                                       neg_inf))
    # A row attending nothing has maximum -inf: shift by 0 so every exponential is 0, not NaN.
    shift = hl.select(rowmax[s, h, b] == neg_inf, hl.cast(acc_t, 0), rowmax[s, h, b])
    p = hl.Func("p")
    p[l, s, h, b] = hl.select(allowed[l, s, h, b], kernel_exp(scaled[l, s, h, b] - shift),
                              hl.cast(acc_t, 0))
    denom, num = _weighted(p, v, acc_t, (e, l, s, h, b), dims)
    out = hl.Func("out")
    out[e, s, h, b] = hl.cast(t, hl.select(denom[s, h, b] > 0, num[e, s, h, b] / denom[s, h, b],
                                           hl.cast(acc_t, 0)))
    return out


# These frontends depend only on their arguments' dtypes, shapes and parameters, never on array
# values: a repeated call may skip them (runtime.call_public records what they did once).
for _fe in (_sdpa_frontend,):
    _fe.shape_only = True
