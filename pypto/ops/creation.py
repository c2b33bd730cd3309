"""Matrix construction: tril, triu, diag, diagonal, eye and arange, with NumPy's names and
arguments.

``tril``/``triu`` work on the last two axes of any array (batched like ``np.tril``); ``diag`` of a
1-D array builds a square matrix and of a 2-D array returns its ``k``-th diagonal, like
``np.diag``; ``diagonal(x, offset, axis1, axis2)`` is ``np.diagonal``.

Views, as in NumPy: the diagonal of a NumPy array (``diagonal``, and ``diag`` of a 2-D array) is
NumPy's read-only view of it (no kernel runs, nothing is copied). The ``diagonal`` kernel copies it
where a view cannot be the answer: inside a traced program, and into ``out=``. An offset that
leaves no diagonal gives an empty array, as in NumPy (inside a traced program it is an error).

``eye`` and ``arange`` take no array: their kernels read a one- or two-element array of the
output dtype (the value 1, or ``(start, step)``) so that the dtype is the kernel's input dtype
like every other op. ``arange`` computes ``start + i * step`` in the output dtype for integers
and in float64, rounded once, for floats; its length is ``ceil((stop - start) / step)``.
"""

from __future__ import annotations

import math

import halide as hl
import numpy as np

from ..errors import ParamError, ShapeError, ZeroSizeError
from .. import runtime as _rt
from ..runtime import as_array
from ._op import Param, op
from .layout import ANY, VIEW_TYPES, _axis, _eager, _int, _take_out, any_int

_NUM = ["float32", "float64", "int32", "int64"]
_BIG = 1 << 30
_K = Param("k", int, 0, low=-_BIG, high=_BIG, doc="diagonal offset (> 0: above)")


# -- tril and triu -------------------------------------------------------------------------------

def _tri_frontend(the_op):
    def frontend(x, k=0):
        x = as_array(x, the_op.name, "x")
        if x.ndim < 2:
            raise ShapeError(f"{the_op.name}: x must have at least 2 axes [..., M, N], got "
                             f"shape {x.shape}")
        m, n = x.shape[-2:]
        # Any offset, as NumPy takes: past -M or N every element or none is kept.
        k = min(max(any_int(the_op.name, "k", k), -m), n)
        out = the_op.kernel(x.reshape(math.prod(x.shape[:-2]), m, n), k=k)
        return out.reshape(x.shape)
    return frontend


def _tri(upper: bool):
    def algorithm(x, *, k, dims):
        n, m, b = hl.Var("n"), hl.Var("m"), hl.Var("b")
        keep = (n - m >= k) if upper else (n - m <= k)
        out = hl.Func("out")
        out[n, m, b] = hl.select(keep, x[n, m, b], hl.cast(x.type(), 0))
        return out
    return algorithm


def _declare_tri(name, np_fn, upper):
    the_op = None

    def frontend(x, k=0):
        return _tri_frontend(the_op)(x, k)
    frontend.__doc__ = (f"The {'upper' if upper else 'lower'} triangle of the last two axes "
                        f"(``np.{name}``): elements with column - row {'>=' if upper else '<='}"
                        f" k are kept, the others are zero.")
    algorithm = _tri(upper)
    algorithm.__name__ = name
    the_op = op(name=name, category="creation", inputs={"x": "B M N"}, output="B M N",
                dtypes=ANY[:4], params=[_K], reference=lambda x, k=0: np_fn(x, k),
                kernel_reference=lambda x, k=0: np_fn(x, k), frontend=frontend,
                example={"B": 2, "M": 30, "N": 40}, doc=frontend.__doc__)(algorithm)
    return the_op


tril = _declare_tri("tril", np.tril, upper=False)
triu = _declare_tri("triu", np.triu, upper=True)


# -- diag and diagonal ---------------------------------------------------------------------------

def _diag_frontend(v, k=0):
    """``np.diag``: a 1-D ``v`` gives a square matrix with ``v`` on its ``k``-th diagonal; a 2-D
    ``v`` gives its ``k``-th diagonal (of a NumPy array: NumPy's read-only view)."""
    v = as_array(v, "diag", "v")
    k = _int("diag", "k", k)
    if v.ndim == 2:
        return _diagonal_of(diag, v, k, 0, 1)
    if v.ndim != 1:
        raise ShapeError(f"diag: v must be 1-D or 2-D, got shape {v.shape}")
    return diag.kernel(v, k=k)


@op(category="creation", inputs={"v": "N"}, output="M MC", dtypes=ANY[:4], params=[_K],
    reference=lambda v, k=0: np.diag(v, k), kernel_reference=lambda v, k=0: np.diag(v, k),
    frontend=_diag_frontend, derive=lambda d, p: {"M": d["N"] + abs(p["k"]),
                                                  "MC": d["N"] + abs(p["k"])},
    example={"N": 50})
