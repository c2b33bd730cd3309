"""Detection (box_iou, box_convert, nms, batched_nms, roi_pool) and image nn ops (group_norm,
instance_norm, adaptive/global pooling, pixel_shuffle/unshuffle, upsample_nearest) against
NumPy written here, and torch where it has the op.

nms must keep exactly what a straightforward greedy loop keeps, ties in score included.
"""

from __future__ import annotations

import numpy as np
import pytest
from helpers import assert_close, rand

import pypto
import pypto.ops as P
from pypto.errors import ParamError, ShapeError

RNG = np.random.default_rng(13)


def _boxes(n, dtype="float32", seed=0):
    rng = np.random.default_rng(seed)
    xy = rng.uniform(0, 40, (n, 2))
    return np.concatenate([xy, xy + rng.uniform(2, 30, (n, 2))], 1).astype(dtype)


def _iou(a, b):
    """IoU of two boxes, written out as one would by hand, in the boxes' dtype."""
    t = a.dtype.type
    w = max(min(a[2], b[2]) - max(a[0], b[0]), t(0))
    h = max(min(a[3], b[3]) - max(a[1], b[1]), t(0))
    inter = t(w * h)
    return inter / ((a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter)


def _greedy(boxes, scores, thr, cats=None):
    order = sorted(range(len(scores)), key=lambda i: (-scores[i], i))   # ties: input order
    kept = []
    for i in order:
        if all(not (_iou(boxes[j], boxes[i]) > thr and (cats is None or cats[i] == cats[j]))
               for j in kept):
            kept.append(i)
    return kept


def test_box_iou_and_convert():
    a, b = _boxes(5), _boxes(3, seed=1)
    want = np.array([[_iou(x, y) for y in b] for x in a])
    assert_close(P.box_iou(a, b), want)
    cx, cy = (a[:, 0] + a[:, 2]) / 2, (a[:, 1] + a[:, 3]) / 2
    w, h = a[:, 2] - a[:, 0], a[:, 3] - a[:, 1]
    assert_close(P.box_convert(a, "xyxy", "cxcywh"), np.stack([cx, cy, w, h], 1))
    assert_close(P.box_convert(a, "xyxy", "xywh"), np.stack([a[:, 0], a[:, 1], w, h], 1))
    for fmt in ("xywh", "cxcywh"):
        assert_close(P.box_convert(P.box_convert(a, "xyxy", fmt), fmt, "xyxy"), a)
    with pytest.raises(ShapeError, match=r"\[N, 4\]"):
        P.box_iou(a[:, :3], b)


@pytest.mark.parametrize("n", [1, 2, 63, 64, 65, 200])
@pytest.mark.parametrize("thr", [0.0, 0.3, 0.7])
def test_nms_keeps_what_the_greedy_loop_keeps(n, thr):
    boxes = _boxes(n, seed=n)
    scores = RNG.integers(0, 6, n).astype(np.float32)       # many ties
    keep, count = P.nms(boxes, scores, thr)
    want = _greedy(boxes, scores, thr)
    assert keep.shape == (n,) and keep.dtype == np.int64 and count.shape == ()
    assert int(count) == len(want)
    np.testing.assert_array_equal(keep[:len(want)], want)
    assert (keep[len(want):] == -1).all()
    cats = RNG.integers(0, 3, n)
    keep, count = P.batched_nms(boxes, scores, cats, thr)
    want = _greedy(boxes, scores, thr, cats)
    np.testing.assert_array_equal(keep[:int(count)], want)


def test_nms_with_identical_boxes_and_float64():
    boxes = np.tile(_boxes(1, "float64"), (5, 1))
    scores = np.array([1.0, 3.0, 3.0, 2.0, 3.0])
    keep, count = P.nms(boxes, scores, 0.5)
    assert int(count) == 1 and keep[0] == 1                  # first of the tied best
    keep, count = P.nms(boxes, scores, 1.0)                  # IoU 1 is not above 1
    np.testing.assert_array_equal(keep, [1, 2, 4, 3, 0])


def _roi_pool_np(x, boxes, ph, pw, scale):
    """torchvision's RoIPool, loop by loop."""
    out = np.zeros((len(boxes), x.shape[1], ph, pw), x.dtype)
    t = x.dtype.type
    H, W = x.shape[2:]
    for k, b in enumerate(boxes):
        r = [int(np.sign(v) * np.floor(abs(v) + 0.5)) for v in (b[1:] * t(scale)).astype(x.dtype)]
        bw, bh = t(max(r[2] - r[0] + 1, 1)) / t(pw), t(max(r[3] - r[1] + 1, 1)) / t(ph)
        for i in range(ph):
            for j in range(pw):
                h0 = min(max(int(np.floor(i * bh)) + r[1], 0), H)
                h1 = min(max(int(np.ceil((i + 1) * bh)) + r[1], 0), H)
                w0 = min(max(int(np.floor(j * bw)) + r[0], 0), W)
                w1 = min(max(int(np.ceil((j + 1) * bw)) + r[0], 0), W)
                if h1 > h0 and w1 > w0:
                    out[k, :, i, j] = x[int(b[0]), :, h0:h1, w0:w1].max(axis=(1, 2))
    return out


def test_roi_pool():
    x = rand((2, 3, 13, 11), seed=3)
    xy = RNG.uniform(-3, 14, (9, 2, 2))
    boxes = np.concatenate([RNG.integers(0, 2, (9, 1)), xy.min(1), xy.max(1)], 1)
    boxes = boxes.astype(np.float32)
    for size, scale in ((2, 1.0), ((3, 4), 0.5)):
        ph, pw = (size, size) if isinstance(size, int) else size
        np.testing.assert_array_equal(P.roi_pool(x, boxes, size, scale),
                                      _roi_pool_np(x, boxes, ph, pw, scale))


def test_roi_pool_bin_edges_that_land_on_integers():
    """Boxes 1-40 pixels wide in 7 bins: ``j * (w/7)`` lands on integers (7 * (3/7) is 3.0 in
    float32); the edges must be the reference's, not one off (fast-math arithmetic made 7,638
    of 196,000 outputs differ at this workload)."""
    rng = np.random.default_rng(11)
    x = rng.uniform(-1, 1, (1, 4, 50, 68)).astype(np.float32)
    k = 400
    x1 = rng.integers(0, 60, k) * 16.0
    y1 = rng.integers(0, 45, k) * 16.0
    wh = rng.integers(0, 40, (k, 2)) * 16.0 + rng.choice([0.0, 7.9, 8.0], (k, 2))
    boxes = np.stack([np.zeros(k), x1, y1, x1 + wh[:, 0], y1 + wh[:, 1]], 1).astype(np.float32)
    got = P.roi_pool(x, boxes, 7, 1 / 16)
    np.testing.assert_array_equal(got, _roi_pool_np(x, boxes, 7, 7, 1 / 16))


def test_group_and_instance_norm():
    x = rand((2, 6, 5, 3), "float64", 4)
    w, b = rand((6,), "float64", 5), rand((6,), "float64", 6)
    g = x.reshape(2, 3, -1)
    want = ((g - g.mean(-1, keepdims=True)) / np.sqrt(g.var(-1, keepdims=True) + 1e-5))
    want = want.reshape(x.shape) * w[:, None, None] + b[:, None, None]
    assert_close(P.group_norm(x, 3, w, b), want)
    p = x.reshape(2, 6, -1)
    want = ((p - p.mean(-1, keepdims=True)) / np.sqrt(p.var(-1, keepdims=True) + 1e-3))
    assert_close(P.instance_norm(x, eps=1e-3), want.reshape(x.shape))
    with pytest.raises(ParamError, match="divide"):
        P.group_norm(x, 4)


@pytest.mark.parametrize("size", [1, (2, 3), (5, 3), (4, 7)])
def test_adaptive_and_global_avg_pool(size):
    x = rand((2, 3, 5, 7), "float64", 7)
    oh, ow = (size, size) if isinstance(size, int) else size
    want = np.empty((2, 3, oh, ow))
    for i in range(oh):
        for j in range(ow):
            h0, h1 = (i * 5) // oh, -(-(i + 1) * 5 // oh)
            w0, w1 = (j * 7) // ow, -(-(j + 1) * 7 // ow)
            want[..., i, j] = x[..., h0:h1, w0:w1].mean(axis=(-2, -1))
    assert_close(P.adaptive_avg_pool2d(x, size), want)
    assert_close(P.global_avg_pool2d(x), x.mean(axis=(2, 3), keepdims=True))


def test_pixel_shuffle_round_trip():
    x = rand((2, 8, 3, 5), "int32", 8)
    y = P.pixel_shuffle(x, 2)
    for c in range(2):
        for i in range(2):
            for j in range(2):
                np.testing.assert_array_equal(y[:, c, i::2, j::2], x[:, c * 4 + i * 2 + j])
    np.testing.assert_array_equal(P.pixel_unshuffle(y, 2), x)
    with pytest.raises(ShapeError, match="divisible"):
        P.pixel_shuffle(x, 3)


@pytest.mark.parametrize("kw", [{"size": (10, 14)}, {"size": (7, 3)}, {"scale_factor": 2},
                                {"scale_factor": (1.5, 0.5)}])
def test_upsample_nearest_against_torch(kw):
    torch = pytest.importorskip("torch")
    x = rand((1, 2, 5, 7), seed=9)
    want = torch.nn.functional.interpolate(torch.from_numpy(x), mode="nearest", **kw).numpy()
    np.testing.assert_array_equal(P.upsample_nearest(x, **kw), want)


def test_upsample_nearest_integer_factor_repeats_pixels():
    x = rand((3, 4), seed=10)
    np.testing.assert_array_equal(P.upsample_nearest(x, scale_factor=3),
                                  np.repeat(np.repeat(x, 3, 0), 3, 1))
    with pytest.raises(ParamError, match="exactly one"):
        P.upsample_nearest(x)


CALLS = {
    "box_iou": lambda b: P.box_iou(b, b),
    "box_convert": lambda b: P.box_convert(b, "xyxy", "xywh"),
    "nms": lambda b: P.nms(b, b[:, 0] * 0 + 1, 0.5),
    "batched_nms": lambda b: P.batched_nms(b, b[:, 1], np.array([0, 1, 0, 1, 0, 1]), 0.3),
    "roi_pool": lambda b: P.roi_pool(P.tile(b.reshape(1, 1, 6, 4), (2, 3, 1, 1)),
                                     np.array([[0, 1, 1, 3, 5], [1, 0, 0, 6, 6.]], np.float32),
                                     2),
    "group_norm": lambda b: P.group_norm(b.reshape(1, 6, 4), 2),
    "instance_norm": lambda b: P.instance_norm(b.reshape(1, 3, 8)),
    "adaptive_avg_pool2d": lambda b: P.adaptive_avg_pool2d(b.reshape(1, 1, 6, 4), (4, 3)),
    "global_avg_pool2d": lambda b: P.global_avg_pool2d(b.reshape(2, 3, 4)),
    "pixel_shuffle": lambda b: P.pixel_shuffle(b.reshape(1, 4, 3, 2), 2),
    "pixel_unshuffle": lambda b: P.pixel_unshuffle(b.reshape(1, 1, 6, 4), 2),
    "upsample_nearest": lambda b: P.upsample_nearest(b, scale_factor=2),
}


@pytest.mark.parametrize("name", sorted(CALLS))
def test_public_call_runs_traced(name):
    b = _boxes(6, seed=3)
    want = CALLS[name](b)
    got = pypto.jit(CALLS[name])(b)
    for g, w in zip(got if isinstance(got, tuple) else (got,),
                    want if isinstance(want, tuple) else (want,)):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-6, atol=1e-6)
