"""Convolutions beside conv2d, in ``torch.nn.functional``'s conventions: conv1d, conv3d,
conv_transpose1d and conv_transpose2d.

Layouts (as torch): ``x`` is [N, C, *S] with S = (L,) for 1-D, (H, W) for 2-D and (D, H, W) for
3-D; an input without its batch axis ([C, *S]) is one unbatched sample. Weights are
[O, C / groups, *K] for a convolution and [C, O / groups, *K] for a transposed convolution (input
channels first, as ``F.conv_transpose2d`` takes them). Padding is zero padding. Output sizes, per
spatial axis of input size n and kernel size k:

- convolution: ``(n + 2 pad - dil (k - 1) - 1) // stride + 1``;
- transposed convolution: ``(n - 1) stride - 2 pad + dil (k - 1) + output_padding + 1``, with
  ``output_padding < max(stride, dilation)`` as torch requires.

``padding`` may also be ``"valid"`` (no padding) or ``"same"`` for convolutions with stride 1.
Where an axis's ``dil (k - 1)`` is odd, torch pads one more on the far side: so does PyPTO,
with a padded copy of x (``pypto.ops.pad``; torch makes one too).

A transposed convolution is computed as a gather (each output reads the inputs that reach it)
split by output phase: output position ``q * stride + p`` is reached by the same kernel taps for
every ``q``, so the inner loops read inputs contiguously and skip the taps of other phases (a
reduction predicate) instead of multiplying the zeros of a zero-stuffed input.
"""

from __future__ import annotations

import itertools

import halide as hl
import numpy as np

from ..errors import DtypeError, ParamError, ShapeError
from ..runtime import as_array
from ._args import int_seq
from ._op import Param, op
from .nn import MAX_GROUPS, MAX_WINDOW, padding_by_name
from .nn import out_size as conv_out

_FLOATS = ["float32", "float64"]

#: Spatial dim names (NumPy order) per spatial rank: input, kernel, output, and the suffix of
#: the per-axis parameters (``stride_h``; none for 1-D: ``stride``).
_AXES = {1: (("L", "K", "OL", ""),),
         2: (("H", "KH", "OH", "_h"), ("W", "KW", "OW", "_w")),
         3: (("D", "KD", "OD", "_d"), ("H", "KH", "OH", "_h"), ("W", "KW", "OW", "_w"))}


# -- argument helpers (shared with pool) -------------------------------------------------------------
def ntuple(value, n: int, op_name: str, arg: str, low: int) -> tuple[int, ...]:
    """An int or a sequence of ``n`` ints, each at least ``low``, as a tuple of ``n`` ints."""
    return int_seq(op_name, arg, value, n, low)


def batched(value, nsp: int, op_name: str, names: str):
    """``x`` as an array of rank ``nsp + 2`` ([N, C, *S]) and whether it came without N."""
    x = as_array(value, op_name, "x")
    if x.ndim == nsp + 1:
        return x.reshape((1,) + tuple(x.shape)), True
    if x.ndim != nsp + 2:
        raise ShapeError(f"{op_name}: x must be {nsp + 2}-D [N, C, {names}] (or {nsp + 1}-D "
                         f"[C, {names}] for one unbatched sample), got shape {tuple(x.shape)}")
    return x, False


def check_float(op_name: str, **arrays) -> None:
    """DtypeError unless every array is float32 or float64 and all share one dtype."""
    first = None
    for arg, a in arrays.items():
        dt = np.dtype(a.dtype)
        if dt.name not in _FLOATS:
            raise DtypeError(f"{op_name}: '{arg}' has dtype {dt.name}; expected float32 or "
                             f"float64 (convert it with .astype(np.float32))")
        if first is None:
            first = (arg, dt)
        elif dt != first[1]:
            raise DtypeError(f"{op_name}: '{arg}' is {dt.name} but '{first[0]}' is "
                             f"{first[1].name}; give all arrays one dtype, e.g. "
                             f"{arg}.astype({first[0]}.dtype)")


def _transposed_out(n: int, k: int, stride: int, pad: int, dil: int, out_pad: int) -> int:
    return (n - 1) * stride - 2 * pad + dil * (k - 1) + out_pad + 1


