"""matmul's dtype errors name matmul whichever kernel it picks (helper-65's hunt).

A transposed 2-D ``b`` went to linear's kernel, which named itself ("linear: argument 'x' has
dtype int32"); stacked operands of two dtypes went to batch_matmul's ("batch_matmul: dtypes
... do not match")."""

import numpy as np
import pytest

import pypto
from pypto.errors import DtypeError

P = pypto.ops


@pytest.mark.parametrize("a, b", [
    (np.ones((4, 5), np.int32), np.ones((3, 5), np.int32).T),            # the linear path
    (np.ones((2, 4, 5), np.int32), np.ones((5, 3), np.int32)),           # the tall path
    (np.ones((2, 4, 5), np.int32), np.ones((2, 5, 3), np.int32)),        # the batched path
    (np.ones(5, np.int32), np.ones((2, 5, 3), np.int32)),
])
def test_an_unsupported_dtype_names_matmul(a, b):
    with pytest.raises(DtypeError, match=r"^matmul: argument 'a' has dtype int32; expected "
                                         r"float16 or float32 or float64$"):
        P.matmul(a, b)


@pytest.mark.parametrize("a, b", [
    (np.ones((2, 4, 5), np.float32), np.ones((2, 5, 3), np.float64)),
    (np.ones((2, 4, 5), np.float32), np.ones((5, 3), np.float64)),
    (np.ones((4, 5), np.float32), np.ones((3, 5), np.float64).T),
    (np.ones(5, np.float32), np.ones((2, 5, 3), np.float64)),
])
def test_mixed_dtypes_name_matmul_and_the_cast(a, b):
    with pytest.raises(DtypeError, match=r"^matmul: dtypes \{'a': 'float32', 'b': 'float64'\} "
                                         r"do not match.*a\.astype\(np\.float64\)"):
        P.matmul(a, b)


def test_same_dtype_stacks_still_multiply():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((2, 4, 5)).astype(np.float16)
    b = rng.standard_normal((3, 5)).astype(np.float16).T[:, ::-1]        # (5, 3), a view
    want = np.matmul(a.astype(np.float32), b.astype(np.float32))
    np.testing.assert_allclose(P.matmul(a, b).astype(np.float32), want, rtol=2e-3, atol=2e-3)
