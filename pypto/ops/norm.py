"""Normalizations: softmax, log_softmax, layer_norm, rms_norm and batch_norm (inference).

``softmax``, ``log_softmax``, ``layer_norm`` and ``rms_norm`` normalize along one axis; their kernel
works on a 2-D array [R, C], each row normalized over its C elements. The public call moves
``axis`` last (``layer_norm`` and ``rms_norm`` normalize trailing axes) and flattens the other
axes into R. ``batch_norm`` normalizes each channel (axis 1) with given statistics; its kernel works
on [N, C, S], S being the flattened spatial axes (1 for a 2-D input).

Conventions:

- ``softmax`` subtracts the row maximum before exponentiating, so it never overflows; a row holding
  a NaN, or whose maximum is +inf or -inf, is NaN throughout (as the NumPy formula gives).
- ``layer_norm`` uses the biased variance (divide by C), like ``torch.nn.functional.layer_norm``,
  and takes its form ``(x, normalized_shape, weight, bias, eps)``: the trailing axes named are
  flattened into C. ``weight`` (``gamma``) and ``bias`` (``beta``) have the normalized shape and
  may be None (ones and zeros); ``rms_norm`` likewise (see ``_affine_form``).
- ``rms_norm``: ``x / sqrt(mean(x**2) + eps) * gamma``.
- ``batch_norm``: ``(x - mean) / sqrt(var + eps) * gamma + beta`` with per-channel [C] vectors.
- The exponentials (softmax, log_softmax) are ``kernel_exp``'s: within 1 ulp, and 0 where e**x is
  below about 2**-125.5 (float32) or 2**-1021.5 (float64), which only an output under about 1e-38
  (1e-307) can notice.
- Row statistics are accumulated in float64, so long rows stay accurate in float32. ``layer_norm``
  of float32 rows takes its mean and variance from one pass (sums of ``x - x[0]`` and of its
  square, see ``_shifted_moments``); float64 rows use two passes (mean, then squared deviations).
"""

from __future__ import annotations

import math
import operator

import halide as hl
import numpy as np

from ..errors import ParamError, ShapeError
from ..runtime import as_array
from ._consts import lit64
from ._op import Param, op
from .elementwise import kernel_exp

_FLOATS = ["float32", "float64"]
_EXAMPLE = {"R": 64, "C": 100}


# -- helpers inside algorithms -------------------------------------------------------------------

def _log(v):
    """``log(v)`` for v >= 0 that keeps NaN and +inf."""
    return hl.select(hl.is_nan(v) | hl.is_inf(v), v, hl.log(v))


def _acc(t: hl.Type) -> hl.Type:
    """Row statistics are accumulated in float64."""
    return hl.Float(64)


def _row_max(x, dims):
    r, k = hl.Var("r"), hl.RDom([hl.Range(0, dims.C)], "k")
    m = hl.Func("rowmax")
    m[r] = hl.cast(x.type(), -np.inf)
    m[r] = hl.max(m[r], x[k, r])
    return m


def _row_sum(name: str, value_of, dims, t: hl.Type):
    """``name[r] = sum_k value_of(k, r)`` accumulated in ``t``."""
    r, k = hl.Var("r"), hl.RDom([hl.Range(0, dims.C)], "k")
    s = hl.Func(name)
    s[r] = hl.cast(t, 0)
    s[r] += hl.cast(t, value_of(k, r))
    return s


def _check_axis(name: str, axis, ndim: int) -> int:
    if isinstance(axis, (bool, np.bool_)) or not hasattr(axis, "__index__"):
        raise ParamError(f"{name}: parameter 'axis' must be an int, got {axis!r}")
    try:
        axis = operator.index(axis)
    except TypeError:           # an array of several numbers has __index__ but no single value
        raise ParamError(f"{name}: parameter 'axis' must be an int, got {axis!r}") from None
    if not -ndim <= axis < ndim:
        raise ParamError(f"{name}: parameter 'axis' must be in [{-ndim}, {ndim - 1}] for an input "
                         f"of rank {ndim}, got {axis}")
    return axis % ndim


def _along_axis(the_op, x, axis, **params):
    """Runs an [R, C] kernel over ``axis`` of ``x`` and restores the shape."""
    name = the_op.name
    x = as_array(x, name, "x")
    if x.ndim == 0:
        raise ShapeError(f"{name}: argument 'x' must have at least 1 dimension, got a 0-D array")
    axis = _check_axis(name, axis, x.ndim)
    moved = np.moveaxis(x, axis, -1)
    res = the_op.kernel(moved.reshape(math.prod(moved.shape[:-1]), x.shape[axis]), **params)
    return np.moveaxis(res.reshape(moved.shape), -1, axis)


