"""conv1d, conv3d, conv_transpose1d/2d and the 1-D/3-D pools against loop-by-loop NumPy written
here (independent of the ops' own references, which are checked against the same loops), at
sizes 1, odd and several vectors wide, with stride, padding, dilation and groups; and their errors.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from helpers import assert_close, rand

import pypto
import pypto.ops as P
from pypto.errors import DtypeError, ParamError, ShapeError

FLOATS = ["float32", "float64"]


def _t(v, n):
    return tuple(v) if isinstance(v, (tuple, list)) else (v,) * n


# -- direct definitions --------------------------------------------------------------------------
def direct_conv(x, w, b, stride, padding, dilation, groups):
    """out[n, o, *i] = b[o] + sum over the group's channels and taps, read where inside x."""
    nsp = x.ndim - 2
    s, p, d = _t(stride, nsp), _t(padding, nsp), _t(dilation, nsp)
    n, c, *size = x.shape
    o, cg, *ks = w.shape
    outs = [(m + 2 * pi - di * (k - 1) - 1) // si + 1 for m, k, si, pi, di in
            zip(size, ks, s, p, d)]
    og = o // groups
    out = np.zeros((n, o, *outs))
    x64, w64 = x.astype(np.float64), w.astype(np.float64)
    for oc in range(o):
        g = oc // og
        for pos in itertools.product(*(range(m) for m in outs)):
            for tap in itertools.product(*(range(k) for k in ks)):
                src = [i * si + t * di - pi for i, t, si, di, pi in zip(pos, tap, s, d, p)]
                if all(0 <= v < m for v, m in zip(src, size)):
                    xs = x64[(slice(None), slice(g * cg, (g + 1) * cg), *src)]
                    out[(slice(None), oc, *pos)] += xs @ w64[(oc, slice(None), *tap)]
    if b is not None:
        out += b.astype(np.float64).reshape((1, o) + (1,) * nsp)
    return out


@pytest.mark.parametrize("padding, pads", [("same", (1, 2)), ("valid", (0, 0))])
def test_conv2d_takes_same_and_valid_padding_as_conv1d_and_conv3d_do(padding, pads):
    x, w = rand((1, 3, 9, 8), "float32", 1), rand((4, 3, 3, 5), "float32", 2)
    got = P.conv2d(x, w, padding=padding, dilation=(1, 1))
    assert_close(got, direct_conv(x, w, None, 1, pads, 1, 1).astype(np.float32), rtol=1e-5,
                 atol=1e-5)
    with pytest.raises(ParamError, match=r"conv2d: padding='same' needs stride 1"):
        P.conv2d(x, w, padding="same", stride=2)


def direct_conv_transpose(x, w, b, stride, padding, output_padding, groups, dilation):
    """Every input x[n, c, *i] adds x * w[c, o', *k] to output i * stride + k * dil - pad."""
    nsp = x.ndim - 2
    s, p, op_, d = (_t(v, nsp) for v in (stride, padding, output_padding, dilation))
    n, c, *size = x.shape
    _, og, *ks = w.shape
    outs = [(m - 1) * si - 2 * pi + di * (k - 1) + oi + 1 for m, k, si, pi, di, oi in
            zip(size, ks, s, p, d, op_)]
    cg = c // groups
    out = np.zeros((n, og * groups, *outs))
    x64, w64 = x.astype(np.float64), w.astype(np.float64)
    for ci in range(c):
        g = ci // cg
        for pos in itertools.product(*(range(m) for m in size)):
            for tap in itertools.product(*(range(k) for k in ks)):
                dst = [i * si + t * di - pi for i, t, si, di, pi in zip(pos, tap, s, d, p)]
                if all(0 <= v < m for v, m in zip(dst, outs)):
                    contrib = np.outer(x64[(slice(None), ci, *pos)], w64[(ci, slice(None), *tap)])
                    out[(slice(None), slice(g * og, (g + 1) * og), *dst)] += contrib
    if b is not None:
        out += b.astype(np.float64).reshape((1, -1) + (1,) * nsp)
    return out