def zero_padded(x, name: str, extents, pads, fill=0.0, force: bool = False):
    """``x`` ([*S, C, N] in Halide order) extended with ``fill`` outside its spatial extents.

    ``extents`` and ``pads`` list the spatial axes innermost first. Without padding (and unless
    ``force``: reads that can leave the input for other reasons) ``x`` itself is returned.
    """
    if not force and not any(pads):
        return x
    sv = [hl.Var(f"i{j}") for j in range(len(extents))]
    c, n = hl.Var("ic"), hl.Var("inb")
    inside = None
    for v, e in zip(sv, extents):
        cond = (v >= 0) & (v < e)
        inside = cond if inside is None else inside & cond
    f = hl.Func(name)
    f[(*sv, c, n)] = hl.select(inside, x[(*[hl.clamp(v, 0, e - 1) for v, e in zip(sv, extents)],
                                          c, n)], hl.cast(x.type(), fill))
    return f


def axis_params(nsp: int, kinds, groups: bool = False) -> list[Param]:
    """Per-axis int parameters: ``kinds`` are (prefix, default, low, doc) tuples."""
    ps = []
    for prefix, default, low, doc in kinds:
        for _, _, _, sfx in _AXES[nsp]:
            where = f" along {sfx[1:].upper()}" if sfx else ""
            ps.append(Param(f"{prefix}{sfx}", int, default, low=low, high=MAX_WINDOW,
                            doc=doc + where))
    if groups:
        ps.append(Param("groups", int, 1, low=1, high=MAX_GROUPS,
                        doc="channel groups (C and O divisible by it)"))
    return ps


def per_axis(p: dict, prefix: str, nsp: int) -> tuple[int, ...]:
    """A kernel parameter of every spatial axis, NumPy order."""
    return tuple(p[f"{prefix}{sfx}"] for _, _, _, sfx in _AXES[nsp])


def _kw(prefix: str, values, nsp: int) -> dict:
    return {f"{prefix}{sfx}": v for (_, _, _, sfx), v in zip(_AXES[nsp], values)}


def _groups(op_name: str, groups) -> int:
    if isinstance(groups, (bool, np.bool_)) or not hasattr(groups, "__index__") or \
            int(groups) < 1:
        raise ParamError(f"{op_name}: 'groups' must be a positive int, got {groups!r}")
    return int(groups)


_STRIDE = ("stride", 1, 1, "step between outputs, in inputs")
_PAD = ("pad", 0, 0, "zero padding on both sides")
_DIL = ("dil", 1, 1, "spacing between kernel taps")
_OUT_PAD = ("out_pad", 0, 0, "extra outputs on the far side (output_padding)")


