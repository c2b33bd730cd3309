"""One or more gradient cases per built-in op whose rule is not checked in test_rules.py.

``CASES`` maps a case name, ``op`` or ``op[variant]``, to ``(fn, args)``: ``fn`` calls the op
through its public frontend (or its kernel, for ``eye``/``arange``/``anchor_boxes``, whose
frontends take no array), ``args`` are float64 arrays (the differentiated ones) and integer
index arrays. Inputs keep clear of the points where an op is not differentiable (kinks, ties,
bin edges), so central differences are a fair reference.

``torch_cases()`` maps case names to the same computation in PyTorch, for the autograd cross-check.
"""

from __future__ import annotations

import math

import numpy as np

import pypto

o = pypto.ops
_rng = np.random.default_rng(14)


def normal(*shape):
    return _rng.standard_normal(shape)


def uniform(lo, hi, *shape):
    return _rng.uniform(lo, hi, shape)


def away(x, points, gap=0.08):
    """``x`` moved at least ``gap`` away from each of ``points``."""
    for p in points:
        x = np.where(np.abs(x - p) < gap, p + np.where(x >= p, gap, -gap) * 1.5, x)
    return x


def positive(*shape):
    return uniform(0.5, 2.0, *shape)


def boxes(n):
    xy = uniform(0.0, 10.0, n, 2)
    return np.concatenate([xy, xy + uniform(2.0, 6.0, n, 2)], axis=1)


_X = normal(2, 3)
_X3 = normal(3, 4, 5)
_IMG = normal(2, 5, 6)
_IDX = _rng.integers(0, 4, (3, 2, 5))
_ROIS = np.array([[0, 0.5, 1.0, 4.2, 3.1], [1, 2.0, -0.7, 5.5, 4.0], [0, -1.5, 2.2, 3.0, 6.0]])
_TGT = np.array([1, 3, -100, 0, 3])
_HEAVI = np.array([[0.0, 1.5, -2.0], [0.0, -0.3, 0.0]])


def _target(kinks):
    """A target for _X whose differences _X - target keep clear of ``kinks``."""
    return _X - away(1.5 * normal(2, 3), kinks)


def _quotients_off_integers(a, b):
    """b moved so that a / b stays 0.1 away from integers (fmod/remainder jump there)."""
    q = a / b
    q = np.where(np.abs(q - np.round(q)) < 0.1, np.round(q) + 0.3, q)
    return a, a / q


_FA, _FB = _quotients_off_integers(uniform(-5, 5, 2, 3), away(uniform(-2, 2, 2, 3), [0.0], 0.5))
_NAN_A = normal(2, 3)
_NAN_A[0, 1] = np.nan
_NAN_B = normal(2, 3)
_NAN_B[1, 2] = np.nan
_WITH_NAN = normal(3, 5)
_WITH_NAN[0, 1] = _WITH_NAN[2, 3] = np.nan
_ZEROS = normal(3, 5, 2)
_ZEROS[0, 1, 0] = _ZEROS[1, 2, 1] = _ZEROS[1, 4, 1] = _ZEROS[2, 0, 0] = 0.0

