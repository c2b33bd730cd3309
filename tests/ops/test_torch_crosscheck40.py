"""PyTorch cross-checks that tests/ops/test_torch_crosscheck.py leaves out.

That file checks every op once at a small and once at an odd size. An audit of it (and of every
other test that compares with torch) found two kinds of gap, filled here:

1. Ops torch has only through torchvision, which cannot be imported here, so that all their
   checks skip: box_iou, box_convert, nms, batched_nms, roi_pool, roi_align and anchor_boxes.
   Each is checked below against torchvision's documented algorithm written out in torch ops
   (its CPU kernels' loops, vectorized; the arithmetic is torch's).
2. Parameters and inputs that change semantics but were only run at one setting: NaN/inf/-0.0
   inputs of the elementwise ops, the integer dtypes the ops declare (int16, int64, uint8,
   bool), ``axis=None``/tuple axes/``keepdims`` and NaN rows of the reductions, ``axis=None``
   of the scans and layout ops, NaN and ties in sort/argsort/topk, the loss ``reduction``s,
   ``weight``/``pos_weight``/``ignore_index``/``label_smoothing``/``log_target``, grid_sample's
   ``mode="nearest"``, instance_norm's affine form (running statistics passed but unused), the
   ``eps`` of the distances, and non-contiguous (transposed, strided, reversed) inputs.

Settings PyPTO once refused and torch computes (vector_norm with ord < 0, threshold at -inf,
instance_norm with use_input_stats=False) are checked against torch at the end;
roi_align's adaptive sampling_ratio=-1 (torchvision's default, and PyPTO's) is checked there
too.

Conventions where PyPTO follows NumPy (or torchvision's older default) rather than torch are
asserted as such, each marked CONVENTION below, so that a change to either side shows up.

Tolerances: float64 ``rtol=1e-12`` and float32 ``rtol=2e-6`` (a few ulp) unless a case says why
it needs more (a different but equally rounded algorithm: float32 accumulation order in torch,
or a formula torch evaluates in another order).
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

import pypto.ops as P

torch = pytest.importorskip("torch")
F = torch.nn.functional

FLOATS = ("float32", "float64")
TOL = {"float32": (2e-6, 1e-6), "float64": (1e-12, 1e-14), "float16": (1e-3, 1e-3)}
SPECIALS = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.5, -2.5, 1e-30, -1e-30,
            3.0, -7.25, 88.0, -88.0, 1e10, -1e10]
CASES: list = []


def T(a):
    return torch.from_numpy(np.ascontiguousarray(a))


def rng(seed=0):
    return np.random.default_rng(seed)


def u(shape, dt, low=-3.0, high=3.0, seed=0):
    r = rng(seed)
    if np.dtype(dt).kind == "f":
        return r.uniform(low, high, size=shape).astype(dt)
    if np.dtype(dt).kind == "b":
        return r.random(shape) < 0.5
    info = np.iinfo(dt)
    return r.integers(max(info.min, int(low)), min(info.max, int(high)) + 1, size=shape).astype(dt)


def case(cid, dt, got, want, rtol=None, atol=None):
    """``got()`` runs PyPTO, ``want()`` torch; compared in ``dt``'s tolerance."""
    CASES.append(pytest.param(got, want, dt, rtol, atol, id=cid))


def _np(v):
    if isinstance(v, torch.Tensor):
        return v.numpy()
    return np.asarray(v)


def close(got, want, dt, rtol=None, atol=None, msg=""):
    got, want = np.asarray(got), _np(want)
    assert got.shape == want.shape, f"{msg}: shape {got.shape} != torch {want.shape}"
    if got.dtype.kind == "f" or want.dtype.kind == "f":
        r, a = TOL.get(dt, (0.0, 0.0)) if np.dtype(dt).kind == "f" else TOL[got.dtype.name]
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64),
                                   rtol=r if rtol is None else rtol,
                                   atol=a if atol is None else atol, equal_nan=True,
                                   err_msg=msg)
    else:
        np.testing.assert_array_equal(got, want.astype(got.dtype) if got.dtype == bool
                                      else want, err_msg=msg)


@pytest.mark.parametrize("got,want,dt,rtol,atol", CASES)
def test_agrees_with_torch(got, want, dt, rtol, atol):
    g, w = got(), want()
    if isinstance(w, (tuple, list)):
        assert isinstance(g, (tuple, list)) and len(g) == len(w)
        for gi, wi in zip(g, w):
            close(gi, wi, dt, rtol, atol)
    else:
        close(g, w, dt, rtol, atol)


# == 1. the torchvision ops, against its algorithms written in torch =============================
def boxes(n, dt, seed=0, span=40.0):
    r = rng(seed)
    xy = r.uniform(0, span, (n, 2))
    return np.concatenate([xy, xy + r.uniform(1, 30, (n, 2))], 1).astype(dt)


def t_box_area(b):
    return (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])


def t_box_iou(b1, b2):
    """torchvision.ops.box_iou (_box_inter_union)."""
    a1, a2 = t_box_area(b1), t_box_area(b2)
    lt = torch.max(b1[:, None, :2], b2[:, :2])
    rb = torch.min(b1[:, None, 2:], b2[:, 2:])
    wh = (rb - lt).clamp(min=0)
    inter = wh[:, :, 0] * wh[:, :, 1]
    return inter / (a1[:, None] + a2 - inter)


def t_box_convert(b, in_fmt, out_fmt):
    """torchvision.ops.box_convert: through xyxy."""
    if in_fmt == "xywh":
        x, y, w, h = b.unbind(-1)
        b = torch.stack([x, y, x + w, y + h], -1)
    elif in_fmt == "cxcywh":
        cx, cy, w, h = b.unbind(-1)
        b = torch.stack([cx - 0.5 * w, cy - 0.5 * h, cx + 0.5 * w, cy + 0.5 * h], -1)
    x1, y1, x2, y2 = b.unbind(-1)
    if out_fmt == "xywh":
        return torch.stack([x1, y1, x2 - x1, y2 - y1], -1)
    if out_fmt == "cxcywh":
        return torch.stack([(x1 + x2) / 2, (y1 + y2) / 2, x2 - x1, y2 - y1], -1)
    return torch.stack([x1, y1, x2, y2], -1)


def t_nms(b, s, thr):
    """torchvision's nms_kernel (CPU): scores sorted descending, IoU in the boxes' dtype compared
    with the (double) threshold: ``ovr > iou_threshold`` suppresses. Returns keep padded with -1
    to N, and the count (PyPTO's fixed-size form)."""
    n = b.shape[0]
    order = torch.sort(s, descending=True, stable=True).indices
    areas = t_box_area(b)
    sup = torch.zeros(n, dtype=torch.bool)
    keep = []
    for ii in range(n):
        i = int(order[ii])
        if sup[i]:
            continue
        keep.append(i)
        j = order[ii + 1:]
        w = (torch.min(b[i, 2], b[j, 2]) - torch.max(b[i, 0], b[j, 0])).clamp(min=0)
        h = (torch.min(b[i, 3], b[j, 3]) - torch.max(b[i, 1], b[j, 1])).clamp(min=0)
        inter = w * h
        ovr = inter / (areas[i] + areas[j] - inter)
        sup[j[ovr.double() > thr]] = True
    full = torch.full((n,), -1, dtype=torch.int64)
    full[:len(keep)] = torch.tensor(keep, dtype=torch.int64)
    return full, torch.tensor(len(keep), dtype=torch.int64)


def t_batched_nms(b, s, idx, thr):
    """torchvision's _batched_nms_vanilla: nms per category, the kept indices by score."""
    keep = torch.zeros(b.shape[0], dtype=torch.bool)
    for c in torch.unique(idx):
        m = torch.where(idx == c)[0]
        k, cnt = t_nms(b[m], s[m], thr)
        keep[m[k[:int(cnt)]]] = True
    kept = torch.where(keep)[0]
    kept = kept[torch.sort(s[kept], descending=True, stable=True).indices]
    full = torch.full((b.shape[0],), -1, dtype=torch.int64)
    full[:len(kept)] = kept
    return full, torch.tensor(len(kept), dtype=torch.int64)


def _cround(v):
    """C's round (half away from zero), as torchvision's roi_pool kernel uses."""
    return math.floor(v + 0.5) if v >= 0 else -math.floor(-v + 0.5)


