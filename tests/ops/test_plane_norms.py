"""group_norm and instance_norm's default schedule (statistics read with vectors of float64 lane
partials, one task per group): values against float64 NumPy written here, at plane sizes that
are a multiple of the partials' width, not one, and too short for them (the generic default);
and the plan."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import assert_close, rand

import pypto.ops as P
from pypto.compiler import targets
from pypto.compiler.lower import build
from pypto.schedule.defaults import default_schedule


def _norm(x, groups, w, b, eps=1e-5):
    n, c = x.shape[:2]
    g = x.astype(np.float64).reshape(n, groups, -1)
    mu = g.mean(-1, keepdims=True)
    var = ((g - mu) ** 2).mean(-1, keepdims=True)
    y = ((g - mu) / np.sqrt(var + eps)).reshape(x.shape)
    shape = (1, c) + (1,) * (x.ndim - 2)
    return y * w.reshape(shape) + b.reshape(shape)


@pytest.mark.parametrize("shape, groups", [((3, 8, 16, 16), 4), ((2, 6, 7, 9), 3),
                                           ((1, 4, 5), 2), ((5, 12, 33, 1), 12)])
@pytest.mark.parametrize("dt", ["float32", "float64"])
def test_group_and_instance_norm(shape, groups, dt):
    x = rand(shape, dt, 1, -3, 5)      # an offset mean: a one-pass variance would lose digits
    w, b = rand(shape[1:2], dt, 2), rand(shape[1:2], dt, 3)
    assert_close(P.group_norm(x, groups, w, b), _norm(x, groups, w, b).astype(dt), dt)
    assert_close(P.instance_norm(x, weight=w, bias=b), _norm(x, shape[1], w, b).astype(dt), dt)


def test_plan_vectorizes_the_statistics():
    built = build(P.group_norm, ("float32",) * 3, {"eps": 1e-5})
    ds = default_schedule(built, {"N": 32, "G": 8, "CG": 8, "S": 3136}, targets.host()).directives
    parts = {d.get("intm") for d in ds if d.op == "rfactor"}
    assert parts == {"mean_part", "dev_part"}
    assert any(d.op == "vectorize" and d.func == "mean_part" and d.stage == 1 for d in ds)
    assert any(d.op == "parallel" and d.func == "out" and d.get("var") == "grp" for d in ds)
