"""Gradients at the edges of an op's domain, against torch autograd: where the value is NaN
the gradient is NaN (logit's formula alone gave finite gradients outside [0, 1], -0.6 at
x = 2; with eps a NaN x got 0), and a pole's sign is torch's (logit at +-0, acosh at -1: +inf, not -inf)."""

import numpy as np
import pytest

import pypto
from pypto import ops as o

torch = pytest.importorskip("torch")

X = np.array([-2.0, -1.0, -0.5, 0.0, -0.0, 0.25, 0.5, 1.0, 2.0, np.inf, -np.inf, np.nan])


@pytest.mark.parametrize("name", ["logit", "acosh", "logit_eps"])
def test_gradient_matches_torch_at_the_domain_edges(name):
    fn, tfn = {"logit": (o.logit, torch.logit), "acosh": (o.acosh, torch.acosh),
               "logit_eps": (lambda a: o.logit(a, eps=0.1),
                             lambda t: torch.logit(t, eps=0.1))}[name]
    _, vjp_fn = pypto.vjp(fn, X)
    (got,) = vjp_fn(np.ones_like(X))
    t = torch.tensor(X, requires_grad=True)
    tfn(t).sum().backward()
    want = t.grad.numpy()
    np.testing.assert_array_equal(got, want)


_V = [0.0, 0.5, -0.5, 2.0, -3.0, np.inf, -np.inf, np.nan]
A, B = (np.array(v) for v in zip(*[(a, b) for a in _V for b in _V]))


@pytest.mark.parametrize("name", ["logaddexp", "logaddexp2", "hypot", "remainder"])
def test_binary_gradient_matches_torch_at_infinities_and_nan(name):
    """logaddexp(inf, 0)'s gradient was NaN (exp(inf - inf)), torch's 1; hypot passed 0 to a
    NaN argument; remainder's divisor gradient at an infinite divisor of the other sign (0.5 %
    -inf = -inf, quotient -1) was 0."""
    fn, tfn = getattr(o, name), getattr(torch, name)
    _, vjp_fn = pypto.vjp(fn, A, B)
    got = vjp_fn(np.ones_like(A))
    ta, tb = torch.tensor(A, requires_grad=True), torch.tensor(B, requires_grad=True)
    tfn(ta, tb).sum().backward()
    keep = np.ones_like(A, bool)
    if name == "hypot":
        keep &= ~((A == 0) & (B == 0))      # documented: nothing flows at (0, 0); torch: NaN
    if name == "remainder":
        keep &= ~(np.isinf(A) & (B == 0))   # a NaN value either way; torch's +-inf is its own
    for g, t in zip(got, (ta.grad, tb.grad)):
        np.testing.assert_allclose(g[keep], t.numpy()[keep], rtol=1e-12, atol=0)