CASES = {
    # -- math and arith ------------------------------------------------------------------------
    "asin": (o.asin, [uniform(-0.8, 0.8, 2, 3)]),
    "acos": (o.acos, [uniform(-0.8, 0.8, 2, 3)]),
    "atan": (o.atan, [_X]),
    "asinh": (o.asinh, [_X]),
    "acosh": (o.acosh, [uniform(1.2, 3.0, 2, 3)]),
    "atanh": (o.atanh, [uniform(-0.8, 0.8, 2, 3)]),
    "sinh": (o.sinh, [_X]),
    "cosh": (o.cosh, [_X]),
    "tan": (o.tan, [uniform(-1.2, 1.2, 2, 3)]),
    "exp2": (o.exp2, [_X]),
    "log2": (o.log2, [positive(2, 3)]),
    "log10": (o.log10, [positive(2, 3)]),
    "cbrt": (o.cbrt, [away(_X, [0.0], 0.3)]),
    "deg2rad": (o.deg2rad, [_X]),
    "rad2deg": (o.rad2deg, [_X]),
    "nan_to_num": (o.nan_to_num, [_NAN_A]),
    "atan2": (o.atan2, [_X, normal(2, 3)]),
    "hypot": (o.hypot, [_X, normal(2, 3)]),
    "copysign": (o.copysign, [away(_X, [0.0]), away(normal(3), [0.0])]),
    "lerp": (o.lerp, [_X, normal(2, 3), uniform(0, 1, 2, 3)]),
    "fmax": (o.fmax, [_NAN_A, _NAN_B]),
    "fmin": (o.fmin, [_NAN_A, _NAN_B]),
    "logaddexp": (o.logaddexp, [_X, normal(3)]),
    "logaddexp2": (o.logaddexp2, [_X, normal(2, 1)]),
    "fmod": (o.fmod, [_FA, _FB]),
    "remainder": (o.remainder, [_FA, _FB]),
    "heaviside": (lambda h: o.heaviside(_HEAVI.astype(h.dtype), h), [normal(2, 3)]),
    # -- activations ---------------------------------------------------------------------------
    "mish": (o.mish, [_X]),
    "elu": (lambda x: o.elu(x, alpha=0.7), [away(_X, [0.0])]),
    "selu": (o.selu, [away(_X, [0.0])]),
    "celu": (lambda x: o.celu(x, alpha=1.3), [away(_X, [0.0])]),
    "softsign": (o.softsign, [away(_X, [0.0])]),
    "hardsigmoid": (o.hardsigmoid, [away(3 * _X, [-3.0, 3.0])]),
    "hardswish": (o.hardswish, [away(3 * _X, [-3.0, 3.0])]),
    "hardtanh": (lambda x: o.hardtanh(x, -0.5, 0.8), [away(_X, [-0.5, 0.8])]),
    "relu6": (o.relu6, [away(4 * _X, [0.0, 6.0])]),
    "logit": (o.logit, [uniform(0.05, 0.95, 2, 3)]),
    "logit[eps]": (lambda x: o.logit(x, eps=0.2), [away(uniform(0.05, 0.95, 2, 3), [0.2, 0.8])]),
    "tanhshrink": (o.tanhshrink, [_X]),
    "hardshrink": (o.hardshrink, [away(_X, [-0.5, 0.5])]),
    "softshrink": (lambda x: o.softshrink(x, 0.3), [away(_X, [-0.3, 0.3])]),
    "threshold": (lambda x: o.threshold(x, 0.1, 2.0), [away(_X, [0.1])]),
    "log_sigmoid": (o.log_sigmoid, [_X]),
    # softplus's default is in test_rules.py; beta and threshold here (inputs made without _rng)
    "softplus[beta]": (lambda x: o.softplus(x, beta=2.5), [3 * _X]),
    "softplus[negative_beta]": (lambda x: o.softplus(x, beta=-0.7), [4 * _X]),
    "softplus[threshold]": (lambda x: o.softplus(x, beta=1.5, threshold=1.2),
                            [away(2 * _X, [0.8], 0.1)]),          # the jump at beta x = 1.2
    "prelu": (o.prelu, [away(normal(2, 3, 2), [0.0]), normal(3)]),
    "glu": (lambda x: o.glu(x, axis=0), [normal(4, 3)]),
    "geglu": (o.geglu, [normal(3, 4)]),
    "geglu[tanh]": (lambda x: o.geglu(x, axis=1, approximate="tanh"), [normal(2, 6, 2)]),
    "softmin": (lambda x: o.softmin(x, axis=0), [normal(3, 4)]),
    # -- layout and matrix construction ----------------------------------------------------------
    "concat": (lambda a, b: o.concat([a, b, a[:, :1]], axis=1), [_X3, normal(3, 2, 5)]),
    "stack": (lambda a, b: o.stack([a, b, a], axis=2), [_X3, normal(3, 4, 5)]),
    "split": (lambda x: o.split(x, [1, 3], axis=1), [_X3]),
    "pad": (lambda x: o.pad(x, (1, 2, 0, 1), value=0.5), [_X3]),
    "pad[reflect]": (lambda x: o.pad(x, (2, 3, 1, 2), mode="reflect"), [_X3]),
    "pad[replicate]": (lambda x: o.pad(x, (2, 3, 1, 2), mode="replicate"), [_X3]),
    "pad[circular]": (lambda x: o.pad(x, (2, 5, 4, 1), mode="circular"), [_X3]),
    "tile": (lambda x: o.tile(x, (2, 1, 3)), [_X3]),
    "repeat": (lambda x: o.repeat(x, 3, axis=1), [_X3]),
    "flip": (lambda x: o.flip(x, axis=(0, 2)), [_X3]),
    "roll": (lambda x: o.roll(x, (2, -1), axis=(1, 2)), [_X3]),
    "tril": (lambda x: o.tril(x, k=1), [_X3]),
    "triu": (lambda x: o.triu(x, k=-1), [_X3]),
    "diag": (lambda v: o.diag(v, k=-2), [normal(4)]),
    "diagonal": (lambda x: o.diagonal(x, offset=1, axis1=1, axis2=2), [_X3]),
    "diagonal[below]": (lambda x: o.diagonal(x, offset=-1, axis1=0, axis2=2), [_X3]),
    "eye": (lambda one: o.eye.kernel(one, rows=3, cols=4, k=1), [np.array([1.5])]),
    "arange": (lambda se: o.arange.kernel(se, n=5), [np.array([0.5, 0.25])]),
    # -- indexing --------------------------------------------------------------------------------
    "gather": (lambda x: o.gather(x, 1, _IDX), [_X3]),
    "take_along_axis": (lambda x: o.take_along_axis(x, _IDX - 2, axis=1), [_X3]),
    "index_select": (lambda x: o.index_select(x, 1, np.array([3, 0, 3, 1])), [_X3]),
    "embedding": (lambda w: o.embedding(np.array([[1, 0], [4, 1]]), w), [normal(5, 3)]),
    "scatter_add": (lambda x, s: o.scatter_add(x, 1, _IDX, s), [_X3, normal(3, 2, 5)]),
    "masked_fill": (lambda x: o.masked_fill(x, _X3 > 0.3, 2.0), [_X3]),
    # -- image, resampling, boxes ------------------------------------------------------------------
    "resize_bilinear": (lambda x: o.resize_bilinear(x, 7, 9), [_IMG]),
    "resize_bilinear[corners]": (lambda x: o.resize_bilinear(x, 3, 4, align_corners=True),
                                 [_IMG]),
    "upsample_nearest": (lambda x: o.upsample_nearest(x, size=(7, 13)), [_IMG]),
    "upsample_nearest[x2]": (lambda x: o.upsample_nearest(x, scale_factor=2), [_IMG]),
    "adaptive_avg_pool2d": (lambda x: o.adaptive_avg_pool2d(x, (3, 4)), [normal(1, 2, 5, 6)]),
    "global_avg_pool2d": (o.global_avg_pool2d, [normal(1, 2, 5, 6)]),
    "box_blur": (lambda x: o.box_blur(x, 3), [_IMG]),
    "box_blur[5]": (lambda x: o.box_blur(x, 5), [_IMG]),
    "gaussian_blur": (lambda x: o.gaussian_blur(x, sigma=0.8), [_IMG]),
    "sobel": (o.sobel, [_IMG]),
    "pixel_shuffle": (lambda x: o.pixel_shuffle(x, 2), [normal(1, 4, 3, 5)]),
    "pixel_unshuffle": (lambda x: o.pixel_unshuffle(x, 2), [normal(1, 1, 4, 6)]),
    "roi_align": (lambda x: o.roi_align(x, _ROIS, (2, 3)), [normal(2, 2, 5, 6)]),
    "roi_align[aligned]": (lambda x: o.roi_align(x, _ROIS, (3, 2), spatial_scale=0.7,
                                                 sampling_ratio=3, aligned=True),
                           [normal(2, 2, 5, 6)]),
    "roi_pool": (lambda x: o.roi_pool(x, _ROIS, (2, 3)), [normal(2, 3, 6, 7)]),
    "roi_pool[scaled]": (lambda x: o.roi_pool(x, _ROIS, 3, spatial_scale=0.6),
                         [normal(2, 3, 6, 7)]),
    "box_convert": (lambda b: o.box_convert(b, "xywh", "cxcywh"), [boxes(3)]),
    "box_convert[cxcywh]": (lambda b: o.box_convert(b, "cxcywh", "xyxy"), [boxes(3)]),
    "box_iou": (o.box_iou, [boxes(3), boxes(4)]),
    "anchor_boxes": (lambda b: o.anchor_boxes.kernel(b, feat_h=2, feat_w=3, stride_h=4.0,
                                                     stride_w=5.0), [normal(2, 4)]),
    # -- losses ----------------------------------------------------------------------------------
    "mse_loss": (lambda x, t: o.mse_loss(x, t, reduction="none"), [_X, normal(2, 3)]),
    "l1_loss": (lambda x, t: o.l1_loss(x, t, reduction="sum"), [_X, _target([0.0])]),
    "smooth_l1_loss": (lambda x, t: o.smooth_l1_loss(x, t, reduction="none", beta=0.8),
                       [_X, _target([-0.8, 0.8])]),
    "smooth_l1_loss[beta0]": (lambda x, t: o.smooth_l1_loss(x, t, beta=0.0),
                              [_X, _target([0.0])]),
    "huber_loss": (lambda x, t: o.huber_loss(x, t, reduction="none", delta=0.7),
                   [_X, _target([-0.7, 0.7])]),
    "kl_div": (lambda x, t: o.kl_div(x, t, reduction="batchmean"),
               [np.log(uniform(0.1, 0.9, 3, 4)), uniform(0.05, 1, 3, 4)]),
    "kl_div[log_target]": (lambda x, t: o.kl_div(x, t, reduction="none", log_target=True),
                           [np.log(uniform(0.1, 0.9, 3, 4)), np.log(uniform(0.05, 1, 3, 4))]),
    "binary_cross_entropy": (lambda x, t, w: o.binary_cross_entropy(x, t, w, reduction="none"),
                             [uniform(0.1, 0.9, 3, 4), uniform(0, 1, 3, 4), positive(3, 4)]),
    "binary_cross_entropy_with_logits": (
        lambda x, t, w, pw: o.binary_cross_entropy_with_logits(x, t, w, reduction="none",
                                                               pos_weight=pw),
        [normal(3, 4), uniform(0, 1, 3, 4), positive(3, 4), positive(4)]),
    "cross_entropy": (lambda x, w: o.cross_entropy(x, _TGT, w), [normal(5, 4), positive(4)]),
    "cross_entropy[smoothing]": (
        lambda x, w: o.cross_entropy(x, _TGT, w, label_smoothing=0.2, reduction="sum"),
        [normal(5, 4), positive(4)]),
    "cross_entropy[ignore]": (
        lambda x, w: o.cross_entropy(x, np.array([1, 3, 2, 0, 3]), w, ignore_index=3,
                                     reduction="none", label_smoothing=0.1),
        [normal(5, 4), positive(4)]),
    "nll_loss": (lambda x, w: o.nll_loss(x, _TGT, w), [normal(5, 4), positive(4)]),
    "nll_loss[none]": (lambda x, w: o.nll_loss(x, _TGT, w, reduction="none"),
                       [normal(5, 4), positive(4)]),
    # -- distances -------------------------------------------------------------------------------
    "cosine_similarity": (lambda a, b: o.cosine_similarity(a, b, dim=1),
                          [normal(2, 3, 4), normal(2, 3, 4)]),
    "cosine_similarity[eps]": (lambda a, b: o.cosine_similarity(a, b, dim=-1, eps=0.5),
                               [normal(3, 2) * 0.2, normal(4, 1, 2)]),
    "pairwise_distance": (o.pairwise_distance, [_X, normal(2, 3)]),
    "pairwise_distance[p1]": (lambda a, b: o.pairwise_distance(a, b, p=1.0),
                              [_X, _target([-1e-6])]),
    "pairwise_distance[p3]": (lambda a, b: o.pairwise_distance(a, b, p=3.0, keepdim=True),
                              [_X, normal(2, 3)]),
    "cdist": (o.cdist, [normal(2, 3, 4), normal(2, 5, 4)]),
    "cdist[p1]": (lambda a, b: o.cdist(a, b, p=1.0), [normal(3, 4), normal(5, 4)]),
    "cdist[p1.5]": (lambda a, b: o.cdist(a, b, p=1.5), [normal(2, 3, 4), normal(2, 5, 4)]),
    # -- scans and sorting -------------------------------------------------------------------------
    "cumsum": (lambda x: o.cumsum(x, axis=1), [normal(3, 5, 2)]),
    "cumprod": (lambda x: o.cumprod(x, axis=1), [normal(3, 5, 2)]),
    "cumprod[zeros]": (lambda x: o.cumprod(x, axis=1), [_ZEROS]),
    "logcumsumexp": (lambda x: o.logcumsumexp(x, axis=1), [normal(3, 5, 2)]),
    "cummax": (lambda x: o.cummax(x, axis=1)[0], [normal(3, 5, 2)]),
    "cummin": (lambda x: o.cummin(x)[0], [normal(3, 5, 2)]),
    "topk": (lambda x: o.topk(x, 2, dim=1)[0], [normal(3, 5, 2)]),
    "topk[smallest]": (lambda x: o.topk(x, 3, dim=0, largest=False)[0], [normal(3, 5, 2)]),
    "sort": (lambda x: o.sort(x, axis=1), [normal(3, 5, 2)]),
    "sort[descending]": (lambda x: o.sort(x, axis=0, descending=True), [normal(3, 5, 2)]),
    "median": (lambda x: o.median(x, axis=1), [normal(3, 5, 2)]),
    "median[even]": (lambda x: o.median(x, axis=1), [normal(3, 4)]),
    # -- reductions and norms --------------------------------------------------------------------
    "nansum": (lambda x: o.nansum(x, axis=1), [_WITH_NAN]),
    "nanmean": (lambda x: o.nanmean(x, axis=0), [_WITH_NAN]),
    "nanmax": (lambda x: o.nanmax(x, axis=1), [_WITH_NAN]),
    "nanmin": (o.nanmin, [_WITH_NAN]),
    "vector_norm": (lambda x: o.vector_norm(x, axis=1), [normal(3, 5)]),
    "vector_norm[1]": (lambda x: o.vector_norm(x, ord=1, axis=0), [away(normal(3, 5), [0.0])]),
    "vector_norm[inf]": (lambda x: o.vector_norm(x, ord=math.inf), [normal(3, 5)]),
    "vector_norm[-inf]": (lambda x: o.vector_norm(x, ord=-math.inf, axis=1), [normal(3, 5)]),
    "vector_norm[3]": (lambda x: o.vector_norm(x, ord=3, axis=1), [normal(3, 5)]),
    "group_norm": (lambda x, w, b: o.group_norm(x, 2, w, b),
                   [normal(2, 4, 3, 2), normal(4), normal(4)]),
    "instance_norm": (lambda x, w, b: o.instance_norm(x, weight=w, bias=b),
                      [normal(2, 3, 5), normal(3), normal(3)]),
}


