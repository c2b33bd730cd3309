"""Loss edge cases: ``binary_cross_entropy`` of an input outside [0, 1] is NaN (torch raises;
the op's NumPy reference gives NaN), inside it agrees with torch to the last clamp; a
``cross_entropy`` whose every sample is ignored is NaN without a NumPy warning."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import pypto
import pypto.ops as P

# inside [0, 1] (edges and logs clamped at -100 included), then outside it or NaN
INSIDE = np.array([0.0, 1.0, 0.3, 0.999, 1e-30, -0.0, 0.5])
OUTSIDE = np.array([1.5, -0.5, np.nan, np.inf, -np.inf, 1 + 2 ** -20, -1e-30])


def _bce_numpy(x, t):
    """Written out: -(t log x + (1 - t) log(1 - x)), each log clamped at -100."""
    with np.errstate(divide="ignore"):
        lx = np.maximum(np.log(x), -100.0)
        l1x = np.maximum(np.log(1 - x), -100.0)
    return -(t * lx + (1 - t) * l1x)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_binary_cross_entropy_inside_zero_one_agrees_with_torch(dtype):
    torch = pytest.importorskip("torch")
    x = INSIDE.astype(dtype)
    t = np.linspace(0, 1, x.size).astype(dtype)
    got = P.binary_cross_entropy(x, t, reduction="none")
    want = torch.nn.functional.binary_cross_entropy(torch.tensor(x), torch.tensor(t),
                                                    reduction="none").numpy()
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(got, _bce_numpy(x.astype(np.float64), t), rtol=1e-6, atol=1e-6)
    assert np.isfinite(P.binary_cross_entropy(x, t))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("target", [0.0, 1.0, 0.25])
def test_binary_cross_entropy_outside_zero_one_is_nan(dtype, target):
    x = np.concatenate([OUTSIDE, INSIDE]).astype(dtype)
    t = np.full(x.shape, target, dtype)
    got = P.binary_cross_entropy(x, t, reduction="none")
    bad = ~((x >= 0) & (x <= 1))
    assert np.isnan(got[bad]).all(), got[bad]
    assert np.isfinite(got[~bad]).all(), got[~bad]
    assert np.isnan(P.binary_cross_entropy(x, t))
    assert np.isnan(P.binary_cross_entropy(x, t, reduction="sum"))
    traced = pypto.jit(lambda a, b: P.binary_cross_entropy(a, b, reduction="none"))(x, t)
    np.testing.assert_array_equal(np.isnan(traced), bad)
    ref = pypto.get_op("binary_cross_entropy").reference(x, t, reduction="none")
    np.testing.assert_array_equal(np.isnan(ref), bad)


def test_binary_cross_entropy_of_the_reported_input():
    x, t = np.array([1.5, -0.5], np.float32), np.array([1.0, 0.0], np.float32)
    assert np.isnan(P.binary_cross_entropy(x, t, reduction="none")).all()   # was -0.405 each
    torch = pytest.importorskip("torch")
    with pytest.raises(RuntimeError, match="between 0 and 1"):     # what torch does instead
        torch.nn.functional.binary_cross_entropy(torch.tensor(x), torch.tensor(t))


@pytest.mark.parametrize("name", ["cross_entropy", "nll_loss"])
def test_all_ignored_samples_give_nan_without_a_warning(name):
    x = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    t = np.full(3, -100, np.int64)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = getattr(P, name)(x, t)
        traced = pypto.jit(lambda a: getattr(P, name)(a, t))(x)
    assert np.isnan(got) and np.isnan(traced)
    assert getattr(P, name)(x, t, reduction="sum") == 0.0
    torch = pytest.importorskip("torch")
    want = getattr(torch.nn.functional, name)(torch.tensor(x), torch.tensor(t))
    assert torch.isnan(want)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_binary_cross_entropy_gradient_is_nan_where_the_loss_is(dtype):
    x = np.array([0.3, 1.5, -0.5, np.nan, 0.7], dtype)
    t = np.array([1, 1, 0, 1, 0], dtype)
    g = pypto.grad(lambda a: P.binary_cross_entropy(a, t, reduction="none").sum())(x)
    np.testing.assert_array_equal(np.isnan(g), [False, True, True, True, False])
    # inside: d/dx -(t log x + (1 - t) log(1 - x)) = -t / x + (1 - t) / (1 - x)
    np.testing.assert_allclose(g[[0, 4]], [-1 / 0.3, 1 / 0.3], rtol=1e-6)
