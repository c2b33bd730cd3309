"""Defects a random program generator found (jit and fuse against the same calls run eagerly)."""

import numpy as np
import pytest

import pypto
from pypto import ops as o


@pytest.mark.parametrize("shape, axes", [((1, 3), None), ((4, 1), None), ((1, 2, 3), (1, 0, 2))])
def test_a_transpose_that_moves_nothing_stays_in_the_program(shape, axes):
    """Transposing past a size-1 axis is a dense copy; in a program it needed the traced
    value in Python (a graph break; under @fuse a FusionError)."""
    x = np.arange(np.prod(shape), dtype=np.float64).reshape(shape)
    want = np.transpose(x + 1.0, axes)
    fused = pypto.fuse(lambda x: o.transpose(x + 1.0, axes))
    np.testing.assert_array_equal(fused(x), want)
    got = pypto.jit(lambda x: o.transpose(x, axes))(x)
    np.testing.assert_array_equal(got, np.transpose(x, axes))
    assert not np.shares_memory(got, x)


@pytest.mark.parametrize("case", ["take_along_axis", "gather", "argmax"])
def test_a_fused_gather_of_computed_indices_along_an_axis_of_one(case):
    """A fused program gathering indices it computes along an axis of extent 1 failed to
    compile with every schedule ("Symbol not found: n4_out.s0.n4_x1.max"): the kernel's clamp
    of the index to [0, 0] was simplified away after the index was scheduled at root."""
    x = np.array([[0.5], [-2.0]])
    i = np.zeros((2, 1), np.int64)
    fn = {"take_along_axis": lambda x, i: o.take_along_axis(x + 1.0, i + 0, axis=1),
          "gather": lambda x, i: o.gather(x, 1, i * 1),
          "argmax": lambda x, i: o.take_along_axis(x, o.argmax(x, axis=1, keepdims=True),
                                                   axis=1)}[case]
    want = x + 1.0 if case == "take_along_axis" else x
    np.testing.assert_array_equal(pypto.fuse(fn)(x, i), want)
    np.testing.assert_array_equal(pypto.jit(fn)(x, i), want)


def test_an_out_of_range_index_along_an_axis_of_one_is_still_refused():
    x = np.array([[0.5], [-2.0]])
    with pytest.raises(pypto.PyptoError, match="out of range"):
        pypto.jit(lambda x, i: o.take_along_axis(x, i + 1, axis=1))(x, np.zeros((2, 1), np.int64))
