"""Second and higher derivatives through ``pypto.torch.op``: the backward is itself a PyTorch op
of PyPTO's vjp program, with a backward of its own."""

from __future__ import annotations

import importlib

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import pypto  # noqa: E402
import pypto.torch as pt  # noqa: E402
import test_bridge as _bridge  # noqa: E402  (tests/torch_bridge is on sys.path)

o = pypto.ops
gen = torch.Generator().manual_seed(1)


def t(*shape, positive=False):
    x = torch.randn(*shape, dtype=torch.float64, generator=gen)
    return (x.abs() + 0.5 if positive else x).requires_grad_(True)


# The bridge's families (test_bridge), but for lstm_cell and the composite op: their second
# derivatives take longest and add no rule the others lack.
FAMILIES = {k: v for k, v in _bridge.FAMILIES.items() if k not in ("lstm_cell", "composite")}


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_gradgradcheck(family):
    fn, shapes = FAMILIES[family]
    args = tuple(t(*s, positive=(family == "binary")) for s in shapes)
    assert torch.autograd.gradgradcheck(pt.op(fn), args)


def test_third_derivative():
    cube = pt.op(lambda x: x * x * x)
    x = torch.tensor([-1.5, 0.25, 2.0], dtype=torch.float64, requires_grad=True)
    (d1,) = torch.autograd.grad(cube(x).sum(), x, create_graph=True)
    (d2,) = torch.autograd.grad(d1.sum(), x, create_graph=True)
    (d3,) = torch.autograd.grad(d2.sum(), x)
    torch.testing.assert_close(d1, 3 * x.detach() ** 2)
    torch.testing.assert_close(d2, 6 * x.detach())
    torch.testing.assert_close(d3, torch.full_like(x, 6.0))


def test_gradient_penalty_training_matches_torch():
    """A loss with a gradient penalty (create_graph=True), as WGAN-GP writes it: five SGD steps
    through the bridge and through torch's own ops give the same parameters."""
    rng = np.random.default_rng(0)
    w0 = rng.standard_normal((3, 4))
    b0 = rng.standard_normal(3)
    xs = rng.standard_normal((6, 4))
    layer = pt.op(lambda x, w, b: o.tanh(o.linear(x, w, b)))

    def run(f):
        w = torch.tensor(w0, requires_grad=True)
        b = torch.tensor(b0, requires_grad=True)
        x = torch.tensor(xs, requires_grad=True)
        losses = []
        for _ in range(5):
            y = f(x, w, b)
            (gx,) = torch.autograd.grad(y.sum(), x, create_graph=True)
            loss = y.square().mean() + ((gx.norm(dim=1) - 1) ** 2).mean()
            gw, gb = torch.autograd.grad(loss, (w, b))
            with torch.no_grad():
                w -= 0.1 * gw
                b -= 0.1 * gb
            losses.append(loss.item())
        return losses, w.detach(), b.detach()

    got = run(layer)
    want = run(lambda x, w, b: torch.tanh(torch.nn.functional.linear(x, w, b)))
    np.testing.assert_allclose(got[0], want[0], rtol=1e-12)
    torch.testing.assert_close(got[1], want[1], rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(got[2], want[2], rtol=1e-12, atol=1e-12)


def test_integer_arguments_get_no_gradient_at_either_order():
    gather = pt.op(lambda x, i: o.take_along_axis(x, i, axis=1) ** 2)
    x = t(2, 3)
    idx = torch.tensor([[2, 0], [1, 1]])
    (gx,) = torch.autograd.grad(gather(x, idx).sum(), x, create_graph=True)
    (ggx,) = torch.autograd.grad(gx.sum(), x)
    want = torch.zeros(2, 3, dtype=torch.float64)
    want.scatter_add_(1, idx, 2 * torch.ones(2, 2, dtype=torch.float64))
    torch.testing.assert_close(ggx, want)


def test_the_backward_runs_the_program_pypto_tune_grad_tunes():
    """The bridge's backward compiles the graph ``backward_program`` names (what ``pypto tune OP
    --grad`` tunes and stores), so a stored winner is found by later backward calls."""
    from pypto.autodiff.api import backward_program

    jit = importlib.import_module("pypto.frontend.jit")
    op = pypto.get_op("softmax")
    name = backward_program(op, {"R": 16, "C": 32}, ("float32",)).name
    x = torch.randn(16, 32, generator=gen).requires_grad_(True)
    ct = torch.randn(16, 32, generator=gen)
    pt.op(op)(x).backward(ct)
    assert name in {op_.name for op_, _ in jit._kernels.values()}
    s = torch.softmax(x.detach().double(), 1)
    want = s * (ct.double() - (ct.double() * s).sum(1, keepdim=True))
    torch.testing.assert_close(x.grad.double(), want, rtol=1e-4, atol=1e-6)
