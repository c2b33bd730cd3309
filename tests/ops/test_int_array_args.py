"""Int and int-pair parameters given as NumPy values: a NumPy integer is an int, a 1-D int array
of two is a pair (as a list is), and anything else is a ParamError naming the op and argument
(these raised raw TypeErrors / ValueErrors, or were silently taken)."""

import numpy as np
import pytest

from pypto import ops
from pypto.errors import ParamError

RNG = np.random.default_rng(0)
X4 = RNG.random((1, 2, 6, 8)).astype(np.float32)
X1 = RNG.random(10).astype(np.float32)
BOXES = np.array([[0, 0, 0, 4, 4]], np.float32)


def test_upsample_scale_factor_numpy_values_act_as_numbers():
    want = ops.upsample_nearest(X4, scale_factor=2)
    for sf in (np.int64(2), np.float32(2.0), np.array([2, 2]), np.array(2.0)):
        np.testing.assert_array_equal(ops.upsample_nearest(X4, scale_factor=sf), want)


def test_roi_align_output_size_array_is_a_pair():
    want = ops.roi_align(X4, BOXES, (2, 3))
    np.testing.assert_array_equal(ops.roi_align(X4, BOXES, np.array([2, 3])), want)
    with pytest.raises(ParamError, match="roi_align: 'output_size' must be an int or a pair"):
        ops.roi_align(X4, BOXES, np.array([[2, 3]]))


def test_histogram_bins_array_is_a_param_error():
    with pytest.raises(ParamError, match="histogram: parameter 'bins'"):
        ops.histogram(X1, bins=np.array([[1, 2]]))
    counts, _ = ops.histogram(X1, bins=np.int64(4))
    assert counts.shape == (4,)


def test_one_hot_num_classes_array_is_a_param_error():
    with pytest.raises(ParamError, match="one_hot: 'num_classes' must be an int, got an array"):
        ops.one_hot(np.array([0, 1, 2]), np.array([4, 5]))
    assert ops.one_hot(np.array([0, 1, 2]), np.int32(4)).shape == (3, 4)


def test_vector_norm_ord_array_is_a_param_error():
    with pytest.raises(ParamError, match="vector_norm: 'ord'"):
        ops.vector_norm(X4, ord=np.array([2, 3]))
    np.testing.assert_allclose(ops.vector_norm(X4, ord=np.array(3)),
                               np.sum(X4.astype(np.float64) ** 3) ** (1 / 3), rtol=1e-5)


@pytest.mark.parametrize("loss", ["mse_loss", "l1_loss", "huber_loss", "smooth_l1_loss",
                                  "kl_div", "binary_cross_entropy"])
def test_reduction_array_is_a_param_error(loss):
    with pytest.raises(ParamError, match=f"{loss}: 'reduction' must be one of"):
        getattr(ops, loss)(X1, X1, reduction=np.array(["mean"]))


def test_cross_entropy_reduction_and_ignore_index_arrays():
    x, t = RNG.random((3, 4)).astype(np.float32), np.array([0, 1, 2])
    with pytest.raises(ParamError, match="cross_entropy: 'reduction' must be one of"):
        ops.cross_entropy(x, t, reduction=np.array(["mean"]))
    with pytest.raises(ParamError, match="cross_entropy: 'ignore_index' must be an int"):
        ops.cross_entropy(x, t, ignore_index=np.array([1, 2]))
    np.testing.assert_array_equal(ops.cross_entropy(x, t, ignore_index=np.int64(1)),
                                  ops.cross_entropy(x, t, ignore_index=1))


def test_histogram_of_strings_is_a_dtype_error():
    # min() of the strings ran before the dtype check: a raw NumPy UFuncNoLoopError
    from pypto.errors import DtypeError
    with pytest.raises(DtypeError, match="histogram: argument 'x' has dtype str32"):
        ops.histogram(np.array(["a", "b"]))