def t_roi_pool(x, rois, output_size, spatial_scale=1.0):
    """torchvision's roi_pool_forward_kernel_impl (CPU), bin by bin."""
    ph_n, pw_n = (output_size, output_size) if isinstance(output_size, int) else output_size
    _, c, h, w = x.shape
    out = torch.zeros(rois.shape[0], c, ph_n, pw_n, dtype=x.dtype)
    for k, r in enumerate(rois.tolist()):
        n = int(r[0])
        x1, y1, x2, y2 = (_cround(v * spatial_scale) for v in r[1:])
        rw, rh = max(x2 - x1 + 1, 1), max(y2 - y1 + 1, 1)
        bh = torch.tensor(rh, dtype=x.dtype) / ph_n
        bw = torch.tensor(rw, dtype=x.dtype) / pw_n
        for ph in range(ph_n):
            hs = min(max(int(torch.floor(ph * bh)) + y1, 0), h)
            he = min(max(int(torch.ceil((ph + 1) * bh)) + y1, 0), h)
            for pw in range(pw_n):
                ws = min(max(int(torch.floor(pw * bw)) + x1, 0), w)
                we = min(max(int(torch.ceil((pw + 1) * bw)) + x1, 0), w)
                if he > hs and we > ws:
                    out[k, :, ph, pw] = x[n, :, hs:he, ws:we].amax(dim=(-2, -1))
    return out


def _bilinear(img, y, x):
    """torchvision's roi_align bilinear_interpolate for one channel stack img [C, H, W] at the
    scalar-tensor position (y, x)."""
    _, h, w = img.shape
    if y < -1.0 or y > h or x < -1.0 or x > w:
        return torch.zeros(img.shape[0], dtype=img.dtype)
    y, x = y.clamp(min=0), x.clamp(min=0)
    yl, xl = int(y), int(x)
    if yl >= h - 1:
        yh = yl = h - 1
        y = torch.tensor(float(yl), dtype=img.dtype)
    else:
        yh = yl + 1
    if xl >= w - 1:
        xh = xl = w - 1
        x = torch.tensor(float(xl), dtype=img.dtype)
    else:
        xh = xl + 1
    ly, lx = y - yl, x - xl
    hy, hx = 1.0 - ly, 1.0 - lx
    return (hy * hx * img[:, yl, xl] + hy * lx * img[:, yl, xh] + ly * hx * img[:, yh, xl]
            + ly * lx * img[:, yh, xh])


def t_roi_align(x, rois, output_size, spatial_scale=1.0, sampling_ratio=-1, aligned=False):
    """torchvision's roi_align_forward_kernel_impl (CPU), sample by sample, in x's dtype."""
    ph_n, pw_n = (output_size, output_size) if isinstance(output_size, int) else output_size
    dt = x.dtype
    off = 0.5 if aligned else 0.0
    out = torch.zeros(rois.shape[0], x.shape[1], ph_n, pw_n, dtype=dt)
    for k in range(rois.shape[0]):
        r = rois[k]
        n = int(r[0])
        x1, y1, x2, y2 = (r[i] * spatial_scale - off for i in range(1, 5))
        rw, rh = x2 - x1, y2 - y1
        if not aligned:
            rw, rh = rw.clamp(min=1.0), rh.clamp(min=1.0)
        bh, bw = rh / ph_n, rw / pw_n
        gh = sampling_ratio if sampling_ratio > 0 else int(math.ceil(rh / ph_n))
        gw = sampling_ratio if sampling_ratio > 0 else int(math.ceil(rw / pw_n))
        count = max(gh * gw, 1)
        for ph in range(ph_n):
            for pw in range(pw_n):
                acc = torch.zeros(x.shape[1], dtype=dt)
                for iy in range(gh):
                    yy = y1 + ph * bh + (iy + 0.5) * bh / gh
                    for ix in range(gw):
                        xx = x1 + pw * bw + (ix + 0.5) * bw / gw
                        acc = acc + _bilinear(x[n], yy, xx)
                out[k, :, ph, pw] = acc / count
    return out


def t_anchor_boxes(feat_h, feat_w, stride, sizes, ratios, dtype="float32"):
    """torchvision's AnchorGenerator.generate_anchors plus grid_anchors."""
    dt = getattr(torch, dtype)
    scales, ar = torch.as_tensor(sizes, dtype=dt), torch.as_tensor(ratios, dtype=dt)
    hr = torch.sqrt(ar)
    wr = 1 / hr
    ws, hs = (wr[:, None] * scales[None, :]).view(-1), (hr[:, None] * scales[None, :]).view(-1)
    base = (torch.stack([-ws, -hs, ws, hs], dim=1) / 2).round()
    sh, sw = stride if isinstance(stride, tuple) else (stride, stride)
    shift_x = torch.arange(0, feat_w, dtype=torch.int32) * torch.tensor(sw)
    shift_y = torch.arange(0, feat_h, dtype=torch.int32) * torch.tensor(sh)
    yy, xx = torch.meshgrid(shift_y, shift_x, indexing="ij")
    xx, yy = xx.reshape(-1), yy.reshape(-1)
    shifts = torch.stack((xx, yy, xx, yy), dim=1)
    return (shifts.view(-1, 1, 4) + base.view(1, -1, 4)).reshape(-1, 4)


for dt in FLOATS:
    for n1, n2 in ((1, 1), (4, 7), (13, 5)):
        b1, b2 = boxes(n1, dt, 1), boxes(n2, dt, 2)
        case(f"box_iou-{dt}-{n1}x{n2}", dt, lambda b1=b1, b2=b2: P.box_iou(b1, b2),
             lambda b1=b1, b2=b2: t_box_iou(T(b1), T(b2)))
    # disjoint, touching and identical boxes: IoU exactly 0 and 1
    bs = np.array([[0, 0, 2, 2], [2, 0, 4, 2], [0, 0, 2, 2], [5, 5, 9, 7]], dt)
    case(f"box_iou-{dt}-edges", dt, lambda bs=bs: P.box_iou(bs, bs),
         lambda bs=bs: t_box_iou(T(bs), T(bs)))
    for fi in ("xyxy", "xywh", "cxcywh"):
        for fo in ("xyxy", "xywh", "cxcywh"):
            b = boxes(5, dt, 3)
            case(f"box_convert-{dt}-{fi}-{fo}", dt,
                 lambda b=b, fi=fi, fo=fo: P.box_convert(b, fi, fo),
                 lambda b=b, fi=fi, fo=fo: t_box_convert(T(b), fi, fo))
    for n, thr, seed in ((1, 0.5, 0), (10, 0.3, 1), (37, 0.5, 2), (70, 0.05, 3)):
        b = boxes(n, dt, seed)
        s = rng(seed).permutation(n).astype(dt) / n      # distinct: torch's tie order is free
        case(f"nms-{dt}-{n}-{thr}", dt, lambda b=b, s=s, thr=thr: P.nms(b, s, thr),
             lambda b=b, s=s, thr=thr: t_nms(T(b), T(s), thr))
        idx = rng(seed + 7).integers(0, 3, n).astype(np.int64)
        case(f"batched_nms-{dt}-{n}-{thr}", dt,
             lambda b=b, s=s, i=idx, thr=thr: P.batched_nms(b, s, i, thr),
             lambda b=b, s=s, i=idx, thr=thr: t_batched_nms(T(b), T(s), T(i), thr))


def rois(k, n, h, w, dt, seed):
    r = rng(seed)
    xy = r.uniform(-1.5, max(h, w) + 0.5, (k, 2, 2))
    return np.concatenate([r.integers(0, n, (k, 1)), xy.min(1), xy.max(1)], 1).astype(dt)


