"""Malformed scalar arguments are typed PyPTO errors naming the parameter (helper-65's hunt).

Each of these escaped as a raw Python/NumPy exception: an array of several ints as an axis
(``operator.index``: TypeError "only integer scalar arrays..."), an int parameter given an array
(``int(array)``), a non-number masked_fill value (``float('a')``: ValueError), a requantize dtype
that is no dtype (``np.dtype(1.5)``: TypeError) and vector_norm's ord as a Python int beyond
int64 (``np.isnan(10**20)``: TypeError)."""

import numpy as np
import pytest

import pypto
from pypto.errors import ParamError

P = pypto.ops
X = np.ones((2, 3, 4), np.float32)
IMG = np.ones((2, 3, 6, 5), np.float32)


@pytest.mark.parametrize("call, what", [
    (lambda: P.sum(X, axis=np.array([1, 2])), r"^sum: parameter 'axis' must be None, an int"),
    (lambda: P.argmax(X, axis=np.array([0, 1])), r"^argmax: parameter 'axis'"),
    (lambda: P.median(X, axis=np.array([0, 1])), r"^median: parameter 'axis'"),
    (lambda: P.softmax(X, axis=np.array([0, 1])), r"^softmax: parameter 'axis' must be an int"),
    (lambda: P.glu(X, np.array([0, 1])), r"^glu: parameter 'axis' must be an int"),
    (lambda: P.box_blur(IMG, np.array([3, 5])), r"^box_blur: .*'size' expects one int, got an "
                                                r"array of shape \(2,\)"),
    (lambda: P.median_blur(IMG, np.array([3, 5])), r"^median_blur: .*one int"),
    (lambda: P.masked_fill(X, X > 0, "a"), r"^masked_fill: 'value' must be a number"),
    (lambda: P.masked_fill(X, X > 0, None), r"^masked_fill: 'value' must be a number"),
    (lambda: P.masked_fill(X, X > 0, [0]), r"^masked_fill: 'value' must be a number"),
    (lambda: P.masked_fill(X, X > 0, np.array([1.0, 2.0])), r"^masked_fill: 'value' must be one"),
    (lambda: P.requantize(np.ones(3, np.int32), 0.5, 0, dtype=1.5), r"^requantize: parameter "
                                                                    r"'dtype' must be 'int8'"),
    (lambda: P.quantize(X, 0.5, 0, dtype=[0]), r"^quantize: parameter 'dtype'"),
    (lambda: P.vector_norm(X, 10**20), r"^vector_norm: "),
])
def test_a_malformed_argument_is_a_param_error(call, what):
    with pytest.raises(ParamError, match=what):
        call()


def test_well_formed_values_still_work():
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4) - 10
    m = x > 0
    np.testing.assert_array_equal(P.masked_fill(x, m, np.array(-1.5)), np.where(m, -1.5, x))
    np.testing.assert_array_equal(P.masked_fill(x, m, np.float64(2)), np.where(m, 2, x))
    np.testing.assert_array_equal(P.masked_fill(x, m, True), np.where(m, 1, x))
    np.testing.assert_array_equal(P.sum(x, axis=np.int64(1)), x.sum(axis=1))
    np.testing.assert_array_equal(P.sum(x, axis=np.array(2)), x.sum(axis=2))
    np.testing.assert_allclose(P.softmax(x, axis=np.int32(0)),
                               np.exp(x - x.max(0)) / np.exp(x - x.max(0)).sum(0), rtol=1e-6)
    q = P.requantize(np.array([-300, 3, 300], np.int32), 0.5, 0, dtype=np.uint8)
    np.testing.assert_array_equal(q, np.array([0, 2, 150], np.uint8))
    np.testing.assert_allclose(P.vector_norm(x, 3), np.sum(np.abs(x) ** 3) ** (1 / 3), rtol=1e-5)


def test_a_pair_given_as_an_int_array_is_a_pair():
    """max_pool2d(x, np.array([2, 2])) raised a raw TypeError ('only 0-dimensional arrays can be
    converted to Python scalars'); a 1-D int array is a pair, as a list is."""
    x = np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)
    want = P.max_pool2d(x, (2, 2))
    np.testing.assert_array_equal(P.max_pool2d(x, np.array([2, 2])), want)
    w = np.ones((1, 1, 3, 3), np.float32)
    np.testing.assert_array_equal(P.conv2d(x, w, stride=np.array([1, 2]), padding=np.array([1, 1])),
                                  P.conv2d(x, w, stride=(1, 2), padding=(1, 1)))
    with pytest.raises(pypto.ParamError, match=r"'kernel_size' must be an int or a pair of ints"):
        P.max_pool2d(x, np.array([[2, 2]]))
    with pytest.raises(pypto.ParamError, match=r"'kernel_size' must be an int or a pair of ints"):
        P.max_pool2d(x, np.array([2.5, 2.0]))
