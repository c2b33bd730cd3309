"""Every gradient rule against float64 central differences (tests/autodiff/fd.py).

Shapes are small: each case compiles one forward and one forward+backward pipeline. The
elementwise, binary and reduction families draw their op and shapes from Hypothesis, with few
examples over a few shapes so the compile count stays bounded.
"""

from __future__ import annotations

import numpy as np
import pytest
from fd import check_vjp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pypto

o = pypto.ops
rng = np.random.default_rng(1)


def r(*shape, low=None):
    a = rng.standard_normal(shape)
    return np.abs(a) + low if low is not None else a


# -- elementwise unary (Hypothesis) ------------------------------------------------------------------
#: op -> (call, domain shift): a positive domain where the op needs one.
UNARY = {
    "neg": (o.neg, None), "abs": (o.abs, None), "exp": (o.exp, None), "expm1": (o.expm1, None),
    "log": (o.log, 0.5), "log1p": (o.log1p, 0.5), "sqrt": (o.sqrt, 0.5),
    "rsqrt": (o.rsqrt, 0.5), "sin": (o.sin, None), "cos": (o.cos, None),
    "tanh": (o.tanh, None), "sigmoid": (o.sigmoid, None), "relu": (o.relu, None),
    "gelu": (o.gelu, None), "gelu_tanh": (lambda x: o.gelu(x, approximate="tanh"), None),
    "silu": (o.silu, None), "erf": (o.erf, None), "square": (o.square, None),
    "reciprocal": (o.reciprocal, 0.5), "softplus": (o.softplus, None),
    "leaky_relu": (lambda x: o.leaky_relu(x, negative_slope=0.2), None),
    "clip": (lambda x: o.clip(x, -0.5, 0.7), None),
}
SHAPES = [(5,), (2, 3), (2, 1, 3)]


def _away_from_kinks(x):
    """Moves values off the points where relu/abs/clip are not differentiable."""
    for k in (0.0, -0.5, 0.7):
        x = np.where(np.abs(x - k) < 0.05, x + 0.1, x)
    return x


