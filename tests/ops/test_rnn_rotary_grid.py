"""gru_cell, rnn_cell, rotary_embedding, affine_grid and grid_sample against NumPy written here
from the documented formulas (gate by gate, pair by pair, pixel by pixel), independent of the
ops' own references; and their errors."""

from __future__ import annotations

import math

import numpy as np
import pytest
from helpers import assert_close, rand

import pypto
import pypto.ops as P
from pypto.errors import DtypeError, ParamError, ShapeError

FLOATS = ["float32", "float64"]


def _sigmoid(v):
    with np.errstate(over="ignore"):
        return 1.0 / (1.0 + np.exp(-v))


# -- recurrent cells -------------------------------------------------------------------------------
def gru_step(x, h, w_ih, w_hh, b_ih, b_hh):
    """torch.nn.GRUCell's documented equations, one gate matrix at a time, in float64."""
    x, h = x.astype(np.float64), h.astype(np.float64)
    hid = h.shape[-1]

    def lin(w, b, v, g):
        rows = slice(g * hid, (g + 1) * hid)
        out = v @ w.astype(np.float64)[rows].T
        return out if b is None else out + b.astype(np.float64)[rows]
    r = _sigmoid(lin(w_ih, b_ih, x, 0) + lin(w_hh, b_hh, h, 0))
    z = _sigmoid(lin(w_ih, b_ih, x, 1) + lin(w_hh, b_hh, h, 1))
    n = np.tanh(lin(w_ih, b_ih, x, 2) + r * lin(w_hh, b_hh, h, 2))
    return (1 - z) * n + z * h


CELLS = [(1, 1, 1), (2, 3, 4), (5, 7, 3), (3, 100, 37), (4, 33, 64)]   # (B, IN, HID)


@pytest.mark.parametrize("dt", FLOATS)
@pytest.mark.parametrize("b, i, h", CELLS)
def test_gru_cell_matches_the_gate_equations(b, i, h, dt):
    x, hx = rand((b, i), dt, 1), rand((b, h), dt, 2)
    w_ih, w_hh = rand((3 * h, i), dt, 3), rand((3 * h, h), dt, 4)
    b_ih, b_hh = rand((3 * h,), dt, 5), rand((3 * h,), dt, 6)
    want = gru_step(x, hx, w_ih, w_hh, b_ih, b_hh)
    got = P.gru_cell(x, hx, w_ih, w_hh, b_ih, b_hh)
    assert got.dtype == np.dtype(dt)
    assert_close(got, want, dt)
    assert_close(P.gru_cell.reference(x, hx, w_ih, w_hh, b_ih, b_hh), want, dt)
    # No biases, no hidden state: zeros, as torch; one unbatched step.
    assert_close(P.gru_cell(x, None, w_ih, w_hh), gru_step(x, 0 * hx, w_ih, w_hh, None, None), dt)
    assert_close(P.gru_cell(x[0], hx[0], w_ih, w_hh, b_ih, b_hh), want[0], dt)


@pytest.mark.parametrize("dt", FLOATS)
@pytest.mark.parametrize("act", ["tanh", "relu"])
@pytest.mark.parametrize("b, i, h", CELLS)
def test_rnn_cell_matches_its_equation(b, i, h, act, dt):
    x, hx = rand((b, i), dt, 1, -2, 2), rand((b, h), dt, 2)
    w_ih, w_hh, b_ih, b_hh = (rand(s, dt, k) for k, s in enumerate(((h, i), (h, h), (h,), (h,))))
    pre = (x.astype(np.float64) @ w_ih.T.astype(np.float64) + b_ih
           + hx.astype(np.float64) @ w_hh.T.astype(np.float64) + b_hh)
    want = np.tanh(pre) if act == "tanh" else np.where(pre > 0, pre, 0.0)
    got = P.rnn_cell(x, hx, w_ih, w_hh, b_ih, b_hh, nonlinearity=act)
    assert_close(got, want, dt)
    assert_close(P.rnn_cell.reference(x, hx, w_ih, w_hh, b_ih, b_hh, act), want, dt)


