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
