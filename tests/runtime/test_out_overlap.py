"""``out=`` over one of the call's own inputs (``exp(a, out=a)``, ``add(a, b, out=b)``), as NumPy
allows: the result must be the one a fresh output gets.

Kernels read and write in vectors and tiles; a vector tail shifted back over elements already
written, a scan, a transpose or a product would read values the call itself overwrote. Such a
call computes into new outputs and copies them in (``pypto.runtime.overlaps``).
"""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

import pypto.ops as P
from pypto import runtime

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__)), "ops"))
from test_byteorder import CALLS  # noqa: E402  (one public call per op, small odd shapes)


def _rand(shape, seed=0, dtype=np.float32):
    return np.random.default_rng(seed).uniform(-2, 2, shape).astype(dtype)


# Shapes whose last axis is not a multiple of any vector width, and long enough for several
# vectors and tasks: the tails are where a shifted vector re-reads what was written.
SHAPES = [(3, 1001), (100003,)]

CASES = {
    "neg": lambda s: ((_rand(s),), {}, 0),
    "exp": lambda s: ((_rand(s),), {}, 0),
    "sigmoid": lambda s: ((_rand(s),), {}, 0),
    "sqrt": lambda s: ((np.abs(_rand(s)),), {}, 0),
    "add, out=a": lambda s: ((_rand(s), _rand(s, 1)), {}, 0),
    "add, out=b": lambda s: ((_rand(s), _rand(s, 1)), {}, 1),
    "mul, number": lambda s: ((_rand(s), 2.5), {}, 0),
    "logical_not": lambda s: ((_rand(s) > 0,), {}, 0),
    "where": lambda s: ((_rand(s) > 0, _rand(s, 1), _rand(s, 2)), {}, 2),
    "cumsum": lambda s: ((_rand(s),), {"axis": -1}, 0),
    "softmax": lambda s: ((_rand(s),), {}, 0),
    "flip": lambda s: ((_rand(s),), {"axis": -1}, 0),
    "roll": lambda s: ((_rand(s),), {"shift": 3, "axis": -1}, 0),
}


def _fn(case):
    return getattr(P, case.split(",")[0])


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("case", sorted(CASES))
def test_out_over_an_input_gives_the_fresh_result(case, shape):
    fn = _fn(case)
    args, kwargs, i = CASES[case](shape)
    want = fn(*args, **kwargs)
    for _ in range(2):     # the first call records the fast path, the second takes it
        args2 = list(args)
        args2[i] = target = args[i].copy()
        assert fn(*args2, **kwargs, out=target) is target
        np.testing.assert_array_equal(target, want, err_msg=case)
    # the other inputs are left as they were
    args3 = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    args3[i] = target = args[i].copy()
    fn(*args3, **kwargs, out=target)
    for j, (a, b) in enumerate(zip(args, args3)):
        if j != i and isinstance(a, np.ndarray):
            np.testing.assert_array_equal(a, b)


def test_a_square_product_written_over_its_left_operand():
    a, b = _rand((67, 67)), _rand((67, 67), 1)
    want = P.matmul(a, b)
    for _ in range(2):
        x = a.copy()
        P.matmul(x, b, out=x)
        np.testing.assert_allclose(x, want, rtol=1e-5, atol=1e-5)


def test_the_kernel_form_written_over_its_input():
    x = _rand((1003,))
    want = P.exp.kernel(x)
    for _ in range(2):
        y = x.copy()
        assert P.exp.kernel(y, out=y) is y
        np.testing.assert_array_equal(y, want)


def test_out_as_a_row_of_the_inputs_array():
    # out is one row of the array whose rows are the inputs: a disjoint row is written in place,
    # the row being read gets the fresh result.
    x = _rand((2, 1001))
    y = x.copy()
    P.flip(y[0], axis=-1, out=y[1])
    np.testing.assert_array_equal(y[1], x[0][::-1])
    np.testing.assert_array_equal(y[0], x[0])
    y = x.copy()
    got = P.add(y[0], y[1], out=y[1])
    np.testing.assert_array_equal(got, x[0] + x[1])


def test_out_apart_from_the_inputs_is_still_written_in_place():
    a, b = _rand((3, 1001)), _rand((3, 1001), 1)
    out = np.empty_like(a)
    for _ in range(2):
        before = dict(runtime.out_stats)
        P.add(a, b, out=out)
        assert runtime.out_stats["copied"] == before["copied"]
    np.testing.assert_array_equal(out, a + b)


def _aliasable(name):
    """(args, kwargs, index) of a listed public call with an array input that could hold its own
    result (same shape and dtype as the single output)."""
    args, kwargs = CALLS[name]()
    want = getattr(P, name)(*args, **kwargs)
    if isinstance(want, tuple) or not isinstance(want, np.ndarray):
        return None
    for i, a in enumerate(args):
        if isinstance(a, np.ndarray) and a.shape == want.shape and a.dtype == want.dtype:
            return args, kwargs, i, want
    return None


@pytest.mark.parametrize("name", sorted(n for n in CALLS if hasattr(P, n)))
def test_every_listed_call_over_its_own_input(name):
    found = _aliasable(name)
    if found is None:
        pytest.skip(f"{name}: no input has the result's shape and dtype")
    args, kwargs, i, want = found
    args = list(args)
    args[i] = target = args[i].copy()
    assert getattr(P, name)(*args, **kwargs, out=target) is target
    np.testing.assert_array_equal(target, want, err_msg=name)
