"""torch's argument names where PyPTO follows torch: ``topk(..., sorted=)`` and
``vector_norm(..., dim=, keepdim=)`` (torch.linalg's), against torch and NumPy."""

from __future__ import annotations

import math

import numpy as np
import pytest

import pypto
import pypto.ops as P
from pypto.errors import ParamError

X = np.random.default_rng(9).standard_normal((4, 6, 5)).astype(np.float32)
X[1, 2, 3] = X[1, 4, 3]                  # a tie


@pytest.mark.parametrize("sorted_", [True, False, np.True_])
@pytest.mark.parametrize("largest", [True, False])
def test_topk_takes_torchs_sorted(sorted_, largest):
    torch = pytest.importorskip("torch")
    vals, idx = P.topk(X, 3, dim=1, largest=largest, sorted=sorted_)
    want_v, _ = torch.topk(torch.tensor(X), 3, dim=1, largest=largest, sorted=True)
    # sorted=False allows any order; PyPTO's is the sorted one all the same
    np.testing.assert_array_equal(vals, want_v.numpy())
    np.testing.assert_array_equal(np.take_along_axis(X, idx, 1), vals)
    tv, _ = pypto.jit(lambda t: P.topk(t, 3, 1, largest, sorted_))(X)
    np.testing.assert_array_equal(tv, vals)


def test_topk_sorted_false_holds_torchs_elements():
    torch = pytest.importorskip("torch")
    vals, _ = P.topk(X, 4, dim=-1, sorted=False)
    tv, _ = torch.topk(torch.tensor(X), 4, dim=-1, sorted=False)
    np.testing.assert_array_equal(np.sort(vals, -1), np.sort(tv.numpy(), -1))


def test_topk_sorted_must_be_a_bool():
    with pytest.raises(ParamError, match="topk: 'sorted' must be a bool, got 'yes'"):
        P.topk(X, 2, sorted="yes")


@pytest.mark.parametrize("ord_", [2, 1, math.inf, 0, 3.0])
@pytest.mark.parametrize("dim, keepdim", [(1, False), ((0, 2), True), (-1, True), (None, False)])
def test_vector_norm_takes_torchs_dim_and_keepdim(ord_, dim, keepdim):
    torch = pytest.importorskip("torch")
    want = torch.linalg.vector_norm(torch.tensor(X, dtype=torch.float64), ord_, dim=dim,
                                    keepdim=keepdim).numpy()
    got = P.vector_norm(X, ord_, dim=dim, keepdim=keepdim)
    assert np.shape(got) == want.shape
    np.testing.assert_allclose(got, want, rtol=2e-6)
    np.testing.assert_array_equal(got, P.vector_norm(X, ord_, axis=dim, keepdims=keepdim))
    np.testing.assert_array_equal(P.vector_norm(X, ord_, dim=dim),
                                  P.vector_norm(X, ord_, dim))          # positional: torch's dim
    np.testing.assert_array_equal(
        pypto.jit(lambda t: P.vector_norm(t, ord_, dim=dim, keepdim=keepdim))(X), got)


def test_vector_norm_refuses_both_spellings():
    with pytest.raises(ParamError, match="vector_norm: give the axes once, as 'axis' or as "
                                         r"torch's 'dim', not both \(got axis=0, dim=1\)"):
        P.vector_norm(X, 2, axis=0, dim=1)
    with pytest.raises(ParamError, match="vector_norm: give 'keepdims' or torch's 'keepdim', "
                                         "not both"):
        P.vector_norm(X, 2, keepdims=True, keepdim=True)
    want = np.sqrt((X.astype(np.float64) ** 2).sum(axis=2, keepdims=True))
    np.testing.assert_allclose(P.vector_norm(X, dim=2, keepdim=True), want, rtol=1e-6)