def _vector(name: str, arg: str, value, n: int, dtype, fill: float, k: int = 1) -> np.ndarray:
    """A per-feature vector argument, or ``fill`` repeated ``n`` times when it is None; one over
    ``k`` > 1 normalized axes is flattened to its ``n`` features."""
    if value is None:
        return np.full(n, fill, dtype=dtype)
    v = as_array(value, name, arg)
    return v.reshape(n) if k > 1 else v


def _is_shape(v) -> bool:
    """torch's ``normalized_shape``: an int or a tuple/list of ints (torch.Size is a tuple)."""
    def is_int(i):
        return isinstance(i, (int, np.integer)) and not isinstance(i, bool)
    return is_int(v) or isinstance(v, (tuple, list)) and all(is_int(i) for i in v)


def _affine_form(name: str, x_shape, shape, weight, bias, eps, gamma, beta, has_bias=True):
    """The arguments of layer_norm / rms_norm, in torch's form ``(x, normalized_shape, weight,
    bias, eps)`` or PyPTO's earlier ``(x, gamma, beta, eps)`` (told apart by the second argument:
    a shape is an int or a tuple of ints, anything else is ``gamma``); ``gamma=``/``beta=`` are
    keyword aliases of ``weight``/``bias``. Returns ``(k, gamma, beta, eps)``: the trailing axes
    normalized together and the scale and shift (None: none)."""
    if shape is not None and not _is_shape(shape):
        # PyPTO's positional form: (x, gamma, beta, eps), one slot to the left of torch's.
        if has_bias:
            shape, weight, bias, eps = None, shape, weight, eps if bias is None else bias
        else:
            shape, weight, eps = None, shape, eps if weight is None else weight
        if hasattr(eps, "shape") or isinstance(eps, (list, tuple)):
            raise ParamError(f"{name}: the arguments after x are (normalized_shape, weight"
                             f"{', bias' if has_bias else ''}, eps) as in torch, or (gamma"
                             f"{', beta' if has_bias else ''}, eps); got an array where eps goes")
    for alias, value, torch_name in (("gamma", gamma, "weight"), ("beta", beta, "bias")):
        if value is None:
            continue
        given = weight if torch_name == "weight" else bias
        if given is not None:
            raise ParamError(f"{name}: give the {'scale' if alias == 'gamma' else 'shift'} once, "
                             f"as '{alias}' or as torch's '{torch_name}', not both")
        if torch_name == "weight":
            weight = value
        else:
            bias = value
    ndim = len(x_shape)
    if shape is None:
        k = 1
    else:
        dims = (shape,) if not isinstance(shape, (tuple, list)) else tuple(shape)
        dims = tuple(int(d) for d in dims)
        k = len(dims)
        if k == 0:
            raise ShapeError(f"{name}: normalized_shape is empty; name at least the last axis of "
                             f"x (shape {list(x_shape)}), e.g. ({x_shape[-1]},)")
        if k > ndim or tuple(x_shape[ndim - k:]) != dims:
            raise ShapeError(f"{name}: normalized_shape {list(dims)} must be the trailing "
                             f"{'axis' if k == 1 else f'{k} axes'} of x, whose shape is "
                             f"{list(x_shape)}")
    for arg, v in (("weight", weight), ("bias", bias)):
        if v is not None and hasattr(v, "shape") and tuple(v.shape) != tuple(x_shape[ndim - k:]):
            raise ShapeError(f"{name}: '{arg}' must have the normalized shape "
                             f"{list(x_shape[ndim - k:])}, got {list(v.shape)}")
    return k, weight, bias, eps


# -- references (NumPy, public signatures) -------------------------------------------------------

def _softmax_ref(x, axis=-1):
    x = np.asarray(x)
    with np.errstate(invalid="ignore", over="ignore"):
        e = np.exp(x - np.max(x, axis=axis, keepdims=True))
        return e / np.sum(e, axis=axis, keepdims=True)


def _log_softmax_ref(x, axis=-1):
    x = np.asarray(x)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        shifted = x - np.max(x, axis=axis, keepdims=True)
        return shifted - np.log(np.sum(np.exp(shifted), axis=axis, keepdims=True))


