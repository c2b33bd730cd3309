"""pypto.spec checks its shape and dtype: a float extent was truncated (2.5 -> 2), a negative
one taken, and a bad entry or dtype was a raw ValueError/TypeError."""

import numpy as np
import pytest

import pypto
from pypto.errors import DtypeError, ShapeError


@pytest.mark.parametrize("shape", [(3, 2.5), (3, -1), ("abc",), "abc", None, (True, 2), 2.0])
def test_a_bad_shape_is_a_shape_error(shape):
    with pytest.raises(ShapeError, match="must be a tuple of non-negative ints"):
        pypto.spec(shape)


def test_a_bad_dtype_is_a_dtype_error():
    with pytest.raises(DtypeError, match="'float99' is not a dtype"):
        pypto.spec((3,), "float99")


def test_an_int_is_a_one_dimensional_shape():
    s = pypto.spec(np.int64(5), "float64")
    assert s.shape == (5,) and s.dtype == np.float64
    report = pypto.check_graph(lambda a: a * 2.0, pypto.spec(4))
    assert report.ok and report.outputs[0][0] == (4,)


def test_numpy_extents_are_ints():
    s = pypto.spec(np.zeros((2, 3)).shape)
    assert s.shape == (2, 3) and all(type(n) is int for n in s.shape)
