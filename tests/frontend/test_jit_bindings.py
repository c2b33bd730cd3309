"""How a jitted function binds: methods (traces shared by instances, instances not kept alive),
staticmethod / classmethod, default arguments, and zero-size arrays in programs."""
import gc
import weakref

import numpy as np
import pytest

import pypto


def _x(n=4):
    return np.arange(n, dtype=np.float32) - 1


class Layer:
    def __init__(self, w, scale=2.0, act="none"):
        self.w, self.scale, self.act = w, scale, act

    @pypto.jit
    def forward(self, x):
        y = x * self.w + self.scale
        return pypto.ops.relu(y) if self.act == "relu" else y


def test_instances_share_a_trace_and_are_not_kept_alive():
    x = _x()
    before = Layer.forward.stats.traces
    refs = []
    for i in range(12):     # past recompile_limit (8): all traced, none run eagerly
        layer = Layer(np.full(4, i, np.float32))
        np.testing.assert_allclose(layer.forward(x), x * i + 2.0)
        refs.append(weakref.ref(layer))
        del layer
    gc.collect()
    assert Layer.forward.stats.traces - before == 1
    assert all(r() is None for r in refs)


def test_instances_with_other_static_state_trace_apart():
    x = _x()
    w = np.ones(4, np.float32)
    relu, plain = Layer(w, act="relu"), Layer(w, act="none")
    np.testing.assert_allclose(relu.forward(x), np.maximum(x + 2, 0))
    np.testing.assert_allclose(plain.forward(x), x + 2)
    np.testing.assert_allclose(Layer(w, scale=-5.0, act="relu").forward(x), np.maximum(x - 5, 0))
    assert "changed from" in Layer.forward.explain(plain, x)


def test_an_array_computed_from_the_instance_pins_the_trace_to_it():
    class Exp:
        def __init__(self, w):
            self.w = w

        @pypto.jit
        def forward(self, x):
            return x * np.exp(self.w)       # NumPy, outside the traced ops: baked in

    x = _x()
    a, b = Exp(np.zeros(4, np.float32)), Exp(np.ones(4, np.float32))
    np.testing.assert_allclose(a.forward(x), x)
    np.testing.assert_allclose(b.forward(x), x * np.e, rtol=1e-6)
    np.testing.assert_allclose(a.forward(x), x)
    ref = weakref.ref(a)
    del a
    gc.collect()
    assert ref() is None
    assert len(Exp.forward._cache) == 1      # b's; a's went with it


def test_an_instance_passed_as_an_argument_is_not_kept_alive():
    class Cfg:
        def __init__(self, k):
            self.k = k

    @pypto.jit
    def f(x, cfg):
        return x * cfg.k

    x = _x()
    refs = []
    for k in (2.0, 2.0, 3.0):
        cfg = Cfg(k)
        np.testing.assert_allclose(f(x, cfg), x * k)
        refs.append(weakref.ref(cfg))
        del cfg
    gc.collect()
    assert all(r() is None for r in refs)
    assert f.stats.traces == 2


def test_jit_above_staticmethod_and_classmethod():
    class K:
        k = 3.0

        @pypto.jit
        @staticmethod
        def add_one(x):
            return x + 1

        @pypto.jit
        @classmethod
        def times_k(cls, x):
            return x * cls.k

    x = _x()
    for got in (K.add_one(x), K().add_one(x)):
        np.testing.assert_allclose(got, x + 1)
    for got in (K.times_k(x), K().times_k(x)):
        np.testing.assert_allclose(got, x * 3)


def test_a_changed_default_is_seen():
    def g(x, k=2.0, *, b=1.0):
        return x * k + b

    f = pypto.jit(g)
    x = _x()
    np.testing.assert_allclose(f(x), x * 2 + 1)
    g.__defaults__ = (5.0,)
    np.testing.assert_allclose(f(x), x * 5 + 1)
    g.__kwdefaults__ = {"b": -1.0}
    np.testing.assert_allclose(f(x), x * 5 - 1)
    traces = f.stats.traces
    g.__defaults__ = (5.0,)         # a new tuple, the same value: no new trace
    np.testing.assert_allclose(f(x), x * 5 - 1)
    assert f.stats.traces == traces


@pytest.mark.parametrize("wrap", [pypto.jit, pypto.fuse])
def test_zero_size_inputs_give_empty_results_and_identities(wrap):
    def body(a, b):
        return (a + b).sum(axis=0), a * 2, (a * b).max(axis=1), a.sum()

    f = wrap(body)
    z = np.zeros((0, 3), np.float32)
    for _ in range(2):
        s, m, mx, total = f(z, z)
        assert s.shape == (3,) and not s.any()
        assert m.shape == (0, 3) and mx.shape == (0,)
        assert float(total) == 0.0
    assert f.stats.traces == 0
    ones = np.ones((2, 3), np.float32)
    np.testing.assert_allclose(f(ones, ones)[0], [4, 4, 4])


def test_zero_size_value_made_inside_a_program():
    @pypto.jit
    def f(a):
        return (a[:0] + 1).sum(axis=0), a[1:1] * 2

    s, e = f(np.ones((2, 3), np.float32))
    np.testing.assert_array_equal(s, np.zeros(3, np.float32))
    assert e.shape == (0, 3)


@pytest.mark.parametrize("fn, want", [
    (lambda a: pypto.ops.split(a, [0, 3], axis=0), lambda a: np.split(a, [0, 3], axis=0)),
    (lambda a: pypto.ops.arange(3, 1) + a.sum(), lambda a: np.arange(3, 1) + a.sum()),
])
def test_every_zero_size_refusal_inside_runs_the_call_op_by_op(fn, want):
    # split's empty piece and arange's empty range are refused inside a trace as zero-size
    # values (ZeroSizeError), as slicing is: the call runs op by op (they were a ShapeError and
    # a ParamError out of the call).
    a = np.arange(6, dtype=np.float32)
    got, ref = pypto.jit(fn)(a), want(a)
    for g, r in zip(got if isinstance(got, tuple) else [got], ref if isinstance(ref, list)
                    else [ref]):
        assert g.shape == r.shape
        np.testing.assert_array_equal(g, r)


def test_zero_size_with_out():
    @pypto.jit
    def f(a):
        return a.sum(axis=0)

    out = np.full(3, 7, np.float32)
    assert f(np.zeros((0, 3), np.float32), out=out) is out
    np.testing.assert_array_equal(out, 0)