def _layer_norm_ref(x, normalized_shape=None, weight=None, bias=None, eps=1e-5, *, gamma=None,
                    beta=None):
    x = np.asarray(x)
    k, gamma, beta, eps = _affine_form("layer_norm", x.shape, normalized_shape, weight, bias,
                                       eps, gamma, beta)
    axes = tuple(range(x.ndim - k, x.ndim))
    mu = np.mean(x, axis=axes, keepdims=True)
    var = np.mean((x - mu) ** 2, axis=axes, keepdims=True)
    out = (x - mu) / np.sqrt(var + eps)
    if gamma is not None:
        out = out * np.asarray(gamma)
    if beta is not None:
        out = out + np.asarray(beta)
    return out.astype(x.dtype)


def _rms_norm_ref(x, normalized_shape=None, weight=None, eps=1e-6, *, gamma=None):
    x = np.asarray(x)
    k, gamma, _, eps = _affine_form("rms_norm", x.shape, normalized_shape, weight, None, eps,
                                    gamma, None, has_bias=False)
    eps = np.finfo(x.dtype).eps if eps is None else eps
    axes = tuple(range(x.ndim - k, x.ndim))
    out = x / np.sqrt(np.mean(x * x, axis=axes, keepdims=True) + eps)
    if gamma is not None:
        out = out * np.asarray(gamma)
    return out.astype(x.dtype)


def _batch_norm_ref(x, mean, var, gamma=None, beta=None, eps=1e-5):
    x = np.asarray(x)
    shape = (1, -1) + (1,) * (x.ndim - 2)
    out = (x - np.reshape(mean, shape)) / np.sqrt(np.reshape(var, shape) + eps)
    if gamma is not None:
        out = out * np.reshape(gamma, shape)
    if beta is not None:
        out = out + np.reshape(beta, shape)
    return out.astype(x.dtype)


# -- public frontends ----------------------------------------------------------------------------

def _softmax_frontend(x, axis=-1):
    """``exp(x) / sum(exp(x))`` along ``axis``, computed with the maximum subtracted first."""
    return _along_axis(softmax, x, axis)


def _log_softmax_frontend(x, axis=-1):
    """``x - log(sum(exp(x)))`` along ``axis``, computed with the maximum subtracted first."""
    return _along_axis(log_softmax, x, axis)


def _layer_norm_frontend(x, normalized_shape=None, weight=None, bias=None, eps=1e-5, *,
                         gamma=None, beta=None):
    """``torch.nn.functional.layer_norm``: normalizes the trailing ``normalized_shape`` axes
    (default: the last axis) to zero mean and unit variance, then scales by ``weight`` and shifts
    by ``bias``, both of the normalized shape (None: no scale / no shift). ``gamma=``/``beta=``
    name ``weight``/``bias`` too, and the earlier positional form ``layer_norm(x, gamma, beta,
    eps)`` still works: a second argument that is not an int or a tuple of ints is ``gamma``."""
    x = as_array(x, "layer_norm", "x")
    if x.ndim == 0:
        raise ShapeError("layer_norm: argument 'x' must have at least 1 dimension, got a 0-D array")
    k, gamma, beta, eps = _affine_form("layer_norm", x.shape, normalized_shape, weight, bias, eps,
                                       gamma, beta)
    c = math.prod(x.shape[x.ndim - k:])
    g = _vector("layer_norm", "weight", gamma, c, x.dtype, 1.0, k)
    b = _vector("layer_norm", "bias", beta, c, x.dtype, 0.0, k)
    res = layer_norm.kernel(x.reshape(math.prod(x.shape[:x.ndim - k]), c), g, b, eps=eps)
    return res.reshape(x.shape)


def _rms_norm_frontend(x, normalized_shape=None, weight=None, eps=1e-6, *, gamma=None):
    """``torch.nn.functional.rms_norm``: divides the trailing ``normalized_shape`` axes (default:
    the last axis) by their root mean square (``sqrt(mean(x**2) + eps)``), then scales by
    ``weight`` of the normalized shape (None: no scale). ``eps`` defaults to 1e-6 (torch's
    ``eps=None`` is the dtype's machine epsilon; give that explicitly to match it). ``gamma=``
    names ``weight`` too, and the earlier form ``rms_norm(x, gamma, eps)`` still works."""
    x = as_array(x, "rms_norm", "x")
    if x.ndim == 0:
        raise ShapeError("rms_norm: argument 'x' must have at least 1 dimension, got a 0-D array")
    k, gamma, _, eps = _affine_form("rms_norm", x.shape, normalized_shape, weight, None, eps,
                                    gamma, None, has_bias=False)
    if eps is None:
        eps = float(np.finfo(np.dtype(x.dtype)).eps)        # torch's eps=None
    c = math.prod(x.shape[x.ndim - k:])
    g = _vector("rms_norm", "weight", gamma, c, x.dtype, 1.0, k)
    res = rms_norm.kernel(x.reshape(math.prod(x.shape[:x.ndim - k]), c), g, eps=eps)
    return res.reshape(x.shape)


