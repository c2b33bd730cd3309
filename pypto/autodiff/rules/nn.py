"""Rules of the nn ops: softmax, the norms (layer, rms, batch, group, instance), convolutions,
pooling, attention and lstm_cell.

Convolutions (shapes as the op declares them; s stride, d dilation, p padding, K kernel):

* input gradient: the output gradient spread by the stride (``dilate_axis``), padded by
  d (K - 1) - p (plus the rows the forward's floor division dropped), convolved with the weights
  flipped in space and transposed per group (O/G <-> C/G), dilation d;
* weight gradient: a correlation of the input with the output gradient, as a grouped conv2d
  whose "batch" is C/G, "channels" G * N and "kernel" the output gradient; the roles of stride
  and dilation swap (stride d, dilation s) and the result is cropped to K.

Pooling routes through the same transposed convolution (avg: a ones kernel per channel) or,
for max, through masks: each output's gradient goes to the first maximum of its window in
row-major order, as PyTorch's CPU kernel does. ``ceil_mode=True`` never reaches these rules: the
frontends pad x on the far side, run the floor-mode kernel and rescale clipped averages with mul
(``pypto.ops.pool.ceil_pool``), so its gradient is the pad, pooling and mul rules' chain
(checked in tests/autodiff/cases.py, ``*_pool*d[ceil*]``).
"""

from __future__ import annotations

import math

import numpy as np

from ... import ops
from .. import shapes
from . import rule


# -- softmax and norms -----------------------------------------------------------------------------

@rule("softmax")
def _softmax(c):
    y, dy = c.y, c.dy
    return [y * (dy - (dy * y).sum(axis=1, keepdims=True))]


@rule("log_softmax")
def _log_softmax(c):
    y, dy = c.y, c.dy
    return [dy - ops.exp(y) * dy.sum(axis=1, keepdims=True)]


@rule("layer_norm")
def _layer_norm(c):
    x, gamma, _ = c.inputs
    dx, xhat = _norm_grad(x, c.dy, gamma, (1,), c.params["eps"])
    return [dx, (c.dy * xhat).sum(axis=0), c.dy.sum(axis=0)]


@rule("rms_norm")
def _rms_norm(c):
    x, gamma = c.inputs
    dy = c.dy
    r = ops.rsqrt((x * x).mean(axis=1, keepdims=True) + c.params["eps"])
    g = dy * gamma
    dx = r * g - x * (r * r * r) * (g * x).mean(axis=1, keepdims=True)
    return [dx, (dy * x * r).sum(axis=0)]


@rule("batch_norm")
def _batch_norm(c):
    """Inference batch norm: y = (x - mean) * rsqrt(var + eps) * gamma + beta, per channel."""
    x, mean, var, gamma, _ = c.inputs
    dy = c.dy
    n_c = (1, x.shape[1], 1)
    rstd = ops.rsqrt(var + c.params["eps"])
    xc = x - mean.reshape(n_c)
    scale = (gamma * rstd).reshape(n_c)
    per_c = (dy * xc).sum(axis=(0, 2))
    dsum = dy.sum(axis=(0, 2))
    return [dy * scale, -dsum * gamma * rstd, per_c * gamma * (-0.5) * rstd * rstd * rstd,
            per_c * rstd, dsum]


# -- convolutions ----------------------------------------------------------------------------------

