"""Neural-network layers in PyTorch's conventions (``torch.nn.functional``).

Images are NCHW (batch, channels, rows, columns) and convolution weights OIHW (output channels,
input channels per group, kernel rows, kernel columns). A 3-D image (C, H, W) is treated as one
unbatched image, as PyTorch does. Padding is zero padding for convolutions and average pooling and
``-inf`` for max pooling. Outputs have ``(H + 2 * pad - dilation * (K - 1) - 1) // stride + 1`` rows
(and likewise columns); pooling with ``ceil_mode=True`` rounds up as torch does (``pool.ceil_pool``,
shared with the 1-D and 3-D poolings, which says how).
"""

from __future__ import annotations

import halide as hl
import numpy as np

from ..errors import ParamError, ShapeError
from ..runtime import as_array
from ._args import int_pair
from ._consts import lit
from ._op import Param, op
from .elementwise import kernel_exp

_FLOATS = ["float32", "float64"]


# -- shared helpers --------------------------------------------------------------------------------
def _pair(value, op_name: str, arg: str, low: int) -> tuple[int, int]:
    """An int or a pair of ints (rows, columns), each at least ``low``."""
    return int_pair(op_name, arg, value, low)


def _image(value, op_name: str, arg: str = "x") -> tuple[np.ndarray, bool]:
    """The input as a 4-D NCHW array, and whether it was a 3-D (unbatched) image."""
    x = as_array(value, op_name, arg)
    if x.ndim == 3:
        return x[np.newaxis], True
    return x, False


def out_size(n: int, k: int, stride: int, pad: int, dil: int = 1) -> int:
    """A window's output size along one axis: ``floor((n + 2 pad - dil (k - 1) - 1) / stride) + 1``
    (convolutions, and pooling without ceil_mode)."""
    return (n + 2 * pad - dil * (k - 1) - 1) // stride + 1


def _check_out_size(op_name: str, dims, params, kh: int, kw: int, dil=(1, 1)) -> None:
    """Raises ShapeError when the (padded) input is smaller than the (dilated) kernel window."""
    p = params
    oh = out_size(dims["H"], kh, p["stride_h"], p["pad_h"], dil[0])
    ow = out_size(dims["W"], kw, p["stride_w"], p["pad_w"], dil[1])
    if oh < 1 or ow < 1:
        raise ShapeError(
            f"{op_name}: the output would be {oh} x {ow}; the padded input "
            f"{dims['H'] + 2 * p['pad_h']} x {dims['W'] + 2 * p['pad_w']} is smaller than the "
            f"{'dilated ' if dil != (1, 1) else ''}kernel window "
            f"{dil[0] * (kh - 1) + 1} x {dil[1] * (kw - 1) + 1}")


def _derive_out(kernel_from_weights: bool, dilation: bool = False):
    """``derive=`` for the output rows and columns; the kernel size comes from the weights' dims
    KH, KW or from the parameters kernel_h, kernel_w."""
    def derive(dims, p):
        if kernel_from_weights:
            kh, kw = dims["KH"], dims["KW"]
        else:
            kh, kw = p["kernel_h"], p["kernel_w"]
        dh, dw = (p["dil_h"], p["dil_w"]) if dilation else (1, 1)
        return {"OH": out_size(dims["H"], kh, p["stride_h"], p["pad_h"], dh),
                "OW": out_size(dims["W"], kw, p["stride_w"], p["pad_w"], dw)}
    return derive


def _padded(x, name: str, pad_h: int, pad_w: int, dims, value):
    """``x`` ("N C H W") extended with ``value`` outside its rows and columns, in x's coordinates.

    Without padding the input itself is returned (every access then stays inside it).
    """
    if pad_h == 0 and pad_w == 0:
        return x
    iw, ih, ic, inn = hl.Var("iw"), hl.Var("ih"), hl.Var("ic"), hl.Var("inb")
    f = hl.Func(name)
    inside = (iw >= 0) & (iw < dims.W) & (ih >= 0) & (ih < dims.H)
    f[iw, ih, ic, inn] = hl.select(
        inside, x[hl.clamp(iw, 0, dims.W - 1), hl.clamp(ih, 0, dims.H - 1), ic, inn],
        hl.cast(x.type(), value))
    return f


