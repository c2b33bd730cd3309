"""Image ops (box_blur, gaussian_blur, sobel, resize_bilinear, roi_align, anchor_boxes)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pypto.ops as P
from helpers import assert_close, rand
from pypto.errors import DtypeError, ParamError, ShapeError

# (H, W) pairs covering every odd size on each axis, with narrow and wide images.
HW = [(1, 1), (1, 1000), (3, 7), (7, 3), (127, 1000), (1000, 127), (1000, 1)]


def check(name, *args, dtype=None, **kw):
    got = getattr(P, name)(*args, **kw)
    with np.errstate(all="ignore"):
        want = getattr(P, name).reference(*args, **kw)
    assert got.dtype == want.dtype, (name, got.dtype, want.dtype)
    assert_close(got, want, dtype, err_msg=f"{name} {[np.shape(a) for a in args]} {kw}")
    return got


# -- box_blur -----------------------------------------------------------------------------------

# Every (dtype, params, schedule) compiles once: all odd sizes in float32, two shapes otherwise.
def _shapes(dtype):
    return HW if dtype == "float32" else [(7, 3), (127, 1000)]


@pytest.mark.parametrize("dtype", ["float32", "float64", "uint8"])
def test_box_blur_shapes(dtype):
    for h, w in _shapes(dtype):
        check("box_blur", rand((h, w), dtype, seed=h + w))
    check("box_blur", rand((2, 3, 40, 33), dtype), size=5)
    check("box_blur", rand((5, 9), dtype), size=1)


@pytest.mark.parametrize("size", [3, 17])
def test_box_blur_sizes_uint8_full_range(size):
    x = np.random.default_rng(size).integers(0, 256, (2, 70, 90)).astype(np.uint8)
    got = check("box_blur", x, size=size)
    # The documented integer rounding: (S + n // 2) // n with n = size**2.
    r, n = size // 2, size * size
    p = np.pad(x.astype(np.int64), [(0, 0), (r, r), (r, r)], mode="edge")
    s = sum(p[:, i:i + 70, j:j + 90] for i in range(size) for j in range(size))
    np.testing.assert_array_equal(got, ((s + n // 2) // n).astype(np.uint8))


def test_box_blur_saturated_uint8_and_constant():
    assert (P.box_blur(np.full((9, 40), 255, np.uint8), size=17) == 255).all()
    c = np.full((3, 20, 30), 0.25, np.float32)
    assert_close(P.box_blur(c, size=5), c)


def test_box_blur_against_scipy():
    nd = pytest.importorskip("scipy.ndimage")
    x = rand((37, 51), "float64")
    assert_close(P.box_blur(x, size=5), nd.uniform_filter(x, size=5, mode="nearest"))


def test_box_blur_non_contiguous():
    base = rand((60, 50), "float32")
    check("box_blur", base.T)
    check("box_blur", base[::2, 1::3])
    check("box_blur", rand((4, 30, 20), "uint8")[:, ::-1])


@settings(max_examples=15, deadline=None)
@given(h=st.integers(1, 40), w=st.integers(8, 40), size=st.sampled_from([3, 5]))
def test_box_blur_property(h, w, size):
    x = rand((h, w), "float32", seed=h * 41 + w)
    check("box_blur", x, size=size)


def test_filters_propagate_nan_and_inf():
    x = rand((2, 20, 30), "float32")
    x[0, 5, 7] = np.nan
    x[1, 10, 0] = np.inf
    x[1, 3, 20] = -np.inf
    for name in ("box_blur", "gaussian_blur", "sobel"):
        got = check(name, x)
        around = np.isnan(got[0, 4:7, 6:9])
        if name == "sobel":  # the center tap has weight 0
            assert around.sum() == 8 and not around[1, 1]
        else:
            assert around.all(), name
        assert not np.isfinite(got[1, 10, 0]), name


# -- gaussian_blur ------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_gaussian_blur_shapes(dtype):
    shapes = [(1, 1), (3, 7), (127, 1000), (1000, 1)] if dtype == "float32" else _shapes(dtype)
    for h, w in shapes:
        check("gaussian_blur", rand((h, w), dtype, seed=h + w))
    check("gaussian_blur", rand((2, 3, 30, 41), dtype), sigma=2.0, radius=3)
    check("gaussian_blur", rand((30, 41), dtype).T, sigma=2.0, radius=3)


def test_gaussian_blur_against_scipy():
    nd = pytest.importorskip("scipy.ndimage")
    x = rand((2, 45, 60), "float64")
    for sigma in (0.5, 1.0, 2.5):
        want = nd.gaussian_filter(x, sigma=(0, sigma, sigma), mode="nearest", truncate=4.0)
        assert_close(P.gaussian_blur(x, sigma=sigma), want)


def test_gaussian_blur_radius_zero_is_identity():
    x = rand((13, 17), "float32")
    assert_close(P.gaussian_blur(x, sigma=3.0, radius=0), x)


# -- sobel --------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_sobel_shapes(dtype):
    for h, w in _shapes(dtype):
        check("sobel", rand((h, w), dtype, seed=h + w))
    check("sobel", rand((2, 2, 31, 29), dtype))
    check("sobel", rand((40, 30), dtype)[::3, ::2])


def test_sobel_against_scipy_and_by_hand():
    nd = pytest.importorskip("scipy.ndimage")
    x = rand((33, 47), "float64")
    want = np.hypot(nd.sobel(x, axis=1, mode="nearest"), nd.sobel(x, axis=0, mode="nearest"))
    assert_close(P.sobel(x), want)
    # A ramp along W with slope 1: gx = 8 inside, halved at the replicated edges.
    ramp = np.tile(np.arange(6, dtype=np.float32), (5, 1))
    g = P.sobel(ramp)
    np.testing.assert_array_equal(g[:, 1:-1], 8.0)
    np.testing.assert_array_equal(g[:, [0, -1]], 4.0)


# -- resize_bilinear ----------------------------------------------------------------------------

@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_resize_shapes(dtype, align_corners):
    x = rand((2, 3, 20, 31), dtype)
    for oh, ow in [(7, 3), (127, 1000)]:
        check("resize_bilinear", x, oh, ow, align_corners=align_corners)
    if dtype == "float32":
        check("resize_bilinear", x, 1, 1, align_corners=align_corners)
        check("resize_bilinear", rand((1, 1), dtype), 3, 7, align_corners=align_corners)
        check("resize_bilinear", rand((1000, 7), dtype), 127, 1, align_corners=align_corners)
        check("resize_bilinear", rand((31, 20), dtype).T, 13, 40, align_corners=align_corners)


@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("shape, size", [
    ((3, 200, 150), (301, 257)),    # blocks of output rows per task, the last block shifted in
    ((6, 20, 31), (3, 8192)),       # too few rows for blocks: one image per task
    ((2, 1000, 900), (127, 300)),   # shrinking: a task's rows read more input rows than it has
    ((1, 64, 48), (96, 72)),        # one image, few elements: computed up front, no threads
])
def test_resize_every_schedule_branch(shape, size, align_corners):
    # The default schedule interpolates the input rows a task reads first (``rows``), in blocks
    # of output rows of one image, per image, or once for all: each agrees with the reference.
    check("resize_bilinear", rand(shape, "float32", seed=sum(size)), *size,
          align_corners=align_corners)


def test_resize_known_values():
    # Values of torch.nn.functional.interpolate(mode="bilinear") on a 2x2 image.
    x = np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)
    got = P.resize_bilinear(x, 4, 4)
    np.testing.assert_allclose(got[0], [1.0, 1.25, 1.75, 2.0])
    np.testing.assert_allclose(got[:, 0], [1.0, 1.5, 2.5, 3.0])
    got = P.resize_bilinear(x, 3, 3, align_corners=True)
    np.testing.assert_allclose(got, [[1, 1.5, 2], [2, 2.5, 3], [3, 3.5, 4]])
    y = rand((3, 9, 14), "float32")
    np.testing.assert_array_equal(P.resize_bilinear(y, 9, 14), y)


# -- roi_align ----------------------------------------------------------------------------------

def _boxes(k, n, h, w, dtype, seed=0):
    rng = np.random.default_rng(seed)
    x1 = rng.uniform(-3, w, k)
    y1 = rng.uniform(-3, h, k)
    b = np.stack([rng.integers(0, n, k), x1, y1, x1 + rng.uniform(0, w / 2 + 2, k),
                  y1 + rng.uniform(0, h / 2 + 2, k)], axis=1)
    return b.astype(dtype)


@pytest.mark.parametrize("aligned", [False, True])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_roi_align_random(dtype, aligned):
    x = rand((2, 3, 17, 23), dtype)
    boxes = _boxes(7, 2, 17, 23, dtype)
    check("roi_align", x, boxes, (3, 4), aligned=aligned)
    check("roi_align", x, boxes, 2, spatial_scale=0.5, sampling_ratio=3, aligned=aligned)
    check("roi_align", x, boxes[:1], 7, sampling_ratio=1, aligned=aligned)


def test_roi_align_odd_sizes_and_views():
    for h, w in [(1, 1), (3, 7), (127, 1)]:
        x = rand((1, 2, h, w), "float32", seed=h)
        check("roi_align", x, _boxes(3, 1, h, w, "float32", seed=w), (2, 3))
    x = rand((2, 4, 9, 11), "float32")
    check("roi_align", np.ascontiguousarray(x.transpose(0, 1, 3, 2)).transpose(0, 1, 3, 2),
          _boxes(4, 2, 9, 11, "float32")[::-1], 3)
    # Boxes as a list of [L, 4] arrays, one per image.
    per_image = [_boxes(2, 1, 9, 11, "float32", seed=s)[:, 1:] for s in (1, 2)]
    got = P.roi_align(x, per_image, 2)
    stacked = np.concatenate([np.c_[np.full(2, i, np.float32), b]
                              for i, b in enumerate(per_image)])
    assert_close(got, P.roi_align.reference(x, stacked, 2))


def test_roi_align_by_hand():
    # On a linear image (v = 4 y + x) bilinear sampling is exact.
    x = np.arange(16, dtype=np.float64).reshape(1, 1, 4, 4)
    box = np.array([[0, 0, 0, 2, 2]], np.float64)
    assert P.roi_align(x, box, 1)[0, 0, 0, 0] == pytest.approx(5.0)
    assert P.roi_align(x, box, 1, aligned=True)[0, 0, 0, 0] == pytest.approx(2.5)
    far = np.array([[0, 10, 10, 12, 12]], np.float64)  # every sample more than 1 pixel outside
    assert P.roi_align(x, far, 2).sum() == 0.0


# -- anchor_boxes -------------------------------------------------------------------------------

def test_anchor_boxes_by_hand():
    got = P.anchor_boxes(2, 2, 16, [32], [1.0])
    np.testing.assert_array_equal(got, [[-16, -16, 16, 16], [0, -16, 32, 16],
                                        [-16, 0, 16, 32], [0, 0, 32, 32]])
    assert got.dtype == np.float32
    base = P.anchor_boxes(1, 1, 16, (32, 64), (0.5, 1.0, 2.0))
    np.testing.assert_array_equal(base, [[-23, -11, 23, 11], [-45, -23, 45, 23],
                                         [-16, -16, 16, 16], [-32, -32, 32, 32],
                                         [-11, -23, 11, 23], [-23, -45, 23, 45]])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_anchor_boxes_against_reference(dtype):
    for fh, fw in [(1, 7), (3, 1), (25, 38)]:
        args = (fh, fw, (8, 12.5), (16, 40, 100), (0.5, 1.0, 2.0, 3.0))
        got = P.anchor_boxes(*args, dtype=dtype)
        assert got.shape == (fh * fw * 12, 4)
        assert got.dtype == np.dtype(dtype)
        np.testing.assert_array_equal(got, P.anchor_boxes.reference(*args, dtype=dtype))


# -- errors -------------------------------------------------------------------------------------

def test_errors():
    x = rand((8, 9), "float32")
    with pytest.raises(DtypeError, match="box_blur.*'x'.*int32"):
        P.box_blur(np.zeros((4, 4), np.int32))
    with pytest.raises(DtypeError, match="sobel.*uint8"):
        P.sobel(np.zeros((4, 4), np.uint8))
    with pytest.raises(ShapeError, match="box_blur.*at least 2 dims.*\\(5,\\)"):
        P.box_blur(np.zeros(5, np.float32))
    assert P.gaussian_blur(np.zeros((0, 4, 4), np.float32)).shape == (0, 4, 4)   # empty batch
    with pytest.raises(ParamError, match="'size' must be odd, got 4"):
        P.box_blur(x, size=4)
    with pytest.raises(ParamError, match="'size' must be <= 63"):
        P.box_blur(x, size=65)
    with pytest.raises(ParamError, match="'sigma' must be finite and > 0"):
        P.gaussian_blur(x, sigma=0.0)
    with pytest.raises(ParamError, match="default radius of 80"):
        P.gaussian_blur(x, sigma=20.0)
    with pytest.raises(ParamError, match="'radius' must be in \\[0, 64\\], got 65"):
        P.gaussian_blur(x, radius=65)
    with pytest.raises(ParamError, match="'height' must be >= 1"):
        P.resize_bilinear(x, 0, 3)
    with pytest.raises(ParamError, match="'align_corners' expects a bool"):
        P.resize_bilinear(x, 3, 3, align_corners="yes")


@pytest.mark.parametrize("name", ["roi_align", "roi_pool"])
@pytest.mark.parametrize("index", [2, -1, 0.5])
def test_a_box_naming_no_image_is_refused(name, index):
    # clamped in the kernel, such a box pooled the first or last image without a word
    x = rand((2, 3, 8, 8), "float32")
    boxes = np.array([[0, 1, 1, 5, 5], [index, 1, 1, 5, 5]], np.float32)
    with pytest.raises(ParamError, match=rf"{name}: boxes\[1, 0\] = {float(index)!r} is not a "
                                         r"batch index in \[0, 1\]"):
        getattr(P, name)(x, boxes, 2)
    with pytest.raises(ParamError, match=r"is not a batch index"):
        getattr(P, name)(x, boxes.astype(np.int64) if index != 0.5 else boxes, 2)


def test_roi_align_errors():
    x = rand((2, 3, 8, 8), "float32")
    good = np.array([[0, 1, 1, 5, 5]], np.float32)
    with pytest.raises(ShapeError, match="'boxes' must be \\[K, 5\\].*4 columns"):
        P.roi_align(x, good[:, 1:], 2)
    with pytest.raises(ShapeError, match="'x' must be 4-D"):
        P.roi_align(x[0], good, 2)
    with pytest.raises(ParamError, match=r"boxes\[0, 0\] = 2.0 is not a batch index in \[0, 1\]"):
        P.roi_align(x, np.array([[2, 1, 1, 5, 5]], np.float32), 2)
    with pytest.raises(ParamError, match="'output_size' must be an int or a pair"):
        P.roi_align(x, good, (2, 2, 2))
    with pytest.raises(ParamError, match="'sampling_ratio' must be an int"):
        P.roi_align(x, good, 2, sampling_ratio=1.5)
    with pytest.raises(ParamError, match="adaptive sampling .* 20000 samples per bin"):
        P.roi_align(x, np.array([[0, 0, 0, 40000, 5]], np.float32), 2)
    with pytest.raises(DtypeError, match="roi_align.*'x'.*int32"):
        P.roi_align(x.astype(np.int32), good, 2)


def test_anchor_boxes_errors():
    with pytest.raises(ParamError, match="'stride' must be finite and > 0"):
        P.anchor_boxes(2, 2, -4, [32], [1.0])
    with pytest.raises(ParamError, match="'sizes' must be a non-empty sequence"):
        P.anchor_boxes(2, 2, 16, [], [1.0])
    with pytest.raises(ParamError, match="'ratios' must be a non-empty sequence"):
        P.anchor_boxes(2, 2, 16, [32], [0.0])
    with pytest.raises(ParamError, match="'feat_h' must be in \\[1, 65536\\], got 0"):
        P.anchor_boxes(0, 2, 16, [32], [1.0])
    with pytest.raises(ParamError, match="'dtype' must be one of"):
        P.anchor_boxes(2, 2, 16, [32], [1.0], dtype="int8")
