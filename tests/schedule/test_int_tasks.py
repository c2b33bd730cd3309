"""The integer bitwise and shift ops run in parallel tasks sized in bytes, not in elements: 1-byte
types take the bool ops' schedule (tasks of BYTE_TASK bytes, a 4x unrolled vector loop, guarded
tails), 2-byte types tasks of 2 x MIN_TASK_ELEMS elements (64 KiB), 4-byte and wider types keep
MIN_TASK_ELEMS. Results across several tasks, with tails, in place too, still match NumPy."""

import halide as hl
import numpy as np
import pytest

import pypto
from pypto.compiler.lower import build
from pypto.ops import get_op
from pypto.schedule.defaults import MIN_TASK_ELEMS, default_schedule
from pypto.schedule.templates.logical import BYTE_TASK

HOST = hl.get_host_target()


def _directives(name, dtypes, dims):
    built = build(get_op(name), dtypes, {})
    return default_schedule(built, dims, HOST).directives


def _split_factor(ds, var):
    (f,) = [d.get("factor") for d in ds if d.op == "split" and d.get("var") == var]
    return f


@pytest.mark.parametrize("dtype", ["int8", "uint8", "bool"])
def test_one_byte_bitwise_not_takes_the_bool_schedule(dtype):
    ds = _directives("bitwise_not", [dtype], {"N": 1 << 22})
    assert _split_factor(ds, "n") == BYTE_TASK
    ops = [(d.op, d.get("var")) for d in ds]
    assert ("parallel", "no") in ops and ("unroll", "nik") in ops
    assert all(d.get("tail") != "shift_inwards" for d in ds)
    # under two tasks' worth: serial
    ds = _directives("bitwise_not", [dtype], {"N": BYTE_TASK})
    assert "parallel" not in [d.op for d in ds]


@pytest.mark.parametrize("dtype, per_task", [("int16", 2), ("uint16", 2), ("int32", 1),
                                             ("int64", 1)])
def test_wider_bitwise_not_blocks(dtype, per_task):
    ds = _directives("bitwise_not", [dtype], {"N": 1 << 22})
    assert _split_factor(ds, "n") == per_task * MIN_TASK_ELEMS
    assert ("parallel", "no") in [(d.op, d.get("var")) for d in ds]


@pytest.mark.parametrize("name", ["bitwise_and", "bitwise_or", "bitwise_xor", "left_shift",
                                  "right_shift"])
def test_rows_per_task_follow_the_bytes(name):
    ds = _directives(name, ["int8", "int8"], {"R": 2048, "C": 2048})
    assert _split_factor(ds, "r") == BYTE_TASK // 2048
    assert ("unroll", "ck") in [(d.op, d.get("var")) for d in ds]
    ds = _directives(name, ["int16", "int16"], {"R": 2048, "C": 2048})
    assert _split_factor(ds, "r") == 2 * MIN_TASK_ELEMS // 2048
    ds = _directives(name, ["int32", "int32"], {"R": 2048, "C": 2048})
    assert _split_factor(ds, "r") == MIN_TASK_ELEMS // 2048
    # a short call of one long row: chunks of the row
    ds = _directives(name, ["int8", "int8"], {"R": 1, "C": 1 << 20})
    assert _split_factor(ds, "c") == BYTE_TASK
    ds = _directives(name, ["int16", "int16"], {"R": 1, "C": 1 << 20})
    assert _split_factor(ds, "c") == 2 * MIN_TASK_ELEMS


def test_float_ops_keep_their_tasks():
    ds = _directives("add", ["float32", "float32"], {"R": 2048, "C": 2048})
    assert _split_factor(ds, "r") == MIN_TASK_ELEMS // 2048
    ds = _directives("ceil", ["float32"], {"N": 1 << 22})
    assert _split_factor(ds, "n") == MIN_TASK_ELEMS


def test_results_across_tasks_and_a_tail_match_numpy():
    rng = np.random.default_rng(7)
    n = 3 * BYTE_TASK + 37          # three int8 tasks and a tail
    x = rng.integers(-128, 128, size=n, dtype=np.int8)
    np.testing.assert_array_equal(pypto.ops.bitwise_not(x), np.bitwise_not(x))
    want = np.bitwise_not(x)
    assert pypto.ops.bitwise_not(x, out=x) is x      # written over its own input
    np.testing.assert_array_equal(x, want)
    b = rng.random(n) < 0.5
    np.testing.assert_array_equal(pypto.ops.bitwise_not(b), np.logical_not(b))
    u = rng.integers(0, 1 << 16, size=n // 2 + 5, dtype=np.uint16)
    np.testing.assert_array_equal(pypto.ops.bitwise_not(u), np.bitwise_not(u))
    # one long row in chunks, then rows in tasks of several rows with a partial last task
    a = rng.integers(-128, 128, size=(1, n), dtype=np.int8)
    c = rng.integers(-128, 128, size=(1, n), dtype=np.int8)
    np.testing.assert_array_equal(pypto.ops.bitwise_xor(a, c), np.bitwise_xor(a, c))
    want = np.bitwise_xor(a, c)
    pypto.ops.bitwise_xor(a, c, out=a)
    np.testing.assert_array_equal(a, want)
    a = rng.integers(-128, 128, size=(600, 1000), dtype=np.int8)
    s = rng.integers(0, 8, size=(600, 1000), dtype=np.int8)
    np.testing.assert_array_equal(pypto.ops.left_shift(a, s), np.left_shift(a, s))
    np.testing.assert_array_equal(pypto.ops.right_shift(a, s), np.right_shift(a, s))
    np.testing.assert_array_equal(pypto.ops.bitwise_and(a, s), np.bitwise_and(a, s))
