"""``cdist`` and ``pairwise_distance`` with torch's p = 0 (the count of nonzero differences) and
p = inf (the largest |difference|), their gradients (none for p = 0, torch's subgradients for
p = inf), and ``cdist`` with batch axes that broadcast; references written here in NumPy and
taken from torch."""

from __future__ import annotations

import math

import numpy as np
import pytest

import pypto
import pypto.ops as P
from pypto.errors import ParamError, ShapeError

RNG = np.random.default_rng(21)


def _ties(shape, dtype):
    """Values on a coarse grid: equal entries (zero differences) and tied maxima are common."""
    return RNG.integers(-3, 4, shape).astype(dtype)


def _np_count(d, axis):
    return (d != 0).sum(axis=axis).astype(np.float64)


def _np_max(d, axis):
    return np.abs(d).max(axis=axis)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("p, norm", [(0, _np_count), (0.0, _np_count), (math.inf, _np_max),
                                     (np.inf, _np_max), (float("inf"), _np_max)])
def test_cdist_with_p_zero_and_inf(dtype, p, norm):
    a, b = _ties((2, 5, 7), dtype), _ties((2, 4, 7), dtype)
    want = norm(a[:, :, None, :].astype(np.float64) - b[:, None, :, :], -1).astype(dtype)
    got = P.cdist(a, b, p=p)
    assert got.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(pypto.jit(lambda x, y: P.cdist(x, y, p=p))(a, b), want)
    np.testing.assert_array_equal(P.cdist(a[0], b[0], p=p), want[0])       # 2-D


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("p, norm", [(0, _np_count), (math.inf, _np_max)])
@pytest.mark.parametrize("eps", [0.0, 1e-6])
def test_pairwise_distance_with_p_zero_and_inf(dtype, p, norm, eps):
    a, b = _ties((6, 9), dtype), _ties((6, 9), dtype)
    want = norm(a.astype(np.float64) - b + eps, -1).astype(dtype)
    np.testing.assert_allclose(P.pairwise_distance(a, b, p=p, eps=eps), want, rtol=1e-7)
    got = P.pairwise_distance(a, b, p=p, eps=eps, keepdim=True)
    assert got.shape == (6, 1)


@pytest.mark.parametrize("p", [0.0, math.inf])
def test_p_zero_and_inf_agree_with_torch(p):
    torch = pytest.importorskip("torch")
    a, b = _ties((3, 6, 5), "float32"), _ties((3, 4, 5), "float32")
    want = torch.cdist(torch.tensor(a), torch.tensor(b), p=p).numpy()
    np.testing.assert_array_equal(P.cdist(a, b, p=p), want)
    c = _ties((3, 6, 5), "float32")
    for eps in (0.0, 1e-6):
        want = torch.nn.functional.pairwise_distance(torch.tensor(a), torch.tensor(c), p=p,
                                                     eps=eps).numpy()
        np.testing.assert_allclose(P.pairwise_distance(a, c, p=p, eps=eps), want, rtol=1e-6)


def test_nan_and_infinite_differences_follow_torchs_norm():
    torch = pytest.importorskip("torch")
    tf = torch.nn.functional
    a = np.array([[np.nan, 1, 2], [1, np.inf, 0], [np.inf, 1, 0], [-np.inf, -0.0, 0.0]],
                 np.float32)
    b = np.array([[0, 1, 2], [1, 1, 0], [np.inf, 1, 0], [-np.inf, 0.0, -0.0]], np.float32)
    for p in (0.0, math.inf):
        want = tf.pairwise_distance(torch.tensor(a), torch.tensor(b), p=p, eps=0.0).numpy()
        np.testing.assert_array_equal(P.pairwise_distance(a, b, p=p, eps=0.0), want)
    # inf - inf is NaN: counted as nonzero with p = 0 (it once compiled as a == b and gave 0)
    np.testing.assert_array_equal(P.pairwise_distance(a, b, p=0, eps=0.0), [1, 1, 1, 1])
    pairs = np.diagonal(P.cdist(a, b, p=math.inf))         # row i of a against row i of b
    np.testing.assert_array_equal(np.isnan(pairs), [True, False, True, True])
    np.testing.assert_array_equal(np.diagonal(P.cdist(a, b, p=0)), [1, 1, 1, 1])


