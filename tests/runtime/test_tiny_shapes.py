"""Default schedules leave work of a few microseconds serial and cut larger work into tasks of
``MIN_TASK_ELEMS`` elements (never one tiny task per row)."""

from __future__ import annotations

import numpy as np
import pytest

import pypto.ops as P
from pypto.compiler import targets
from pypto.compiler.lower import build
from pypto.schedule.defaults import MIN_TASK_ELEMS, default_schedule


def _directives(op, dtypes, dims):
    return [(d.op, dict(d.args)) for d in default_schedule(build(op, dtypes, {}), dims,
                                                           targets.current()).directives]


@pytest.mark.parametrize("r, c", [(4, 4), (128, 128), (64, 256), (100, 300)])
def test_small_2d_work_is_not_parallel(r, c):
    assert r * c < 2 * MIN_TASK_ELEMS
    ds = _directives(P.add, ("float32", "float32"), {"R": r, "C": c})
    assert not any(op == "parallel" for op, _ in ds), ds


@pytest.mark.parametrize("r, c", [(1024, 64), (1024, 1024), (64, 1 << 15)])
def test_large_2d_work_runs_in_tasks_of_min_task_elems(r, c):
    ds = _directives(P.add, ("float32", "float32"), {"R": r, "C": c})
    assert any(op == "parallel" for op, _ in ds), ds
    split = [a for op, a in ds if op == "split" and a.get("var") == "r"]
    rows_per_task = split[0]["factor"] if split else 1
    assert rows_per_task * c >= MIN_TASK_ELEMS


def test_tiny_shapes_still_compute_the_right_values():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    np.testing.assert_array_equal(P.add(x, x), 2 * x)
    y = np.random.default_rng(0).uniform(-1, 1, (256, 128)).astype(np.float32)
    np.testing.assert_array_equal(P.add(y, y), y + y)