def conv_input_grad(dy, w, in_hw, stride, pad, dil, groups):
    """d conv2d / d x: the transposed convolution of ``dy`` with ``w`` (same stride, padding,
    dilation and groups; ``output_padding`` restores the rows the forward's floor division
    dropped). It reads ``w`` in place and skips a stride's zeros, where spreading and padding
    ``dy`` and flipping ``w`` first were passes of their own: 3.7 of the 6.5 ms of the ResNet
    layer's input gradient (64 channels, 56 x 56, 3 x 3), one thread."""
    o, cg, kh, kw = w.shape
    rem = [(n + 2 * p - d * (k - 1) - 1) - (m - 1) * s        # rows the floor division dropped
           for n, m, k, s, p, d in zip(in_hw, dy.shape[2:], (kh, kw), stride, pad, dil)]
    zero = shapes.zeros((groups * cg,), dy.dtype)
    # A stride beyond the kernel with no padding (undilated): conv_transpose2d's phased form
    # fails at run time in a traced program there (a bounds error on w, "accessed at K"), so
    # that axis is spread by the stride here and transposed at stride 1 (its dropped rows
    # padded onto dy's end).
    for ax, (k, s, p, d) in enumerate(zip((kh, kw), stride, pad, dil)):
        if s > k and p == 0 and d == 1:
            dy = shapes.pad_axis(shapes.dilate_axis(dy, 2 + ax, s), 2 + ax, 0, rem[ax])
            stride = tuple(1 if i == ax else v for i, v in enumerate(stride))
            rem[ax] = 0
    return ops.conv_transpose2d.kernel(dy, w, zero, stride_h=stride[0], stride_w=stride[1],
                                       pad_h=pad[0], pad_w=pad[1], out_pad_h=rem[0],
                                       out_pad_w=rem[1], dil_h=dil[0], dil_w=dil[1],
                                       groups=groups)


def conv_weight_grad(x, dy, k_hw, stride, pad, dil, groups):
    """d conv2d / d w: a product with the input's patches (one group), else a grouped conv2d of
    the input with the output gradient."""
    if groups == 1:
        return _weight_grad_patches(x, dy, k_hw, stride, pad, dil)
    n, c, h, wd = x.shape
    o = dy.shape[1]
    cg = c // groups
    xs = x.reshape(n, groups, cg, h, wd).transpose(2, 1, 0, 3, 4).reshape(cg, groups * n, h, wd)
    ker = dy.transpose(1, 0, 2, 3)                             # [O, N, OH, OW]
    zero = shapes.zeros((o,), dy.dtype)
    r = ops.conv2d.kernel(xs, ker, zero, stride_h=dil[0], stride_w=dil[1], pad_h=pad[0],
                          pad_w=pad[1], dil_h=stride[0], dil_w=stride[1], groups=groups)
    r = r[:, :, :k_hw[0], :k_hw[1]]                           # [CG, O, KH, KW]
    return r.transpose(1, 0, 2, 3)


def _weight_grad_patches(x, dy, k_hw, stride, pad, dil):
    """d conv2d / d w for one group, one kernel tap at a time: ``dy`` as [O, N*OH*OW] times the
    tap's strided slice of the padded input as [N*OH*OW, C], the taps stacked last. The conv
    form has a kernel as large as the image, which conv2d's schedule handles badly: the 3x3
    ResNet layer's weight gradient (64 channels, 56x56) took 69 ms that way, torch 9.5 for the
    whole backward; one product of all taps' patches spent its time stacking them."""
    n, c = x.shape[:2]
    o, oh, ow = dy.shape[1:]
    kh, kw = k_hw
    if stride == (1, 1):
        return _weight_grad_shifted(x, dy, k_hw, pad, dil)
    # The pad op, not shapes.pad_axis: that one's periodic view and mask took 1.8 of the 5.7 ms
    # of the ResNet layer's weight gradient (one thread), this one ~0.5.
    xp = ops.pad(x, (pad[1], pad[1], pad[0], pad[0])) if any(pad) else x
    dm = dy.transpose(1, 0, 2, 3).reshape(o, n * oh * ow)
    taps = []
    for a in range(kh):
        for b in range(kw):
            r0, c0 = a * dil[0], b * dil[1]
            tap = xp[:, :, r0:r0 + (oh - 1) * stride[0] + 1:stride[0],
                     c0:c0 + (ow - 1) * stride[1] + 1:stride[1]]
            taps.append(dm @ tap.transpose(1, 0, 2, 3).reshape(c, n * oh * ow).T)   # [O, C]
    if len(taps) == 1:
        return taps[0].reshape(o, c, 1, 1)
    return ops.stack(taps, axis=2).reshape(o, c, kh, kw)


