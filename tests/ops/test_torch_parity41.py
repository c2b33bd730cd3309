"""Arguments torch 2.13 computes that PyPTO refused or got wrong, checked against torch forward and
backward (float64 gradients), eager and inside ``pypto.jit`` programs: threshold's infinite and
NaN threshold, pad's negative pads, depthwise_conv2d with a channel multiplier, instance_norm with
running statistics, and scaled_dot_product_attention's attn_mask together with is_causal."""

from __future__ import annotations

import numpy as np
import pytest

import pypto
from pypto.errors import ParamError

torch = pytest.importorskip("torch")
F = torch.nn.functional
o = pypto.ops
INF, NAN = np.inf, np.nan


def _same(got, want):
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def _grad_vs_torch(ours, theirs, *arrays, rtol=1e-10, atol=1e-10):
    """pypto.grad of sum(ours(*arrays) * weights) against torch autograd, all in float64."""
    rng = np.random.default_rng(7)
    ts = [torch.tensor(a, requires_grad=True) for a in arrays]
    out = theirs(*ts)
    wgt = rng.standard_normal(tuple(out.shape))
    want = torch.autograd.grad(out, ts, torch.from_numpy(wgt))
    got = pypto.grad(lambda *a: (ours(*a) * wgt).sum(), argnums=tuple(range(len(arrays))))(
        *arrays)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w.numpy(), rtol=rtol, atol=atol)


# -- 1. threshold: +-inf and NaN threshold (torch's test is x <= threshold) ----------------------

_XT = np.array([-INF, -1.0, 0.0, 1.0, INF, NAN, 65504.0, -65504.0])


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
@pytest.mark.parametrize("thr", [-INF, INF, NAN])
@pytest.mark.parametrize("value", [3.0, NAN, -INF])
def test_threshold_nonfinite_threshold(dtype, thr, value):
    x = _XT.astype(dtype)
    want = F.threshold(torch.from_numpy(x), thr, value).numpy()
    _same(o.threshold(x, thr, value), want)
    _same(pypto.jit(lambda a: o.threshold(a, thr, value) * 1.0)(x), want)


@pytest.mark.parametrize("thr", [-INF, INF, NAN, 0.0])
def test_threshold_grad_nonfinite(thr):
    # a NaN x passes its gradient (x <= threshold is false), as in torch
    xt = torch.tensor(_XT, requires_grad=True)
    want, = torch.autograd.grad(F.threshold(xt, thr, 2.0).sum(), xt)
    got = pypto.grad(lambda a: (o.threshold(a, thr, 2.0) * np.ones(a.shape)).sum())(_XT)
    _same(got, want.numpy())
