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


# -- 2. pad: negative pads crop (torch's F.pad) --------------------------------------------------

_CROPS = [(-1, 2), (-1, -1), (-2, 1, 1, -1), (2, -1, -1, 0), (-3, 2), (2, -3), (-4, 1), (4, -1),
          (0, -3, -1, -1)]


@pytest.mark.parametrize("mode", ["constant", "reflect", "replicate", "circular"])
def test_pad_negative_crops_like_torch(mode):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 3, 4, 5))
    more = [(3, -4), (-5, 1), (-7, 4), (3, -7)] if mode in ("reflect", "replicate") else []
    for pad in _CROPS + more:
        pad = pad + (0,) * (4 - len(pad)) if mode != "constant" else pad
        want = F.pad(torch.from_numpy(x), pad, mode=mode).numpy()
        _same(o.pad(x, pad, mode=mode, value=0.0), want)
    pad = (-2, 1, 1, -1)
    want = F.pad(torch.from_numpy(x), pad, mode=mode).numpy()
    _same(pypto.jit(lambda a: o.pad(a, pad, mode=mode) * 1.0)(x), want)
    _grad_vs_torch(lambda a: o.pad(a, pad, mode=mode), lambda a: F.pad(a, pad, mode=mode), x)
    pad = (2, -3, 0, 0) if mode == "circular" else (3, -4, 0, 0)
    _grad_vs_torch(lambda a: o.pad(a, pad, mode=mode), lambda a: F.pad(a, pad, mode=mode), x)


def test_pad_crop_to_empty_and_refusals():
    x = np.arange(10.0).reshape(2, 5)
    _same(o.pad(x, (-2, -3)), F.pad(torch.from_numpy(x), (-2, -3)).numpy())
    assert o.pad(x, (-2, -3)).shape == (2, 0)
    with pytest.raises(ParamError, match="crops more than the axis"):
        o.pad(x, (-6, 2))                       # torch: narrow(): length must be non-negative
    with pytest.raises(ParamError, match="smaller than the axis"):
        o.pad(x[None], (-1, 5), mode="reflect")
    with pytest.raises(ParamError, match="what the crops leave"):
        o.pad(x[None], (-3, 3), mode="circular")  # torch: an aliasing error or stale memory


# -- 4. instance_norm with running statistics (use_input_stats=False) ----------------------------

@pytest.mark.parametrize("affine", [False, True])
def test_instance_norm_running_stats_like_torch(affine):
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 3, 4, 5))
    rm, rv = rng.standard_normal(3), rng.uniform(0.5, 2.0, 3)
    w, b = (rng.standard_normal(3), rng.standard_normal(3)) if affine else (None, None)
    tt = [None if a is None else torch.from_numpy(a) for a in (x, rm, rv, w, b)]
    want = F.instance_norm(*tt[:3], tt[3], tt[4], use_input_stats=False, eps=1e-3).numpy()
    got = o.instance_norm(x, rm, rv, w, b, use_input_stats=False, eps=1e-3)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    jitted = pypto.jit(lambda a: o.instance_norm(a, rm, rv, w, b, use_input_stats=False,
                                                 eps=1e-3) * 1.0)(x)
    np.testing.assert_allclose(jitted, want, rtol=1e-12, atol=1e-12)
    x32 = x.astype(np.float32)
    np.testing.assert_allclose(
        o.instance_norm(x32, rm.astype(np.float32), rv.astype(np.float32), use_input_stats=False),
        F.instance_norm(torch.from_numpy(x32), torch.from_numpy(rm).float(),
                        torch.from_numpy(rv).float(), use_input_stats=False).numpy(),
        rtol=1e-5, atol=1e-6)
    if affine:      # torch refuses a gradient for the running statistics (buffers)
        _grad_vs_torch(lambda a, ww, bb: o.instance_norm(a, rm, rv, ww, bb,
                                                         use_input_stats=False, eps=1e-3),
                       lambda a, ww, bb: F.instance_norm(a, tt[1], tt[2], ww, bb,
                                                         use_input_stats=False, eps=1e-3),
                       x, w, b)
    else:
        _grad_vs_torch(lambda a: o.instance_norm(a, rm, rv, use_input_stats=False, eps=1e-3),
                       lambda a: F.instance_norm(a, tt[1], tt[2], use_input_stats=False,
                                                 eps=1e-3), x)


def test_instance_norm_running_stats_required():
    x = np.ones((2, 3, 4))
    with pytest.raises(ParamError, match="running_mean and running_var"):
        o.instance_norm(x, np.zeros(3), None, use_input_stats=False)   # torch: RuntimeError
    with pytest.raises(pypto.errors.ShapeError, match="running_mean"):
        o.instance_norm(x, np.zeros(2), np.ones(2), use_input_stats=False)


# -- 5. scaled_dot_product_attention: attn_mask with is_causal=True is refused, as torch's --------

def test_sdpa_mask_and_causal_refused_like_torch():
    rng = np.random.default_rng(5)
    q, k = rng.standard_normal((2, 1, 2, 3, 4))
    v = rng.standard_normal((1, 2, 3, 5))
    mask = np.array([[True, False, True], [True, True, False], [False, True, True]])
    with pytest.raises(RuntimeError, match="attn_mask should not be set when is_causal"):
        F.scaled_dot_product_attention(*map(torch.from_numpy, (q, k, v)),
                                       attn_mask=torch.from_numpy(mask), is_causal=True)
    for m in (mask, np.zeros((3, 3))):
        with pytest.raises(ParamError, match="attn_mask or is_causal=True, not both"):
            o.scaled_dot_product_attention(q, k, v, attn_mask=m, is_causal=True)
        with pytest.raises(ParamError, match="not both"):
            pypto.jit(lambda a, b, c: o.scaled_dot_product_attention(
                a, b, c, attn_mask=m, is_causal=True))(q, k, v)
    # the fold the message suggests is torch's attention under both masks
    folded = mask & np.tril(np.ones((3, 3), bool))
    want = F.scaled_dot_product_attention(*map(torch.from_numpy, (q, k, v)),
                                          attn_mask=torch.from_numpy(folded)).numpy()
    np.testing.assert_allclose(o.scaled_dot_product_attention(q, k, v, attn_mask=folded), want,
                               rtol=1e-12, atol=1e-12)


# -- 3. depthwise_conv2d with a channel multiplier (w [C * M, 1, KH, KW]) -------------------------

def test_depthwise_channel_multiplier_like_torch():
    rng = np.random.default_rng(3)
    for n, c, m, hw, k, s, p in [(2, 3, 2, (7, 8), (3, 3), 1, 1), (1, 2, 4, (6, 5), (2, 3),
                                                                  (1, 2), (1, 0))]:
        x = rng.standard_normal((n, c) + hw)
        w = rng.standard_normal((c * m, 1) + k)
        want = F.conv2d(torch.from_numpy(x), torch.from_numpy(w), stride=s, padding=p,
                        groups=c).numpy()
        np.testing.assert_allclose(o.depthwise_conv2d(x, w, stride=s, padding=p), want,
                                   rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(o.depthwise_conv2d(x[0], w, stride=s, padding=p), want[0],
                                   rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(
            pypto.jit(lambda a, b: o.depthwise_conv2d(a, b, stride=s, padding=p) * 1.0)(x, w),
            want, rtol=1e-12, atol=1e-12)
        _grad_vs_torch(lambda a, b: o.depthwise_conv2d(a, b, stride=s, padding=p),
                       lambda a, b: F.conv2d(a, b, stride=s, padding=p, groups=c), x, w)