def diag(v, *, k, dims):
    """out[r, c] = v[min(r, c)] where c - r == k, else 0."""
    c, r = hl.Var("mc"), hl.Var("m")
    src = hl.clamp(r if k >= 0 else c, 0, dims.N - 1)
    out = hl.Func("out")
    out[c, r] = hl.select(c - r == k, v[src], hl.cast(v.type(), 0))
    return out


def _in_trace() -> bool:
    """True while a program is traced (its values are not computed: an empty result is refused)."""
    return _rt._tracing is not None and _rt._tracing() is not None


def _diag_len(m: int, n: int, offset: int) -> int:
    return max(0, min(m, n - offset) if offset >= 0 else min(m + offset, n))


def _diagonal_frontend(x, offset=0, axis1=0, axis2=1):
    """``np.diagonal``: the diagonal of the (axis1, axis2) planes, as the last axis. Of a NumPy
    array it is NumPy's read-only view; a kernel copies it inside a traced program and into
    ``out=``."""
    return _diagonal_of(diagonal, x, offset, axis1, axis2)


def _diagonal_of(the_op, x, offset, axis1, axis2):
    """``the_op``'s public call (diagonal, or diag of a 2-D array): the checks, then NumPy's view
    or the ``diagonal`` kernel."""
    name = the_op.name
    x = as_array(x, name, "x" if the_op is diagonal else "v")
    if x.ndim < 2:
        raise ShapeError(f"{name}: x must have at least 2 axes, got shape {x.shape}")
    a1, a2 = _axis(name, axis1, x.ndim), _axis(name, axis2, x.ndim)
    if a1 == a2:
        raise ParamError(f"{name}: axis1 and axis2 must differ, got {axis1} and {axis2}")
    offset = _int(name, "offset" if the_op is diagonal else "k", offset)
    m, n = x.shape[a1], x.shape[a2]
    if _diag_len(m, n, offset) == 0:
        if type(x) is np.ndarray and not _in_trace():
            return np.diagonal(x, offset, a1, a2)     # empty, as NumPy's
        raise ShapeError(f"{name}: offset {offset} leaves no diagonal in a {m} x {n} plane")
    if _eager(the_op, x):
        return np.diagonal(x, offset, a1, a2)
    rest = [i for i in range(x.ndim) if i not in (a1, a2)]
    shape = tuple(x.shape[i] for i in rest) + (_diag_len(m, n, offset),)
    outs = _take_out(the_op, [shape], x.dtype) if the_op is not diagonal else None
    order = rest + [a1, a2]
    moved = (x if order == list(range(x.ndim)) else np.transpose(x, order))
    moved = moved.reshape(math.prod(shape[:-1]), m, n)
    out = diagonal.kernel(moved, offset=offset,
                          out=outs[0].reshape(math.prod(shape[:-1]), shape[-1]) if outs
                          else None)
    return outs[0] if outs else out.reshape(shape)


def _diagonal_validate(d, p):
    if _diag_len(d["M"], d["N"], p["offset"]) == 0:
        raise ShapeError(f"diagonal: offset {p['offset']} leaves no diagonal in a {d['M']} x "
                         f"{d['N']} plane")


@op(category="creation", inputs={"x": "B M N"}, output="B L", dtypes=VIEW_TYPES,
    params=[Param("offset", int, 0, low=-_BIG, high=_BIG, doc="diagonal offset")],
    reference=lambda x, offset=0, axis1=0, axis2=1: np.diagonal(x, offset, axis1, axis2).copy(),
    kernel_reference=lambda x, offset=0: np.diagonal(x, offset, 1, 2).copy(),
    frontend=_diagonal_frontend, validate=_diagonal_validate,
    derive=lambda d, p: {"L": _diag_len(d["M"], d["N"], p["offset"])},
    example={"B": 4, "M": 30, "N": 40})
def diagonal(x, *, offset, dims):
    """out[b, l] = x[b, l + max(-offset, 0), l + max(offset, 0)]."""
    ll, b = hl.Var("l"), hl.Var("b")
    out = hl.Func("out")
    out[ll, b] = x[ll + max(offset, 0), ll + max(-offset, 0), b]
    return out


# -- eye and arange ------------------------------------------------------------------------------

def _dtype(name, dtype, allowed=_NUM):
    dt = np.dtype(dtype).name if dtype is not None else None
    if dt not in allowed:
        raise ParamError(f"{name}: 'dtype' must be one of {allowed}, got {dtype!r}")
    return dt


