"""fmod, remainder and floor_divide in float64: exact without a wider type.

float64 elements with |a / b| < 2**51 take the direct path (one division, two reduction steps
with split products); the others are recomputed in tiles of ``HARD_TILE`` elements by the
chunked method (51 quotient bits a step). Every element is compared with NumPy's (exact for
fmod; remainder and floor_divide follow its npy_divmod), signs of zero included, on the inputs
where an inexact step would show: huge quotients, subnormals, exact multiples and their
neighbours, quotients rounding up to an integer, and the edges of both paths and of the tiles.
"""

from __future__ import annotations

import numpy as np
import pytest
from helpers import assert_template_knobs_exact

import pypto.ops as P
from pypto.ops.arith import DIRECT_QUOTIENT64, HARD_TILE

RNG = np.random.default_rng(64)
OPS = ("fmod", "remainder", "floor_divide")
TINY = np.nextafter(0.0, 1.0)            # 2**-1074
BIG = np.finfo(np.float64).max


def _check(a, b, ops=OPS):
    for name in ops:
        got = getattr(P, name)(a, b)
        with np.errstate(all="ignore"):
            want = getattr(np, name)(a, b)
        assert got.dtype == np.float64 and got.shape == want.shape
        bad = ~((got == want) | (np.isnan(got) & np.isnan(want)))
        assert not bad.any(), (name, a[bad][:4], b[bad][:4], got[bad][:4], want[bad][:4])
        num = ~np.isnan(want)                 # a NaN's sign means nothing (NumPy's is -NaN)
        np.testing.assert_array_equal(np.signbit(got[num]), np.signbit(want[num]), err_msg=name)


def _full_mantissa(n):
    """Floats in [1, 2) with all 52 fraction bits random."""
    bits = RNG.integers(0, 2 ** 52, n, dtype=np.uint64) | np.uint64(0x3FF0000000000000)
    return bits.view(np.float64)


def _random(n, lo, hi):
    """Random signs, full mantissas and exponents in [lo, hi) (subnormal where below -1022)."""
    with np.errstate(over="ignore"):
        v = _full_mantissa(n) * np.ldexp(1.0, RNG.integers(lo, hi, n)) * RNG.choice([-1.0, 1.0], n)
    return np.where(np.isinf(v), np.copysign(BIG, v), v)


def test_named_hard_pairs():
    pairs = [(1e308, 3e-300), (BIG, TINY), (BIG, 3 * TINY), (-BIG, np.nextafter(TINY, 1)),
             (TINY, TINY), (5 * TINY, 2 * TINY), (1e-310, 3e-320), (2.2250738585072014e-308, TINY),
             (2.0 ** 60, 3.0), (2.0 ** 1023, 3.0), (BIG, BIG / 3), (BIG, BIG), (BIG, -BIG / 1e10),
             (1.0, 0.1), (-1.0, 0.1), (0.3, 0.1), (10.0, 0.1), (1e16, 0.1), (5.0, -3.0),
             (-5.0, 3.0), (-0.0, 2.0), (0.0, -2.0), (3.0, np.inf), (-3.0, np.inf),
             (3.0, -np.inf), (np.inf, 2.0), (np.nan, 2.0), (2.0, np.nan), (2.0, 0.0), (2.0, -0.0),
             (0.0, 0.0), (np.inf, np.inf), (1e-300, 1e300), (1e300, 1e-300)]
    a, b = (np.array(v) for v in zip(*pairs))
    _check(a, b)


@pytest.mark.parametrize("lo,hi", [(-1074, 1024), (-30, 30), (-1074, -1000), (900, 1024),
                                   (-1074, -950)])
def test_random_pairs_with_random_exponents(lo, hi):
    n = 200_000
    _check(_random(n, lo, hi), _random(n, lo, hi))


@pytest.mark.parametrize("qbits", [1, 20, 26, 27, 40, 50, 51, 52, 53, 60, 200])
def test_exact_multiples_and_their_neighbours(qbits):
    """a = q b exactly (q below 2**qbits, so the products need all of b's bits), and one ulp
    to either side: the division rounds to the integer q, or just past it."""
    n = 20_000
    b = _full_mantissa(n) * np.ldexp(1.0, RNG.integers(-1000, 700, n))
    if qbits <= 53:
        q = np.floor(RNG.uniform(0.5, 1.0, n) * 2.0 ** qbits)
        q = np.maximum(q, 1.0)
        # q b rounded, and exact where q and b's mantissa fit 53 bits together: keep those
        prod = q * b
        exact = np.isfinite(prod) & (np.fmod(prod, b) == 0)
    else:
        prod = b * np.ldexp(1.0, qbits - 1) * np.floor(RNG.uniform(2, 2 ** 20, n))
        exact = np.isfinite(prod)
    a = prod[exact]
    b = b[exact]
    for shifted in (a, np.nextafter(a, 0.0), np.nextafter(a, np.inf)):
        _check(shifted * RNG.choice([-1.0, 1.0], a.size), b * RNG.choice([-1.0, 1.0], a.size))


