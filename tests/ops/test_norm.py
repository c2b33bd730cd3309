"""Normalizations (softmax, log_softmax, layer_norm, rms_norm, batch_norm) against NumPy."""

from __future__ import annotations

import numpy as np
import pytest

import pypto.ops as P
from helpers import ODD_SIZES, assert_close, rand
from pypto.errors import DtypeError, ParamError, ShapeError

SOFTMAXES = ["softmax", "log_softmax"]


def check(name, *args, **kw):
    op = getattr(P, name)
    got = op(*args, **kw)
    with np.errstate(all="ignore"):
        want = op.reference(*args, **kw)
    assert got.dtype == want.dtype
    assert_close(got, want, err_msg=f"{name} {np.shape(args[0])} {kw}")
    return got


# -- softmax and log_softmax ---------------------------------------------------------------------

@pytest.mark.parametrize("name", SOFTMAXES)
def test_softmax_odd_sizes(name):
    for c in ODD_SIZES:
        check(name, rand((5, c), seed=c, low=-5, high=5))
    check(name, rand((1000, 7), low=-5, high=5))
    check(name, rand((200, 127), low=-5, high=5))


@pytest.mark.parametrize("name", SOFTMAXES)
def test_softmax_axes_and_views(name):
    x = rand((4, 6, 37), low=-3, high=3)
    for axis in (0, 1, -1, 2, -3):
        check(name, x, axis=axis)
    base = rand((64, 80), low=-3, high=3)
    check(name, base.T)
    check(name, base[::2, 1::3], axis=-1)
    check(name, rand((37,)))  # 1-D
    check(name, [1.0, 2.0, 3.0])


@pytest.mark.parametrize("name", SOFTMAXES)
def test_softmax_float64(name):
    x = rand((33, 200), "float64", low=-10, high=10)
    check(name, x)
    check(name, x, axis=0)


@pytest.mark.parametrize("name", SOFTMAXES)
def test_softmax_is_stable_and_handles_special_values(name):
    big = np.array([[1000.0, 1001.0, 999.0] * 11, [-1000.0, -1001.0, -999.0] * 11], np.float32)
    got = check(name, big)
    assert np.all(np.isfinite(got))
    rows = rand((6, 40), low=-2, high=2)
    rows[0, 5] = np.nan          # NaN anywhere: the row is NaN
    rows[1, 39] = np.inf         # +inf: the NumPy formula gives NaN
    rows[2, :] = -np.inf         # all -inf: NaN
    rows[3, [0, 17, 33]] = -np.inf  # masked entries: exactly 0 (log: -inf)
    rows[4, 0] = 88.0            # exp(88) is near the float32 limit but x - max stays <= 0
    got = check(name, rows)
    assert np.all(np.isnan(got[:3]))
    if name == "softmax":
        assert np.all(got[3, [0, 17, 33]] == 0)
        assert_close(got.sum(axis=1)[3:], np.ones(3), rtol=1e-5)
    else:
        assert np.all(got[3, [0, 17, 33]] == -np.inf)



@pytest.mark.parametrize("dtype, shape", [("float32", (37, 1031)), ("float64", (29, 600))])
def test_softmax_blocks_of_long_rows(dtype, shape):
    # Rows of >= 4 KiB in parallel blocks (here of 15 and 27 rows, the last block partial): the
    # default schedule computes softmax's statistics and exponentials a whole block at a time.
    x = rand(shape, dtype, seed=4, low=-30, high=30)
    x[3, 100] = np.nan
    x[16, :] = -np.inf
    x[17, ::7] = -np.inf
    x[30 if shape[0] > 30 else 20, 0] = np.inf
    for name in SOFTMAXES:
        got = check(name, x)
        assert np.all(np.isnan(got[[3, 16]]))
        assert np.all(np.isfinite(got[[0, 15, shape[0] - 1]]))
    got = P.softmax(x)
    assert np.all(got[17, ::7] == 0)
    assert_close(got.astype(np.float64).sum(axis=1)[[0, 17, shape[0] - 1]], np.ones(3), rtol=1e-5)


def test_softmax_long_rows():
    x = rand((2, 2**20 + 3), low=-20, high=20, seed=5)
    got = check("softmax", x)
    assert_close(got.astype(np.float64).sum(axis=1), np.ones(2), rtol=1e-5)
    check("log_softmax", x)


