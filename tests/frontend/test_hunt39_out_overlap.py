"""out= of a jitted function with several results: two entries sharing memory are refused
before anything is written (the second result overwrote the first, returned as both)."""

import numpy as np
import pytest

import pypto
from pypto.errors import ParamError

X = np.arange(6, dtype=np.float32).reshape(2, 3)


@pypto.jit
def two(x):
    return x * 2.0, x + 1.0


@pytest.mark.parametrize("calls", [1, 3])     # the tracing call and the replays
def test_one_array_for_two_results_is_refused(calls):
    a = np.full((2, 3), -7.0, np.float32)
    for _ in range(calls - 1):
        two(X)
    with pytest.raises(ParamError, match=r"out\[0\] and out\[1\] share memory"):
        two(X, out=(a, a))
    assert (a == -7.0).all()


def test_views_of_one_buffer_are_refused():
    buf = np.empty((2, 2, 3), np.float32)
    with pytest.raises(ParamError, match="share memory"):
        two(X, out=(buf[0], buf.reshape(-1)[2:8].reshape(2, 3)))


def test_separate_arrays_and_none_are_taken():
    buf = np.empty((2, 2, 3), np.float32)
    p, q = two(X, out=(buf[0], buf[1]))
    np.testing.assert_array_equal(buf[0], X * 2.0)
    np.testing.assert_array_equal(buf[1], X + 1.0)
    assert np.shares_memory(p, buf[0]) and np.shares_memory(q, buf[1])
    p, q = two(X, out=(None, buf[1]))
    np.testing.assert_array_equal(p, X * 2.0)
