"""Sizes computed with NumPy reach the conv/pool/quantize parameters as NumPy values: a 1-D int
array of the right length counts as the sequence it holds, a NumPy integer as an int; any other
array is a ParamError naming the op and argument (int() of them raised raw TypeErrors, or
truncated a float array)."""

import numpy as np
import pytest

import pypto
from pypto.errors import ParamError

o = pypto.ops
RNG = np.random.default_rng(44)
X1 = RNG.standard_normal((1, 2, 9)).astype(np.float32)
X3 = RNG.standard_normal((1, 2, 4, 4, 4)).astype(np.float32)
X4 = RNG.standard_normal((1, 2, 6, 6)).astype(np.float32)


@pytest.mark.parametrize("call, as_list", [
    (lambda a: o.conv1d(X1, np.ones((3, 2, 3), np.float32), stride=a([2])),
     lambda: o.conv1d(X1, np.ones((3, 2, 3), np.float32), stride=[2])),
    (lambda a: o.max_pool1d(X1, a([2])), lambda: o.max_pool1d(X1, [2])),
    (lambda a: o.max_pool3d(X3, a([2, 2, 2])), lambda: o.max_pool3d(X3, [2, 2, 2])),
    (lambda a: o.avg_pool3d(X3, a([2, 1, 2])), lambda: o.avg_pool3d(X3, [2, 1, 2])),
    (lambda a: o.conv3d(X3, np.ones((2, 2, 1, 1, 1), np.float32), stride=a([1, 2, 1])),
     lambda: o.conv3d(X3, np.ones((2, 2, 1, 1, 1), np.float32), stride=[1, 2, 1])),
    (lambda a: o.conv_transpose2d(X4, np.ones((2, 3, 3, 3), np.float32), stride=a([2, 2]),
                                  output_padding=a([1, 1])),
     lambda: o.conv_transpose2d(X4, np.ones((2, 3, 3, 3), np.float32), stride=[2, 2],
                                output_padding=[1, 1])),
])
def test_an_int_array_is_the_sequence_it_holds(call, as_list):
    np.testing.assert_array_equal(call(np.array), as_list())


@pytest.mark.parametrize("bad", [np.array([[2]]), np.array(2.5), np.array([2.0])])
def test_other_arrays_are_a_param_error_naming_the_argument(bad):
    with pytest.raises(ParamError, match=r"conv1d: 'stride' must be an int"):
        o.conv1d(X1, np.ones((3, 2, 3), np.float32), stride=bad)


def test_quantize_bounds_take_numpy_ints_and_refuse_arrays():
    x = np.linspace(-1, 1, 8).astype(np.float32)
    np.testing.assert_array_equal(
        o.fake_quantize_per_tensor_affine(x, 0.1, 0, np.int64(-8), np.array(7)),
        o.fake_quantize_per_tensor_affine(x, 0.1, 0, -8, 7))
    with pytest.raises(ParamError, match="quant_min.*expects an int"):
        o.fake_quantize_per_tensor_affine(x, 0.1, 0, np.array([0, 1]), 255)