def _weight_grad_shifted(x, dy, k_hw, pad, dil):
    """d conv2d / d w at stride 1, each tap a product with a row slice of one array. The padded
    input, channels last and flattened over (sample, row, column), is ``xt`` [N*Hp*Wp, C]
    (one transpose); tap (a, b) reads the input of output (n, i, j) at row
    n*Hp*Wp + i*Wp + j + off with off = a*dil_h*Wp + b*dil_w. The output gradient, placed at the
    top-left of a zero [Hp, Wp] block per sample and flattened the same way (``dm`` [O, L]),
    makes each tap ``dm @ xt[off:off + L]``, a dense product: the positions past a row's or an
    image's end meet zeros in ``dm``. The ResNet layer's weight gradient (64 channels, 56 x 56,
    3 x 3) took 3.2-3.7 ms per tap with strided slices of the input, transposed
    (:func:`_weight_grad_patches`); torch 1.2-1.7."""
    n, c, h, wd = x.shape
    o, oh, ow = dy.shape[1:]
    kh, kw = k_hw
    xp = ops.pad(x, (pad[1], pad[1], pad[0], pad[0])) if any(pad) else x
    hp, wp = h + 2 * pad[0], wd + 2 * pad[1]
    xc = xp.reshape(c, hp * wp) if n == 1 else xp.transpose(1, 0, 2, 3).reshape(c, n * hp * wp)
    xt = ops.transpose(xc)                                     # [N*Hp*Wp, C], dense
    dp = dy if (oh, ow) == (hp, wp) else ops.pad(dy, (0, wp - ow, 0, hp - oh))
    dm = dp.reshape(o, hp * wp) if n == 1 else dp.transpose(1, 0, 2, 3).reshape(o, n * hp * wp)
    length = (n - 1) * hp * wp + (oh - 1) * wp + ow           # past it dm is zero
    dm = dm[:, :length]
    taps = []
    for a in range(kh):
        for b in range(kw):
            off = a * dil[0] * wp + b * dil[1]
            taps.append(dm @ xt[off:off + length])                                # [O, C]
    if len(taps) == 1:
        return taps[0].reshape(o, c, 1, 1)
    return ops.stack(taps, axis=2).reshape(o, c, kh, kw)


def _conv_params(p, dilation=True):
    stride = (p["stride_h"], p["stride_w"])
    pad = (p["pad_h"], p["pad_w"])
    dil = (p["dil_h"], p["dil_w"]) if dilation else (1, 1)
    return stride, pad, dil


@rule("conv2d")
def _conv2d(c):
    x, w, _ = c.inputs
    stride, pad, dil = _conv_params(c.params)
    g = c.params["groups"]
    dx = conv_input_grad(c.dy, w, x.shape[2:], stride, pad, dil, g)
    dw = conv_weight_grad(x, c.dy, w.shape[2:], stride, pad, dil, g)
    return [dx, dw, c.dy.sum(axis=(0, 2, 3))]


@rule("depthwise_conv2d")
def _depthwise(c):
    x, w = c.inputs
    stride, pad, dil = _conv_params(c.params, dilation=False)
    ch = x.shape[1]
    dx = conv_input_grad(c.dy, w, x.shape[2:], stride, pad, dil, ch)
    dw = conv_weight_grad(x, c.dy, w.shape[2:], stride, pad, dil, ch)
    return [dx, dw]


# -- pooling ---------------------------------------------------------------------------------------

def _pool(p):
    return (p["kernel_h"], p["kernel_w"]), (p["stride_h"], p["stride_w"]), (p["pad_h"], p["pad_w"])


@rule("avg_pool2d")
def _avg_pool(c):
    x = c.inputs[0]
    (kh, kw), stride, pad = _pool(c.params)
    _, ch, h, wd = x.shape
    oh, ow = c.dy.shape[2:]
    if c.params["count_include_pad"] or pad == (0, 0):
        scaled = c.dy * (1.0 / (kh * kw))
    else:                         # each window's divisor counts its in-bounds pixels
        rows = np.array([min(i * stride[0] - pad[0] + kh, h) - max(i * stride[0] - pad[0], 0)
                         for i in range(oh)])
        cols = np.array([min(j * stride[1] - pad[1] + kw, wd) - max(j * stride[1] - pad[1], 0)
                         for j in range(ow)])
        inv = (1.0 / (rows[:, None] * cols[None, :])).astype(x.dtype)
        scaled = c.dy * inv
    ones = shapes.ones((ch, 1, kh, kw), x.dtype)
    return [conv_input_grad(scaled, ones, (h, wd), stride, pad, (1, 1), ch)]


