"""The norm rules' backward programs: every reduction reads a product of its own, folded into
its loop, so no full-size intermediate is written out (the layer_norm backward at 4096x1024
wrote four); and the gradients stay accurate in float32 for rows far from zero mean, checked
against PyTorch's autograd in float64 (finite differences cover the rules in tests/autodiff
test_rules.py)."""

from __future__ import annotations

import numpy as np
import pytest
from fd import check_vjp

import pypto
from pypto.autodiff import api

o = pypto.ops
RNG = np.random.default_rng(23)


def _backward_plans(fn, *args):
    """The lowerings of the segments of ``vjp(jit(fn))``'s backward program."""
    f = pypto.jit(fn)
    out, back = pypto.vjp(f, *args)
    back(RNG.standard_normal(np.shape(out)).astype(out.dtype))
    plans = []
    for prog in api._programs[f].values():
        stack = list(prog._cache.values())
        while stack:
            step = stack.pop()
            if step.segment is not None:
                plans.append(step.segment.op.plan)
            stack += list(step.children.values())
    return plans


@pytest.mark.parametrize("name", ["layer_norm", "group_norm", "instance_norm"])
def test_the_backward_writes_no_intermediate(name):
    x = RNG.standard_normal((4, 6, 64)).astype(np.float32)
    w, b = RNG.standard_normal(6).astype(np.float32), RNG.standard_normal(6).astype(np.float32)
    fn, args = {
        "layer_norm": (lambda x, g, b: o.layer_norm(x, g, b),
                       (x.reshape(-1, 6 * 64), RNG.standard_normal(6 * 64).astype(np.float32),
                        RNG.standard_normal(6 * 64).astype(np.float32))),
        "group_norm": (lambda x, w, b: o.group_norm(x, 2, w, b), (x.reshape(4, 6, 8, 8), w, b)),
        "instance_norm": (lambda x, w, b: o.instance_norm(x, weight=w, bias=b), (x, w, b)),
    }[name]
    plans = _backward_plans(fn, *args)
    assert plans
    for plan in plans:
        assert not plan.materialize, sorted(plan.materialize)


def test_layer_norm_gradient_with_an_offset_mean_float64():
    x = RNG.standard_normal((3, 7)) * 0.5 + 40.0
    check_vjp(lambda x, g, b: o.layer_norm(x, g, b), x, RNG.standard_normal(7),
              RNG.standard_normal(7), rtol=1e-5, atol=1e-6)


def test_layer_norm_gradient_float32_matches_torch_float64():
    torch = pytest.importorskip("torch")
    rows, cols = 64, 300
    x = (RNG.standard_normal((rows, cols)) * 3 + 100).astype(np.float32)
    g, b = RNG.standard_normal(cols).astype(np.float32), RNG.standard_normal(cols).astype(np.float32)
    ct = RNG.standard_normal((rows, cols)).astype(np.float32)
    _, back = pypto.vjp(pypto.jit(lambda x, g, b: o.layer_norm(x, g, b, eps=1e-5)), x, g, b)
    got = back(ct)
    ts = [torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in (x, g, b)]
    y = torch.nn.functional.layer_norm(ts[0], (cols,), ts[1], ts[2], eps=1e-5)
    want = torch.autograd.grad((y * torch.tensor(ct, dtype=torch.float64)).sum(), ts)
    for k, (a, w) in enumerate(zip(got, want)):
        w = w.numpy()
        assert a.dtype == np.float32
        np.testing.assert_allclose(a, w, rtol=2e-3, atol=2e-3 * np.abs(w).max(),
                                   err_msg=f"argument #{k}")
