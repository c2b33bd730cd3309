"""Detection ops in torchvision's conventions: box_iou, box_convert, nms, batched_nms, roi_pool.

Boxes are rows ``(x1, y1, x2, y2)`` unless a format says otherwise. IoU is torchvision's:
``inter / (area1 + area2 - inter)`` with ``area = (x2 - x1) * (y2 - y1)`` and the intersection's
sides clamped at 0, computed in the boxes' dtype exactly as written (IEEE, no reassociation).
``nms`` compares that IoU with ``iou_threshold`` in float64, as torchvision's kernels compare a
float IoU with their double threshold: a float32 IoU of 1/3 (0.3333333432...) is above a
threshold of 1/3 and suppresses, where a float32 comparison (NumPy's or torch's ``iou > 1/3``)
would round the threshold to the same float32 and keep the box.

``nms`` and ``batched_nms`` keep a data-dependent number of boxes. They return a fixed-size
result plus a count: ``(keep, count)`` where ``keep`` is int64 [N] holding the indices of the
kept boxes in decreasing score order followed by -1, and ``count`` is a 0-d int64 array;
``keep[:count]`` is torchvision's result. Ties in score are taken in input order (a stable sort;
torchvision's own order among equal scores is unspecified); NaN scores sort last. A box is
dropped when its IoU with an already kept box is greater than ``iou_threshold`` (for
``batched_nms``, a kept box of the same category).

How nms runs (all in one Halide pipeline): scores are ranked by counting (O(N**2),
vectorized), the IoU test of every ordered pair is packed into 64-bit masks (O(N**2), parallel),
then one sequential pass over the boxes ORs the masks of the kept ones (O(N**2 / 64)), and a
prefix count places the kept indices.

``roi_pool(x, boxes, output_size, spatial_scale=1.0)`` is ``torchvision.ops.roi_pool``: box
corners scaled and rounded half away from zero, bins of ``(end - start + 1) / pooled`` pixels,
the maximum of each bin (0 for an empty one).
"""

from __future__ import annotations

import halide as hl
import numpy as np

from ..errors import DtypeError, ParamError, ShapeError
from ..runtime import as_array, as_traced, traced
from ._consts import lit64
from ._op import Param, op
from .image import _roi_boxes
from .layout import _int
from .reduce import _key

_FLOATS = ["float32", "float64"]


def _boxes(name, arr, arg="boxes"):
    a = as_array(arr, name, arg)
    if a.ndim != 2 or a.shape[1] != 4:
        raise ShapeError(f"{name}: '{arg}' must be [N, 4] boxes, got shape {a.shape}")
    return a


def _iou(a, b):
    """IoU of two boxes given as 4-tuples of Exprs, strict IEEE in their type."""
    zero = hl.cast(a[0].type(), 0)
    w = hl.max(hl.min(a[2], b[2]) - hl.max(a[0], b[0]), zero)
    h = hl.max(hl.min(a[3], b[3]) - hl.max(a[1], b[1]), zero)
    inter = w * h
    area_a = (a[2] - a[0]) * (a[3] - a[1])
    area_b = (b[2] - b[0]) * (b[3] - b[1])
    return hl.strict_float(inter / (area_a + area_b - inter))


def _np_iou(a, b):
    """NumPy IoU matrix in the boxes' dtype (the same formula, for the references)."""
    a, b = np.asarray(a), np.asarray(b)
    lt = np.maximum(a[:, None, :2], b[None, :, :2])
    rb = np.minimum(a[:, None, 2:], b[None, :, 2:])
    wh = np.maximum(rb - lt, 0)
    inter = wh[..., 0] * wh[..., 1]
    area_a = (a[:, 2] - a[:, 0]) * (a[:, 3] - a[:, 1])
    area_b = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    with np.errstate(all="ignore"):
        return inter / (area_a[:, None] + area_b[None, :] - inter)


def _box_inputs(dims, dtypes, params, rng):
    out = []
    for spec, dt in zip(("N", "M"), dtypes):
        n = dims[spec]
        xy = rng.uniform(0, 50, (n, 2))
        out.append(np.concatenate([xy, xy + rng.uniform(1, 30, (n, 2))], 1).astype(dt))
    return out


