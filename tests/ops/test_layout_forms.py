"""Layout ops beyond their values: NumPy's views where NumPy returns views, ``out=`` written by
the kernel in place, the kernel forms the public calls choose, and the kernels' index arithmetic
(tile and roll find source indices without a run-time modulo) at every boundary.

References are NumPy's own calls (np.tile, np.roll, np.split, np.flip, np.diagonal, np.diag).
"""

from __future__ import annotations

import numpy as np
import pytest
from helpers import assert_same, rand

import pypto
import pypto.ops as P
from pypto import runtime
from pypto.runtime import observe


# -- views, as NumPy returns them ----------------------------------------------------------------

def test_split_pieces_are_views_written_through_like_numpy():
    x = rand((4, 9), "int32")
    with observe() as calls:
        pieces = P.split(x, [2, 2, 7], axis=1)
    assert not calls                                   # no kernel ran
    want = np.split(x, [2, 2, 7], axis=1)
    assert len(pieces) == len(want) == 4
    for got, w in zip(pieces, want):
        assert_same(got, w)
        assert got.base is not None and (got.size == 0 or np.shares_memory(got, x))
    pieces[2][1, 0] = 1234                             # a view writes into its input, as NumPy's
    assert x[1, 2] == 1234


@pytest.mark.parametrize("axis", [None, 0, 1, (0, 2), -1])
def test_flip_is_a_view_like_numpy(axis):
    x = rand((3, 4, 5))
    got = P.flip(x, axis)
    assert_same(got, np.flip(x, axis))
    assert np.shares_memory(got, x) and got.flags.writeable
    got[0, 0, 0] = 7.0
    assert np.flip(x, axis)[0, 0, 0] == 7.0


def test_flip_of_a_zero_d_array_is_an_array():
    x = np.array(2.5, np.float32)
    got = P.flip(x)
    assert isinstance(got, np.ndarray) and got.shape == () and got == 2.5


@pytest.mark.parametrize("offset, a1, a2", [(0, 0, 1), (2, 1, 2), (-1, 2, 0)])
def test_diagonal_is_numpys_read_only_view(offset, a1, a2):
    x = rand((3, 5, 6), "float64")
    got = P.diagonal(x, offset, a1, a2)
    assert_same(got, np.diagonal(x, offset, a1, a2))
    assert np.shares_memory(got, x) and not got.flags.writeable
    with pytest.raises(ValueError):
        got[0] = 1.0
    m = rand((4, 6), "int64")
    d = P.diag(m, -1)
    assert_same(d, np.diag(m, -1))
    assert np.shares_memory(d, m) and not d.flags.writeable


def test_new_arrays_where_numpy_makes_new_arrays():
    x = rand((4, 6))
    for got in (P.roll(x, 2, axis=1), P.roll(x, 0), P.roll(x, 6, axis=1), P.tile(x, (1, 1)),
                P.concat([x]), P.diag(x[0])):
        assert not np.shares_memory(got, x) and got.flags.c_contiguous


def test_a_traced_program_computes_the_views():
    x = rand((4, 6))
    prog = pypto.jit(lambda x: (P.split(x, 2, axis=1)[1], P.flip(x, 0), P.diagonal(x, 1)))
    got = prog(x)
    assert_same(got[0], x[:, 3:])
    assert_same(got[1], x[::-1])
    assert_same(got[2], np.diagonal(x, 1))
    for g in got:
        assert not np.shares_memory(g, x)


# -- out= is written by the kernel, in place -------------------------------------------------------

def _in_place(fn, want):
    """Calls ``fn(out)`` twice; each call must write ``out`` without a copy and return it."""
    outs = tuple(np.full(w.shape, 7, w.dtype) for w in want)
    out = outs[0] if len(outs) == 1 else outs
    for _ in range(2):
        before = dict(runtime.out_stats)
        with observe() as calls:
            assert fn(out) is out
        assert calls, "no kernel ran"
        assert runtime.out_stats["copied"] == before["copied"]
        assert runtime.out_stats["in_place"] == before["in_place"] + len(outs)
        for o, w in zip(outs, want):
            assert_same(o, w)


