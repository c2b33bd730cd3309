"""How a value's gradient contributions are summed: slices of one array join as a concat, and
products that share a weight (one per step of a loop) become one product."""

import numpy as np
import pytest

import pypto
from pypto import ops
from pypto.autodiff import api


def _loop(xs, w, v):
    total = None
    for t in range(xs.shape[0]):
        y = ops.tanh(xs[t] @ w) * v[t]
        total = y.sum() if total is None else total + y.sum()
    return total


def _want(xs, w, v):
    xs, w, v = (a.astype(np.float64) for a in (xs, w, v))
    dw = np.zeros_like(w)
    dxs = np.zeros_like(xs)
    dv = np.zeros_like(v)
    for t in range(xs.shape[0]):
        y = np.tanh(xs[t] @ w)
        g = (1 - y * y) * v[t]
        dw += xs[t].T @ g
        dxs[t] = g @ w.T
        dv[t] = y.sum(axis=0)
    return dxs, dw, dv


def _matmuls(fn):
    """Matrix products in the program (``a @ w.T`` is recorded as ``linear(a, w, 0)``)."""
    prog = next(iter(api._programs[fn].values()))
    count, stack = 0, list(prog._cache.values())
    while stack:
        step = stack.pop()
        if step.segment is not None:
            count += sum(1 for n in step.segment.graph.nodes
                         if n.kind == "op" and n.op.name in ("matmul", "linear"))
        stack.extend(step.children.values())
    return count


@pytest.mark.parametrize("steps", [1, 2, 5])
def test_a_weight_shared_by_every_step_gets_its_gradient_from_one_product(steps):
    r = np.random.default_rng(steps)
    xs = r.standard_normal((steps, 6, 5)).astype(np.float32)
    w = r.standard_normal((5, 7)).astype(np.float32) * 0.5
    v = r.standard_normal((steps, 7)).astype(np.float32)
    fn = lambda xs, w, v: _loop(xs, w, v)   # noqa: E731 (a fresh function: its own program)
    _, (dxs, dw, dv) = pypto.value_and_grad(fn, argnums=(0, 1, 2))(xs, w, v)
    want = _want(xs, w, v)
    for got, ref in zip((dxs, dw, dv), want):
        np.testing.assert_allclose(got, ref, rtol=2e-4, atol=2e-5)
    # forward: one product per step; backward: one per step for xs, and one in all for w
    assert _matmuls(fn) == 2 * steps + 1


def test_slices_of_one_array_that_leave_gaps_or_overlap_sum_correctly():
    r = np.random.default_rng(3)
    x = r.standard_normal((9, 4)).astype(np.float32)

    def fn(x):
        parts = [x[0:2], x[2:3], x[5:7], x[6:9], x[::2], x[1:8, 1:3]]
        return sum((ops.sin(p) * (k + 1)).sum() for k, p in enumerate(parts))

    got = pypto.grad(fn)(x)
    want = np.zeros((9, 4))
    c = np.cos(x.astype(np.float64))
    for k, sl in enumerate([np.s_[0:2], np.s_[2:3], np.s_[5:7], np.s_[6:9], np.s_[::2],
                            np.s_[1:8, 1:3]]):
        want[sl] += (k + 1) * c[sl]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_float16_pieces_are_summed_without_a_join():
    r = np.random.default_rng(4)
    xs = r.standard_normal((3, 4, 5)).astype(np.float16)
    w = (r.standard_normal((5, 6)) * 0.5).astype(np.float16)
    v = r.standard_normal((3, 6)).astype(np.float16)
    def fn(xs, w, v):       # (sum has no float16: the loss is summed in float32)
        return sum((ops.tanh(xs[t] @ w) * v[t]).astype(np.float32).sum() for t in range(3))

    _, (dxs, dw, dv) = pypto.value_and_grad(fn, argnums=(0, 1, 2))(xs, w, v)
    assert dxs.dtype == dw.dtype == dv.dtype == np.float16
    for got, ref in zip((dxs, dw, dv), _want(xs, w, v)):
        np.testing.assert_allclose(got.astype(np.float64), ref, rtol=3e-2, atol=3e-2)


def _rnn(xs, w_in, w_rec, h0):
    t_n, b, i = xs.shape
    n = w_rec.shape[0]
    gx = ops.linear(xs.reshape(t_n * b, i), w_in, np.zeros(n, np.float32)).reshape(t_n, b, n)
    h, total = h0, None
    for t in range(t_n):
        h = ops.tanh(gx[t] + h @ w_rec.T)
        total = h.sum() if total is None else total + h.sum()
    return total


def _rnn_want(xs, w_in, w_rec, h0):
    xs, w_in, w_rec, h0 = (a.astype(np.float64) for a in (xs, w_in, w_rec, h0))
    hs, h = [h0], h0
    for t in range(xs.shape[0]):
        h = np.tanh(xs[t] @ w_in.T + h @ w_rec.T)
        hs.append(h)
    d_in, d_rec, dh = np.zeros_like(w_in), np.zeros_like(w_rec), np.zeros_like(h0)
    for t in reversed(range(xs.shape[0])):
        dpre = (dh + 1.0) * (1 - hs[t + 1] ** 2)
        d_in += dpre.T @ xs[t]
        d_rec += dpre.T @ hs[t]
        dh = dpre @ w_rec
    return d_in, d_rec


def _concat_inputs(fn):
    prog = next(iter(api._programs[fn].values()))
    joins, stack = [], list(prog._cache.values())
    while stack:
        step = stack.pop()
        if step.segment is not None:
            for n in step.segment.graph.nodes:
                if n.kind == "op" and n.op.name == "concat":
                    bases = []
                    for t in n.inputs:
                        while t.node.kind == "view" and t.node.aux[0] == "reshape":
                            t = t.node.inputs[0]
                        bases.append((t.node.id, t.index))
                    joins.append(tuple(bases))
        stack.extend(step.children.values())
    return joins


@pytest.mark.parametrize("steps", [2, 5])
def test_step_gradients_joined_once_for_the_projection_and_the_recurrent_weight(steps):
    # The LSTM layer's pattern: each step's pre-activation gradient is both a slice of the
    # input projection's gradient and the left operand of the recurrent weight's product; the
    # pieces are joined once and that join read both ways.
    r = np.random.default_rng(10 + steps)
    xs = r.standard_normal((steps, 4, 6)).astype(np.float32)
    w_in = (r.standard_normal((8, 6)) * 0.4).astype(np.float32)
    w_rec = (r.standard_normal((8, 8)) * 0.4).astype(np.float32)
    h0 = r.standard_normal((4, 8)).astype(np.float32)
    fn = lambda xs, w_in, w_rec, h0: _rnn(xs, w_in, w_rec, h0)   # noqa: E731
    _, (d_in, d_rec) = pypto.value_and_grad(fn, argnums=(1, 2))(xs, w_in, w_rec, h0)
    want_in, want_rec = _rnn_want(xs, w_in, w_rec, h0)
    np.testing.assert_allclose(d_in, want_in, rtol=2e-4, atol=2e-5)
    np.testing.assert_allclose(d_rec, want_rec, rtol=2e-4, atol=2e-5)
    joins = _concat_inputs(fn)
    assert joins and len(joins) == len(set(joins)), joins
