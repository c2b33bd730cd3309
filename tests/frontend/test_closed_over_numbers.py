"""A traced program holds the Python numbers its function reads by name (closure variables,
globals, a bound method's attributes). A replay checks they are unchanged and traces again when
one changed: a learning rate decayed in a global, or a layer's ``self.eps`` set anew, silently
kept its first value before."""

from __future__ import annotations

import numpy as np

import pypto

X = np.linspace(-1, 1, 8).astype(np.float32)
SCALE = 2.0


def _scaled(x):
    return x * SCALE + 1


def test_a_rebound_global_number_takes_effect():
    global SCALE
    f = pypto.jit(_scaled)
    try:
        np.testing.assert_array_equal(f(X), X * np.float32(2) + 1)
        SCALE = 3.0
        np.testing.assert_array_equal(f(X), X * np.float32(3) + 1)
        SCALE = 2.0
        np.testing.assert_array_equal(f(X), X * np.float32(2) + 1)
        assert "global 'SCALE' changed from 2.0 to 3.0" in f.explain(X)
    finally:
        SCALE = 2.0


def test_closure_variable_and_method_attribute():
    def make():
        k = 4

        def g(x):
            return x * k

        def set_k(v):
            nonlocal k
            k = v
        return g, set_k

    g, set_k = make()
    jg = pypto.jit(g)
    np.testing.assert_array_equal(jg(X), X * 4)
    set_k(5)
    np.testing.assert_array_equal(jg(X), X * 5)
    set_k(0.0)
    np.testing.assert_array_equal(np.signbit(jg(X)), np.signbit(X * np.float32(0.0)))
    set_k(-0.0)                 # by bits: not the trace of 0.0
    np.testing.assert_array_equal(np.signbit(jg(X)), np.signbit(X * np.float32(-0.0)))

    class Layer:
        def __init__(self):
            self.eps = 1.0

        def forward(self, x):
            return x + self.eps

    layer = Layer()
    jf = pypto.jit(layer.forward)
    np.testing.assert_array_equal(jf(X), X + 1)
    layer.eps = 0.5
    np.testing.assert_array_equal(jf(X), X + np.float32(0.5))


def test_unchanged_numbers_replay_without_a_new_trace():
    f = pypto.jit(_scaled)
    for _ in range(5):
        f(X)
    assert f.stats.traces == 1 and f.stats.replays == 4


A = 3.0


def _helper(t):
    return t * A


def test_numbers_of_called_helpers_and_of_grad_functions():
    global A
    try:
        f = pypto.jit(lambda x: _helper(x) + 1)
        np.testing.assert_array_equal(f(X), X * 3 + 1)
        A = 4.0
        np.testing.assert_array_equal(f(X), X * 4 + 1)
        # grad wraps the function in its own program: the function's globals are still seen
        g = pypto.grad(lambda x: _helper(x).sum())
        np.testing.assert_array_equal(g(X), np.full_like(X, 4))
        A = 5.0
        np.testing.assert_array_equal(g(X), np.full_like(X, 5))
    finally:
        A = 3.0