def test_cdist_batch_axes_broadcast_like_torch():
    torch = pytest.importorskip("torch")
    cases = [((1, 3, 4), (2, 5, 4)), ((3, 4), (2, 2, 5, 4)), ((2, 1, 3, 4), (3, 5, 4))]
    for sa, sb in cases:
        a, b = RNG.standard_normal(sa), RNG.standard_normal(sb)
        for p in (2.0, 1.0, 0.0, math.inf):
            want = torch.cdist(torch.tensor(a), torch.tensor(b), p=p).numpy()
            got = P.cdist(a, b, p=p)
            assert got.shape == want.shape, (sa, sb)
            np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    a, b = RNG.standard_normal((1, 3, 4)), RNG.standard_normal((2, 5, 4))
    np.testing.assert_allclose(pypto.jit(lambda x, y: P.cdist(x, y))(a, b),
                               torch.cdist(torch.tensor(a), torch.tensor(b)).numpy())


def test_cdist_shape_and_p_errors():
    a = np.zeros((2, 3, 4))
    with pytest.raises(ShapeError, match=r"cdist: the batch axes of x1 \(2, 3, 4\) and x2 "
                                         r"\(3, 5, 4\) do not broadcast"):
        P.cdist(a, np.zeros((3, 5, 4)))
    with pytest.raises(ShapeError, match="at least 2 axes and one M"):
        P.cdist(a, np.zeros((2, 5, 3)))
    for name, call in [("cdist", lambda p: P.cdist(a, a, p=p)),
                       ("pairwise_distance", lambda p: P.pairwise_distance(a, a, p=p))]:
        for bad in (-1.0, 1e-4, 2e3, float("nan"), -math.inf):
            with pytest.raises(ParamError, match=rf"{name}: 'p' must be 0, inf or a number in "
                                                 r"\[0.001, 1000\]"):
                call(bad)
    with pytest.raises(ParamError, match="cdist: 'p' must be 0, inf"):
        pypto.get_op("cdist").kernel(a, a, p=float("nan"))


# -- gradients -------------------------------------------------------------------------------------

def _torch_grads(fn, a, b, ct):
    torch = pytest.importorskip("torch")
    ta = torch.tensor(a, requires_grad=True)
    tb = torch.tensor(b, requires_grad=True)
    y = fn(ta, tb)
    if y.requires_grad:             # (torch's p = 0 norm records no gradient at all)
        (y * torch.tensor(ct)).sum().backward()
    return tuple(np.zeros_like(v) if t.grad is None else t.grad.numpy()
                 for v, t in [(a, ta), (b, tb)])


@pytest.mark.parametrize("p", [0.0, math.inf])
def test_cdist_gradient_with_p_zero_and_inf_is_torchs(p):
    torch = pytest.importorskip("torch")
    a, b = _ties((2, 4, 5), "float64"), _ties((2, 3, 5), "float64")
    a[0, 0], b[0, 0] = [1, -3, 3, 0, 2], [-2, 0, 0, 0, 2]     # |d| = 3 three times: ties
    ct = RNG.standard_normal((2, 4, 3))
    _, vjp = pypto.vjp(lambda x, y: P.cdist(x, y, p=p), a, b)
    got = vjp(ct)
    want = _torch_grads(lambda x, y: torch.cdist(x, y, p=p), a, b, ct)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12)
    if p == 0:
        assert not np.any(got[0]) and not np.any(got[1])


@pytest.mark.parametrize("p", [0.0, math.inf])
@pytest.mark.parametrize("eps", [0.0, 1e-6])
def test_pairwise_distance_gradient_with_p_zero_and_inf_is_torchs(p, eps):
    torch = pytest.importorskip("torch")
    a, b = _ties((5, 6), "float64"), _ties((5, 6), "float64")
    a[0], b[0] = [1, 5, 2, 0, 0, 0], [4, 2, 2, 0, 0, 0]      # two tied maxima: they share
    a[1] = b[1]                                              # all zero: nothing (eps: ties)
    ct = RNG.standard_normal(5)
    _, vjp = pypto.vjp(lambda x, y: P.pairwise_distance(x, y, p=p, eps=eps), a, b)
    got = vjp(ct)
    want = _torch_grads(lambda x, y: torch.nn.functional.pairwise_distance(x, y, p=p, eps=eps),
                        a, b, ct)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12)


def test_cdist_gradient_through_broadcast_batch_axes():
    torch = pytest.importorskip("torch")
    a, b = RNG.standard_normal((1, 3, 4)), RNG.standard_normal((2, 5, 4))
    ct = RNG.standard_normal((2, 3, 5))
    for p in (2.0, 1.5, math.inf):
        _, vjp = pypto.vjp(lambda x, y: P.cdist(x, y, p=p), a, b)
        got = vjp(ct)
        want = _torch_grads(lambda x, y: torch.cdist(x, y, p=p), a, b, ct)
        for g, w in zip(got, want):
            assert g.shape == w.shape
            np.testing.assert_allclose(g, w, rtol=1e-9, atol=1e-12)
