"""One array passed as two arguments is two inputs of the trace: the replay of f(x, x) must not
read one argument for both when later called as f(x, y), and a gradient with respect to each
position is that position's own. References: NumPy on the same arrays, closed forms."""

import numpy as np

import pypto
from pypto.frontend.programs import trace_graph_op

X = np.array([1.0, 2.0, 3.0])
Y = np.array([10.0, -20.0, 30.0])


def body(a, b):
    return a - b * 2.0


def test_a_trace_of_one_array_twice_replays_two_arrays():
    f = pypto.jit(body)
    np.testing.assert_array_equal(f(X, X), X - X * 2.0)
    np.testing.assert_array_equal(f(X, Y), X - Y * 2.0)
    np.testing.assert_array_equal(f(Y, X), Y - X * 2.0)
    np.testing.assert_array_equal(f(Y, Y), Y - Y * 2.0)


def test_a_trace_of_two_arrays_replays_one_array_twice():
    f = pypto.jit(body)
    np.testing.assert_array_equal(f(X, Y), X - Y * 2.0)
    np.testing.assert_array_equal(f(X, X), X - X * 2.0)


def test_a_trace_in_a_list_argument_too():
    f = pypto.jit(lambda xs: xs[0] * xs[1] + xs[2])
    np.testing.assert_array_equal(f([X, X, X]), X * X + X)
    np.testing.assert_array_equal(f([X, Y, X]), X * Y + X)


def test_gradients_of_one_array_at_two_positions_are_their_own():
    g = pypto.grad(lambda a, b: (a * b * b).sum(), argnums=(0, 1))
    da, db = g(X, X)
    np.testing.assert_allclose(da, X * X)          # d/da = b^2
    np.testing.assert_allclose(db, 2 * X * X)      # d/db = 2ab
    da, db = g(X, Y)
    np.testing.assert_allclose(da, Y * Y)
    np.testing.assert_allclose(db, 2 * X * Y)


def test_a_vjp_whose_output_gradient_is_its_argument():
    out, vjp_fn = pypto.vjp(lambda a: a * a, X)
    (g,) = vjp_fn(X)
    np.testing.assert_allclose(g, 2 * X * X)
    (g,) = vjp_fn(Y)
    np.testing.assert_allclose(g, 2 * X * Y)


def test_a_composite_op_called_with_one_array_twice():
    @pypto.register_op(name="hunt39_twice")
    def twice(a, b):
        return a * 3.0 - b

    np.testing.assert_array_equal(twice(X, X), X * 3.0 - X)
    np.testing.assert_array_equal(twice(X, Y), X * 3.0 - Y)


def test_a_graph_op_of_one_array_twice_is_that_of_two_arrays():
    # pypto.tune / pypto build trace this way: the same program whatever the arrays' identity
    same = trace_graph_op(body, [X, X])
    two = trace_graph_op(body, [X, Y])
    assert len(same.graph.sources) == len(two.graph.sources)
    assert same.name == two.name
