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