@rule("max_pool2d")
def _max_pool(c):
    x = c.inputs[0]
    (kh, kw), (sh, sw), (ph, pw) = _pool(c.params)
    _, _, h, wd = x.shape
    oh, ow = c.dy.shape[2:]
    xp = shapes.pad_axis(shapes.pad_axis(x, 2, ph, ph, -math.inf), 3, pw, pw, -math.inf)
    hp, wp = xp.shape[2:]
    total = None
    taken = None
    for a in range(kh):
        for b in range(kw):
            tap = xp[:, :, a:a + sh * (oh - 1) + 1:sh, b:b + sw * (ow - 1) + 1:sw]
            hit = tap == c.y
            if taken is not None:
                hit = hit & ~taken
            taken = hit if taken is None else taken | hit
            part = ops.where(hit, c.dy, 0.0)
            part = shapes.unslice(part, xp.shape, (0, 0, a, b), (1, 1, sh, sw))
            total = part if total is None else total + part
    return [total[:, :, ph:ph + h, pw:pw + wd]]


# -- attention -------------------------------------------------------------------------------------

def _swap_last(x):
    """[n, r, c] -> [n, c, r], dense, through the blocked transpose kernel."""
    n, r, c = x.shape
    return ops.batch_transpose.kernel(x.reshape(n, r, c, 1)).reshape(n, c, r)


@rule("scaled_dot_product_attention")
def _sdpa(c):
    """Recomputes the attention weights p = softmax(q k^T scale) and backpropagates through
    out = p v: dv = p^T do, dp = do v^T, ds = p (dp - rowsum(dp p)), dq = scale ds k,
    dk = scale ds^T q. (rowsum(do out) is the same sum without an S x L pass, but the forward's
    weights are not bit for bit the recomputed ones: with scores of ~300 it put dq 2% off,
    against 0.07% so.)

    Every S x L array (scores, p, do v^T, ds) is only ever a dense, untransposed operand: the
    products that would read one transposed are computed transposed instead (dv^T = do^T p,
    dk^T = (scale q)^T ds) from small [S, D] transposes, so no S x L transpose is made. The
    scale multiplies q (S x D) rather than the scores. At 8 heads x 512 x 64 this took the
    backward (value_and_grad, one thread) from ~57 to ~37 ms CPU, under load."""
    q, k, v = c.inputs
    b, hh, s, d = q.shape
    l, e = k.shape[2], v.shape[3]
    scale = c.params.get("scale")
    scale = 1.0 / math.sqrt(d) if scale is None else scale
    bh = b * hh
    q2, k2, v2 = q.reshape(bh, s, d), k.reshape(bh, l, d), v.reshape(bh, l, e)
    do = c.dy.reshape(bh, s, e)
    bmm = ops.batch_matmul.kernel
    qs = q2 * scale
    p = ops.softmax.kernel(bmm(qs, _swap_last(k2)).reshape(bh * s, l)).reshape(bh, s, l)
    dv_t = bmm(_swap_last(do), p)                                  # [bh, e, l]
    dp = bmm(do, _swap_last(v2))
    ds = p * (dp - (dp * p).sum(axis=2, keepdims=True))            # unscaled
    dq = bmm(ds, k2) * scale
    dk_t = bmm(_swap_last(qs), ds)                                 # [bh, d, l]
    return [dq.reshape(q.shape), _swap_last(dk_t).reshape(k.shape),
            _swap_last(dv_t).reshape(v.shape)]


# -- lstm_cell -------------------------------------------------------------------------------------

