"""Normalization, pooling and resampling of images in ``torch.nn.functional``'s conventions:
group_norm, instance_norm, adaptive_avg_pool2d and global_avg_pool2d (resampling lives in
``resample``).

- ``group_norm(x, num_groups, weight=None, bias=None, eps=1e-5)``: x [N, C, *] normalized over
  each group of C / num_groups channels and all spatial positions (biased variance, two passes in
  float64), then ``* weight[c] + bias[c]``. Kernel x [N, G, CG, S].
- ``instance_norm(x, running_mean=None, running_var=None, weight=None, bias=None,
  use_input_stats=True, momentum=0.1, eps=1e-5)``: each (n, c) plane normalized on its own
  statistics (the running ones are not updated). Kernel [N, C, S]. With
  ``use_input_stats=False``, channel c is normalized with ``running_mean[c]`` and
  ``running_var[c]`` instead: ``batch_norm``'s inference form, run as it.
- ``adaptive_avg_pool2d(x, output_size)``: bin i of n_out covers input rows
  ``[floor(i * n / n_out), ceil((i + 1) * n / n_out))``, like torch; ``global_avg_pool2d(x)`` is
  the mean of each plane, shape [N, C, 1, 1].
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import halide as hl
import numpy as np

from ..errors import ParamError, ShapeError
from ..runtime import as_array
from ._consts import lit64
from ._op import Param, op
from . import norm as _norm
from .layout import _int
from .nn import _pair
from .reduce import _float_sum

_FLOATS = ["float32", "float64"]
_EPS = Param("eps", float, 1e-5, low=0.0, doc="added to the variance")


# -- group_norm and instance_norm ----------------------------------------------------------------

def _normalize(x, weight, bias, eps, extent, value, out_vars, stat_vars, wb_index):
    """Shared two-pass normalization: ``value(r)`` reads x over the RDom ``r`` of ``extent``."""
    f64 = hl.Float(64)
    r = hl.RDom(extent, "r")
    count = hl.cast(f64, 1)
    for rng in extent:
        count = count * hl.cast(f64, rng.extent)
    mean, dev = hl.Func("mean"), hl.Func("dev")
    mean[stat_vars] = lit64(0)
    mean[stat_vars] += hl.cast(f64, value(r))
    mu = mean[stat_vars] / count
    mean_of = hl.Func("mu")
    mean_of[stat_vars] = mu
    dev[stat_vars] = lit64(0)
    d = hl.cast(f64, value(r)) - mean_of[stat_vars]
    dev[stat_vars] += d * d
    inv = hl.Func("inv_std")
    inv[stat_vars] = 1 / hl.sqrt(dev[stat_vars] / count + lit64(eps))
    out = hl.Func("out")
    xv = hl.cast(f64, x[out_vars])
    w, b = weight[wb_index], bias[wb_index]
    out[out_vars] = hl.cast(x.type(), (xv - mean_of[stat_vars]) * inv[stat_vars]
                            * hl.cast(f64, w) + hl.cast(f64, b))
    return out


def _affine(name, c, dt, weight, bias):
    w = np.ones(c, dt) if weight is None else as_array(weight, name, "weight")
    b = np.zeros(c, dt) if bias is None else as_array(bias, name, "bias")
    for arg, a in (("weight", w), ("bias", b)):
        if tuple(a.shape) != (c,):
            raise ShapeError(f"{name}: '{arg}' must have shape ({c},), got {a.shape}")
    return w, b


def _gn_ref(x, num_groups, weight=None, bias=None, eps=1e-5):
    x = np.asarray(x)
    n, c = x.shape[:2]
    g = x.astype(np.float64).reshape(n, num_groups, -1)
    y = (g - g.mean(-1, keepdims=True)) / np.sqrt(g.var(-1, keepdims=True) + eps)
    y = y.reshape(x.shape)
    shape = (1, c) + (1,) * (x.ndim - 2)
    if weight is not None:
        y = y * np.asarray(weight, np.float64).reshape(shape)
    if bias is not None:
        y = y + np.asarray(bias, np.float64).reshape(shape)
    return y.astype(x.dtype)


def _gn_frontend(x, num_groups, weight=None, bias=None, eps=1e-5):
    """``F.group_norm``: statistics per (sample, group of channels)."""
    name = "group_norm"
    x = as_array(x, name, "x")
    if x.ndim < 2:
        raise ShapeError(f"group_norm: x must be [N, C, *], got shape {x.shape}")
    n, c = x.shape[:2]
    g = _int(name, "num_groups", num_groups, low=1)
    if c % g:
        raise ParamError(f"group_norm: num_groups={g} must divide the channels C={c}")
    w, b = _affine(name, c, x.dtype, weight, bias)
    out = group_norm.kernel(x.reshape(n, g, c // g, math.prod(x.shape[2:])), w.reshape(g, c // g),
                            b.reshape(g, c // g), eps=eps)
    return out.reshape(x.shape)


@op(category="nn", inputs={"x": "N G CG S", "weight": "G CG", "bias": "G CG"},
    output="N G CG S", dtypes=_FLOATS, params=[_EPS], reference=_gn_ref,
    kernel_reference=lambda x, weight, bias, eps=1e-5: _gn_ref(
        x.reshape(x.shape[0], -1, x.shape[3]), x.shape[1], weight.reshape(-1),
        bias.reshape(-1), eps).reshape(x.shape),
    frontend=_gn_frontend, example={"N": 2, "G": 4, "CG": 8, "S": 64})
def group_norm(x, weight, bias, *, eps, dims):
    """(x - mean) / sqrt(var + eps) * weight + bias, statistics over (CG, S) per (N, G)."""
    s, cg, g, n = hl.Var("s"), hl.Var("cg"), hl.Var("g"), hl.Var("n")
    ext = [hl.Range(0, dims.S), hl.Range(0, dims.CG)]
    return _normalize(x, weight, bias, eps, ext, lambda r: x[r.x, r.y, g, n], [s, cg, g, n],
                      [g, n], [cg, g])


def _in_ref(x, weight=None, bias=None, eps=1e-5):
    x = np.asarray(x)
    return _gn_ref(x, x.shape[1], weight, bias, eps)


def _in_frontend(x, running_mean=None, running_var=None, weight=None, bias=None,
                 use_input_stats=True, momentum=0.1, eps=1e-5):
    """``F.instance_norm``: with ``use_input_stats=True`` (the default) each (sample, channel)
    plane is normalized on its own statistics (``running_mean``/``running_var`` are neither
    read nor updated); with ``use_input_stats=False`` every plane of channel c is normalized
    with ``running_mean[c]`` and ``running_var[c]`` (both required, [C]), which is
    ``batch_norm``'s inference form and runs as it.

    Example:
        >>> import numpy as np, pypto
        >>> x = np.arange(8.0).reshape(1, 2, 4)
        >>> pypto.ops.instance_norm(x, np.array([0.0, 4.0]), np.array([1.0, 4.0]),
        ...                         use_input_stats=False, eps=0.0)[0, 1].tolist()
        [0.0, 0.5, 1.0, 1.5]
    """
    name = "instance_norm"
    x = as_array(x, name, "x")
    if x.ndim < 3:
        raise ShapeError(f"instance_norm: x must be [N, C, *spatial], got shape {x.shape}")
    n, c = x.shape[:2]
    if not use_input_stats:
        if running_mean is None or running_var is None:
            raise ParamError("instance_norm: use_input_stats=False normalizes with running_mean "
                             "and running_var: give both (or use_input_stats=True)")
        stats = [as_array(a, name, arg) for a, arg in ((running_mean, "running_mean"),
                                                       (running_var, "running_var"))]
        for a, arg in zip(stats, ("running_mean", "running_var")):
            if tuple(a.shape) != (c,):
                raise ShapeError(f"{name}: '{arg}' must have shape ({c},) (one per channel), "
                                 f"got {tuple(a.shape)}")
        return _norm.batch_norm(x, stats[0], stats[1], weight, bias, eps=eps)
    w, b = _affine(name, c, x.dtype, weight, bias)
    return instance_norm.kernel(x.reshape(n, c, math.prod(x.shape[2:])), w, b,
                                eps=eps).reshape(x.shape)


@op(category="nn", inputs={"x": "N C S", "weight": "C", "bias": "C"}, output="N C S",
    dtypes=_FLOATS, params=[_EPS],
    reference=lambda x, running_mean=None, running_var=None, weight=None, bias=None,
    use_input_stats=True, momentum=0.1, eps=1e-5: _in_ref(x, weight, bias, eps)
    if use_input_stats else _norm._batch_norm_ref(x, running_mean, running_var, weight, bias, eps),
    kernel_reference=lambda x, weight, bias, eps=1e-5: _in_ref(x, weight, bias, eps),
    frontend=_in_frontend, example={"N": 2, "C": 8, "S": 100})
def instance_norm(x, weight, bias, *, eps, dims):
    """(x - mean) / sqrt(var + eps) * weight + bias, statistics over S per (N, C)."""
    s, c, n = hl.Var("s"), hl.Var("c"), hl.Var("n")
    return _normalize(x, weight, bias, eps, [hl.Range(0, dims.S)], lambda r: x[r.x, c, n],
                      [s, c, n], [c, n], [c])


# -- adaptive and global average pooling ---------------------------------------------------------

def _bins(n_in, n_out):
    i = np.arange(n_out)
    return (i * n_in) // n_out, -((-(i + 1) * n_in) // n_out)


def _out_size(output_size, shape, name="adaptive_avg_pool2d"):
    """(oh, ow) from an int or a pair; a None in the pair keeps that input size, as in torch."""
    if isinstance(output_size, (tuple, list)) and len(output_size) == 2 and None in output_size:
        output_size = tuple(n if v is None else v for v, n in zip(output_size, shape[-2:]))
    return _pair(output_size, name, "output_size", 1)


def _aap_ref(x, output_size):
    x = np.asarray(x)
    oh, ow = _out_size(output_size, x.shape)
    hs, he = _bins(x.shape[-2], oh)
    ws, we = _bins(x.shape[-1], ow)
    out = np.empty(x.shape[:-2] + (oh, ow))
    xd = x.astype(np.float64)
    for i in range(oh):
        for j in range(ow):
            out[..., i, j] = xd[..., hs[i]:he[i], ws[j]:we[j]].mean(axis=(-2, -1))
    return out.astype(x.dtype)


def _aap_frontend(x, output_size):
    """``F.adaptive_avg_pool2d`` of [N, C, H, W] (or [C, H, W]) to ``output_size``: an int, or
    a pair (oh, ow) in which None keeps the input's size along that axis."""
    name = "adaptive_avg_pool2d"
    x = as_array(x, name, "x")
    if x.ndim not in (3, 4):
        raise ShapeError(f"{name}: x must be [N, C, H, W] or [C, H, W], got shape {x.shape}")
    oh, ow = _out_size(output_size, x.shape, name)
    x4 = x.reshape((math.prod(x.shape[:-3]),) + x.shape[-3:])
    out = adaptive_avg_pool2d.kernel(x4, out_h=oh, out_w=ow)
    return out.reshape(x.shape[:-2] + (oh, ow))