# -- convolutions, pooling, spatial transformers, cells, rotary, masked attention -------------------
# (their own generator, so the draws of the cases above stay as they were)
_rng2 = np.random.default_rng(1414)


def _n(*shape):
    return _rng2.standard_normal(shape)


def _pixels(n, shape, lo, hi, frac):
    """Pixel positions in [lo, hi) whose fractional parts lie in ``frac`` (clear of the integer
    pixels where bilinear weights kink, or of the halves where nearest jumps)."""
    base = _rng2.integers(lo, hi, shape).astype(np.float64)
    return base + _rng2.uniform(frac[0], frac[1], shape)


def _grid(h, w, oh, ow, align, frac=(0.15, 0.85), margin=1):
    """A sampling grid [2, OH, OW, 2] of normalized positions, some outside the image."""
    px = _pixels(w, (2, oh, ow), -margin - 1, w + margin, frac)
    py = _pixels(h, (2, oh, ow), -margin - 1, h + margin, frac)

    def norm(p, n):
        return 2 * p / (n - 1) - 1 if align else (2 * p + 1) / n - 1
    return np.stack([norm(px, w), norm(py, h)], axis=-1)


def _rnn_inputs(relu):
    """x, h, weights and biases of a 3-step batch whose pre-activations keep clear of 0."""
    while True:
        x, h, wi, wh, bi, bh = _n(3, 4), _n(3, 5), _n(5, 4), _n(5, 5), _n(5), _n(5)
        pre = x @ wi.T + bi + h @ wh.T + bh
        if not relu or np.abs(pre).min() > 0.05:
            return [x, h, wi, wh, bi, bh]