for dt in FLOATS:
    for (n, c, h, w), k, osz, kw in (
            ((1, 1, 1, 1), 2, 1, {}),
            ((1, 2, 8, 8), 3, 2, {}),
            ((2, 3, 9, 7), 4, (3, 2), {"spatial_scale": 0.5}),
            ((2, 2, 5, 11), 5, (1, 3), {"spatial_scale": 1.5})):
        x = u((n, c, h, w), dt, seed=4)
        rr = rois(k, n, h, w, dt, 5)
        case(f"roi_pool-{dt}-{h}x{w}-{osz}", dt,
             lambda x=x, rr=rr, osz=osz, kw=kw: P.roi_pool(x, rr, osz, **kw),
             lambda x=x, rr=rr, osz=osz, kw=kw: t_roi_pool(T(x), T(rr), osz, **kw))
        for kw2 in (({}, {"sampling_ratio": 3, "aligned": True}) if h % 2 else
                    ({"aligned": True}, {"sampling_ratio": 1})):
            kwa = dict(kw, **kw2)
            # float32: torchvision accumulates the samples in another order
            case(f"roi_align-{dt}-{h}x{w}-{osz}-{sorted(kwa.items())}", dt,
                 lambda x=x, rr=rr, osz=osz, kw=kwa: P.roi_align(x, rr, osz, **kw),
                 lambda x=x, rr=rr, osz=osz, kw=kwa: t_roi_align(T(x), T(rr), osz, **kw),
                 rtol=1e-5 if dt == "float32" else 1e-12,
                 atol=1e-5 if dt == "float32" else 1e-13)

for kw in ({"feat_h": 1, "feat_w": 1, "stride": 16, "sizes": (32,), "ratios": (1.0,)},
           {"feat_h": 3, "feat_w": 2, "stride": 16, "sizes": (32, 64, 128),
            "ratios": (0.5, 1.0, 2.0)},
           {"feat_h": 5, "feat_w": 7, "stride": (8, 4), "sizes": (13.0, 22.0),
            "ratios": (0.25, 1.0, 3.0), "dtype": "float64"}):
    dt = kw.get("dtype", "float32")
    case(f"anchor_boxes-{dt}-{kw['feat_h']}x{kw['feat_w']}", dt,
         lambda kw=kw: P.anchor_boxes(**kw), lambda kw=kw: t_anchor_boxes(**kw))


# == 2a. elementwise ops on NaN, +-inf, +-0 and the usual values ===============================
def specials(dt):
    x = np.array(SPECIALS, dtype=np.float64)
    with np.errstate(over="ignore"):
        return x.astype(dt)


UNARY = {
    "abs": torch.abs, "acos": torch.acos, "acosh": torch.acosh, "asin": torch.asin,
    "asinh": torch.asinh, "atan": torch.atan, "atanh": torch.atanh, "ceil": torch.ceil,
    "cos": torch.cos, "cosh": torch.cosh, "deg2rad": torch.deg2rad, "erf": torch.erf,
    "exp": torch.exp, "exp2": torch.exp2, "expm1": torch.expm1, "floor": torch.floor,
    "log": torch.log, "log10": torch.log10, "log1p": torch.log1p, "log2": torch.log2,
    "neg": torch.neg, "rad2deg": torch.rad2deg, "reciprocal": torch.reciprocal,
    "round": torch.round, "rsqrt": torch.rsqrt, "sigmoid": torch.sigmoid, "sign": torch.sign,
    "sin": torch.sin, "sinh": torch.sinh, "sqrt": torch.sqrt, "square": torch.square,
    "tan": torch.tan, "tanh": torch.tanh, "trunc": torch.trunc, "relu": F.relu,
    "relu6": F.relu6, "elu": F.elu, "celu": F.celu, "selu": F.selu, "gelu": F.gelu,
    "hardshrink": F.hardshrink, "hardsigmoid": F.hardsigmoid, "hardswish": F.hardswish,
    "hardtanh": F.hardtanh, "leaky_relu": F.leaky_relu, "log_sigmoid": F.logsigmoid,
    "mish": F.mish, "silu": F.silu, "softshrink": F.softshrink, "softsign": F.softsign,
    "tanhshrink": F.tanhshrink, "logit": torch.logit, "cbrt": None,
    "isnan": torch.isnan, "isinf": torch.isinf, "isfinite": torch.isfinite,
    "signbit": torch.signbit, "nan_to_num": torch.nan_to_num,
}


def _limit_at_minus_inf(x, want):
    """CONVENTION: where torch's formula meets ``-inf * 0`` (gelu, silu, hardswish, mish at -inf)
    torch returns NaN; PyPTO returns the limit, -0.0 (documented in pypto/ops/activations.py)."""
    return torch.where(torch.isneginf(x), torch.tensor(-0.0, dtype=x.dtype), want)


def _softsign_limits(x, want):
    """CONVENTION: torch's softsign(+-inf) is inf / inf = NaN; PyPTO returns the limit +-1."""
    return torch.where(torch.isinf(x), torch.sign(x), want)


def _sign_nan(x, want):
    """CONVENTION: sign(NaN) is NaN as np.sign; torch.sign(NaN) is 0."""
    return torch.where(torch.isnan(x), x, want)


def _gelu_limits(x, want):
    """CONVENTION: as _limit_at_minus_inf; and torch's float32 CPU gelu gives NaN at +inf (its
    float64 gives inf), PyPTO inf in both."""
    return _limit_at_minus_inf(x, torch.where(torch.isposinf(x), x, want))


UNARY_CONVENTIONS = {"gelu": _gelu_limits, "silu": _limit_at_minus_inf,
                     "hardswish": _limit_at_minus_inf, "mish": _limit_at_minus_inf,
                     "softsign": _softsign_limits, "sign": _sign_nan}


def _unary_want(x, fn, name):
    t = T(x)
    want = fn(t)
    return UNARY_CONVENTIONS[name](t, want) if name in UNARY_CONVENTIONS else want


for name, fn in UNARY.items():
    if fn is None:
        continue
    for dt in FLOATS:
        x = specials(dt)
        if name == "logit":
            x = np.concatenate([x, np.array([0.25, 0.75, 1e-7, 1 - 1e-7], dt)])
        case(f"{name}-{dt}-specials", dt, lambda x=x, n=name: getattr(P, n)(x),
             lambda x=x, f=fn, n=name: _unary_want(x, f, n))

# the parametrized activations at other parameters, specials included
for dt in FLOATS:
    x = np.concatenate([specials(dt), u((23,), dt, -4, 4)])
    for name, kw, fn in (
            ("gelu", {"approximate": "tanh"},
             lambda t: _gelu_limits(t, F.gelu(t, approximate="tanh"))),
            ("elu", {"alpha": 0.3}, lambda t: F.elu(t, 0.3)),
            ("celu", {"alpha": 2.5}, lambda t: F.celu(t, 2.5)),
            ("leaky_relu", {"negative_slope": -0.2}, lambda t: F.leaky_relu(t, -0.2)),
            ("hardtanh", {"min_val": -0.5, "max_val": 2.0}, lambda t: F.hardtanh(t, -0.5, 2.0)),
            ("hardshrink", {"lambd": 2.5}, lambda t: F.hardshrink(t, 2.5)),
            ("softshrink", {"lambd": 0.0}, lambda t: F.softshrink(t, 0.0)),
            ("threshold", {"threshold": 0.5, "value": -2.0}, lambda t: F.threshold(t, 0.5, -2.0)),
            ("logit", {"eps": 1e-3}, lambda t: torch.logit(t, 1e-3)),
            ("softplus", {"beta": 2.0, "threshold": 20.0},
             lambda t: F.softplus(t, beta=2.0, threshold=20.0)),
            ("nan_to_num", {"nan": 1.5, "posinf": 9.0},
             lambda t: torch.nan_to_num(t, nan=1.5, posinf=9.0)),
            ("nan_to_num", {"neginf": -3.0}, lambda t: torch.nan_to_num(t, neginf=-3.0)),
            ("clip", {"min": -1.0, "max": 2.0}, lambda t: torch.clamp(t, -1.0, 2.0)),
            ("clip", {"max": 0.0}, lambda t: torch.clamp(t, max=0.0))):
        case(f"{name}-{dt}-{kw}", dt, lambda x=x, n=name, kw=kw: getattr(P, n)(x, **kw),
             lambda x=x, f=fn: f(T(x)))

# binary ops on every pair of specials
BINARY = {
    "add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div, "pow": torch.pow,
    "maximum": torch.maximum, "minimum": torch.minimum, "fmax": torch.fmax, "fmin": torch.fmin,
    "atan2": torch.atan2, "hypot": torch.hypot, "copysign": torch.copysign, "fmod": torch.fmod,
    "remainder": torch.remainder, "floor_divide": torch.floor_divide,
    "logaddexp": torch.logaddexp, "logaddexp2": torch.logaddexp2, "heaviside": torch.heaviside,
    "equal": torch.eq, "less": torch.lt, "greater_equal": torch.ge,
}


