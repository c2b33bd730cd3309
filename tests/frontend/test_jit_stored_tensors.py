"""A jitted method that stores a traced value on its instance (``self.h = self.h + x``) left a
pypto.Tensor of an ended trace in the attribute: the next calls read it and failed with "this
pypto.Tensor belongs to a trace that has ended" (or replayed without updating the state). The
store is refused at trace time, the attribute left as it was, with what to write instead."""
import numpy as np
import pytest

import pypto
from pypto.errors import TraceError


class _Accumulator:
    def __init__(self):
        self.h = np.zeros((2, 3), np.float32)
        self.steps = 0

    @pypto.jit
    def step(self, x):
        self.h = self.h + x
        return self.h * 2

    @pypto.jit
    def pure_step(self, x):
        h = self.h + x
        return h * 2, h


def test_a_traced_value_stored_on_the_instance_is_refused_and_the_state_kept():
    m = _Accumulator()
    x = np.ones((2, 3), np.float32)
    with pytest.raises(TraceError, match=r"_Accumulator\.h.*m\.h = m\.step|assign it after"):
        m.step(x)
    assert type(m.h) is np.ndarray and np.array_equal(m.h, np.zeros((2, 3), np.float32))
    with pytest.raises(TraceError):        # every call says so, none corrupts the state
        m.step(x)
    assert type(m.h) is np.ndarray


def test_the_state_returned_and_assigned_by_the_caller_works():
    m = _Accumulator()
    x = np.ones((2, 3), np.float32)
    for i in range(1, 4):
        out, m.h = m.pure_step(x)
        np.testing.assert_array_equal(out, np.full((2, 3), 2.0 * i, np.float32))
    np.testing.assert_array_equal(m.h, np.full((2, 3), 3.0, np.float32))


def test_a_stored_number_or_array_is_not_refused():
    class Counter:
        def __init__(self):
            self.calls = 0
            self.w = np.ones(3, np.float32)

        @pypto.jit
        def f(self, x):
            self.calls += 1          # Python side effects run only while tracing, as in JAX
            self.w = np.full(3, 2, np.float32)
            return x * 2

    c = Counter()
    np.testing.assert_array_equal(c.f(np.ones(3, np.float32)), np.full(3, 2.0, np.float32))
    assert c.calls == 1


def test_a_traced_value_stored_in_a_nested_module_is_refused():
    class Cell:
        def __init__(self):
            self.c = np.zeros(3, np.float32)

    class Net:
        def __init__(self):
            self.cell = Cell()

        @pypto.jit
        def f(self, x):
            self.cell.c = x * 2
            return x + 1

    n = Net()
    with pytest.raises(TraceError, match=r"Cell\.c"):
        n.f(np.ones(3, np.float32))
    assert type(n.cell.c) is np.ndarray
