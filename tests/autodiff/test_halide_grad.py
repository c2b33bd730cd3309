"""gradient="halide": a user op's backward from Halide's autodiff, accepted only behind a scan for
constructs the autodiff gets wrong and a finite-difference check on the op's example.

Expected gradients are written here by hand (closed forms), independently of Halide.
"""

import halide as hl
import numpy as np
import pytest

import pypto
from pypto.autodiff import halide_grad
from pypto.errors import NotDifferentiableError, OpDefinitionError


def _op(name, body, reference, *, inputs=None, output="N", example=None, dtypes=("float32",
                                                                                  "float64")):
    inputs = inputs or {"x": "N"}

    def algorithm(*images):
        n = hl.Var("n")
        f = hl.Func("f")
        f[n] = body(n, *images)
        return f

    import inspect
    algorithm.__signature__ = inspect.Signature(
        [inspect.Parameter(k, inspect.Parameter.POSITIONAL_ONLY) for k in inputs])
    return pypto.op(category="test", inputs=inputs, output=output, dtypes=list(dtypes),
                    reference=reference, example=example or {"N": 5}, gradient="halide",
                    register=False, name=name)(algorithm)


def _sinmul():
    def algorithm(x, w):
        r, c = hl.Var("r"), hl.Var("c")
        f = hl.Func("f")
        f[c, r] = hl.sin(x[c, r]) * w[c] + x[c, r] * x[c, r]
        return f

    return pypto.op(category="test", inputs={"x": "R C", "w": "C"}, output="R C",
                    dtypes=["float32", "float64"], reference=lambda x, w: np.sin(x) * w + x * x,
                    example={"R": 3, "C": 4}, gradient="halide", register=False,
                    name="sinmul")(algorithm)


def test_the_backward_op_matches_the_closed_form_with_a_broadcast_input():
    bwd = halide_grad.checked_backward(_sinmul())
    rng = np.random.default_rng(0)
    x, w, dy = rng.uniform(-2, 2, (6, 7)), rng.uniform(-2, 2, 7), rng.uniform(-1, 1, (6, 7))
    gx, gw = bwd.kernel(x, w, dy)
    np.testing.assert_allclose(gx, (np.cos(x) * w + 2 * x) * dy, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(gw, (np.sin(x) * dy).sum(0), rtol=1e-12, atol=1e-12)
    g32 = bwd.kernel(x.astype(np.float32), w.astype(np.float32), dy.astype(np.float32))[0]
    assert g32.dtype == np.float32


def test_grad_of_a_program_uses_the_halide_backward():
    op = _sinmul()
    rng = np.random.default_rng(1)
    x, w = rng.uniform(-1, 1, (4, 3)), rng.uniform(-1, 1, 3)
    gx, gw = pypto.grad(lambda a, b: op.kernel(a, b).sum(), argnums=(0, 1))(x, w)
    np.testing.assert_allclose(gx, np.cos(x) * w + 2 * x, rtol=1e-10)
    np.testing.assert_allclose(gw, np.sin(x).sum(0), rtol=1e-10)


def test_strict_float_arithmetic_is_refused_before_any_use():
    op = _op("strictly", lambda n, x: hl.strict_float(x[n] * 2.0 + 1.0), lambda v: v * 2 + 1,
             dtypes=("float32",))
    with pytest.raises(NotDifferentiableError, match=r"'strictly'.*strict_\w+.*def_gradient"):
        halide_grad.checked_backward(op)


def test_reinterpret_based_math_is_refused():
    op = _op("fastexp", lambda n, x: hl.fast_exp(x[n]), np.exp, dtypes=("float32",))
    with pytest.raises(NotDifferentiableError, match="reinterpret"):
        halide_grad.checked_backward(op)


def test_a_gradient_halide_drops_is_caught_by_finite_differences():
    # Halide's autodiff drops the gradient through mux (no derivative for the intrinsic).
    op = _op("muxed", lambda n, x: hl.mux(1, [x[n], x[n] * x[n]]), lambda v: v * v)
    with pytest.raises(NotDifferentiableError, match="disagrees with finite differences"):
        halide_grad.checked_backward(op)
    with pytest.raises(NotDifferentiableError, match="muxed"):   # the verdict is kept
        halide_grad.checked_backward(op)


def test_an_op_without_an_example_cannot_be_checked():
    op = _op("noexample", lambda n, x: x[n] * x[n], lambda v: v * v)
    op.example = None
    with pytest.raises(NotDifferentiableError, match="example="):
        halide_grad.checked_backward(op)


def test_gradient_takes_only_known_values():
    with pytest.raises(OpDefinitionError, match="gradient="):
        pypto.op(category="test", inputs={"x": "N"}, output="N", reference=lambda v: v,
                 gradient="auto", register=False, name="ident")(lambda x: x)


def test_the_finite_difference_reference_is_the_backward_ops_reference():
    bwd = halide_grad.checked_backward(_sinmul())
    rng = np.random.default_rng(2)
    x, w, dy = rng.uniform(-1, 1, (2, 3)), rng.uniform(-1, 1, 3), rng.uniform(-1, 1, (2, 3))
    gx, gw = bwd.reference(x, w, dy)
    np.testing.assert_allclose(gx, (np.cos(x) * w + 2 * x) * dy, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(gw, (np.sin(x) * dy).sum(0), rtol=1e-6, atol=1e-8)