def _exact_mod(np_fn):
    """CONVENTION: fmod and remainder are exact, as C's fmod and NumPy (fmod is documented by
    torch as std::fmod); torch's float32 CPU kernels go through a / b and give NaN where that
    quotient overflows (fmod(1e10, 1e-30)). There the expected value is NumPy's."""
    def patch(a, b, want):
        over = torch.isnan(want) & torch.isfinite(a) & torch.isfinite(b) & (b != 0)
        return torch.where(over, torch.from_numpy(np_fn(a.numpy(), b.numpy())), want)
    return patch


def _heaviside_nan(a, b, want):
    """CONVENTION: heaviside(NaN, h0) is NaN as np.heaviside; torch gives 0."""
    return torch.where(torch.isnan(a), a, want)


BINARY_CONVENTIONS = {"fmod": _exact_mod(np.fmod), "remainder": _exact_mod(np.remainder),
                      "heaviside": _heaviside_nan}


def _binary_want(a, b, fn, name):
    ta, tb = T(a), T(b)
    want = fn(ta, tb)
    return BINARY_CONVENTIONS[name](ta, tb, want) if name in BINARY_CONVENTIONS else want


for name, fn in BINARY.items():
    for dt in FLOATS:
        s = specials(dt)
        a, b = np.meshgrid(s, s, indexing="ij")
        case(f"{name}-{dt}-specials", dt, lambda a=a, b=b, n=name: getattr(P, n)(a, b),
             lambda a=a, b=b, f=fn, n=name: _binary_want(a, b, f, n))


def _t_lerp(a, b, w):
    """CONVENTION: torch.lerp takes its second form, ``end - (end - start) * (1 - weight)``,
    whenever ``|weight| >= 0.5`` (ATen's is_lerp_weight_small), PyPTO only for weight >= 0.5. The
    two agree to rounding on finite values (torch's CPU kernel fuses the product and the add, so
    neither side is bit-identical to the other anyway); at weight <= -0.5 with an infinite
    ``end - start`` torch's form gives inf - inf = NaN and PyPTO the documented
    ``start + weight * (end - start)``, an infinity."""
    ta, tb, tw = T(a), T(b), T(w)
    want = torch.lerp(ta, tb, tw)
    doc = ta + tw * (tb - ta)
    return torch.where((tw <= -0.5) & torch.isinf(tb - ta), doc, want)

for dt in FLOATS:
    s = specials(dt)
    a, b, w = np.meshgrid(s[:8], s[:8], np.array([0.0, 0.5, 1.0, -0.5, 2.0, np.nan], dt),
                          indexing="ij")
    case(f"lerp-{dt}-specials", dt, lambda a=a, b=b, w=w: P.lerp(a, b, w),
         lambda a=a, b=b, w=w: _t_lerp(a, b, w))
    a, b, w = u((200,), dt, seed=42), u((200,), dt, seed=43), u((200,), dt, -3, 3, seed=44)
    case(f"lerp-{dt}-finite", dt, lambda a=a, b=b, w=w: P.lerp(a, b, w),
         lambda a=a, b=b, w=w: torch.lerp(T(a), T(b), T(w)))

# -- integer dtypes the ops declare beyond the main file's
INT_UNARY = {"abs": torch.abs, "neg": torch.neg, "square": torch.square, "sign": torch.sign,
             "relu": F.relu}
for name, fn in INT_UNARY.items():
    for dt in ("int16", "int64"):
        info = np.iinfo(dt)
        x = np.concatenate([u((17,), dt, -100, 100), np.array([0, 1, -1, info.max, info.min + 1],
                                                               dt)])
        case(f"{name}-{dt}", dt, lambda x=x, n=name: getattr(P, n)(x),
             lambda x=x, f=fn: f(T(x)))

INT_BINARY = {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "maximum": torch.maximum,
              "minimum": torch.minimum, "fmax": torch.fmax, "fmin": torch.fmin,
              "floor_divide": torch.floor_divide, "remainder": torch.remainder,
              "fmod": torch.fmod}
for name, fn in INT_BINARY.items():
    a = u((5, 7), "int64", -50, 50, seed=1)
    b = u((7,), "int64", -9, 9, seed=2)
    b[b == 0] = 3
    case(f"{name}-int64", "int64", lambda a=a, b=b, n=name: getattr(P, n)(a, b),
         lambda a=a, b=b, f=fn: f(T(a), T(b)))

for dt in ("int16", "int64"):
    x = u((4, 9), dt, -300, 300)
    case(f"clip-{dt}", dt, lambda x=x: P.clip(x, -7, 40), lambda x=x: torch.clamp(T(x), -7, 40))

for name, fn in (("bitwise_and", torch.bitwise_and), ("bitwise_or", torch.bitwise_or),
                 ("bitwise_xor", torch.bitwise_xor)):
    for dt in ("uint8", "int16", "bool"):
        a, b = u((3, 11), dt, 0, 255, 3), u((3, 11), dt, 0, 255, 4)
        case(f"{name}-{dt}", dt, lambda a=a, b=b, n=name: getattr(P, n)(a, b),
             lambda a=a, b=b, f=fn: f(T(a), T(b)))
for dt in ("uint8", "int16", "bool"):
    x = u((3, 11), dt, 0, 255, 5)
    case(f"bitwise_not-{dt}", dt, lambda x=x: P.bitwise_not(x),
         lambda x=x: torch.bitwise_not(T(x)))
for name, fn in (("left_shift", torch.bitwise_left_shift),
                 ("right_shift", torch.bitwise_right_shift)):
    for dt in ("uint8", "int16"):
        bits = np.dtype(dt).itemsize * 8
        a = u((4, 8), dt, -1000 if dt == "int16" else 0, 1000, 6)
        b = rng(7).integers(0, bits, (4, 8)).astype(dt)
        case(f"{name}-{dt}", dt, lambda a=a, b=b, n=name: getattr(P, n)(a, b),
             lambda a=a, b=b, f=fn: f(T(a), T(b)))
for name, fn in (("equal", torch.eq), ("not_equal", torch.ne), ("greater", torch.gt),
                 ("less_equal", torch.le)):
    for dt in ("int8", "int16", "uint8"):
        a, b = u((4, 9), dt, 0, 4, 8), u((9,), dt, 0, 4, 9)
        case(f"{name}-{dt}", dt, lambda a=a, b=b, n=name: getattr(P, n)(a, b),
             lambda a=a, b=b, f=fn: f(T(a), T(b)))

# cast: to bool (NaN is true in both), bool and ints to floats, float to float16
for dt in FLOATS:
    x = specials(dt)
    case(f"cast-{dt}-bool", dt, lambda x=x: P.cast(x, "bool"), lambda x=x: T(x).to(torch.bool))
    case(f"cast-{dt}-float16", "float16", lambda x=x: P.cast(x, "float16"),
         lambda x=x: T(x).to(torch.float16), rtol=0, atol=0)
for dt in ("bool", "uint8", "int64"):
    x = u((13,), dt, -100, 200)
    case(f"cast-{dt}-float32", "float32", lambda x=x: P.cast(x, "float32"),
         lambda x=x: T(x).to(torch.float32))


# == 2b. reductions: axis None / tuples / keepdims, NaN rows, integer dtypes ====================
def red_input(dt, nan=False, seed=0):
    x = u((3, 5, 4), dt, -3, 3, seed)
    if nan:
        x[0, 1, 2] = np.nan       # one NaN in some rows
        x[1, :, 0] = np.nan       # a row of NaN along axis 1
        x[2, 3, 1] = np.inf
    return x


def tdim(x, axis):
    return tuple(range(x.ndim)) if axis is None else axis


