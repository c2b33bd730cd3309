"""``ceil_mode=True`` of the six poolings (max/avg, 1-D/2-D/3-D) against torch and against the
NumPy references (``pool.window_reference``, which reads every window from padded copies and
never calls a kernel): torch's output size rule, the divisors of windows that overhang the end,
maxima that ignore the missing positions, NaN, views, unbatched inputs, out=, program capture,
and that floor-mode calls keep their kernels' parameters (so their database keys).

The sweeps against torch run the references over many sizes, strides and paddings (cheap) and
the kernels over fewer parameter sets (each new one compiles) at many sizes.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from helpers import assert_close, rand

import pypto
import pypto.ops as P
from pypto.ops.pool import pool_out

KINDS = [("max", None), ("avg", True), ("avg", False)]


def _op(kind, nsp):
    return getattr(P, f"{kind}_pool{nsp}d")


def _kw(include):
    return {} if include is None else {"count_include_pad": include}


def _torch(kind, nsp, x, k, s, p, include):
    """torch's result, or None where torch refuses the call."""
    torch = pytest.importorskip("torch")
    fn = getattr(torch.nn.functional, f"{kind}_pool{nsp}d")
    try:
        return fn(torch.from_numpy(np.ascontiguousarray(x)), k, s, p, ceil_mode=True,
                  **_kw(include)).numpy()
    except RuntimeError:
        return None


