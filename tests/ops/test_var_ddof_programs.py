"""var/std with ddof >= N give NumPy's inf (NaN for a constant row) in eager calls and in
programs: in a program the kernel's extent is a constant, and Halide folded the division by 0.0
away, leaving the output unwritten (stale or uninitialized values came back)."""

from __future__ import annotations

import numpy as np
import pytest

import pypto

o = pypto.ops


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", ["var", "std"])
@pytest.mark.parametrize("ddof", [3, 4, 5, 4.5])
def test_ddof_at_and_past_the_length(dtype, name, ddof):
    x = np.random.default_rng(0).random((3, 4)).astype(dtype)
    x[1] = 0.25                                        # a constant row: 0 / 0
    op = getattr(o, name)
    with np.errstate(all="ignore"):
        want = getattr(np, name)(x, axis=1, ddof=ddof)
    eager = op(x, axis=1, ddof=ddof)
    fused = pypto.jit(lambda x: op(x, axis=1, ddof=ddof) * 1.0)(x)
    alone = pypto.jit(lambda x, d: op(x, axis=1, ddof=d))
    alone(x, 0)                                         # a first result the pool may hand back
    for got in (eager, fused, alone(x, ddof)):
        np.testing.assert_allclose(got, want, rtol=1e-6, equal_nan=True)