def _one_or_two(name, d, k):
    if d["K"] != k:
        raise ShapeError(f"{name}: the kernel reads {k} value(s) of the output dtype, got {d['K']}")


def _eye_frontend(N, M=None, k=0, dtype="float32"):  # noqa: N803 - NumPy's names
    """``np.eye``: an N x M matrix with ones on the ``k``-th diagonal (float32 by default here;
    NumPy's default is float64)."""
    n = _int("eye", "N", N, low=0)
    m = n if M is None else _int("eye", "M", M, low=0)
    one = np.ones(1, _dtype("eye", dtype))
    if (n == 0 or m == 0) and not _in_trace():
        _int("eye", "k", k)
        return np.zeros((n, m), one.dtype)       # an empty matrix, as np.eye(0)
    return eye.kernel(one, rows=n, cols=m, k=_int("eye", "k", k))


@op(category="creation", inputs={"one": "K"}, output="R C", dtypes=_NUM,
    params=[Param("rows", int, 8, low=1, high=_BIG, doc="rows"),
            Param("cols", int, 8, low=1, high=_BIG, doc="columns"), _K],
    reference=lambda N, M=None, k=0, dtype="float32": np.eye(N, M, k, dtype=dtype),
    kernel_reference=lambda one, rows=8, cols=8, k=0: np.eye(rows, cols, k, dtype=one.dtype) * one[0],
    frontend=_eye_frontend, validate=lambda d, p: _one_or_two("eye", d, 1), derive=lambda d, p: {"R": p["rows"], "C": p["cols"]},
    example={"K": 1})
def eye(one, *, rows, cols, k, dims):
    """out[r, c] = one[0] where c - r == k, else 0."""
    c, r = hl.Var("c"), hl.Var("r")
    out = hl.Func("out")
    out[c, r] = hl.select(c - r == k, one[0], hl.cast(one.type(), 0))
    return out


def _arange_frontend(start, stop=None, step=1, dtype=None):
    """``np.arange``: ``start, start + step, ...`` below ``stop`` (above it for a negative step).
    ``dtype`` defaults to NumPy's choice (int64 for ints, float64 otherwise)."""
    if stop is None:
        start, stop = 0, start
    for arg, v in (("start", start), ("stop", stop), ("step", step)):
        if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)) \
                or not math.isfinite(v):
            raise ParamError(f"arange: '{arg}' must be a finite number, got {v!r}")
    if step == 0:
        raise ParamError("arange: 'step' must not be zero")
    if dtype is None:
        dtype = np.result_type(start, stop, step).name
        dtype = "int64" if np.dtype(dtype).kind in "iu" else "float64"
    dt = _dtype("arange", dtype)
    n = math.ceil((stop - start) / step)
    if n < 1:
        if not _in_trace():
            return np.empty(0, dt)            # no elements, as np.arange(0)
        raise ZeroSizeError(f"arange: start={start}, stop={stop}, step={step} give no elements "
                         f"(zero-size arrays are not supported inside a traced program)")
    se = np.array([start, step], np.float64 if np.dtype(dt).kind == "f" else np.int64)
    return arange.kernel(se.astype(dt), n=_int("arange", "length", n, low=1))


def _arange_kernel_ref(start_step, n=16):
    s, d = start_step
    if start_step.dtype.kind == "f":
        return (np.float64(s) + np.arange(n) * np.float64(d)).astype(start_step.dtype)
    return (s + np.arange(n, dtype=np.int64) * d).astype(start_step.dtype)


def _arange_inputs(dims, dtypes, params, rng):
    return [np.array([3, 2], dtypes[0]) if np.dtype(dtypes[0]).kind in "iu"
            else np.array([0.5, 0.25], dtypes[0])]


@op(category="creation", inputs={"start_step": "K"}, output="N", dtypes=_NUM,
    params=[Param("n", int, 16, low=1, high=_BIG, doc="number of elements")],
    reference=lambda start, stop=None, step=1, dtype=None: np.arange(start, stop, step, dtype),
    kernel_reference=_arange_kernel_ref, frontend=_arange_frontend, make_inputs=_arange_inputs,
    validate=lambda d, p: _one_or_two("arange", d, 2),
    derive=lambda d, p: {"N": p["n"]}, example={"K": 2})
def arange(start_step, *, n, dims):
    """out[i] = start + i * step with (start, step) = start_step[0], start_step[1]."""
    i = hl.Var("n")
    t = start_step.type()
    out = hl.Func("out")
    if t.is_float():
        f = hl.Float(64)
        out[i] = hl.cast(t, hl.cast(f, start_step[0]) + hl.cast(f, i) * hl.cast(f, start_step[1]))
    else:
        out[i] = start_step[0] + hl.cast(t, i) * start_step[1]
    return out