_NEAR = (0.1, 0.4)      # nearest sampling: fractional parts clear of 0.5
_SCALES = _n(4, 6)      # rotary tables: not HF's duplicated halves, to test the general rule

CASES.update({
    "conv1d": (lambda x, w, b: o.conv1d(x, w, b, stride=2, padding=1, dilation=2, groups=2),
               [_n(2, 4, 8), _n(6, 2, 3), _n(6)]),
    "conv1d[plain]": (lambda x, w: o.conv1d(x, w), [_n(1, 3, 6), _n(2, 3, 3)]),
    "conv3d": (lambda x, w, b: o.conv3d(x, w, b, stride=(1, 2, 1), padding=(1, 1, 0),
                                        dilation=(1, 1, 2), groups=2),
               [_n(1, 2, 4, 6, 4), _n(4, 1, 2, 3, 2), _n(4)]),
    "conv_transpose1d": (lambda x, w, b: o.conv_transpose1d(x, w, b, stride=2, padding=1,
                                                            output_padding=1, groups=2),
                         [_n(2, 4, 5), _n(4, 3, 3), _n(6)]),
    "conv_transpose1d[dil]": (lambda x, w: o.conv_transpose1d(x, w, dilation=3,
                                                              output_padding=2),
                              [_n(1, 2, 4), _n(2, 2, 2)]),
    "conv_transpose2d": (lambda x, w, b: o.conv_transpose2d(
        x, w, b, stride=(2, 1), padding=(1, 0), output_padding=(1, 0), groups=2,
        dilation=(1, 2)), [_n(1, 4, 3, 4), _n(4, 2, 3, 2), _n(4)]),
    "avg_pool1d": (lambda x: o.avg_pool1d(x, 3, 2, 1), [_n(2, 3, 9)]),
    "avg_pool1d[exclude]": (lambda x: o.avg_pool1d(x, 3, 2, 1, count_include_pad=False),
                            [_n(2, 3, 9)]),
    "avg_pool3d": (lambda x: o.avg_pool3d(x, (2, 3, 2), (2, 1, 2), (1, 1, 0)),
                   [_n(1, 2, 4, 5, 4)]),
    "avg_pool3d[exclude]": (lambda x: o.avg_pool3d(x, (2, 3, 2), (2, 1, 2), (1, 1, 0),
                                                   count_include_pad=False),
                            [_n(1, 2, 4, 5, 4)]),
    "max_pool1d": (lambda x: o.max_pool1d(x, 3, 2, 1), [_n(2, 3, 9)]),
    "max_pool3d": (lambda x: o.max_pool3d(x, 2, (2, 1, 2), (1, 0, 1)), [_n(1, 2, 4, 5, 4)]),
    # ceil_mode: the last window of each axis marked below overhangs the input (and, for the
    # averages, torch clips its divisor)
    "max_pool1d[ceil]": (lambda x: o.max_pool1d(x, 3, 2, 1, ceil_mode=True), [_n(2, 3, 8)]),
    "max_pool2d[ceil]": (lambda x: o.max_pool2d(x, 2, ceil_mode=True), [_n(1, 2, 5, 7)]),
    "max_pool3d[ceil]": (lambda x: o.max_pool3d(x, 2, (2, 1, 2), (0, 0, 1), ceil_mode=True),
                         [_n(1, 2, 5, 5, 4)]),                             # D overhangs
    "avg_pool1d[ceil]": (lambda x: o.avg_pool1d(x, 3, 2, 1, ceil_mode=True), [_n(2, 3, 8)]),
    "avg_pool1d[ceil_exclude]": (lambda x: o.avg_pool1d(x, 3, 2, 1, ceil_mode=True,
                                                        count_include_pad=False), [_n(2, 3, 8)]),
    "avg_pool2d[ceil]": (lambda x: o.avg_pool2d(x, 3, 2, 1, ceil_mode=True),
                         [_n(1, 2, 6, 5)]),                                # H overhangs
    "avg_pool2d[ceil_exclude]": (lambda x: o.avg_pool2d(x, (2, 3), 2, (1, 1), ceil_mode=True,
                                                        count_include_pad=False),
                                 [_n(1, 2, 6, 6)]),                        # W overhangs
    "avg_pool3d[ceil]": (lambda x: o.avg_pool3d(x, (2, 3, 2), (2, 1, 2), (1, 1, 0),
                                                ceil_mode=True), [_n(1, 2, 5, 5, 5)]),
    "avg_pool3d[ceil_exclude]": (lambda x: o.avg_pool3d(x, (2, 3, 2), (2, 1, 2), (1, 1, 0),
                                                        ceil_mode=True, count_include_pad=False),
                                 [_n(1, 2, 5, 5, 5)]),                     # W overhangs
    "affine_grid": (lambda t: o.affine_grid(t, (2, 1, 3, 4)), [_n(2, 2, 3)]),
    "affine_grid[corners]": (lambda t: o.affine_grid(t, (2, 1, 4, 2), align_corners=True),
                             [_n(2, 2, 3)]),
    "grid_sample": (o.grid_sample, [_n(2, 3, 4, 5), _grid(4, 5, 3, 4, False)]),
    "grid_sample[border]": (lambda x, g: o.grid_sample(x, g, padding_mode="border",
                                                       align_corners=True),
                            [_n(2, 3, 4, 5), _grid(4, 5, 3, 4, True)]),
    "grid_sample[nearest]": (lambda x, g: o.grid_sample(x, g, mode="nearest"),
                             [_n(2, 3, 4, 5), _grid(4, 5, 3, 4, False, _NEAR)]),
    "gru_cell": (o.gru_cell, [_n(3, 4), _n(3, 5), _n(15, 4), _n(15, 5), _n(15), _n(15)]),
    "rnn_cell": (o.rnn_cell, _rnn_inputs(False)),
    "rnn_cell[relu]": (lambda *a: o.rnn_cell(*a, nonlinearity="relu"), _rnn_inputs(True)),
    "rotary_embedding": (o.rotary_embedding, [_n(2, 3, 4, 6), np.cos(_SCALES),
                                              np.sin(_SCALES)]),
    "rotary_embedding[per_sample]": (o.rotary_embedding, [_n(2, 3, 4, 6), _n(2, 1, 4, 6),
                                                          _n(2, 1, 4, 6)]),
    "masked_attention": (lambda q, k, v, m: o.scaled_dot_product_attention(q, k, v,
                                                                           attn_mask=m),
                         [_n(2, 2, 3, 4), _n(2, 2, 5, 4), _n(2, 2, 5, 3), _n(3, 5)]),
    "masked_attention[causal]": (lambda q, k, v: o.scaled_dot_product_attention(
        q, k, v, is_causal=True, scale=0.7), [_n(1, 2, 4, 3), _n(1, 2, 4, 3), _n(1, 2, 4, 2)]),
    "masked_attention[lengths]": (lambda q, k, v: o.scaled_dot_product_attention(
        q, k, v, attn_mask=np.array([[True, False, True, True, True]]),
        lengths=np.array([3, 0]), kv_lengths=np.array([4, 2])),
        [_n(2, 2, 3, 4), _n(2, 2, 5, 4), _n(2, 2, 5, 3)]),
    # morphology, filters, colour maps
    "dilate": (lambda x: o.dilate(x, np.array([[0, 1, 0], [1, 1, 1], [0, 1, 1]])),
               [_n(2, 5, 6)]),
    "erode": (lambda x: o.erode(x, (2, 3)), [_n(2, 5, 6)]),
    "morph_open": (lambda x: o.morph_open(x, 3), [_n(2, 5, 6)]),
    "morph_close": (lambda x: o.morph_close(x, (3, 2)), [_n(2, 5, 6)]),
    "laplacian": (o.laplacian, [_n(2, 4, 5)]),
    "laplacian[3]": (lambda x: o.laplacian(x, ksize=3), [_n(2, 4, 5)]),
    "integral_image": (o.integral_image, [_n(2, 3, 4)]),
    "rgb_to_gray": (o.rgb_to_gray, [_n(2, 3, 2, 3)]),
    "rgb_to_yuv": (lambda x: o.rgb_to_yuv(x, axis=-1), [_n(2, 3, 3)]),
    "yuv_to_rgb": (o.yuv_to_rgb, [_n(3, 2, 4)]),
    # contractions
    "einsum": (lambda a, b: o.einsum("bij,bjk->bik", a, b), [_n(2, 3, 4), _n(2, 4, 5)]),
    "einsum[diag_sum]": (lambda a, b: o.einsum("iij,jk->k", a, b), [_n(3, 3, 4), _n(4, 2)]),
    "outer": (o.outer, [_n(3), _n(4)]),
    "addmm": (lambda i, a, b: o.addmm(i, a, b, beta=0.5, alpha=-1.5),
              [_n(3, 1), _n(3, 4), _n(4, 2)]),
    "addmm[beta0]": (lambda i, a, b: o.addmm(i, a, b, beta=0), [_n(3, 2), _n(3, 4), _n(4, 2)]),
    "baddbmm": (lambda i, a, b: o.baddbmm(i, a, b, beta=2.0, alpha=0.5),
                [_n(2, 3, 2), _n(2, 3, 4), _n(2, 4, 2)]),
    "trace": (lambda x: o.trace(x, offset=1), [_n(3, 4)]),
    "trace[axes]": (lambda x: o.trace(x, offset=-1, axis1=2, axis2=0), [_n(3, 2, 4)]),
    # resizes and nonlinear filters
    "resize_nearest": (lambda x: o.resize_nearest(x, 7, 3), [_n(2, 3, 5)]),
    "resize_nearest[exact]": (lambda x: o.resize_nearest(x, 2, 8, mode="nearest-exact"),
                              [_n(2, 3, 5)]),
    "resize_bicubic": (lambda x: o.resize_bicubic(x, 7, 3), [_n(2, 3, 5)]),
    "resize_bicubic[corners]": (lambda x: o.resize_bicubic(x, 2, 8, align_corners=True),
                                [_n(2, 3, 5)]),
    "median_blur": (o.median_blur, [_n(2, 4, 5)]),
    "median_blur[5]": (lambda x: o.median_blur(x, 5), [_n(1, 4, 6)]),
    "bilateral_filter": (lambda x: o.bilateral_filter(x, 5, 0.8, 1.2), [_n(2, 4, 5)]),
    "warp_affine": (lambda x, m: o.warp_affine(x, m, (4, 5)),
                    [_n(2, 2, 4, 5), np.array([[[0.9, 0.23, 0.31], [-0.17, 1.1, -0.27]],
                                                [[1.2, -0.13, -0.6], [0.21, 0.8, 0.45]]])]),
    "warp_affine[inverse]": (lambda x, m: o.warp_affine(x, m, (3, 4), inverse_map=True),
                             [_n(1, 2, 4, 5), np.array([[0.9, 0.23, 0.31], [-0.17, 1.1, 0.43]])]),
    "warp_perspective": (lambda x, m: o.warp_perspective(x, m, (4, 5)),
                         [_n(2, 2, 4, 5), np.array([[[0.9, 0.13, 0.31], [-0.07, 1.1, -0.27],
                                                     [0.03, -0.02, 1.0]],
                                                    [[1.1, -0.13, 0.2], [0.11, 0.9, 0.45],
                                                     [-0.04, 0.05, 1.1]]])]),
})

