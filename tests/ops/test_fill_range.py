"""Fills a dtype cannot hold (``masked_fill``'s and ``pad``'s ``value``) are ParamErrors naming the
op, the value and the range, as torch refuses them, never a wrapped or infinite fill; fills in
range agree with torch, a fraction truncated toward zero."""

from __future__ import annotations

import re

import numpy as np
import pytest

import pypto
import pypto.ops as P
from pypto.errors import ParamError

MASK = np.array([True, False, True, False])
I32 = "[-2147483648, 2147483647]"
I64 = "[-9223372036854775808, 9223372036854775807]"


def _fills(dtype, value):
    """The three ways a fill reaches a kernel: masked_fill, pad and masked_fill traced."""
    x = np.arange(4, dtype=dtype)
    return [lambda: P.masked_fill(x, MASK, value), lambda: P.pad(x, (1, 1), value=value),
            lambda: pypto.jit(lambda t: P.masked_fill(t, MASK, value))(x)]


@pytest.mark.parametrize("dtype, value, shown, rng", [
    ("int32", 2 ** 40, "1099511627776", I32),
    ("int32", 1e10, "10000000000", I32),
    ("int32", 2 ** 31, "2147483648", I32),
    ("int32", -2 ** 31 - 1, "-2147483649", I32),
    ("int32", 2147483647.5, "2147483647.5", I32),
    ("int64", 2.0 ** 63, "9223372036854775808", I64),
    ("int64", -1e19, "-10000000000000000000", I64),
])
def test_an_integer_fill_out_of_range_is_a_param_error(dtype, value, shown, rng):
    for name, call in zip(["masked_fill", "pad", "masked_fill"], _fills(dtype, value)):
        want = f"{name}: parameter 'value' is {shown}, outside the range of {dtype} {rng}"
        with pytest.raises(ParamError, match=re.escape(want)):
            call()


@pytest.mark.parametrize("dtype, value", [
    ("int32", 2 ** 31 - 1), ("int32", -2 ** 31), ("int32", 2147483647.0), ("int32", 1.7),
    ("int32", -0.5), ("int32", -2.9), ("int64", -2 ** 63), ("int64", 2 ** 53), ("int64", 7.9),
])
def test_an_integer_fill_in_range_agrees_with_torch(dtype, value):
    torch = pytest.importorskip("torch")
    tf = torch.nn.functional
    tdt = getattr(torch, dtype)
    want_mf = torch.arange(4, dtype=tdt).masked_fill(torch.tensor(MASK), value).numpy()
    want_pad = tf.pad(torch.arange(4, dtype=tdt), (1, 1), value=value).numpy()
    mf, pad, traced = (f() for f in _fills(dtype, value))
    for got, want in [(mf, want_mf), (pad, want_pad), (traced, want_mf)]:
        assert got.dtype == np.dtype(dtype)
        np.testing.assert_array_equal(got, want)


def test_the_truncated_fraction_written_out():
    # torch's cast of a fill: toward zero (1.7 fills 1, -2.9 fills -2), never rounded
    np.testing.assert_array_equal(P.masked_fill(np.zeros(4, np.int32), MASK, -2.9),
                                  [-2, 0, -2, 0])
    np.testing.assert_array_equal(P.pad(np.zeros(2, np.int64), (1, 0), value=1.7), [1, 0, 0])


def test_a_float32_fill_past_its_largest_value_is_refused_but_infinity_is_a_fill():
    x = np.zeros(4, np.float32)
    for call, name in [(lambda v: P.masked_fill(x, MASK, v), "masked_fill"),
                       (lambda v: P.pad(x, (1, 1), value=v), "pad")]:
        with pytest.raises(ParamError, match=rf"{name}: parameter 'value' is -1e\+39, beyond "
                                             "float32's largest finite value"):
            call(-1e39)
        with pytest.raises(ParamError, match="beyond float32's largest"):
            call(3.4028235e38)          # above float32's max as a double (torch refuses it too)
        assert call(-3.4028234663852886e38)[0] == np.finfo(np.float32).min
        assert call(float("inf"))[0] == np.inf
    np.testing.assert_array_equal(P.masked_fill(x.astype(np.float64), MASK, 1e300),
                                  [1e300, 0, 1e300, 0])


def test_a_bool_array_takes_any_finite_fill_as_torch_does():
    torch = pytest.importorskip("torch")
    x = np.zeros(2, bool)
    want = torch.nn.functional.pad(torch.zeros(2, dtype=torch.bool), (1, 1), value=1e30).numpy()
    np.testing.assert_array_equal(P.pad(x, (1, 1), value=1e30), want)
    np.testing.assert_array_equal(P.pad(x, (1, 1), value=0.0), [False] * 4)
