"""A gradient program exists only as a trace: a zero-size argument is refused by name with a
ShapeError (jit runs such a call op by op, which gave grad plain arrays where it differentiates
traced values: "argument #0 is ndarray, not an array")."""

import numpy as np
import pytest

import pypto


@pytest.mark.parametrize("how", ["grad", "value_and_grad", "vjp"])
def test_a_zero_size_argument_is_refused_naming_it(how):
    fn = lambda x: pypto.ops.sum(x * 2.0)      # noqa: E731
    x = np.zeros((0, 3), np.float32)
    with pytest.raises(pypto.ShapeError, match=r"array #0 of this call has shape \(0, 3\)"):
        if how == "vjp":            # the forward runs (op by op); its backward is refused
            out, back = pypto.vjp(fn, x)
            assert out == 0.0
            back(np.float32(1.0))
        else:
            getattr(pypto, how)(fn)(x)
    # the same function still differentiates non-empty arrays
    g = pypto.grad(fn)(np.ones((2, 3), np.float32))
    np.testing.assert_array_equal(g, np.full((2, 3), 2.0, np.float32))