# -- HSV colour conversions (their own generator too) ---------------------------------------------
_rng3 = np.random.default_rng(1415)


def _rgb_clear_of_kinks():
    """RGB pixels [2, 3, 2, 3] (colour axis 1) covering all six channel orders, two pixels each:
    the three channels at least 0.15 apart, so no maximum or minimum ties, no gray, value >= 0.35,
    and hue clear of its sector edges and of its wrap from 1 back to 0."""
    orders = [(0, 1, 2), (0, 2, 1), (1, 0, 2), (1, 2, 0), (2, 0, 1), (2, 1, 0)] * 2
    px = np.empty((12, 3))
    for i, (hi, mid, lo) in enumerate(orders):
        low = _rng3.uniform(0.05, 0.25)
        middle = low + _rng3.uniform(0.15, 0.35)
        px[i, [lo, mid, hi]] = low, middle, middle + _rng3.uniform(0.15, 0.35)
    return px.reshape(2, 2, 3, 3).transpose(0, 3, 1, 2).copy()


def _hsv_clear_of_kinks():
    """HSV pixels [2, 3, 2, 3] (colour axis 1) with hue in every sector twice, its position in
    the sector (6 h mod 1) in [0.15, 0.85], some hues a turn below 0 or above 1 (they wrap),
    saturation in [0.2, 0.9] and value in [0.3, 1]."""
    sector = np.arange(12) % 6
    hue = (sector + _rng3.uniform(0.15, 0.85, 12)) / 6 + _rng3.choice([-1.0, 0.0, 0.0, 1.0], 12)
    px = np.stack([hue, _rng3.uniform(0.2, 0.9, 12), _rng3.uniform(0.3, 1.0, 12)], axis=1)
    return px.reshape(2, 2, 3, 3).transpose(0, 3, 1, 2).copy()