def test_out_is_written_in_place_by_the_kernels():
    x = rand((4, 6, 5), "int32")
    m = x[0].copy()
    cases = [
        (lambda out: P.split(x, [1, 4], axis=1, out=out), np.split(x, [1, 4], axis=1)),
        (lambda out: P.split(x, 2, axis=0, out=out), np.split(x, 2, axis=0)),
        (lambda out: P.flip(x, (0, 2), out=out), [np.flip(x, (0, 2))]),
        (lambda out: P.flip(x, 1, out=out), [np.flip(x, 1)]),
        (lambda out: P.diagonal(x, 1, 1, 2, out=out), [np.diagonal(x, 1, 1, 2)]),
        (lambda out: P.diagonal(x, -1, 0, 2, out=out), [np.diagonal(x, -1, 0, 2)]),
        (lambda out: P.diag(m, 2, out=out), [np.diag(m, 2)]),
        (lambda out: P.tile(x, (2, 1, 3), out=out), [np.tile(x, (2, 1, 3))]),
        (lambda out: P.tile(x, 2, out=out), [np.tile(x, 2)]),
        (lambda out: P.roll(x, (1, -2), axis=(0, 2), out=out), [np.roll(x, (1, -2), (0, 2))]),
        (lambda out: P.roll(x, 7, out=out), [np.roll(x, 7)]),
        (lambda out: P.roll(x, 6, axis=1, out=out), [np.roll(x, 6, 1)]),
    ]
    for fn, want in cases:
        _in_place(fn, want)


def test_split_out_with_an_empty_piece():
    x = rand((3, 5))
    want = np.split(x, [2, 2], axis=1)
    outs = tuple(np.empty(w.shape, w.dtype) for w in want)
    assert P.split(x, [2, 2], axis=1, out=outs) is outs
    for o, w in zip(outs, want):
        assert_same(o, w)


# -- the kernel forms the public calls choose ------------------------------------------------------

def test_tile_and_roll_run_with_a_long_innermost_axis():
    """tile runs as [O, 1, block]; roll by s moves runs of I * gcd(A, s) elements, innermost."""
    x = rand((6, 40))
    with observe() as calls:
        assert_same(P.tile(x, (1, 3)), np.tile(x, (1, 3)))
        assert_same(P.roll(x, 4, axis=1), np.roll(x, 4, axis=1))
        assert_same(P.roll(x, 2, axis=0), np.roll(x, 2, axis=0))
        assert_same(P.roll(x, 0), np.roll(x, 0))
    forms = [(op.name, (d["O"], d["A"], d["I"]), p) for op, _, p, d, _ in calls]
    assert forms == [("tile", (6, 1, 40), {"reps": 3}), ("roll", (6, 10, 4), {"shift": 1}),
                     ("roll", (1, 3, 80), {"shift": 1}), ("roll", (1, 1, 240), {"shift": 0})]


@pytest.mark.parametrize("dtype", ["float32", "int64", "bool"])
def test_public_tile_and_roll_on_odd_and_strided_inputs(dtype):
    x = rand((5, 7, 3), dtype, seed=4)
    views = [x, x.transpose(2, 0, 1), x[:, ::2], x[1:, 2:5]]
    for v in views:
        for reps in ((2, 1, 3), (3,), (1, 1, 1, 2), (1, 1, 1)):
            assert_same(P.tile(v, reps), np.tile(v, reps))
        for shift, axis in ((1, 0), (-3, 1), (2, 2), (10, None), (0, None), ((1, 5), (0, 2))):
            assert_same(P.roll(v, shift, axis), np.roll(v, shift, axis))
    assert_same(P.tile(np.float32(3.0), ()), np.tile(np.float32(3.0), ()))
    assert_same(P.tile(np.array(3, np.int32), (2, 2)), np.tile(np.array(3, np.int32), (2, 2)))


# -- the kernels' index arithmetic -----------------------------------------------------------------

@pytest.mark.parametrize("reps", [1, 2, 3, 8, 9, 13])
@pytest.mark.parametrize("a, i", [(1, 1), (7, 1), (5, 3), (16, 1)])
def test_tile_kernel_every_copy_boundary(reps, a, i):
    """Up to 8 copies the kernel compares against the copy boundaries, above it takes t % A."""
    x = rand((3, a, i), "int32", seed=reps)
    assert_same(P.tile.kernel(x, reps=reps), np.tile(x, (1, reps, 1)))


@pytest.mark.parametrize("a, i", [(1, 1), (9, 1), (17, 2)])
def test_roll_kernel_every_shift(a, i):
    x = rand((2, a, i), "float64", seed=a)
    for shift in range(a):
        assert_same(P.roll.kernel(x, shift=shift), np.roll(x, shift, axis=1))
