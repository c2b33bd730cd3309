"""Errors of pypto.grad name ``grad``, those of value_and_grad ``value_and_grad`` and vjp's
``vjp``: grad runs value_and_grad's program, and its errors used to name that instead."""

import numpy as np
import pytest

import pypto
from pypto import ops as P
from pypto.errors import NotDifferentiableError, ShapeError, TraceError

X = np.ones(3, np.float32)


@pytest.mark.parametrize("name", ["grad", "value_and_grad"])
def test_errors_name_the_function_called(name):
    t = getattr(pypto, name)
    with pytest.raises(ShapeError, match=rf"^{name}\(<lambda>\): the function must return one "
                                         r"scalar"):
        t(lambda x: x * 2.0)(X)
    with pytest.raises(TraceError, match=rf"^{name}\(<lambda>\): argnums 3 must name"):
        t(lambda x: P.sum(x), argnums=3)(X)
    with pytest.raises(NotDifferentiableError, match=rf"^{name}\(<lambda>\): argument #0 has "
                                                     r"dtype int32"):
        t(lambda x: P.sum(x * 2.0))(np.ones(3, np.int32))
    torch = pytest.importorskip("torch")
    with pytest.raises(TraceError, match=rf"^{name}\(<lambda>\): argument #0 is a torch "
                                         r"tensor"):
        t(lambda x: P.sum(x))(torch.ones(3))


def test_vjp_errors_name_vjp():
    torch = pytest.importorskip("torch")
    with pytest.raises(TraceError, match=r"^vjp\(<lambda>\): argument #0 is a torch tensor"):
        pypto.vjp(lambda x: x * 2.0, torch.ones(3))


def test_grad_and_value_and_grad_of_one_function_both_work():
    def f(x):
        return P.sum(x * x)

    g, vg = pypto.grad(f), pypto.value_and_grad(f)
    np.testing.assert_array_equal(g(X), 2 * X)
    v, d = vg(X)
    assert float(v) == 3.0
    np.testing.assert_array_equal(d, 2 * X)


def test_vjp_with_none_for_a_float_output_says_what_to_give():
    _, vjp_fn = pypto.vjp(lambda t: (pypto.ops.exp(t), t * 2.0), np.ones(3))
    with pytest.raises(ShapeError, match=r"vjp\(<lambda>\): output gradient #1 is None; "
                       r"output #1 is a float output of shape \(3,\) float64: give its gradient "
                       r"\(np.zeros of that shape and dtype for none\)"):
        vjp_fn(np.ones(3), None)
