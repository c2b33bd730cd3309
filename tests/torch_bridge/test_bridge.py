"""pypto.torch: PyPTO ops as PyTorch ops (forward, backward, fake tensors) and modules."""

from __future__ import annotations

import functools
import importlib

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import pypto  # noqa: E402
import pypto.torch as pt  # noqa: E402

o = pypto.ops
jit_module = importlib.import_module("pypto.frontend.jit")   # pypto.frontend.jit is the decorator
gen = torch.Generator().manual_seed(0)


def t(*shape, positive=False):
    x = torch.randn(*shape, dtype=torch.float64, generator=gen)
    return (x.abs() + 0.5 if positive else x).requires_grad_(True)


def test_package_name_does_not_shadow_torch():
    assert pt.torch is torch
    assert hasattr(pt.torch, "library")


@pypto.register_op(name="bridge_gated")
def gated(x, w):
    """A composite op: a gated linear unit."""
    return o.sigmoid(x @ w) * x.sum(axis=1, keepdims=True)


FAMILIES = {
    "elementwise": (o.gelu, [(3, 4)]),
    "binary": (lambda a, b: o.pow(a, b) - a * b, [(2, 3), (3,)]),
    "reduction": (lambda x: o.logsumexp(x, axis=0), [(3, 4)]),
    "norm": (lambda x, g, b: o.layer_norm(x, g, b), [(2, 5), (5,), (5,)]),
    "linalg": (lambda x, w, b: o.tanh(o.linear(x, w, b)), [(3, 4), (2, 4), (2,)]),
    "conv": (functools.partial(o.conv2d, stride=2, padding=1), [(1, 2, 5, 5), (3, 2, 3, 3)]),
    "attention": (o.scaled_dot_product_attention, [(1, 1, 3, 2), (1, 1, 4, 2), (1, 1, 4, 2)]),
    "lstm_cell": (o.lstm_cell, [(1, 2), (1, 3), (1, 3), (12, 2), (12, 3)]),
    "composite": (gated, [(3, 4), (4, 4)]),
}


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_gradcheck(family):
    fn, shapes = FAMILIES[family]
    args = tuple(t(*s, positive=(family == "binary")) for s in shapes)
    assert torch.autograd.gradcheck(pt.op(fn), args)


@pytest.mark.parametrize("family", ["elementwise", "linalg", "lstm_cell", "composite"])
def test_opcheck(family):
    fn, shapes = FAMILIES[family]
    args = tuple(t(*s) for s in shapes)
    top = pt.op(fn)
    result = torch.library.opcheck(top.torch_op(*args), args)
    assert set(result.values()) == {"SUCCESS"}, result


def test_forward_matches_pypto_and_torch():
    x, w, b = t(3, 4), t(2, 4), t(2)
    got = pt.op(o.linear)(x, w, b)
    ref = torch.nn.functional.linear(x, w, b)
    torch.testing.assert_close(got, ref.detach())


def test_zero_copy_both_ways(monkeypatch):
    x = torch.randn(4, 5)
    view = pt.to_numpy(x)
    assert view.__array_interface__["data"][0] == x.data_ptr()
    top = pt.op(lambda v: o.exp(v) * 2.0)
    top(x)                                  # traced and compiled; the next call replays
    launched = []
    real = jit_module.Segment._launch

    def spy(self, ins, pre=None):
        outs = real(self, ins, pre)
        launched.append((ins, pre, outs))
        return outs

    monkeypatch.setattr(jit_module.Segment, "_launch", spy)
    out = top(x)
    (ins, pre, outs), = launched
    assert ins[0].__array_interface__["data"][0] == x.data_ptr()        # input: no copy
    # The output is a torch tensor the pipeline wrote in place: the array handed to the kernel
    # is its memory, nothing copied afterwards.
    assert pre is not None and pre[0] is outs[0]
    assert outs[0].__array_interface__["data"][0] == out.data_ptr()
    torch.testing.assert_close(out, torch.exp(x) * 2)


def test_a_function_with_its_own_out_parameter_keeps_it():
    def fn(v, out=None):
        return o.exp(v) * 2.0 if out is None else v

    top = pt.op(fn)
    x = torch.randn(3)
    torch.testing.assert_close(top(x), torch.exp(x) * 2)


def test_errors_name_the_argument():
    top = pt.op(o.exp)
    with pytest.raises(pypto.TraceError, match="argument #0 is a NumPy array; pass tensors as torch tensors"):
        top(np.ones(3))
    with pytest.raises(pypto.DtypeError, match="bfloat16"):
        top(torch.ones(3, dtype=torch.bfloat16))


def _mlp(w1, b1, w2, b2, x, y):
    h = o.relu(o.linear(x, w1, b1))
    d = o.linear(h, w2, b2) - y
    return (d * d).mean()


def test_module_trains_like_torch():
    """pypto.torch.Module with nn.Parameters and torch.optim.SGD: the same losses as the same
    MLP in PyTorch, step by step."""
    rng = np.random.default_rng(3)
    x = torch.from_numpy(rng.standard_normal((16, 6)).astype(np.float32))
    y = torch.from_numpy(rng.standard_normal((16, 2)).astype(np.float32))
    init = {"w1": rng.standard_normal((8, 6)).astype(np.float32) * 0.4,
            "b1": np.zeros(8, np.float32),
            "w2": rng.standard_normal((2, 8)).astype(np.float32) * 0.4,
            "b2": np.zeros(2, np.float32)}
    mod = pt.Module(_mlp, **init)
    ref = {k: torch.nn.Parameter(torch.from_numpy(v.copy())) for k, v in init.items()}
    opt = torch.optim.SGD(mod.parameters(), lr=0.1)
    opt_ref = torch.optim.SGD(ref.values(), lr=0.1)
    for _ in range(20):
        loss = mod(x, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        h = torch.relu(x @ ref["w1"].T + ref["b1"])
        loss_ref = ((h @ ref["w2"].T + ref["b2"] - y) ** 2).mean()
        opt_ref.zero_grad()
        loss_ref.backward()
        opt_ref.step()
        torch.testing.assert_close(loss.detach(), loss_ref.detach(), rtol=1e-5, atol=1e-6)


def test_a_wrapped_op_compiles_into_one_graph():
    # torch.compile(fullgraph=True): the wrapper's PyPTO trace (how many outputs) runs outside
    # Dynamo's graph as a constant; traced by Dynamo it broke the graph and fullgraph failed.
    gelu = pt.op(pypto.ops.gelu)
    f = torch.compile(lambda t: gelu(t).sum(), fullgraph=True)
    x = torch.randn(6, 3, dtype=torch.float64, requires_grad=True)
    got = f(x)
    got.backward()
    y = x.detach().clone().requires_grad_(True)
    want = torch.nn.functional.gelu(y).sum()
    want.backward()
    torch.testing.assert_close(got.detach(), want.detach())
    torch.testing.assert_close(x.grad, y.grad)
