"""``a @ w.T`` in a traced program is recorded as ``linear(a, w, 0)``: linear's kernel reads the
weight [N, K] as it is stored, as ``ops.matmul`` does for NumPy's ``w.T``. Results are checked
against NumPy in float64, gradients against the analytic ones written here. ``a @ transpose(w).T``
is recorded as ``a @ w``."""

import numpy as np
import pytest

import pypto
from helpers import program_segments

P = pypto.ops
RNG = np.random.default_rng(31)


def _f32(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


_segments = program_segments


def _op_names(f):
    return sorted(n.op.name for s in _segments(f) for n in s.graph.nodes if n.op is not None)


@pytest.mark.parametrize("m,k,n", [(64, 96, 80), (1, 7, 5), (33, 17, 65)])
def test_a_product_with_a_transposed_view_runs_as_linear(m, k, n):
    h, w = _f32(m, k), _f32(n, k)
    f = pypto.jit(lambda h, w: P.matmul(h, w.T) * 2.0)
    got = f(h, w)
    want = 2.0 * (h.astype(np.float64) @ w.astype(np.float64).T)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    assert _op_names(f) == ["linear", "mul"]


def test_the_operator_form_and_a_transpose_of_a_slice():
    x, w = _f32(40, 24), _f32(50, 30)
    f = pypto.jit(lambda x, w: x @ w[:, 3:27].T)
    got = f(x, w)
    np.testing.assert_allclose(got, x.astype(np.float64) @ w[:, 3:27].astype(np.float64).T,
                               rtol=1e-4, atol=1e-4)
    assert _op_names(f) == ["linear"]


def test_other_views_stay_matmul():
    a, b = _f32(16, 12), _f32(12, 20)
    f = pypto.jit(lambda a, b: P.matmul(a, b[:, ::2]))
    np.testing.assert_allclose(f(a, b), a.astype(np.float64) @ b[:, ::2].astype(np.float64),
                               rtol=1e-4, atol=1e-4)
    assert _op_names(f) == ["matmul"]


def test_gradients_through_the_rewrite():
    h, w, g = _f32(8, 6), _f32(5, 6), _f32(8, 5)
    loss = lambda h, w: P.sum(P.matmul(h, w.T) * g)    # noqa: E731
    value, (dh, dw) = pypto.value_and_grad(loss, argnums=(0, 1))(h, w)
    h64, w64, g64 = (v.astype(np.float64) for v in (h, w, g))
    np.testing.assert_allclose(value, np.sum((h64 @ w64.T) * g64), rtol=1e-4)
    np.testing.assert_allclose(dh, g64 @ w64, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(dw, g64.T @ h64, rtol=1e-4, atol=1e-5)


def test_float64():
    h, w = RNG.standard_normal((9, 4)), RNG.standard_normal((3, 4))
    f = pypto.jit(lambda h, w: P.matmul(h, w.T))
    np.testing.assert_allclose(f(h, w), h @ w.T, rtol=1e-12)
    assert _op_names(f) == ["linear"]


def test_the_transpose_of_a_transposed_copy_reads_the_source():
    # ``w_t = transpose(w)`` then ``a @ w_t.T``: the product reads ``w`` as it is stored (a
    # plain matmul, no linear re-staging ``w_t``), and ``w_t`` itself is still computed for
    # the program's other use of it.
    a, w, b = _f32(12, 20), _f32(20, 7), _f32(3, 7)
    f = pypto.jit(lambda a, w, b: (P.matmul(a, P.transpose(w).T), P.matmul(b, P.transpose(w))))
    got1, got2 = f(a, w, b)
    a64, w64, b64 = (v.astype(np.float64) for v in (a, w, b))
    np.testing.assert_allclose(got1, a64 @ w64, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(got2, b64 @ w64.T, rtol=1e-4, atol=1e-4)
    assert _op_names(f) == ["matmul", "matmul", "transpose"]


def test_the_lstm_recurrent_gradient_reads_the_weight_as_stored(monkeypatch):
    # The layer's forward reads transpose(w_hh); the gradient's per-step products with its
    # transpose read w_hh itself: the input projection is the one linear left in any pipeline.
    import importlib

    import pypto.nn

    steps, batch, hid = 3, 4, 5
    xs, h0, c0 = _f32(steps, batch, hid), _f32(batch, hid), _f32(batch, hid)
    w_ih, w_hh = _f32(4 * hid, hid) * 0.3, _f32(4 * hid, hid) * 0.3
    jit_mod = importlib.import_module("pypto.frontend.jit")
    orig, names = jit_mod.Segment.run, []

    def run(self, arrays, into=None):
        names.extend(n.op.name for n in self.graph.nodes if n.op is not None)
        return orig(self, arrays, into)

    monkeypatch.setattr(jit_mod.Segment, "run", run)
    loss = lambda w_hh: P.sum(pypto.nn.lstm(xs, h0, c0, w_ih, w_hh)[0])    # noqa: E731
    dw = pypto.grad(loss)(w_hh)
    assert names.count("linear") == 1 and names.count("matmul") >= 2 * steps
    eps, k = 1e-2, (3, 2)
    wp, wm = w_hh.copy(), w_hh.copy()
    wp[k] += eps
    wm[k] -= eps
    fd = (float(loss(wp)) - float(loss(wm))) / (2 * eps)
    np.testing.assert_allclose(dw[k], fd, rtol=2e-2, atol=2e-3)