def test_cells_saturate_without_overflow():
    # Large pre-activations: sigmoid and tanh reach 0 and 1 exactly, never NaN.
    x = np.array([[80.0, -80.0]], np.float32)
    w_ih = np.tile(np.eye(2, dtype=np.float32), (3, 1)) * 10
    got = P.gru_cell(x, np.zeros((1, 2), np.float32), w_ih, np.zeros((6, 2), np.float32))
    assert np.isfinite(got).all()
    assert_close(got, gru_step(x, np.zeros((1, 2)), w_ih, np.zeros((6, 2)), None, None),
                 "float32")
    r = P.rnn_cell(x, np.zeros((1, 2), np.float32), w_ih[:2], np.zeros((2, 2), np.float32))
    np.testing.assert_array_equal(r, [[1.0, -1.0]])


def test_gru_cell_runs_traced_over_steps():
    xs, h0 = rand((4, 2, 3), "float32", 1), rand((2, 5), "float32", 2)
    w_ih, w_hh = rand((15, 3), "float32", 3), rand((15, 5), "float32", 4)

    @pypto.jit
    def run(xs, h, w_ih, w_hh):
        for t in range(xs.shape[0]):
            h = P.gru_cell(xs[t], h, w_ih, w_hh)
        return h

    want = h0.astype(np.float64)
    for t in range(4):
        want = gru_step(xs[t], want, w_ih, w_hh, None, None)
    assert_close(run(xs, h0, w_ih, w_hh), want, "float32")


XC = np.ones((2, 3), np.float32)
HC = np.ones((2, 4), np.float32)


@pytest.mark.parametrize("call, err, match", [
    (lambda: P.gru_cell(XC, HC, np.ones((12, 3), np.float32), np.ones((8, 4), np.float32)),
     ShapeError, r"gru_cell: w_hh must be \[3 \* hidden, hidden\] = \[12, 4\] for hidden size 4, "
                 r"got \(8, 4\)"),
    (lambda: P.gru_cell(XC, HC, np.ones((12, 5), np.float32), np.ones((12, 4), np.float32)),
     ShapeError, r"gru_cell: x has 3 input features but w_ih expects 5"),
    (lambda: P.gru_cell(XC, HC, np.ones((9, 3), np.float32), np.ones((12, 4), np.float32)),
     ShapeError, r"gru_cell: w_ih has 9 rows but w_hh has 12"),
    (lambda: P.gru_cell(XC, HC[:1], np.ones((12, 3), np.float32), np.ones((12, 4), np.float32)),
     ShapeError, r"gru_cell: h must have shape \(2, 4\)"),
    (lambda: P.gru_cell(XC, HC, np.ones((12, 3), np.float32), np.ones((12, 4), np.float32),
                        np.ones(4, np.float32)), ShapeError,
     r"gru_cell: b_ih must have shape \(12,\)"),
    (lambda: P.gru_cell(XC[None], HC, np.ones((12, 3), np.float32), np.ones((12, 4), np.float32)),
     ShapeError, r"gru_cell: x must be \[B, IN\] \(or \[IN\] for one unbatched step\)"),
    (lambda: P.gru_cell(XC, HC.astype(np.float64), np.ones((12, 3), np.float32),
                        np.ones((12, 4), np.float32)), DtypeError,
     r"gru_cell: 'h' is float64 but 'x' is float32"),
    (lambda: P.rnn_cell(XC, HC, np.ones((4, 3), np.float32), np.ones((4, 4), np.float32),
                        nonlinearity="sigmoid"), ParamError,
     r"rnn_cell: 'nonlinearity' must be 'tanh' or 'relu', got 'sigmoid'"),
    (lambda: P.rnn_cell(XC, HC, np.ones((4, 3), np.float32), np.ones((4, 4, 1), np.float32)),
     ShapeError, r"rnn_cell: w_hh must be 2-D \[hidden, \*\] as torch lays it out"),
])
def test_cell_errors_name_the_problem(call, err, match):
    with pytest.raises(err, match=match):
        call()


