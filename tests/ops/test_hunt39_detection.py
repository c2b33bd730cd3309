"""Detection edge cases found in a bug hunt: nms's threshold comparison (float64, as
torchvision's kernels compare a float IoU with a double threshold) and roi_pool with NaN inputs."""

from __future__ import annotations

import numpy as np
import pytest

import pypto
import pypto.ops as P


def _torchvision_rule(boxes, scores, thr):
    """Greedy NMS as torchvision's CPU kernel runs it: the IoU in the boxes' dtype, compared with
    the threshold as a Python float (a C double)."""
    order = sorted(range(len(scores)), key=lambda i: (-float(scores[i]), i))
    t = boxes.dtype.type
    kept = []
    for i in order:
        ok = True
        for j in kept:
            a, b = boxes[j], boxes[i]
            w = max(min(a[2], b[2]) - max(a[0], b[0]), t(0))
            h = max(min(a[3], b[3]) - max(a[1], b[1]), t(0))
            inter = t(w * h)
            iou = inter / ((a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter)
            if float(iou) > float(thr):
                ok = False
                break
        if ok:
            kept.append(i)
    return kept


@pytest.mark.parametrize("num,den", [(1, 3), (2, 3), (1, 7), (5, 7), (1, 10), (9, 11)])
def test_nms_threshold_equal_to_a_float32_iou(num, den):
    # Box 1 covers num/den of box 0: the float32 IoU is float32(num/den), which lies above or
    # below the double threshold num/den. torchvision suppresses exactly when it lies above.
    boxes = np.array([[0, 0, den, 1], [0, 0, num, 1]], np.float32)
    scores = np.array([2.0, 1.0], np.float32)
    thr = num / den
    want = _torchvision_rule(boxes, scores, thr)
    keep, count = P.nms(boxes, scores, thr)
    assert keep[:int(count)].tolist() == want
    # The op's own NumPy reference says the same (it compared in float32 and kept the box).
    ref_keep, ref_count = pypto.get_op("nms").reference(boxes, scores, thr)
    assert ref_keep[:int(ref_count)].tolist() == want
    cats = np.zeros(2, np.int64)
    ref_keep, ref_count = pypto.get_op("batched_nms").reference(boxes, scores, cats, thr)
    assert ref_keep[:int(ref_count)].tolist() == want


def test_nms_threshold_one_third_suppresses():
    boxes = np.array([[0, 0, 3, 1], [0, 0, 1, 1]], np.float32)
    assert float(np.float32(1) / np.float32(3)) > 1 / 3
    keep, count = pypto.get_op("nms").reference(boxes, np.array([2, 1], np.float32), 1 / 3)
    assert int(count) == 1 and keep.tolist() == [0, -1]


def _torchvision_roi_pool(x, boxes, ph, pw):
    """torchvision's roi_pool loop for spatial_scale 1, written out: ``if (v > maxval)``."""
    n, c, h, w = x.shape
    t = x.dtype.type
    out = np.zeros((len(boxes), c, ph, pw), x.dtype)
    for k, (bi, x1, y1, x2, y2) in enumerate(boxes):
        x1, y1, x2, y2 = (int(np.sign(v) * np.floor(abs(v) + 0.5)) for v in (x1, y1, x2, y2))
        bh = t(max(y2 - y1 + 1, 1)) / t(ph)
        bw = t(max(x2 - x1 + 1, 1)) / t(pw)
        for i in range(ph):
            hs = min(max(int(np.floor(t(i) * bh)) + y1, 0), h)
            he = min(max(int(np.ceil(t(i + 1) * bh)) + y1, 0), h)
            for j in range(pw):
                ws = min(max(int(np.floor(t(j) * bw)) + x1, 0), w)
                we = min(max(int(np.ceil(t(j + 1) * bw)) + x1, 0), w)
                for ch in range(c):
                    best = t(0) if (he <= hs or we <= ws) else t(-np.inf)
                    for v in x[int(bi), ch, hs:he, ws:we].ravel():
                        if v > best:
                            best = v
                    out[k, ch, i, j] = best
    return out


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_roi_pool_skips_nan_wherever_it_sits_in_a_bin(dtype):
    x = np.arange(16, dtype=dtype).reshape(1, 1, 4, 4)
    x[0, 0, 0, 0] = np.nan          # first pixel of bin (0, 0)
    x[0, 0, 3, 3] = np.nan          # last pixel of bin (1, 1)
    boxes = np.array([[0, 0, 0, 3, 3]], dtype)
    got = P.roi_pool(x, boxes, 2)
    np.testing.assert_array_equal(got[0, 0], np.array([[5, 7], [13, 14]], dtype))
    np.testing.assert_array_equal(pypto.get_op("roi_pool").reference(x, boxes, 2), got)
    allnan = np.full((1, 1, 2, 2), np.nan, dtype)
    assert P.roi_pool(allnan, np.array([[0, 0, 0, 1, 1]], dtype), 1)[0, 0, 0, 0] == -np.inf


def test_roi_pool_nan_against_torchvision_loop():
    rng = np.random.default_rng(5)
    for _ in range(40):
        h, w = (int(v) for v in rng.integers(1, 9, 2))
        x = rng.standard_normal((2, 3, h, w)).astype(np.float32)
        x[rng.random(x.shape) < 0.3] = np.nan
        xy = rng.uniform(-2, max(h, w) + 1, (4, 2, 2))
        boxes = np.concatenate([rng.integers(0, 2, (4, 1)), xy.min(1), xy.max(1)], 1)
        boxes = boxes.astype(np.float32)
        ph, pw = (int(v) for v in rng.integers(1, 4, 2))
        np.testing.assert_array_equal(P.roi_pool(x, boxes, (ph, pw)),
                                      _torchvision_roi_pool(x, boxes, ph, pw))