AXES = [(None, False), ((0, 2), False), (1, True), (-1, False), ((0, 1, 2), True)]
for dt in FLOATS:
    for nan in (False, True):
        x = red_input(dt, nan)
        for axis, kd in AXES:
            d = tdim(x, axis)
            for name, fn in (
                    ("sum", lambda t, d, k: torch.sum(t, d, keepdim=k)),
                    ("mean", lambda t, d, k: torch.mean(t, d, keepdim=k)),
                    ("max", lambda t, d, k: torch.amax(t, d, keepdim=k)),
                    ("min", lambda t, d, k: torch.amin(t, d, keepdim=k)),
                    ("nansum", lambda t, d, k: torch.nansum(t, d, keepdim=k)),
                    ("nanmean", lambda t, d, k: torch.nanmean(t, d, keepdim=k)),
                    ("logsumexp", lambda t, d, k: torch.logsumexp(t, d, keepdim=k)),
                    ("all", lambda t, d, k: torch.all(t != 0, d, keepdim=k) if
                     isinstance(d, int) else torch.all(t != 0).reshape((1,) * t.dim() if k
                                                                       else ())),
                    ("count_nonzero", lambda t, d, k: torch.sum(t != 0, d, keepdim=k)),
                    ("var", lambda t, d, k: torch.var(t, d, correction=0, keepdim=k)),
                    ("std", lambda t, d, k: torch.std(t, d, correction=2, keepdim=k)),
                    ("vector_norm", lambda t, d, k: torch.linalg.vector_norm(t, 2, d,
                                                                            keepdim=k))):
                if name == "all" and not (axis is None or isinstance(axis, int)):
                    continue
                kw = {"axis": axis, "keepdims": kd}
                if name == "std":
                    kw["ddof"] = 2
                # float32: torch sums in float32 (pairwise), PyPTO in float64
                rt = 1e-5 if dt == "float32" else None
                case(f"{name}-{dt}-axis{axis}-kd{kd}-nan{nan}", dt,
                     lambda x=x, n=name, kw=kw: getattr(P, n)(x, **kw),
                     lambda x=x, f=fn, d=d, k=kd: f(T(x), d, k), rtol=rt, atol=rt)
        for axis in (None, 1, -1):
            for name, fn in (("argmax", torch.argmax), ("argmin", torch.argmin)):
                for kd in (False, True):
                    case(f"{name}-{dt}-axis{axis}-kd{kd}-nan{nan}", dt,
                         lambda x=x, n=name, a=axis, k=kd: getattr(P, n)(x, axis=a, keepdims=k),
                         lambda x=x, f=fn, a=axis, k=kd: f(T(x), dim=a, keepdim=k))

for dt in FLOATS:
    x = red_input(dt)
    for ord_ in (2, math.inf, -math.inf, 0, 1, 0.5):
        for axis in (None, 1, (0, 2)):
            case(f"vector_norm-{dt}-ord{ord_}-axis{axis}", dt,
                 lambda x=x, o=ord_, a=axis: P.vector_norm(x, o, a),
                 lambda x=x, o=ord_, a=axis: torch.linalg.vector_norm(T(x), o, a),
                 rtol=1e-5 if dt == "float32" else None)
    # logsumexp of rows holding +-inf and of a row of -inf only
    x = np.array([[-np.inf, -np.inf, -np.inf], [np.inf, 1.0, 2.0], [-np.inf, 0.0, 1.0],
                  [np.inf, np.inf, 0.0], [np.nan, 1.0, np.inf]], dt)
    case(f"logsumexp-{dt}-infrows", dt, lambda x=x: P.logsumexp(x, axis=1),
         lambda x=x: torch.logsumexp(T(x), 1))

for dt in ("int32", "int64"):
    x = u((3, 5, 4), dt, -9, 9)
    for axis, kd in AXES:
        d = tdim(x, axis)
        case(f"sum-{dt}-axis{axis}", dt,
             lambda x=x, a=axis, k=kd: P.sum(x, axis=a, keepdims=k),
             lambda x=x, d=d, k=kd: torch.sum(T(x), d, keepdim=k))
        case(f"max-{dt}-axis{axis}", dt,
             lambda x=x, a=axis, k=kd: P.max(x, axis=a, keepdims=k),
             lambda x=x, d=d, k=kd: torch.amax(T(x), d, keepdim=k))
    for axis in (1, -1):
        case(f"prod-{dt}-axis{axis}", dt, lambda x=x, a=axis: P.prod(x, axis=a),
             lambda x=x, a=axis: torch.prod(T(x), a))
    case(f"prod-{dt}-all", dt, lambda x=x: P.prod(x[:, :2, :2]),
         lambda x=x: torch.prod(T(x[:, :2, :2])))

# (median compiles a long selection network per shape and dtype: a few cases, sharing one)
x = u((3, 6, 5), "float64", seed=4)
# CONVENTION: NumPy's median (the mean of the two middle values, torch.quantile 0.5), not
# torch.median (the lower middle).
case("median-float64-even-keepdims", "float64", lambda x=x: P.median(x, axis=1, keepdims=True),
     lambda x=x: torch.quantile(T(x), 0.5, dim=1, keepdim=True))
x = x.copy()
x[0, 2, 1] = np.nan
case("median-float64-nan", "float64", lambda x=x: P.median(x, axis=1),
     lambda x=x: torch.quantile(T(x), 0.5, dim=1))
x = u((4, 7), "float32", seed=5)      # torch.median (the lower middle) equals NumPy's on odd lengths
case("median-float32-odd-vs-torch.median", "float32", lambda x=x: P.median(x, axis=-1),
     lambda x=x: torch.median(T(x), dim=-1).values)


def test_nanmax_of_an_all_nan_row_is_nan_as_numpy():
    """CONVENTION: torch has no nanmax; its usual spelling, amax of nan_to_num(-inf), gives -inf
    on an all-NaN row, and PyPTO gives NaN as np.nanmax does (torch.nanmean gives NaN too)."""
    x = np.array([[np.nan, np.nan], [1.0, np.nan]])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        np.testing.assert_array_equal(P.nanmax(x, axis=1), np.nanmax(x, axis=1))
        np.testing.assert_array_equal(P.nanmin(x, axis=1), np.nanmin(x, axis=1))
    assert torch.amax(torch.nan_to_num(T(x), nan=-math.inf), 1)[0] == -math.inf
    np.testing.assert_array_equal(P.nanmean(x, axis=1), torch.nanmean(T(x), 1).numpy())


# == 2c. scans, sorting, topk ======================================================================
for dt in FLOATS + ("int32", "int64"):
    x = u((3, 4, 5), dt, -3 if dt[0] == "f" else -9, 3 if dt[0] == "f" else 9, seed=6)
    # CONVENTION: axis=None flattens first, as NumPy (torch.cumsum needs a dim)
    case(f"cumsum-{dt}-axisNone", dt, lambda x=x: P.cumsum(x),
         lambda x=x: torch.cumsum(T(x).reshape(-1), 0))
    xs = x[:, :2, :3] if dt[0] == "i" else x
    case(f"cumprod-{dt}-axisNone", dt, lambda x=xs: P.cumprod(x),
         lambda x=xs: torch.cumprod(T(x).reshape(-1), 0), rtol=1e-5 if dt == "float32" else None)
    for axis in (0, 1, -1):
        case(f"cumprod-{dt}-axis{axis}", dt, lambda x=x, a=axis: P.cumprod(x, axis=a),
             lambda x=x, a=axis: torch.cumprod(T(x), a), rtol=1e-5 if dt == "float32" else None)
for dt in FLOATS:
    x = np.array([[-np.inf, -np.inf, 0.0, np.inf, 1.0], [1.0, np.nan, 2.0, -np.inf, 3.0],
                  [-np.inf, 5.0, -np.inf, 700.0, 700.0]], dt)
    case(f"logcumsumexp-{dt}-specials", dt, lambda x=x: P.logcumsumexp(x, axis=1),
         lambda x=x: torch.logcumsumexp(T(x), 1))
    # sort and argsort: ties (stable), +-inf and NaN (last ascending, first descending)
    x = np.array([[3.0, np.nan, -np.inf, 1.0, 1.0, np.inf, -0.0, 0.0, np.nan, 2.0, 1.0]], dt)
    x = np.concatenate([x, x[:, ::-1], u((1, 11), dt, seed=7)])
    for desc in (False, True):
        for axis in ((1,) if desc else (-1,)):
            case(f"sort-{dt}-nan-desc{desc}-axis{axis}", dt,
                 lambda x=x, d=desc, a=axis: P.sort(x, axis=a, descending=d),
                 lambda x=x, d=desc, a=axis: torch.sort(T(x), dim=a, descending=d, stable=True)[0])
            case(f"argsort-{dt}-nan-desc{desc}-axis{axis}", dt,
                 lambda x=x, d=desc, a=axis: P.argsort(x, axis=a, descending=d),
                 lambda x=x, d=desc, a=axis: torch.sort(T(x), dim=a, descending=d, stable=True)[1])
    if dt == "float64":
        xt = u((11, 3), dt, seed=8).T               # a transposed view
        case(f"sort-{dt}-view", dt, lambda x=xt: P.sort(x, axis=-1),
             lambda x=xt: torch.sort(T(x), dim=-1, stable=True)[0])
    # topk: distinct values plus NaN (torch ranks NaN above everything)
    x = (rng(9).permutation(30).reshape(3, 10) / 7).astype(dt)
    x[1, 4] = np.nan
    for k, dim, largest in ((1, -1, True), (3, 1, False), (10, 1, True), (2, 0, False)):
        case(f"topk-{dt}-k{k}-dim{dim}-largest{largest}", dt,
             lambda x=x, k=k, d=dim, lg=largest: P.topk(x, k, d, lg),
             lambda x=x, k=k, d=dim, lg=largest: tuple(torch.topk(T(x), k, d, lg)))
