"""The recurrent cells' gate products run as linear's blocked matrix product: lstm_cell as one
product over [x, h] and [w_ih, w_hh], gru_cell and rnn_cell as one product per gate. Values
against float64 NumPy written here from the cells' documented equations, at sizes that take each
path of the product (small; sums in registers when k fits one block; a k-blocked tile buffer
beyond; one output column), with partial tiles in every dim; and the plan itself (weights staged
transposed per tile, no lane-partial sums)."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import assert_close, rand

import pypto.ops as P
from pypto.compiler import targets
from pypto.compiler.lower import build
from pypto.schedule.defaults import default_schedule


def _sig(v):
    with np.errstate(over="ignore"):
        return 1.0 / (1.0 + np.exp(-v))


def lstm_step(x, h, c, w_ih, w_hh, b_ih, b_hh):
    x, h, c = (a.astype(np.float64) for a in (x, h, c))
    z = x @ w_ih.astype(np.float64).T + h @ w_hh.astype(np.float64).T + b_ih + b_hh
    n = h.shape[1]
    i, f, g, o = (z[:, k * n:(k + 1) * n] for k in range(4))
    c2 = _sig(f) * c + _sig(i) * np.tanh(g)
    return _sig(o) * np.tanh(c2), c2


def gru_step(x, h, w_ih, w_hh, b_ih, b_hh):
    x, h = x.astype(np.float64), h.astype(np.float64)
    n = h.shape[1]
    gi = x @ w_ih.astype(np.float64).T + b_ih
    gh = h @ w_hh.astype(np.float64).T + b_hh
    r = _sig(gi[:, :n] + gh[:, :n])
    z = _sig(gi[:, n:2 * n] + gh[:, n:2 * n])
    cand = np.tanh(gi[:, 2 * n:] + r * gh[:, 2 * n:])
    return (1 - z) * cand + z * h


def _args(b, n_in, hid, gates, dtype, scale=0.3):
    shapes = [(b, n_in), (b, hid), (gates * hid, n_in), (gates * hid, hid), (gates * hid,),
              (gates * hid,)]
    return [rand(s, dtype, 7 + k, -scale, scale) for k, s in enumerate(shapes)]


#: (B, IN, HID): small (under SERIAL_MACS); k = IN + HID within one 512 block (sums in
#: registers); k over it (tile buffer); odd sizes everywhere, a batch of 1.
LSTM_SHAPES = [(5, 20, 9), (33, 300, 100), (7, 300, 261), (1, 700, 130), (64, 64, 64)]


@pytest.mark.parametrize("b, n_in, hid", LSTM_SHAPES)
def test_lstm_cell_blocked(b, n_in, hid):
    x, h, w_ih, w_hh, b_ih, b_hh = _args(b, n_in, hid, 4, "float32")
    c = rand((b, hid), "float32", 3, -2, 2)
    got_h, got_c = P.lstm_cell(x, h, c, w_ih, w_hh, b_ih, b_hh)
    want_h, want_c = lstm_step(x, h, c, w_ih, w_hh, b_ih, b_hh)
    assert_close(got_h, want_h.astype(np.float32), rtol=1e-4, atol=2e-5)
    assert_close(got_c, want_c.astype(np.float32), rtol=1e-4, atol=2e-5)


@pytest.mark.parametrize("b, n_in, hid", [(33, 300, 100), (7, 300, 261)])
def test_lstm_cell_blocked_float64(b, n_in, hid):
    x, h, w_ih, w_hh, b_ih, b_hh = _args(b, n_in, hid, 4, "float64")
    c = rand((b, hid), "float64", 3, -2, 2)
    got_h, got_c = P.lstm_cell(x, h, c, w_ih, w_hh, b_ih, b_hh)
    want_h, want_c = lstm_step(x, h, c, w_ih, w_hh, b_ih, b_hh)
    assert got_h.dtype == got_c.dtype == np.float64
    assert_close(got_h, want_h, rtol=1e-12, atol=1e-13)
    assert_close(got_c, want_c, rtol=1e-12, atol=1e-13)


#: (B, IN, HID): the input product in registers with the gates as the product's batch; over one
#: k block; small; one batch row.
GRU_SHAPES = [(33, 200, 100), (6, 700, 90), (3, 5, 7), (1, 513, 40)]


@pytest.mark.parametrize("b, n_in, hid", GRU_SHAPES)
def test_gru_cell_blocked(b, n_in, hid):
    args = _args(b, n_in, hid, 3, "float32")
    got = P.gru_cell(*args)
    assert_close(got, gru_step(*args).astype(np.float32), rtol=1e-4, atol=2e-5)


@pytest.mark.parametrize("b, n_in, hid", [(600, 520, 1), (40, 600, 70), (9, 30, 300)])
@pytest.mark.parametrize("act", ["tanh", "relu"])
def test_rnn_cell_blocked(b, n_in, hid, act):
    # hidden 1 at 600 x 520: the input product is one output column (the matrix-vector path).
    x, h, w_ih, w_hh, b_ih, b_hh = _args(b, n_in, hid, 1, "float32")
    pre = (x.astype(np.float64) @ w_ih.astype(np.float64).T + b_ih
           + h.astype(np.float64) @ w_hh.astype(np.float64).T + b_hh)
    want = np.tanh(pre) if act == "tanh" else np.maximum(pre, 0)
    got = P.rnn_cell(x, h, w_ih, w_hh, b_ih, b_hh, nonlinearity=act)
    assert_close(got, want.astype(np.float32), rtol=1e-4, atol=2e-5)


def _plan(op, dims, n_inputs, params=None):
    built = build(op, ("float32",) * n_inputs, params or {})
    return default_schedule(built, dims, targets.host()).directives


def test_lstm_cell_plan_stages_the_weights_per_tile():
    ds = _plan(P.lstm_cell, {"B": 64, "IN": 512, "HID": 512, "G": 2048}, 7)
    assert not [d for d in ds if d.op == "rfactor"]
    assert any(d.op == "compute_at" and d.func == "wt" and d.get("at") == "gates" for d in ds)
    assert any(d.op == "parallel" and d.func == "gates" for d in ds)
    assert {d.func for d in ds if d.op == "compute_root"} >= {"xh", "gates"}


def test_gru_cell_plan_one_product_per_gate_matrix():
    dims = {"B": 64, "IN": 512, "HID": 512, "HO": 512, "T": 3}
    ds = _plan(P.gru_cell, dims, 6)
    assert not [d for d in ds if d.op == "rfactor"]
    for f in ("gates_ih", "gates_hh"):
        assert any(d.op == "compute_at" and d.func == f"{f}_wt" and d.get("at") == f for d in ds)
        # The gate axis t is the product's batch: fused into the parallel task.
        assert any(d.op == "fuse" and d.func == f and d.get("outer") == "t" for d in ds)
