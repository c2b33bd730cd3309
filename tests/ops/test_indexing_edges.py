"""Indexing edge cases against torch and NumPy: 0-d inputs of ``gather`` and ``index_select``
(torch reads a 0-d tensor as one of shape (1,))."""

from __future__ import annotations

import numpy as np
import pytest

import pypto
import pypto.ops as P
from pypto.errors import ParamError, ShapeError


def _eq(got, want):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, want.shape,
                                                                 got.dtype, want.dtype)
    np.testing.assert_array_equal(got, want)


def _torch():
    return pytest.importorskip("torch")


# -- gather ----------------------------------------------------------------------------------------

GATHER_0D = [  # (x, dim, index): a 0-d x or index against a 0-d or 1-D other
    (np.float32(3), 0, np.int64(0)),
    (np.float32(3), -1, np.int64(0)),
    (np.float32(3), 0, np.array([0, 0, 0])),
    (np.array([1.0, 2.0, 5.0], np.float32), 0, np.int64(2)),
    (np.array([1.0, 2.0, 5.0]), -1, np.int32(1)),
]


@pytest.mark.parametrize("x, dim, index", GATHER_0D)
def test_gather_of_0d_arrays_agrees_with_torch(x, dim, index):
    torch = _torch()
    want = torch.gather(torch.tensor(x), dim, torch.tensor(index, dtype=torch.int64)).numpy()
    _eq(P.gather(x, dim, index), want)
    _eq(pypto.jit(lambda a: P.gather(a, dim, index))(x), want)


def test_gather_of_0d_arrays_refuses_what_torch_refuses():
    torch = _torch()
    with pytest.raises(ParamError, match=r"gather: 'axis' must be in \[-1, 0\] for an input of "
                                         "rank 0, got 1"):
        P.gather(np.float32(3), 1, np.int64(0))
    with pytest.raises(IndexError):
        torch.gather(torch.tensor(3.0), 1, torch.tensor(0))
    with pytest.raises(ParamError, match=r"gather: index\[0\] = 1 is out of range; valid "
                                         "indices are 0 to 0"):
        P.gather(np.float32(3), 0, np.int64(1))
    with pytest.raises(ShapeError, match=r"gather: index must have the rank of x \(0\)"):
        P.gather(np.float32(3), 0, np.zeros((2, 2), np.int64))
    with pytest.raises(RuntimeError, match="same number of dimensions"):
        torch.gather(torch.tensor(3.0), 0, torch.zeros(2, 2, dtype=torch.int64))


# -- index_select ----------------------------------------------------------------------------------

SELECT_0D = [
    (np.float32(2), 0, np.array([0])),
    (np.float32(2), -1, np.int64(0)),
    (np.float64(-7), 0, np.array([0], np.int32)),
    (np.arange(6, dtype=np.float32).reshape(2, 3), 1, np.int64(2)),
    (np.arange(6, dtype=np.int64).reshape(2, 3), 0, np.array(1, np.int32)),
]


@pytest.mark.parametrize("x, dim, index", SELECT_0D)
def test_index_select_of_0d_arrays_agrees_with_torch(x, dim, index):
    torch = _torch()
    want = torch.index_select(torch.tensor(x), dim, torch.tensor(index)).numpy()
    _eq(P.index_select(x, dim, index), want)
    _eq(pypto.jit(lambda a: P.index_select(a, dim, index))(x), want)


def test_index_select_of_a_0d_x_takes_one_index():
    torch = _torch()
    with pytest.raises(ShapeError, match="index_select: a 0-d x takes exactly one index, got 2"):
        P.index_select(np.float32(2), 0, np.array([0, 0]))
    with pytest.raises(RuntimeError, match="only 1 value"):
        torch.index_select(torch.tensor(2.0), 0, torch.tensor([0, 0]))
    with pytest.raises(ParamError, match=r"index_select: index\[0\] = 1 is out of range"):
        P.index_select(np.float32(2), 0, np.array([1]))
    with pytest.raises(ShapeError, match=r"index must be 1-D \(or 0-d\), got shape \(1, 1\)"):
        P.index_select(np.ones((2, 3), np.float32), 1, np.array([[0]]))


def test_gradients_through_the_0d_forms():
    _, vjp = pypto.vjp(lambda a: P.gather(a, 0, np.array([0, 0])), np.float32(3))
    _eq(vjp(np.ones(2, np.float32))[0], np.float32(2))
    _, vjp = pypto.vjp(lambda a: P.index_select(a, 0, np.int64(0)) * 2.0, np.float32(3))
    _eq(vjp(np.float32(1))[0], np.float32(2))
