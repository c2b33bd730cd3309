"""A jitted function tells float values apart by their bits: -0.0 from 0.0, and a NaN from
nothing but a NaN, both as static arguments and as values a data-dependent branch observes.

Expectations are NumPy's products on the same arrays, or the sign Python gives."""

import math
import warnings

import numpy as np
import pytest

import pypto

X = np.array([1.0, -2.0, 3.0], np.float32)


@pytest.mark.parametrize("zero", [0.0, complex(0.0, 0.0)], ids=repr)
def test_a_static_minus_zero_is_not_the_trace_of_plus_zero(zero):
    f = pypto.jit(lambda x, s: x * s.real)
    for s in (zero, -zero, zero, -zero):
        got = f(X, s)
        np.testing.assert_array_equal(np.signbit(got), np.signbit(X * s.real))
    assert f.stats.traces == 2


def test_a_numpy_scalar_minus_zero_is_an_input_value():
    f = pypto.jit(lambda x, s: x * s)
    for s in (np.float32(0.0), np.float32(-0.0)):
        np.testing.assert_array_equal(np.signbit(f(X, s)), np.signbit(X * s))


def test_a_static_nan_replays_the_trace_of_nan():
    f = pypto.jit(lambda x, s: x + s)
    with warnings.catch_warnings():
        warnings.simplefilter("error")       # no recompile-limit warning
        for _ in range(10):
            got = f(X, float("nan"))
    assert np.isnan(got).all()
    assert f.stats.traces == 1
    assert f.stats.replays == 9


def test_a_static_float_keeps_its_type_and_value():
    seen = []

    def body(x, s):
        seen.append(s)
        return x * s.real

    f = pypto.jit(body)
    for s in (0.1, -0.0, float("inf"), complex(-0.0, 2.5)):
        f(X, s)
    assert [(type(v), repr(v)) for v in seen] == [
        (float, "0.1"), (float, "-0.0"), (float, "inf"), (complex, "(-0+2.5j)")]


def test_a_break_on_minus_zero_takes_its_own_branch():
    @pypto.jit
    def f(x):
        v = float(x.min())
        return x * 0 + math.copysign(1.0, v)

    for v, sign in ((0.0, 1.0), (-0.0, -1.0), (0.0, 1.0), (-0.0, -1.0)):
        np.testing.assert_array_equal(f(np.array([v, 1.0], np.float32)), [sign, sign])
    assert f.stats.traces == 2


def test_a_break_on_nan_replays():
    @pypto.jit
    def f(x):
        v = float(x.sum())
        return x + (1.0 if math.isnan(v) else 2.0)

    x = np.array([np.nan, 1.0], np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(10):
            got = f(x)
    np.testing.assert_array_equal(got, x + 1.0)
    assert f.stats.traces == 1
    assert "seen values: [nan]" in f.explain(x)