# -- convolution -----------------------------------------------------------------------------------
def _conv_reference(nsp):
    def ref(x, w, bias=None, stride=1, padding=0, dilation=1, groups=1):
        x, w = np.asarray(x), np.asarray(w)
        unbatched = x.ndim == nsp + 1
        if unbatched:
            x = x[np.newaxis]
        s = ntuple(stride, nsp, "ref", "stride", 1)
        d = ntuple(dilation, nsp, "ref", "dilation", 1)
        ks = w.shape[2:]
        if isinstance(padding, str):
            p = (0,) * nsp if padding == "valid" else tuple(di * (k - 1) // 2
                                                           for di, k in zip(d, ks))
        else:
            p = ntuple(padding, nsp, "ref", "padding", 0)
        n, c = x.shape[:2]
        o, cg = w.shape[:2]
        g = groups
        outs = [conv_out(x.shape[2 + i], ks[i], s[i], p[i], d[i]) for i in range(nsp)]
        xp = np.pad(x.astype(np.float64), [(0, 0), (0, 0)] + [(pi, pi) for pi in p])
        wg = w.astype(np.float64).reshape((g, o // g, cg) + ks)
        acc = np.zeros((n, g, o // g) + tuple(outs))
        for tap in itertools.product(*(range(k) for k in ks)):
            sl = tuple(slice(t * di, t * di + si * (m - 1) + 1, si)
                       for t, di, si, m in zip(tap, d, s, outs))
            view = xp[(slice(None), slice(None)) + sl].reshape((n, g, cg) + tuple(outs))
            acc += np.einsum("ngc...,goc->ngo...", view, wg[(Ellipsis,) + tap])
        out = acc.reshape((n, o) + tuple(outs))
        if bias is not None:
            out = out + np.asarray(bias, np.float64).reshape((1, o) + (1,) * nsp)
        out = out.astype(x.dtype)
        return out[0] if unbatched else out
    return ref


def _conv_kernel_reference(nsp):
    ref = _conv_reference(nsp)

    def kref(x, w, bias, **p):
        p = {**{f"{a}{sfx}": dv for a, dv in (("stride", 1), ("pad", 0), ("dil", 1))
                for *_, sfx in _AXES[nsp]}, "groups": 1, **p}
        return ref(x, w, bias, per_axis(p, "stride", nsp), per_axis(p, "pad", nsp),
                   per_axis(p, "dil", nsp), p["groups"])
    return kref


def _conv_validate(name, nsp):
    def validate(dims, p):
        g = p["groups"]
        if dims["C"] % g or dims["O"] % g:
            raise ParamError(f"{name}: groups={g} must divide both the input channels "
                             f"C={dims['C']} and the output channels O={dims['O']}")
        if dims["CG"] * g != dims["C"]:
            raise ShapeError(f"{name}: x has C={dims['C']} channels but w expects "
                             f"{dims['CG']} x groups={g} = {dims['CG'] * g} (w is "
                             f"[O, C/groups, {', '.join(k for _, k, _, _ in _AXES[nsp])}])")
        sizes = []
        for (i, k, _, sfx) in _AXES[nsp]:
            sizes.append(conv_out(dims[i], dims[k], p[f"stride{sfx}"], p[f"pad{sfx}"],
                                  p[f"dil{sfx}"]))
        if min(sizes) < 1:
            padded = [dims[i] + 2 * p[f"pad{sfx}"] for i, _, _, sfx in _AXES[nsp]]
            window = [p[f"dil{sfx}"] * (dims[k] - 1) + 1 for _, k, _, sfx in _AXES[nsp]]
            raise ShapeError(f"{name}: the output would be {' x '.join(map(str, sizes))}; the "
                             f"padded input {' x '.join(map(str, padded))} is smaller than the "
                             f"(dilated) kernel window {' x '.join(map(str, window))}")
    return validate


def _conv_derive(nsp):
    def derive(dims, p):
        return {o: conv_out(dims[i], dims[k], p[f"stride{sfx}"], p[f"pad{sfx}"], p[f"dil{sfx}"])
                for i, k, o, sfx in _AXES[nsp]}
    return derive


def _padding(name, padding, nsp, ks, dil, stride, x):
    """(pads, x): x gains torch's extra far-side zeros for an uneven padding='same'."""
    if isinstance(padding, str):
        return padding_by_name(name, padding, nsp, ks, dil, stride, x)
    return ntuple(padding, nsp, name, "padding", 0), x


def _conv_frontend(nsp, name):
    names = ", ".join(i for i, _, _, _ in _AXES[nsp])
    knames = ", ".join(k for _, k, _, _ in _AXES[nsp])

    def frontend(x, w, bias=None, stride=1, padding=0, dilation=1, groups=1):
        x, unbatched = batched(x, nsp, name, names)
        w = as_array(w, name, "w")
        if w.ndim != nsp + 2:
            raise ShapeError(f"{name}: w must be {nsp + 2}-D [O, C/groups, {knames}], got shape "
                             f"{tuple(w.shape)}")
        s = ntuple(stride, nsp, name, "stride", 1)
        d = ntuple(dilation, nsp, name, "dilation", 1)
        p, x = _padding(name, padding, nsp, tuple(w.shape[2:]), d, s, x)
        g = _groups(name, groups)
        if bias is None:
            bias = np.zeros(w.shape[0], dtype=x.dtype if np.dtype(x.dtype).kind == "f"
                            else np.float32)
        else:
            bias = as_array(bias, name, "bias")
            if tuple(bias.shape) != (w.shape[0],):
                raise ShapeError(f"{name}: bias must have shape ({w.shape[0]},) (one value per "
                                 f"output channel), got {tuple(bias.shape)}")
        check_float(name, x=x, w=w, bias=bias)
        the_op = conv1d if nsp == 1 else conv3d
        out = the_op.kernel(x, w, bias, **_kw("stride", s, nsp), **_kw("pad", p, nsp),
                            **_kw("dil", d, nsp), groups=g)
        return out[0] if unbatched else out
    frontend.__doc__ = (f"{nsp}-D convolution (cross-correlation) of [N, C, {names}] x with "
                        f"[O, C/groups, {knames}] w, like F.{name}.")
    frontend.shape_only = True
    return frontend


def _conv_algorithm(x, w, bias, p, nsp, dims):
    """out[n, o, *i] = bias[o] + sum over c, *k of w[o, c, *k] * x[n, g C/groups + c,
    *(i stride + k dil - pad)] with g = o // (O / groups), zero outside x."""
    axes = _AXES[nsp][::-1]                                   # innermost first
    ov = [hl.Var(o.lower()) for _, _, o, _ in axes]
    o, n = hl.Var("o"), hl.Var("n")
    strides = [p[f"stride{sfx}"] for *_, sfx in axes]
    pads = [p[f"pad{sfx}"] for *_, sfx in axes]
    dils = [p[f"dil{sfx}"] for *_, sfx in axes]
    groups = p["groups"]
    xp = zero_padded(x, "x_pad", [getattr(dims, i) for i, _, _, _ in axes], pads)
    r = hl.RDom([hl.Range(0, getattr(dims, k)) for _, k, _, _ in axes]
                + [hl.Range(0, dims.CG)], "r")
    taps = [r[j] for j in range(nsp)]
    rc = r[nsp]
    chan = rc if groups == 1 else (o / (dims.O / groups)) * dims.CG + rc
    at = [v * s + t * d - pd for v, s, t, d, pd in zip(ov, strides, taps, dils, pads)]
    acc = hl.Func("acc")
    acc[(*ov, o, n)] = bias[o]
    acc[(*ov, o, n)] += w[(*taps, rc, o)] * xp[(*at, chan, n)]
    out = hl.Func("out")
    out[(*ov, o, n)] = acc[(*ov, o, n)]
    return out


@op(category="nn",
    inputs={"x": "N C L", "w": "O CG K", "bias": "O"},
    output="N O OL",
    dtypes=_FLOATS,
    params=axis_params(1, (_STRIDE, _PAD, _DIL), groups=True),
    reference=_conv_reference(1),
    kernel_reference=_conv_kernel_reference(1),
    frontend=_conv_frontend(1, "conv1d"),
    validate=_conv_validate("conv1d", 1),
    derive=_conv_derive(1),
    example={"N": 2, "C": 16, "L": 63, "O": 16, "CG": 16, "K": 3})
def conv1d(x, w, bias, *, stride, pad, dil, groups, dims):
    """1-D convolution: out[n, o, i] = bias[o] + sum over c, k of
    w[o, c, k] * x[n, g * C/groups + c, i * stride + k * dil - pad], g = o // (O/groups)."""
    return _conv_algorithm(x, w, bias, {"stride": stride, "pad": pad, "dil": dil,
                                        "groups": groups}, 1, dims)


@op(category="nn",
    inputs={"x": "N C D H W", "w": "O CG KD KH KW", "bias": "O"},
    output="N O OD OH OW",
    dtypes=_FLOATS,
    params=axis_params(3, (_STRIDE, _PAD, _DIL), groups=True),
    reference=_conv_reference(3),
    kernel_reference=_conv_kernel_reference(3),
    frontend=_conv_frontend(3, "conv3d"),
    validate=_conv_validate("conv3d", 3),
    derive=_conv_derive(3),
    example={"N": 1, "C": 8, "D": 9, "H": 11, "W": 13, "O": 8, "CG": 8, "KD": 3, "KH": 3,
             "KW": 3})
def conv3d(x, w, bias, *, stride_d, stride_h, stride_w, pad_d, pad_h, pad_w, dil_d, dil_h, dil_w,
           groups, dims):
    """3-D convolution: conv1d's sum over the kernel taps (a, b, c) of depth, rows and columns,
    out[n, o, i, j, k] reading x at (i stride_d + a dil_d - pad_d, j ..., k ...)."""
    p = {"stride_d": stride_d, "stride_h": stride_h, "stride_w": stride_w, "pad_d": pad_d,
         "pad_h": pad_h, "pad_w": pad_w, "dil_d": dil_d, "dil_h": dil_h, "dil_w": dil_w,
         "groups": groups}
    return _conv_algorithm(x, w, bias, p, 3, dims)


# -- transposed convolution ------------------------------------------------------------------------
def _convt_reference(nsp):
    def ref(x, w, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
        """Scatter form: every input pixel adds w times itself into the output window it
        reaches (in float64), then the padding is cropped away."""
        x, w = np.asarray(x), np.asarray(w)
        unbatched = x.ndim == nsp + 1
        if unbatched:
            x = x[np.newaxis]
        s = ntuple(stride, nsp, "ref", "stride", 1)
        p = ntuple(padding, nsp, "ref", "padding", 0)
        op_ = ntuple(output_padding, nsp, "ref", "output_padding", 0)
        d = ntuple(dilation, nsp, "ref", "dilation", 1)
        n, c = x.shape[:2]
        sizes = x.shape[2:]
        og, ks = w.shape[1], w.shape[2:]
        g = groups
        cg = c // g
        full = [(m - 1) * si + di * (k - 1) + 1 + oi
                for m, si, di, k, oi in zip(sizes, s, d, ks, op_)]
        acc = np.zeros((n, g, og) + tuple(full))
        xg = x.astype(np.float64).reshape((n, g, cg) + tuple(sizes))
        wg = w.astype(np.float64).reshape((g, cg, og) + tuple(ks))
        for tap in itertools.product(*(range(k) for k in ks)):
            contrib = np.einsum("ngc...,gco->ngo...", xg, wg[(Ellipsis,) + tap])
            sl = tuple(slice(t * di, t * di + si * (m - 1) + 1, si)
                       for t, di, si, m in zip(tap, d, s, sizes))
            acc[(slice(None),) * 3 + sl] += contrib
        outs = [_transposed_out(m, k, si, pi, di, oi)
                for m, k, si, pi, di, oi in zip(sizes, ks, s, p, d, op_)]
        crop = tuple(slice(pi, pi + m) for pi, m in zip(p, outs))
        out = acc[(slice(None),) * 3 + crop].reshape((n, g * og) + tuple(outs))
        if bias is not None:
            out = out + np.asarray(bias, np.float64).reshape((1, g * og) + (1,) * nsp)
        out = out.astype(x.dtype)
        return out[0] if unbatched else out
    return ref


def _convt_kernel_reference(nsp):
    ref = _convt_reference(nsp)

    def kref(x, w, bias, **p):
        p = {**{f"{a}{sfx}": dv for a, dv in (("stride", 1), ("pad", 0), ("dil", 1),
                                              ("out_pad", 0))
                for *_, sfx in _AXES[nsp]}, "groups": 1, **p}
        return ref(x, w, bias, per_axis(p, "stride", nsp), per_axis(p, "pad", nsp),
                   per_axis(p, "out_pad", nsp), p["groups"], per_axis(p, "dil", nsp))
    return kref


def _convt_validate(name, nsp):
    def validate(dims, p):
        g = p["groups"]
        if dims["C"] % g:
            raise ParamError(f"{name}: groups={g} must divide the input channels C={dims['C']}")
        if dims["O"] != dims["OG"] * g:
            raise ShapeError(f"{name}: bias has O={dims['O']} values but w gives "
                             f"{dims['OG']} x groups={g} = {dims['OG'] * g} output channels "
                             f"(w is [C, O/groups, ...])")
        sizes = []
        for i, k, _, sfx in _AXES[nsp]:
            s, d, o = p[f"stride{sfx}"], p[f"dil{sfx}"], p[f"out_pad{sfx}"]
            if o >= max(s, d):
                raise ParamError(f"{name}: output_padding {o} must be smaller than stride {s} "
                                 f"or dilation {d}")
            sizes.append(_transposed_out(dims[i], dims[k], s, p[f"pad{sfx}"], d, o))
        if min(sizes) < 1:
            raise ShapeError(f"{name}: the output would be {' x '.join(map(str, sizes))}; "
                             f"reduce 'padding'")
    return validate


def _convt_derive(nsp):
    def derive(dims, p):
        return {o: _transposed_out(dims[i], dims[k], p[f"stride{sfx}"], p[f"pad{sfx}"],
                                   p[f"dil{sfx}"], p[f"out_pad{sfx}"])
                for i, k, o, sfx in _AXES[nsp]}
    return derive


def _convt_frontend(nsp, name):
    names = ", ".join(i for i, _, _, _ in _AXES[nsp])
    knames = ", ".join(k for _, k, _, _ in _AXES[nsp])

    def frontend(x, w, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
        x, unbatched = batched(x, nsp, name, names)
        w = as_array(w, name, "w")
        if w.ndim != nsp + 2:
            raise ShapeError(f"{name}: w must be {nsp + 2}-D [C, O/groups, {knames}], got shape "
                             f"{tuple(w.shape)}")
        s = ntuple(stride, nsp, name, "stride", 1)
        p = ntuple(padding, nsp, name, "padding", 0)
        o = ntuple(output_padding, nsp, name, "output_padding", 0)
        d = ntuple(dilation, nsp, name, "dilation", 1)
        g = _groups(name, groups)
        if w.shape[0] != x.shape[1]:
            raise ShapeError(f"{name}: w has {w.shape[0]} input channels (axis 0) but x has "
                             f"C={x.shape[1]}; w is [C, O/groups, {knames}]")
        n_out = w.shape[1] * g
        if bias is None:
            bias = np.zeros(n_out, dtype=x.dtype if np.dtype(x.dtype).kind == "f"
                            else np.float32)
        else:
            bias = as_array(bias, name, "bias")
            if tuple(bias.shape) != (n_out,):
                raise ShapeError(f"{name}: bias must have shape ({n_out},) (w.shape[1] x "
                                 f"groups output channels), got {tuple(bias.shape)}")
        check_float(name, x=x, w=w, bias=bias)
        the_op = conv_transpose1d if nsp == 1 else conv_transpose2d
        out = the_op.kernel(x, w, bias, **_kw("stride", s, nsp), **_kw("pad", p, nsp),
                            **_kw("out_pad", o, nsp), **_kw("dil", d, nsp), groups=g)
        return out[0] if unbatched else out
    frontend.__doc__ = (f"{nsp}-D transposed convolution of [N, C, {names}] x with "
                        f"[C, O/groups, {knames}] w, like F.{name}.")
    frontend.shape_only = True
    return frontend


def _phase_taps(nsp: int, dil: int) -> bool:
    """True when a strided axis of a transposed convolution loops over its phase's taps only
    (1-D or 2-D, no dilation along the axis): a phase's taps are then every s-th, a dense
    sub-kernel, and each phase is a plain convolution of the input (the default schedule blocks
    it in registers as conv1d's and conv2d's)."""
    return nsp in (1, 2) and dil == 1


def _convt_algorithm(x, w, bias, p, nsp, dims):
    """out[n, o, *j] = bias[o] + the sum over c, *k of x[n, g C/groups + c, *i] *
    w[g C/groups + c, o % (O/groups), *k] over the taps with j = i stride + k dil - pad."""
    axes = _AXES[nsp][::-1]                                   # innermost first
    ov = [hl.Var(o.lower()) for _, _, o, _ in axes]
    o, n = hl.Var("o"), hl.Var("n")
    groups = p["groups"]
    xp = zero_padded(x, "x_pad", [getattr(dims, i) for i, _, _, _ in axes], [0] * nsp,
                     force=True)
    ranges = []
    for _, k, _, sfx in axes:
        s = p[f"stride{sfx}"]
        phased = s > 1 and _phase_taps(nsp, p[f"dil{sfx}"])
        ranges.append(hl.Range(0, (getattr(dims, k) + s - 1) / s if phased else getattr(dims, k)))
    r = hl.RDom(ranges + [hl.Range(0, dims.C / groups)], "r")
    rc = r[nsp]
    chan = rc if groups == 1 else (o / dims.OG) * (dims.C / groups) + rc
    och = o if groups == 1 else o % dims.OG
    acc_args, out_index, at, taps = [], [], [], []
    pred = keep = None
    for j, (v, (_, k, name, sfx)) in enumerate(zip(ov, axes)):
        s, pad, d = p[f"stride{sfx}"], p[f"pad{sfx}"], p[f"dil{sfx}"]
        t = r[j]
        if s == 1:
            acc_args.append(v)
            out_index.append(v)
            at.append(v + pad - t * d)
            taps.append(t)
            continue
        q, ph = hl.Var(f"q{name[1:].lower()}"), hl.Var(f"p{name[1:].lower()}")
        acc_args += [q, ph]
        out_index += [v / s, v % s]
        if _phase_taps(nsp, d):
            # The RDom runs over the taps of phase ph only: k = (ph + pad) % s + s j reaches
            # input q + (ph + pad) / s - j (no tap skipped inside the loop; past the kernel's
            # end when K is not a multiple of s, which the predicate drops).
            tap = (ph + pad) % s + s * t
            taps.append(hl.min(tap, getattr(dims, k) - 1))    # bounds: the test's reach
            at.append(q + (ph + pad) / s - t)
            # A test on the value, not an RDom predicate: under the predicate Halide dropped
            # the min above and read w past its end in programs (constant K) where a stride
            # larger than K leaves phases without taps.
            in_kernel = tap < getattr(dims, k)
            keep = in_kernel if keep is None else keep & in_kernel
            continue
        else:
            reach = ph + pad - t * d           # the input this tap reaches is q + reach / s
            at.append(q + reach / s)
            taps.append(t)
            cond = (reach % s) == 0
        pred = cond if pred is None else pred & cond
    if pred is not None:
        r.where(pred)
    acc = hl.Func("acc")
    acc[(*acc_args, o, n)] = bias[o]
    term = w[(*taps, och, chan)] * xp[(*at, chan, n)]
    if keep is not None:
        term = hl.select(keep, term, hl.cast(term.type(), 0))
    acc[(*acc_args, o, n)] += term
    out = hl.Func("out")
    out[(*ov, o, n)] = acc[(*out_index, o, n)]
    return out


@op(category="nn",
    inputs={"x": "N C L", "w": "C OG K", "bias": "O"},
    output="N O OL",
    dtypes=_FLOATS,
    params=axis_params(1, (_STRIDE, _PAD, _OUT_PAD, _DIL), groups=True),
    reference=_convt_reference(1),
    kernel_reference=_convt_kernel_reference(1),
    frontend=_convt_frontend(1, "conv_transpose1d"),
    validate=_convt_validate("conv_transpose1d", 1),
    derive=_convt_derive(1),
    example={"N": 2, "C": 16, "L": 31, "OG": 16, "O": 16, "K": 4})
def conv_transpose1d(x, w, bias, *, stride, pad, out_pad, dil, groups, dims):
    """1-D transposed convolution: out[n, o, j] = bias[o] + sum of
    x[n, g C/groups + c, i] * w[g C/groups + c, o % (O/groups), k] over c and the (i, k) with
    j = i * stride + k * dil - pad, g = o // (O/groups)."""
    return _convt_algorithm(x, w, bias, {"stride": stride, "pad": pad, "dil": dil,
                                         "groups": groups}, 1, dims)


@op(category="nn",
    inputs={"x": "N C H W", "w": "C OG KH KW", "bias": "O"},
    output="N O OH OW",
    dtypes=_FLOATS,
    params=axis_params(2, (_STRIDE, _PAD, _OUT_PAD, _DIL), groups=True),
    reference=_convt_reference(2),
    kernel_reference=_convt_kernel_reference(2),
    frontend=_convt_frontend(2, "conv_transpose2d"),
    validate=_convt_validate("conv_transpose2d", 2),
    derive=_convt_derive(2),
    example={"N": 1, "C": 16, "H": 15, "W": 17, "OG": 16, "O": 16, "KH": 4, "KW": 4})
def conv_transpose2d(x, w, bias, *, stride_h, stride_w, pad_h, pad_w, out_pad_h, out_pad_w,
                     dil_h, dil_w, groups, dims):
    """2-D transposed convolution: conv_transpose1d along rows and columns, out[n, o, j, l]
    summing x[n, c', i, m] * w[c', o % (O/groups), a, b] over the taps with
    j = i * stride_h + a * dil_h - pad_h and l = m * stride_w + b * dil_w - pad_w."""
    p = {"stride_h": stride_h, "stride_w": stride_w, "pad_h": pad_h, "pad_w": pad_w,
         "dil_h": dil_h, "dil_w": dil_w, "groups": groups}
    return _convt_algorithm(x, w, bias, p, 2, dims)
