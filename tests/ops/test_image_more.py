"""Morphology, filters, colour conversions, resizes, warps and histograms
(pypto/ops/{morphology,filters,color,warp,histograms}.py).

Each op is checked against its NumPy reference and, where one exists, against an independent
library (scipy.ndimage, matplotlib, torch) or values worked out by hand; on sizes 1, odd and
large enough for several vectors and threads; on views; in every declared dtype; traced; with
``out=``; and on its error cases.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import pypto
import pypto.ops as P
from helpers import assert_close, rand
from pypto import runtime
from pypto.errors import DtypeError, ParamError, ShapeError

HW = [(1, 1), (1, 300), (3, 7), (7, 3), (127, 400), (300, 1)]
CROSS = np.array([[0, 1, 0], [1, 1, 1], [0, 1, 0]])
ODD_SE = np.array([[1, 0], [0, 0], [0, 1]])     # anchor (1, 1); taps above-left and below


def check(name, *args, dtype=None, **kw):
    got = getattr(P, name)(*args, **kw)
    with np.errstate(all="ignore"):
        want = getattr(P, name).reference(*args, **kw)
    if isinstance(want, tuple):
        for g, w in zip(got, want):
            assert_close(g, w, dtype, err_msg=name)
        return got
    assert got.dtype == want.dtype, (name, got.dtype, want.dtype)
    assert_close(got, want, dtype, err_msg=f"{name} {[np.shape(a) for a in args]} {kw}")
    return got


def _u8(shape, seed=0):
    return np.random.default_rng(seed).integers(0, 256, shape).astype(np.uint8)


# -- morphology ---------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["dilate", "erode", "morph_open", "morph_close"])
def test_morphology_sizes_and_elements(name):
    for h, w in HW:
        check(name, rand((h, w), seed=h + w), 3)
    x = rand((2, 3, 40, 33))
    for kernel in ((2, 5), CROSS, ODD_SE, 1, (1, 7)):
        check(name, x, kernel)


@pytest.mark.parametrize("dtype", ["float64", "uint8"])
def test_morphology_dtypes(dtype):
    x = _u8((2, 30, 41)) if dtype == "uint8" else rand((2, 30, 41), dtype)
    for name in ("dilate", "erode", "morph_open", "morph_close"):
        check(name, x, CROSS)
        check(name, x[:, ::2, 1::3], (3, 2))        # a strided view


def test_dilate_against_scipy_and_by_hand():
    nd = pytest.importorskip("scipy.ndimage")
    x = rand((37, 51), "float64")
    # Symmetric odd elements: scipy's reflected element and its origin agree with OpenCV's.
    for fp in (np.ones((5, 3), bool), CROSS.astype(bool)):
        assert_close(P.dilate(x, fp), nd.grey_dilation(x, footprint=fp, mode="constant",
                                                       cval=-np.inf))
        assert_close(P.erode(x, fp), nd.grey_erosion(x, footprint=fp, mode="constant",
                                                     cval=np.inf))
    # One bright pixel grows into the element's shape (mirrored: dilation spreads it).
    img = np.zeros((5, 6), np.float32)
    img[2, 3] = 1.0
    got = P.dilate(img, ODD_SE)
    want = np.zeros_like(img)
    want[2 + 1, 3 + 1] = want[2 - 1, 3] = 1.0      # out(i, j) reads (i - 1, j - 1) and (i + 1, j)
    want[4, 0] = -np.inf        # both taps outside the image
    np.testing.assert_array_equal(got, want)
    # Taps outside the image are ignored: an erosion at the border keeps the border values.
    ramp = np.arange(12, dtype=np.float64).reshape(3, 4)
    np.testing.assert_array_equal(P.erode(ramp, 3)[0], [0, 0, 1, 2])


def test_morphology_iterations_nan_and_extremes():
    x = rand((20, 30))
    check("dilate", x, 3, iterations=3)
    np.testing.assert_array_equal(P.dilate(x, 3, iterations=2), P.dilate(x, 5))
    x[4, 6] = np.nan
    got = P.erode(x, 3)
    assert np.isnan(got[3:6, 5:8]).all() and np.isnan(got).sum() == 9
    assert P.dilate(np.full((4, 4), 255, np.uint8), 3).min() == 255
    np.testing.assert_array_equal(P.morph_open(_u8((1, 9, 9)) * 0 + 7, CROSS), 7)


def test_morphology_errors():
    x = rand((8, 9))
    with pytest.raises(ParamError, match="only 0 and 1"):
        P.dilate(x, [[0, 2], [1, 1]])
    with pytest.raises(ParamError, match="no set tap"):
        P.erode(x, np.zeros((3, 3)))
    with pytest.raises(ParamError, match=r"kh=64 must be in \[1, 63\]"):
        P.dilate(x, (64, 3))
    with pytest.raises(ParamError, match="'kernel' must be an int, a pair"):
        P.dilate(x, "3x3")
    with pytest.raises(ParamError, match="'iterations' must be an int in"):
        P.dilate(x, 3, iterations=0)
    with pytest.raises(DtypeError, match="dilate.*'x'.*int32"):
        P.dilate(np.zeros((4, 4), np.int32))
    with pytest.raises(ShapeError, match="at least 2 dims"):
        P.morph_close(np.zeros(5, np.float32))
    with pytest.raises(ParamError, match="at most 256 set taps"):
        fp = np.ones((20, 20))
        fp[0, 0] = 0
        P.dilate(x, fp)
    with pytest.raises(ParamError, match="'footprint' must be rows of '0'/'1'"):
        P.dilate.kernel(x[None], footprint="12/11")


# -- filters ------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["float32", "float64", "uint8"])
def test_median_blur_against_scipy(dtype):
    nd = pytest.importorskip("scipy.ndimage")
    for h, w in ([(1, 1), (3, 7), (127, 300), (300, 1)] if dtype == "float32" else [(9, 40)]):
        x = _u8((h, w), h) if dtype == "uint8" else rand((h, w), dtype, seed=h)
        for k in (3, 5):
            got = check("median_blur", x, ksize=k)
            np.testing.assert_array_equal(got, nd.median_filter(x, size=k, mode="nearest"))
    check("median_blur", rand((2, 3, 17, 19), dtype) if dtype != "uint8" else _u8((2, 17, 19)),
          ksize=1)


def test_median_blur_ties_views_and_nan():
    # Few distinct values: many ties inside each window.
    x = np.random.default_rng(3).integers(0, 3, (2, 30, 40)).astype(np.uint8)
    for k in (3, 5):
        check("median_blur", x, ksize=k)
        check("median_blur", x.transpose(0, 2, 1), ksize=k)
    y = rand((20, 30))
    y[10, 10] = np.nan
    got = P.median_blur(y, ksize=5)
    assert np.isnan(got[8:13, 8:13]).all() and np.isnan(got).sum() == 25
    np.testing.assert_array_equal(P.median_blur(np.full((5, 5), 2.5), ksize=5), 2.5)


def test_laplacian_against_scipy():
    nd = pytest.importorskip("scipy.ndimage")
    for h, w in HW:
        x = rand((h, w), "float64", seed=h * w)
        for k, kern in ((1, [[0, 1, 0], [1, -4, 1], [0, 1, 0]]),
                        (3, [[2, 0, 2], [0, -8, 0], [2, 0, 2]])):
            got = check("laplacian", x, ksize=k)
            assert_close(got, nd.correlate(x, np.array(kern, float), mode="nearest"))
    check("laplacian", rand((2, 50, 60))[:, 1::2, ::-1], ksize=3)
    # A quadratic has a constant Laplacian (inside the image).
    i, j = np.meshgrid(np.arange(9.0), np.arange(11.0), indexing="ij")
    assert_close(P.laplacian(i ** 2 + 3 * j ** 2)[1:-1, 1:-1], np.full((7, 9), 8.0))


def test_bilateral_filter():
    for h, w in [(1, 1), (3, 7), (127, 300)]:
        check("bilateral_filter", rand((h, w), seed=h), 5, 0.3, 2.0)
    x = rand((2, 40, 33), "float64")
    check("bilateral_filter", x, 0, 0.5, 1.4)       # radius round(1.5 * 1.4) = 2
    check("bilateral_filter", x[:, ::2, ::-1], 7, 10.0, 3.0)
    # A constant image stays; a step edge survives a small sigma_color, unlike a blur.
    np.testing.assert_allclose(P.bilateral_filter(np.full((9, 9), 0.25), 5, 0.1, 2.0), 0.25)
    step = np.where(np.arange(20) < 10, 0.0, 1.0)[None, :].repeat(6, 0)
    assert_close(P.bilateral_filter(step, 5, 0.05, 3.0), step, atol=1e-20)
    # d = 1: a disc of radius 0 is the pixel itself.
    assert_close(P.bilateral_filter(x, 1, 0.5, 1.0), x)


def test_integral_image():
    for h, w in HW:
        check("integral_image", rand((h, w), seed=h))
    x = rand((2, 3, 40, 70), "float64")
    got = check("integral_image", x)
    assert_close(got, x.cumsum(-2).cumsum(-1))
    u = np.full((2, 500, 700), 255, np.uint8)
    got = P.integral_image(u)
    assert got.dtype == np.int32 and got[-1, -1, -1] == 255 * 500 * 700
    check("integral_image", _u8((33, 65))[::2, 1::2])
    # float32 sums in float64 and rounds once: exact for these integers (beyond 2**24 too).
    big = np.full((1, 4097, 4097), 1.0, np.float32)
    assert P.integral_image(big)[0, -1, -1] == np.float32(4097 * 4097)


def test_filter_errors():
    x = rand((8, 9))
    with pytest.raises(ParamError, match="'ksize' must be 1, 3 or 5, got 4"):
        P.median_blur(x, ksize=4)
    with pytest.raises(ParamError, match="'ksize' must be <= 5, got 7"):
        P.median_blur(x, ksize=7)
    with pytest.raises(ParamError, match="'ksize' must be 1 or 3, got 2"):
        P.laplacian(x, ksize=2)
    with pytest.raises(ParamError, match="'sigma_color' must be a finite number > 0"):
        P.bilateral_filter(x, 5, 0.0, 1.0)
    with pytest.raises(ParamError, match="radius would be 16"):
        P.bilateral_filter(x, 33, 1.0, 1.0)
    with pytest.raises(ParamError, match="'d' expects an int"):
        P.bilateral_filter(x, 2.5, 1.0, 1.0)
    with pytest.raises(DtypeError, match="laplacian.*'x'.*uint8"):
        P.laplacian(np.zeros((4, 4), np.uint8))
    with pytest.raises(DtypeError, match="integral_image.*'x'.*int32"):
        P.integral_image(np.zeros((4, 4), np.int32))


# -- colour conversions -------------------------------------------------------------------------

def test_hsv_against_matplotlib():
    mc = pytest.importorskip("matplotlib.colors")
    for dtype in ("float32", "float64"):
        x = rand((5, 7, 3), dtype, low=0.0, high=1.0)
        x[0, 0] = [0.5, 0.5, 0.5]            # gray: hue and saturation 0
        x[0, 1] = [0.2, 0.9, 0.9]            # a tie for the maximum
        hsv = P.rgb_to_hsv(x, axis=-1)
        assert_close(hsv, mc.rgb_to_hsv(x.astype(np.float64)).astype(dtype))
        assert_close(P.hsv_to_rgb(hsv, axis=-1), mc.hsv_to_rgb(hsv.astype(np.float64)).astype(
            dtype))
        assert_close(P.hsv_to_rgb(hsv, axis=-1), x, rtol=1e-5, atol=1e-6)
    # Primary colours by hand; hue wraps in hsv_to_rgb.
    prim = np.array([[1.0, 0, 0], [0, 1.0, 0], [0, 0, 1.0], [1.0, 1.0, 0]])
    assert_close(P.rgb_to_hsv(prim, axis=1), [[0, 1, 1], [1 / 3, 1, 1], [2 / 3, 1, 1],
                                              [1 / 6, 1, 1]])
    assert_close(P.hsv_to_rgb(np.array([[1 + 1 / 3, 1, 1], [-1 / 3, 1, 1]]), axis=1),
                 [[0.0, 1.0, 0.0], [0.0, 0.0, 1.0]], atol=1e-15)


@pytest.mark.parametrize("name", ["rgb_to_gray", "rgb_to_hsv", "hsv_to_rgb", "rgb_to_yuv",
                                  "yuv_to_rgb"])
def test_colour_shapes_axes_and_views(name):
    for shape, axis in (((3,), 0), ((1, 3, 1, 1), 1), ((2, 3, 17, 300), -3), ((40, 50, 3), -1),
                        ((7, 3, 5), 1)):
        check(name, rand(shape, low=0.0, high=1.0, seed=len(shape)), axis=axis)
    check(name, rand((3, 40, 30), "float64", low=0.0, high=1.0)[:, ::2, 1::3], axis=0)


def test_gray_and_yuv_by_hand():
    u = _u8((3, 50, 60))
    got = P.rgb_to_gray(u, axis=0)
    s = 299 * u[0].astype(int) + 587 * u[1].astype(int) + 114 * u[2].astype(int)
    np.testing.assert_array_equal(got[0], (s + 500) // 1000)
    assert got.shape == (1, 50, 60) and got.dtype == np.uint8
    white = np.ones((3, 1, 1))
    assert_close(P.rgb_to_gray(white, axis=0), np.ones((1, 1, 1)))
    assert_close(P.rgb_to_yuv(white, axis=0)[:, 0, 0], [1.0, 0.0, 0.0], atol=1e-15)
    # Pure blue and red reach U and V's extremes (Umax 0.436, Vmax 0.615).
    assert_close(P.rgb_to_yuv(np.array([0, 0, 1.0]), axis=0)[1], 0.436)
    assert_close(P.rgb_to_yuv(np.array([1.0, 0, 0]), axis=0)[2], 0.615)
    x = rand((3, 64, 65), "float64", low=0.0, high=1.0)
    assert_close(P.yuv_to_rgb(P.rgb_to_yuv(x, axis=0), axis=0), x)


def test_colour_errors():
    with pytest.raises(ShapeError, match="colour axis \\(axis=-3\\) of 'x' must have size 3"):
        P.rgb_to_hsv(np.zeros((4, 5, 6), np.float32))
    with pytest.raises(ParamError, match="'axis'=3 is out of range"):
        P.rgb_to_yuv(np.zeros((3, 4, 5), np.float32), axis=3)
    with pytest.raises(DtypeError, match="rgb_to_hsv.*'x'.*uint8"):
        P.rgb_to_hsv(np.zeros((3, 2, 2), np.uint8))


# -- resizes ------------------------------------------------------------------------------------

SIZES = [(1, 1), (1, 9), (5, 3), (26, 34), (13, 17), (40, 301), (7, 4)]


@pytest.mark.parametrize("dtype", ["float32", "float64", "uint8", "int32"])
def test_resize_nearest_against_torch(dtype):
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    x = _u8((2, 3, 13, 17)) if dtype == "uint8" else rand((2, 3, 13, 17), dtype)
    for h, w in SIZES if dtype == "float32" else SIZES[2:4]:
        for mode in ("nearest", "nearest-exact"):
            got = check("resize_nearest", x, h, w, mode=mode)
            if dtype != "int32":       # torch has no integer interpolation but uint8
                np.testing.assert_array_equal(got, F.interpolate(
                    torch.from_numpy(x), size=(h, w), mode=mode).numpy())
    check("resize_nearest", x[:, :, ::2, ::-1], 30, 7)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_resize_bicubic_against_torch(dtype):
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    x = rand((2, 3, 13, 17), dtype)
    for h, w in SIZES:
        for ac in (False, True):
            got = check("resize_bicubic", x, h, w, align_corners=ac)
            assert_close(got, F.interpolate(torch.from_numpy(x), size=(h, w), mode="bicubic",
                                            align_corners=ac).numpy())
    check("resize_bicubic", rand((1, 1)), 3, 4)
    check("resize_bicubic", x[0, :, 1::2, ::-1], 10, 31)
    # Same size without align_corners samples the pixels themselves: the identity.
    assert_close(P.resize_bicubic(x, 13, 17), x)


def test_resizes_and_warps_with_few_images_share_their_rows_out():
    # Three images on two threads: the default schedules cut tasks from the images' rows (the
    # batch fused with the rows inside it); the results are the reference's.
    x = rand((3, 120, 90), "float32", seed=3)
    check("resize_nearest", x, 181, 135)
    check("resize_bicubic", x, 181, 135)
    check("warp_affine", x, _rot(0.2, 3.0, -1.0), size=(130, 100))
    check("warp_perspective", x, np.array([[1.0, 0.05, 2.0], [0.02, 0.9, -1.0], [1e-4, 2e-4, 1.0]]),
          size=(130, 100))


def test_resize_errors():
    x = rand((8, 9))
    with pytest.raises(ParamError, match="'mode' must be one of"):
        P.resize_nearest(x, 3, 3, mode="bilinear")
    with pytest.raises(ParamError, match="'height' must be >= 1"):
        P.resize_bicubic(x, 0, 3)
    with pytest.raises(DtypeError, match="resize_bicubic.*'x'.*uint8"):
        P.resize_bicubic(np.zeros((4, 4), np.uint8), 2, 2)


# -- warps --------------------------------------------------------------------------------------

def _rot(a, tx, ty):
    return np.array([[math.cos(a), -math.sin(a), tx], [math.sin(a), math.cos(a), ty]])


@pytest.mark.parametrize("dtype", ["float32", "float64", "uint8"])
def test_warp_affine_against_reference_and_torch(dtype):
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    x = _u8((2, 31, 45)) if dtype == "uint8" else rand((2, 31, 45), dtype)
    m = _rot(0.3, 4.0, -2.5)
    for kw in ({}, {"size": (20, 61)}, {"inverse_map": True}):
        check("warp_affine", x, m, **kw)
    if dtype == "uint8":
        return
    # F.grid_sample at the inverse map's points (pixel centers at the normalized ends).
    inv = np.linalg.inv(np.vstack([m, [0, 0, 1]]))
    yy, xx = np.meshgrid(np.arange(31.0), np.arange(45.0), indexing="ij")
    sx = inv[0, 0] * xx + inv[0, 1] * yy + inv[0, 2]
    sy = inv[1, 0] * xx + inv[1, 1] * yy + inv[1, 2]
    grid = np.stack([2 * sx / 44 - 1, 2 * sy / 30 - 1], -1)[None]
    want = F.grid_sample(torch.from_numpy(x.astype(np.float64))[None], torch.from_numpy(grid),
                         padding_mode="zeros", align_corners=True)[0].numpy()
    assert_close(P.warp_affine(x, m), want.astype(dtype))


def test_warp_conventions_by_hand():
    x = rand((3, 6, 7), "float64")
    eye = np.eye(3)
    assert_close(P.warp_affine(x, eye[:2]), x)
    assert_close(P.warp_perspective(x, eye), x)
    # Forward matrix: moving the content 2 right and 1 down.
    shift = np.array([[1.0, 0, 2], [0, 1.0, 1]])
    got = P.warp_affine(x, shift)
    np.testing.assert_array_equal(got[:, 1:, 2:], x[:, :-1, :-2])
    np.testing.assert_array_equal(got[:, :1], 0)
    np.testing.assert_array_equal(got[:, :, :2], 0)
    # inverse_map takes the same move as destination -> source.
    back = np.array([[1.0, 0, -2], [0, 1.0, -1]])
    np.testing.assert_array_equal(P.warp_affine(x, back, inverse_map=True), got)
    # Half a pixel to the right: each output is the mean of two neighbours; the first column
    # fades against the zero border.
    half = P.warp_affine(x, np.array([[1.0, 0, 0.5], [0, 1.0, 0]]))
    assert_close(half[:, :, 1:], (x[:, :, :-1] + x[:, :, 1:]) / 2)
    assert_close(half[:, :, 0], x[:, :, 0] / 2)
    # A singular matrix inverts to zeros (OpenCV): every output samples pixel (0, 0).
    assert_close(P.warp_affine(x, np.zeros((2, 3))), np.broadcast_to(x[:, :1, :1], x.shape))
    # Homogeneous scale of the whole matrix does not change a perspective warp.
    hm = np.array([[1.05, 0.1, -1.0], [0.02, 0.95, 0.5], [1e-3, -2e-3, 1.0]])
    assert_close(P.warp_perspective(x, 3.0 * hm), P.warp_perspective(x, hm))


def test_warp_per_image_matrices_views_and_perspective():
    x = rand((3, 2, 20, 25))
    ms = np.stack([_rot(0.1 * i, i, -i) for i in range(3)])
    got = check("warp_affine", x, ms, size=(15, 30))
    for i in range(3):
        assert_close(got[i], P.warp_affine(x[i], ms[i], size=(15, 30)))
    check("warp_affine", x[:, :, ::2, ::-1], ms.astype(np.float32))
    hm = np.array([[1.05, 0.1, -1.0], [0.02, 0.95, 0.5], [1e-3, -2e-3, 1.0]])
    for h, w in ((1, 1), (7, 300), (120, 9)):
        check("warp_perspective", rand((h, w), seed=h), hm)
    check("warp_perspective", x, np.stack([hm] * 3), inverse_map=True)
    check("warp_perspective", _u8((2, 30, 40)), hm.tolist())


def test_warp_errors():
    x = rand((8, 9))
    with pytest.raises(ShapeError, match=r"'matrix' must be \[2, 3\] or \[N, 2, 3\]"):
        P.warp_affine(x, np.eye(3))
    with pytest.raises(ShapeError, match=r"'matrix' must be \[3, 3\]"):
        P.warp_perspective(x, np.eye(3)[:2])
    with pytest.raises(ShapeError, match="2 matrices need 'x' of shape"):
        P.warp_affine(x, np.stack([np.eye(3)[:2]] * 2))
    with pytest.raises(ParamError, match="'size' must be the output \\(height, width\\)"):
        P.warp_affine(x, np.eye(3)[:2], size=(0, 3))
    with pytest.raises(DtypeError, match="warp_affine.*'x'.*int32"):
        P.warp_affine(np.zeros((4, 4), np.int32), np.eye(3)[:2])


# -- histograms ---------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["float32", "float64", "uint8", "int32"])
def test_histogram_against_numpy(dtype):
    rng = np.random.default_rng(1)
    if dtype in ("uint8", "int32"):
        x = rng.integers(0, 200, (3, 1001)).astype(dtype)
        calls = [{}, {"bins": 256, "range": (0, 256)}, {"bins": 1, "range": (10, 10)}]
    else:
        x = rng.normal(0, 1, (3, 100001)).astype(dtype)
        x.flat[:3] = [np.nan, np.inf, -np.inf]
        calls = [{"range": (-2, 2)}, {"bins": 7, "range": (-1, 3)}, {"bins": 1000,
                                                                       "range": (-4, 4)}]
    for kw in calls:
        counts, edges = check("histogram", x, **kw)
        want_c, want_e = np.histogram(x, **kw)     # float32 data: float32 edges, as NumPy's
        np.testing.assert_array_equal(counts, want_c)
        np.testing.assert_array_equal(edges, want_e)
        assert edges.dtype == want_e.dtype
        assert counts.dtype == np.int64
    check("histogram", x[:, ::3], bins=5, range=(0, 50))
    check("histogram", x[:1, :1], bins=3, range=(-1, 1))


def test_histogram_bin_edges_exactly():
    for bins, lo, hi in ((30, -1.0, 2.0), (7, -0.3, 1.7), (1000, -5.0, 5.0), (3, 1e-3, 2e-3)):
        e = np.linspace(lo, hi, bins + 1)
        x = np.concatenate([e, np.nextafter(e, np.inf), np.nextafter(e, -np.inf)])
        np.testing.assert_array_equal(P.histogram(x, bins, (lo, hi))[0],
                                      np.histogram(x, bins, (lo, hi))[0])


def test_histogram_errors():
    x = rand(10)
    with pytest.raises(ParamError, match="'bins' must be an int"):
        P.histogram(x, bins=[0, 1, 2])
    with pytest.raises(ParamError, match="'range' must have lo <= hi"):
        P.histogram(x, range=(1, 0))
    with pytest.raises(ParamError, match="not finite \\(NaN or inf in 'x'\\); give range"):
        P.histogram(np.array([1.0, np.nan]))
    with pytest.raises(ParamError, match="too narrow"):
        P.histogram(x, bins=100, range=(1.0, 1.0 + 1e-14))
    with pytest.raises(ParamError, match="give range=\\(lo, hi\\) for a traced Tensor"):
        pypto.jit(lambda v: P.histogram(v)[0], fullgraph=True)(x)
    counts = pypto.jit(lambda v: P.histogram(v, bins=4, range=(-1, 1))[0])(x)
    np.testing.assert_array_equal(counts, np.histogram(x, 4, (-1, 1))[0])


def test_equalize_hist():
    rng = np.random.default_rng(2)
    for shape in ((1, 1), (3, 7), (2, 300, 401), (700, 800)):
        x = np.minimum(rng.exponential(30.0, shape), 255).astype(np.uint8)
        check("equalize_hist", x)
    check("equalize_hist", _u8((40, 60))[::2, ::-3])
    # A single level is left as is; two levels map to 0 and 255.
    np.testing.assert_array_equal(P.equalize_hist(np.full((5, 6), 77, np.uint8)), 77)
    two = np.where(np.arange(30).reshape(5, 6) % 2, 40, 200).astype(np.uint8)
    np.testing.assert_array_equal(P.equalize_hist(two), np.where(two == 40, 0, 255))
    # The levels 0..255 once each: the identity (cdf - 1) * 255 / 255.
    ramp = np.arange(256, dtype=np.uint8).reshape(16, 16)
    np.testing.assert_array_equal(P.equalize_hist(ramp), ramp)
    with pytest.raises(DtypeError, match="equalize_hist.*'x'.*float32"):
        P.equalize_hist(np.zeros((4, 4), np.float32))


# -- traced, out= -------------------------------------------------------------------------------

def test_image_ops_run_traced():
    x = rand((2, 3, 20, 24), low=0.0, high=1.0)
    m = _rot(0.2, 1.0, 2.0)

    @pypto.jit
    def pipeline(img, mat):
        gray = P.rgb_to_gray(img)[:, 0]
        smooth = P.median_blur(P.morph_open(gray, CROSS), ksize=3)
        return P.warp_affine(P.resize_bicubic(smooth, 16, 30), mat) + P.laplacian(
            P.resize_nearest(smooth, 16, 30))

    gray = P.rgb_to_gray(x)[:, 0]
    smooth = P.median_blur(P.morph_open(gray, CROSS), ksize=3)
    want = P.warp_affine(P.resize_bicubic(smooth, 16, 30), m) + P.laplacian(
        P.resize_nearest(smooth, 16, 30))
    assert_close(pipeline(x, m), want)
    f = pypto.jit(lambda v: P.integral_image(P.rgb_to_yuv(v)) + P.hsv_to_rgb(
        P.rgb_to_hsv(v)) + P.bilateral_filter(v, 3, 0.5, 1.0) + P.dilate(P.erode(v, 3), 3))
    want = P.integral_image(P.rgb_to_yuv(x)) + P.hsv_to_rgb(P.rgb_to_hsv(x)) + \
        P.bilateral_filter(x, 3, 0.5, 1.0) + P.dilate(P.erode(x, 3), 3)
    assert_close(f(x), want)
    u = _u8((2, 20, 30))
    np.testing.assert_array_equal(pypto.jit(lambda v: P.equalize_hist(P.morph_close(v)))(u),
                                  P.equalize_hist(P.morph_close(u)))


def test_out_is_written_in_place():
    x = rand((2, 30, 40))
    for name, args, kw in (("dilate", (x,), {}), ("median_blur", (x,), {"ksize": 5}),
                           ("resize_bicubic", (x, 11, 13), {}), ("integral_image", (x,), {})):
        want = getattr(P, name)(*args, **kw)
        buf = np.empty_like(want)
        before = dict(runtime.out_stats)
        assert getattr(P, name)(*args, out=buf, **kw) is buf
        np.testing.assert_array_equal(buf, want)
        assert runtime.out_stats["in_place"] == before["in_place"] + 1, name
    counts = np.empty(5, np.int64)
    res = P.histogram(x, 5, (-1, 1), out=(counts, np.empty(6, x.dtype)))
    np.testing.assert_array_equal(res[0], np.histogram(x, 5, (-1, 1))[0])
