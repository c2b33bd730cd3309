"""Comparisons at the IEEE special values: NaN compares false (not_equal: true), inf and signed
zeros compare as numbers. Halide simplifies a float ``a == b`` into ``!(a < b) && !(b < a)``,
which is true for NaN; these tests hold every comparison to NumPy on such values, eager and
traced, in every float dtype."""

import numpy as np
import pytest
import torch

import pypto

P = pypto.ops
NAMES = ("equal", "not_equal", "less", "less_equal", "greater", "greater_equal")
A = [np.nan, 1.0, 2.0, np.nan, np.inf, -np.inf, -0.0, 0.0, np.inf, 3.0]
B = [1.0, 1.0, np.nan, np.nan, np.inf, np.inf, 0.0, -0.0, np.nan, -np.inf]


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
@pytest.mark.parametrize("name", NAMES)
def test_comparisons_at_special_values_match_numpy_and_torch(name, dtype):
    a, b = np.array(A, dtype), np.array(B, dtype)
    want = getattr(np, name)(a, b)
    np.testing.assert_array_equal(getattr(P, name)(a, b), want)
    tname = {"equal": "eq", "not_equal": "ne", "less": "lt", "less_equal": "le",
             "greater": "gt", "greater_equal": "ge"}[name]
    np.testing.assert_array_equal(
        getattr(torch, tname)(torch.from_numpy(a), torch.from_numpy(b)).numpy(), want)
    # Traced and fused with arithmetic (the comparison is inlined into a larger loop nest).
    fused = pypto.jit(lambda x, y: getattr(P, name)(x * 1.0, y + 0.0))
    np.testing.assert_array_equal(fused(a, b), want)


def test_tensor_operators_compare_like_numpy_at_nan():
    a, b = np.array(A, np.float32), np.array(B, np.float32)
    got = pypto.jit(lambda x, y: ((x == y), (x != y), (x <= y), (x >= y)))(a, b)
    for g, w in zip(got, (a == b, a != b, a <= b, a >= b)):
        np.testing.assert_array_equal(g, w)