for dt in ("int32", "int64"):
    x = u((3, 11), dt, -4, 4, seed=10)          # many ties
    for desc in ((False,) if dt == "int32" else (True,)):
        case(f"argsort-{dt}-ties-desc{desc}", dt, lambda x=x, d=desc: P.argsort(x, descending=d),
             lambda x=x, d=desc: torch.sort(T(x), dim=-1, descending=d, stable=True)[1])
    for name, fn in (("cummax", torch.cummax), ("cummin", torch.cummin)):
        case(f"{name}-{dt}-ties", dt, lambda x=x, n=name: getattr(P, n)(x, axis=1),
             lambda x=x, f=fn: tuple(f(T(x), 1)))


# == 2d. layout, creation, indexing at the other settings ========================================
for dt in ("float32", "int64", "bool"):
    x = u((3, 4, 5), dt, -9, 9, seed=11)
    # CONVENTION: axis=None as NumPy: flip every axis, roll and repeat the flattened array
    case(f"flip-{dt}-axisNone", dt, lambda x=x: P.flip(x),
         lambda x=x: torch.flip(T(x), (0, 1, 2)))
    case(f"roll-{dt}-axisNone", dt, lambda x=x: P.roll(x, 7), lambda x=x: torch.roll(T(x), 7))
    case(f"roll-{dt}-neg", dt, lambda x=x: P.roll(x, -13, axis=2),
         lambda x=x: torch.roll(T(x), -13, 2))
    case(f"repeat-{dt}-axisNone", dt, lambda x=x: P.repeat(x, 2),
         lambda x=x: torch.repeat_interleave(T(x).reshape(-1), 2))
    xv = x[:, ::2, 1:]                          # a strided view
    case(f"transpose-{dt}-view", dt, lambda x=xv: P.transpose(x, (2, 0, 1)),
         lambda x=xv: T(x).permute(2, 0, 1))
    case(f"flip-{dt}-view", dt, lambda x=xv: P.flip(x, axis=1), lambda x=xv: torch.flip(T(x), (1,)))
for dt in ("float64", "int32"):
    x = u((2, 5, 4), dt, -9, 9, seed=12)
    for k in (1, 3, -4, 9):
        for name, fn in (("tril", torch.tril), ("triu", torch.triu)):
            case(f"{name}-{dt}-k{k}", dt, lambda x=x, k=k, n=name: getattr(P, n)(x, k),
                 lambda x=x, k=k, f=fn: f(T(x), k))
for dt in ("int32", "int64"):
    t = np.array([0, 3, 1, 3, 2], dt)
    case(f"one_hot-{dt}-inferred", "int64", lambda t=t: P.one_hot(t),
         lambda t=t: F.one_hot(T(t).long()))
    n = np.array([[0, 3], [5, 1]], dt)
    case(f"sequence_mask-{dt}-inferred", "bool", lambda n=n: P.sequence_mask(n),
         lambda n=n: torch.arange(int(n.max())) < T(n)[..., None])
for dt in FLOATS:
    x = u((1, 2, 5), dt, seed=13)
    for mode in ("replicate", "circular", "reflect"):
        case(f"pad-{dt}-{mode}-1d", dt, lambda x=x, m=mode: P.pad(x, (2, 3), mode=m),
             lambda x=x, m=mode: F.pad(T(x), (2, 3), mode=m))
    x = u((2, 3, 4, 5), dt, seed=14)
    case(f"pad-{dt}-constant-nan", dt, lambda x=x: P.pad(x, (1, 0, 0, 2), value=np.nan),
         lambda x=x: F.pad(T(x), (1, 0, 0, 2), value=math.nan))
    w = u((6, 3), dt, seed=15)
    i = np.array([[0, 5, 2], [2, 2, 0]], np.int64)
    case(f"embedding-{dt}-padding_idx", dt, lambda i=i, w=w: P.embedding(i, w, padding_idx=2),
         lambda i=i, w=w: F.embedding(T(i), T(w), padding_idx=2))


# == 2e. losses at the other reductions and weights =============================================
def lpair(dt, lo=-3.0, hi=3.0, tlo=None, thi=None, shape=(4, 7)):
    return (u(shape, dt, lo, hi, 16),
            u(shape, dt, lo if tlo is None else tlo, hi if thi is None else thi, 17))


for dt in FLOATS:
    x, t = lpair(dt)
    # float32: torch's mean/sum accumulate in float32
    r32 = 1e-5 if dt == "float32" else None
    for red in ("sum", "mean", "none"):
        for name, fn, kw in (("mse_loss", F.mse_loss, {}), ("l1_loss", F.l1_loss, {}),
                             ("smooth_l1_loss", F.smooth_l1_loss, {"beta": 1.0}),
                             ("smooth_l1_loss", F.smooth_l1_loss, {"beta": 0.0}),
                             ("huber_loss", F.huber_loss, {"delta": 2.0})):
            case(f"{name}-{dt}-{red}-{kw}", dt,
                 lambda x=x, t=t, n=name, r=red, kw=kw: getattr(P, n)(x, t, reduction=r, **kw),
                 lambda x=x, t=t, f=fn, r=red, kw=kw: f(T(x), T(t), reduction=r, **kw),
                 rtol=r32, atol=r32)
    lx, _ = lpair(dt, -4, -0.1)
    pt = u((4, 7), dt, 0, 1, 18)
    pt[0, :2] = 0.0
    for red in ("sum", "batchmean", "none", "mean"):
        for log_target in (False, True):
            tt = np.log(pt + 0.01).astype(dt) if log_target else pt
            case(f"kl_div-{dt}-{red}-log{log_target}", dt,
                 lambda x=lx, t=tt, r=red, lt=log_target: P.kl_div(x, t, reduction=r,
                                                                  log_target=lt),
                 lambda x=lx, t=tt, r=red, lt=log_target: F.kl_div(T(x), T(t), reduction=r,
                                                                  log_target=lt),
                 rtol=r32, atol=r32)
    px = u((4, 7), dt, 0.01, 0.99, 19)
    px[0, 0], px[0, 1] = 0.0, 1.0
    w = u((7,), dt, 0.5, 2.0, 20)
    for red in ("sum", "mean", "none"):
        case(f"binary_cross_entropy-{dt}-{red}-weight", dt,
             lambda x=px, t=pt, w=w, r=red: P.binary_cross_entropy(x, t, w, reduction=r),
             lambda x=px, t=pt, w=w, r=red: F.binary_cross_entropy(T(x), T(t), T(w), reduction=r),
             rtol=r32, atol=r32)
        lg = u((4, 7), dt, -30, 30, 21)
        pw = u((7,), dt, 0.2, 3.0, 22)
        case(f"bce_with_logits-{dt}-{red}-weights", dt,
             lambda x=lg, t=pt, w=w, pw=pw, r=red: P.binary_cross_entropy_with_logits(
                 x, t, w, pos_weight=pw, reduction=r),
             lambda x=lg, t=pt, w=w, pw=pw, r=red: F.binary_cross_entropy_with_logits(
                 T(x), T(t), T(w), reduction=r, pos_weight=T(pw)),
             rtol=r32 or 1e-11, atol=r32)
    # cross_entropy / nll_loss: weight with reduction mean (divides by the weights' sum),
    # a non-default ignore_index, label smoothing with weights, and [N, C, d] inputs
    for shape in ((6, 5), (3, 5, 4)):
        reds = ("mean", "sum", "none") if len(shape) == 2 else ("mean",)
        lx = u(shape, dt, -3, 3, 23)
        lp = (lx - np.log(np.exp(lx.astype(np.float64)).sum(1, keepdims=True))).astype(dt)
        tgt = rng(24).integers(0, 5, (shape[0],) + shape[2:]).astype(np.int64)
        tgt.flat[1] = 2
        tgt.flat[2] = -100
        cw = u((5,), dt, 0.5, 2.0, 25)
        for red in reds:
            for kw in ({"weight": cw}, {"ignore_index": 2}, {"weight": cw, "ignore_index": 2}):
                tg = np.where(tgt < 0, kw.get("ignore_index", -100), tgt)
                tkw = {k: (T(v) if isinstance(v, np.ndarray) else v) for k, v in kw.items()}
                case(f"nll_loss-{dt}-{shape}-{red}-{sorted(kw)}", dt,
                     lambda x=lp, t=tg, r=red, kw=kw: P.nll_loss(x, t, reduction=r, **kw),
                     lambda x=lp, t=tg, r=red, kw=tkw: F.nll_loss(T(x), T(t), reduction=r, **kw),
                     rtol=r32, atol=r32)
                for ls in ((0.0, 0.2) if len(kw) == 2 else (0.0,)):
                    case(f"cross_entropy-{dt}-{shape}-{red}-{sorted(kw)}-ls{ls}", dt,
                         lambda x=lx, t=tg, r=red, kw=kw, ls=ls: P.cross_entropy(
                             x, t, reduction=r, label_smoothing=ls, **kw),
                         lambda x=lx, t=tg, r=red, kw=tkw, ls=ls: F.cross_entropy(
                             T(x), T(t), reduction=r, label_smoothing=ls, **kw),
                         rtol=r32 or 1e-11, atol=r32)