CASES.update({
    "rgb_to_hsv": (o.rgb_to_hsv, [_rgb_clear_of_kinks()]),
    "hsv_to_rgb": (o.hsv_to_rgb, [_hsv_clear_of_kinks()]),
})


#: Cases where torch differentiates only some arguments (class and element weights are
#: constants to torch): the arguments compared.
TORCH_ARGS = {"binary_cross_entropy": (0, 1), "binary_cross_entropy_with_logits": (0, 1),
              "cross_entropy": (0,), "cross_entropy[smoothing]": (0,), "nll_loss": (0,),
              "nll_loss[none]": (0,)}


def op_of(case: str) -> str:
    return case.split("[")[0]


def torch_cases():
    """Case name -> the computation in PyTorch (on float64 tensors), where torch has the op."""
    import torch
    import torch.nn.functional as F  # noqa: N812

    def sel(fn, *extra):
        return lambda *a: fn(*a, *extra)

    tgt = torch.tensor(_TGT)
    return {
        "asin": torch.asin, "acos": torch.acos, "atan": torch.atan, "asinh": torch.asinh,
        "acosh": torch.acosh, "atanh": torch.atanh, "sinh": torch.sinh, "cosh": torch.cosh,
        "tan": torch.tan, "exp2": torch.exp2, "log2": torch.log2, "log10": torch.log10,
        "deg2rad": torch.deg2rad, "rad2deg": torch.rad2deg, "nan_to_num": torch.nan_to_num,
        "atan2": torch.atan2, "hypot": torch.hypot, "copysign": torch.copysign,
        "lerp": torch.lerp, "fmax": torch.fmax, "fmin": torch.fmin,
        "logaddexp": torch.logaddexp, "logaddexp2": torch.logaddexp2, "fmod": torch.fmod,
        "remainder": torch.remainder,
        "mish": F.mish, "elu": lambda x: F.elu(x, alpha=0.7), "selu": F.selu,
        "celu": lambda x: F.celu(x, alpha=1.3), "softsign": F.softsign,
        "hardsigmoid": F.hardsigmoid, "hardswish": F.hardswish,
        "hardtanh": lambda x: F.hardtanh(x, -0.5, 0.8), "relu6": F.relu6,
        "logit": torch.logit, "logit[eps]": lambda x: torch.logit(x, eps=0.2),
        "tanhshrink": F.tanhshrink, "hardshrink": F.hardshrink,
        "softshrink": lambda x: F.softshrink(x, 0.3),
        "threshold": lambda x: F.threshold(x, 0.1, 2.0), "log_sigmoid": F.logsigmoid,
        "softplus[beta]": lambda x: F.softplus(x, beta=2.5),
        "softplus[negative_beta]": lambda x: F.softplus(x, beta=-0.7),
        "softplus[threshold]": lambda x: F.softplus(x, beta=1.5, threshold=1.2),
        "prelu": F.prelu, "glu": lambda x: F.glu(x, dim=0),
        "softmin": lambda x: F.softmin(x, dim=0),
        "concat": lambda a, b: torch.cat([a, b, a[:, :1]], dim=1),
        "stack": lambda a, b: torch.stack([a, b, a], dim=2),
        "split": lambda x: torch.tensor_split(x, [1, 3], dim=1),
        "pad": lambda x: F.pad(x, (1, 2, 0, 1), value=0.5),
        "pad[reflect]": lambda x: F.pad(x, (2, 3, 1, 2), mode="reflect"),
        "pad[replicate]": lambda x: F.pad(x, (2, 3, 1, 2), mode="replicate"),
        "pad[circular]": lambda x: F.pad(x, (2, 5, 4, 1), mode="circular"),
        "tile": lambda x: torch.tile(x, (2, 1, 3)),
        "repeat": lambda x: torch.repeat_interleave(x, 3, dim=1),
        "flip": lambda x: torch.flip(x, (0, 2)),
        "roll": lambda x: torch.roll(x, (2, -1), (1, 2)),
        "tril": lambda x: torch.tril(x, 1), "triu": lambda x: torch.triu(x, -1),
        "diag": lambda v: torch.diag(v, -2),
        "diagonal": lambda x: torch.diagonal(x, 1, 1, 2),
        "gather": lambda x: torch.gather(x, 1, torch.tensor(_IDX)),
        "index_select": lambda x: torch.index_select(x, 1, torch.tensor([3, 0, 3, 1])),
        "embedding": lambda w: F.embedding(torch.tensor([[1, 0], [4, 1]]), w),
        "scatter_add": lambda x, s: torch.scatter_add(x, 1, torch.tensor(_IDX), s),
        "masked_fill": lambda x: x.masked_fill(torch.tensor(_X3 > 0.3), 2.0),
        "resize_bilinear": lambda x: F.interpolate(x[None], (7, 9), mode="bilinear")[0],
        "resize_bilinear[corners]": lambda x: F.interpolate(
            x[None], (3, 4), mode="bilinear", align_corners=True)[0],
        "upsample_nearest": lambda x: F.interpolate(x[None], (7, 13), mode="nearest")[0],
        "upsample_nearest[x2]": lambda x: F.interpolate(x[None], scale_factor=2)[0],
        "adaptive_avg_pool2d": lambda x: F.adaptive_avg_pool2d(x, (3, 4)),
        "global_avg_pool2d": lambda x: F.adaptive_avg_pool2d(x, 1),
        "pixel_shuffle": lambda x: F.pixel_shuffle(x, 2),
        "pixel_unshuffle": lambda x: F.pixel_unshuffle(x, 2),
        "mse_loss": lambda x, t: F.mse_loss(x, t, reduction="none"),
        "l1_loss": lambda x, t: F.l1_loss(x, t, reduction="sum"),
        "smooth_l1_loss": lambda x, t: F.smooth_l1_loss(x, t, reduction="none", beta=0.8),
        "huber_loss": lambda x, t: F.huber_loss(x, t, reduction="none", delta=0.7),
        "kl_div": lambda x, t: F.kl_div(x, t, reduction="batchmean"),
        "kl_div[log_target]": lambda x, t: F.kl_div(x, t, reduction="none", log_target=True),
        "binary_cross_entropy": lambda x, t, w: F.binary_cross_entropy(x, t, w,
                                                                      reduction="none"),
        "binary_cross_entropy_with_logits": lambda x, t, w, pw:
            F.binary_cross_entropy_with_logits(x, t, w, reduction="none", pos_weight=pw),
        "cross_entropy": lambda x, w: F.cross_entropy(x, tgt, w),
        "cross_entropy[smoothing]": lambda x, w: F.cross_entropy(
            x, tgt, w, label_smoothing=0.2, reduction="sum"),
        "nll_loss": lambda x, w: F.nll_loss(x, tgt, w),
        "nll_loss[none]": lambda x, w: F.nll_loss(x, tgt, w, reduction="none"),
        "cosine_similarity": lambda a, b: F.cosine_similarity(a, b, dim=1),
        "pairwise_distance": F.pairwise_distance,
        "pairwise_distance[p3]": lambda a, b: F.pairwise_distance(a, b, p=3.0, keepdim=True),
        "cdist": torch.cdist, "cdist[p1]": lambda a, b: torch.cdist(a, b, p=1.0),
        "cdist[p1.5]": lambda a, b: torch.cdist(a, b, p=1.5),
        "cumsum": sel(torch.cumsum, 1), "cumprod": sel(torch.cumprod, 1),
        "cumprod[zeros]": sel(torch.cumprod, 1), "logcumsumexp": sel(torch.logcumsumexp, 1),
        "cummax": lambda x: torch.cummax(x, 1)[0], "cummin": lambda x: torch.cummin(x, -1)[0],
        "topk": lambda x: torch.topk(x, 2, dim=1)[0],
        "topk[smallest]": lambda x: torch.topk(x, 3, dim=0, largest=False)[0],
        "sort": lambda x: torch.sort(x, dim=1)[0],
        "sort[descending]": lambda x: torch.sort(x, dim=0, descending=True)[0],
        "median": lambda x: torch.median(x, dim=1)[0],
        "nansum": lambda x: torch.nansum(x, 1), "nanmean": lambda x: torch.nanmean(x, 0),
        "vector_norm": lambda x: torch.linalg.vector_norm(x, dim=1),
        "vector_norm[1]": lambda x: torch.linalg.vector_norm(x, 1, dim=0),
        "vector_norm[inf]": lambda x: torch.linalg.vector_norm(x, math.inf),
        "vector_norm[-inf]": lambda x: torch.linalg.vector_norm(x, -math.inf, dim=1),
        "vector_norm[3]": lambda x: torch.linalg.vector_norm(x, 3, dim=1),
        "group_norm": lambda x, w, b: F.group_norm(x, 2, w, b),
        "instance_norm": lambda x, w, b: F.instance_norm(x, weight=w, bias=b),
        "conv1d": lambda x, w, b: F.conv1d(x, w, b, stride=2, padding=1, dilation=2, groups=2),
        "conv1d[plain]": F.conv1d,
        "conv3d": lambda x, w, b: F.conv3d(x, w, b, stride=(1, 2, 1), padding=(1, 1, 0),
                                           dilation=(1, 1, 2), groups=2),
        "conv_transpose1d": lambda x, w, b: F.conv_transpose1d(x, w, b, stride=2, padding=1,
                                                               output_padding=1, groups=2),
        "conv_transpose1d[dil]": lambda x, w: F.conv_transpose1d(x, w, dilation=3,
                                                                 output_padding=2),
        "conv_transpose2d": lambda x, w, b: F.conv_transpose2d(
            x, w, b, stride=(2, 1), padding=(1, 0), output_padding=(1, 0), groups=2,
            dilation=(1, 2)),
        "avg_pool1d": lambda x: F.avg_pool1d(x, 3, 2, 1),
        "avg_pool1d[exclude]": lambda x: F.avg_pool1d(x, 3, 2, 1, count_include_pad=False),
        "avg_pool3d": lambda x: F.avg_pool3d(x, (2, 3, 2), (2, 1, 2), (1, 1, 0)),
        "avg_pool3d[exclude]": lambda x: F.avg_pool3d(x, (2, 3, 2), (2, 1, 2), (1, 1, 0),
                                                      count_include_pad=False),
        "max_pool1d": lambda x: F.max_pool1d(x, 3, 2, 1),
        "max_pool3d": lambda x: F.max_pool3d(x, 2, (2, 1, 2), (1, 0, 1)),
        "max_pool1d[ceil]": lambda x: F.max_pool1d(x, 3, 2, 1, ceil_mode=True),
        "max_pool2d[ceil]": lambda x: F.max_pool2d(x, 2, ceil_mode=True),
        "max_pool3d[ceil]": lambda x: F.max_pool3d(x, 2, (2, 1, 2), (0, 0, 1), ceil_mode=True),
        "avg_pool1d[ceil]": lambda x: F.avg_pool1d(x, 3, 2, 1, ceil_mode=True),
        "avg_pool1d[ceil_exclude]": lambda x: F.avg_pool1d(x, 3, 2, 1, ceil_mode=True,
                                                           count_include_pad=False),
        "avg_pool2d[ceil]": lambda x: F.avg_pool2d(x, 3, 2, 1, ceil_mode=True),
        "avg_pool2d[ceil_exclude]": lambda x: F.avg_pool2d(x, (2, 3), 2, (1, 1), ceil_mode=True,
                                                           count_include_pad=False),
        "avg_pool3d[ceil]": lambda x: F.avg_pool3d(x, (2, 3, 2), (2, 1, 2), (1, 1, 0),
                                                   ceil_mode=True),
        "avg_pool3d[ceil_exclude]": lambda x: F.avg_pool3d(x, (2, 3, 2), (2, 1, 2), (1, 1, 0),
                                                           ceil_mode=True,
                                                           count_include_pad=False),
        "affine_grid": lambda t: F.affine_grid(t, (2, 1, 3, 4), align_corners=False),
        "affine_grid[corners]": lambda t: F.affine_grid(t, (2, 1, 4, 2), align_corners=True),
        "grid_sample": lambda x, g: F.grid_sample(x, g, align_corners=False),
        "grid_sample[border]": lambda x, g: F.grid_sample(x, g, padding_mode="border",
                                                          align_corners=True),
        "grid_sample[nearest]": lambda x, g: F.grid_sample(x, g, mode="nearest",
                                                           align_corners=False),
        "gru_cell": torch.gru_cell, "rnn_cell": torch.rnn_tanh_cell,
        "rnn_cell[relu]": torch.rnn_relu_cell,
        "rotary_embedding": _torch_rotary, "rotary_embedding[per_sample]": _torch_rotary,
        "rgb_to_hsv": _torch_rgb_to_hsv, "hsv_to_rgb": _torch_hsv_to_rgb,
        "masked_attention": lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v,
                                                                             attn_mask=m),
        "masked_attention[causal]": lambda q, k, v: F.scaled_dot_product_attention(
            q, k, v, is_causal=True, scale=0.7),
        "laplacian": lambda x: F.conv2d(F.pad(x[:, None], (1, 1, 1, 1), mode="replicate"),
                                        torch.tensor([[[[0.0, 1, 0], [1, -4, 1], [0, 1, 0]]]],
                                                     dtype=x.dtype))[:, 0],
        "integral_image": lambda x: x.cumsum(-2).cumsum(-1),
        "einsum": lambda a, b: torch.einsum("bij,bjk->bik", a, b),
        "einsum[diag_sum]": lambda a, b: torch.einsum("iij,jk->k", a, b),
        "outer": torch.outer,
        "addmm": lambda i, a, b: torch.addmm(i, a, b, beta=0.5, alpha=-1.5),
        "addmm[beta0]": lambda i, a, b: torch.addmm(i, a, b, beta=0),
        "baddbmm": lambda i, a, b: torch.baddbmm(i, a, b, beta=2.0, alpha=0.5),
        "trace[axes]": lambda x: torch.diagonal(x, -1, 2, 0).sum(-1),
        "resize_nearest": lambda x: F.interpolate(x[None], (7, 3), mode="nearest")[0],
        "resize_nearest[exact]": lambda x: F.interpolate(x[None], (2, 8),
                                                         mode="nearest-exact")[0],
        "resize_bicubic": lambda x: F.interpolate(x[None], (7, 3), mode="bicubic")[0],
        "resize_bicubic[corners]": lambda x: F.interpolate(x[None], (2, 8), mode="bicubic",
                                                           align_corners=True)[0],
    }


