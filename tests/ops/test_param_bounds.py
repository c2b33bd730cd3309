"""Integer parameters are bounded, so an out-of-range value is a ParamError naming the bound,
never a Halide error about a 64-bit integer that does not fit its 32-bit indices."""

import numpy as np
import pytest

import pypto
from pypto.errors import ParamError

INT_PARAMS = [(op.name, p) for op in pypto.ops.builtin_ops() for p in op.params
              if p.kind is int]


@pytest.mark.parametrize("name, param", INT_PARAMS, ids=[f"{n}.{p.name}" for n, p in INT_PARAMS])
def test_every_int_param_has_bounds_that_fit_32_bits(name, param):
    assert param.low is not None and param.high is not None, f"{name}.{param.name} is unbounded"
    assert -(2 ** 31) <= param.low <= param.high < 2 ** 31
    with pytest.raises(ParamError, match=f"{name}: parameter '{param.name}' must be <= {param.high}"):
        param.coerce(name, 10 ** 10)


X = np.ones((1, 2, 6, 6), np.float32)
W = np.ones((2, 2, 3, 3), np.float32)


@pytest.mark.parametrize("kwargs, param", [
    ({"padding": 10 ** 10}, "pad_h"), ({"stride": 10 ** 10}, "stride_h"),
    ({"dilation": 10 ** 10}, "dil_h"), ({"groups": 10 ** 10}, "groups"),
    ({"padding": 2 ** 31 - 1}, "pad_h"),
])
def test_conv2d_with_a_huge_int_is_a_param_error(kwargs, param):
    with pytest.raises(ParamError, match=f"conv2d: parameter '{param}' must be <= "):
        pypto.ops.conv2d(X, W, **kwargs)


@pytest.mark.parametrize("name", ["max_pool2d", "avg_pool2d"])
def test_pooling_with_a_huge_stride_is_a_param_error(name):
    with pytest.raises(ParamError, match=f"{name}: parameter 'stride_h' must be <= "):
        getattr(pypto.ops, name)(X, kernel_size=3, stride=10 ** 10)


def test_an_array_for_a_number_parameter_is_a_param_error():
    # float() of a size-2 array raised NumPy's raw TypeError out of Param.coerce
    x = np.ones((4, 2), np.float32)
    with pytest.raises(ParamError, match=r"quantize: parameter 'scale' expects one number, got an "
                                         r"array of shape \(2,\)"):
        pypto.ops.quantize(x, np.array([0.1, 0.2]), 0)
    assert pypto.ops.quantize(x, np.float64(0.5), 0).dtype == np.int8      # one number is fine