def _batch_norm_frontend(x, mean, var, gamma=None, beta=None, eps=1e-5):
    """Inference batch norm of x [N, C, ...] with per-channel ``mean``, ``var``, ``gamma`` and
    ``beta`` [C] (``gamma``/``beta`` None: no scale / no shift)."""
    x = as_array(x, "batch_norm", "x")
    if x.ndim < 2:
        raise ShapeError(f"batch_norm: argument 'x' must be [N, C] or [N, C, ...] (at least 2-D), "
                         f"got shape {x.shape}")
    g = _vector("batch_norm", "gamma", gamma, x.shape[1], x.dtype, 1.0)
    b = _vector("batch_norm", "beta", beta, x.shape[1], x.dtype, 0.0)
    n, c = x.shape[:2]
    res = batch_norm.kernel(x.reshape(n, c, math.prod(x.shape[2:])), mean, var, g, b, eps=eps)
    return res.reshape(x.shape)


# -- the kernels ---------------------------------------------------------------------------------

_EPS5 = Param("eps", float, default=1e-5, low=0.0, doc="added to the variance before the sqrt")
_EPS6 = Param("eps", float, default=1e-6, low=0.0, doc="added to the mean square before the sqrt")


@op(category="nn", inputs={"x": "R C"}, output="R C", dtypes=_FLOATS, reference=_softmax_ref,
    frontend=_softmax_frontend, example=_EXAMPLE)
def softmax(x, *, dims):
    """Softmax of each row of [R, C]: ``exp(x - max) / sum(exp(x - max))``."""
    c, r = hl.Var("c"), hl.Var("r")
    m = _row_max(x, dims)
    e = hl.Func("e")
    e[c, r] = kernel_exp(x[c, r] - m[r])
    s = _row_sum("rowsum", lambda k, rr: e[k, rr], dims, _acc(x.type()))
    inv = hl.Func("inv")
    inv[r] = hl.cast(x.type(), 1 / s[r])
    out = hl.Func("out")
    out[c, r] = e[c, r] * inv[r]
    return out


@op(category="nn", inputs={"x": "R C"}, output="R C", dtypes=_FLOATS, reference=_log_softmax_ref,
    frontend=_log_softmax_frontend, example=_EXAMPLE)
def log_softmax(x, *, dims):
    """Log-softmax of each row of [R, C]: ``x - max - log(sum(exp(x - max)))``."""
    c, r = hl.Var("c"), hl.Var("r")
    m = _row_max(x, dims)
    s = _row_sum("rowsum", lambda k, rr: kernel_exp(x[k, rr] - m[rr]), dims, _acc(x.type()))
    shift = hl.Func("shift")
    shift[r] = m[r] + hl.cast(x.type(), _log(s[r]))
    out = hl.Func("out")
    out[c, r] = x[c, r] - shift[r]
    return out


@op(category="nn", inputs={"x": "R C", "gamma": "C", "beta": "C"}, output="R C", dtypes=_FLOATS,
    params=[_EPS5], reference=_layer_norm_ref, frontend=_layer_norm_frontend,
    example=_EXAMPLE)
def layer_norm(x, gamma, beta, eps, *, dims):
    """Layer norm of each row of [R, C]: ``(x - mean) / sqrt(var + eps) * gamma + beta``."""
    c, r = hl.Var("c"), hl.Var("r")
    t, at = x.type(), _acc(x.type())
    n = hl.cast(at, dims.C)
    if t.bits() < at.bits():
        mu, inv = _shifted_moments(x, dims, at, eps)
    else:
        total = _row_sum("rowsum", lambda k, rr: x[k, rr], dims, at)
        mu = hl.Func("mu")
        mu[r] = hl.cast(t, total[r] / n)
        sq = _row_sum("sqdev", lambda k, rr: _sq(hl.cast(at, x[k, rr] - mu[rr])), dims, at)
        inv = hl.Func("inv")
        inv[r] = hl.cast(t, 1 / hl.sqrt(sq[r] / n + lit64(eps)))
    out = hl.Func("out")
    out[c, r] = (x[c, r] - mu[r]) * inv[r] * gamma[c] + beta[c]
    return out