# -- rotary embedding ------------------------------------------------------------------------------
def rotate_pairs(x, theta):
    """Rotates feature pair (i, i + D/2) of x [..., S, D] by angle theta [..., S, D/2]."""
    x = x.astype(np.float64)
    half = x.shape[-1] // 2
    a, b = x[..., :half], x[..., half:]
    c, s = np.cos(theta), np.sin(theta)
    return np.concatenate([a * c - b * s, b * c + a * s], axis=-1)


def _tables(theta, dt):
    full = np.concatenate([theta, theta], axis=-1)
    return np.cos(full).astype(dt), np.sin(full).astype(dt)


@pytest.mark.parametrize("dt", FLOATS)
@pytest.mark.parametrize("shape", [(1, 2), (3, 5, 8), (2, 4, 7, 64), (1, 3, 33, 130),
                                   (2, 2, 3, 9, 6)])
def test_rotary_embedding_rotates_each_pair(shape, dt):
    *lead, s, d = shape
    x = rand(shape, dt, 1, -3, 3)
    theta = np.outer(np.arange(s), 10000.0 ** (-np.arange(d // 2) * 2 / d))    # [S, D/2]
    cos, sin = _tables(theta, dt)
    got = P.rotary_embedding(x, cos, sin)
    assert got.dtype == np.dtype(dt) and got.shape == x.shape
    want = rotate_pairs(x, theta)
    assert_close(got, want, dt)
    assert_close(P.rotary_embedding.reference(x, cos, sin), want, dt)


@pytest.mark.parametrize("cos_lead", [(2, 1), (1, 3), (2, 3), (3,), (1,), (1, 1)])
def test_rotary_embedding_broadcasts_position_tables(cos_lead):
    # x [2, 3, S, D] with per-sample ([2, 1, ...]), per-head ([1, 3, ...]) or full tables.
    x = rand((2, 3, 5, 8), "float64", 1)
    theta = rand(cos_lead + (5, 4), "float64", 2, -3, 3)
    cos, sin = _tables(theta, "float64")
    want = rotate_pairs(x, np.broadcast_to(theta, (2, 3, 5, 4)))
    assert_close(P.rotary_embedding(x, cos, sin), want)


def test_rotary_embedding_takes_views_and_runs_traced():
    x = rand((2, 5, 3, 8), "float32", 1).transpose(0, 2, 1, 3)       # [B, H, S, D] view
    theta = rand((5, 4), "float64", 2, -3, 3)
    cos, sin = _tables(theta, "float32")
    want = rotate_pairs(np.ascontiguousarray(x), theta)
    assert_close(P.rotary_embedding(x, cos, sin), want, "float32")
    f = pypto.jit(lambda q, c, s: P.rotary_embedding(q, c, s) + 1.0)
    assert_close(f(np.ascontiguousarray(x), cos, sin), want + 1.0, "float32")


X4 = np.ones((2, 3, 5, 8), np.float32)
C4 = np.ones((5, 8), np.float32)


@pytest.mark.parametrize("call, err, match", [
    (lambda: P.rotary_embedding(X4[..., :7], C4[:, :7], C4[:, :7]), ShapeError,
     r"rotary_embedding: the feature axis D=7 of x must be even"),
    (lambda: P.rotary_embedding(X4, C4[:, :4], C4[:, :4]), ShapeError,
     r"rotary_embedding: cos must end in \[S, D\] = \[5, 8\] like x, got shape \(5, 4\); build "
     r"it at full width, concat\(cos\(angles\), cos\(angles\)\)"),
    (lambda: P.rotary_embedding(X4, C4, C4[:4]), ShapeError,
     r"rotary_embedding: sin must end in \[S, D\] = \[5, 8\]"),
    (lambda: P.rotary_embedding(X4, np.ones((4, 5, 8), np.float32), np.ones((4, 5, 8),
                                                                         np.float32)),
     ShapeError, r"rotary_embedding: cos and sin of shape \(4, 5, 8\) do not broadcast to x's "
                 r"leading axes \(2, 3\)"),
    (lambda: P.rotary_embedding(X4, C4.astype(np.float64), C4), DtypeError,
     r"rotary_embedding: 'cos' is float64 but 'x' is float32"),
    (lambda: P.rotary_embedding(X4[0, 0, 0], C4[0], C4[0]), ShapeError,
     r"rotary_embedding: x must be \[\.\.\., S, D\]"),
])
def test_rotary_errors_name_the_problem(call, err, match):
    with pytest.raises(err, match=match):
        call()


# -- affine_grid and grid_sample -----------------------------------------------------------------
def grid_points(n, align):
    """Normalized pixel positions along an axis of n pixels, from their definition."""
    if align:
        return [0.0] if n == 1 else [-1 + 2 * i / (n - 1) for i in range(n)]
    return [-1 + (2 * i + 1) / n for i in range(n)]


@pytest.mark.parametrize("dt", FLOATS)
@pytest.mark.parametrize("align", [False, True])
@pytest.mark.parametrize("n, h, w", [(1, 1, 1), (2, 3, 5), (3, 17, 1), (1, 40, 33)])
def test_affine_grid_maps_every_pixel(n, h, w, align, dt):
    theta = rand((n, 2, 3), dt, 1, -2, 2)
    xs, ys = grid_points(w, align), grid_points(h, align)
    want = np.empty((n, h, w, 2))
    t64 = theta.astype(np.float64)
    for b in range(n):
        for i, y in enumerate(ys):
            for j, x in enumerate(xs):
                want[b, i, j] = t64[b] @ np.array([x, y, 1.0])
    got = P.affine_grid(theta, (n, 4, h, w), align_corners=align)
    assert got.dtype == np.dtype(dt)
    assert_close(got, want, dt)
    assert_close(P.affine_grid.reference(theta, (n, 4, h, w), align), want, dt)


def sample_loop(x, grid, mode, padding_mode, align):
    """grid_sample pixel by pixel from F.grid_sample's documented definition."""
    n, c, h, w = x.shape
    out = np.zeros((n, c) + grid.shape[1:3])
    for b in range(n):
        for i in range(grid.shape[1]):
            for j in range(grid.shape[2]):
                px, py = (float(v) for v in grid[b, i, j])
                if align:
                    px, py = (px + 1) / 2 * (w - 1), (py + 1) / 2 * (h - 1)
                else:
                    px, py = ((px + 1) * w - 1) / 2, ((py + 1) * h - 1) / 2
                if padding_mode == "border":
                    px, py = min(max(px, 0.0), w - 1.0), min(max(py, 0.0), h - 1.0)

                def at(u, v):
                    return x[b, :, v, u] if 0 <= u < w and 0 <= v < h else 0.0
                if mode == "nearest":
                    out[b, :, i, j] = at(int(round(px)), int(round(py)))   # halves to even
                    continue
                u0, v0 = math.floor(px), math.floor(py)
                fu, fv = px - u0, py - v0
                out[b, :, i, j] = (at(u0, v0) * (1 - fu) * (1 - fv) + at(u0 + 1, v0) * fu * (1 - fv)
                                   + at(u0, v0 + 1) * (1 - fu) * fv + at(u0 + 1, v0 + 1) * fu * fv)
    return out


@pytest.mark.parametrize("dt", FLOATS)
@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
@pytest.mark.parametrize("padding_mode", ["zeros", "border"])
@pytest.mark.parametrize("align", [False, True])
def test_grid_sample_matches_the_pixel_loop(mode, padding_mode, align, dt):
    x = rand((2, 3, 6, 7), dt, 1)
    grid = rand((2, 5, 9, 2), dt, 2, -1.3, 1.3)
    # Exact corners, exact pixel centres, and positions far outside.
    grid[0, 0, 0] = (-1, -1)
    grid[0, 0, 1] = (1, 1)
    grid[0, 0, 2] = (1 / 7, -1 / 6)
    grid[1, 1, 1] = (40.0, -3.0)
    grid[1, 2, 2] = (-1e8, 1e8)
    want = sample_loop(x.astype(np.float64), grid, mode, padding_mode, align)
    kw = dict(mode=mode, padding_mode=padding_mode, align_corners=align)
    got = P.grid_sample(x, grid, **kw)
    assert_close(got, want, dt)
    assert_close(P.grid_sample.reference(x, grid, **kw), want, dt)


@pytest.mark.parametrize("shape", [(1, 1, 1, 1, 1, 1), (1, 2, 30, 50, 17, 70), (3, 5, 2, 9, 1, 4)])
def test_grid_sample_sizes(shape):
    n, c, h, w, oh, ow = shape
    x = rand((n, c, h, w), "float32", 1)
    grid = rand((n, oh, ow, 2), "float32", 2, -1.1, 1.1)
    assert_close(P.grid_sample(x, grid), sample_loop(x.astype(np.float64), grid, "bilinear",
                                                     "zeros", False), "float32")


def test_identity_grid_samples_the_image_back():
    x = rand((2, 3, 8, 5), "float64", 1)
    theta = np.tile(np.eye(2, 3), (2, 1, 1))
    for align in (False, True):
        grid = P.affine_grid(theta, x.shape, align_corners=align)
        assert_close(P.grid_sample(x, grid, align_corners=align), x)


XG = np.ones((2, 3, 6, 7), np.float32)
GG = np.zeros((2, 4, 5, 2), np.float32)


@pytest.mark.parametrize("call, err, match", [
    (lambda: P.affine_grid(np.ones((2, 2, 3), np.float32), (2, 3, 4, 5, 6)), ParamError,
     r"affine_grid: 'size' must be \(N, C, H, W\) for 2-D images, got \(2, 3, 4, 5, 6\) "
     r"\(3-D volumes are not supported\)"),
    (lambda: P.affine_grid(np.ones((3, 2, 3), np.float32), (2, 3, 4, 5)), ShapeError,
     r"affine_grid: theta must be \[N, 2, 3\] = \[2, 2, 3\] for size \(2, 3, 4, 5\), got shape "
     r"\(3, 2, 3\)"),
    (lambda: P.affine_grid(np.ones((2, 2, 3), np.float32), (2, 3, 0, 5)), ParamError,
     r"affine_grid: 'size' must hold positive ints"),
    (lambda: P.affine_grid(np.ones((2, 2, 3), np.float32), (2, 3, 4, 5), align_corners=1),
     ParamError, r"affine_grid: 'align_corners' must be a bool"),
    (lambda: P.grid_sample(XG, GG, mode="bicubic"), ParamError,
     r"grid_sample: 'mode' must be 'bilinear' or 'nearest', got 'bicubic'"),
    (lambda: P.grid_sample(XG, GG, padding_mode="reflection"), ParamError,
     r"grid_sample: 'padding_mode' must be 'zeros' or 'border', got 'reflection'"),
    (lambda: P.grid_sample(XG, np.zeros((2, 4, 5, 3), np.float32)), ShapeError,
     r"grid_sample: grid must be \[N, OH, OW, 2\] \(x, y positions\), got shape \(2, 4, 5, 3\)"),
    (lambda: P.grid_sample(XG, GG[:1]), ShapeError,
     r"grid_sample: grid has N=1 but x has N=2; one grid per image"),
    (lambda: P.grid_sample(XG[0], GG), ShapeError, r"grid_sample: x must be 4-D \[N, C, H, W\]"),
    (lambda: P.grid_sample(XG, GG.astype(np.float64)), DtypeError,
     r"grid_sample: 'grid' is float64 but 'x' is float32"),
])
def test_grid_errors_name_the_problem(call, err, match):
    with pytest.raises(err, match=match):
        call()
