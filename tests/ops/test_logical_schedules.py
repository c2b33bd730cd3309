"""The bool ops' default schedules (pypto/schedule/templates/logical.py): every shape class the
template distinguishes (serial, rows per task, one row per task, chunks of long rows; tails of
the unrolled vector loop and of the tasks) against NumPy, fresh and written over an input."""

from __future__ import annotations

import numpy as np
import pytest

import pypto
from pypto.schedule.templates.logical import BYTE_TASK

RNG = np.random.default_rng(7)


@pytest.mark.parametrize("n", [1, 31, 32, 127, 128, 1000, 2 * BYTE_TASK - 1, 2 * BYTE_TASK,
                               3 * BYTE_TASK + 77])
def test_logical_not(n):
    x = RNG.random(n) < 0.5
    want = np.logical_not(x)
    np.testing.assert_array_equal(pypto.ops.logical_not(x), want)
    # Written over its own input: a tail computed twice would read the overwritten values.
    pypto.ops.logical_not(x, out=x)
    np.testing.assert_array_equal(x, want)


@pytest.mark.parametrize("shape", [(3, 100), (1, 1000), (4, 2 * BYTE_TASK // 4 + 3),
                                   (1031, 1031), (64, BYTE_TASK // 64 + 5), (1, 2 * BYTE_TASK + 9),
                                   (3, BYTE_TASK + 1)])
@pytest.mark.parametrize("name", ["logical_and", "logical_or"])
def test_logical_binary(name, shape):
    a = RNG.random(shape) < 0.5
    b = RNG.random(shape) < 0.5
    want = getattr(np, name)(a, b)
    fn = getattr(pypto.ops, name)
    np.testing.assert_array_equal(fn(a, b), want)
    fn(a, b, out=a)
    np.testing.assert_array_equal(a, want)


def test_mixed_runs():
    """Runs of True and False that straddle the unrolled loop's vectors and its tail."""
    a = np.zeros(4096 + 13, bool)
    a[::3] = True
    b = np.roll(a, 1)
    np.testing.assert_array_equal(pypto.ops.logical_and(a, b), a & b)
    np.testing.assert_array_equal(pypto.ops.logical_or(a, b), a | b)
    np.testing.assert_array_equal(pypto.ops.logical_not(a), ~a)
