"""``@pypto.def_gradient``, the API's entry points, and the errors a gradient can raise."""

from __future__ import annotations

import numpy as np
import pytest

import pypto
from pypto.autodiff import clear_gradient

o = pypto.ops


@pypto.register_op(name="ad_my_quantize")
def my_quantize(x, bits):
    scale = (2.0 ** bits - 1) / (x.max() - x.min())
    return o.round((x - x.min()) * scale) / scale + x.min()


@pypto.def_gradient(my_quantize)
def my_quantize_grad(x, bits, dy):
    return dy * (x > 0), None          # as the founding document writes it


def test_founding_my_quantize_uses_its_gradient():
    x = np.array([-1.0, 0.25, 0.5, 2.0], np.float32)
    g = pypto.grad(lambda v: (my_quantize(v, 4) * np.float32(3.0)).sum())(x)
    np.testing.assert_array_equal(g, np.float32(3.0) * (x > 0))
    # Through the composite op itself, and inside a jitted function.
    out, vjp_fn = pypto.vjp(my_quantize, x, 4)
    (gx, gbits) = vjp_fn(np.ones(4, np.float32))
    np.testing.assert_array_equal(gx, (x > 0).astype(np.float32))
    assert gbits is None
    np.testing.assert_allclose(out, my_quantize(x, 4))


def test_override_builtin_rule_straight_through():
    @pypto.def_gradient(o.round)
    def round_ste(x, dy):
        return dy

    try:
        x = np.array([0.2, 1.6, -0.7])
        np.testing.assert_array_equal(pypto.grad(lambda v: (o.round(v) * 2.0).sum())(x),
                                      np.full(3, 2.0))
    finally:
        clear_gradient(o.round)
    np.testing.assert_array_equal(pypto.grad(lambda v: o.round(v).sum())(np.ones(3)),
                                  np.zeros(3))


def test_user_op_gradient():
    import halide as hl

    @pypto.op(name="ad_cube", category="test", inputs={"x": "N"}, output="N",
              dtypes=("float64",),
              reference=lambda x: x ** 3)
    def cube(x, *, dims):
        n = hl.Var("n")
        f = hl.Func("out")
        f[n] = x[n] * x[n] * x[n]
        return f

    x = np.array([1.0, -2.0, 0.5])
    with pytest.raises(pypto.NotDifferentiableError, match=r"no gradient for op 'ad_cube'.*"
                       r"def_gradient.*non-differentiable"):
        pypto.grad(lambda v: cube(v).sum())(x)

    @pypto.def_gradient(cube)
    def cube_grad(x, dy):
        return 3.0 * x * x * dy

    np.testing.assert_allclose(pypto.grad(lambda v: cube(v).sum())(x), 3 * x * x)


def test_value_and_grad_argnums_and_jit():
    @pypto.jit
    def loss(w, x):
        return ((x @ w) ** 2).mean()

    w, x = np.random.default_rng(0).standard_normal((2, 4, 3))[0, :, :], np.ones((2, 4))
    v, (gw, gx) = pypto.value_and_grad(loss, (0, 1))(w, x)
    np.testing.assert_allclose(v, ((x @ w) ** 2).mean())
    np.testing.assert_allclose(gw, x.T @ (2 * (x @ w) / 6), rtol=1e-12)
    np.testing.assert_allclose(gx, (2 * (x @ w) / 6) @ w.T, rtol=1e-12)
    # An argument the output does not depend on gets zeros.
    g = pypto.grad(lambda a, b: (a * 2.0).sum(), 1)(np.ones(3), np.ones(3))
    np.testing.assert_array_equal(g, np.zeros(3))


def test_grad_inside_jit():
    @pypto.jit
    def step(w):
        return w - 0.1 * pypto.grad(lambda v: (v * v).sum())(w)

    np.testing.assert_allclose(step(np.array([1.0, -2.0])), [0.8, -1.6])


# -- errors ------------------------------------------------------------------------------------------

def test_wrong_arity_at_definition():
    with pytest.raises(pypto.OpDefinitionError, match=r"takes 1 argument.*fn\(x, dy\)"):
        @pypto.def_gradient(o.exp)
        def bad(dy):
            return dy

    with pytest.raises(pypto.OpDefinitionError, match=r"must take ad_my_quantize's 2"):
        @pypto.def_gradient(my_quantize)
        def bad2(x, dy):
            return dy