def _configs(kmax):
    """(kernel, stride, padding) with padding at most half the kernel, as torch requires."""
    return [(k, s, p) for k in range(1, kmax + 1) for s in range(1, kmax) for p in
            range(k // 2 + 1)]


# -- the output size rule ------------------------------------------------------------------------
def test_output_size_is_torchs():
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    checked = 0
    for n in range(1, 21):
        x = torch.zeros(1, 1, n)
        for k, s, p in _configs(7):
            want = pool_out(n, k, s, p, True)
            try:
                got = F.max_pool1d(x, k, s, p, ceil_mode=True).shape[-1]
            except RuntimeError:
                got = 0          # torch refuses an output below 1
            assert max(want, 0) == got, (n, k, s, p)
            # at most one more than floor mode, and every window starts before n (in the input
            # or the left padding)
            assert want - pool_out(n, k, s, p) in (0, 1)
            assert want < 1 or (want - 1) * s - p < n
            checked += 1
    assert checked > 1000


# -- the references against torch, over many sizes, strides and paddings --------------------------
@pytest.mark.parametrize("nsp, sizes, kmax", [(1, range(1, 12), 5), (2, [(1, 1), (2, 5), (5, 3),
                                                                         (6, 7)], 4),
                                              (3, [(1, 2, 3), (4, 5, 3), (5, 5, 6)], 3)])
def test_references_match_torch(nsp, sizes, kmax):
    rng = np.random.default_rng(nsp)
    checked = total = 0
    for size, (k, s, p) in itertools.product(sizes, _configs(kmax)):
        size = (size,) if nsp == 1 else size
        x = rng.standard_normal((2, 3) + size)
        for kind, include in KINDS:
            want = _torch(kind, nsp, x, k, s, p, include)
            total += 1
            if want is None:     # torch refuses: no window, or avg_pool3d on x under the kernel
                continue
            got = _op(kind, nsp).reference(x, k, s, p, ceil_mode=True, **_kw(include))
            assert_close(got, want, "float64", rtol=1e-13, atol=1e-13,
                         err_msg=f"{kind} {include} {size} k={k} s={s} p={p}")
            checked += 1
    assert checked > total / 2


# -- the kernels against torch and the references ------------------------------------------------
KERNEL_SWEEP = [
    # (nsp, kernel, stride, padding, sizes): sizes 1, odd, even and several vectors wide
    (1, 2, 2, 0, [1, 2, 3, 8, 67]),
    (1, 3, 2, 1, [1, 2, 4, 5, 9, 66]),
    (1, 4, 3, 2, [1, 3, 6, 7, 100]),
    (1, 5, 4, 1, [1, 2, 5, 10, 31]),     # windows longer than a short padded input
    (1, 1, 3, 0, [1, 5, 7]),             # windows that skip inputs
    (1, 3, 1, 1, [1, 6]),                # stride 1: ceil mode is floor mode
    (2, (2, 2), (2, 2), (0, 0), [(1, 1), (5, 7), (6, 5), (13, 10)]),
    (2, (3, 2), (2, 3), (1, 0), [(1, 2), (6, 8), (11, 13)]),
    (3, 2, 2, 0, [(1, 1, 1), (3, 4, 5), (5, 6, 7)]),
    (3, (2, 3, 2), (2, 1, 2), (1, 1, 0), [(2, 3, 2), (5, 5, 5), (4, 7, 9)]),
]


@pytest.mark.parametrize("nsp, k, s, p, sizes", KERNEL_SWEEP, ids=str)
def test_kernels_match_torch_and_reference(nsp, k, s, p, sizes):
    rng = np.random.default_rng(7)
    for size in sizes:
        size = (size,) if nsp == 1 else size
        x = rng.standard_normal((2, 3) + size)
        for kind, include in KINDS:
            the_op = _op(kind, nsp)
            if kind == "avg" and nsp == 3 and any(n < kk for n, kk in zip(size, np.broadcast_to(
                    k, 3))):        # torch's avg_pool3d refuses an input smaller than the kernel
                with pytest.raises(pypto.errors.ShapeError, match="smaller than kernel_size"):
                    the_op(x, k, s, p, ceil_mode=True, **_kw(include))
                continue
            got = the_op(x, k, s, p, ceil_mode=True, **_kw(include))
            ref = the_op.reference(x, k, s, p, ceil_mode=True, **_kw(include))
            what = f"{kind} {include} {size}"
            assert_close(got, ref, "float64", rtol=1e-13, atol=1e-13, err_msg=what)
            want = _torch(kind, nsp, x, k, s, p, include)
            if want is not None:
                assert_close(got, want, "float64", rtol=1e-13, atol=1e-13, err_msg=what)


@pytest.mark.parametrize("dt", ["float32", "float64"])
@pytest.mark.parametrize("kind, include", KINDS, ids=["max", "avg", "avg_exclude"])
@pytest.mark.parametrize("nsp", [1, 2, 3])
def test_dtypes_batched_unbatched_and_views(nsp, kind, include, dt):
    the_op = _op(kind, nsp)
    k, s, p = 3, 2, 1
    size = {1: (2, 3, 40), 2: (2, 3, 14, 18), 3: (2, 3, 6, 8, 10)}[nsp]
    base = rand(size, dt, 11 + nsp)
    # a strided view (every other sample of the last axis), not contiguous
    view = base[..., ::2][..., :-1] if nsp > 1 else base[..., 1::2]
    for x in (view, view[1]):       # batched and unbatched
        got = the_op(x, k, s, p, ceil_mode=True, **_kw(include))
        assert got.dtype == np.dtype(dt)
        ref = the_op.reference(np.ascontiguousarray(x), k, s, p, ceil_mode=True, **_kw(include))
        assert_close(got, ref, dt)
        batch = x if x.ndim == nsp + 2 else x[None]
        want = _torch(kind, nsp, batch, k, s, p, include)
        assert_close(got, want if x.ndim == nsp + 2 else want[0], dt)
        floor = the_op(x, k, s, p, **_kw(include))
        assert got.shape[-1] == floor.shape[-1] + 1    # the last window overhangs


# -- what overhanging windows read ---------------------------------------------------------------
def test_divisors_of_windows_that_overhang():
    x = np.arange(1.0, 6.0).reshape(1, 1, 5)
    assert_close(P.avg_pool1d(x, 2, ceil_mode=True)[0, 0], np.array([1.5, 3.5, 5.0]))
    # count_include_pad: the last window [3, 6) is clipped at n + pad = 6, padding counted
    assert_close(P.avg_pool1d(x, 3, 2, 1, ceil_mode=True)[0, 0], np.array([1.0, 3.0, 3.0]))
    assert_close(P.avg_pool1d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False)[0, 0],
                 np.array([1.5, 3.0, 4.5]))
    # a window past n + pad: clipped there (include) or at n (exclude)
    one = np.array([[[2.0]]])
    assert_close(P.avg_pool1d(one, 4, 2, 1, ceil_mode=True), np.array([[[2.0 / 3]]]))
    assert_close(P.avg_pool1d(one, 4, 2, 1, ceil_mode=True, count_include_pad=False), one)
    img = np.arange(1.0, 10.0, dtype=np.float32).reshape(1, 1, 3, 3)
    assert_close(P.avg_pool2d(img, 2, ceil_mode=True)[0, 0],
                 np.array([[3.0, 4.5], [7.5, 9.0]], np.float32))


def test_max_ignores_the_missing_positions_and_keeps_nan():
    x = -np.arange(1.0, 6.0, dtype=np.float32).reshape(1, 1, 5)     # all negative
    assert_close(P.max_pool1d(x, 2, ceil_mode=True)[0, 0], np.array([-1, -3, -5], np.float32))
    y = rand((2, 3, 7, 9), "float32", 5)
    y[1, 2, 6, 8] = np.nan         # only in the last (partial) window of its plane
    y[0, 1, 2, 3] = np.nan
    got = P.max_pool2d(y, 2, ceil_mode=True)
    nan = np.isnan(got)
    assert nan[1, 2, 3, 4] and nan[0, 1, 1, 1] and nan.sum() == 2
    assert_close(got, P.max_pool2d.reference(y, 2, ceil_mode=True))
    assert_close(P.max_pool2d(np.full((1, 1, 3, 3), -np.inf, np.float32), 2, ceil_mode=True),
                 np.full((1, 1, 2, 2), -np.inf, np.float32))


# -- keys, out= and programs ---------------------------------------------------------------------
def test_ceil_mode_runs_the_floor_mode_kernel():
    """No pooling kernel has a ceil_mode parameter: a floor-mode call keeps its kernel's
    parameters, fingerprint and database key; a ceil-mode call runs the same kernel."""
    from pypto.runtime import observe

    x = rand((2, 3, 8, 10), "float32", 3)
    for nsp in (1, 2, 3):
        for kind in ("max", "avg"):
            assert "ceil_mode" not in {q.name for q in _op(kind, nsp).params}
    with observe() as floor:
        P.avg_pool2d(x, 3, 2, 1, count_include_pad=False)
    with observe() as ceil:
        P.avg_pool2d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False)
    pools = [c for c in ceil if c[0].name == "avg_pool2d"]
    assert len(floor) == 1 and len(pools) == 1
    assert pools[0][2] == floor[0][2]                     # the same kernel parameters
    assert {"H": 9, "W": 11}.items() <= pools[0][3].items()   # x padded on the far side
    assert pools[0][4].fingerprint == floor[0][4].fingerprint


