"""The HSV rules beyond the smooth cases of cases.py: where the conversions are not differentiable
(tied channels, grays, hue's wrap, hsv_to_rgb's sector edges) the rules must give the documented
choice, and both ops must stay usable inside larger differentiated programs.

A tie is checked against its neighbours: the gradient at the tie equals the one just inside the
piece the documentation names (whose smooth formula cases.py checks by central differences) and
differs from the one just inside the other piece, so a rule that chose the other way fails.
"""

from __future__ import annotations

import numpy as np
from fd import check_vjp

import pypto

o = pypto.ops
EPS = 1e-7


def _pixel_vjp(fn, px):
    """The vjp function of ``fn`` over channels-last pixels [P, 3]."""
    _, vjp_fn = pypto.vjp(lambda v: fn(v, axis=-1), px)
    return lambda ct: vjp_fn(ct)[0]


def _nudged(base, channel, by=EPS):
    p = np.array(base, dtype=np.float64)
    p[channel] += by
    return p


# (the tie, a pixel just inside the documented piece, a pixel just inside the other piece)
_RGB_TIES = {
    "max r == g: red's sector": ((0.7, 0.7, 0.2), 0, 1),
    "max g == b: green's sector": ((0.1, 0.6, 0.6), 1, 2),
    "max r == b: red's sector": ((0.8, 0.3, 0.8), 0, 2),
    # raising the other tied channel leaves the named one the minimum
    "min g == b under red: green": ((0.9, 0.35, 0.35), 2, 1),
    "min r == g under blue: red": ((0.3, 0.3, 0.75), 1, 0),
}


def _rgb_tie_pixels():
    rows = []
    for base, same, other in _RGB_TIES.values():
        rows += [base, _nudged(base, same), _nudged(base, other)]
    return np.array(rows + [(0.4, 0.4, 0.4), (0.0, 0.0, 0.0)])


def test_rgb_to_hsv_ties_follow_the_kernel_order_and_grays_pass_only_value():
    px = _rgb_tie_pixels()
    grad = _pixel_vjp(o.rgb_to_hsv, px)
    rng = np.random.default_rng(21)
    ct = np.repeat(rng.standard_normal((len(_RGB_TIES) + 2, 3)), [3] * len(_RGB_TIES) + [1, 1],
                   axis=0)
    got = grad(ct)
    for k, name in enumerate(_RGB_TIES):
        at, same, other = got[3 * k:3 * k + 3]
        np.testing.assert_allclose(at, same, rtol=1e-5, atol=1e-6, err_msg=name)
        assert not np.allclose(at, other, rtol=1e-3, atol=1e-3), name
    # gray and black: hue and saturation pass nothing, value goes to red
    dv = ct[-2:, 2]
    np.testing.assert_array_equal(got[-2:], np.stack([dv, 0 * dv, 0 * dv], axis=1))
    # hue's wrap (red maximum, green == blue): the same slope on both sides of the jump
    hue_only = ct * np.array([1.0, 0.0, 0.0])
    k = list(_RGB_TIES).index("min g == b under red: green")
    at, above, below = grad(hue_only)[3 * k:3 * k + 3]
    assert np.abs(at).max() > 0.1
    np.testing.assert_allclose(at, above, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(at, below, rtol=1e-5, atol=1e-6)


def test_hsv_to_rgb_sector_edges_take_the_sector_above():
    """At 6 h on an integer the kernel's floor picks the sector above; h = 1 and -0.5 wrap."""
    rows = []
    for h in (0.5, 1.0, -0.5, 0.0):
        rows += [(h, 0.6, 0.8), (h + 1e-9, 0.6, 0.8), (h - 1e-9, 0.6, 0.8)]
    grad = _pixel_vjp(o.hsv_to_rgb, np.array(rows))
    ct = np.repeat(np.random.default_rng(22).standard_normal((4, 3)), 3, axis=0)
    got = grad(ct)
    for k in range(4):
        at, above, below = got[3 * k:3 * k + 3]
        np.testing.assert_allclose(at, above, rtol=1e-6, atol=1e-7, err_msg=rows[3 * k])
        assert not np.allclose(at[0], below[0], rtol=1e-3), rows[3 * k]


def _smooth_rgb(n, rng):
    """n channels-last pixels with channels 0.15 or more apart: hue 1/18 or more from every sector
    edge (hue = offset / 6 within a sector, offset (a - b) / delta >= 0.15 / 0.95 from 0 and 1)."""
    out = np.empty((n, 3))
    for i in range(n):
        low = rng.uniform(0.05, 0.25)
        mid = low + rng.uniform(0.15, 0.35)
        out[i, rng.permutation(3)] = low, mid, mid + rng.uniform(0.15, 0.35)
    return out


def test_round_trip_gradient_is_the_identity_on_arrays():
    """hsv_to_rgb(rgb_to_hsv(x)) == x, so pypto.grad of <w, round trip> is w: the two rules'
    Jacobians must be exact inverses, a check that owes nothing to either kernel."""
    rng = np.random.default_rng(23)
    x = _smooth_rgb(8, rng).reshape(2, 4, 3)
    w = rng.standard_normal(x.shape)
    g = pypto.grad(lambda v: (o.hsv_to_rgb(o.rgb_to_hsv(v, axis=-1), axis=-1) * w).sum())(x)
    assert isinstance(g, np.ndarray) and g.shape == x.shape
    np.testing.assert_allclose(g, w, rtol=1e-9, atol=1e-10)


def test_an_hsv_edit_inside_a_program_matches_central_differences():
    """Complement the hue (+1/2 turn keeps each hue's place within its sector), damp the
    saturation, brighten, convert back and weigh: the rules compose with the other ops' rules."""
    x = np.moveaxis(_smooth_rgb(6, np.random.default_rng(24)).reshape(2, 3, 3), -1, 0).copy()
    gain = np.array([1.0, 0.8, 1.1])[:, None, None]
    shift = np.array([0.5, 0.0, 0.0])[:, None, None]

    def edit(v):
        return o.hsv_to_rgb(o.rgb_to_hsv(v, axis=0) * gain + shift, axis=0) ** 2

    check_vjp(edit, x)
