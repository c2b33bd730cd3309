"""The scan, extra-reduction and sorting ops against NumPy written here (torch where it has them).

Sorting is checked with ties, -0.0, NaN and both directions; every public call also runs
traced under ``pypto.jit``.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from helpers import assert_close, rand

import pypto
import pypto.ops as P
from pypto.errors import ParamError

RNG = np.random.default_rng(5)


def _with_nan(shape, dtype="float32", seed=0):
    x = rand(shape, dtype, seed)
    x.flat[:: 7] = np.nan
    return x


# -- reductions ----------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["float32", "int32", "bool"])
def test_all_any_count_nonzero(dtype):
    x = (RNG.integers(0, 3, (4, 5, 6)) > 0).astype(dtype)
    if dtype == "float32":
        x[0, 0, 0] = np.nan                     # NaN is nonzero
    for axis in (None, 1, (0, 2)):
        np.testing.assert_array_equal(P.all(x, axis=axis), np.all(x, axis=axis))
        np.testing.assert_array_equal(P.any(x, axis=axis, keepdims=True),
                                      np.any(x, axis=axis, keepdims=True))
        got = P.count_nonzero(x, axis=axis)
        assert got.dtype == np.int64
        np.testing.assert_array_equal(got, np.count_nonzero(x, axis=axis))


@pytest.mark.parametrize("ord", [1, 2, "fro", np.inf, -np.inf, 0, 3.0, 0.5])
def test_vector_norm(ord):
    x = rand((3, 7, 9), "float64", 2)
    a = np.abs(x)
    p = 2 if ord == "fro" else ord
    if p == np.inf:
        want = a.max(axis=(1, 2))
    elif p == -np.inf:
        want = a.min(axis=(1, 2))
    elif p == 0:
        want = (a != 0).sum(axis=(1, 2)).astype(np.float64)
    else:
        want = (a ** p).sum(axis=(1, 2)) ** (1 / p)
    assert_close(P.vector_norm(x, ord, axis=(1, 2)), want)


def test_vector_norm_of_a_nan_is_nan_and_bad_ord_is_refused():
    x = _with_nan((2, 9))
    assert np.isnan(P.vector_norm(x, np.inf, axis=1)).all()
    # the smallest |x| too: NaN wins (torch and np.min(|x|) agree); it lost to every number
    assert np.isnan(P.vector_norm(x, -np.inf, axis=1)).all()
    np.testing.assert_array_equal(P.vector_norm(np.float32([[3, -1, 2]]), -np.inf, axis=1), [1])
    assert np.isnan(P.vector_norm(x, 2, axis=1)).all()
    # ord < 0 is torch's (sum |x|**ord)**(1/ord); a string other than 'fro' is refused
    np.testing.assert_allclose(P.vector_norm(np.float32([[3, -1, 2]]), -1, axis=1),
                               [1 / (1 / 3 + 1 + 1 / 2)], rtol=1e-6)
    with pytest.raises(ParamError, match="ord"):
        P.vector_norm(x, "nuc")


@pytest.mark.parametrize("name", ["nansum", "nanmean", "nanmax", "nanmin"])
def test_nan_reductions(name):
    x = _with_nan((4, 6, 5), seed=3)
    x[1] = np.nan                              # a slice of only NaNs
    for axis in (None, 0, (1, 2)):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            want = getattr(np, name)(x.astype(np.float64), axis=axis).astype(np.float32)
        assert_close(getattr(P, name)(x, axis=axis), want, err_msg=f"{name} {axis}")


# -- scans ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("axis", [0, 1, -1, None])
def test_cumsum_cumprod_logcumsumexp(axis):
    x = rand((3, 5, 7), seed=4)
    ax = -1 if axis is None else axis
    if axis is None:
        flat = x.ravel()
        assert_close(P.cumsum(x, None), np.cumsum(flat))
        return
    assert_close(P.cumsum(x, axis), np.cumsum(x, axis))
    assert_close(P.cumprod(x * 0.5 + 1, axis), np.cumprod(x * 0.5 + 1, axis))
    want = np.log(np.cumsum(np.exp(x.astype(np.float64)), ax)).astype(np.float32)
    assert_close(P.logcumsumexp(x, axis), want)


def test_cumsum_of_int32_is_int64_and_sizes():
    x = RNG.integers(-1000, 1000, (2, 1000)).astype(np.int32)
    got = P.cumsum(x, 1)
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, np.cumsum(x, 1, dtype=np.int64))
    one = rand((1,))
    assert_close(P.cumsum(one), one)


def test_cumsum_and_cumprod_default_to_numpys_flattened_axis():
    # np.cumsum(x) scans the flattened array; the last axis was PyPTO's default before
    x = rand((3, 4), seed=4)
    np.testing.assert_array_equal(P.cumsum(x), np.cumsum(x))
    assert P.cumprod(x).shape == (12,)
    assert_close(P.cumprod(x), np.cumprod(x))
    assert P.cummax(x)[0].shape == (3, 4)          # torch's names keep the last axis


def test_logcumsumexp_with_infinities_and_nan():
    x = np.array([[-np.inf, -np.inf, 0.0, np.inf, 1.0], [1.0, np.nan, 0.0, 2.0, 3.0]], np.float32)
    got = P.logcumsumexp(x)
    np.testing.assert_array_equal(got[0], [-np.inf, -np.inf, 0.0, np.inf, np.inf])
    assert got[1, 0] == 1.0 and np.isnan(got[1, 1:]).all()


def _cum_extreme(x, largest):
    """torch.cummax/cummin on the last axis: a tie moves the index on; a NaN wins from then."""
    vals, idx = np.empty_like(x), np.zeros(x.shape, np.int64)
    for row in np.ndindex(x.shape[:-1]):
        best, at = x[row][0], 0
        for j, v in enumerate(x[row]):
            if np.isnan(v) or (not np.isnan(best) and (v >= best if largest else v <= best)):
                best, at = v, j
            vals[row][j], idx[row][j] = best, at
    return vals, idx


@pytest.mark.parametrize("name", ["cummax", "cummin"])
def test_cummax_cummin_values_and_indices(name):
    x = RNG.integers(0, 4, (3, 9)).astype(np.float32)
    x[1, 4] = np.nan
    v, i = getattr(P, name)(x)
    wv, wi = _cum_extreme(x, name == "cummax")
    np.testing.assert_array_equal(v, wv)
    np.testing.assert_array_equal(i, wi)
    v0, i0 = getattr(P, name)(x.T, axis=0)
    np.testing.assert_array_equal(i0, wi.T)


# -- sorting -------------------------------------------------------------------------------------

def _ties(shape, dtype="float32", seed=0):
    x = np.random.default_rng(seed).integers(-3, 4, shape).astype(dtype)
    if np.dtype(dtype).kind == "f":
        x.flat[1] = -0.0
        x.flat[5] = np.nan
    return x


@pytest.mark.parametrize("axis", [0, -1])
def test_sort_and_argsort_are_stable_with_nan_last(axis):
    x = _ties((6, 9))
    np.testing.assert_array_equal(P.sort(x, axis), np.sort(x, axis))
    want = np.argsort(x, axis=axis, kind="stable")
    np.testing.assert_array_equal(P.argsort(x, axis), want)


def test_descending_sort_puts_nan_first_and_keeps_tie_order():
    x = _ties((4, 11), seed=1)
    got = P.argsort(x, descending=True)
    for row, idx in zip(x, got):
        nan = [j for j in range(len(row)) if np.isnan(row[j])]
        rest = sorted((j for j in range(len(row)) if not np.isnan(row[j])),
                      key=lambda j: (-row[j], j))
        np.testing.assert_array_equal(idx, nan + rest)
    np.testing.assert_array_equal(P.sort(x, descending=True), np.take_along_axis(x, got, -1))


@pytest.mark.parametrize("dtype", ["int32", "float64"])
def test_topk_matches_a_stable_descending_sort(dtype):
    x = _ties((5, 12), dtype, seed=2)
    for largest in (True, False):
        v, i = P.topk(x, 4, largest=largest)
        key = [(-r if largest else r) for r in x.astype(np.float64)]
        want = np.array([sorted(range(12), key=lambda j: (np.isnan(k[j]) != largest, k[j], j))[:4]
                         for k in key])
        np.testing.assert_array_equal(i, want)
        np.testing.assert_array_equal(v, np.take_along_axis(x, want, -1))
    with pytest.raises(ParamError, match="larger than the axis"):
        P.topk(x, 13)


def test_topk_agrees_with_torch_on_distinct_values():
    torch = pytest.importorskip("torch")
    x = rand((3, 50), seed=6)
    v, i = P.topk(x, 5, dim=1)
    tv, ti = torch.topk(torch.from_numpy(x), 5, dim=1)
    np.testing.assert_array_equal(v, tv.numpy())
    np.testing.assert_array_equal(i, ti.numpy())


@pytest.mark.parametrize("n", [1, 2, 7, 64])
def test_median_like_numpy(n):
    x = rand((3, n, 2), seed=n)
    assert_close(P.median(x, axis=1), np.median(x, axis=1))
    assert_close(P.median(x), np.median(x))
    assert_close(P.median(x, axis=1, keepdims=True), np.median(x, axis=1, keepdims=True))
    x[0, 0, 0] = np.nan
    assert np.isnan(P.median(x, axis=1)[0, 0])


CALLS = {
    "all": lambda x: P.all(x > 0, axis=1),
    "any": lambda x: P.any(x, axis=0),
    "count_nonzero": lambda x: P.count_nonzero(x > 0, axis=-1),
    "vector_norm": lambda x: P.vector_norm(x, 1, axis=1),
    "nansum": lambda x: P.nansum(x, axis=1),
    "nanmean": lambda x: P.nanmean(x),
    "nanmax": lambda x: P.nanmax(x, axis=0),
    "nanmin": lambda x: P.nanmin(x, axis=1, keepdims=True),
    "cumsum": lambda x: P.cumsum(x, 0),
    "cumprod": lambda x: P.cumprod(x),
    "cummax": lambda x: P.cummax(x, 0),
    "cummin": lambda x: P.cummin(x),
    "logcumsumexp": lambda x: P.logcumsumexp(x, 1),
    "sort": lambda x: P.sort(x, 0),
    "argsort": lambda x: P.argsort(x, descending=True),
    "topk": lambda x: P.topk(x, 2),
    "median": lambda x: P.median(x, axis=1),
}


@pytest.mark.parametrize("name", sorted(CALLS))
def test_public_call_runs_traced(name):
    x = rand((4, 6), seed=8)
    want = CALLS[name](x)
    got = pypto.jit(CALLS[name])(x)
    for g, w in zip(got if isinstance(got, tuple) else (got,),
                    want if isinstance(want, tuple) else (want,)):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