# -- layer_norm and rms_norm ---------------------------------------------------------------------

def test_layer_norm_shapes_and_optional_affine():
    for c in ODD_SIZES[1:]:  # a single feature has zero variance: (x - mean) is 0
        x = rand((9, c), seed=c)
        g, b = rand((c,), seed=1), rand((c,), seed=2)
        check("layer_norm", x, g, b)
    x = rand((3, 4, 127))
    g, b = rand((127,), seed=1), rand((127,), seed=2)
    check("layer_norm", x, g, b)
    check("layer_norm", x, None, b)
    check("layer_norm", x, g)
    check("layer_norm", x)
    check("layer_norm", x, gamma=g, beta=b, eps=1e-2)
    check("layer_norm", rand((1000, 7), "float64"), [0.5 * i for i in range(7)], None)  # a list
    check("layer_norm", rand((200, 128)).T, rand((200,)), rand((200,)))  # a transposed view
    one = check("layer_norm", rand((4, 1)))
    assert np.all(one == 0)


def test_layer_norm_float64_and_offset_rows():
    x = rand((17, 300), "float64")
    check("layer_norm", x, rand((300,), "float64"), rand((300,), "float64"))
    # A large common offset must not swamp the variance (two-pass statistics).
    y = rand((4, 2**16 + 1), seed=3) + np.float32(1000.0)
    got = P.layer_norm(y)
    y64 = y.astype(np.float64)
    want = (y64 - y64.mean(-1, keepdims=True)) / np.sqrt(y64.var(-1, keepdims=True) + 1e-5)
    assert_close(got, want, rtol=1e-3, atol=1e-3)  # the inputs themselves are float32-rounded



def test_layer_norm_float32_statistics_hold_at_one_ulp_of_spread():
    # Rows 4096 +- one ulp: the mean is exactly 4096 and the variance exactly ulp**2, so with eps=0
    # every output is exactly +-1. Sums of squares of the raw values (2**24 each) in float64 would
    # lose the ulp**2 terms entirely; the float32 one-pass form sums squares of x - x[0] instead.
    ulp = np.spacing(np.float32(4096.0))
    signs = np.tile(np.array([1.0, -1.0], np.float32), (3, 2048))
    signs[1] = -signs[1]
    signs[2, :1024] *= -1  # the first element is not the first of a +- pair
    x = np.float32(4096.0) + signs * ulp
    assert_close(P.layer_norm(x, eps=0.0), signs)
    # An outlier first element (the shift) and a constant row (variance exactly 0: out is beta).
    y = rand((3, 1000), seed=9)
    y[0, 0] = 1e4
    y[1, 0] = -3e3
    y[2] = np.float32(7.5)
    g, b = rand((1000,), seed=1), rand((1000,), seed=2)
    got = P.layer_norm(y, g, b)
    y64 = y.astype(np.float64)
    want = ((y64 - y64.mean(-1, keepdims=True)) / np.sqrt(y64.var(-1, keepdims=True) + 1e-5)
            * g + b)
    assert_close(got, want.astype(np.float32))
    assert np.array_equal(got[2], b)
    # NaN or +-inf as the first element (the shift itself) makes the row NaN, as the reference does.
    z = rand((4, 64), seed=3)
    z[0, 0], z[1, 0], z[2, 0], z[3, 63] = np.nan, np.inf, -np.inf, -np.inf
    got = check("layer_norm", z, g[:64], b[:64])
    assert np.all(np.isnan(got))


def test_rms_norm():
    for c in ODD_SIZES:
        x = rand((9, c), seed=c)
        check("rms_norm", x, rand((c,), seed=1))
    x = rand((2, 3, 127), "float64")
    check("rms_norm", x, rand((127,), "float64"))
    check("rms_norm", x)
    check("rms_norm", x, None, eps=0.5)
    check("rms_norm", rand((300, 129))[:, ::2], rand((65,)))
    zero = P.rms_norm(np.zeros((2, 8), np.float32))
    assert np.all(zero == 0)


def test_norms_propagate_nan_and_inf():
    x = rand((4, 50))
    x[1, 7] = np.nan
    x[2, 3] = np.inf
    g, b = rand((50,), seed=1), rand((50,), seed=2)
    ln = check("layer_norm", x, g, b)
    rms = check("rms_norm", x, g)
    assert np.all(np.isnan(ln[1:3])) and np.all(np.isfinite(ln[[0, 3]]))
    assert np.all(np.isnan(rms[1])) and np.all(np.isfinite(rms[[0, 3]]))