# == 2f. nn ops at the other modes ===============================================================
for dt in FLOATS:
    x = u((2, 3, 5, 6), dt, seed=26)
    g = u((2, 4, 3, 2), dt, -1.3, 1.3, seed=27)
    g[0, 0, 0] = [-1.0, 1.0]          # exact corners
    g[0, 0, 1] = [0.0, 0.0]
    for mode in ("nearest", "bilinear"):
        for pm in ("zeros", "border"):
            for ac in (False, True):
                case(f"grid_sample-{dt}-{mode}-{pm}-ac{ac}", dt,
                     lambda x=x, g=g, m=mode, p=pm, a=ac: P.grid_sample(
                         x, g, mode=m, padding_mode=p, align_corners=a),
                     lambda x=x, g=g, m=mode, p=pm, a=ac: F.grid_sample(
                         T(x), T(g), mode=m, padding_mode=p, align_corners=a),
                     rtol=1e-5 if dt == "float32" else 1e-11,
                     atol=1e-5 if dt == "float32" else 1e-12)
    x = u((2, 3, 7), dt, seed=28)
    w, b = u((3,), dt, seed=29), u((3,), dt, seed=30)
    rm, rv = u((3,), dt, seed=31), u((3,), dt, 0.2, 2, seed=32)
    case(f"instance_norm-{dt}-affine", dt,
         lambda x=x, w=w, b=b: P.instance_norm(x, weight=w, bias=b, eps=1e-3),
         lambda x=x, w=w, b=b: F.instance_norm(T(x), weight=T(w), bias=T(b), eps=1e-3),
         rtol=1e-5 if dt == "float32" else 1e-11, atol=1e-5 if dt == "float32" else 1e-12)
    # running statistics given but used only in training (use_input_stats=True)
    case(f"instance_norm-{dt}-running-unused", dt,
         lambda x=x, w=w, b=b, rm=rm, rv=rv: P.instance_norm(x, rm, rv, weight=w, bias=b),
         lambda x=x, w=w, b=b, rm=rm, rv=rv: F.instance_norm(
             T(x), T(rm.copy()), T(rv.copy()), weight=T(w), bias=T(b)),
         rtol=1e-5 if dt == "float32" else 1e-11, atol=1e-5 if dt == "float32" else 1e-12)
    # softmax family with -inf entries and a row of -inf only (torch: NaN)
    x = np.array([[0.0, -np.inf, 1.0], [-np.inf, -np.inf, -np.inf], [np.inf, 0.0, 1.0],
                  [1e30 if dt == "float32" else 1e300, 0.0, -1.0]], dt)
    for name, fn in (("softmax", F.softmax), ("log_softmax", F.log_softmax),
                     ("softmin", F.softmin)):
        case(f"{name}-{dt}-infrows", dt, lambda x=x, n=name: getattr(P, n)(x, axis=1),
             lambda x=x, f=fn: f(T(x), dim=1))
    # the distances: zero vectors and eps
    a = u((4, 6), dt, seed=33)
    bb = u((4, 6), dt, seed=34)
    a[0] = 0.0
    bb[1] = a[1]
    for eps in (1e-8, 0.5):
        case(f"cosine_similarity-{dt}-eps{eps}", dt,
             lambda a=a, b=bb, e=eps: P.cosine_similarity(a, b, eps=e),
             lambda a=a, b=bb, e=eps: F.cosine_similarity(T(a), T(b), eps=e),
             rtol=1e-5 if dt == "float32" else 1e-11, atol=1e-6 if dt == "float32" else 1e-14)
    for eps, p in ((0.0, 2.0), (0.1, 1.0), (1e-6, 3.0)):
        case(f"pairwise_distance-{dt}-eps{eps}-p{p}", dt,
             lambda a=a, b=bb, e=eps, p=p: P.pairwise_distance(a, b, p=p, eps=e),
             lambda a=a, b=bb, e=eps, p=p: F.pairwise_distance(T(a), T(b), p=p, eps=e),
             rtol=1e-5 if dt == "float32" else 1e-11, atol=1e-6 if dt == "float32" else 1e-14)
    # max pooling propagates NaN as torch does
    x = u((1, 2, 5, 6), dt, seed=35)
    x[0, 0, 1, 1] = np.nan
    case(f"max_pool2d-{dt}-nan", dt, lambda x=x: P.max_pool2d(x, 2, 1, 1),
         lambda x=x: F.max_pool2d(T(x), 2, 1, 1))
    # masked_attention at a given scale
    q, k, v = u((1, 2, 3, 4), dt, seed=36), u((1, 2, 5, 4), dt, seed=37), u((1, 2, 5, 2), dt,
                                                                           seed=38)
    m = np.ones((1, 1, 3, 5), bool)
    m[0, 0, 0, 1] = False
    ql, kl = np.array([3], np.int32), np.array([4], np.int32)

    def _ma_ref(q=q, k=k, v=v, m=m):
        allow = T(m) & (torch.arange(5) < 4)
        return F.scaled_dot_product_attention(T(q), T(k), T(v), attn_mask=allow, scale=0.3)
    case(f"masked_attention-{dt}-scale", dt,
         lambda q=q, k=k, v=v, m=m: P.masked_attention(q, k, v, m, ql, kl, scale=0.3), _ma_ref,
         rtol=1e-5 if dt == "float32" else 1e-11, atol=1e-6 if dt == "float32" else 1e-14)
    # non-contiguous operands of the linear algebra and norms
    a = u((6, 4), dt, seed=39).T
    b = u((5, 6), dt, seed=40)[:, ::-1].T
    case(f"matmul-{dt}-views", dt, lambda a=a, b=b: P.matmul(a, b),
         lambda a=a, b=b: T(a) @ T(b), rtol=1e-5 if dt == "float32" else 1e-11,
         atol=1e-6 if dt == "float32" else 1e-14)
    x = u((3, 9), dt, seed=41)[:, ::2]
    case(f"layer_norm-{dt}-view", dt, lambda x=x: P.layer_norm(x),
         lambda x=x: F.layer_norm(T(x), x.shape[-1:]),
         rtol=1e-5 if dt == "float32" else 1e-11, atol=1e-5 if dt == "float32" else 1e-12)
    case(f"softmax-{dt}-view", dt, lambda x=x: P.softmax(x.T, axis=0),
         lambda x=x: F.softmax(T(x.T), dim=0), rtol=1e-5 if dt == "float32" else 1e-11,
         atol=1e-6 if dt == "float32" else 1e-14)
    case(f"einsum-{dt}-trace", dt, lambda a=u((4, 4), dt): P.einsum("ii->", a),
         lambda a=u((4, 4), dt): torch.einsum("ii->", T(a)))


