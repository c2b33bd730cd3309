"""Attention with masks, a causal rule and variable-length batches.

References: a per-row NumPy loop written here, torch's scaled_dot_product_attention for the
masks it supports, and, for variable lengths, the unmasked op run on each sequence alone.
"""

import math

import numpy as np
import pytest
import torch

import pypto
from pypto.errors import DtypeError, ShapeError

F = torch.nn.functional
sdpa = pypto.ops.scaled_dot_product_attention
RNG = np.random.default_rng(11)


def _qkv(B, H, S, L, D, E, dtype=np.float32):
    return (RNG.standard_normal((B, H, S, D)).astype(dtype),
            RNG.standard_normal((B, H, L, D)).astype(dtype),
            RNG.standard_normal((B, H, L, E)).astype(dtype))


def _rows(q, k, v, allow, bias=None):
    """out[b,h,s] = softmax over the allowed keys of q.k/sqrt(D) (+ bias) times v; 0 if none."""
    q, k, v = (x.astype(np.float64) for x in (q, k, v))
    B, H, S, D = q.shape
    out = np.zeros(q.shape[:3] + (v.shape[-1],))
    for b in range(B):
        for h in range(H):
            for s in range(S):
                keys = allow[b, h, s]
                if not keys.any():
                    continue
                sc = np.array([q[b, h, s] @ k[b, h, l] / math.sqrt(D) for l in range(k.shape[2])])
                if bias is not None:
                    sc = sc + bias[b, h, s]
                w = np.where(keys, np.exp(sc - sc[keys].max()), 0.0)
                out[b, h, s] = w @ v[b, h] / w.sum()
    return out


def _torch(q, k, v, **kw):
    return F.scaled_dot_product_attention(*map(torch.from_numpy, (q, k, v)), **kw).numpy()