def test_quotients_around_the_direct_paths_bound():
    """|a / b| just below DIRECT_QUOTIENT64 (the direct path) and at or above it (the tiles)."""
    n = 4096
    b = _full_mantissa(n) * np.ldexp(1.0, RNG.integers(-1070, 960, n))
    q = np.concatenate([RNG.uniform(2.0 ** 49, DIRECT_QUOTIENT64, n // 2),
                        RNG.uniform(DIRECT_QUOTIENT64, 2.0 ** 54, n // 2)])
    a = b * q
    a[::3] = np.nextafter(a[::3], np.inf)
    a *= RNG.choice([-1, 1], n)
    _check(a.reshape(64, 64), b.reshape(64, 64))


def test_divisor_near_the_dividend_and_subnormals():
    n = 50_000
    b = _random(n, -1074, 1024)
    ulps = RNG.integers(-3, 4, n)
    a = b + ulps * np.spacing(b)                       # a within a few ulps of b
    _check(a, b)
    sub_a, sub_b = _random(n, -1074, -1022), _random(n, -1074, -1022)
    _check(sub_a, sub_b)
    _check(_random(n, -1074, 1024), sub_b)             # subnormal divisors of every dividend


def test_special_values_grid():
    grid = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.5, -7.0, TINY, -TINY, BIG, -BIG,
                     2.0 ** 100, 1e-300])
    _check(np.repeat(grid, grid.size), np.tile(grid, grid.size))


def _easy(shape):
    a = RNG.uniform(-40, 40, shape)
    b = RNG.uniform(0.25, 3, shape) * RNG.choice([-1, 1], shape)
    return a, b


def _make_hard(a, b, where):
    a[where] = (_full_mantissa(a[where].size).reshape(a[where].shape)
                * np.ldexp(1.0, RNG.integers(60, 1023, a[where].shape))
                * RNG.choice([-1, 1], a[where].shape))
    b[where] = RNG.uniform(0.3, 7, b[where].shape)


@pytest.mark.parametrize("shape", [(1,), (7,), (5, 3), (4, HARD_TILE - 1), (3, HARD_TILE + 1),
                                   (17, 200), (1, 3 * 16384 + 77)])
def test_sizes_and_hard_elements_at_tile_edges(shape):
    a, b = _easy(shape)
    a2, b2 = a.reshape(-1, shape[-1]), b.reshape(-1, shape[-1])
    cols = shape[-1]
    picks = {0, cols - 1, min(HARD_TILE - 1, cols - 1), min(HARD_TILE, cols - 1), cols // 2,
             max(cols - HARD_TILE, 0), max(cols - HARD_TILE - 1, 0)}
    if cols > 16384:
        picks |= {16383, 16384, 2 * 16384 + 5}
    _check(a, b)                                       # the direct path alone
    for r in sorted({0, a2.shape[0] - 1, a2.shape[0] // 2}):
        _make_hard(a2[r], b2[r], np.array(sorted(picks)))
    _check(a, b)


def test_every_element_hard_and_broadcast_divisor():
    a, _ = _easy((33, 150))
    _make_hard(a, a.copy(), np.s_[:])
    _check(a, 0.7 * np.ones(150))                      # b broadcast along rows (stride 0)
    _check(a, 1e-310)                                  # a Python float divisor


@pytest.mark.parametrize("dims", [{"R": 1, "C": 70000}, {"R": 40, "C": 2000}])
def test_every_template_knob_value_is_exact(dims):
    """The tuner's plan for these ops is their template (its knob sets the update's tasks)."""
    a, b = _easy((dims["R"], dims["C"]))
    _make_hard(a, b, (np.array([0, dims["R"] - 1]), np.array([3, dims["C"] - 1])))
    assert_template_knobs_exact(OPS, "float64", a, b, dims)


def test_floor_divide_identity():
    """a == b * floor_divide(a, b) + remainder(a, b), up to the rounding of the product and sum
    (a few ulps of max(|a|, |b|): remainder(a, b) is a + b, rounded, where 0 < -a / b < 1)."""
    a, b = _random(10_000, -40, 40), _random(10_000, -40, 40)
    q, r = P.floor_divide(a, b), P.remainder(a, b)
    err = np.abs(b * q + r - a)
    assert (err <= 4 * np.spacing(np.maximum(np.abs(a), np.abs(b)))).all()
    # |r| <= |b|: a + b rounds to b where |a| is below half an ulp of b (NumPy gives the same)
    assert (np.abs(r) <= np.abs(b)).all() and ((r == 0) | (np.sign(r) == np.sign(b))).all()


def test_against_torch():
    torch = pytest.importorskip("torch")
    a, b = _random(50_000, -60, 60), _random(50_000, -60, 60)
    _make_hard(a, b, np.s_[::97])
    ta, tb = torch.from_numpy(a), torch.from_numpy(b)
    np.testing.assert_array_equal(P.fmod(a, b), torch.fmod(ta, tb).numpy())
    np.testing.assert_array_equal(P.remainder(a, b), torch.remainder(ta, tb).numpy())