@settings(max_examples=22, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(name=st.sampled_from(sorted(UNARY)), shape=st.sampled_from(SHAPES))
def test_unary_rules(name, shape):
    fn, low = UNARY[name]
    x = _away_from_kinks(r(*shape, low=low))
    check_vjp(fn, x)


def test_floor_ceil_round_have_zero_gradient():
    x = np.array([0.3, 1.7, -2.2])
    for fn in (o.floor, o.ceil, o.round):
        np.testing.assert_array_equal(pypto.grad(lambda v: fn(v).sum())(x), np.zeros(3))


# -- binary with broadcasting (Hypothesis) --------------------------------------------------------
BINARY = {
    "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b, "pow": lambda a, b: o.pow(a, b), "maximum": o.maximum,
    "minimum": o.minimum, "swiglu": o.swiglu,
}
PAIRS = [((2, 3), (2, 3)), ((2, 3), (3,)), ((2, 1, 3), (4, 1)), ((), (3,))]


@settings(max_examples=16, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(name=st.sampled_from(sorted(BINARY)), shapes=st.sampled_from(PAIRS))
def test_binary_rules_unbroadcast(name, shapes):
    sa, sb = shapes
    low = 0.5 if name in ("pow", "div") else None
    a, b = r(*sa, low=low), r(*sb, low=low)
    check_vjp(BINARY[name], a, b)


def test_where_and_masks():
    x, y = r(2, 3), r(3)
    check_vjp(lambda x, y: o.where(x > 0, x * y, y), x, y)
    check_vjp(lambda x: x * (x > 0).astype(x.dtype), x)   # a mask is a constant


# -- reductions (Hypothesis) -----------------------------------------------------------------------
REDUCE = {
    "sum": lambda x, ax, kd: x.sum(axis=ax, keepdims=kd),
    "mean": lambda x, ax, kd: x.mean(axis=ax, keepdims=kd),
    "max": lambda x, ax, kd: x.max(axis=ax, keepdims=kd),
    "min": lambda x, ax, kd: x.min(axis=ax, keepdims=kd),
    "prod": lambda x, ax, kd: x.prod(axis=ax, keepdims=kd),
    "var": lambda x, ax, kd: x.var(axis=ax, ddof=1, keepdims=kd),
    "std": lambda x, ax, kd: x.std(axis=ax, keepdims=kd),
    "logsumexp": lambda x, ax, kd: o.logsumexp(x, axis=ax, keepdims=kd),
}


@settings(max_examples=16, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(name=st.sampled_from(sorted(REDUCE)), axis=st.sampled_from([None, 0, -1, (0, 2)]),
       keepdims=st.booleans())
def test_reduction_rules(name, axis, keepdims):
    x = r(2, 3, 2, low=0.2 if name == "prod" else None)
    check_vjp(lambda v: REDUCE[name](v, axis, keepdims), x)


# -- views -------------------------------------------------------------------------------------------

def test_view_rules():
    x = r(3, 4, 5)
    check_vjp(lambda v: v[1:, ::2, 3].reshape(-1) * 2.0, x)
    check_vjp(lambda v: v[::-1, 1:3].transpose(2, 0, 1), x)
    check_vjp(lambda v: o.transpose(v[0]) * v[1].T + v[2, :, :1].T, x)


def test_cast_rule():
    x = r(2, 3)
    g = pypto.grad(lambda v: (v.astype(np.float32) * 3.0).sum())(x)
    np.testing.assert_allclose(g, np.full((2, 3), 3.0))
    assert g.dtype == np.float64


# -- nn, norms, linalg -----------------------------------------------------------------------------
CASES = {
    "softmax": (lambda x: o.softmax(x, axis=0), [(3, 4)]),
    "log_softmax": (lambda x: o.log_softmax(x), [(3, 4)]),
    "layer_norm": (lambda x, g, b: o.layer_norm(x, g, b), [(2, 3, 5), (5,), (5,)]),
    "rms_norm": (lambda x, g: o.rms_norm(x, g), [(3, 5), (5,)]),
    "matmul": (lambda a, b: a @ b, [(3, 4), (4, 2)]),
    "linear": (lambda x, w, b: o.linear(x, w, b), [(3, 4), (2, 4), (2,)]),
    "batch_matmul": (lambda a, b: o.batch_matmul(a, b), [(2, 3, 4), (2, 4, 2)]),
    "batch_transpose": (lambda x: o.batch_transpose(x), [(2, 3, 4, 2)]),
    "conv2d": (lambda x, w, b: o.conv2d(x, w, b, stride=2, padding=1),
               [(2, 3, 7, 6), (4, 3, 3, 2), (4,)]),
    "conv2d_groups_dilation": (
        lambda x, w: o.conv2d(x, w, stride=(2, 1), padding=(1, 2), dilation=(2, 1), groups=2),
        [(1, 4, 8, 7), (6, 2, 2, 3)]),
    # stride 1 (weight gradient from row slices of the channels-last input): padding along one
    # axis, dilation, a 1 x 1 kernel, two samples
    "conv2d_stride1": (lambda x, w, b: o.conv2d(x, w, b, padding=(1, 0)),
                       [(2, 3, 7, 6), (4, 3, 3, 2), (4,)]),
    "conv2d_stride1_dilation": (lambda x, w: o.conv2d(x, w, padding=(2, 1), dilation=(2, 1)),
                                [(2, 2, 6, 5), (3, 2, 3, 3)]),
    "conv2d_1x1": (lambda x, w: o.conv2d(x, w), [(2, 3, 4, 5), (2, 3, 1, 1)]),
    "depthwise_conv2d": (lambda x, w: o.depthwise_conv2d(x, w, stride=2, padding=1),
                         [(1, 3, 6, 5), (3, 1, 3, 3)]),
    "avg_pool2d": (lambda x: o.avg_pool2d(x, 3, stride=2, padding=1), [(1, 2, 6, 5)]),
    "avg_pool2d_exclude_pad": (
        lambda x: o.avg_pool2d(x, 3, stride=2, padding=1, count_include_pad=False),
        [(1, 2, 6, 5)]),
    "max_pool2d": (lambda x: o.max_pool2d(x, 2, stride=2, padding=1), [(1, 2, 5, 6)]),
    "attention": (lambda q, k, v: o.scaled_dot_product_attention(q, k, v),
                  [(1, 2, 3, 4), (1, 2, 5, 4), (1, 2, 5, 3)]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_nn_rules(name):
    fn, shapes = CASES[name]
    check_vjp(fn, *[r(*s) for s in shapes])


def test_batch_norm_rule():
    check_vjp(lambda x, m, v, g, b: o.batch_norm(x, m, v, g, b),
              r(2, 3, 4), r(3), r(3, low=0.5), r(3), r(3))


def test_lstm_cell_rule():
    def step(x, h, c, w_ih, w_hh, b_ih, b_hh):
        return o.lstm_cell(x, h, c, w_ih, w_hh, b_ih, b_hh)

    check_vjp(step, r(2, 3), r(2, 4), r(2, 4), r(16, 3), r(16, 4), r(16), r(16))


def test_float32_rules_match_float64():
    """The rules run in float32 too: the same gradient to float32 accuracy."""
    x, w = r(2, 3, 6, 5), r(4, 3, 3, 3)

    def f(x, w):
        y = o.conv2d(x, w, padding=1)
        return o.log_softmax(o.layer_norm(y.reshape(2, -1)), axis=-1).sum() * 0.1

    g64 = pypto.grad(f, (0, 1))(x, w)
    g32 = pypto.grad(f, (0, 1))(x.astype(np.float32), w.astype(np.float32))
    for a, b in zip(g32, g64):
        assert a.dtype == np.float32
        np.testing.assert_allclose(a, b, rtol=2e-4, atol=2e-5)
