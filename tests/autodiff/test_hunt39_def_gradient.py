"""def_gradient: ``nondiff`` given as one name, and a gradient function returning something that
is not a number or an array, each met with a clear OpDefinitionError or the intended gradient."""

import numpy as np
import pytest

import pypto
from pypto.errors import OpDefinitionError

X = np.array([1.0, -2.0, 3.0])
S = np.array([0.5, 1.5, -1.0])


@pypto.register_op(name="hunt39_scaled")
def scaled(a, scale):
    return a * scale


@pytest.fixture(autouse=True)
def _clear():
    yield
    pypto.autodiff.custom.clear_gradient(scaled)


def test_nondiff_as_one_name():
    @pypto.def_gradient(scaled, nondiff="scale")
    def rule(a, scale, dy):
        return dy * scale * 10.0, None      # a deliberately different rule, to see it used

    da = pypto.grad(lambda a, s: scaled(a, s).sum())(X, S)
    np.testing.assert_array_equal(da, S * 10.0)


def test_nondiff_as_one_name_that_is_not_an_argument():
    with pytest.raises(OpDefinitionError, match=r"nondiff names \['sc'\]"):
        pypto.def_gradient(scaled, nondiff="sc")(lambda a, scale, dy: (dy, None))


def test_a_gradient_that_is_not_a_number_is_named():
    @pypto.def_gradient(scaled)
    def rule(a, scale, dy):
        return "oops", dy * a

    with pytest.raises(OpDefinitionError, match="returned str 'oops' as the gradient of 'a'"):
        pypto.grad(lambda a, s: scaled(a, s).sum(), argnums=(0, 1))(X, S)


def test_a_number_as_a_gradient_is_spread():
    @pypto.def_gradient(scaled)
    def rule(a, scale, dy):
        return 2.5, dy * a

    da, ds = pypto.grad(lambda a, s: scaled(a, s).sum(), argnums=(0, 1))(X, S)
    np.testing.assert_array_equal(da, np.full(3, 2.5))
    np.testing.assert_array_equal(ds, X)