#: Bound of window sizes, strides, padding and dilation. Halide indexes with 32-bit ints: with
#: each factor below 2^15, index arithmetic such as dilation * kernel stays below 2^30.
MAX_WINDOW = 1 << 15
#: Bound of the channel groups (they must divide the channel counts as well).
MAX_GROUPS = 1 << 20


def _window_params(kernel: bool = False, dilation: bool = False, groups: bool = False):
    w = MAX_WINDOW
    ps = []
    if kernel:
        ps += [Param("kernel_h", int, low=1, high=w, doc="window rows"),
               Param("kernel_w", int, low=1, high=w, doc="window columns")]
    ps += [Param("stride_h", int, 1, low=1, high=w, doc="step between output rows, in input rows"),
           Param("stride_w", int, 1, low=1, high=w,
                 doc="step between output columns, in input columns"),
           Param("pad_h", int, 0, low=0, high=w, doc="rows of padding above and below"),
           Param("pad_w", int, 0, low=0, high=w, doc="columns of padding left and right")]
    if dilation:
        ps += [Param("dil_h", int, 1, low=1, high=w, doc="spacing between kernel rows"),
               Param("dil_w", int, 1, low=1, high=w, doc="spacing between kernel columns")]
    if groups:
        ps += [Param("groups", int, 1, low=1, high=MAX_GROUPS,
                     doc="channel groups (C and O divisible by it)")]
    return ps


def _windows(xp: np.ndarray, kh: int, kw: int, sh: int, sw: int, dh: int, dw: int, oh: int,
             ow: int):
    """Yields (i, j, view) per kernel tap: the [N, C, OH, OW] input pixels tap (i, j) meets."""
    for i in range(kh):
        for j in range(kw):
            yield i, j, xp[:, :, i * dh: i * dh + sh * (oh - 1) + 1: sh,
                           j * dw: j * dw + sw * (ow - 1) + 1: sw]


