"""Every built-in op has a gradient decision (a rule, a constant, or not differentiable with a
reason), every rule is checked somewhere, and the decisions behave as documented."""

from __future__ import annotations

import numpy as np
import pytest
from cases import CASES, op_of

import pypto
from pypto.autodiff import coverage

o = pypto.ops

#: Ops added while the rules were being written, whose decisions come with a later change. An
#: op here that gets a decision fails the test until it is taken off this list, so the list
#: cannot go stale. Empty: rgb_to_hsv and hsv_to_rgb, the last two, have rules (filters.py).
PENDING: set = set()

#: Rules checked against central differences in test_rules.py (the rest are in cases.py).
CHECKED_IN_TEST_RULES = {
    "neg", "abs", "exp", "expm1", "log", "log1p", "sqrt", "rsqrt", "sin", "cos", "tanh",
    "sigmoid", "relu", "gelu", "silu", "erf", "square", "reciprocal", "softplus", "leaky_relu",
    "clip", "floor", "ceil", "round", "add", "sub", "mul", "div", "pow", "maximum", "minimum",
    "swiglu", "where", "sum", "mean", "max", "min", "prod", "var", "std", "logsumexp",
    "transpose", "softmax", "log_softmax", "layer_norm", "rms_norm", "matmul", "linear",
    "batch_matmul", "batch_transpose", "conv2d", "depthwise_conv2d", "avg_pool2d", "max_pool2d",
    "scaled_dot_product_attention", "batch_norm", "lstm_cell",
}
#: Rules checked in this file.
CHECKED_HERE = {"cast", "dequantize", "quantized_matmul", "fake_quantize_per_tensor_affine",
                "fake_quantize_per_channel_affine"}


@pytest.mark.parametrize("name", sorted(op.name for op in pypto.ops.builtin_ops()))
def test_every_builtin_op_has_a_gradient_decision(name):
    kind, why = coverage.decision(name)
    if name in PENDING:
        assert kind == "missing", f"{name} has a gradient decision now: take it off PENDING"
        pytest.xfail(f"{name}: added while the rules were written; decision pending")
    assert kind != "missing", (
        f"op '{name}' has no gradient decision: add a rule to pypto/autodiff/rules/, or mark it "
        f"Constant(why) / NotDifferentiable(why) there")
    if kind != "rule":
        assert why.strip(), f"{name}: a {kind} decision needs its reason"


def test_every_rule_is_checked_against_central_differences():
    rules = {n for n, (kind, _) in coverage.table().items() if kind == "rule"}
    checked = {op_of(c) for c in CASES} | CHECKED_IN_TEST_RULES | CHECKED_HERE
    assert not rules - checked - PENDING, f"rules without a check: {sorted(rules - checked)}"
    assert not {op_of(c) for c in CASES} - rules, "a case names an op without a rule"


def test_coverage_script_lists_decisions(capsys):
    code = coverage.main([])
    out = capsys.readouterr().out
    assert "argsort" in out and "not differentiable" in out and "isnan" in out
    assert code == (1 if coverage.missing() else 0)


# -- what each decision does -----------------------------------------------------------------------

X = np.array([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]])


@pytest.mark.parametrize("fn,op_name,arg", [
    (lambda v: (v * o.argsort(v, axis=1).astype(v.dtype)).sum(), "argsort", "x"),
    (lambda v: (v * o.bitwise_and(v.argmax(axis=1), 1).astype(v.dtype).sum()).sum(),
     "bitwise_and", "a"),
    (lambda v: (v[:, :2] * o.nms(np.array([[0, 0, 2, 2], [1, 1, 3, 3.0]]), v[0, :2], 0.3)[0]
                .astype(v.dtype)).sum(), "nms", "scores"),
    (lambda v: o.roi_pool.kernel(np.ones((1, 1, 4, 4)), v[:1, :1] * np.array([[0, 1, 1, 3, 2.0]]),
                                 pooled_height=2, pooled_width=2).sum(), "roi_pool", "boxes"),
])
def test_not_differentiable_ops_raise_naming_op_and_argument(fn, op_name, arg):
    with pytest.raises(pypto.NotDifferentiableError, match=rf"{op_name} is not differentiable"
                       rf".*argument '{arg}'"):
        pypto.grad(fn)(X)


def test_an_argument_without_a_gradient_raises_naming_it():
    x = np.random.default_rng(0).standard_normal((1, 1, 4, 5))
    with pytest.raises(pypto.NotDifferentiableError,
                       match=r"roi_align is not differentiable in its argument 'boxes'"):
        pypto.grad(lambda b: o.roi_align.kernel(x, b, pooled_height=2, pooled_width=2).sum())(
            np.array([[0, 0.5, 0.5, 3.0, 2.5]]))


