"""linear's blocked default schedule (products of at least SERIAL_MACS multiply-adds): values
against float64 NumPy at sizes that take each path (sums in registers when I fits one k block,
a k-blocked tile buffer beyond), with partial tiles in every dim, each float dtype, and tuner
knob points; and the plan itself: the transposed weight panel ``wt`` is gathered a vector of
weight rows at a time over all of I, as the sums' placement follows matmul's."""

from __future__ import annotations

import numpy as np
import pytest

import pypto
import pypto.ops as P
from helpers import assert_close, rand


def lin_want(x, w, bias):
    return x.astype(np.float64) @ w.astype(np.float64).T + bias.astype(np.float64)


def tol(k, dtype):
    if dtype == "float16":
        return dict(rtol=2e-3, atol=2e-3 * max(1.0, np.sqrt(k)))
    if dtype == "float32":
        return dict(rtol=1e-4, atol=1e-5 * max(1.0, k ** 0.5 * 4))
    return dict(rtol=1e-10, atol=1e-10 * k)


#: (R, I, O): I <= 512 (sums in registers) and I > 512 (tile buffer); O under one vector, between
#: one and three vectors, not a multiple of the 24-column block; I under a vector and odd.
SHAPES = [(256, 512, 512), (130, 700, 70), (64, 1031, 130), (1000, 3, 301), (33, 257, 13),
          (5, 2000, 40), (300, 96, 9)]


@pytest.mark.parametrize("r,i,o", SHAPES)
def test_linear_blocked_float32(r, i, o):
    x, w, bias = rand((r, i), seed=1), rand((o, i), seed=2), rand((o,), seed=3)
    got = P.linear(x, w, bias)
    assert got.shape == (r, o) and got.dtype == np.float32
    assert_close(got, lin_want(x, w, bias).astype(np.float32), **tol(i, "float32"),
                 err_msg=f"{(r, i, o)}")


@pytest.mark.parametrize("dtype", ["float64", "float16"])
@pytest.mark.parametrize("r,i,o", [(130, 700, 70), (200, 96, 131)])
def test_linear_blocked_dtypes(dtype, r, i, o):
    x, w, bias = rand((r, i), dtype, 4), rand((o, i), dtype, 5), rand((o,), dtype, 6)
    got = P.linear(x, w, bias)
    assert got.dtype == np.dtype(dtype)
    assert_close(got, lin_want(x, w, bias).astype(dtype), **tol(i, dtype))


def test_linear_weight_with_padded_rows():
    # The weight's rows a stride apart that is not their length (a slice of a wider matrix).
    x = rand((150, 600), seed=7)
    w = rand((90, 640), seed=8)[:, :600]
    bias = rand((90,), seed=9)
    assert_close(P.linear(x, w, bias), lin_want(x, w, bias).astype(np.float32),
                 **tol(600, "float32"))


@pytest.mark.parametrize("point", [{"acc": "register"}, {"acc": "tile"},
                                   {"acc": "register", "ry": 6, "reg_vectors": 2, "ty": 32,
                                    "ku": 1},
                                   {"acc": "tile", "reg_vectors": 4, "ry": 3, "kc": 64, "ku": 8},
                                   {"reg_vectors": 1, "ty": 1024}])
def test_linear_knob_points(point):
    # The template gives a correct schedule off its defaults too (the tuner's space).
    from pypto.compiler import targets
    from pypto.compiler.jit import compile_built
    from pypto.compiler.lower import build
    from pypto.runtime import run_kernel
    from pypto.schedule.defaults import template_knobs, template_schedule, vector_lanes
    from pypto.schedule.schedule import Schedule

    op = pypto.get_op("linear")
    knobs = template_knobs("linear")
    assert "stage" not in knobs and knobs["acc"][0] == "auto"
    for key, value in point.items():
        assert value in knobs[key], (key, value)
    lanes = vector_lanes(targets.host(), "float32")
    for seed, (r, i, o) in enumerate([(130, 300, 70), (70, 530, 61)]):
        dims = {"R": r, "I": i, "O": o}
        built = build(op, ("float32",) * 3, {})   # a schedule is applied to a fresh pipeline
        x, w, bias = rand((r, i), seed=seed), rand((o, i), seed=seed + 10), rand((o,), seed=2)
        sched = Schedule(op="linear", directives=tuple(
            template_schedule(built, dims, lanes, point)))
        k = compile_built(built, sched, targets.host(), source="test point")
        out = np.full((r, o), np.nan, np.float32)   # poisoned
        run_kernel(k, op, [x, w, bias], dims, [out])
        assert_close(out, lin_want(x, w, bias).astype(np.float32), **tol(i, "float32"),
                     err_msg=f"{dims} {point}")


def _default(dims):
    from pypto.compiler import targets
    from pypto.compiler.lower import build
    from pypto.schedule.defaults import default_schedule

    built = build(pypto.get_op("linear"), ("float32",) * 3, {})
    return default_schedule(built, dims, targets.host()).directives


def test_linear_default_plan():
    from pypto.compiler import targets
    from pypto.schedule.defaults import vector_lanes

    lanes = vector_lanes(targets.host(), "float32")
    # The sums: a k-blocked tile buffer beyond one k block, else registers; on AVX-512 (16
    # float32 lanes) registers at any k, as matmul's wide register block.
    big = "mio" if lanes >= 16 else "tile"
    for (r, i, o), at in (((1024, 1024, 1024), big), ((256, 512, 512), "mio")):
        ds = _default({"R": r, "I": i, "O": o})
        assert ("compute_at", "acc", "out", at) in [(d.op, d.func, d.get("at"), d.get("var"))
                                                    for d in ds], (r, i, o)
        # The weight panel: per tile, a vector of weight rows at a time, over all of I
        # (the I loop between the two loops over O).
        wt = [d for d in ds if d.func == "wt"]
        assert [d.op for d in wt] == ["compute_at", "split", "reorder", "vectorize"], wt
        assert wt[1].get("factor") == lanes
        assert list(wt[2].get("vars")) == ["ni", "j", "no"]
        assert wt[3].get("var") == "ni"