# -- box_iou and box_convert ---------------------------------------------------------------------

def _box_iou_frontend(boxes1, boxes2):
    """``torchvision.ops.box_iou``: the [N, M] IoU of every pair of (x1, y1, x2, y2) boxes."""
    a, b = _boxes("box_iou", boxes1, "boxes1"), _boxes("box_iou", boxes2, "boxes2")
    return box_iou.kernel(a, b)


@op(category="detection", inputs={"boxes1": "N E", "boxes2": "M E"}, output="N M",
    dtypes=_FLOATS, reference=lambda boxes1, boxes2: _np_iou(boxes1, boxes2),
    frontend=_box_iou_frontend, make_inputs=_box_inputs, example={"N": 60, "M": 40, "E": 4})
def box_iou(boxes1, boxes2, *, dims):
    """out[n, m] = IoU(boxes1[n], boxes2[m])."""
    m, n = hl.Var("m"), hl.Var("n")
    out = hl.Func("out")
    out[m, n] = _iou([boxes1[e, n] for e in range(4)], [boxes2[e, m] for e in range(4)])
    return out


_FMTS = ("xyxy", "xywh", "cxcywh")


def _np_convert(b, in_fmt, out_fmt):
    b = np.asarray(b)
    half = b.dtype.type(0.5)
    c = [b[:, i] for i in range(4)]
    if in_fmt == "xywh":
        c = [c[0], c[1], c[0] + c[2], c[1] + c[3]]
    elif in_fmt == "cxcywh":
        c = [c[0] - half * c[2], c[1] - half * c[3], c[0] + half * c[2], c[1] + half * c[3]]
    if out_fmt == "xywh":
        c = [c[0], c[1], c[2] - c[0], c[3] - c[1]]
    elif out_fmt == "cxcywh":
        c = [(c[0] + c[2]) / b.dtype.type(2), (c[1] + c[3]) / b.dtype.type(2), c[2] - c[0],
             c[3] - c[1]]
    return np.stack(c, axis=1).astype(b.dtype)


def _box_convert_frontend(boxes, in_fmt, out_fmt):
    """``torchvision.ops.box_convert`` between ``"xyxy"``, ``"xywh"`` and ``"cxcywh"``."""
    return box_convert.kernel(_boxes("box_convert", boxes), in_fmt=in_fmt, out_fmt=out_fmt)


@op(category="detection", inputs={"boxes": "N E"}, output="N E", dtypes=_FLOATS,
    params=[Param("in_fmt", str, "xyxy", choices=_FMTS, doc="format of the input"),
            Param("out_fmt", str, "cxcywh", choices=_FMTS, doc="format of the output")],
    reference=_np_convert, kernel_reference=lambda boxes, in_fmt="xyxy", out_fmt="cxcywh":
    _np_convert(boxes, in_fmt, out_fmt), frontend=_box_convert_frontend,
    validate=lambda d, p: None if d["E"] == 4 else (_ for _ in ()).throw(
        ShapeError(f"box_convert: boxes must be [N, 4], got {d['E']} columns")),
    example={"N": 100, "E": 4})
def box_convert(boxes, *, in_fmt, out_fmt, dims):
    """Each row converted through (x1, y1, x2, y2)."""
    e, n = hl.Var("e"), hl.Var("n")
    t = boxes.type()
    half, two = hl.cast(t, 0.5), hl.cast(t, 2)
    c = [boxes[i, n] for i in range(4)]
    if in_fmt == "xywh":
        c = [c[0], c[1], c[0] + c[2], c[1] + c[3]]
    elif in_fmt == "cxcywh":
        c = [c[0] - half * c[2], c[1] - half * c[3], c[0] + half * c[2], c[1] + half * c[3]]
    if out_fmt == "xywh":
        c = [c[0], c[1], c[2] - c[0], c[3] - c[1]]
    elif out_fmt == "cxcywh":
        c = [(c[0] + c[2]) / two, (c[1] + c[3]) / two, c[2] - c[0], c[3] - c[1]]
    out = hl.Func("out")
    out[e, n] = hl.strict_float(hl.mux(e, c))
    return out


