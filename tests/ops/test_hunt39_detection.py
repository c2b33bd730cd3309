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
