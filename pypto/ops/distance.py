"""Similarities and distances, as ``torch.nn.functional`` / ``torch.cdist`` define them.

- ``cosine_similarity(x1, x2, dim=1, eps=1e-8)``: ``sum(x1 * x2) / (max(||x1||, eps) *
  max(||x2||, eps))`` over ``dim`` (torch's definition since 1.12: each norm clamped on its own);
  x1 and x2 broadcast together. Kernel [O, R, I] -> [O, I] (no transpose).
- ``pairwise_distance(x1, x2, p=2.0, eps=1e-6, keepdim=False)``: ``||x1 - x2 + eps||_p`` over the
  last axis, rows broadcast together. Kernel [R, C] -> [R].
- ``cdist(x1, x2, p=2.0)``: every pair of rows, [..., P, M] and [..., R, M] -> [..., P, R]
  (the batch axes broadcast, as torch's do), ``(sum |a - b|**p)**(1/p)`` summed directly (torch
  switches to a matrix product for p = 2 on large inputs: faster there, and less accurate).

``p`` is torch's: 0 counts the nonzero differences, ``inf`` takes the largest ``|difference|``,
and a number in [0.001, 1000] the p-norm (1 and 2 take exact fast paths). Sums run in float64.
A NaN difference (inf - inf included) gives NaN, and with p = 0 counts as nonzero, as torch's
norms do (``torch.cdist`` differs there: NaN for p = 0, the NaN ignored for p = inf).
"""

from __future__ import annotations

import math

import halide as hl
import numpy as np

from ..errors import ParamError, ShapeError
from ..runtime import as_array, as_traced, traced
from ._consts import lit64
from . import elementwise as _ew
from ._op import Param, op
from .layout import _axis, bcast
from .reduce import _magnitude

_FLOATS = ["float32", "float64"]
_P_LOW, _P_HIGH = 1e-3, 1e3
_P = Param("p", float, 2.0, low=0.0, high=math.inf, finite=False,
           doc=f"the norm's power: 0, inf or a number in [{_P_LOW:g}, {_P_HIGH:g}]")


def _check_p(name: str, p) -> float:
    """``p`` as a float: 0 (count of nonzeros), inf (largest magnitude) or a power in
    [0.001, 1000] (beyond them the powers over- and underflow float64); ParamError otherwise."""
    if isinstance(p, (bool, np.bool_)) or not isinstance(p, (int, float, np.integer, np.floating)):
        raise ParamError(f"{name}: 'p' must be a number, got {p!r}")
    v = float(p)
    if not (v == 0 or v == math.inf or _P_LOW <= v <= _P_HIGH):
        raise ParamError(f"{name}: 'p' must be 0, inf or a number in [{_P_LOW:g}, {_P_HIGH:g}], "
                         f"got {p!r}")
    return v


def _validate_p(name: str):
    return lambda d, params: _check_p(name, params["p"])


def _pair(name, x1, x2):
    a, b = as_array(x1, name, "x1"), as_array(x2, name, "x2")
    if traced([a, b]):
        a, b = as_traced([a, b])
    try:
        shape = np.broadcast_shapes(a.shape, b.shape)
    except ValueError:
        raise ShapeError(f"{name}: x1 {a.shape} and x2 {b.shape} do not broadcast") from None
    return bcast(a, shape), bcast(b, shape), shape


def _pow_abs(d, p: float):
    """|d|**p in float64 (the exact products for p = 1 and 2; for p = 0, 1 where d is nonzero,
    a NaN included, as torch counts it)."""
    if p == 0:
        # The NaN test is on the bits and apart from the compare: a compare of d = a - b alone
        # (or of its magnitude's bits) was compiled as a == b, which counted inf - inf as 0.
        return hl.cast(hl.Float(64), _ew._is_nan(d) | (d != lit64(0)))
    a = hl.abs(d)
    if p == 1:
        return a
    if p == 2:
        return a * a
    return hl.select(a == lit64(0), lit64(0), hl.exp(lit64(p) * hl.log(a)))


def _root(s, p: float):
    if p in (0, 1):
        return s
    if p == 2:
        return hl.sqrt(s)
    return hl.select(s == lit64(0), lit64(0), hl.exp(hl.log(s) / lit64(p)))