# -- nms and batched_nms -------------------------------------------------------------------------

def _np_nms(boxes, scores, thr, idxs=None):
    """A straightforward greedy NMS (stable descending order): the reference."""
    boxes, scores = np.asarray(boxes), np.asarray(scores)
    key = np.where(np.isnan(scores), -np.inf, scores.astype(np.float64))
    order = sorted(range(len(scores)), key=lambda i: (-key[i], np.isnan(scores[i]), i))
    iou = _np_iou(boxes, boxes).astype(np.float64)   # compared with the threshold in float64
    thr = float(thr)
    kept = []
    for i in order:
        if all(not (iou[j, i] > thr and (idxs is None or idxs[j] == idxs[i])) for j in kept):
            kept.append(i)
    keep = np.full(len(scores), -1, np.int64)
    keep[:len(kept)] = kept
    return keep, np.asarray(len(kept), np.int64)


def _nms_alg(x_boxes, scores, cats, thr, dims):
    n_ = dims.N
    j, t, a, w, one = hl.Var("j"), hl.Var("t"), hl.Var("a"), hl.Var("w"), hl.Var("k")
    k = hl.RDom([hl.Range(0, n_)], "k")
    ks, kj = _key(scores[k], False), _key(scores[j], False)   # NaN lowest: it sorts last
    rank = hl.Func("rank")
    rank[j] = 0
    rank[j] += hl.select((ks > kj) | ((ks == kj) & (k.x < j)), 1, 0)
    r2 = hl.RDom([hl.Range(0, n_)], "r2")
    order = hl.Func("order")
    order[t] = 0
    order[hl.clamp(rank[r2], 0, n_ - 1)] = r2.x

    def box(i):
        src = hl.clamp(order[hl.clamp(i, 0, n_ - 1)], 0, n_ - 1)
        return [x_boxes[e, src] for e in range(4)], (cats[src] if cats is not None else None)

    bit = hl.RDom([hl.Range(0, 64)], "bit")
    b = w * 64 + bit
    (ba, ca), (bb, cb) = box(a), box(b)
    hit = (b > a) & (b < n_) & (hl.cast(hl.Float(64), _iou(ba, bb)) > lit64(thr))
    if cats is not None:
        hit = hit & (ca == cb)
    u64 = hl.UInt(64)
    mask = hl.Func("mask")
    mask[w, a] = hl.cast(u64, 0)
    mask[w, a] = mask[w, a] | hl.select(hit, hl.cast(u64, 1) << hl.cast(u64, bit), hl.cast(u64, 0))
    words = (n_ + 63) / 64
    seq = hl.RDom([hl.Range(0, words), hl.Range(0, n_)], "seq")
    removed = hl.Func("removed")
    removed[w] = hl.cast(u64, 0)
    alive = ((removed[seq.y / 64] >> hl.cast(u64, seq.y % 64)) & hl.cast(u64, 1)) == 0
    removed[seq.x] = removed[seq.x] | hl.select(alive, mask[seq.x, seq.y], hl.cast(u64, 0))
    kept = hl.Func("kept")
    kept[a] = hl.cast(hl.Int(32), ((removed[a / 64] >> hl.cast(u64, a % 64)) & 1) == 0)
    pos = hl.Func("pos")                 # kept boxes before position a
    pos[a] = 0
    s = hl.RDom([hl.Range(1, n_ - 1)], "s")
    pos[s.x] = pos[s.x - 1] + kept[s.x - 1]
    nv = hl.Var("n")
    keep = hl.Func("keep")
    keep[nv] = hl.cast(hl.Int(64), -1)
    put = hl.RDom([hl.Range(0, n_)], "put")
    put.where(kept[put.x] != 0)
    keep[hl.clamp(pos[put.x], 0, n_ - 1)] = hl.cast(hl.Int(64), order[put.x])
    count = hl.Func("count")
    count[one] = hl.cast(hl.Int(64), pos[n_ - 1] + kept[n_ - 1])
    return keep, count


