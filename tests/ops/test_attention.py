"""scaled_dot_product_attention against a float64 NumPy computation."""

from __future__ import annotations

import math

import numpy as np
import pytest

import pypto.ops as P
from helpers import ODD_SIZES, assert_close, rand
from pypto.compiler import targets
from pypto.compiler.lower import build
from pypto.errors import DtypeError, ParamError, ShapeError
from pypto.schedule.defaults import default_schedule

sdpa = P.scaled_dot_product_attention


def want(q, k, v, scale=None):
    """Attention in float64 (with its own max-shifted softmax), rounded to q's dtype."""
    q64, k64, v64 = (np.asarray(x, np.float64) for x in (q, k, v))
    if scale is None:
        scale = 1.0 / math.sqrt(q.shape[-1])
    s = np.einsum("...sd,...ld->...sl", q64, k64) * scale
    s -= s.max(axis=-1, keepdims=True)
    p = np.exp(s)
    p /= p.sum(axis=-1, keepdims=True)
    return np.einsum("...sl,...le->...se", p, v64).astype(q.dtype)


def qkv(b, h, s, l, d, e, dtype="float32", seed=0):
    return (rand((b, h, s, d), dtype, seed), rand((b, h, l, d), dtype, seed + 1),
            rand((b, h, l, e), dtype, seed + 2))


# -- values ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("shape", [
    (1, 2, 40, 24, 16, 8),      # S != L, D != E
    (2, 3, 7, 5, 3, 9),         # nothing a multiple of a vector
    (1, 1, 1, 1, 1, 1),
    (1, 2, 127, 33, 16, 16),
    (1, 1, 3, 1000, 7, 1),      # long keys, one value column
])
def test_sdpa_shapes(shape):
    q, k, v = qkv(*shape, seed=sum(shape))
    got = sdpa(q, k, v)
    assert got.shape == shape[:3] + (shape[5],)
    assert got.dtype == np.float32
    assert_close(got, want(q, k, v), err_msg=str(shape))


@pytest.mark.parametrize("shape,dtype", [
    ((1, 2, 127, 129, 17, 31), "float32"),   # blocked schedule, partial blocks everywhere
    ((1, 2, 127, 129, 17, 31), "float16"),
    ((1, 2, 5, 1000, 64, 64), "float32"),    # fewer queries than a vector
    ((2, 2, 300, 40, 30, 3), "float32"),     # fewer value columns than a vector
])
def test_sdpa_larger_shapes(shape, dtype):
    q, k, v = qkv(*shape, dtype=dtype, seed=3)
    got = sdpa(q, k, v)
    assert got.dtype == np.dtype(dtype)
    assert_close(got, want(q, k, v), err_msg=str(shape))


def test_sdpa_odd_query_and_key_counts():
    # One kernel shape class per size; each odd size as the query count and as the key count.
    for n in ODD_SIZES[:4]:
        q, k, v = qkv(1, 1, n, 5, 8, 8, seed=n)
        assert_close(sdpa(q, k, v), want(q, k, v), err_msg=f"S={n}")
    q, k, v = qkv(1, 1, 6, 127, 8, 8, seed=9)
    assert_close(sdpa(q, k, v), want(q, k, v))


def test_sdpa_float64_and_float16():
    q, k, v = qkv(1, 2, 9, 11, 8, 5, "float64", seed=3)
    got = sdpa(q, k, v)
    assert got.dtype == np.float64
    assert_close(got, want(q, k, v))
    q, k, v = qkv(1, 2, 9, 11, 8, 5, "float16", seed=4)
    got = sdpa(q, k, v)
    assert got.dtype == np.float16
    assert_close(got, want(q, k, v))


def test_sdpa_scale_param():
    q, k, v = qkv(1, 2, 9, 11, 8, 5, seed=5)
    for scale in (-1.5, 0.0):
        assert_close(sdpa(q, k, v, scale=scale), want(q, k, v, scale), err_msg=f"scale={scale}")
    # Zero scale: every key weighs the same, so each output row is v's column mean.
    np.testing.assert_allclose(sdpa(q, k, v, scale=0.0)[0, 0, 3], v[0, 0].mean(axis=0),
                               rtol=1e-5, atol=1e-6)


def test_sdpa_large_scores_are_stable():
    # Scores near 1e4: exponentiating them without subtracting the row maximum overflows.
    q, k, v = qkv(1, 2, 9, 11, 8, 5, seed=6)
    got = sdpa(q * 100.0, k * 100.0, v)
    assert np.isfinite(got).all()
    assert_close(got, want(q * 100.0, k * 100.0, v), rtol=1e-4, atol=1e-4)