def _shifted_moments(x, dims, at: hl.Type, eps: float):
    """Row mean and ``1 / sqrt(var + eps)`` from one pass over the row (for inputs narrower than
    the accumulator): ``d = x - x[0]`` is summed and squared-summed in ``at``, and
    ``var = mean(d**2) - mean(d)**2``. The shift by the row's first element bounds the cancellation:
    ``(x[0] - mean)**2 <= C * var``, so the relative error of ``var`` stays within about
    ``C * eps(at)`` (float64 for float32 rows: 2e-10 at a million columns), while a second pass over
    the row (the two-pass form float64 rows keep) costs a quarter of the op's time."""
    r, k = hl.Var("r"), hl.RDom([hl.Range(0, dims.C)], "k")
    t, n = x.type(), hl.cast(at, dims.C)
    shift = hl.cast(at, x[0, r])
    mom = hl.Func("moments")
    mom[r] = (hl.cast(at, 0), hl.cast(at, 0))
    d = hl.cast(at, x[k, r]) - shift
    mom[r] = (mom[r][0] + d, mom[r][1] + d * d)
    mean_d = mom[r][0] / n
    var = mom[r][1] / n - mean_d * mean_d
    # Rounding can leave var just below 0; a NaN (an inf in the row) must stay NaN.
    var = hl.select(hl.is_nan(var), var, hl.max(var, hl.cast(at, 0)))
    mu, inv = hl.Func("mu"), hl.Func("inv")
    mu[r] = hl.cast(t, shift + mean_d)
    inv[r] = hl.cast(t, 1 / hl.sqrt(var + lit64(eps)))
    return mu, inv


@op(category="nn", inputs={"x": "R C", "gamma": "C"}, output="R C", dtypes=_FLOATS,
    params=[_EPS6], reference=_rms_norm_ref, frontend=_rms_norm_frontend, example=_EXAMPLE)
def rms_norm(x, gamma, eps, *, dims):
    """RMS norm of each row of [R, C]: ``x / sqrt(mean(x**2) + eps) * gamma``."""
    c, r = hl.Var("c"), hl.Var("r")
    t, at = x.type(), _acc(x.type())
    sq = _row_sum("sumsq", lambda k, rr: _sq(hl.cast(at, x[k, rr])), dims, at)
    inv = hl.Func("inv")
    inv[r] = hl.cast(t, 1 / hl.sqrt(sq[r] / hl.cast(at, dims.C) + lit64(eps)))
    out = hl.Func("out")
    out[c, r] = x[c, r] * inv[r] * gamma[c]
    return out


def _batch_norm_inputs(dims, dtypes, params, rng):
    """Canonical inputs with positive variances."""
    n, c, s = dims["N"], dims["C"], dims["S"]
    x = rng.uniform(-1.0, 1.0, (n, c, s)).astype(dtypes[0])
    mean = rng.uniform(-1.0, 1.0, c).astype(dtypes[1])
    var = rng.uniform(0.1, 2.0, c).astype(dtypes[2])
    gamma = rng.uniform(-1.0, 1.0, c).astype(dtypes[3])
    beta = rng.uniform(-1.0, 1.0, c).astype(dtypes[4])
    return [x, mean, var, gamma, beta]


@op(category="nn", inputs={"x": "N C S", "mean": "C", "var": "C", "gamma": "C", "beta": "C"},
    output="N C S", dtypes=_FLOATS, params=[_EPS5], reference=_batch_norm_ref,
    frontend=_batch_norm_frontend, example={"N": 4, "C": 16, "S": 49},
    make_inputs=_batch_norm_inputs)
def batch_norm(x, mean, var, gamma, beta, eps, *, dims):
    """Inference batch norm of [N, C, S] per channel c:
    ``(x - mean[c]) / sqrt(var[c] + eps) * gamma[c] + beta[c]``."""
    s, c, n = hl.Var("s"), hl.Var("c"), hl.Var("n")
    t = x.type()
    scale = hl.Func("scale")
    scale[c] = hl.cast(t, gamma[c] / hl.sqrt(hl.cast(hl.Float(64), var[c]) + lit64(eps)))
    out = hl.Func("out")
    out[s, c, n] = (x[s, c, n] - mean[c]) * scale[c] + beta[c]
    return out


def _sq(e):
    return e * e


# These frontends depend only on their arguments' dtypes, shapes and parameters, never on array
# values: a repeated call may skip them (runtime.call_public records what they did once).
for _fe in (_softmax_frontend, _log_softmax_frontend, _layer_norm_frontend, _rms_norm_frontend, _batch_norm_frontend):
    _fe.shape_only = True