@pytest.mark.parametrize("S,L", [(1, 1), (7, 9), (9, 7), (33, 40)])
def test_causal_matches_the_loop_and_torch(S, L):
    q, k, v = _qkv(2, 3, S, L, 8, 5)
    allow = np.broadcast_to(np.arange(L)[None, :] <= np.arange(S)[:, None], (2, 3, S, L))
    got = sdpa(q, k, v, is_causal=True)
    np.testing.assert_allclose(got, _rows(q, k, v, allow), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got, _torch(q, k, v, is_causal=True), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("mshape", [(2, 3, 6, 10), (2, 1, 6, 10), (1, 1, 1, 10), (6, 10),
                                    (2, 1, 1, 10)])
def test_a_bool_mask_broadcasts_like_torch(mshape):
    q, k, v = _qkv(2, 3, 6, 10, 4, 7)
    m = RNG.random(mshape) < 0.6
    m[..., 0] = True                        # every row attends a key (torch gives NaN otherwise)
    got = sdpa(q, k, v, attn_mask=m)
    np.testing.assert_allclose(got, _rows(q, k, v, np.broadcast_to(m, (2, 3, 6, 10))),
                               rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got, _torch(q, k, v, attn_mask=torch.from_numpy(m)), rtol=1e-5,
                               atol=1e-6)


def test_a_float_mask_is_added_to_the_scores_and_minus_inf_forbids():
    q, k, v = _qkv(1, 2, 5, 8, 4, 4)
    bias = RNG.standard_normal((1, 2, 5, 8)).astype(np.float32)
    bias[..., 3] = -np.inf
    got = sdpa(q, k, v, attn_mask=bias)
    allow = np.isfinite(bias)
    np.testing.assert_allclose(got, _rows(q, k, v, allow, np.where(allow, bias, 0)),
                               rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got, _torch(q, k, v, attn_mask=torch.from_numpy(bias)),
                               rtol=1e-5, atol=1e-6)


def test_a_row_that_may_attend_nothing_is_zero():
    q, k, v = _qkv(1, 1, 3, 4, 4, 2)
    m = np.ones((3, 4), bool)
    m[1] = False
    got = sdpa(q, k, v, attn_mask=m)
    assert np.all(got[0, 0, 1] == 0) and np.all(np.isfinite(got))
    np.testing.assert_allclose(got[0, 0, [0, 2]], _torch(q, k, v)[0, 0, [0, 2]], rtol=1e-5)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_variable_lengths_equal_each_sequence_run_alone(dtype):
    B, H, S, D, E = 4, 2, 11, 8, 6
    q, k, v = _qkv(B, H, S, S, D, E, dtype)
    lengths = np.array([11, 1, 6, 0])
    got = sdpa(q, k, v, lengths=lengths)
    for b, n in enumerate(lengths):
        if n:
            alone = sdpa(q[b:b + 1, :, :n], k[b:b + 1, :, :n], v[b:b + 1, :, :n])
            np.testing.assert_allclose(got[b:b + 1, :, :n], alone, rtol=1e-6, atol=1e-7)
        assert np.all(got[b, :, n:] == 0)        # padded query rows are not counted


def test_variable_lengths_with_causal_and_3d_inputs():
    B, S, D = 3, 9, 4
    q, k, v = (RNG.standard_normal((B, S, D)).astype(np.float32) for _ in range(3))
    lengths = np.array([9, 4, 7])
    got = sdpa(q, k, v, lengths=lengths, is_causal=True)
    for b, n in enumerate(lengths):
        alone = _torch(q[b:b + 1, :n], k[b:b + 1, :n], v[b:b + 1, :n], is_causal=True)
        np.testing.assert_allclose(got[b:b + 1, :n], alone, rtol=1e-5, atol=1e-6)


def test_lengths_with_keys_and_values_shared_by_the_heads():
    # k, v [B, 1, L, D] broadcast over q's H heads: the lengths are still one per batch entry
    # (they were checked against a batch of 1, and one length was applied to every entry)
    B, H, S, D = 2, 3, 5, 4
    q = RNG.standard_normal((B, H, S, D)).astype(np.float32)
    k, v = (RNG.standard_normal((B, 1, S, D)).astype(np.float32) for _ in range(2))
    lengths = np.array([3, 5])
    got = sdpa(q, k, v, lengths=lengths, attn_mask=np.tril(np.ones((S, S), bool)))
    for b, n in enumerate(lengths):
        kb, vb = (np.repeat(x[b:b + 1, :, :n], H, axis=1) for x in (k, v))
        alone = _torch(q[b:b + 1, :, :n], kb, vb, is_causal=True)
        np.testing.assert_allclose(got[b:b + 1, :, :n], alone, rtol=1e-5, atol=1e-6)
        assert np.all(got[b, :, n:] == 0)
    with pytest.raises(ShapeError, match=r"'lengths' must hold one length per batch entry "
                                         r"\(shape \(2,\)\)"):
        sdpa(q, k, v, lengths=np.array([3]))


def test_separate_key_lengths_for_cross_attention():
    q, k, v = _qkv(2, 1, 5, 8, 4, 3)
    got = sdpa(q, k, v, kv_lengths=np.array([3, 8]))
    allow = np.zeros((2, 1, 5, 8), bool)
    allow[0, ..., :3] = True
    allow[1] = True
    np.testing.assert_allclose(got, _rows(q, k, v, allow), rtol=1e-5, atol=1e-6)


def test_mask_errors_name_what_is_wrong():
    q, k, v = _qkv(2, 1, 5, 8, 4, 3)
    with pytest.raises(ShapeError, match=r"attn_mask of shape \(5, 7\).*\(2, 1, 5, 8\)"):
        sdpa(q, k, v, attn_mask=np.ones((5, 7), bool))
    with pytest.raises(DtypeError, match="attn_mask must be bool.*int64"):
        sdpa(q, k, v, attn_mask=np.ones((5, 8), np.int64))
    with pytest.raises(ShapeError, match=r"'lengths' must hold one length per batch entry"):
        sdpa(q, k, v, lengths=np.array([1, 2, 3]))
    with pytest.raises(ShapeError, match=r"'lengths' must lie in \[0, 5\]"):
        sdpa(q, k, v, lengths=np.array([1, 6]))
    with pytest.raises(DtypeError, match="'kv_lengths' must be integers"):
        sdpa(q, k, v, kv_lengths=np.array([1.0, 2.0]))


def test_the_kernel_form_matches_its_reference_at_the_example_shape():
    op = pypto.get_op("masked_attention")
    from pypto.infra.inputs import make_inputs

    for sig in op.dtypes:
        if "float16" in sig:
            continue
        arrays = make_inputs(op, sig, op.example, op.resolve_params({"is_causal": True}))
        got = op.kernel(*arrays, is_causal=True)
        q, k, v, mask, q_len, kv_len = arrays
        full = np.broadcast_to(mask, (2, 2, 12, 10))
        allow = np.zeros((2, 2, 12, 10), bool)
        for b in range(2):
            allow[b, :, :q_len[b], :kv_len[b]] = True
        allow &= np.arange(10)[None, :] <= np.arange(12)[:, None]
        if full.dtype == np.bool_:
            allow &= full
            want = _rows(q, k, v, allow)
        else:
            allow &= np.isfinite(full)
            want = _rows(q, k, v, allow, np.where(allow, full, 0))
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
