"""Indexing edge cases against torch and NumPy: 0-d inputs of ``gather`` and ``index_select``
(torch reads a 0-d tensor as one of shape (1,)), ``take_along_axis`` with ``axis=None`` and
with shapes that do not broadcast."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import assert_same

import pypto
import pypto.ops as P
from pypto.errors import ParamError, ShapeError


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
    assert_same(P.gather(x, dim, index), want)
    assert_same(pypto.jit(lambda a: P.gather(a, dim, index))(x), want)


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
    assert_same(P.index_select(x, dim, index), want)
    assert_same(pypto.jit(lambda a: P.index_select(a, dim, index))(x), want)


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


# -- take_along_axis -------------------------------------------------------------------------------

X = np.arange(12, dtype=np.float32).reshape(3, 4)


@pytest.mark.parametrize("idx", [np.array([0, 11, -1, 5]), np.array([3], np.int32)])
def test_take_along_axis_with_axis_none_flattens_like_numpy(idx):
    want = np.take_along_axis(X, idx, axis=None)
    assert_same(P.take_along_axis(X, idx, None), want)
    assert_same(P.take_along_axis(X, idx, axis=None), want)
    assert_same(pypto.jit(lambda a: P.take_along_axis(a, idx, None))(X), want)
    assert_same(P.take_along_axis(np.float32(4), np.array([0, -1]), None), np.array([4, 4], np.float32))


def test_take_along_axis_with_axis_none_needs_1d_indices():
    with pytest.raises(ShapeError, match=r"with axis=None \(arr flattened\) indices must be 1-D, "
                                         r"got shape \(1, 2\)"):
        P.take_along_axis(X, np.array([[0, 1]]), None)
    with pytest.raises(ValueError, match="single dimension"):         # NumPy refuses it too
        np.take_along_axis(X, np.array([[0, 1]]), None)
    with pytest.raises(ParamError, match=r"indices\[0\] = 12 is out of range; valid indices are "
                                         "-12 to 11"):
        P.take_along_axis(X, np.array([12]), None)


def test_take_along_axis_of_a_0d_array_needs_axis_none():
    with pytest.raises(ShapeError, match="take_along_axis: arr is 0-d"):
        P.take_along_axis(np.float32(3), np.int64(0), 0)
    with pytest.raises(np.exceptions.AxisError):
        np.take_along_axis(np.float32(3), np.int64(0), 0)


def test_take_along_axis_with_shapes_that_do_not_broadcast_is_a_shape_error():
    x, idx = np.zeros((3, 4, 5), np.float32), np.zeros((1, 3, 5), np.int64)
    with pytest.raises(IndexError):                                     # NumPy's refusal
        np.take_along_axis(x, idx, axis=0)
    with pytest.raises(ShapeError, match=r"take_along_axis: arr \(3, 4, 5\) and indices "
                                         r"\(1, 3, 5\) do not broadcast"):
        P.take_along_axis(x, idx, 0)
    with pytest.raises(ShapeError, match=r"\(3, 4, 5\) and indices \(1, 3, 5\)"):
        pypto.jit(lambda a: P.take_along_axis(a, idx, 0))(x)
    # the axes that do broadcast still do
    idx2 = np.array([[[0], [2]]])                                     # (1, 2, 1) against (3, 4, 5)
    assert_same(P.take_along_axis(x + np.arange(60).reshape(3, 4, 5), idx2, 1),
        np.take_along_axis(x + np.arange(60).reshape(3, 4, 5), idx2, 1))


def test_gradients_through_the_0d_and_flattened_forms():
    _, vjp = pypto.vjp(lambda a: P.gather(a, 0, np.array([0, 0])), np.float32(3))
    assert_same(vjp(np.ones(2, np.float32))[0], np.float32(2))
    _, vjp = pypto.vjp(lambda a: P.index_select(a, 0, np.int64(0)) * 2.0, np.float32(3))
    assert_same(vjp(np.float32(1))[0], np.float32(2))
    x = np.arange(6.0).reshape(2, 3)
    _, vjp = pypto.vjp(lambda a: P.take_along_axis(a, np.array([0, 5, -1]), None), x)
    assert_same(vjp(np.ones(3))[0], np.array([[1.0, 0, 0], [0, 0, 2]]))