# -- batch_norm ----------------------------------------------------------------------------------

def _stats(c, dtype="float32"):
    return (rand((c,), dtype, 1), rand((c,), dtype, 2, low=0.1, high=2.0),
            rand((c,), dtype, 3), rand((c,), dtype, 4))


def test_batch_norm_shapes():
    for shape in [(8, 3), (1000, 7), (2, 3, 5, 7), (4, 16, 9, 9), (3, 5, 127), (2, 1, 1, 1)]:
        x = rand(shape, seed=shape[0])
        check("batch_norm", x, *_stats(shape[1]))
    x = rand((2, 3, 4, 5), "float64")
    mean, var, g, b = _stats(3, "float64")
    check("batch_norm", x, mean, var, g, b)
    check("batch_norm", x, mean, var)
    check("batch_norm", x, mean, var, beta=b, eps=0.1)
    check("batch_norm", np.transpose(rand((5, 4, 3, 2)), (3, 2, 1, 0)), *_stats(3))
    check("batch_norm", rand((64, 40))[::4, ::5], *_stats(8))


def test_batch_norm_large_mean():
    # (x - mean) is formed before scaling, so a large mean does not cost precision.
    x = rand((2, 3, 8, 8)) * np.float32(0.01) + np.float32(1000.0)
    mean = np.full(3, 1000.0, np.float32)
    var = np.full(3, 1e-4, np.float32)
    check("batch_norm", x, mean, var, eps=0.0)


# -- errors --------------------------------------------------------------------------------------

def test_errors():
    x = rand((3, 4))
    for name in SOFTMAXES:
        with pytest.raises(ParamError, match=r"'axis' must be in \[-2, 1\] for an input of rank 2, got 2"):
            getattr(P, name)(x, axis=2)
        with pytest.raises(ParamError, match="axis"):
            getattr(P, name)(x, axis=None)
        with pytest.raises(ShapeError, match="0-D"):
            getattr(P, name)(np.float32(1.0))
        with pytest.raises(DtypeError, match="float32"):
            getattr(P, name)(np.ones((2, 2), np.int32))
    with pytest.raises(ShapeError, match=r"'weight' must have the normalized shape \[4\], got \[5\]"):
        P.layer_norm(x, np.ones(5, np.float32))
    with pytest.raises(DtypeError, match="gamma"):
        P.layer_norm(x, np.ones(4, np.float64))
    with pytest.raises(ParamError, match="eps"):
        P.layer_norm(x, eps=-1.0)
    with pytest.raises(ParamError, match="eps"):
        P.rms_norm(x, eps="small")
    with pytest.raises(ShapeError, match=r"'weight' must have the normalized shape \[4\]"):
        P.rms_norm(x, np.ones((2, 4), np.float32))
    with pytest.raises(ShapeError, match="0-D"):
        P.layer_norm(np.float32(1.0))
    mean, var, g, b = _stats(4)
    with pytest.raises(ShapeError, match="at least 2-D"):
        P.batch_norm(np.ones(4, np.float32), mean, var)
    with pytest.raises(ShapeError, match="dim C"):
        P.batch_norm(np.ones((2, 3, 5), np.float32), mean, var)
    with pytest.raises(DtypeError, match="var"):
        P.batch_norm(np.ones((2, 4), np.float32), mean, var.astype(np.float64))
    with pytest.raises(ParamError, match="eps"):
        P.batch_norm(np.ones((2, 4), np.float32), mean, var, eps=float("inf"))


def test_kernel_form_matches_reference():
    x = rand((200, 127))
    g, b = rand((127,), seed=1), rand((127,), seed=2)
    assert_close(P.softmax.kernel(x), P.softmax.kernel_ref(x))
    assert_close(P.log_softmax.kernel(x), P.log_softmax.kernel_ref(x))
    assert_close(P.layer_norm.kernel(x, g, b), P.layer_norm.kernel_ref(x, g, b))
    assert_close(P.rms_norm.kernel(x, g), P.rms_norm.kernel_ref(x, g))
    x3 = rand((2, 4, 9))
    assert_close(P.batch_norm.kernel(x3, *_stats(4)), P.batch_norm.kernel_ref(x3, *_stats(4)))
