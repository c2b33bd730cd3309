"""Edge cases of the layout ops against NumPy (and torch where it has the op): an empty axis
tuple of ``flip``, 0-d inputs, shifts and axes that NumPy accepts."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import assert_same

import pypto
import pypto.ops as P
from pypto.errors import ParamError

X = np.arange(24, dtype=np.float32).reshape(2, 3, 4)


# -- flip with no axes -----------------------------------------------------------------------------

@pytest.mark.parametrize("axis", [(), []])
def test_flip_of_no_axes_is_the_identity_everywhere(axis):
    want = X.copy()                 # np.flip(X, ()) is X itself
    assert_same(P.flip(X, axis), want)
    out = np.full_like(X, -1)
    assert P.flip(X, axis, out=out) is out
    assert_same(out, want)
    assert_same(pypto.jit(lambda t: P.flip(t, axis))(X), want)
    assert_same(pypto.jit(lambda t: P.flip(t * 1, axis))(X), want)


def test_flip_of_no_axes_passes_the_gradient_through():
    w = np.arange(24, dtype=np.float32).reshape(X.shape)
    _, vjp = pypto.vjp(lambda t: P.flip(t, ()) * w, X)
    assert_same(vjp(np.ones_like(X))[0], w)


def test_flip_of_no_axes_of_a_scalar_and_of_ints():
    assert_same(P.flip(np.float32(3), (), out=np.empty((), np.float32)), np.float32(3))
    xi = np.arange(5, dtype=np.int64)
    assert_same(pypto.jit(lambda t: P.flip(t, ()))(xi), xi)


# -- pad of a 0-d array ----------------------------------------------------------------------------

@pytest.mark.parametrize("pad", [(), []])
def test_pad_of_a_0d_array_with_no_pads_is_a_copy_as_in_torch(pad):
    torch = pytest.importorskip("torch")
    want = torch.nn.functional.pad(torch.tensor(3.0), pad).numpy()
    assert_same(P.pad(np.float32(3), pad), want)
    assert_same(pypto.jit(lambda t: P.pad(t, pad))(np.float32(3)), want)
    assert_same(P.pad(np.int64(-4), pad, value=7), np.int64(-4))


@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
def test_pad_of_a_0d_array_with_no_pads_in_other_modes_is_a_copy(mode):
    # torch refuses these modes for a 0-d input; no pads reverse or repeat nothing, so PyPTO
    # gives the copy of constant mode
    assert_same(P.pad(np.float64(2.5), (), mode=mode), np.float64(2.5))


def test_pad_of_a_0d_array_refuses_pads():
    torch = pytest.importorskip("torch")
    with pytest.raises(ParamError, match="at most 0 pairs for rank 0"):
        P.pad(np.float32(3), (1, 1))
    with pytest.raises(RuntimeError, match="Padding length"):
        torch.nn.functional.pad(torch.tensor(3.0), (1, 1))


# -- roll: shifts as NumPy takes them -------------------------------------------------------------

@pytest.mark.parametrize("shift, axis", [
    ((1, 2), 1),                  # two shifts of one axis add up
    ((1, -2, 4), (2, 2, 0)),      # a repeated axis among several
    (1, (0, 2)),                  # one shift for several axes
    (2 ** 40, 1),                 # any size, modulo the axis
    (-(2 ** 70) - 1, 2),
    (2 ** 40 + 3, None),          # the flattened array
    ((2, 5), None),
    (np.array([1, 2]), 2),
    ([], 0),                      # no shifts: a copy
    (np.int64(-7), -1),
])
def test_roll_takes_shifts_as_numpy_does(shift, axis):
    want = np.roll(X, shift, axis)
    assert_same(P.roll(X, shift, axis), want)
    assert_same(pypto.jit(lambda t: P.roll(t, shift, axis))(X), want)
    out = np.empty_like(X)
    assert P.roll(X, shift, axis, out=out) is out
    assert_same(out, want)


def test_roll_refuses_shifts_and_axes_that_do_not_broadcast():
    with pytest.raises(ValueError):                                   # NumPy's refusal
        np.roll(X, (1, 2, 3), (0, 1))
    with pytest.raises(ParamError, match=r"roll: 'shift' \(1, 2, 3\) and 'axis' \(0, 1\) do not "
                                         r"broadcast \(3 shifts against 2 axes\)"):
        P.roll(X, (1, 2, 3), (0, 1))
    with pytest.raises(ParamError, match="roll: 'shift' must be an int"):
        P.roll(X, 1.5, 0)


@pytest.mark.parametrize("k", [2**31, -2**31, 2**62, -(2**62), -5, 4, 3, -3, np.int64(1)])
def test_tril_and_triu_take_any_offset_like_numpy(k):
    x = np.arange(12.0).reshape(3, 4)
    np.testing.assert_array_equal(pypto.ops.tril(x, k), np.tril(x, k))
    np.testing.assert_array_equal(pypto.ops.triu(x, k), np.triu(x, k))


@pytest.mark.parametrize("k", [1.0, True, "1"])
def test_tril_refuses_an_offset_that_is_not_an_int(k):
    with pytest.raises(pypto.ParamError, match="'k' must be an int"):
        pypto.ops.tril(np.ones((2, 2)), k)
