"""Gradients of whole programs (helper-42's hunt): composite ops with a user gradient inside a
larger function, a grad called with many shapes, a vjp's returned arrays, and a few programs
mixing views, joins, loops and composites checked against torch autograd in float64.

The defects pinned here:

* a composite with ``@pypto.def_gradient`` that returns one of its arguments as it is (or one
  value twice) had that output's gradient counted twice: the rule read the argument's whole
  gradient as its output's and added it back;
* a composite with a user gradient taking a list (or dict) of arrays got zero gradients,
  silently: its inner ops were skipped and the list was not seen as an argument;
* the ninth shape given to one ``grad``/``value_and_grad``/``vjp`` function passed its jit
  recompile limit, whose op-by-op fallback cannot build a backward: "argument #0 is ndarray,
  not an array";
* ``vjp_fn`` of the identity returned the caller's own cotangent array (writing the gradient
  wrote the cotangent);
* ``grad`` called inside a ``@pypto.jit`` function let the differentiated function break
  (``float(v)``): the value became a constant of the backward, a different gradient from the
  same ``grad`` called alone, which refuses the break;
* ``vjp`` of a function returning a constant NumPy array beside its traced outputs could not
  be called: ``vjp_fn`` asked for a gradient per output, the program for the traced ones;
* a rule defined, overridden or cleared with ``def_gradient`` after a function was
  differentiated once was ignored by the next ``grad``/``vjp`` of that function (its traced
  program was replayed); so was a ``@pypto.jit`` step calling ``grad`` and
  ``pypto.torch.op``'s backward (every jit trace is now keyed by a generation that
  ``def_gradient`` bumps);
* ``argnums`` as a NumPy integer was refused with a TypeError or "must name positional
  arguments among the 2 given".
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import pypto

o = pypto.ops
RNG = np.random.default_rng(42)
X = RNG.standard_normal(3)
Y = RNG.standard_normal(3)
Z = RNG.standard_normal(3)


@pypto.register_op(name="h42_passthru")
def passthru(x, s):
    return x, x * s


@pypto.def_gradient(passthru)
def _passthru_grad(x, s, d0, d1):
    return d0 + d1 * s, None


@pypto.register_op(name="h42_twice")
def twice(x):
    y = x * 2.0
    return y, y


@pypto.def_gradient(twice)
def _twice_grad(x, d0, d1):
    return (d0 + d1) * 2.0


@pypto.register_op(name="h42_pairprod")
def pairprod(xs):
    return xs[0] * xs[1]


@pypto.def_gradient(pairprod)
def _pairprod_grad(xs, dy):
    return [dy * xs[1], dy * xs[0]]      # one list argument: its items' gradients


@pypto.register_op(name="h42_nested")
def nested(xs, w):
    return xs[0] * w + xs[1][0] * xs[1][1]


@pypto.def_gradient(nested)
def _nested_grad(xs, w, dy):
    return [dy * w, (dy * xs[1][1], dy * xs[1][0])], dy * xs[0]


@pypto.register_op(name="h42_scaled_pair")
def scaled_pair(x, ws):
    return x * ws[0] * ws[1]


def test_composite_returning_its_argument_counts_that_gradient_once():
    def f(a):
        kept, scaled = passthru(a, 2.0)[0], passthru(a, 2.0)[1]
        return (kept * 3.0).sum() + scaled.sum()

    np.testing.assert_array_equal(pypto.grad(f)(X), np.full(3, 5.0))      # was 10
    np.testing.assert_array_equal(pypto.grad(pypto.jit(f))(X), np.full(3, 5.0))
    kept, scaled = passthru(X, 2.0)             # eager and jitted values are unchanged
    np.testing.assert_array_equal(kept, X)
    np.testing.assert_array_equal(pypto.jit(lambda a: passthru(a, 2.0))(X)[1], X * 2.0)


def test_composite_returning_one_value_twice_counts_each_output_once():
    def f(a):
        y0, y1 = twice(a)
        return (y0 * 3.0).sum() + y1.sum()

    np.testing.assert_array_equal(pypto.grad(f)(X), np.full(3, 8.0))     # (3 + 1) * 2
    out, vjp_fn = pypto.vjp(twice, X)
    np.testing.assert_array_equal(out[0], 2 * X)
    np.testing.assert_array_equal(vjp_fn(np.ones(3), np.full(3, 2.0))[0], np.full(3, 6.0))


def test_composite_with_a_list_argument_uses_its_gradient():
    ga, gb = pypto.grad(lambda a, b: (pairprod([a, b]) * 2.0).sum(), (0, 1))(X, Y)
    np.testing.assert_allclose(ga, 2 * Y, rtol=1e-15)      # were zeros
    np.testing.assert_allclose(gb, 2 * X, rtol=1e-15)
    got = pypto.grad(lambda a, b, c: nested([a, (b, c)], c).sum(), (0, 1, 2))(X, Y, Z)
    for g, want in zip(got, [Z, Z, X + Y]):
        np.testing.assert_allclose(g, want, rtol=1e-15)
    # an item that is a constant gets no gradient; the others do
    g = pypto.grad(lambda a: pairprod([a, Y]).sum())(X)
    np.testing.assert_allclose(g, Y, rtol=1e-15)


@pypto.register_op(name="h42_dense")
def dense(x, p):
    return x @ p["w"] + p["b"]


def test_composite_with_a_dict_argument_uses_its_gradient():
    @pypto.def_gradient(dense)
    def dense_grad(x, p, dy):
        return dy @ p["w"].T, {"w": x.T @ dy, "b": dy.sum(axis=0)}

    x, w, b = X.reshape(1, 3), np.outer(Y, Z[:2]), Z[:2]
    h = x @ w + b
    got = pypto.grad(lambda x, w, b: (dense(x, {"w": w, "b": b}) ** 2).sum(), (0, 1, 2))(x, w, b)
    for g, want in zip(got, [2 * h @ w.T, 2 * x.T @ h, 2 * h.sum(axis=0)]):
        np.testing.assert_allclose(g, want, rtol=1e-14)

    @pypto.def_gradient(dense)
    def wrong_key(x, p, dy):
        return dy @ p["w"].T, {"w": x.T @ dy, "c": dy.sum(axis=0)}

    with pytest.raises(pypto.PyptoError, match=r"gradient of 'p' \(a dict\) must be a dict "
                                               r"with its keys \('w', 'b'\)"):
        pypto.grad(lambda w, b: dense(x, {"w": w, "b": b}).sum(), (0, 1))(w, b)


def test_composite_list_gradient_errors_name_the_item():
    @pypto.def_gradient(scaled_pair)
    def flat(x, ws, dy):
        return dy, dy

    with pytest.raises(pypto.PyptoError, match=r"gradient of 'ws' \(a list of 2\) must be a "
                                               r"list or tuple of 2 gradients"):
        pypto.grad(lambda a, b: scaled_pair(a, [b, b * 2.0]).sum(), (0, 1))(X, Y)

    @pypto.def_gradient(scaled_pair)
    def missing(x, ws, dy):
        return dy, [dy, None]

    with pytest.raises(pypto.NotDifferentiableError, match=r"None for argument 'ws\[1\]'.*"
                                                           r"nondiff=\('ws',\)"):
        pypto.grad(lambda a, b, c: scaled_pair(a, [b, c]).sum(), (0, 1, 2))(X, Y, Z)
    # the missing item is a constant here: nothing is asked of it
    np.testing.assert_array_equal(
        pypto.grad(lambda a, b: scaled_pair(a, [b, Z]).sum(), 1)(X, Y), np.ones(3))

    @pypto.def_gradient(scaled_pair, nondiff="ws")
    def nondiff(x, ws, dy):
        return dy * ws[0] * ws[1], None

    gx, gb = pypto.grad(lambda a, b: scaled_pair(a, [b, Z]).sum(), (0, 1))(X, Y)
    np.testing.assert_allclose(gx, Y * Z, rtol=1e-15)
    np.testing.assert_array_equal(gb, np.zeros(3))


def test_grad_past_the_jit_recompile_limit_still_differentiates():
    g = pypto.grad(lambda a: (a * a).sum())
    f = lambda a: a * 3.0                       # noqa: E731
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)   # and no "runs eagerly" warning
        for n in range(1, 11):                  # the default limit is 8 signatures
            x = np.arange(n, dtype=np.float64)
            np.testing.assert_array_equal(g(x), 2 * x)
            np.testing.assert_array_equal(pypto.vjp(f, x)[1](np.ones(n))[0], np.full(n, 3.0))


def test_vjp_never_returns_the_callers_cotangent():
    ct = np.arange(4.0)
    (g,) = pypto.vjp(lambda a: a, np.ones(4))[1](ct)
    np.testing.assert_array_equal(g, ct)
    assert not np.shares_memory(g, ct)
    ga, gb = pypto.vjp(lambda a, b: (a, b), np.ones(4), np.ones(4))[1](ct, ct)
    assert not np.shares_memory(ga, ct) and not np.shares_memory(gb, ct)


def test_grad_inside_a_jitted_function_refuses_a_break_as_grad_alone_does():
    w, x = np.outer(X, Y[:2]), np.outer(Z, X)

    def loss(w, x):
        v = (x @ w).sum()
        return v * float(v)      # the break's value would be a constant of the backward

    with pytest.raises(pypto.GraphBreakError, match=r"grad\(loss\): the function must trace "
                                                    r"as one program"):
        pypto.grad(loss)(w, x)

    @pypto.jit
    def step(w, x):
        return pypto.grad(loss)(w, x)

    for _ in range(2):           # was a gradient with float(v) a constant: half the true one
        with pytest.raises(pypto.GraphBreakError, match=r"grad\(loss\): the function must "
                                                        r"trace as one program"):
            step(w, x)

    @pypto.jit
    def step_then_break(w, x):   # a break outside the differentiated function is fine
        v, g = pypto.value_and_grad(lambda w: ((x @ w) ** 2).sum())(w)
        return w - (0.1 if float(v) > 1.0 else 0.01) * g

    h = x @ w
    lr = 0.1 if (h ** 2).sum() > 1.0 else 0.01
    np.testing.assert_allclose(step_then_break(w, x), w - lr * 2 * x.T @ h, rtol=1e-13)


def test_vjp_of_a_function_returning_a_constant_array():
    const = np.ones(3)
    (out, c), vjp_fn = pypto.vjp(lambda a: (a * 2.0, const), X)
    np.testing.assert_array_equal(c, const)
    (g,) = vjp_fn(np.ones(3), np.ones(3))   # was "one output gradient per output (1), got 2"
    np.testing.assert_array_equal(g, np.full(3, 2.0))
    (g,) = pypto.vjp(lambda a: (np.float64(3.0), a * 4.0), X)[1](np.float64(1.0), np.ones(3))
    np.testing.assert_array_equal(g, np.full(3, 4.0))
    with pytest.raises(pypto.ShapeError, match=r"one output gradient per output \(2\), got 1"):
        vjp_fn(np.ones(3))


def test_a_rule_defined_after_a_first_gradient_applies_to_the_next_call():
    from pypto.autodiff import clear_gradient

    f = lambda a: o.round(a * 2.0).sum()        # noqa: E731
    g = pypto.grad(f)
    np.testing.assert_array_equal(g(X), np.zeros(3))

    @pypto.def_gradient(o.round)
    def straight_through(a, dy):
        return dy

    try:    # both were zeros: the program traced with the built-in rule was replayed
        np.testing.assert_array_equal(g(X), np.full(3, 2.0))
        np.testing.assert_array_equal(pypto.grad(f)(X), np.full(3, 2.0))
        np.testing.assert_array_equal(pypto.vjp(lambda a: o.round(a), X)[1](np.ones(3))[0],
                                      np.ones(3))
    finally:
        clear_gradient(o.round)
    np.testing.assert_array_equal(g(X), np.zeros(3))


def test_a_rule_defined_after_a_jitted_step_applies_to_the_step():
    from pypto.autodiff import clear_gradient

    @pypto.jit
    def step(a):
        return pypto.grad(lambda t: o.round(t * 2.0).sum())(a)

    np.testing.assert_array_equal(step(X), np.zeros(3))

    @pypto.def_gradient(o.round)
    def straight_through(a, dy):
        return dy

    try:
        np.testing.assert_array_equal(step(X), np.full(3, 2.0))
    finally:
        clear_gradient(o.round)


def test_a_rule_defined_after_a_torch_backward_applies_to_the_next_backward():
    torch = pytest.importorskip("torch")
    import pypto.torch as pt
    from pypto.autodiff import clear_gradient

    op = pt.op(lambda a: o.round(a * 2.0))
    t = torch.tensor(X, requires_grad=True)
    op(t).sum().backward()
    np.testing.assert_array_equal(t.grad.numpy(), np.zeros(3))

    @pypto.def_gradient(o.round)
    def straight_through(a, dy):
        return dy

    try:
        t = torch.tensor(X, requires_grad=True)
        op(t).sum().backward()
        np.testing.assert_array_equal(t.grad.numpy(), np.full(3, 2.0))
    finally:
        clear_gradient(o.round)


def test_argnums_takes_numpy_integers():
    f = lambda a, b: (a * b * 2.0).sum()        # noqa: E731
    g = pypto.grad(f, np.int64(1))(X, Y)        # was "'numpy.int64' object is not iterable"
    np.testing.assert_array_equal(g, 2 * X)
    ga, gb = pypto.grad(f, (np.int32(0), 1))(X, Y)     # was "must name positional arguments"
    np.testing.assert_array_equal(ga, 2 * Y)
    np.testing.assert_array_equal(gb, 2 * X)
    with pytest.raises(pypto.TraceError, match="argnums 0.5 must be an int or a sequence"):
        pypto.grad(f, 0.5)(X, Y)
    with pytest.raises(pypto.TraceError, match="among the 2 given"):
        pypto.grad(f, (True,))(X, Y)


# -- programs checked against torch autograd (float64) ------------------------------------------

def _torch_grads(tf, args, nums):
    torch = pytest.importorskip("torch")
    ts = [torch.tensor(a, requires_grad=i in nums) for i, a in enumerate(args)]
    v = tf(torch, *ts)
    gs = torch.autograd.grad(v, [ts[i] for i in nums], allow_unused=True)
    return float(v.detach()), [np.zeros(args[i].shape) if g is None else g.numpy()
                      for g, i in zip(gs, nums)]


def _check(pf, tf, args, nums):
    want_v, want = _torch_grads(tf, args, nums)
    v, got = pypto.value_and_grad(pf, nums)(*args)
    np.testing.assert_allclose(float(v), want_v, rtol=1e-12)
    for k, (g, w) in enumerate(zip(got, want)):
        assert g.shape == w.shape and g.dtype == np.float64, k
        np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-12, err_msg=f"argument {nums[k]}")


def test_views_joins_and_a_loop_match_torch():
    rng = np.random.default_rng(7)
    x, w, h0, xs = (rng.standard_normal(s) for s in [(6, 7), (7, 7), (2, 7), (4, 2, 7)])
    w = w / 3

    def pf(x, w, h0, xs, unused):
        c = o.concat([x[::-1, ::2], x[:, 1::2] * 2.0], axis=1)          # (6, 7)
        p1, p2 = o.split(c, 2, axis=0)
        h = h0
        for t in range(4):
            h = o.tanh(xs[t] + h @ w + p1[t % 3, :] * 0.1)
        s = o.stack([h, h0], axis=0)
        return (p1 * p2).sum() + (s[:, :, ::-3] ** 2).sum() + x.T.reshape(14, 3)[::5].sum()

    def tf(torch, x, w, h0, xs, unused):
        c = torch.cat([x.flip(0)[:, ::2], x[:, 1::2] * 2.0], 1)
        p1, p2 = torch.split(c, 3, 0)
        h = h0
        for t in range(4):
            h = torch.tanh(xs[t] + h @ w + p1[t % 3, :] * 0.1)
        s = torch.stack([h, h0], 0)
        return ((p1 * p2).sum() + (s.flip(2)[:, :, ::3] ** 2).sum()
                + x.T.reshape(14, 3)[::5].sum())

    _check(pf, tf, [x, w, h0, xs, np.ones(3)], (0, 1, 2, 3, 4))


def test_composites_inside_a_block_match_torch():
    rng = np.random.default_rng(8)
    x, w1, w2, y = (rng.standard_normal(s) for s in [(4, 3), (3, 5), (5, 3), (4, 3)])

    def pf(x, w1, w2, y):
        kept, scaled = passthru(o.layer_norm(x, 3), 0.5)
        h = o.relu(kept @ w1) @ w2 + scaled
        return o.mse_loss(h, y) + pairprod([x, y * x]).mean()

    def tf(torch, x, w1, w2, y):
        n = torch.nn.functional.layer_norm(x, (3,))
        h = torch.relu(n @ w1) @ w2 + n * 0.5
        return torch.nn.functional.mse_loss(h, y) + (x * (y * x)).mean()

    _check(pf, tf, [x, w1, w2, y], (0, 1, 2, 3))
    _check(pypto.jit(pf), tf, [x, w1, w2, y], (0, 1, 2, 3))
