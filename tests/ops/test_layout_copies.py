"""Layout copies at the forms their default schedules take apart: tile and roll as block copies
(tile's one over every copy, roll's body and its wrap-around), the unit-stride specialization of copies along a middle
axis with I = 1 (and the general branch, for arrays whose middle axis is not unit-stride), rows
in parallel tasks of many rows. NumPy is the reference throughout."""

from __future__ import annotations

import numpy as np
import pytest

import pypto
from pypto.compiler.jit import get_kernel
from pypto.compiler.lower import build
from pypto.errors import ParamError
from pypto.ops import get_op
from pypto.runtime import dense
from pypto.schedule.apply import apply_schedule
from pypto.schedule.defaults import default_schedule
from pypto.schedule.directives import Directive
from pypto.schedule.schedule import Schedule
from pypto.compiler import targets

DTYPES = ["float32", "float64", "int32", "int64", "bool"]
# (O, A, I): I = 1 with a middle axis long enough to vectorize (the specialized form), a row
# count that does not divide into the parallel tasks, I of a vector or more, one long row.
SHAPES = [(1001, 67, 1), (40, 1200, 1), (7, 13, 9), (3, 5, 40000), (1, 70001, 1)]


def _data(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    if dtype == "bool":
        return rng.random(shape) < 0.5
    return (rng.random(shape) * 1000 - 500).astype(dtype)


def _strided(shape, dtype):
    """An [O, A, 1] array whose middle axis has stride 2 elements (every other column of a
    dense [O, 2A] array): Halide gets it as it is, so the kernel's general branch reads it."""
    o, a, _ = shape
    base = _data((o, 2 * a), dtype, seed=1)
    item = base.itemsize
    v = np.lib.stride_tricks.as_strided(base, (o, a, 1), (base.strides[0], 2 * item, item))
    assert dense(v) is v
    return v


@pytest.mark.parametrize("shape", SHAPES)
def test_tile_kernel_every_copy_count(shape):
    tile = get_op("tile")
    x = _data(shape, "float32")
    for reps in (1, 2, 3, 8, 9, 17):
        np.testing.assert_array_equal(tile.kernel(x, reps=reps), np.tile(x, (1, reps, 1)))


@pytest.mark.parametrize("shape,reps", [((1001, 67, 1), 3), ((40, 1200, 1), 2), ((7, 13, 9), 5),
                                        ((1, 70001, 1), 2), ((5, 3, 1), 40),
                                        ((300, 1, 5), 40), ((300, 2, 6), 9)])
def test_tile_kernel_writes_every_element_of_a_poisoned_output(shape, reps):
    """Tile's one block copy over (copy, run) fills the whole output: nothing of a NaN-filled
    ``out=`` is left, in the vectorized race-free form (I = 1, A of a vector or more), with I
    in narrower vectors (4 <= I < 8 and a short run), and the others."""
    x = _data(shape, "float32")
    out = np.full((shape[0], shape[1] * reps, shape[2]), np.nan, np.float32)
    get_op("tile").kernel(x, reps=reps, out=out)
    np.testing.assert_array_equal(out, np.tile(x, (1, reps, 1)))


@pytest.mark.parametrize("dtype", ["float32", "int64", "bool"])
def test_roll_kernel_with_i_narrower_than_a_vector(dtype):
    """Roll's copies with 4 <= I < 8: runs shorter than a vector (the wrap-around of a small
    shift) take I in narrower vectors; every shift against NumPy, into a poisoned ``out=``."""
    x = _data((300, 11, 5), dtype)
    for shift in (0, 1, 3, 8, 10):
        out = np.ones_like(x) if dtype == "bool" else np.full_like(x, 7)
        out[...] = ~x if dtype == "bool" else x + 1
        get_op("roll").kernel(x, shift=shift, out=out)
        np.testing.assert_array_equal(out, np.roll(x, shift, axis=1))


def test_tile_default_copies_each_row_in_one_pass():
    """One update writes all copies of a row before the next row (one pass over the output; a
    pass per copy read x again each time), its run vectorized with the stores declared apart."""
    built, sched = _default("tile", {"O": 64, "A": 512, "I": 1, "T": 1536}, {"reps": 3})
    assert len(built.funcs["out"].updates) == 1
    assert len(built.funcs["out"].updates[0]) == 2          # the run, then the copies
    ops_ = [d.op for d in sched.directives if d.stage == 1]
    assert "allow_race_conditions" in ops_ and "vectorize" in ops_
    _, wide = _default("tile", {"O": 64, "A": 512, "I": 16, "T": 1536}, {"reps": 3})
    assert not any(d.op == "allow_race_conditions" for d in wide.directives)


@pytest.mark.parametrize("shape", SHAPES)
def test_roll_kernel_every_kind_of_shift(shape):
    roll = get_op("roll")
    x = _data(shape, "float32")
    a = shape[1]
    for shift in sorted({0, 1, 7, 8, 9, a // 2, a - 1}):
        if shift < a:
            np.testing.assert_array_equal(roll.kernel(x, shift=shift), np.roll(x, shift, axis=1))


@pytest.mark.parametrize("dtype", DTYPES)
def test_tile_and_roll_kernels_every_dtype(dtype):
    x = _data((1001, 67, 1), dtype)
    np.testing.assert_array_equal(get_op("tile").kernel(x, reps=3), np.tile(x, (1, 3, 1)))
    np.testing.assert_array_equal(get_op("roll").kernel(x, shift=30), np.roll(x, 30, axis=1))


def test_roll_kernel_refuses_a_shift_outside_the_axis():
    roll = get_op("roll")
    x = _data((4, 10, 1), "float32")
    with pytest.raises(ParamError, match=r"'shift' must be in \[0, 10\)"):
        roll.kernel(x, shift=10)
    with pytest.raises(ParamError, match="shift"):
        roll.kernel(x, shift=25)
    # the public call reduces any shift modulo the axis, as np.roll does
    np.testing.assert_array_equal(pypto.ops.roll(x[:, :, 0], 25, axis=1),
                                  np.roll(x[:, :, 0], 25, axis=1))


@pytest.mark.parametrize("dtype", ["float32", "int64", "bool"])
def test_copies_of_a_middle_axis_with_any_stride(dtype):
    """The same kernels (I = 1, specialized for unit stride) on an input whose middle axis has
    stride 2: the general branch must give NumPy's result too."""
    shape = (300, 96, 1)
    v = _strided(shape, dtype)
    ops = pypto.ops
    np.testing.assert_array_equal(get_op("split").kernel(v, start=5, length=80), v[:, 5:85])
    np.testing.assert_array_equal(get_op("flip").kernel(v), v[:, ::-1])
    np.testing.assert_array_equal(get_op("repeat").kernel(v, repeats=3), np.repeat(v, 3, axis=1))
    np.testing.assert_array_equal(get_op("tile").kernel(v, reps=2), np.tile(v, (1, 2, 1)))
    np.testing.assert_array_equal(get_op("roll").kernel(v, shift=9), np.roll(v, 9, axis=1))
    if dtype != "bool":
        got = get_op("pad").kernel(v, before=3, after=4, mode="reflect")
        np.testing.assert_array_equal(got, np.pad(v, ((0, 0), (3, 4), (0, 0)), mode="reflect"))
    # and the unit-stride input of the same shape, for the specialized branch
    x = np.ascontiguousarray(v)
    np.testing.assert_array_equal(get_op("roll").kernel(x, shift=9), np.roll(x, 9, axis=1))
    np.testing.assert_array_equal(ops.split(x, [5, 85], axis=1, out=tuple(
        np.empty(s.shape, x.dtype) for s in np.split(x, [5, 85], axis=1)))[1], x[:, 5:85])


def _default(name, dims, params):
    op = get_op(name)
    built = build(op, tuple(op.dtypes[0]), op.resolve_params(params))
    return built, default_schedule(built, dims, targets.host())


@pytest.mark.parametrize("name,dims,params", [
    ("split", {"O": 64, "A": 512, "I": 1, "L": 100}, {"start": 3, "length": 100}),
    ("flip", {"O": 64, "A": 512, "I": 1}, {}),
    ("tile", {"O": 64, "A": 512, "I": 1, "T": 1024}, {"reps": 2}),
    ("roll", {"O": 64, "A": 512, "I": 1}, {"shift": 20}),
])
def test_default_schedules_specialize_unit_stride_only_where_i_is_1(name, dims, params):
    _, sched = _default(name, dims, params)
    assert any(d.op == "specialize" and d.get("unit_stride") == 1 for d in sched.directives)
    _, wide = _default(name, {**dims, "I": 16}, params)
    assert not any(d.op == "specialize" for d in wide.directives)


def test_roll_wrap_around_shorter_than_a_vector_runs_as_it_is():
    built, sched = _default("roll", {"O": 64, "A": 512, "I": 1}, {"shift": 3})
    wrap = [d for d in sched.directives if d.stage == 2]
    assert [d.op for d in wrap if d.op in ("vectorize", "specialize")] == []
    assert any(d.op in ("serial", "parallel") for d in wrap)


def test_rows_run_in_tasks_of_many_rows():
    _, sched = _default("concat", {"O": 2048, "A": 1024, "B": 1024, "S": 2048}, {})
    par = [d for d in sched.directives if d.op == "parallel"]
    assert [d.stage for d in par] == [1, 2] and all(d.get("factor") == 16 for d in par)
    a, b = _data((1001, 1024), "float32"), _data((1001, 1024), "float32", seed=2)
    np.testing.assert_array_equal(get_op("concat").kernel(a, b), np.concatenate([a, b], 1))


def test_specialize_directive_names_the_buffers_it_conditions_on():
    built, sched = _default("split", {"O": 64, "A": 512, "I": 1, "L": 100},
                            {"start": 3, "length": 100})
    lines = apply_schedule(built, sched)
    assert lines[-1] == ("out.specialize((out.output_buffer().dim(1).stride() == 1) & "
                         "(x.dim(1).stride() == 1))")
    # a dim that no buffer of the stage has: nothing to specialize, nothing applied
    built, _ = _default("split", {"O": 64, "A": 512, "I": 1, "L": 100},
                        {"start": 3, "length": 100})
    none = Schedule(op="split", directives=(Directive.make("specialize", "out", unit_stride=5),))
    assert apply_schedule(built, none) == []


def test_specialized_kernel_is_the_one_a_call_gets():
    op = get_op("tile")
    k = get_kernel(op, ("float32",), {"reps": 2}, {"O": 64, "A": 512, "I": 1, "T": 1024})
    assert sum("specialize" in line for line in k.python) == 1     # tile's one block copy
