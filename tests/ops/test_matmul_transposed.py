"""``matmul`` of transposed views (``x @ w.T``, ``a.T @ g``): values against float64 NumPy, and
which kernels ran: a transposed right operand is read in place by linear's kernel (no copy), a
transposed left one is made dense by the blocked transpose kernel (not NumPy's strided copy)."""

import numpy as np
import pytest

import pypto
from pypto import ops
from pypto.runtime import observe

RNG = np.random.default_rng(3)


def _ran(fn):
    with observe() as calls:
        out = fn()
    return out, [c[0].name for c in calls]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(64, 96, 130), (3, 5, 7), (1, 9, 4), (33, 1, 8), (70, 70, 1)])
def test_every_layout_of_two_matrices(shape, dtype):
    m, k, n = shape
    a = RNG.standard_normal((m, k)).astype(dtype)
    b = RNG.standard_normal((k, n)).astype(dtype)
    want = a.astype(np.float64) @ b
    for x in (a, np.ascontiguousarray(a.T).T):
        for y in (b, np.ascontiguousarray(b.T).T):
            got = ops.matmul(x, y)
            assert got.shape == want.shape and got.dtype == dtype
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_a_transposed_right_operand_is_read_in_place():
    x = RNG.standard_normal((48, 64)).astype(np.float32)
    w = RNG.standard_normal((80, 64)).astype(np.float32)
    got, ran = _ran(lambda: ops.matmul(x, w.T))
    assert ran == ["linear"]
    np.testing.assert_allclose(got, x.astype(np.float64) @ w.T, rtol=1e-4, atol=1e-4)


def test_a_transposed_left_operand_is_made_dense_by_the_transpose_kernel():
    a = RNG.standard_normal((128, 96)).astype(np.float32)
    g = RNG.standard_normal((128, 40)).astype(np.float32)
    got, ran = _ran(lambda: ops.matmul(a.T, g))
    assert ran == ["transpose", "matmul"]
    np.testing.assert_allclose(got, a.T.astype(np.float64) @ g, rtol=1e-4, atol=1e-4)


def test_mismatches_keep_matmuls_errors():
    with pytest.raises(pypto.ShapeError, match="dim K is 4 in 'a'"):
        ops.matmul(np.ones((3, 4), np.float32), np.ones((5, 3), np.float32).T)
    with pytest.raises(pypto.DtypeError):
        ops.matmul(np.ones((3, 4), np.float32), np.ones((5, 4), np.float64).T)
