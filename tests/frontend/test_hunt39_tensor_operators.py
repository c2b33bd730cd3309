"""Tensor operators follow NumPy's: ``//`` and ``%`` (floor division and remainder, the
divisor's sign), ``& | ^ ~`` logical on bool masks and bitwise on integers, ``<< >>``; on the
left or right of a Python number or a NumPy array. References: NumPy's operators."""

import operator

import numpy as np
import pytest

import pypto

F = np.array([[-7.5, -3.0, 0.5], [3.0, 7.5, -0.25]], np.float32)
I = np.array([[-7, -3, 0], [3, 7, 12]], np.int32)
J = np.array([[2, -2, 5], [3, 4, -5]], np.int32)

BINARY = [operator.floordiv, operator.mod]
BITS = [operator.and_, operator.or_, operator.xor]


def _same(got, want):
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("op", BINARY, ids=lambda f: f.__name__)
def test_floor_division_and_remainder(op):
    _same(pypto.jit(lambda a: op(a, 2.0))(F), op(F, np.float32(2.0)))
    _same(pypto.jit(lambda a: op(3.0, a))(F[:, :2]), op(np.float32(3.0), F[:, :2]))
    _same(pypto.jit(lambda a, b: op(a, b))(I, J), op(I, J))
    _same(pypto.jit(lambda a: op(a, -4))(I), op(I, np.int32(-4)))


@pytest.mark.parametrize("op", BITS, ids=lambda f: f.__name__)
def test_bitwise_on_integers(op):
    _same(pypto.jit(lambda a, b: op(a, b))(I, J), op(I, J))
    _same(pypto.jit(lambda a: op(a, 6))(I), op(I, np.int32(6)))
    _same(pypto.jit(lambda a: op(6, a))(I), op(np.int32(6), I))


@pytest.mark.parametrize("op", BITS, ids=lambda f: f.__name__)
def test_logical_on_masks(op):
    _same(pypto.jit(lambda a: op(a > 0, a < 5))(F), op(F > 0, F < 5))
    _same(pypto.jit(lambda a: op(a > 0, True))(F), op(F > 0, True))


def test_invert_and_shifts():
    _same(pypto.jit(lambda a: ~a)(I), ~I)
    _same(pypto.jit(lambda a: ~(a > 0))(F), ~(F > 0))
    _same(pypto.jit(lambda a: (a << 2) + (a >> 1))(I), (I << 2) + (I >> 1))


def test_a_numpy_array_on_the_left():
    mask = np.array([True, False, True])
    _same(pypto.jit(lambda a: mask & (a > 0))(F), mask & (F > 0))
    _same(pypto.jit(lambda a: J % a)(np.abs(I) + 1), J % (np.abs(I) + 1))


def test_a_mask_made_with_and_keeps_its_gradient_rule():
    x = np.array([-1.0, 0.5, 2.0, 4.0])
    g = pypto.grad(lambda a: pypto.ops.where((a > 0) & (a < 3), a * a, 0.0).sum())(x)
    np.testing.assert_array_equal(g, np.where((x > 0) & (x < 3), 2 * x, 0.0))
