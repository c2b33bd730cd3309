"""pypto.Tensor follows NumPy where a traced program meets its corners: flag (True) indexes,
axes out of range, and casts to bool and to integers.

Each expectation is NumPy's own result on the same array, computed here.
"""

import numpy as np
import pytest

import pypto
from pypto.errors import ShapeError

X = np.arange(24, dtype=np.float32).reshape(2, 3, 4)


@pytest.mark.parametrize("key", [
    True, np.True_, (0, True), (True, 0), (slice(None), True), (None, True), (Ellipsis, True),
    (True, Ellipsis, True), (True, slice(1, None)), (0, slice(None), True), (0, True, 1),
    (slice(None), 0, slice(None), True), (1, None, True),
], ids=repr)
def test_a_true_index_adds_an_axis_where_numpy_puts_it(key):
    got = pypto.jit(lambda t: t[key] * 1.0)(X)
    want = X[key]
    assert got.shape == want.shape
    np.testing.assert_array_equal(got, want)


def test_a_false_index_gives_numpys_empty_result():
    got = pypto.jit(lambda t: t[False] * 1.0)(X)     # a zero-size value: run op by op
    assert got.shape == X[False].shape == (0, *X.shape)


@pytest.mark.parametrize("call", [
    lambda t: t.squeeze(5), lambda t: t.squeeze(-5), lambda t: t.swapaxes(0, 7),
    lambda t: t.transpose(0, 1, 2, 4), lambda t: np.moveaxis(t, 0, 4),
    lambda t: np.expand_dims(t, 6),
])
def test_an_axis_out_of_range_is_refused_not_wrapped(call):
    x = X.reshape(2, 1, 3, 4)
    with pytest.raises(ShapeError, match="out of bounds for a Tensor of rank"):
        pypto.jit(lambda t: call(t) * 1.0)(x)


@pytest.mark.parametrize("call", [lambda t: t.squeeze((1, 1)), lambda t: t.transpose(0, 0, 1, 2),
                                  lambda t: np.moveaxis(t, (0, 0), (1, 2))])
def test_an_axis_named_twice_is_refused(call):
    with pytest.raises(ShapeError, match="named twice"):
        pypto.jit(lambda t: call(t) * 1.0)(X.reshape(2, 1, 3, 4))


@pytest.mark.parametrize("call", [
    lambda a: a.squeeze((1, -1)), lambda a: a.swapaxes(-1, 0), lambda a: np.moveaxis(a, -1, 0),
    lambda a: np.expand_dims(a, -1), lambda a: a.transpose(3, 0, -2, 1), lambda a: a.swapaxes(1, 1),
])
def test_negative_axes_in_range_match_numpy(call):
    x = X.reshape(2, 1, 3, 4)[..., :1]
    got = pypto.jit(lambda t: call(t) * 1.0)(x)
    np.testing.assert_array_equal(got, call(x))


@pytest.mark.parametrize("src", [
    np.array([0, .5, -.3, 2, np.nan, -0., 1e-30, np.inf], np.float32),
    np.array([0, .5, -.3, 2, np.nan, -0., 1e-300, -np.inf], np.float64),
    np.array([0, 1, 2, -1, 256], np.int32),
], ids=["float32", "float64", "int32"])
def test_astype_bool_is_nonzero(src):
    # Every nonzero value is True (NaN included), not the lowest bit of a plain conversion.
    np.testing.assert_array_equal(pypto.jit(lambda t: t.astype(bool))(src), src.astype(bool))
    got = pypto.jit(lambda t: pypto.ops.where(t.astype(bool), 1.0, 0.0))(src)
    np.testing.assert_array_equal(got, np.where(src != 0, 1.0, 0.0))


def test_astype_to_int_saturates_like_the_cast_op():
    y = np.array([1.5, -2.7, 3e9, np.nan, -3e9], np.float32)
    got = pypto.jit(lambda t: t.astype(np.int32))(y)
    # pypto.ops.cast's documented rule: toward zero, saturated, NaN -> 0
    np.testing.assert_array_equal(got, [1, -2, 2**31 - 1, 0, -2**31])