def test_sdpa_matches_reference_function():
    q, k, v = qkv(1, 2, 9, 11, 8, 5, seed=7)
    assert_close(sdpa(q, k, v), sdpa.reference(q, k, v))
    assert_close(sdpa(q, k, v, scale=-1.5), sdpa.reference(q, k, v, scale=-1.5))


def test_sdpa_non_contiguous_inputs():
    # The usual layout: [B, S, H, D] arrays viewed as [B, H, S, D].
    b, s, h, d = 2, 13, 3, 8
    q = rand((b, s, h, d), seed=1).transpose(0, 2, 1, 3)
    k = rand((b, s, h, d), seed=2).transpose(0, 2, 1, 3)
    v = rand((b, 2 * s, h, d), seed=3)[:, ::2].transpose(0, 2, 1, 3)
    assert not q.flags.c_contiguous and not v.flags.c_contiguous
    assert_close(sdpa(q, k, v), want(q, k, v))


def test_sdpa_leading_dims_broadcast():
    q = rand((3, 9, 8), seed=1)          # [H, S, D], no batch axis
    k = rand((3, 11, 8), seed=2)
    v = rand((3, 11, 5), seed=3)
    got = sdpa(q, k, v)
    assert got.shape == (3, 9, 5)
    assert_close(got, want(q, k, v))
    # Keys and values shared by all heads (one head broadcast to three).
    q4 = rand((2, 3, 9, 8), seed=4)
    k4 = rand((2, 1, 11, 8), seed=5)
    v4 = rand((2, 1, 11, 5), seed=6)
    got = sdpa(q4, k4, v4)
    assert got.shape == (2, 3, 9, 5)
    assert_close(got, want(q4, np.broadcast_to(k4, (2, 3, 11, 8)),
                           np.broadcast_to(v4, (2, 3, 11, 5))))
    # 2-D: one head, no batch.
    assert_close(sdpa(q[0], k[0], v[0]), want(q[0], k[0], v[0]))


def test_sdpa_rows_sum_to_one():
    # With v the identity, the output rows are the attention weights.
    q = rand((1, 1, 6, 4), seed=8)
    k = rand((1, 1, 10, 4), seed=9)
    v = np.eye(10, dtype=np.float32)[None, None]
    got = sdpa(q, k, v)
    np.testing.assert_allclose(got.sum(axis=-1), 1.0, rtol=1e-5)
    assert (got >= 0).all()


def test_default_schedule_works_per_query_block():
    # The scores of a long sequence are computed for one block of queries at a time.
    op = P.get_op("scaled_dot_product_attention")
    built = build(op, ("float32",) * 3, {"scale": None})
    dims = dict(B=1, H=8, S=512, L=512, D=64, E=64)
    sched = default_schedule(built, dims, targets.host())
    at = {d.func: (d.get("at"), d.get("var")) for d in sched.directives if d.op == "compute_at"}
    assert at["scores"] == ("out", "task")
    assert at["p"] == ("out", "task")
    splits = [d for d in sched.directives if d.func == "out" and d.op == "split" and
              d.get("var") == "s"]
    assert splits and splits[0].get("factor") < dims["S"]


# -- errors ----------------------------------------------------------------------------------------

def test_sdpa_shape_errors():
    q, k, v = qkv(1, 2, 9, 11, 8, 5)
    with pytest.raises(ShapeError, match=r"dim D is 8 .*'q'.* but 7 .*'k'"):
        sdpa(q, k[..., :7], v)
    with pytest.raises(ShapeError, match=r"dim L is 11 .*'k'.* but 10 .*'v'"):
        sdpa(q, k, v[:, :, :10])
    with pytest.raises(ShapeError, match=r"dim D is 8 .*'q'.* but 7 .*'k'"):
        sdpa(q[0], k[0, ..., :7], v[0])
    with pytest.raises(ShapeError, match="cannot be broadcast"):
        sdpa(q, np.concatenate([k, k, k], axis=1), np.concatenate([v, v, v], axis=1))
    with pytest.raises(ShapeError, match="at least 2 dimensions"):
        sdpa(q[0, 0, 0], k, v)


def test_sdpa_dtype_and_param_errors():
    q, k, v = qkv(1, 2, 9, 11, 8, 5)
    with pytest.raises(DtypeError, match="'k'"):
        sdpa(q, k.astype(np.float64), v)
    with pytest.raises(DtypeError, match="scaled_dot_product_attention"):
        sdpa(*(x.astype(np.int32) for x in (q, k, v)))
    with pytest.raises(ParamError, match="'scale' must be finite"):
        sdpa(q, k, v, scale=float("nan"))
    with pytest.raises(ParamError, match="'scale' expects a number"):
        sdpa(q, k, v, scale="big")
