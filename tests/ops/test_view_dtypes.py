"""flip, split and diagonal return NumPy views eagerly, for any dtype NumPy has; their kernels
(out=, traced programs, the torch bridge) take the same dtypes. Before, float16 and the small
integer types worked eagerly and were refused with out= or under @pypto.jit."""

import numpy as np
import pytest

import pypto
from pypto import ops

rng = np.random.default_rng(3)


@pytest.mark.parametrize("dt", ["float16", "int8", "int16", "uint8", "uint16", "uint32", "bool"])
def test_view_ops_take_every_dtype_in_programs_and_with_out(dt):
    x = (rng.standard_normal((3, 5, 4)) * 50).astype(dt)
    f = pypto.jit(lambda t: (ops.flip(t, 1), ops.split(t, [2], axis=2)[1],
                             ops.diagonal(t, 1, 1, 2)))
    a, b, c = f(x)
    np.testing.assert_array_equal(a, np.flip(x, 1))
    np.testing.assert_array_equal(b, np.split(x, [2], axis=2)[1])
    np.testing.assert_array_equal(c, np.diagonal(x, 1, 1, 2))
    o = np.empty_like(x)
    assert ops.flip(x, 1, out=o) is o
    np.testing.assert_array_equal(o, np.flip(x, 1))