def test_out_is_filled_in_place():
    x = rand((2, 3, 7, 9), "float32", 4)
    for the_op in (P.max_pool2d, P.avg_pool2d):
        out = np.empty((2, 3, 4, 5), np.float32)
        assert the_op(x, 2, ceil_mode=True, out=out) is out
        assert_close(out, the_op.reference(x, 2, ceil_mode=True))


def test_traced_programs_take_ceil_mode():
    x = rand((2, 3, 7, 9), "float32", 6)

    @pypto.jit
    def f(a):
        return P.max_pool2d(a, 2, ceil_mode=True) + P.avg_pool2d(a * 2, 2, ceil_mode=True)

    want = (P.max_pool2d.reference(x, 2, ceil_mode=True)
            + P.avg_pool2d.reference(x * 2, 2, ceil_mode=True))
    for _ in range(2):          # traced, then replayed
        got = f(x)
        assert got.shape == (2, 3, 4, 5)
        assert_close(got, want, "float32")
    g = pypto.jit(lambda a: P.avg_pool1d(a, 2, ceil_mode=True, count_include_pad=False))
    v = x[:, :, 1]                 # [2, 3, 9], a view
    assert_close(g(v), P.avg_pool1d.reference(v.copy(), 2, ceil_mode=True,
                                              count_include_pad=False), "float32")
