"""grad and value_and_grad pass keyword arguments on to the function (not differentiated), as
jax.grad does; a keyword was a TypeError from the wrapper claiming the function did not take it.
References are the closed forms of the products."""

import numpy as np

import pypto

X = np.array([1.0, 2.0, 3.0])
W = np.array([0.5, -1.0, 2.0])


def loss(a, b=2.0, *, c=None):
    return (a * b * (1.0 if c is None else c)).sum()


def test_grad_takes_static_and_array_keywords():
    g = pypto.grad(loss)
    np.testing.assert_array_equal(g(X), np.full(3, 2.0))
    np.testing.assert_array_equal(g(X, b=3.0), np.full(3, 3.0))
    np.testing.assert_array_equal(g(X, c=W), 2.0 * W)
    np.testing.assert_array_equal(g(X, c=W * 2.0), 4.0 * W)     # a new array: no stale trace
    np.testing.assert_array_equal(g(X, 3.0, c=W), 3.0 * W)


def test_value_and_grad_takes_keywords():
    v, d = pypto.value_and_grad(loss)(X, b=-1.0, c=W)
    assert float(v) == float(np.sum(X * -1.0 * W))
    np.testing.assert_array_equal(d, -W)


def test_a_keyword_array_is_not_differentiated_by_argnums():
    g = pypto.grad(lambda a, b, *, c: (a * b * c).sum(), argnums=(0, 1))
    da, db = g(X, W, c=X)
    np.testing.assert_array_equal(da, W * X)
    np.testing.assert_array_equal(db, X * X)
