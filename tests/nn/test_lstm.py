"""pypto.nn.lstm against an LSTM written in NumPy here, padded batches against each sequence run
alone, and its gradient against PyTorch's."""

import numpy as np
import pytest

import pypto
import pypto.nn

RNG = np.random.default_rng(11)


def _sig(v):
    return 1 / (1 + np.exp(-v))


def _ref(xs, h, c, w_ih, w_hh, b):
    outs = []
    for x in xs:
        i, f, g, o = np.split(x @ w_ih.T + h @ w_hh.T + b, 4, axis=-1)
        c = _sig(f) * c + _sig(i) * np.tanh(g)
        h = _sig(o) * np.tanh(c)
        outs.append(h)
    return np.stack(outs), h, c


def _weights(inp, hid):
    return [(RNG.standard_normal(s) * 0.3).astype(np.float32)
            for s in ((4 * hid, inp), (4 * hid, hid), (4 * hid,), (4 * hid,))]


def test_lstm_layer_matches_numpy():
    T, B, I, H = 6, 3, 5, 8
    xs = RNG.standard_normal((T, B, I)).astype(np.float32)
    h0, c0 = RNG.standard_normal((2, B, H)).astype(np.float32)
    w_ih, w_hh, b_ih, b_hh = _weights(I, H)
    outs, h, c = pypto.nn.lstm(xs, h0, c0, w_ih, w_hh, b_ih, b_hh)
    want = _ref(xs.astype(np.float64), h0, c0, w_ih, w_hh, b_ih + b_hh)
    for got, w in zip((outs, h, c), want):
        np.testing.assert_allclose(got, w, rtol=1e-4, atol=1e-5)


def test_padded_sequences_equal_each_sequence_run_alone():
    T, B, I, H = 7, 3, 4, 6
    xs = RNG.standard_normal((T, B, I)).astype(np.float32)
    h0, c0 = RNG.standard_normal((2, B, H)).astype(np.float32)
    w = _weights(I, H)
    lengths = np.array([7, 3, 5])
    outs, h, c = pypto.nn.lstm(xs, h0, c0, *w, lengths=lengths)
    for b, n in enumerate(lengths):
        o1, h1, c1 = pypto.nn.lstm(xs[:n, b:b + 1], h0[b:b + 1], c0[b:b + 1], *w)
        np.testing.assert_allclose(outs[:n, b], o1[:, 0], rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(outs[n:, b], 0)
        np.testing.assert_allclose(h[b], h1[0], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(c[b], c1[0], rtol=1e-5, atol=1e-6)


def test_bad_lengths_are_clear_errors():
    xs = np.zeros((4, 2, 3), np.float32)
    h0 = c0 = np.zeros((2, 5), np.float32)
    w = _weights(3, 5)
    with pytest.raises(pypto.ShapeError, match="lengths must be 2 ints"):
        pypto.nn.lstm(xs, h0, c0, *w, lengths=[1, 2, 3])
    with pytest.raises(pypto.ShapeError, match=r"lie in \[0, 4\]"):
        pypto.nn.lstm(xs, h0, c0, *w, lengths=[1, 9])


def test_lstm_gradient_matches_torch():
    torch = pytest.importorskip("torch")
    T, B, I, H = 5, 2, 3, 4
    xs = RNG.standard_normal((T, B, I)).astype(np.float32)
    h0, c0 = RNG.standard_normal((2, B, H)).astype(np.float32)
    w_ih, w_hh, b_ih, b_hh = _weights(I, H)

    def loss(w_ih, w_hh, xs):       # the public layer, traced by pypto.grad
        outs, h, c = pypto.nn.lstm(xs, h0, c0, w_ih, w_hh, b_ih, b_hh)
        return outs.sum() + (c * c).sum()

    g_ih, g_hh, g_x = pypto.grad(loss, argnums=(0, 1, 2))(w_ih, w_hh, xs)
    cell = torch.nn.LSTM(I, H)
    with torch.no_grad():
        for name, v in (("weight_ih_l0", w_ih), ("weight_hh_l0", w_hh), ("bias_ih_l0", b_ih),
                        ("bias_hh_l0", b_hh)):
            getattr(cell, name).copy_(torch.from_numpy(v))
    tx = torch.from_numpy(xs).requires_grad_()
    out, (h, c) = cell(tx, (torch.from_numpy(h0)[None], torch.from_numpy(c0)[None]))
    (out.sum() + (c * c).sum()).backward()
    np.testing.assert_allclose(g_x, tx.grad.numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(g_ih, cell.weight_ih_l0.grad.numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(g_hh, cell.weight_hh_l0.grad.numpy(), rtol=1e-4, atol=1e-5)


def test_the_layer_differentiates_through_vjp_with_lengths():
    T, B, I, H = 4, 3, 2, 3
    xs = RNG.standard_normal((T, B, I)).astype(np.float32)
    h0, c0 = np.zeros((2, B, H), np.float32)
    w_ih, w_hh, b_ih, b_hh = _weights(I, H)
    lengths = np.array([4, 1, 2])
    (outs, h, c), vjp_fn = pypto.vjp(
        lambda w: pypto.nn.lstm(xs, h0, c0, w, w_hh, b_ih, b_hh, lengths=lengths), w_ih)
    (g,) = vjp_fn(np.ones_like(outs), np.zeros_like(h), np.zeros_like(c))
    # Central differences of sum(outputs) in float64 through the NumPy reference, per sequence.
    def total(w):
        s = 0.0
        for b, n in enumerate(lengths):
            o, _, _ = _ref(xs[:n, b:b + 1].astype(np.float64), h0[b:b + 1], c0[b:b + 1], w,
                           w_hh.astype(np.float64), (b_ih + b_hh).astype(np.float64))
            s += o.sum()
        return s
    w64 = w_ih.astype(np.float64)
    want = np.zeros_like(w64)
    for i in np.ndindex(w64.shape):
        e = np.zeros_like(w64)
        e[i] = 1e-6
        want[i] = (total(w64 + e) - total(w64 - e)) / 2e-6
    np.testing.assert_allclose(g, want, rtol=1e-3, atol=1e-4)
