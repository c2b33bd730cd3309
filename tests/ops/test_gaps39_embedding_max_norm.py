"""embedding(max_norm=, norm_type=): the rows looked up, those whose norm exceeds max_norm scaled
by max_norm / (norm + 1e-7) as torch's renorm does, but functionally: the weight is not
modified (torch rescales its rows in place). The gradient is the returned rows' own, the scale
included; torch's (renorm under no_grad) agrees on the rows the renorm leaves alone."""

from __future__ import annotations

import math

import numpy as np
import pytest
from helpers import assert_close

import pypto
import pypto.ops as P
from pypto.errors import ParamError

torch = pytest.importorskip("torch")
F = torch.nn.functional

RNG = np.random.default_rng(39)
W = (RNG.standard_normal((12, 5)) * 1.5).astype(np.float32)
IDX = np.array([[1, 3, 3, 7], [0, 11, 1, 5]])


@pytest.mark.parametrize("max_norm, norm_type", [(1.0, 2.0), (2.0, 1.0), (0.5, math.inf),
                                                 (3.0, 3.0), (0.0, 2.0), (1.5, 0.5),
                                                 (100.0, 2.0), (2, 2)])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_rows_match_torch_and_weight_is_kept(max_norm, norm_type, dtype):
    w = W.astype(dtype)
    kept = w.copy()
    wt = torch.tensor(w.copy())
    want = F.embedding(torch.tensor(IDX), wt, max_norm=max_norm, norm_type=norm_type).numpy()
    got = P.embedding(IDX, w, max_norm=max_norm, norm_type=norm_type)
    assert_close(got, want, rtol=1e-6 if dtype == "float32" else 1e-12)
    np.testing.assert_array_equal(w, kept)                     # not modified, unlike torch's
    assert_close(got, P.embedding.reference(IDX, w, max_norm=max_norm, norm_type=norm_type),
                 rtol=1e-6 if dtype == "float32" else 1e-12)


def test_some_rows_are_renormed_and_others_not():
    norms = np.linalg.norm(W, axis=1)
    cut = float(np.median(norms))
    got = P.embedding(np.arange(12), W, max_norm=cut)
    big = norms > cut
    np.testing.assert_allclose(np.linalg.norm(got[big], axis=1), cut, rtol=1e-5)
    np.testing.assert_array_equal(got[~big], W[~big])


def test_gradient_is_that_of_the_returned_rows():
    cut = 1.8
    dy = RNG.standard_normal(IDX.shape + (5,)).astype(np.float32)
    g = pypto.grad(lambda w: (P.embedding(IDX, w, max_norm=cut) * dy).sum())(W)
    # the same function written in torch, the scale differentiated
    wt = torch.tensor(W, requires_grad=True)
    rows = wt[torch.tensor(IDX)]
    n = torch.linalg.vector_norm(rows, dim=-1, keepdim=True)
    scale = torch.where(n > cut, cut / (n + 1e-7), torch.ones_like(n))
    (gw,) = torch.autograd.grad((rows * scale * torch.tensor(dy)).sum(), wt)
    assert_close(g, gw.numpy(), rtol=1e-4, atol=1e-5)
    # torch's own gradient (renorm under no_grad) on the rows the renorm leaves alone
    wt2 = torch.tensor(W, requires_grad=True)
    (F.embedding(torch.tensor(IDX), wt2, max_norm=cut) * torch.tensor(dy)).sum().backward()
    alone = np.linalg.norm(W, axis=1) <= cut
    assert alone.any() and (~alone[np.unique(IDX)]).any()
    assert_close(g[alone], wt2.grad.numpy()[alone], rtol=1e-5, atol=1e-6)


def test_traced_program_renorms_too():
    got = pypto.jit(lambda w: P.embedding(IDX, w, max_norm=1.0, norm_type=1.0))(W)
    np.testing.assert_allclose(got, P.embedding(IDX, W, max_norm=1.0, norm_type=1.0),
                               rtol=1e-6)


@pytest.mark.parametrize("kw, what", [(dict(max_norm=-1.0), "max_norm"),
                                      (dict(max_norm=float("nan")), "max_norm"),
                                      (dict(max_norm=True), "max_norm"),
                                      (dict(max_norm="1"), "max_norm"),
                                      (dict(max_norm=1.0, norm_type=-2.0), "norm_type"),
                                      (dict(max_norm=1.0, norm_type=None), "norm_type")])
def test_bad_renorm_arguments_are_param_errors(kw, what):
    with pytest.raises(ParamError, match=f"embedding: '{what}' must be"):
        P.embedding(IDX, W, **kw)
