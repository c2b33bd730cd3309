"""Zero-size inputs to elementwise ops give NumPy's result dtype (helper-65's hunt).

The broadcasting and unary frontends returned ``np.empty(shape, input dtype)`` for a zero-size
call, so a comparison or ``isnan`` of an empty float array came back float32, not bool (and
``out=`` of dtype bool was refused)."""

import numpy as np
import pytest

import pypto

P = pypto.ops

BINARY = ["equal", "not_equal", "less", "less_equal", "greater", "greater_equal"]
UNARY = ["isnan", "isinf", "isfinite", "signbit"]


@pytest.mark.parametrize("name", BINARY)
@pytest.mark.parametrize("shapes", [((0, 4), (4,)), ((2, 0, 3), (2, 0, 3)), ((0,), ())])
def test_comparisons_of_empty_arrays_are_bool(name, shapes):
    a = np.zeros(shapes[0], np.float32)
    b = np.ones(shapes[1], np.float32)
    want = getattr(np, name)(a, b)
    got = getattr(P, name)(a, b)
    assert got.dtype == want.dtype == np.bool_
    assert got.shape == want.shape


@pytest.mark.parametrize("name", UNARY)
def test_float_predicates_of_empty_arrays_are_bool(name):
    for a in (np.zeros((0, 5), np.float64), np.zeros((3, 0), np.float32).T,
              np.zeros((0,), np.float16)):
        got = getattr(P, name)(a)
        want = getattr(np, name)(a)
        assert got.dtype == want.dtype == np.bool_
        assert got.shape == want.shape


def test_empty_comparison_into_bool_out():
    a = np.zeros((0, 4), np.int32)
    out = np.zeros((0, 4), bool)
    assert P.less(a, np.int32(3), out=out) is out
    o2 = np.zeros((0, 3), bool)
    assert P.isnan(np.zeros((0, 3), np.float32), out=o2) is o2


def test_empty_arithmetic_keeps_its_dtype():
    assert P.add(np.zeros((0, 2), np.int64), np.ones(2, np.int64)).dtype == np.int64
    assert P.exp(np.zeros((0, 2), np.float16)).dtype == np.float16
    assert P.where(np.zeros((0, 2), bool), np.zeros((0, 2), np.float32), 1.0).dtype == np.float32