def test_an_integer_output_a_gradient_needs_raises():
    with pytest.raises(pypto.NotDifferentiableError,
                       match=r"cummax gives a non-float output 'indices'"):
        pypto.grad(lambda v: sum((a * b.astype(a.dtype)).sum()
                                 for a, b in [o.cummax(v, axis=1)]))(X)
    with pytest.raises(pypto.NotDifferentiableError, match=r"cummax gives a non-float value"):
        pypto.grad(lambda v: (v * o.cummax(v, axis=1)[1].astype(v.dtype)).sum())(X)


def test_constant_ops_pass_nothing_back():
    # masks and counts are constants: the gradient is that of the rest of the expression
    g = pypto.grad(lambda v: (v * o.isnan(v).astype(v.dtype)).sum()
                   + o.count_nonzero(v).astype(v.dtype) + (v * o.sign(v)).sum())(X)
    np.testing.assert_array_equal(g, np.sign(X))
    g = pypto.grad(lambda v: (o.one_hot(v.argmax(axis=1), num_classes=3).astype(v.dtype)
                              * v).sum())(X)
    np.testing.assert_array_equal(g, (X == X.max(axis=1, keepdims=True)).astype(float))


def test_indices_are_constants():
    """x[argmax(x)] is differentiable in x although argmax is not."""
    g = pypto.grad(lambda v: o.take_along_axis(v, v.argmax(axis=1, keepdims=True), 1).sum())(X)
    np.testing.assert_array_equal(g, (X == X.max(axis=1, keepdims=True)).astype(float))


def test_cast_rule():
    g = pypto.grad(lambda v: (o.cast(v, "float32") * np.float32(3.0)).sum())(X)
    assert g.dtype == np.float64
    np.testing.assert_array_equal(g, np.full(X.shape, 3.0))


def test_integer_paths_of_the_quantization_ops_raise():
    x = np.array([[0.5, -1.0], [2.0, 0.25]], np.float32)
    with pytest.raises(pypto.NotDifferentiableError, match=r"quantize is not differentiable"):
        pypto.grad(lambda v: o.dequantize(o.quantize(v, 0.1, 0), 0.1, 0).sum())(x)
    with pytest.raises(pypto.NotDifferentiableError,
                       match=r"quantized_matmul gives a non-float value"):
        pypto.grad(lambda v: o.quantized_matmul(o.quantize(v, 0.1, 0), o.quantize(v, 0.1, 0))
                   .astype(np.float32).sum())(x)


def test_fake_quantize_is_straight_through_like_torch():
    """Not central differences (the output is piecewise constant): the documented straight-
    through rule, dy where the rounded value is within the clamp limits, against NumPy's mask
    and torch.autograd."""
    rng = np.random.default_rng(5)
    x = rng.uniform(-3, 3, (2, 3, 5))
    x = np.round(x / 0.25) * 0.25 + rng.choice([-0.07, 0.07], x.shape)   # clear of ties
    dy = rng.standard_normal(x.shape)
    scale = np.array([0.25, 0.1, 0.5], np.float32)
    zp = np.array([2, -3, 0], np.int32)

    def tensor(v):
        return o.fake_quantize_per_tensor_affine(v, 0.25, 3, -8, 7)

    def channel(v):
        return o.fake_quantize_per_channel_affine(v, scale, zp, 1, -8, 7)

    q_t = np.round(x / 0.25) + 3
    q_c = np.round(x / scale.astype(float)[:, None]) + zp[:, None]
    for fn, q in ((tensor, q_t), (channel, q_c)):
        _, vjp_fn = pypto.vjp(fn, x)
        (got,) = vjp_fn(dy)
        want = np.where((q >= -8) & (q <= 7), dy, 0.0)
        assert 0 < np.count_nonzero(want) < want.size
        np.testing.assert_array_equal(got, want)
    torch = pytest.importorskip("torch")
    for fn, t_fn in ((tensor, lambda t: torch.fake_quantize_per_tensor_affine(t, 0.25, 3, -8, 7)),
                     (channel, lambda t: torch.fake_quantize_per_channel_affine(
                         t, torch.tensor(scale), torch.tensor(zp), 1, -8, 7))):
        t = torch.tensor(x, dtype=torch.float32, requires_grad=True)
        t_fn(t).backward(torch.tensor(dy, dtype=torch.float32))
        _, vjp_fn = pypto.vjp(fn, x.astype(np.float32))
        np.testing.assert_array_equal(vjp_fn(dy.astype(np.float32))[0], t.grad.numpy())


def test_fake_quantize_scale_and_quantized_ops_raise():
    x = np.array([[0.5, -1.0], [2.0, 0.25]], np.float32)
    with pytest.raises(pypto.NotDifferentiableError,
                       match=r"fake_quantize_per_channel_affine is not differentiable in its "
                             r"argument 'scale'"):
        pypto.grad(lambda s: o.fake_quantize_per_channel_affine(
            x, s, np.array([0, 1], np.int32), 0, -8, 7).sum())(np.array([0.1, 0.2], np.float32))