def _nms_common(name, boxes, scores, iou_threshold, idxs=None):
    b = _boxes(name, boxes)
    s = as_array(scores, name, "scores")
    arrs = [b, s] + ([as_array(idxs, name, "idxs")] if idxs is not None else [])
    if traced(arrs):
        arrs = as_traced(arrs)
    if arrs[1].shape != (b.shape[0],):
        raise ShapeError(f"{name}: scores must be [N] = ({b.shape[0]},), got {arrs[1].shape}")
    if idxs is not None:
        if arrs[2].shape != (b.shape[0],):
            raise ShapeError(f"{name}: idxs must be [N] = ({b.shape[0]},), got {arrs[2].shape}")
        if arrs[2].dtype.name not in ("int32", "int64"):
            raise DtypeError(f"{name}: idxs must be int32 or int64, got {arrs[2].dtype.name}")
    if isinstance(iou_threshold, bool) or not isinstance(iou_threshold, (int, float)):
        raise ParamError(f"{name}: 'iou_threshold' must be a number, got {iou_threshold!r}")
    the_op = batched_nms if idxs is not None else nms
    keep, count = the_op.kernel(*arrs, iou_threshold=float(iou_threshold))
    return keep, count.reshape(())


def _nms_inputs(dims, dtypes, params, rng):
    n = dims["N"]
    xy = rng.uniform(0, 40, (n, 2))
    boxes = np.concatenate([xy, xy + rng.uniform(5, 30, (n, 2))], 1).astype(dtypes[0])
    out = [boxes, rng.integers(0, 8, n).astype(dtypes[1])]      # integer scores: many ties
    if len(dtypes) > 2:
        out.append(rng.integers(0, 3, n).astype(dtypes[2]))
    return out


_THR = Param("iou_threshold", float, 0.5, low=-1.0, high=2.0, doc="drop above this IoU")


def _nms_frontend(boxes, scores, iou_threshold):
    """Greedy non-maximum suppression (``torchvision.ops.nms``); returns ``(keep, count)``:
    ``keep[:count]`` are the kept indices by decreasing score, the rest of ``keep`` is -1."""
    return _nms_common("nms", boxes, scores, iou_threshold)


@op(category="detection", inputs={"boxes": "N E", "scores": "N"},
    outputs={"keep": "N", "count": "K"}, dtypes=_FLOATS, params=[_THR],
    reference=lambda boxes, scores, iou_threshold: _np_nms(boxes, scores, iou_threshold),
    kernel_reference=lambda boxes, scores, iou_threshold=0.5: (lambda k, c: (k, c.reshape(1)))(
        *_np_nms(boxes, scores, iou_threshold)),
    frontend=_nms_frontend, derive=lambda d, p: {"K": 1}, make_inputs=_nms_inputs,
    example={"N": 200, "E": 4})
def nms(boxes, scores, *, iou_threshold, dims):
    """Greedy NMS: keep [N] (kept indices then -1) and count [1]."""
    return _nms_alg(boxes, scores, None, iou_threshold, dims)


def _batched_frontend(boxes, scores, idxs, iou_threshold):
    """``torchvision.ops.batched_nms``: NMS within each category ``idxs``; returns
    ``(keep, count)`` like :func:`nms`."""
    return _nms_common("batched_nms", boxes, scores, iou_threshold, idxs)


@op(category="detection", inputs={"boxes": "N E", "scores": "N", "idxs": "N"},
    outputs={"keep": "N", "count": "K"},
    dtypes=[(f, f, i) for f in _FLOATS for i in ("int64", "int32")], params=[_THR],
    reference=lambda boxes, scores, idxs, iou_threshold: _np_nms(boxes, scores, iou_threshold,
                                                                np.asarray(idxs)),
    kernel_reference=lambda boxes, scores, idxs, iou_threshold=0.5: (
        lambda k, c: (k, c.reshape(1)))(*_np_nms(boxes, scores, iou_threshold, idxs)),
    frontend=_batched_frontend, derive=lambda d, p: {"K": 1}, make_inputs=_nms_inputs,
    example={"N": 200, "E": 4})
def batched_nms(boxes, scores, idxs, *, iou_threshold, dims):
    """NMS among boxes of one category: keep [N] and count [1]."""
    return _nms_alg(boxes, scores, idxs, iou_threshold, dims)