def test_what_pypto_once_refused_and_torch_computes():
    """Settings PyPTO refused with a ParamError until stop 41 and now computes as torch does
    (tests/ops/test_torch_parity41.py and test_vector_norm_negative_ord.py have more)."""
    x = u((3, 4), "float64")
    np.testing.assert_allclose(P.vector_norm(x, -1.0, 1),
                               torch.linalg.vector_norm(T(x), -1.0, 1).numpy(), rtol=1e-12)
    np.testing.assert_array_equal(P.threshold(x, -math.inf, 7.0),
                                  torch.nn.functional.threshold(T(x), -math.inf, 7.0).numpy())
    np.testing.assert_allclose(
        P.instance_norm(x[None], np.zeros(3), np.ones(3), use_input_stats=False),
        torch.nn.functional.instance_norm(T(x[None]), torch.zeros(3, dtype=torch.float64),
                                          torch.ones(3, dtype=torch.float64),
                                          use_input_stats=False).numpy(), rtol=1e-12)
    # torchvision's default sampling_ratio=-1 (adaptive) is PyPTO's default too
    rois_ = np.array([[0, 0, 0, 3, 3], [0, 0.5, 0.25, 3.5, 2.0]], np.float32)
    img = u((1, 1, 4, 4), "float32")
    np.testing.assert_allclose(P.roi_align(img, rois_, 2, sampling_ratio=-1),
                               t_roi_align(T(img), T(rois_), 2).numpy(), rtol=1e-5, atol=1e-6)


def test_rms_norm_default_eps_is_pypto_s_and_eps_none_is_torch_s():
    """CONVENTION: rms_norm's default eps is 1e-6; torch's ``eps=None`` (its default) is the
    dtype's machine epsilon, which PyPTO takes when eps=None is given."""
    x = u((5, 4), "float64") * 1e-3
    want_torch_default = F.rms_norm(T(x), (4,)).numpy()
    close(P.rms_norm(x, (4,), eps=None), want_torch_default, "float64", 1e-12)
    close(P.rms_norm(x, (4,)), F.rms_norm(T(x), (4,), eps=1e-6), "float64", 1e-12)
    assert not np.allclose(P.rms_norm(x, (4,)), want_torch_default, rtol=1e-3)


def test_quantize_rounds_x_over_scale_then_adds_the_zero_point():
    """CONVENTION: quantize is ``round_half_even(float32(x) / float32(scale)) + zero_point``
    (ONNX QuantizeLinear's order, a true division), as PyPTO documents. torch's
    quantize_per_tensor adds the zero point before rounding and multiplies by a rounded
    reciprocal, so the two differ on (near-)ties: at x / scale = -19.5 with zero_point 3 torch
    gives -16 (round(-16.5)), PyPTO -17 (round(-19.5) + 3). Away from ties they agree."""
    quant = getattr(torch, "quantize_per_tensor", None)
    if quant is None:
        pytest.skip("torch has no quantize_per_tensor")
    x = (np.arange(-40, 40) * 0.025).astype(np.float32)
    got = P.quantize(x, 0.05, 3)
    tx = T(x)
    want_doc = torch.clamp(torch.round(tx / torch.tensor(0.05, dtype=torch.float32)) + 3,
                           -128, 127).to(torch.int8)
    np.testing.assert_array_equal(got, want_doc.numpy())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want_torch = quant(tx, 0.05, 3, torch.qint8).int_repr().numpy()
    frac = np.abs(np.abs(x.astype(np.float64) / 0.05) % 1 - 0.5)
    far = frac > 1e-3                      # not within 1e-3 of a tie
    np.testing.assert_array_equal(got[far], want_torch[far])
    assert (got[~far] != want_torch[~far]).any()      # the convention shows at the ties


# == 2g. resampling at the other sizes (downscaling, fractional scale factors) ===================
for dt in FLOATS:
    x = u((2, 3, 5, 7), dt, seed=45)
    for h, w in ((3, 4), (1, 1), (2, 9)):
        for ac in (False, True):
            for name, mode in (("resize_bilinear", "bilinear"), ("resize_bicubic", "bicubic")):
                case(f"{name}-{dt}-{h}x{w}-ac{ac}", dt,
                     lambda x=x, n=name, h=h, w=w, a=ac: getattr(P, n)(x, h, w, align_corners=a),
                     lambda x=x, m=mode, h=h, w=w, a=ac: F.interpolate(
                         T(x), size=(h, w), mode=m, align_corners=a),
                     rtol=1e-5 if dt == "float32" else 1e-11,
                     atol=1e-5 if dt == "float32" else 1e-12)
        case(f"resize_nearest-{dt}-{h}x{w}-exact", dt,
             lambda x=x, h=h, w=w: P.resize_nearest(x, h, w, mode="nearest-exact"),
             lambda x=x, h=h, w=w: F.interpolate(T(x), size=(h, w), mode="nearest-exact"))
    for sf in (1.5, 0.5, 0.7):
        case(f"upsample_nearest-{dt}-sf{sf}", dt,
             lambda x=x, sf=sf: P.upsample_nearest(x, scale_factor=sf),
             lambda x=x, sf=sf: F.interpolate(T(x), scale_factor=sf, mode="nearest"))


def test_nms_ranks_a_nan_score_last_where_torchvision_ranks_it_first():
    """CONVENTION (documented in pypto/ops/detection.py): a NaN score sorts last; torchvision's
    ``scores.sort(descending=True)`` puts NaN first, so it keeps the NaN-scored box first."""
    b = np.array([[0, 0, 2, 2], [1, 0, 3, 2], [0, 0, 4, 2]], np.float64)
    s = np.array([0.5, np.nan, 0.7])
    keep, count = P.nms(b, s, 0.2)
    tk, tc = t_nms(T(b), T(s), 0.2)
    assert int(count) == int(tc) == 1
    assert keep[0] == 2 and int(tk[0]) == 1
    finite = np.isfinite(s)          # without the NaN box both keep the same boxes
    keep2, count2 = P.nms(b[finite], s[finite], 0.2)
    tk2, tc2 = t_nms(T(b[finite]), T(s[finite]), 0.2)
    np.testing.assert_array_equal(keep2, tk2.numpy())
    assert int(count2) == int(tc2)


# == 2h. integer edges: shifts at and beyond the width, negative shifts, wrapping, extremes =======
for dt in ("int8", "int16", "int32", "int64", "uint8"):
    bits, info = np.dtype(dt).itemsize * 8, np.iinfo(dt)
    a = np.array([1, -1 if info.min < 0 else 200, info.max, info.min, 5, 7] * 2, dt)
    b = np.array([0, 1, bits - 1, bits, bits + 1, 2 * bits, 3, bits - 1, bits, 0, 1, 2], dt)
    if info.min < 0:
        b[-4:] = [-1, -2, -bits, -100]
    for name, fn in (("left_shift", torch.bitwise_left_shift),
                     ("right_shift", torch.bitwise_right_shift)):
        case(f"{name}-{dt}-width", dt, lambda a=a, b=b, n=name: getattr(P, n)(a, b),
             lambda a=a, b=b, f=fn: f(T(a), T(b)))
for dt in ("int32", "int64"):
    info = np.iinfo(dt)
    a = np.array([1, -1, info.max, info.min, 5, -7, 0, 9, info.max, info.min, 13, -13], dt)
    d = np.array([3, -3, 7, -7, 1, -1, 2, -2, 5, -5, info.max, info.min], dt)
    for name, fn in (("floor_divide", torch.floor_divide), ("remainder", torch.remainder),
                     ("fmod", torch.fmod), ("mul", torch.mul), ("add", torch.add)):
        case(f"{name}-{dt}-extremes", dt, lambda a=a, d=d, n=name: getattr(P, n)(a, d),
             lambda a=a, d=d, f=fn: f(T(a), T(d)))


def test_integer_division_by_zero_is_zero_as_numpy_where_torch_raises():
    """CONVENTION: integer floor_divide, remainder and fmod by 0 give 0 (NumPy's result, without
    its warning); torch raises ZeroDivisionError."""
    a, z = np.array([5, -5, 0], np.int64), np.zeros(3, np.int64)
    for name, fn in (("floor_divide", torch.floor_divide), ("remainder", torch.remainder),
                     ("fmod", torch.fmod)):
        np.testing.assert_array_equal(getattr(P, name)(a, z), [0, 0, 0])
        with pytest.raises(RuntimeError, match="ZeroDivisionError"):
            fn(T(a), T(z))