def _stack_columns(parts):
    """[B, H] blocks side by side as [B, len(parts) * H] (a concat made of pads and adds)."""
    hid = parts[0].shape[1]
    n = len(parts)
    out = None
    for i, t in enumerate(parts):
        t = shapes.pad_axis(t, 1, i * hid, (n - 1 - i) * hid)
        out = t if out is None else out + t
    return out


@rule("lstm_cell")
def _lstm_cell(c):
    """Recomputes the gates (two matmuls), then the chain rule through
    c' = f c + i g, h' = o tanh(c') with i, f, o sigmoids and g a tanh."""
    x, h, cc, w_ih, w_hh, b_ih, b_hh = c.inputs
    dh, dc = c.dys
    hid = h.shape[1]
    gates = ops.linear.kernel(x, w_ih, b_ih) + ops.linear.kernel(h, w_hh, b_hh)
    i = ops.sigmoid(gates[:, 0:hid])
    f = ops.sigmoid(gates[:, hid:2 * hid])
    g = ops.tanh(gates[:, 2 * hid:3 * hid])
    o = ops.sigmoid(gates[:, 3 * hid:])
    # c' is recomputed too: reading the forward node's c_out alone would leave its h_out
    # unused, which the fused lowering does not handle yet (a ScheduleError naming h_out).
    tc = ops.tanh(f * cc + i * g)
    dct = dc + dh * o * (1.0 - tc * tc)
    d_gates = _stack_columns([dct * g * i * (1.0 - i), dct * cc * f * (1.0 - f),
                              dct * i * (1.0 - g * g), dh * tc * o * (1.0 - o)])
    dx = ops.matmul.kernel(d_gates, w_ih)
    dhp = ops.matmul.kernel(d_gates, w_hh)
    dw_ih = ops.matmul.kernel(d_gates.T, x)
    dw_hh = ops.matmul.kernel(d_gates.T, h)
    db = d_gates.sum(axis=0)
    return [dx, dhp, dct * f, dw_ih, dw_hh, db, db]


# -- the norms' shared gradient; group_norm and instance_norm --------------------------------------

def _norm_grad(x, dy, gamma, axes, eps):
    """(dx, xhat) of y = (x - mean) rsqrt(var + eps) * gamma, statistics over ``axes`` (biased
    variance): dx = rstd (g - mean(g) - xhat mean(g xhat)) with g = dy gamma.

    Written so that each reduction reads a product of its own, which the program folds into
    the reduction's loop, and no product is shared with another reader (a shared one is
    written out and read back): mean(g) reads dy gamma, mean(g xhat) reads dy (xhat gamma),
    and dx scales dy by rstd gamma instead of reading g. The layer_norm backward at 4096x1024
    went from 11 loops over the array, 4 of them writing an intermediate, to 7 writing none
    (vjp(jit) at one thread ~94 -> ~35 ms CPU, torch eager ~35-45, under load)."""
    def mean(t):
        return t.mean(axis=axes, keepdims=True)

    xc = x - mean(x)
    rstd = ops.rsqrt(mean(xc * xc) + eps)
    xhat = xc * rstd
    mg = mean(dy * gamma)
    mgx = mean(dy * (xhat * gamma))
    return (rstd * gamma) * dy - rstd * (mg + xhat * mgx), xhat


@rule("group_norm")
def _group_norm(c):
    """x [N, G, CG, S], weight and bias [G, CG]: statistics over (CG, S) per (N, G)."""
    x, w, _ = c.inputs
    g, cg = w.shape
    dx, xhat = _norm_grad(x, c.dy, w.reshape(1, g, cg, 1), (2, 3), c.params["eps"])
    return [dx, (c.dy * xhat).sum(axis=(0, 3)), c.dy.sum(axis=(0, 3))]


@rule("instance_norm")
def _instance_norm(c):
    """x [N, C, S], weight and bias [C]: statistics over S per (N, C)."""
    x, w, _ = c.inputs
    dx, xhat = _norm_grad(x, c.dy, w.reshape(1, -1, 1), (2,), c.params["eps"])
    return [dx, (c.dy * xhat).sum(axis=(0, 2)), c.dy.sum(axis=(0, 2))]
