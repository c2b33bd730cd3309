"""A float parameter of -0.0 and one of 0.0 shared compiled kernels (helper-65's hunt): -0.0 ==
0.0 and both hash alike, so the kernel cache (compiler/jit.py ``_params_key``) and the public
call's fast-path keys (runtime.py) took them for one value, and whichever call came first
decided the sign of the zero every later call wrote. Float zeros are keyed by their repr now."""

import numpy as np
import pytest

import pypto

P = pypto.ops

def test_masked_fill_with_zero_after_negative_zero():
    x = np.array([1.0, -2.0, 3.0, 4.0], np.float32)
    m = np.array([True, False, True, False])
    first = P.masked_fill(x, m, -0.0)
    assert np.signbit(first).tolist() == [True, True, True, False]
    second = P.masked_fill(x, m, 0.0)
    want = np.where(m, np.float32(0.0), x)
    assert np.signbit(second).tolist() == np.signbit(want).tolist()


def test_pad_value_zero_after_negative_zero():
    x = np.array([[1.0, 2.0]], np.float64)
    P.pad(x, 1, value=-0.0)
    got = P.pad(x, 1, value=0.0)
    want = np.pad(x, 1, constant_values=0.0)
    np.testing.assert_array_equal(got, want)
    assert not np.signbit(got).any()


def test_clip_bounds_keep_the_sign_of_their_zero():
    x = np.array([-1.0, 0.5], np.float64)
    np.testing.assert_array_equal(np.signbit(P.clip(x, -0.0, 1.0)), [True, False])
    np.testing.assert_array_equal(np.signbit(P.clip(x, 0.0, 1.0)), [False, False])
    np.testing.assert_array_equal(np.signbit(P.clip(x, -0.0, 1.0)), [True, False])