@op(category="nn", inputs={"x": "N C H W"}, output="N C OH OW", dtypes=_FLOATS,
    params=[Param("out_h", int, 1, low=1, high=1 << 20, doc="output rows"),
            Param("out_w", int, 1, low=1, high=1 << 20, doc="output columns")],
    reference=_aap_ref, kernel_reference=lambda x, out_h=1, out_w=1: _aap_ref(x, (out_h, out_w)),
    frontend=_aap_frontend, derive=lambda d, p: {"OH": p["out_h"], "OW": p["out_w"]},
    example={"N": 2, "C": 8, "H": 17, "W": 19})
def adaptive_avg_pool2d(x, *, out_h, out_w, dims):
    """Mean of each adaptive bin, summed in float64."""
    ow, oh, c, n = hl.Var("ow"), hl.Var("oh"), hl.Var("c"), hl.Var("n")
    h0, h1 = (oh * dims.H) / out_h, ((oh + 1) * dims.H + out_h - 1) / out_h
    w0, w1 = (ow * dims.W) / out_w, ((ow + 1) * dims.W + out_w - 1) / out_w
    # The largest bin spans ceil(n / n_out) + 1 inputs: the RDom covers it, a select skips the
    # rest (a where-predicate instead lost its bounds inside fused programs).
    r = hl.RDom([hl.Range(0, dims.W / out_w + 2), hl.Range(0, dims.H / out_h + 2)], "r")
    inside = (r.x < w1 - w0) & (r.y < h1 - h0)
    f64 = hl.Float(64)
    acc = hl.Func("acc")
    acc[ow, oh, c, n] = lit64(0)
    acc[ow, oh, c, n] += hl.select(inside, hl.cast(f64, x[hl.clamp(w0 + r.x, 0, dims.W - 1),
                                                          hl.clamp(h0 + r.y, 0, dims.H - 1), c, n]),
                                   lit64(0))
    out = hl.Func("out")
    out[ow, oh, c, n] = hl.cast(x.type(), acc[ow, oh, c, n] / hl.cast(f64, (h1 - h0) * (w1 - w0)))
    return out


