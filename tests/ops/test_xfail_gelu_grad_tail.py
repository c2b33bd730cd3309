"""Outside pypto/ops: autodiff's gelu rule (pypto/autodiff/rules/elementwise.py gelu_grad) sums
0.5 (1 + erf(x / sqrt 2)) + x pdf(x), which cancels below x = -4: float32 reads 3% off at -6 (the
forward no longer cancels). Reference: Phi(x) + x phi(x) with math.erfc per element."""

import math

import numpy as np
import pytest

import pypto
from pypto import ops


@pytest.mark.xfail(strict=True, reason="gelu_grad cancels in the tail (autodiff rule, not ops)")
def test_gelu_grad_float32_tail_relative_accuracy():
    x = np.array([-3.0, -4.0, -5.0, -6.0, -8.0], np.float32)
    g = np.asarray(pypto.grad(lambda t: ops.sum(ops.gelu(t)))(x)).astype(np.float64)
    want = np.array([0.5 * math.erfc(-v / math.sqrt(2.0)) + v * math.exp(-v * v / 2)
                     / math.sqrt(2.0 * math.pi) for v in x.astype(np.float64).tolist()])
    np.testing.assert_allclose(g, want, rtol=1e-5)