def _norm(d, at, p: float):
    """The p-norm of the float64 differences ``d`` over their RDom, as an Expr at the pure Vars
    ``at``: ``(sum |d|**p)**(1/p)``, the count of nonzeros for p = 0, the largest |d| for
    p = inf."""
    acc = hl.Func("acc")
    if p == math.inf:
        # A max of the magnitudes' bits, which order like |d| and put a NaN above inf (a float
        # max may drop a NaN); exact, so there is nothing to accumulate in a wider type.
        acc[at] = hl.i64(0)
        acc[at] = hl.max(acc[at], _magnitude(d))
        return hl.reinterpret(hl.Float(64), acc[at])
    acc[at] = lit64(0)
    acc[at] += _pow_abs(d, p)
    return _root(acc[at], p)


# -- cosine_similarity ---------------------------------------------------------------------------

def _cos_ref(x1, x2, dim=1, eps=1e-8):
    a, b = np.broadcast_arrays(np.asarray(x1, np.float64), np.asarray(x2, np.float64))
    n1 = np.maximum(np.sqrt((a * a).sum(axis=dim)), eps)
    n2 = np.maximum(np.sqrt((b * b).sum(axis=dim)), eps)
    return ((a * b).sum(axis=dim) / (n1 * n2)).astype(np.asarray(x1).dtype)


def _cos_frontend(x1, x2, dim=1, eps=1e-8):
    """Cosine similarity along ``dim`` (``F.cosine_similarity``)."""
    a, b, shape = _pair("cosine_similarity", x1, x2)
    ax = _dim("cosine_similarity", dim, len(shape))
    o, n, i = int(np.prod(shape[:ax])), shape[ax], int(np.prod(shape[ax + 1:]))
    out = cosine_similarity.kernel(a.reshape(o, n, i), b.reshape(o, n, i), eps=float(eps))
    return out.reshape(shape[:ax] + shape[ax + 1:])


def _dim(name, dim, ndim):
    """``dim`` (torch's name for the axis) checked; the error names ``dim``, not ``axis``."""
    try:
        return _axis(name, dim, ndim)
    except ParamError as e:
        raise ParamError(str(e).replace("'axis'", "'dim'", 1)) from None


@op(category="distance", inputs={"x1": "O R I", "x2": "O R I"}, output="O I", dtypes=_FLOATS,
    params=[Param("eps", float, 1e-8, low=0.0, doc="smallest norm used")],
    reference=_cos_ref, kernel_reference=lambda x1, x2, eps=1e-8: _cos_ref(x1, x2, 1, eps),
    frontend=_cos_frontend, example={"O": 16, "R": 64, "I": 4})
def cosine_similarity(x1, x2, *, eps, dims):
    """dot / (max(|x1|, eps) max(|x2|, eps)) along R, sums in float64."""
    i, o = hl.Var("i"), hl.Var("o")
    r = hl.RDom([hl.Range(0, dims.R)], "r")
    f64 = hl.Float(64)
    a, b = hl.cast(f64, x1[i, r, o]), hl.cast(f64, x2[i, r, o])
    sums = hl.Func("sums")
    sums[i, o] = (lit64(0), lit64(0), lit64(0))
    sums[i, o] = (sums[i, o][0] + a * b, sums[i, o][1] + a * a, sums[i, o][2] + b * b)
    e = lit64(eps)
    n1 = hl.max(hl.sqrt(sums[i, o][1]), e)
    n2 = hl.max(hl.sqrt(sums[i, o][2]), e)
    out = hl.Func("out")
    out[i, o] = hl.cast(x1.type(), sums[i, o][0] / (n1 * n2))
    return out


# -- pairwise_distance ---------------------------------------------------------------------------

def _np_norm(d, p, axis, keepdims=False):
    """The p-norm of float64 ``d`` over ``axis``, written out for each kind of p."""
    a = np.abs(d)
    if p == 0:
        return (a != 0).sum(axis=axis, keepdims=keepdims).astype(np.float64)
    if p == math.inf:
        return a.max(axis=axis, keepdims=keepdims)
    return (a ** p).sum(axis=axis, keepdims=keepdims) ** (1.0 / p)


def _pd_ref(x1, x2, p=2.0, eps=1e-6, keepdim=False):
    d = np.asarray(x1, np.float64) - np.asarray(x2, np.float64) + eps
    return _np_norm(d, p, -1, keepdim).astype(np.asarray(x1).dtype)