def direct_pool(kind, x, kernel, stride, padding, count_include_pad=True):
    nsp = x.ndim - 2
    k = _t(kernel, nsp)
    s = k if stride is None else _t(stride, nsp)
    p = _t(padding, nsp)
    n, c, *size = x.shape
    outs = [(m + 2 * pi - ki) // si + 1 for m, ki, si, pi in zip(size, k, s, p)]
    out = np.zeros((n, c, *outs))
    for pos in itertools.product(*(range(m) for m in outs)):
        lo = [i * si - pi for i, si, pi in zip(pos, s, p)]
        hi = [v + ki for v, ki in zip(lo, k)]
        inside = tuple(slice(max(a, 0), min(bb, m)) for a, bb, m in zip(lo, hi, size))
        win = x[(slice(None), slice(None), *inside)].astype(np.float64).reshape(n, c, -1)
        if kind == "max":           # padding (-inf) never wins: the max of the inside
            val = win.max(axis=-1)
        else:
            div = np.prod(k) if count_include_pad else win.shape[-1]
            val = win.sum(axis=-1) / div
        out[(slice(None), slice(None), *pos)] = val
    return out


# -- convolutions --------------------------------------------------------------------------------
CONV1D = [
    # (N, C, L, O, K, stride, padding, dilation, groups)
    (1, 1, 1, 1, 1, 1, 0, 1, 1),
    (2, 3, 7, 4, 3, 1, 1, 1, 1),
    (1, 4, 1000, 20, 5, 1, 2, 1, 1),
    (3, 6, 37, 9, 4, 2, 3, 2, 3),
    (2, 8, 127, 8, 3, 3, 0, 4, 8),
    (1, 2, 5, 3, 5, 1, 0, 1, 1),
    (1, 16, 64, 32, 3, 1, "same", 1, 1),
    (3, 40, 700, 24, 3, 1, 1, 1, 1),       # tasks of position chunks, a guarded last chunk
    (1, 8, 2050, 13, 7, 2, 3, 1, 1),       # seven taps unrolled, stride 2, one sample
]


@pytest.mark.parametrize("dt", FLOATS)
@pytest.mark.parametrize("case", CONV1D, ids=str)
def test_conv1d_matches_the_direct_sum(case, dt):
    n, c, length, o, k, s, p, d, g = case
    x, w, b = rand((n, c, length), dt, 1), rand((o, c // g, k), dt, 2), rand((o,), dt, 3)
    got = P.conv1d(x, w, b, stride=s, padding=p, dilation=d, groups=g)
    pad = d * (k - 1) // 2 if p == "same" else p
    want = direct_conv(x, w, b, s, pad, d, g)
    assert got.dtype == np.dtype(dt)
    assert_close(got, want, dt)
    assert_close(P.conv1d.reference(x, w, b, stride=s, padding=p, dilation=d, groups=g), want, dt)


CONV3D = [
    # (N, C, (D, H, W), O, (KD, KH, KW), stride, padding, dilation, groups)
    (1, 1, (1, 1, 1), 1, (1, 1, 1), 1, 0, 1, 1),
    (2, 3, (4, 5, 6), 4, (3, 3, 3), 1, 1, 1, 1),
    (1, 4, (3, 7, 40), 6, (2, 3, 3), (1, 2, 1), (1, 0, 2), (1, 1, 2), 2),
    (1, 2, (5, 4, 3), 2, (3, 1, 2), 2, (1, 0, 0), (2, 1, 1), 2),
]


@pytest.mark.parametrize("dt", FLOATS)
@pytest.mark.parametrize("case", CONV3D, ids=str)
def test_conv3d_matches_the_direct_sum(case, dt):
    n, c, size, o, ks, s, p, d, g = case
    x, w, b = rand((n, c, *size), dt, 1), rand((o, c // g, *ks), dt, 2), rand((o,), dt, 3)
    got = P.conv3d(x, w, b, stride=s, padding=p, dilation=d, groups=g)
    want = direct_conv(x, w, b, s, p, d, g)
    assert_close(got, want, dt)
    assert_close(P.conv3d.reference(x, w, b, stride=s, padding=p, dilation=d, groups=g), want, dt)


CONVT1D = [
    # (N, C, L, OG, K, stride, padding, output_padding, groups, dilation)
    (1, 1, 1, 1, 1, 1, 0, 0, 1, 1),
    (2, 3, 7, 4, 3, 1, 1, 0, 1, 1),
    (2, 4, 9, 3, 4, 2, 1, 1, 1, 1),
    (3, 6, 13, 2, 5, 3, 2, 2, 3, 2),
    (1, 8, 300, 5, 3, 2, 0, 0, 2, 3),
    (1, 2, 4, 2, 2, 4, 0, 3, 1, 1),     # taps never reach some phases: bias only there
]


@pytest.mark.parametrize("dt", FLOATS)
@pytest.mark.parametrize("case", CONVT1D, ids=str)
def test_conv_transpose1d_matches_the_scatter_definition(case, dt):
    n, c, length, og, k, s, p, op_, g, d = case
    x, w, b = rand((n, c, length), dt, 1), rand((c, og, k), dt, 2), rand((og * g,), dt, 3)
    kw = dict(stride=s, padding=p, output_padding=op_, groups=g, dilation=d)
    got = P.conv_transpose1d(x, w, b, **kw)
    want = direct_conv_transpose(x, w, b, s, p, op_, g, d)
    assert_close(got, want, dt)
    assert_close(P.conv_transpose1d.reference(x, w, b, **kw), want, dt)


CONVT2D = [
    # (N, C, (H, W), OG, (KH, KW), stride, padding, output_padding, groups, dilation)
    (1, 1, (1, 1), 1, (1, 1), 1, 0, 0, 1, 1),
    (1, 4, (6, 7), 3, (4, 4), 2, 1, 0, 1, 1),
    (2, 4, (5, 9), 3, (3, 2), (3, 1), (1, 0), (2, 0), 2, (1, 2)),
    (1, 3, (4, 33), 2, (3, 3), (2, 2), 1, 1, 1, 1),
    (1, 2, (3, 3), 16, (2, 3), 1, (1, 2), 0, 1, 2),
]


CONVT2D_STRIDE1 = [
    # Stride 1 runs conv2d's register-blocked schedule: tails in every tile dimension (13 rows
    # against pairs, 21 columns against vectors of 8, 10 channels against blocks of 6), two
    # images, groups, dilation, padding wider than the kernel reach, an image under a vector.
    (2, 16, (13, 21), 10, (3, 3), 1, 1, 0, 1, 1),
    (1, 8, (9, 17), 6, (3, 3), 1, 1, 0, 2, 1),
    (1, 4, (7, 12), 5, (3, 2), 1, 0, 0, 1, (2, 1)),
    (1, 4, (10, 11), 3, (3, 3), 1, (2, 1), 0, 1, 1),
    (1, 3, (5, 3), 2, (2, 2), 1, 0, 0, 1, 1),
]


@pytest.mark.parametrize("dt", FLOATS)
@pytest.mark.parametrize("case", CONVT2D + CONVT2D_STRIDE1, ids=str)
def test_conv_transpose2d_matches_the_scatter_definition(case, dt):
    n, c, size, og, ks, s, p, op_, g, d = case
    x, w, b = rand((n, c, *size), dt, 1), rand((c, og, *ks), dt, 2), rand((og * g,), dt, 3)
    kw = dict(stride=s, padding=p, output_padding=op_, groups=g, dilation=d)
    got = P.conv_transpose2d(x, w, b, **kw)
    want = direct_conv_transpose(x, w, b, s, p, op_, g, d)
    assert_close(got, want, dt)
    assert_close(P.conv_transpose2d.reference(x, w, b, **kw), want, dt)


def test_conv_transpose2d_stride1_specials_stay_where_they_reach():
    # A NaN or inf input reaches exactly the outputs its taps touch; the rest stay finite.
    x = rand((1, 4, 9, 10), "float32", 7)
    x[0, 1, 4, 5] = np.nan
    x[0, 2, 0, 0] = np.inf
    w = np.abs(rand((4, 3, 3, 3), "float32", 8)) + 0.1
    got = P.conv_transpose2d(x, w, padding=1)
    reach = np.zeros((9, 10), bool)
    reach[3:6, 4:7] = True
    assert np.isnan(got[0, :, 3:6, 4:7]).all()
    assert np.isposinf(got[0, :, 0:2, 0:2]).all()
    inf_reach = np.zeros((9, 10), bool)
    inf_reach[0:2, 0:2] = True
    assert np.isfinite(got[0][:, ~(reach | inf_reach)]).all()


def test_conv_transpose_is_the_adjoint_of_conv():
    # <conv(x), y> == <x, conv_transpose(y)> for the same weights, stride, padding, dilation.
    x, w = rand((2, 3, 11, 10), "float64", 1), rand((4, 3, 3, 2), "float64", 2)
    kw = dict(stride=(2, 3), padding=(1, 1), dilation=(2, 1))
    y = P.conv2d(x, w, **kw)
    z = rand(y.shape, "float64", 3)
    # output_padding restores the input rows and columns that the stride's rounding drops.
    extra = tuple((n + 2 * p - d * (k - 1) - 1) % s for n, k, s, p, d in
                  zip(x.shape[2:], w.shape[2:], kw["stride"], kw["padding"], kw["dilation"]))
    back = P.conv_transpose2d(z, w, output_padding=extra, **kw)
    assert back.shape == x.shape and extra == (0, 1)
    np.testing.assert_allclose(np.vdot(y, z), np.vdot(x, back), rtol=1e-10)


def test_unbatched_inputs_views_and_no_bias():
    x, w = rand((3, 20), "float32", 1), rand((5, 3, 3), "float32", 2)
    assert_close(P.conv1d(x, w, padding=1), direct_conv(x[None], w, None, 1, 1, 1, 1)[0],
                 "float32")
    xs = rand((2, 3, 41), "float32", 4)[:, :, ::2]       # a strided view
    assert_close(P.conv1d(xs, w), direct_conv(np.ascontiguousarray(xs), w, None, 1, 0, 1, 1),
                 "float32")
    x3, w3 = rand((2, 4, 5, 6), "float64", 1), rand((3, 2, 2, 2, 2), "float64", 2)
    assert_close(P.conv3d(x3, w3), direct_conv(x3[None], w3, None, 1, 0, 1, 1)[0])
    xt, wt = rand((2, 6), "float32", 1), rand((2, 3, 3), "float32", 2)
    assert_close(P.conv_transpose1d(xt, wt, stride=2),
                 direct_conv_transpose(xt[None], wt, None, 2, 0, 0, 1, 1)[0], "float32")
    x2 = rand((3, 4, 5), "float32", 1).transpose(0, 2, 1)   # [C, H, W] view, unbatched
    w2 = rand((3, 2, 2, 2), "float32", 2)
    assert_close(P.conv_transpose2d(x2, w2),
                 direct_conv_transpose(np.ascontiguousarray(x2)[None], w2, None, 1, 0, 0, 1,
                                       1)[0], "float32")


def test_conv_ops_run_traced():
    x, w = rand((2, 3, 12), "float32", 1), rand((4, 3, 3), "float32", 2)
    f = pypto.jit(lambda x, w: P.conv1d(x, w, padding=1) * 2.0)
    assert_close(f(x, w), 2 * direct_conv(x, w, None, 1, 1, 1, 1), "float32")
    xt, wt = rand((1, 2, 4, 5), "float32", 1), rand((2, 3, 3, 3), "float32", 2)
    g = pypto.jit(lambda x, w: P.conv_transpose2d(x, w, stride=2))
    assert_close(g(xt, wt), direct_conv_transpose(xt, wt, None, 2, 0, 0, 1, 1), "float32")


X1 = np.ones((1, 4, 9), np.float32)
W1 = np.ones((2, 4, 3), np.float32)


@pytest.mark.parametrize("call, err, match", [
    (lambda: P.conv1d(np.ones((1, 4, 9, 9), np.float32), W1), ShapeError,
     r"conv1d: x must be 3-D \[N, C, L\] \(or 2-D \[C, L\] for one unbatched sample\), "
     r"got shape \(1, 4, 9, 9\)"),
    (lambda: P.conv1d(X1, W1[0]), ShapeError, r"conv1d: w must be 3-D \[O, C/groups, K\]"),
    (lambda: P.conv1d(X1, np.ones((2, 3, 3), np.float32)), ShapeError,
     r"conv1d: x has C=4 channels but w expects 3 x groups=1 = 3"),
    (lambda: P.conv1d(X1, np.ones((3, 2, 3), np.float32), groups=2), ParamError,
     r"conv1d: groups=2 must divide both the input channels C=4 and the output channels O=3"),
    (lambda: P.conv1d(X1, np.ones((2, 4, 12), np.float32)), ShapeError,
     r"conv1d: the output would be -2; the padded input 9 is smaller than the \(dilated\) "
     r"kernel window 12"),
    (lambda: P.conv1d(X1, W1.astype(np.float64)), DtypeError,
     r"conv1d: 'w' is float64 but 'x' is float32; give all arrays one dtype"),
    (lambda: P.conv1d(X1.astype(np.int32), W1), DtypeError,
     r"conv1d: 'x' has dtype int32; expected float32 or float64"),
    (lambda: P.conv1d(X1, W1, np.ones(3, np.float32)), ShapeError,
     r"conv1d: bias must have shape \(2,\)"),
    (lambda: P.conv1d(X1, W1, padding="full"), ParamError,
     r"conv1d: 'padding' must be an int, a sequence of 1 ints, 'valid' or 'same'"),
    (lambda: P.conv1d(X1, W1, padding="same", stride=2), ParamError,
     r"conv1d: padding='same' needs stride 1"),
    (lambda: P.conv1d(X1, W1, stride=0), ParamError, r"conv1d: 'stride' must be >= 1"),
    (lambda: P.conv1d(X1, W1, dilation=(1, 2)), ParamError,
     r"conv1d: 'dilation' must be an int, got \(1, 2\)"),
    (lambda: P.conv1d(X1, W1, groups=0), ParamError, r"conv1d: 'groups' must be a positive int"),
    (lambda: P.conv3d(np.ones((1, 3, 3, 3, 3), np.float32), np.ones((1, 2, 1, 1, 1), np.float32)),
     ShapeError, r"conv3d: x has C=3 channels but w expects 2 x groups=1 = 2 \(w is "
     r"\[O, C/groups, KD, KH, KW\]\)"),
    (lambda: P.conv3d(np.ones((2, 3), np.float32), np.ones((1, 2, 1, 1, 1), np.float32)),
     ShapeError, r"conv3d: x must be 5-D \[N, C, D, H, W\] \(or 4-D \[C, D, H, W\]"),
    (lambda: P.conv3d(np.ones((1, 2, 3, 3, 3), np.float32), np.ones((1, 2, 1, 1, 1), np.float32),
                      padding=(1, 1)), ParamError,
     r"conv3d: 'padding' must be an int or a sequence of 3 ints, got \(1, 1\)"),
    (lambda: P.conv_transpose1d(X1, np.ones((4, 2, 3), np.float32), stride=2,
                                output_padding=2), ParamError,
     r"conv_transpose1d: output_padding 2 must be smaller than stride 2 or dilation 1"),
    (lambda: P.conv_transpose1d(X1, np.ones((3, 2, 3), np.float32)), ShapeError,
     r"conv_transpose1d: w has 3 input channels \(axis 0\) but x has C=4; w is "
     r"\[C, O/groups, K\]"),
    (lambda: P.conv_transpose1d(X1, np.ones((4, 2, 3), np.float32), groups=3), ParamError,
     r"conv_transpose1d: groups=3 must divide the input channels C=4"),
    (lambda: P.conv_transpose1d(X1, np.ones((4, 2, 3), np.float32), np.ones(2, np.float32),
                                groups=2), ShapeError,
     r"conv_transpose1d: bias must have shape \(4,\) \(w.shape\[1\] x groups output channels\)"),
    (lambda: P.conv_transpose2d(np.ones((1, 2, 3, 3), np.float32),
                                np.ones((2, 1, 2, 2), np.float32), padding=3), ShapeError,
     r"conv_transpose2d: the output would be -2 x -2; reduce 'padding'"),
    (lambda: P.conv_transpose2d(np.ones((1, 2, 3, 3), np.float32),
                                np.ones((2, 1, 2), np.float32)), ShapeError,
     r"conv_transpose2d: w must be 4-D \[C, O/groups, KH, KW\]"),
])
def test_conv_errors_name_the_problem(call, err, match):
    with pytest.raises(err, match=match):
        call()


# -- pooling -------------------------------------------------------------------------------------
POOL1D = [
    # (N, C, L, kernel, stride, padding)
    (1, 1, 1, 1, None, 0),
    (2, 3, 7, 2, None, 0),
    (2, 3, 7, 3, 2, 1),
    (1, 5, 1000, 4, 3, 2),
    (3, 2, 127, 5, 1, 2),
]


@pytest.mark.parametrize("dt", FLOATS)
@pytest.mark.parametrize("case", POOL1D, ids=str)
def test_pool1d_matches_the_direct_windows(case, dt):
    n, c, length, k, s, p = case
    x = rand((n, c, length), dt, 1)
    assert_close(P.max_pool1d(x, k, s, p), direct_pool("max", x, k, s, p), dt)
    for include in (True, False):
        want = direct_pool("avg", x, k, s, p, include)
        assert_close(P.avg_pool1d(x, k, s, p, count_include_pad=include), want, dt)
        assert_close(P.avg_pool1d.reference(x, k, s, p, count_include_pad=include), want, dt)
    assert_close(P.max_pool1d.reference(x, k, s, p), direct_pool("max", x, k, s, p), dt)


POOL3D = [
    # (N, C, (D, H, W), kernel, stride, padding)
    (1, 1, (1, 1, 1), 1, None, 0),
    (2, 3, (4, 6, 8), 2, None, 0),
    (1, 2, (5, 7, 9), (2, 3, 3), (1, 2, 3), (1, 1, 0)),
    (1, 3, (3, 4, 50), 3, 1, 1),
]


@pytest.mark.parametrize("dt", FLOATS)
@pytest.mark.parametrize("case", POOL3D, ids=str)
def test_pool3d_matches_the_direct_windows(case, dt):
    n, c, size, k, s, p = case
    x = rand((n, c, *size), dt, 1)
    assert_close(P.max_pool3d(x, k, s, p), direct_pool("max", x, k, s, p), dt)
    for include in (True, False):
        want = direct_pool("avg", x, k, s, p, include)
        assert_close(P.avg_pool3d(x, k, s, p, count_include_pad=include), want, dt)


def test_max_pool_propagates_nan_and_pools_unbatched_views():
    x = rand((2, 3, 10), "float32", 1)
    x[1, 2, 4] = np.nan
    got = P.max_pool1d(x, 3, 2)
    assert np.isnan(got[1, 2, 1]) and np.isnan(got[1, 2, 2])
    assert np.isfinite(np.delete(got.reshape(-1), [1 * 12 + 2 * 4 + 1, 1 * 12 + 2 * 4 + 2])).all()
    v = rand((3, 4, 6, 10), "float64", 2)[:, :, :, ::2]      # unbatched [C, D, H, W] view
    want = direct_pool("avg", np.ascontiguousarray(v)[None], 2, None, 0)[0]
    assert_close(P.avg_pool3d(v, 2), want, "float64")


X3 = np.ones((1, 2, 4, 4, 4), np.float32)


@pytest.mark.parametrize("call, err, match", [
    (lambda: P.max_pool1d(X1, 3, padding=2), ParamError,
     r"max_pool1d: 'padding' must be at most half of kernel_size \(3,\)"),
    (lambda: P.max_pool3d(X3, 5), ShapeError,
     r"max_pool3d: the output would be 0 x 0 x 0; the padded input 4 x 4 x 4 is smaller than "
     r"the kernel 5 x 5 x 5"),
    (lambda: P.max_pool3d(X3, 2, ceil_mode=1), ParamError,
     r"max_pool3d: 'ceil_mode' must be a bool, got 1"),
    (lambda: P.max_pool3d(X3, 7, 2, ceil_mode=True), ShapeError,
     r"max_pool3d: the output would be 0 x 0 x 0 with ceil_mode=True; the padded input "
     r"4 x 4 x 4 must be longer than the kernel 7 x 7 x 7 less the stride 2 x 2 x 2"),
    (lambda: P.max_pool1d(X1, 3, padding=2, ceil_mode=True), ParamError,
     r"max_pool1d: 'padding' must be at most half of kernel_size \(3,\)"),
    (lambda: P.avg_pool1d(X1.astype(np.int64), 2, ceil_mode=True), DtypeError,
     r"avg_pool1d: 'x' has dtype int64; expected float32 or float64"),
    (lambda: P.avg_pool1d(X1, 2, count_include_pad=1), ParamError,
     r"avg_pool1d: 'count_include_pad' must be a bool"),
    (lambda: P.max_pool3d(X1, 2), ShapeError,
     r"max_pool3d: x must be 5-D \[N, C, D, H, W\] \(or 4-D \[C, D, H, W\] for one unbatched "
     r"sample\), got shape \(1, 4, 9\)"),
    (lambda: P.max_pool3d(X3, (2, 2)), ParamError,
     r"max_pool3d: 'kernel_size' must be an int or a sequence of 3 ints"),
    (lambda: P.avg_pool1d(X1.astype(np.int64), 2), DtypeError,
     r"avg_pool1d: 'x' has dtype int64; expected float32 or float64"),
    (lambda: P.max_pool1d.kernel(X1, kernel=3, pad=2), ParamError,
     r"max_pool1d: padding \(2,\) must be at most half of the kernel \(3,\)"),
])
def test_pool_errors_name_the_problem(call, err, match):
    with pytest.raises(err, match=match):
        call()


# -- GPU (OpenCL through PoCL): the every-op GPU test runs default parameters (stride 1); the
# phase-split transposed convolutions and strided, padded windows run here.
def _opencl():
    from helpers import opencl_device

    return opencl_device()


GPU_CASES = [
    ("conv_transpose2d", {"stride_h": 2, "stride_w": 3, "pad_h": 1, "out_pad_w": 1, "groups": 2},
     {"N": 1, "C": 4, "H": 5, "W": 6, "OG": 3, "O": 6, "KH": 4, "KW": 3}),
    ("conv_transpose1d", {"stride": 2, "pad": 1, "dil": 2},
     {"N": 2, "C": 3, "L": 7, "OG": 2, "O": 2, "K": 3}),
    ("conv3d", {"stride_d": 2, "pad_h": 1, "groups": 2},
     {"N": 1, "C": 4, "D": 5, "H": 6, "W": 7, "O": 4, "CG": 2, "KD": 2, "KH": 3, "KW": 3}),
    ("avg_pool3d", {"kernel_d": 3, "kernel_h": 3, "kernel_w": 3, "pad_d": 1, "pad_h": 1,
                    "pad_w": 1, "count_include_pad": False, "stride_w": 2},
     {"N": 1, "C": 2, "D": 4, "H": 5, "W": 6}),
    ("max_pool1d", {"kernel": 3, "stride": 2, "pad": 1}, {"N": 2, "C": 3, "L": 11}),
]


@pytest.mark.opencl
@pytest.mark.parametrize("name, params, shape", GPU_CASES, ids=[c[0] for c in GPU_CASES])
def test_strided_and_phased_kernels_on_opencl(name, params, shape):
    if not _opencl():
        pytest.skip("needs an OpenCL device (PoCL)")
    from pypto.infra.inputs import complete_dims, make_inputs
    from pypto.runtime import observe

    op = pypto.get_op(name)
    params = op.resolve_params(params)
    dims = complete_dims(op, shape, params)
    ins = make_inputs(op, op.dtypes[0], dims, params)
    with observe() as calls, pypto.target("opencl"):
        got = op.kernel(*ins, **params)
    assert "opencl" in calls[-1][4].target
    assert_close(got, op.kernel_ref(*ins, **params), "float32")