def _gap_frontend(x):
    """Mean of each [H, W] plane of [N, C, H, W], kept as [N, C, 1, 1] (like
    ``F.adaptive_avg_pool2d(x, 1)``)."""
    x = as_array(x, "global_avg_pool2d", "x")
    if x.ndim < 2:
        raise ShapeError(f"global_avg_pool2d: x must be [..., H, W], got shape {x.shape}")
    out = global_avg_pool2d.kernel(x.reshape(math.prod(x.shape[:-2]), x.shape[-2] * x.shape[-1]))
    return out.reshape(x.shape[:-2] + (1, 1))


@op(category="nn", inputs={"x": "P S"}, output="P", dtypes=_FLOATS,
    reference=lambda x: np.mean(np.asarray(x, np.float64), axis=(-2, -1), keepdims=True).astype(
        np.asarray(x).dtype),
    kernel_reference=lambda x: x.astype(np.float64).mean(axis=1).astype(x.dtype),
    frontend=_gap_frontend, example={"P": 64, "S": 196})
def global_avg_pool2d(x, *, dims):
    """Mean of each row of [P, S] (the planes flattened), summed as ``mean`` sums a row (float32
    in groups of eight, accumulated in float64; float64 as it is), so the row reductions'
    schedule applies (templates/reduce.py)."""
    acc, rest = _float_sum("acc", lambda k, oo: x[k, oo], SimpleNamespace(R=dims.S), x.type())
    p = hl.Var("p")
    out = hl.Func("out")
    out[p] = hl.cast(x.type(), (acc[p] + rest(p)) / hl.cast(hl.Float(64), dims.S))
    return out
