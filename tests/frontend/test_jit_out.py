"""``out=`` on jitted programs: the last pipeline writes the caller's arrays in place."""

from __future__ import annotations

import importlib

import numpy as np
import pytest

import pypto

o = pypto.ops
jit_module = importlib.import_module("pypto.frontend.jit")   # pypto.frontend.jit is the decorator
rng = np.random.default_rng(7)


def arr(*shape):
    return rng.standard_normal(shape).astype(np.float32)


@pytest.fixture
def launches(monkeypatch):
    """The (pre, outs) of every pipeline launch: ``pre`` holds the caller arrays handed to it."""
    seen = []
    real = jit_module.Segment._launch

    def spy(self, ins, pre=None):
        outs = real(self, ins, pre)
        seen.append((pre, outs))
        return outs

    monkeypatch.setattr(jit_module.Segment, "_launch", spy)
    return seen


def test_out_is_written_in_place_and_returned(launches):
    @pypto.jit
    def f(x, w):
        return o.tanh(x @ w) + 1.0, o.exp(x) * 2.0

    x, w = arr(9, 5), arr(5, 3)
    ref_y = np.tanh(x.astype(np.float64) @ w) + 1.0
    ref_s = np.exp(x.astype(np.float64)) * 2.0
    y, s = np.full((9, 3), np.nan, np.float32), np.full((9, 5), np.nan, np.float32)
    for call in range(3):                 # a trace (computes, then copies in), then replays
        got = f(x, w, out=(y, s))
        assert got[0] is y and got[1] is s
        np.testing.assert_allclose(y, ref_y, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(s, ref_s, rtol=1e-5)
    pre, outs = launches[-1]
    assert pre is not None
    assert [p.__array_interface__["data"][0] for p in pre] == [
        y.__array_interface__["data"][0], s.__array_interface__["data"][0]]
    assert all(p is q for p, q in zip(pre, outs))
    assert f.stats.traces == 1


def test_a_scalar_result_is_filled():
    @pypto.jit
    def f(x):
        return (x * 2.0).sum(), o.exp(x)

    x = arr(7, 3)
    s, e = np.empty((), np.float32), np.empty((7, 3), np.float32)
    for _ in range(2):
        got = f(x, out=(s, e))
        assert got[0] is s and got[1] is e
        np.testing.assert_allclose(s, (x.astype(np.float64) * 2).sum(), rtol=1e-5)
        np.testing.assert_allclose(e, np.exp(x), rtol=1e-6)


def test_none_entries_allocate_and_a_lone_array_is_out(launches):
    @pypto.jit
    def f(x):
        return o.exp(x), x * 3.0

    x = arr(4, 6)
    f(x)
    b = np.empty((4, 6), np.float32)
    got = f(x, out=(None, b))
    assert got[1] is b and got[0] is not b
    np.testing.assert_allclose(b, x * 3.0, rtol=1e-6)
    np.testing.assert_allclose(got[0], np.exp(x), rtol=1e-5)
    pre, _ = launches[-1]
    assert pre[0] is None and pre[1] is not None

    g = pypto.jit(lambda x: o.sqrt(o.abs(x)))
    one = np.empty((4, 6), np.float32)
    assert g(x, out=one) is one
    assert g(x, out=one) is one
    np.testing.assert_allclose(one, np.sqrt(np.abs(x)), rtol=1e-6)


def test_results_that_are_not_pipeline_outputs_are_copied_in():
    @pypto.jit
    def f(x):
        y = x * 2.0
        return y.reshape(6, 4), x, y      # a reshaped view, an argument, the value again

    x = arr(4, 6)
    outs = (np.empty((6, 4), np.float32), np.empty((4, 6), np.float32),
            np.empty((4, 6), np.float32))
    for _ in range(2):
        got = f(x, out=outs)
        assert all(g is q for g, q in zip(got, outs))
        np.testing.assert_array_equal(outs[0], (x * 2.0).reshape(6, 4))
        np.testing.assert_array_equal(outs[1], x)
        np.testing.assert_array_equal(outs[2], x * 2.0)


TABLE = np.arange(3, dtype=np.float32)


def test_a_numpy_array_returned_beside_a_traced_one_takes_its_out_entry():
    """A NumPy array the function returns as it is counts as one of its arrays: out= has an
    entry for it, filled on the tracing call and on replays; without out= it comes back as is."""
    global TABLE

    @pypto.jit
    def f(x):
        return o.exp(x), TABLE

    x = arr(4)
    for k in range(3):
        outs = (np.full(4, np.nan, np.float32), np.full(3, np.nan, np.float32))
        got = f(x, out=outs)
        assert got[0] is outs[0] and got[1] is outs[1]
        np.testing.assert_allclose(outs[0], np.exp(x), rtol=1e-6)
        np.testing.assert_array_equal(outs[1], np.arange(3) + k)
        assert f(x)[1] is TABLE
        mine = np.empty(3, np.float32)
        assert f(x, out=(None, mine))[1] is mine
        TABLE = TABLE + 1          # rebinding the global is seen by the next call
    with pytest.raises(pypto.ShapeError, match=r"out\[1\] has shape \(4,\); expected \(3,\)"):
        f(x, out=(None, np.empty(4, np.float32)))


def test_a_value_returned_twice_is_one_array_on_every_call():
    @pypto.jit
    def f(x):
        y = x * 2.0
        return y, y

    x = arr(5)
    for _ in range(3):                      # the tracing call as the replays
        a, b = f(x)
        assert a is b
        np.testing.assert_array_equal(a, x * 2.0)
    outs = (np.empty(5, np.float32), np.empty(5, np.float32))
    got = f(x, out=outs)
    assert got[0] is outs[0] and got[1] is outs[1]
    np.testing.assert_array_equal(outs[1], x * 2.0)


def test_an_out_overlapping_an_argument_gets_the_right_values():
    @pypto.jit
    def rev(x):
        return x[::-1] * 2.0

    z = np.arange(64, dtype=np.float32)
    ref = z[::-1] * 2.0
    rev(z.copy())
    assert rev(z, out=z) is z
    np.testing.assert_array_equal(z, ref)


def test_a_break_in_the_program_still_fills_out():
    @pypto.jit
    def f(x):
        if float(x.sum()) > 0:            # a Python branch on a value: a graph break
            return o.exp(x)
        return o.exp(-x)

    for sign in (1.0, -1.0, 1.0):
        x = np.abs(arr(5, 3)) * sign
        out = np.empty((5, 3), np.float32)
        assert f(x, out=out) is out
        np.testing.assert_allclose(out, np.exp(np.abs(x)), rtol=1e-5)


@pytest.mark.parametrize("bad, err, match", [
    ((np.empty((3, 4), np.float32),), pypto.ParamError, "out= has 1 entry; the function "
                                                       "returns 2 arrays"),
    ((np.empty((3, 4), np.float64), None), pypto.DtypeError, r"out\[0\] has dtype float64; "
                                                             "expected float32"),
    ((np.empty((4, 3), np.float32), None), pypto.ShapeError, r"out\[0\] has shape \(4, 3\); "
                                                             r"expected \(3, 4\)"),
    ((np.empty((3, 8), np.float32)[:, ::2], None), pypto.ParamError, "C-contiguous"),
    ((None, [1.0]), pypto.ParamError, r"out\[1\] must be a NumPy array or None"),
    (5, pypto.ParamError, "out= must be an array or a tuple of arrays"),
])
def test_bad_out_is_refused_before_anything_is_written(bad, err, match):
    @pypto.jit
    def f(x):
        return x + 1.0, x * 2.0

    x = arr(3, 4)
    for _ in range(2):                     # on the tracing call and on a replay
        with pytest.raises(err, match=match):
            f(x, out=bad)
    ro = np.empty((3, 4), np.float32)
    ro.flags.writeable = False
    with pytest.raises(pypto.ParamError, match="read-only"):
        f(x, out=(ro, None))


def test_a_function_with_its_own_out_parameter_receives_it():
    @pypto.jit
    def f(x, out=None):
        return x + 1.0 if out is None else x * out

    x = arr(3)
    np.testing.assert_allclose(f(x), x + 1.0)
    np.testing.assert_allclose(f(x, out=2.0), x * 2.0)


def test_out_inside_a_trace_is_refused():
    inner = pypto.jit(lambda x: x + 1.0)

    @pypto.jit
    def outer(x):
        return inner(x, out=np.empty(3, np.float32))

    with pytest.raises(pypto.ParamError, match="out= is for calls on arrays"):
        outer(arr(3))
