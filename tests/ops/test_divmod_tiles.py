"""fmod, remainder and floor_divide in float32: the direct path and the recomputed tiles.

float32 elements with |a / b| < 2**29 take one float64 division; the others ("hard") are
recomputed by an update of the output in tiles of ``HARD_TILE`` elements of a row, only in the
tiles that hold one. These tests place hard elements where that tiling can go wrong (first and
last element of a row, both sides of a tile edge, the shifted last tile of a row whose length is
not a multiple of the tile, rows shorter than a tile, a long row split into parallel runs of
tiles) and compare every element with NumPy, signs of zero included.
"""

from __future__ import annotations

import numpy as np
import pytest
from helpers import assert_template_knobs_exact

import pypto.ops as P
from pypto.ops.arith import DIRECT_QUOTIENT, HARD_TILE

RNG = np.random.default_rng(2024)
OPS = ("fmod", "remainder", "floor_divide")


def _check(a, b):
    for name in OPS:
        got = getattr(P, name)(a, b)
        with np.errstate(all="ignore"):
            want = getattr(np, name)(a, b)
        assert got.dtype == np.float32
        np.testing.assert_array_equal(got, want, err_msg=f"{name} {a.shape}")
        num = ~np.isnan(want)                 # a NaN's sign means nothing (NumPy's is -NaN)
        np.testing.assert_array_equal(np.signbit(got[num]), np.signbit(want[num]), err_msg=name)


def _easy(shape):
    a = RNG.uniform(-40, 40, shape).astype(np.float32)
    b = (RNG.uniform(0.25, 3, shape) * RNG.choice([-1, 1], shape)).astype(np.float32)
    return a, b


def _make_hard(a, b, where):
    """Huge quotients at ``where``: their remainders depend on all the bits of a and b."""
    a[where] = (RNG.uniform(1, 2, a[where].shape) * 2.0 ** RNG.integers(40, 127, a[where].shape)
                * RNG.choice([-1, 1], a[where].shape)).astype(np.float32)
    b[where] = RNG.uniform(0.3, 7, b[where].shape).astype(np.float32)


@pytest.mark.parametrize("shape", [(5, 3), (4, HARD_TILE - 1), (3, HARD_TILE), (3, HARD_TILE + 1),
                                   (17, 200), (40, 2 * HARD_TILE), (1, 3 * 16384 + 77)])
def test_hard_elements_at_every_tile_edge(shape):
    a, b = _easy(shape)
    cols = shape[1]
    picks = {0, cols - 1, min(HARD_TILE - 1, cols - 1), min(HARD_TILE, cols - 1),
             cols // 2, max(cols - HARD_TILE, 0), max(cols - HARD_TILE - 1, 0)}
    if cols > 16384:
        picks |= {16383, 16384, 2 * 16384 + 5}     # the edges of parallel runs of tiles
    rows = sorted({0, shape[0] - 1, shape[0] // 2})
    for r in rows:
        _make_hard(a[r], b[r], np.array(sorted(picks)))
    _check(a, b)


def test_direct_path_up_to_its_bound_and_hard_elements_just_past_it():
    """Quotients just below 2**29 (the direct path's proof bound) and at or above it."""
    n = 4096
    b = (RNG.uniform(1, 2, n) * 2.0 ** RNG.integers(-140, 90, n)).astype(np.float32)
    q = np.concatenate([RNG.uniform(2.0 ** 27, DIRECT_QUOTIENT, n // 2),
                        RNG.uniform(DIRECT_QUOTIENT, 2.0 ** 31, n // 2)])
    a = (b.astype(np.float64) * q).astype(np.float32)
    a[::3] = np.nextafter(a[::3], np.float32(np.inf))       # not multiples of b
    a *= RNG.choice([-1, 1], n).astype(np.float32)
    _check(a.reshape(64, 64), b.reshape(64, 64))


def test_special_values_in_easy_and_hard_tiles():
    grid = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.5, -7.0, 1e-45, 3e38, -2.0 ** 100],
                    np.float32)
    a, b = _easy((8, 3 * HARD_TILE))
    a[0, :grid.size ** 2] = np.repeat(grid, grid.size)
    b[0, :grid.size ** 2] = np.tile(grid, grid.size)
    a[3, :grid.size] = grid                                 # a tile with no hard element
    b[3, :grid.size] = 2.0
    _check(a, b)


def test_every_element_hard_and_broadcast_divisor():
    a, _ = _easy((33, 150))
    _make_hard(a, a.copy(), np.s_[:])
    _check(a, np.float32(0.7) * np.ones(150, np.float32))   # b broadcast along rows (stride 0)


@pytest.mark.parametrize("dims", [{"R": 1, "C": 70000}, {"R": 40, "C": 2000}])
def test_every_template_knob_value_is_exact(dims):
    """The tuner's plan for these ops is their template (its knob sets the update's tasks)."""
    a, b = _easy((dims["R"], dims["C"]))
    _make_hard(a, b, (np.array([0, dims["R"] - 1]), np.array([3, dims["C"] - 1])))
    assert_template_knobs_exact(OPS, "float32", a, b, dims)