def _torch_rotary(x, cos, sin):
    import torch

    half = x.shape[-1] // 2
    return x * cos + torch.cat([-x[..., half:], x[..., :half]], dim=-1) * sin


def _torch_rgb_to_hsv(x):
    """The hexcone formula on colour axis 1, written with torch ops (torch has no HSV op)."""
    import torch

    r, g, b = x.unbind(1)
    hi = torch.maximum(torch.maximum(r, g), b)
    delta = hi - torch.minimum(torch.minimum(r, g), b)
    sector = torch.where(r == hi, (g - b) / delta,
                         torch.where(g == hi, 2 + (b - r) / delta, 4 + (r - g) / delta))
    return torch.stack([torch.remainder(sector / 6, 1.0), delta / hi, hi], dim=1)


def _torch_hsv_to_rgb(x):
    """HSV to RGB by the closed form ``v - v s clamp(min(k, 4 - k), 0, 1)`` with
    ``k = (n + 6 h) mod 6`` and n = 5, 3, 1 for red, green and blue: a composition unlike the
    kernel's sector table, on colour axis 1."""
    import torch

    h, s, v = x.unbind(1)

    def channel(n):
        k = torch.remainder(n + 6 * h, 6.0)
        return v - v * s * torch.clamp(torch.minimum(k, 4 - k), 0.0, 1.0)
    return torch.stack([channel(5.0), channel(3.0), channel(1.0)], dim=1)
