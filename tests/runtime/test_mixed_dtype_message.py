"""An op whose signatures are one dtype throughout names the cast NumPy's promotion would make
when given two dtypes it accepts separately (matmul of float32 and float64)."""

import numpy as np
import pytest

import pypto


def test_mixed_float_dtypes_name_the_cast():
    a, b = np.ones((2, 3), np.float32), np.ones((3, 2), np.float64)
    with pytest.raises(pypto.DtypeError, match=r"matmul: dtypes \{'a': 'float32', 'b': 'float64'\} "
                       r"do not match.*cast explicitly, e.g. a\.astype\(np\.float64\) "
                       r"\(float64, NumPy's promotion\)"):
        pypto.ops.matmul(a, b)
    # the suggested cast is one the op accepts
    np.testing.assert_allclose(pypto.ops.matmul(a.astype(np.float64), b), a @ b)


def test_a_dtype_no_signature_has_names_the_argument():
    with pytest.raises(pypto.DtypeError, match=r"matmul: argument 'a' has dtype int8"):
        pypto.ops.matmul(np.ones((2, 2), np.int8), np.ones((2, 2), np.float32))
