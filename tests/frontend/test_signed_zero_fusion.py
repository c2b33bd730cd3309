"""A fused program gives the eager ops' signed zeros: Halide 21's abs of +0.0 came out -0.0
inside a fused pipeline, so ``jit(lambda x: 1.0 / abs(x))`` gave -inf at 0.0 where the eager
calls (and NumPy) give +inf. abs of a float now clears the sign bit."""

import numpy as np
import pytest

import pypto
from pypto import ops as o

X = [0.0, -0.0, 1.0, -0.5, np.inf, -np.inf, np.nan]

CASES = {
    "recip_abs": (lambda x: 1.0 / o.abs(x), lambda x: 1.0 / np.abs(x)),
    "abs_prod": (lambda x: o.abs(x * (1.0 - x)), lambda x: np.abs(x * (1.0 - x))),
    "scaled": (lambda x: o.abs(x) * 3.0, lambda x: np.abs(x) * 3.0),
}


@pytest.mark.parametrize("dtype", ["float64", "float32", "float16"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_abs_inside_a_program_keeps_plus_zero(case, dtype):
    fn, ref = CASES[case]
    x = np.array(X, dtype)
    got = pypto.jit(fn)(x)
    with np.errstate(divide="ignore", invalid="ignore"):
        want = ref(x).astype(dtype)
    np.testing.assert_array_equal(got, want)
    finite = ~np.isnan(want)
    np.testing.assert_array_equal(np.signbit(got[finite]), np.signbit(want[finite]))
    np.testing.assert_array_equal(got, fn(x))          # the eager calls agree