def test_wrong_shape_and_dtype_at_first_use():
    @pypto.register_op(name="ad_twice")
    def twice(x):
        return x * 2.0

    x = np.ones((2, 3))

    @pypto.def_gradient(twice)
    def bad_shape(x, dy):
        return dy.sum(axis=0)

    with pytest.raises(pypto.OpDefinitionError, match=r"gradient of 'x' has shape \(3,\), but "
                       r"'x' has shape \(2, 3\)"):
        pypto.grad(lambda v: twice(v).sum())(x)

    @pypto.def_gradient(twice)
    def bad_dtype(x, dy):
        return dy.astype(np.float32)

    with pytest.raises(pypto.OpDefinitionError, match=r"dtype float32, but 'x' is float64"):
        pypto.grad(lambda v: twice(v).sum())(x)


def test_missing_gradient_says_what_to_do():
    @pypto.register_op(name="ad_scaled")
    def scaled(x, s):
        return x * s

    @pypto.def_gradient(scaled)
    def scaled_grad(x, s, dy):
        return dy * s, None

    x, s = np.ones(3), np.full(3, 2.0)
    with pytest.raises(pypto.NotDifferentiableError,
                       match=r"returned None for argument 's'.*nondiff=\('s',\)"):
        pypto.grad(lambda a, b: scaled(a, b).sum(), (0, 1))(x, s)

    @pypto.def_gradient(scaled, nondiff=("s",))
    def scaled_grad2(x, s, dy):
        return dy * s, None

    gx, gs = pypto.grad(lambda a, b: scaled(a, b).sum(), (0, 1))(x, s)
    np.testing.assert_array_equal(gx, s)
    np.testing.assert_array_equal(gs, np.zeros(3))


def test_not_differentiable_ops_name_op_and_argument():
    x = np.array([0.5, -1.0, 2.0], np.float32)
    with pytest.raises(pypto.NotDifferentiableError, match=r"quantize is not differentiable.*"
                       r"argument 'x'"):
        pypto.grad(lambda v: o.dequantize(o.quantize(v, 0.1, 0), 0.1, 0).sum())(x)
    with pytest.raises(pypto.NotDifferentiableError, match=r"argmax is not differentiable"):
        pypto.grad(lambda v: (v * v.argmax().astype(np.float32)).sum())(x)
    with pytest.raises(pypto.NotDifferentiableError, match=r"output #0 has dtype bool"):
        pypto.grad(lambda v: (v > 0))(x)
    with pytest.raises(pypto.NotDifferentiableError, match=r"argument #0 has dtype int32"):
        pypto.grad(lambda v: v.astype(np.float32).sum())(np.arange(3, dtype=np.int32))


def test_grad_needs_a_scalar_and_vjp_checks_cotangents():
    x = np.ones((2, 2))
    with pytest.raises(pypto.ShapeError, match=r"one scalar \(size-1\) value, got \(2, 2\)"):
        pypto.grad(lambda v: v * 2.0)(x)
    _, vjp_fn = pypto.vjp(lambda v: v * 2.0, x)
    with pytest.raises(pypto.ShapeError, match=r"output gradient #0 has shape \(2,\)"):
        vjp_fn(np.ones(2))


def test_a_composite_with_keyword_only_params_gets_them_before_the_output_gradient():
    @pypto.register_op
    def scaled_kw(x, *, scale=2.0):
        return x * scale

    with pytest.raises(pypto.OpDefinitionError, match=r"must take scaled_kw's 2 argument\(s\) "
                                                r"\(x, scale\).*fn\(x, scale, dy\)"):
        pypto.def_gradient(scaled_kw)(lambda x, dy: dy * 5.0)

    @pypto.def_gradient(scaled_kw)
    def _grad(x, scale, dy):
        return dy * (scale + 2.0), None

    x = np.array([1.0, -2.0, 3.0])
    np.testing.assert_array_equal(pypto.grad(lambda a: scaled_kw(a, scale=3.0).sum())(x),
                                  np.full(3, 5.0))


def test_a_gradient_of_a_shape_that_does_not_broadcast_is_named():
    @pypto.register_op
    def shrink_me(x, bits=8):
        return x * 2.0

    @pypto.def_gradient(shrink_me)
    def _grad(x, bits, dy):
        return dy[:2], None

    with pytest.raises(pypto.OpDefinitionError,
                       match=r"the gradient of 'x' has shape \(2,\), but 'x' has shape \(3,\)"):
        pypto.grad(lambda a: shrink_me(a).sum())(np.array([1.0, -2.0, 3.0]))
