"""Frontends that broadcast their inputs hand arrays that already have the broadcast shape to the
kernel as they are. (NumPy's broadcast view of an array is read-only even when nothing is
broadcast, and a read-only input is copied before the kernel reads it: pairwise_distance of two
2048 x 2048 float32 arrays spent 8 of its 9 ms copying them.)"""

from __future__ import annotations

import numpy as np
import pytest

import pypto
import pypto.runtime as runtime

RNG = np.random.default_rng(5)


@pytest.fixture
def reached(monkeypatch):
    """The arrays the kernels were handed (after the runtime's own copies, if any)."""
    seen = []
    real = runtime.dense

    def spy(a):
        d = real(a)
        seen.append(d)
        return d

    monkeypatch.setattr(runtime, "dense", spy)
    return seen


def _f32(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def _ints(high, *shape):
    return RNG.integers(0, high, shape)


def _mask(*shape):
    return RNG.random(shape) < 0.8


P = pypto.ops
CALLS = {
    "pairwise_distance": (P.pairwise_distance, lambda: [_f32(64, 48), _f32(64, 48)], {}),
    "cross_entropy": (P.cross_entropy, lambda: [_f32(16, 40), _ints(40, 16),
                                                RNG.uniform(0.5, 2, 40).astype(np.float32)], {}),
    "take_along_axis": (P.take_along_axis, lambda: [_f32(8, 30), _ints(30, 8, 5)], {"axis": 1}),
    "masked_fill": (P.masked_fill, lambda: [_f32(8, 30), _mask(8, 30), 0.0], {}),
    "attention": (P.scaled_dot_product_attention,
                  lambda: [_f32(2, 3, 16, 8), _f32(2, 3, 20, 8), _f32(2, 3, 20, 8)], {}),
    "attention with a full mask": (
        P.scaled_dot_product_attention,
        lambda: [_f32(2, 3, 16, 8), _f32(2, 3, 20, 8), _f32(2, 3, 20, 8), None, _mask(2, 3, 16, 20)],
        {}),
    "attention on [B, S, D]": (P.scaled_dot_product_attention,
                               lambda: [_f32(6, 16, 8), _f32(6, 20, 8), _f32(6, 20, 8)], {}),
    "attention on [B, S, D] with a full mask": (
        P.scaled_dot_product_attention,
        lambda: [_f32(6, 16, 8), _f32(6, 20, 8), _f32(6, 20, 8), None, _mask(6, 16, 20)], {}),
}


@pytest.mark.parametrize("name", list(CALLS))
def test_inputs_of_the_broadcast_shape_reach_the_kernel_uncopied(name, reached):
    fn, make, kw = CALLS[name]
    args = make()
    if len(args) == 5:   # attention's mask goes by keyword
        args, kw = args[:3], dict(kw, attn_mask=args[4])
    fn(*args, **kw)
    for i, a in enumerate(args):
        if isinstance(a, np.ndarray):
            assert any(np.shares_memory(a, d) for d in reached), (
                f"{name}: argument {i} {a.shape} {a.dtype.name} was copied before the kernel")


def test_a_real_broadcast_is_still_computed_right():
    a, b = _f32(64, 48), _f32(48)
    want = np.sqrt(((a.astype(np.float64) - b + 1e-6) ** 2).sum(-1))
    np.testing.assert_allclose(P.pairwise_distance(a, b), want, rtol=1e-5)