def _pd_frontend(x1, x2, p=2.0, eps=1e-6, keepdim=False):
    """``F.pairwise_distance``: the p-norm of ``x1 - x2 + eps`` over the last axis (p = 0: the
    count of nonzero entries; p = inf: the largest magnitude)."""
    a, b, shape = _pair("pairwise_distance", x1, x2)
    if not shape:
        raise ShapeError("pairwise_distance: x1 and x2 need at least one axis")
    c = shape[-1]
    rows = math.prod(shape[:-1])
    out = pairwise_distance.kernel(a.reshape(rows, c), b.reshape(rows, c),
                                   p=_check_p("pairwise_distance", p), eps=float(eps))
    return out.reshape(shape[:-1] + ((1,) if keepdim else ()))


@op(category="distance", inputs={"x1": "R C", "x2": "R C"}, output="R", dtypes=_FLOATS,
    params=[_P, Param("eps", float, 1e-6, low=-1.0, high=1.0, doc="added to the difference")],
    reference=_pd_ref, kernel_reference=lambda x1, x2, p=2.0, eps=1e-6: _pd_ref(x1, x2, p, eps),
    frontend=_pd_frontend, validate=_validate_p("pairwise_distance"),
    example={"R": 64, "C": 32})
def pairwise_distance(x1, x2, *, p, eps, dims):
    """||x1[r] - x2[r] + eps||_p, summed in float64."""
    r = hl.Var("r")
    c = hl.RDom([hl.Range(0, dims.C)], "c")
    f64 = hl.Float(64)
    out = hl.Func("out")
    out[r] = hl.cast(x1.type(), _norm(hl.cast(f64, x1[c, r]) - hl.cast(f64, x2[c, r])
                                      + lit64(eps), [r], p))
    return out


# -- cdist ---------------------------------------------------------------------------------------

def _cdist_ref(x1, x2, p=2.0):
    a, b = np.asarray(x1, np.float64), np.asarray(x2, np.float64)
    d = a[..., :, None, :] - b[..., None, :, :]
    return _np_norm(d, p, -1).astype(np.asarray(x1).dtype)


def _cdist_frontend(x1, x2, p=2.0):
    """``torch.cdist``: the p-norm distance of every row of ``x1`` [..., P, M] to every row of
    ``x2`` [..., R, M]; the batch axes broadcast (p = 0: the count of nonzero differences;
    p = inf: the largest magnitude)."""
    a, b = as_array(x1, "cdist", "x1"), as_array(x2, "cdist", "x2")
    if traced([a, b]):
        a, b = as_traced([a, b])
    if a.ndim < 2 or b.ndim < 2 or a.shape[-1] != b.shape[-1]:
        raise ShapeError(f"cdist: x1 [..., P, M] and x2 [..., R, M] must have at least 2 axes "
                         f"and one M, got {a.shape} and {b.shape}")
    try:
        lead = tuple(np.broadcast_shapes(a.shape[:-2], b.shape[:-2]))
    except ValueError:
        raise ShapeError(f"cdist: the batch axes of x1 {a.shape} and x2 {b.shape} do not "
                         f"broadcast ({a.shape[:-2]} against {b.shape[:-2]})") from None
    p = _check_p("cdist", p)
    a, b = bcast(a, lead + a.shape[-2:]), bcast(b, lead + b.shape[-2:])
    nb = math.prod(lead)
    out = cdist.kernel(a.reshape((nb,) + a.shape[-2:]), b.reshape((nb,) + b.shape[-2:]), p=p)
    return out.reshape(lead + out.shape[-2:])


@op(category="distance", inputs={"x1": "B P M", "x2": "B Q M"}, output="B P Q",
    dtypes=_FLOATS, params=[_P], reference=_cdist_ref, kernel_reference=_cdist_ref,
    frontend=_cdist_frontend, validate=_validate_p("cdist"),
    example={"B": 2, "P": 40, "Q": 30, "M": 16})
def cdist(x1, x2, *, p, dims):
    """out[b, i, j] = ||x1[b, i] - x2[b, j]||_p, summed in float64."""
    q, pp, b = hl.Var("q"), hl.Var("p"), hl.Var("b")
    m = hl.RDom([hl.Range(0, dims.M)], "m")
    f64 = hl.Float(64)
    out = hl.Func("out")
    out[q, pp, b] = hl.cast(x1.type(), _norm(hl.cast(f64, x1[m, pp, b]) - hl.cast(f64, x2[m, q, b]),
                                             [q, pp, b], p))
    return out
