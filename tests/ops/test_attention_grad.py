"""scaled_dot_product_attention's gradients at sizes where the backward's products use their
blocked templates, against a float64 NumPy backward written here."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

import pypto
import pypto.ops as P
from helpers import rand
from pypto.errors import PerformanceWarning


def grads64(q, k, v, g, scale=None):
    """(dq, dk, dv) of sum(attention(q, k, v) * g) in float64, from the softmax's Jacobian."""
    q, k, v, g = (np.asarray(x, np.float64) for x in (q, k, v, g))
    if scale is None:
        scale = 1.0 / math.sqrt(q.shape[-1])
    s = np.einsum("...sd,...ld->...sl", q, k) * scale
    w = np.exp(s - s.max(axis=-1, keepdims=True))
    w /= w.sum(axis=-1, keepdims=True)
    dv = np.einsum("...sl,...se->...le", w, g)
    dw = np.einsum("...se,...le->...sl", g, v)
    ds = w * (dw - (dw * w).sum(axis=-1, keepdims=True)) * scale
    return (np.einsum("...sl,...ld->...sd", ds, k), np.einsum("...sl,...sd->...ld", ds, q), dv)


def _close(got, want, tol):
    for name, a, b in zip(("dq", "dk", "dv"), got, want):
        assert a.shape == b.shape, (name, a.shape, b.shape)
        err = np.abs(np.asarray(a, np.float64) - b).max() / (np.abs(b).max() + 1e-30)
        assert err < tol, f"{name}: max error {err:.3g} of its largest value (tolerance {tol})"


@pytest.mark.parametrize("form", ["vjp", "jit"])
def test_backward_uses_its_fused_schedule(form):
    """At 2 x 256 x 256 x 64 the batched products of the backward copy a batch entry's operand
    row by row, then cut panels from that copy (two staging wraps, one of the other). The
    second wrap of a Func computed in the program once kept the ImageParam loop names
    (``_0``), the program's fused schedule was refused and it ran with the safe default
    (a PerformanceWarning; attention's backward at 8 x 512 x 64 took ~4x as long)."""
    q, k, v = (rand((1, 2, 256, 64), "float32", seed) for seed in (1, 2, 3))
    g = rand((1, 2, 256, 64), "float32", 4)
    f = P.scaled_dot_product_attention
    with warnings.catch_warnings():
        warnings.simplefilter("error", PerformanceWarning)
        if form == "vjp":
            _, back = pypto.vjp(f, q, k, v)
        else:
            _, back = pypto.vjp(pypto.jit(f), q, k, v)
        got = back(g)
    _close(got, grads64(q, k, v, g), 1e-5)


@pytest.mark.parametrize("shape,scale", [
    ((1, 3, 70, 45, 24, 40), None),      # S != L, D != E, sizes off the vector width
    ((2, 1, 33, 130, 16, 8), 0.3),       # an explicit scale, E narrower than a vector
    ((1, 2, 5, 3, 4, 2), -1.5),          # a negative scale, tiny sizes
])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_gradients(shape, scale, dtype):
    b, h, s, l, d, e = shape
    q, k, v = (rand(x, dtype, seed) for seed, x in enumerate(
        [(b, h, s, d), (b, h, l, d), (b, h, l, e)]))
    g = rand((b, h, s, e), dtype, 9)
    kw = {} if scale is None else {"scale": scale}
    _, back = pypto.vjp(lambda q, k, v: P.scaled_dot_product_attention(q, k, v, **kw), q, k, v)
    got = back(g)
    for a in got:
        assert a.dtype == np.dtype(dtype)
    _close(got, grads64(q, k, v, g, scale), 2e-5 if dtype == "float32" else 1e-11)


def test_large_scores_do_not_overflow():
    """Scores of +-300 after scaling: the recomputed weights are max-shifted, so no inf/NaN."""
    q = rand((1, 1, 16, 8), "float32", 1) * 60
    k = rand((1, 1, 20, 8), "float32", 2) * 60
    v = rand((1, 1, 20, 8), "float32", 3)
    g = rand((1, 1, 16, 8), "float32", 4)
    _, back = pypto.vjp(P.scaled_dot_product_attention, q, k, v)
    got = back(g)
    assert all(np.isfinite(a).all() for a in got)
    _close(got, grads64(q, k, v, g), 3e-3)   # float32 scores of ~300: ill-conditioned