# -- conv2d ----------------------------------------------------------------------------------------
def _conv2d_reference(x, w, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """NumPy conv2d: a sum over kernel taps of per-group channel contractions, in float64."""
    x, w = np.asarray(x), np.asarray(w)
    unbatched = x.ndim == 3
    if unbatched:
        x = x[np.newaxis]
    (sh, sw), (ph, pw), (dh, dw) = (_pair(v, "conv2d", a, lo) for v, a, lo in
                                    ((stride, "stride", 1), (padding, "padding", 0),
                                     (dilation, "dilation", 1)))
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    g = groups
    oh, ow = out_size(h, kh, sh, ph, dh), out_size(wd, kw, sw, pw, dw)
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    wg = w.astype(np.float64).reshape(g, o // g, cg, kh, kw)
    acc = np.zeros((n, g, o // g, oh, ow))
    for i, j, view in _windows(xp, kh, kw, sh, sw, dh, dw, oh, ow):
        acc += np.einsum("ngchw,goc->ngohw", view.reshape(n, g, cg, oh, ow), wg[..., i, j])
    out = acc.reshape(n, o, oh, ow)
    if bias is not None:
        out = out + np.asarray(bias, dtype=np.float64)[None, :, None, None]
    out = out.astype(x.dtype)
    return out[0] if unbatched else out


def _conv2d_kernel_reference(x, w, bias, *, stride_h=1, stride_w=1, pad_h=0, pad_w=0, dil_h=1,
                             dil_w=1, groups=1):
    return _conv2d_reference(x, w, bias, (stride_h, stride_w), (pad_h, pad_w), (dil_h, dil_w),
                             groups)


def _conv2d_validate(dims, p):
    g = p["groups"]
    if dims["C"] % g or dims["O"] % g:
        raise ParamError(f"conv2d: groups={g} must divide both the input channels C={dims['C']} "
                         f"and the output channels O={dims['O']}")
    if dims["CG"] * g != dims["C"]:
        raise ShapeError(f"conv2d: x has C={dims['C']} channels but w expects "
                         f"{dims['CG']} x groups={g} = {dims['CG'] * g} "
                         "(w is [O, C/groups, KH, KW])")
    _check_out_size("conv2d", dims, p, dims["KH"], dims["KW"], (p["dil_h"], p["dil_w"]))


def padding_by_name(name, padding: str, nsp: int, ks, dil, stride, x=None):
    """``padding='valid'`` (none) or ``'same'`` (stride 1) of an ``nsp``-D convolution as
    per-axis pads, as ``torch.nn.functional`` reads them: ``(pads, x)``. Where ``dilation *
    (kernel - 1)`` is odd, torch pads one more on the far side: ``x`` comes back with that
    row (column, plane) of zeros added (``pypto.ops.pad``), and the kernel pads the rest evenly."""
    if padding == "valid":
        return (0,) * nsp, x
    if padding == "same":
        if any(s != 1 for s in stride):
            raise ParamError(f"{name}: padding='same' needs stride 1, got stride={stride}")
        total = [d * (k - 1) for d, k in zip(dil, ks)]
        extra = [t % 2 for t in total]
        if any(extra) and x is not None:
            from .layout import pad as _pad

            spec = []
            for e in reversed(extra):        # torch's order: the last axis first, (left, right)
                spec += [0, e]
            x = _pad(x, tuple(spec))
        return tuple(t // 2 for t in total), x
    raise ParamError(f"{name}: 'padding' must be an int, a sequence of {nsp} ints, 'valid' "
                     f"or 'same', got {padding!r}")


def _conv2d_frontend(x, w, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """2-D convolution (cross-correlation) of NCHW ``x`` with OIHW ``w``, like F.conv2d."""
    name = "conv2d"
    x, unbatched = _image(x, name)
    w = as_array(w, name, "w")
    sh, sw = _pair(stride, name, "stride", 1)
    dh, dw = _pair(dilation, name, "dilation", 1)
    if isinstance(padding, str) and w.ndim == 4:     # 'valid' or 'same', as conv1d and conv3d
        (ph, pw), x = padding_by_name(name, padding, 2, w.shape[2:], (dh, dw), (sh, sw), x)
    else:
        ph, pw = _pair(padding, name, "padding", 0)
    if isinstance(groups, bool) or not hasattr(groups, "__index__") or int(groups) < 1:
        raise ParamError(f"{name}: 'groups' must be a positive int, got {groups!r}")
    if bias is None:
        o = w.shape[0] if w.ndim == 4 else 1
        bias = np.zeros(o, dtype=x.dtype if x.dtype.kind == "f" else np.float32)
    else:
        bias = as_array(bias, name, "bias")
    out = conv2d.kernel(x, w, bias, stride_h=sh, stride_w=sw, pad_h=ph, pad_w=pw, dil_h=dh,
                        dil_w=dw, groups=int(groups))
    return out[0] if unbatched else out


@op(category="nn",
    inputs={"x": "N C H W", "w": "O CG KH KW", "bias": "O"},
    output="N O OH OW",
    dtypes=_FLOATS,
    params=_window_params(dilation=True, groups=True),
    reference=_conv2d_reference,
    kernel_reference=_conv2d_kernel_reference,
    frontend=_conv2d_frontend,
    validate=_conv2d_validate,
    derive=_derive_out(True, dilation=True),
    example={"N": 2, "C": 8, "H": 17, "W": 19, "O": 8, "CG": 8, "KH": 3, "KW": 3})
def conv2d(x, w, bias, *, stride_h, stride_w, pad_h, pad_w, dil_h, dil_w, groups, dims):
    """2-D convolution: out[n, o, i, j] = bias[o] + sum over c, a, b of
    w[o, c, a, b] * x[n, g * C/groups + c, i * stride_h + a * dil_h - pad_h,
    j * stride_w + b * dil_w - pad_w], with g = o // (O/groups) and zero padding."""
    ow, oh, o, n = hl.Var("ow"), hl.Var("oh"), hl.Var("o"), hl.Var("n")
    xp = _padded(x, "x_pad", pad_h, pad_w, dims, 0)
    r = hl.RDom([hl.Range(0, dims.KW), hl.Range(0, dims.KH), hl.Range(0, dims.CG)], "r")
    chan = r.z if groups == 1 else (o / (dims.O / groups)) * dims.CG + r.z
    acc = hl.Func("acc")
    acc[ow, oh, o, n] = bias[o]
    acc[ow, oh, o, n] += w[r.x, r.y, r.z, o] * xp[ow * stride_w + r.x * dil_w - pad_w,
                                                   oh * stride_h + r.y * dil_h - pad_h, chan, n]
    out = hl.Func("out")
    out[ow, oh, o, n] = acc[ow, oh, o, n]
    return out


# -- depthwise_conv2d ------------------------------------------------------------------------------
def _depthwise_reference(x, w, stride=1, padding=0):
    """NumPy depthwise convolution: each channel convolved with its own kernel, in float64."""
    x, w = np.asarray(x), np.asarray(w)
    unbatched = x.ndim == 3
    if unbatched:
        x = x[np.newaxis]
    (sh, sw), (ph, pw) = _pair(stride, "depthwise_conv2d", "stride", 1), _pair(
        padding, "depthwise_conv2d", "padding", 0)
    if w.shape[0] != x.shape[1]:         # a channel multiplier: output c * M + m reads channel c
        x = np.repeat(x, w.shape[0] // x.shape[1], axis=1)
    n, c, h, wd = x.shape
    kh, kw = w.shape[2:]
    oh, ow = out_size(h, kh, sh, ph), out_size(wd, kw, sw, pw)
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    acc = np.zeros((n, c, oh, ow))
    for i, j, view in _windows(xp, kh, kw, sh, sw, 1, 1, oh, ow):
        acc += view * w[:, 0, i, j].astype(np.float64)[None, :, None, None]
    out = acc.astype(x.dtype)
    return out[0] if unbatched else out


def _depthwise_kernel_reference(x, w, *, stride_h=1, stride_w=1, pad_h=0, pad_w=0):
    return _depthwise_reference(x, w, (stride_h, stride_w), (pad_h, pad_w))


def _depthwise_validate(dims, p):
    if dims["M"] != 1:
        raise ShapeError(f"depthwise_conv2d: w must be [C, 1, KH, KW] (one kernel per channel), "
                         f"got {dims['M']} in axis 1")
    _check_out_size("depthwise_conv2d", dims, p, dims["KH"], dims["KW"])


def _depthwise_frontend(x, w, stride=1, padding=0):
    """Depthwise 2-D convolution: channel c of NCHW ``x`` with w[c, 0] (conv2d with groups=C).

    A channel multiplier M, ``w`` [C * M, 1, KH, KW] (torch's conv2d with groups=C and
    out_channels=C * M), gives output channels c * M + m = channel c with w[c * M + m, 0]; it runs
    as ``conv2d(..., groups=C)`` (the depthwise kernel is the M = 1 case)."""
    name = "depthwise_conv2d"
    x, unbatched = _image(x, name)
    w = as_array(w, name, "w")
    sh, sw = _pair(stride, name, "stride", 1)
    ph, pw = _pair(padding, name, "padding", 0)
    c = x.shape[1]
    if w.ndim == 4 and w.shape[1] == 1 and w.shape[0] != c and c and w.shape[0] % c == 0:
        out = conv2d(x, w, stride=(sh, sw), padding=(ph, pw), groups=c)
        return out[0] if unbatched else out
    out = depthwise_conv2d.kernel(x, w, stride_h=sh, stride_w=sw, pad_h=ph, pad_w=pw)
    return out[0] if unbatched else out


@op(category="nn",
    inputs={"x": "N C H W", "w": "C M KH KW"},
    output="N C OH OW",
    dtypes=_FLOATS,
    params=_window_params(),
    reference=_depthwise_reference,
    kernel_reference=_depthwise_kernel_reference,
    frontend=_depthwise_frontend,
    validate=_depthwise_validate,
    derive=_derive_out(True),
    example={"N": 2, "C": 16, "H": 17, "W": 19, "M": 1, "KH": 3, "KW": 3})
def depthwise_conv2d(x, w, *, stride_h, stride_w, pad_h, pad_w, dims):
    """Depthwise convolution: out[n, c, i, j] = sum over a, b of
    w[c, 0, a, b] * x[n, c, i * stride_h + a - pad_h, j * stride_w + b - pad_w] (zero padding)."""
    ow, oh, c, n = hl.Var("ow"), hl.Var("oh"), hl.Var("c"), hl.Var("n")
    xp = _padded(x, "x_pad", pad_h, pad_w, dims, 0)
    r = hl.RDom([hl.Range(0, dims.KW), hl.Range(0, dims.KH)], "r")
    acc = hl.Func("acc")
    acc[ow, oh, c, n] = hl.cast(x.type(), 0)
    acc[ow, oh, c, n] += w[r.x, r.y, 0, c] * xp[ow * stride_w + r.x - pad_w,
                                                 oh * stride_h + r.y - pad_h, c, n]
    out = hl.Func("out")
    out[ow, oh, c, n] = acc[ow, oh, c, n]
    return out


# -- pooling ---------------------------------------------------------------------------------------
def _pool_args(name, kernel_size, stride, padding):
    kh, kw = _pair(kernel_size, name, "kernel_size", 1)
    sh, sw = (kh, kw) if stride is None else _pair(stride, name, "stride", 1)
    ph, pw = _pair(padding, name, "padding", 0)
    if 2 * ph > kh or 2 * pw > kw:
        raise ParamError(f"{name}: 'padding' must be at most half of kernel_size {(kh, kw)}, "
                         f"got {padding!r}")
    return kh, kw, sh, sw, ph, pw


def _pool_reference(kind, x, kernel_size, stride=None, padding=0, ceil_mode=False,
                    count_include_pad=True):
    from .pool import window_reference   # pool imports this module

    name = f"{kind}_pool2d"
    x = np.asarray(x)
    unbatched = x.ndim == 3
    if unbatched:
        x = x[np.newaxis]
    kh, kw, sh, sw, ph, pw = _pool_args(name, kernel_size, stride, padding)
    out = window_reference(kind, x, (kh, kw), (sh, sw), (ph, pw), ceil_mode, count_include_pad)
    return out[0] if unbatched else out


def _max_pool_reference(x, kernel_size, stride=None, padding=0, ceil_mode=False):
    """NumPy max pooling: the largest value of each window (padding counts as -inf); NaN wins."""
    return _pool_reference("max", x, kernel_size, stride, padding, ceil_mode)


def _avg_pool_reference(x, kernel_size, stride=None, padding=0, ceil_mode=False,
                        count_include_pad=True):
    """NumPy average pooling over each window (zero padding, counted unless told otherwise)."""
    return _pool_reference("avg", x, kernel_size, stride, padding, ceil_mode, count_include_pad)


def _pool_kernel_reference(kind):
    def ref(x, *, kernel_h, kernel_w, stride_h=1, stride_w=1, pad_h=0, pad_w=0,
            count_include_pad=True):
        return _pool_reference(kind, x, (kernel_h, kernel_w), (stride_h, stride_w), (pad_h, pad_w),
                               False, count_include_pad)
    return ref


def _pool_validate(name):
    def validate(dims, p):
        from .pool import too_small   # pool imports this module

        if 2 * p["pad_h"] > p["kernel_h"] or 2 * p["pad_w"] > p["kernel_w"]:
            raise ParamError(f"{name}: padding ({p['pad_h']}, {p['pad_w']}) must be at most half "
                             f"of the kernel ({p['kernel_h']}, {p['kernel_w']})")
        sizes, ks = (dims["H"], dims["W"]), (p["kernel_h"], p["kernel_w"])
        ss, ps = (p["stride_h"], p["stride_w"]), (p["pad_h"], p["pad_w"])
        outs = [out_size(n, k, st, q) for n, k, st, q in zip(sizes, ks, ss, ps)]
        if min(outs) < 1:
            raise too_small(name, sizes, ks, ss, ps, outs)
    return validate


def _pool_call(kind, x, kernel_size, stride, padding, ceil_mode, include=True):
    from .pool import ceil_pool   # pool imports this module

    name = f"{kind}_pool2d"
    if not isinstance(ceil_mode, (bool, np.bool_)):
        raise ParamError(f"{name}: 'ceil_mode' must be a bool, got {ceil_mode!r}")
    x, unbatched = _image(x, name)
    kh, kw, sh, sw, ph, pw = _pool_args(name, kernel_size, stride, padding)
    the_op = max_pool2d if kind == "max" else avg_pool2d

    def run(xs, count_include_pad):
        extra = {} if kind == "max" else {"count_include_pad": count_include_pad}
        return the_op.kernel(xs, kernel_h=kh, kernel_w=kw, stride_h=sh, stride_w=sw, pad_h=ph,
                             pad_w=pw, **extra)
    if ceil_mode:
        out = ceil_pool(kind, name, x, (kh, kw), (sh, sw), (ph, pw), run, include)
    else:
        out = run(x, include)
    return out[0] if unbatched else out


def _max_pool_frontend(x, kernel_size, stride=None, padding=0, ceil_mode=False):
    """2-D max pooling of NCHW ``x``, like F.max_pool2d (padding counts as -inf)."""
    return _pool_call("max", x, kernel_size, stride, padding, ceil_mode)


def _avg_pool_frontend(x, kernel_size, stride=None, padding=0, ceil_mode=False,
                       count_include_pad=True):
    """2-D average pooling of NCHW ``x``, like F.avg_pool2d (zero padding)."""
    if not isinstance(count_include_pad, (bool, np.bool_)):
        raise ParamError(f"avg_pool2d: 'count_include_pad' must be a bool, "
                         f"got {count_include_pad!r}")
    return _pool_call("avg", x, kernel_size, stride, padding, ceil_mode, bool(count_include_pad))


def _pool_windows(x, kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w, dims, fill):
    ow, oh, c, n = hl.Var("ow"), hl.Var("oh"), hl.Var("c"), hl.Var("n")
    xp = _padded(x, "x_pad", pad_h, pad_w, dims, fill)
    r = hl.RDom([hl.Range(0, kernel_w), hl.Range(0, kernel_h)], "r")
    tap = xp[ow * stride_w + r.x - pad_w, oh * stride_h + r.y - pad_h, c, n]
    return (ow, oh, c, n), r, tap


@op(category="nn",
    inputs={"x": "N C H W"},
    output="N C OH OW",
    dtypes=_FLOATS,
    params=_window_params(kernel=True),
    reference=_max_pool_reference,
    kernel_reference=_pool_kernel_reference("max"),
    frontend=_max_pool_frontend,
    validate=_pool_validate("max_pool2d"),
    derive=_derive_out(False),
    example={"N": 2, "C": 8, "H": 17, "W": 19})
def max_pool2d(x, *, kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w, dims):
    """Max pooling: out[n, c, i, j] = max of x over rows i * stride_h - pad_h + [0, kernel_h) and
    columns j * stride_w - pad_w + [0, kernel_w); padding counts as -inf and a NaN in a window
    makes the result NaN."""
    (ow, oh, c, n), r, tap = _pool_windows(x, kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w,
                                           dims, float("-inf"))
    acc = hl.Func("acc")
    acc[ow, oh, c, n] = hl.cast(x.type(), float("-inf"))
    cur = acc[ow, oh, c, n]
    acc[ow, oh, c, n] = hl.select((tap > cur) | hl.is_nan(tap), tap, cur)
    out = hl.Func("out")
    out[ow, oh, c, n] = acc[ow, oh, c, n]
    return out


@op(category="nn",
    inputs={"x": "N C H W"},
    output="N C OH OW",
    dtypes=_FLOATS,
    params=_window_params(kernel=True) + [
        Param("count_include_pad", bool, True, doc="divide by the full window, padding included")],
    reference=_avg_pool_reference,
    kernel_reference=_pool_kernel_reference("avg"),
    frontend=_avg_pool_frontend,
    validate=_pool_validate("avg_pool2d"),
    derive=_derive_out(False),
    example={"N": 2, "C": 8, "H": 17, "W": 19})
def avg_pool2d(x, *, kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w, count_include_pad,
               dims):
    """Average pooling: the mean of each kernel_h x kernel_w window (see max_pool2d); padding is
    zero and is counted in the divisor unless count_include_pad is false."""
    (ow, oh, c, n), r, tap = _pool_windows(x, kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w,
                                           dims, 0)
    t = x.type()
    acc = hl.Func("acc")
    acc[ow, oh, c, n] = hl.cast(t, 0)
    acc[ow, oh, c, n] += tap
    out = hl.Func("out")
    if count_include_pad or (pad_h == 0 and pad_w == 0):
        out[ow, oh, c, n] = acc[ow, oh, c, n] * lit(t, 1.0 / (kernel_h * kernel_w))
    else:
        h0, w0 = oh * stride_h - pad_h, ow * stride_w - pad_w
        rows = hl.min(h0 + kernel_h, dims.H) - hl.max(h0, 0)
        cols = hl.min(w0 + kernel_w, dims.W) - hl.max(w0, 0)
        out[ow, oh, c, n] = acc[ow, oh, c, n] / hl.cast(t, rows * cols)
    return out


# -- lstm_cell -------------------------------------------------------------------------------------
def _sigmoid_np(v):
    with np.errstate(over="ignore"):
        return 1.0 / (1.0 + np.exp(-v))


def _lstm_reference(x, h, c, w_ih, w_hh, b_ih=None, b_hh=None):
    """NumPy LSTM cell (torch.nn.LSTMCell): gates i, f, g, o from x @ w_ih.T + h @ w_hh.T + biases;
    c' = f * c + i * g, h' = o * tanh(c'). Returns (h', c')."""
    x, h, c, w_ih, w_hh = (np.asarray(a) for a in (x, h, c, w_ih, w_hh))
    dt = x.dtype
    f64 = [a.astype(np.float64) for a in (x, h, c, w_ih, w_hh)]
    gates = f64[0] @ f64[3].T + f64[1] @ f64[4].T
    for b in (b_ih, b_hh):
        if b is not None:
            gates = gates + np.asarray(b, dtype=np.float64)
    i, f, g, o = np.split(gates, 4, axis=-1)
    c_new = _sigmoid_np(f) * f64[2] + _sigmoid_np(i) * np.tanh(g)
    h_new = _sigmoid_np(o) * np.tanh(c_new)
    return h_new.astype(dt), c_new.astype(dt)


def _lstm_kernel_reference(x, h, c, w_ih, w_hh, b_ih, b_hh):
    return _lstm_reference(x, h, c, w_ih, w_hh, b_ih, b_hh)


def _lstm_validate(dims, p):
    if dims["G"] != 4 * dims["HID"]:
        raise ShapeError(f"lstm_cell: w_ih and w_hh must have 4 * hidden = {4 * dims['HID']} rows "
                         f"(gates i, f, g, o) for hidden size {dims['HID']}, got {dims['G']}")


def _lstm_frontend(x, h, c, w_ih, w_hh, b_ih=None, b_hh=None):
    """One LSTM step like torch.nn.LSTMCell; x [B, IN] (or [IN]), h and c [B, HID].

    Returns (h', c'). Missing biases count as zero."""
    name = "lstm_cell"
    arrs = [as_array(a, name, n) for a, n in ((x, "x"), (h, "h"), (c, "c"), (w_ih, "w_ih"),
                                                (w_hh, "w_hh"))]
    unbatched = arrs[0].ndim == 1
    if unbatched:
        arrs[:3] = [a[np.newaxis] if a.ndim == 1 else a for a in arrs[:3]]
    rows = arrs[3].shape[0] if arrs[3].ndim == 2 else 4
    dt = arrs[0].dtype if arrs[0].dtype.kind == "f" else np.float32
    bs = [np.zeros(rows, dtype=dt) if b is None else as_array(b, name, n)
          for b, n in ((b_ih, "b_ih"), (b_hh, "b_hh"))]
    h_new, c_new = lstm_cell.kernel(*arrs, *bs)
    return (h_new[0], c_new[0]) if unbatched else (h_new, c_new)


def _expr(v):
    return v if isinstance(v, hl.Expr) else hl.Expr(v)


def _sigmoid(v):
    v = _expr(v)
    one = hl.cast(v.type(), 1)
    return one / (one + kernel_exp(-v))


def _tanh(v):
    # tanh(v) = 1 - 2 / (exp(2 v) + 1): vectorizes (hl.tanh lowers to a scalar call) and is
    # exact at both ends (exp overflowing to inf gives 1). Also the GRU and RNN cells'.
    v = _expr(v)
    one = hl.cast(v.type(), 1)
    return one - hl.cast(v.type(), 2) / (kernel_exp(v * hl.cast(v.type(), 2)) + one)


@op(category="nn",
    inputs={"x": "B IN", "h": "B HID", "c": "B HID", "w_ih": "G IN", "w_hh": "G HID",
            "b_ih": "G", "b_hh": "G"},
    outputs={"h_out": "B HID", "c_out": "B HID"},
    dtypes=_FLOATS,
    reference=_lstm_reference,
    kernel_reference=_lstm_kernel_reference,
    frontend=_lstm_frontend,
    validate=_lstm_validate,
    example={"B": 4, "IN": 24, "HID": 16, "G": 64})
def lstm_cell(x, h, c, w_ih, w_hh, b_ih, b_hh, *, dims):
    """LSTM cell: gates = x @ w_ih.T + b_ih + h @ w_hh.T + b_hh split into i, f, g, o (in that
    order); c_out = sigmoid(f) * c + sigmoid(i) * tanh(g); h_out = sigmoid(o) * tanh(c_out)."""
    j, b, hid, k = hl.Var("j"), hl.Var("b"), hl.Var("hid"), hl.Var("k")
    n_in, n = dims.IN, dims.HID
    # Both gate products as one: [x, h] (K = IN + HID values per batch row) times the weights
    # [w_ih, w_hh] read transposed (wt, gate j innermost), so that the blocked matrix product
    # that linear uses computes them.
    # ``likely`` lets Halide split the loops over k at IN, so no select runs per value (the
    # select in wt's staging cost 0.25 of 2.2 ms at batch 64, 512 hidden units).
    xh = hl.Func("xh")
    xh[k, b] = hl.select(k < n_in, hl.likely(x[hl.min(k, n_in - 1), b]), h[hl.max(k - n_in, 0), b])
    wt = hl.Func("wt")
    wt[j, k] = hl.select(k < n_in, hl.likely(w_ih[hl.min(k, n_in - 1), j]),
                         w_hh[hl.max(k - n_in, 0), j])
    r = hl.RDom([hl.Range(0, n_in + n)], "r")
    acc = hl.Func("acc")
    acc[j, b] = b_ih[j] + b_hh[j]
    acc[j, b] += xh[r.x, b] * wt[j, r.x]
    gates = hl.Func("gates")
    gates[j, b] = acc[j, b]
    c_out = hl.Func("c_out")
    c_out[hid, b] = (_sigmoid(gates[hid + n, b]) * c[hid, b]
                     + _sigmoid(gates[hid, b]) * _tanh(gates[hid + 2 * n, b]))
    h_out = hl.Func("h_out")
    h_out[hid, b] = _sigmoid(gates[hid + 3 * n, b]) * _tanh(c_out[hid, b])
    return h_out, c_out


# These frontends depend only on their arguments' dtypes, shapes and parameters, never on array
# values: a repeated call may skip them (runtime.call_public records what they did once).
for _fe in (_conv2d_frontend, _depthwise_frontend, _max_pool_frontend, _avg_pool_frontend, _lstm_frontend):
    _fe.shape_only = True
