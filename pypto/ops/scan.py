"""More reductions and the scans: all, any, count_nonzero, vector_norm, nansum, nanmean, nanmax, nanmin;
cumsum, cumprod, cummax, cummin, logcumsumexp.

Reductions follow ``reduce``'s conventions: a public ``axis`` (None, an int or a tuple) and
``keepdims``, an [O, R] kernel reducing each row. ``all``/``any`` give bool, ``count_nonzero``
int64 (a NaN is nonzero and true, as in NumPy). ``vector_norm(x, ord=2, axis=None)`` is
``torch.linalg.vector_norm`` (the name ``norm`` is taken by the normalization family): ``ord``
1, 2 (also ``"fro"``), ``inf``, ``-inf``, 0 (the count of nonzeros) or any other p, negative
ones included (``(sum |x|**p)**(1/p)``: with p < 0 a zero makes the norm 0, as torch's),
accumulated in float64; a NaN gives NaN.
The ``nan*`` ops ignore NaNs like NumPy's; a row of only NaNs gives NaN (``nansum``: 0).

Scans run along one ``axis`` (default -1, like torch; NumPy's ``axis=None`` flattens) on a kernel
[O, R, I] (no transpose: the axes before and after are merged), sequentially along R, in the
input's own precision like NumPy and torch (int32 sums and products in int64).
``cummax``/``cummin`` are torch's: ``(values, indices)``, a tie moves the index to the later
element and a NaN wins from where it appears; the values are the input at the indices. One long
row alone (``LONG_ROW``) is scanned by chunks in parallel (``_cumext_long``), exactly.
``logcumsumexp`` is torch's, computed stably as ``m + log(s)`` from the running maximum ``m`` and
the running ``s = sum exp(x - m)``. Each scan is a running Func that the outputs copy, so that a
schedule can compute it by blocks of rows in a layout of its own.
"""

from __future__ import annotations

import math
import warnings

import halide as hl
import numpy as np

from ..compiler import targets
from ..errors import ParamError, ShapeError
from ..runtime import as_array
from ..schedule.templates.scan import CHUNK
from ._consts import lit64
from . import elementwise as _ew
from ._op import Param, op
from .layout import _axis, _eager, _oai
from .reduce import _extreme_key, _float_sum, _key, _last_axis, _reduce_call, _unkey

_FLOATS = ["float32", "float64"]
_ALL = ["float32", "float64", "int32", "int64", "bool"]
_EX = {"O": 16, "R": 100}


def _expr(e):
    """``e`` as an Expr (a Func call made inside an update is a FuncRef)."""
    return e if isinstance(e, hl.Expr) else hl.Expr(e)


def _rows(name, value_of, init, combine, t, dims):
    """``name[o]``: ``combine`` of ``value_of(k, o)`` over the row, starting at ``init``."""
    o, k = hl.Var("o"), hl.RDom([hl.Range(0, dims.R)], "k")
    f = hl.Func(name)
    f[o] = hl.cast(t, init)
    f[o] = combine(f[o], hl.cast(t, value_of(k, o)))
    return f


def _is_nonzero(v):
    """v != 0, with NaN nonzero: floats are tested on their bits (Halide's float compares
    assume no NaN)."""
    if v.type().is_bool():
        return v
    if v.type().is_float():
        return _ew._magnitude_bits(v) != 0
    return v != hl.cast(v.type(), 0)


def _nonzero(x, k, o):
    return _is_nonzero(x[k, o])


def _reduction(name, fn, ref, doc, dtypes=_FLOATS, params=()):
    # No **kw: these kernels take no parameters, and a stray keyword (torch's dim=) is then
    # Python's TypeError, which the op turns into an ArgumentError naming its call, as sum's.
    def frontend(x, axis=None, keepdims=False):
        return _reduce_call(the_op, x, axis, keepdims)
    frontend.__doc__ = doc
    fn.__name__ = name
    the_op = op(name=name, category="reduction", inputs={"x": "O R"}, output="O",
                dtypes=dtypes, params=list(params), reference=ref,
                kernel_reference=_last_axis(ref), frontend=frontend, example=_EX, doc=doc)(fn)
    return the_op


def _all(x, *, dims):
    acc = _rows("acc", lambda k, o: _nonzero(x, k, o), 1, hl.min, hl.UInt(8), dims)
    o = hl.Var("o")
    out = hl.Func("out")
    out[o] = acc[o] != 0
    return out


def _any(x, *, dims):
    acc = _rows("acc", lambda k, o: _nonzero(x, k, o), 0, hl.max, hl.UInt(8), dims)
    o = hl.Var("o")
    out = hl.Func("out")
    out[o] = acc[o] != 0
    return out


def _count_nonzero(x, *, dims):
    acc = _rows("acc", lambda k, o: _nonzero(x, k, o), 0, lambda a, b: a + b, hl.Int(64), dims)
    o = hl.Var("o")
    out = hl.Func("out")
    out[o] = acc[o]
    return out


def _count_ref(x, axis=None, keepdims=False):
    return np.asarray(np.count_nonzero(x, axis=axis, keepdims=keepdims), np.int64)


all_ = _reduction("all", _all, lambda x, axis=None, keepdims=False: np.all(
    x, axis=axis, keepdims=keepdims), "True where every element over ``axis`` is nonzero "
    "(``np.all``).", _ALL)
any_ = _reduction("any", _any, lambda x, axis=None, keepdims=False: np.any(
    x, axis=axis, keepdims=keepdims), "True where some element over ``axis`` is nonzero "
    "(``np.any``).", _ALL)
count_nonzero = _reduction("count_nonzero", _count_nonzero, _count_ref,
                           "Number of nonzero elements over ``axis`` (int64).", _ALL)


# -- norm ----------------------------------------------------------------------------------------

_ORDS = ("1", "2", "inf", "-inf", "0", "p")


def _norm_ref(x, ord=2, axis=None, keepdims=None, *, dim=None, keepdim=None):  # noqa: A002
    x = np.asarray(x)
    axis = dim if dim is not None else axis
    keepdims = bool(keepdim if keepdim is not None else keepdims)
    a = np.abs(x.astype(np.float64))
    ax = tuple(range(x.ndim)) if axis is None else axis
    if ord in ("fro", 2):
        out = np.sqrt(np.sum(a * a, axis=ax, keepdims=keepdims))
    elif ord == np.inf:
        out = np.max(a, axis=ax, keepdims=keepdims)
    elif ord == -np.inf:
        out = np.min(a, axis=ax, keepdims=keepdims)
    elif ord == 0:
        out = np.sum(a != 0, axis=ax, keepdims=keepdims).astype(np.float64)
    else:
        with np.errstate(divide="ignore"):     # ord < 0: 0 ** ord is inf, and the norm 0
            out = np.sum(a ** float(ord), axis=ax, keepdims=keepdims) ** (1.0 / ord)
    return np.asarray(out).astype(x.dtype)[()]


def _norm_frontend(x, ord=2, axis=None, keepdims=None, *, dim=None, keepdim=None):  # noqa: A002
    """The vector norm over ``axis`` (``torch.linalg.vector_norm``; ``"fro"`` is 2). torch's
    names ``dim`` and ``keepdim`` are accepted for ``axis`` and ``keepdims``: give one spelling
    of each, not both, even with equal values (None is "not given"; ``keepdims`` defaults to
    False)."""
    # Defaults of None so that an explicit keepdims=False beside keepdim=True is seen (with a
    # default of False it was taken for "not given" and keepdim=True won).
    if dim is not None:
        if axis is not None:
            raise ParamError(f"vector_norm: give the axes once, as 'axis' or as torch's 'dim', "
                             f"not both (got axis={axis!r}, dim={dim!r})")
        axis = dim
    if keepdim is not None:
        if keepdims is not None:
            raise ParamError(f"vector_norm: give 'keepdims' or torch's 'keepdim', not both (got "
                             f"keepdims={keepdims!r}, keepdim={keepdim!r})")
        keepdims = keepdim
    elif keepdims is None:
        keepdims = False
    if isinstance(ord, np.ndarray) and ord.ndim == 0 and ord.dtype.kind in "iuf":
        ord = ord[()]  # noqa: A001     (a 0-d array is its number)
    if isinstance(ord, str) and ord == "fro":
        ord = 2  # noqa: A001
    if isinstance(ord, bool) or not isinstance(ord, (int, float, np.integer, np.floating)) or \
            math.isnan(float(ord)):      # (np.isnan refuses a Python int beyond int64)
        raise ParamError(f"vector_norm: 'ord' must be 'fro', inf, -inf or a number, got {ord!r}")
    name = {1: "1", 2: "2", np.inf: "inf", -np.inf: "-inf", 0: "0"}.get(ord, "p")
    return _reduce_call(vector_norm, x, axis, keepdims, ord=name, p=float(ord) if name == "p" else 2.0)


def _norm_kernel_ref(x, ord="2", p=2.0):  # noqa: A002
    val = {"1": 1, "2": 2, "inf": np.inf, "-inf": -np.inf, "0": 0}.get(ord, p)
    return _norm_ref(x, val, axis=-1)


def _norm_validate(d, params):
    if params["ord"] == "p" and params["p"] == 0:
        raise ParamError("vector_norm: 'p' must not be 0 when ord is 'p' (ord '0' counts nonzeros)")


@op(category="reduction", inputs={"x": "O R"}, output="O", dtypes=_FLOATS,
    params=[Param("ord", str, "2", choices=_ORDS, doc="which norm"),
            Param("p", float, 2.0, low=-1e3, high=1e3, doc="the power when ord is 'p' (not 0)")],
    reference=_norm_ref, kernel_reference=_norm_kernel_ref, frontend=_norm_frontend,
    validate=_norm_validate, example=_EX)
def vector_norm(x, *, ord, p, dims):  # noqa: A002
    """Vector norm of each row; sums in float64, extremes on integer keys (NaN wins)."""
    f64, t = hl.Float(64), x.type()
    o = hl.Var("o")
    out = hl.Func("out")
    if ord in ("inf", "-inf"):
        big = ord == "inf"
        it = _key(x[0, 0], True).type()
        # NaN wins either way: the largest key for the max, the smallest for the min
        best = _rows("best", lambda k, oo: _key(hl.abs(x[k, oo]), big), it.min() if big
                     else it.max(), hl.max if big else hl.min, it, dims)
        out[o] = _unkey(best[o], t)
        return out
    if ord == "1":
        term = lambda k, oo: hl.abs(hl.cast(f64, x[k, oo]))  # noqa: E731
    elif ord == "2":
        term = lambda k, oo: hl.cast(f64, x[k, oo]) * hl.cast(f64, x[k, oo])  # noqa: E731
    elif ord == "0":
        term = lambda k, oo: hl.cast(f64, _is_nonzero(x[k, oo]))  # noqa: E731
    else:
        term = lambda k, oo: hl.pow(hl.abs(hl.cast(f64, x[k, oo])), lit64(p))  # noqa: E731
    acc = _rows("acc", term, 0, lambda a, b: a + b, f64, dims)
    if ord == "2":
        res = hl.sqrt(acc[o])
    elif ord == "p":
        res = hl.pow(acc[o], lit64(1.0 / p))
    else:
        res = acc[o]
    out[o] = hl.cast(t, res)
    return out


# -- NaN-ignoring reductions ---------------------------------------------------------------------

def _quiet_ref(fn):
    def ref(x, axis=None, keepdims=False):
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return np.asarray(fn(x, axis=axis, keepdims=keepdims))[()]
    return ref


def _nansum_alg(mean: bool):
    def algorithm(x, *, dims):
        f64, t = hl.Float(64), x.type()
        ok = lambda k, oo: hl.logical_not(_ew._is_nan(x[k, oo]))  # noqa: E731
        o = hl.Var("o")
        out = hl.Func("out")
        if not mean:      # float32 adds groups in float32 before float64 (reduce._float_sum)
            acc, rest = _float_sum("acc", lambda k, oo: hl.select(ok(k, oo), x[k, oo],
                                                                   _ew._k(x[k, oo], 0.0)), dims, t)
            out[o] = hl.cast(t, acc[o] + rest(o))
            return out
        acc = _rows("acc", lambda k, oo: hl.cast(f64, hl.select(ok(k, oo), x[k, oo],
                                                                _ew._k(x[k, oo], 0.0))),
                    0, lambda a, b: a + b, f64, dims)
        cnt = _rows("cnt", lambda k, oo: hl.cast(hl.Int(32), ok(k, oo)), 0,
                    lambda a, b: a + b, hl.Int(32), dims)
        out[o] = hl.cast(t, hl.select(cnt[o] > 0, acc[o] / hl.cast(f64, cnt[o]),
                                      lit64(float("nan"))))
        return out
    return algorithm


def _nanext_alg(largest: bool):
    def algorithm(x, *, dims):
        # NaN keys sit at the far end that the reduction never picks, so it ignores them; a row
        # of NaNs keeps the starting key and gives NaN. (One integer reduction: the column
        # schedule of a reduction over leading axes needs a single value.)
        it = _key(x[0, 0], False).type()
        empty = it.min() if largest else it.max()
        best = _extreme_key(x, dims, "best", largest, nan_wins=False)
        o = hl.Var("o")
        out = hl.Func("out")
        out[o] = hl.select(best[o] == empty, _ew._nan(x[0, 0]), _unkey(best[o], x.type()))
        return out
    return algorithm


nansum = _reduction("nansum", _nansum_alg(False), _quiet_ref(np.nansum),
                    "Sum over ``axis`` treating NaN as zero (``np.nansum``).")
nanmean = _reduction("nanmean", _nansum_alg(True), _quiet_ref(np.nanmean),
                     "Mean over ``axis`` of the non-NaN elements (``np.nanmean``).")
nanmax = _reduction("nanmax", _nanext_alg(True), _quiet_ref(np.nanmax),
                    "Largest non-NaN element over ``axis`` (``np.nanmax``).")
nanmin = _reduction("nanmin", _nanext_alg(False), _quiet_ref(np.nanmin),
                    "Smallest non-NaN element over ``axis`` (``np.nanmin``).")


# -- scans ---------------------------------------------------------------------------------------

def _scan_call(the_op, x, axis):
    name = the_op.name
    x = as_array(x, name, "x")
    if axis is None:
        x, axis = x.reshape(-1), 0
    if x.ndim == 0:
        raise ShapeError(f"{name}: x must have at least one axis")
    ax = _axis(name, axis, x.ndim)
    long = _LONG.get(name)
    if long is not None and x.size == x.shape[ax] >= LONG_ROW and _eager(the_op, x) and \
            not targets.current().has_gpu_feature():
        # One long row (an out= of this call goes to the general kernel, which writes it).
        out = long.kernel(x.reshape(-1))
        return tuple(a.reshape(x.shape) for a in out) if isinstance(out, tuple) else \
            out.reshape(x.shape)
    out = the_op.kernel(_oai(x, ax))
    if isinstance(out, tuple):
        return tuple(a.reshape(x.shape) for a in out)
    return out.reshape(x.shape)


def _running(name, first, step, types, dims):
    """``name[i, r, o]``: a scan along r, ``first(i, o)`` at r = 0 and then
    ``step(name[i, k - 1, o], i, k, o)`` for k = 1 .. R - 1 (each a value, or a tuple of values
    of ``types``).

    The pure definition is left undefined, since the two updates write every element: the scan
    is one pass that reads the input once. The outputs copy it, so a schedule can compute it
    per block of rows in a layout of its own (rows innermost, scanned with vector lanes across
    rows) however the input is strided.
    """
    i, r, o = hl.Var("i"), hl.Var("r"), hl.Var("o")
    k = hl.RDom([hl.Range(1, dims.R - 1)], "k")
    f = hl.Func(name)
    undef = tuple(hl.undef(t) for t in types)
    f[i, r, o] = undef if len(undef) > 1 else undef[0]
    f[i, 0, o] = first(i, o)
    f[i, k, o] = step(f[i, k - 1, o], i, k, o)
    return f


def _scan(name, step, ref, doc, dtypes=_FLOATS, widen=False, default_axis=-1):
    """A scan whose running value is its result: ``step(prev, cur)``."""
    def algorithm(x, *, dims):
        i, r, o = hl.Var("i"), hl.Var("r"), hl.Var("o")
        t = hl.Int(64) if widen and not x.type().is_float() else x.type()
        run = _running("run", lambda ii, oo: hl.cast(t, x[ii, 0, oo]),
                       lambda prev, ii, k, oo: step(prev, hl.cast(t, x[ii, k, oo])), [t], dims)
        out = hl.Func("out")
        out[i, r, o] = run[i, r, o]
        return out

    return _declare_scan(name, algorithm, ref, doc, dtypes, default_axis)


def _declare_scan(name, algorithm, ref, doc, dtypes, default_axis=-1):
    # cumsum/cumprod default to NumPy's axis=None (the flattened array); the torch-only names
    # (logcumsumexp, cummax, cummin: torch requires dim) to the last axis.
    def frontend(x, axis=default_axis):
        return _scan_call(the_op, x, axis)
    frontend.__doc__ = doc
    algorithm.__name__ = name
    the_op = op(name=name, category="scan", inputs={"x": "O R I"}, output="O R I",
                dtypes=dtypes, reference=lambda x, axis=default_axis: ref(x, axis),
                kernel_reference=lambda x: ref(x, 1), frontend=frontend,
                example={"O": 8, "R": 100, "I": 3}, doc=doc)(algorithm)
    return the_op


def _lse_step(prev, cur):
    """logcumsumexp's step: the running (m, s) and one more element ``cur``; (m, s, result)."""
    m, s, cur = _expr(prev[0]), _expr(prev[1]), _expr(cur)
    nan = _ew._is_nan(cur) | _ew._is_nan(m)
    up = cur > m
    m_new = hl.select(nan, _ew._nan(cur), hl.select(up, cur, m))
    gap = hl.select(cur == m, _ew._k(cur, 0.0), -hl.abs(cur - m))
    e = _ew._exp(gap)
    s_new = hl.select(up, s * e + _ew._k(cur, 1.0), s + e)
    return (m_new, s_new, _lse_result(m_new, s_new))


def _lse_result(m, s):
    return hl.select(_ew._is_finite(m), m + _ew._log(s), m)


def _lse_join(a, b):
    """Two running (m, s) of consecutive stretches as one: each sum rescaled to the larger m
    (equal maxima, infinities included, add as they are)."""
    m1, s1, m2, s2 = _expr(a[0]), _expr(a[1]), _expr(b[0]), _expr(b[1])
    nan = _ew._is_nan(m1) | _ew._is_nan(m2)
    m = hl.select(nan, _ew._nan(m1), hl.max(m1, m2))
    zero = _ew._k(m1, 0.0)
    e1 = _ew._exp(hl.select(m1 == m, zero, -hl.abs(m1 - m)))
    e2 = _ew._exp(hl.select(m2 == m, zero, -hl.abs(m2 - m)))
    return (m, s1 * e1 + s2 * e2)


def _logcumsumexp(x, *, dims):
    """The running maximum ``m`` and ``s = sum exp(x_j - m)`` (rescaled when ``m`` grows), and the
    result ``m + log(s)``. The exp and the log of a step do not feed the next step (only ``m``'s
    max and ``s``'s multiply-add do), so consecutive steps overlap, unlike a chain of
    ``logaddexp``. Equal infinities add ``exp(0)``; an infinite or NaN ``m`` is the result."""
    i, r, o = hl.Var("i"), hl.Var("r"), hl.Var("o")
    t = x.type()

    def step(prev, ii, k, oo):
        return _lse_step(prev, x[ii, k, oo])

    def first(ii, oo):
        x0 = _expr(x[ii, 0, oo])
        zero = _ew._k(x0, 0.0)
        # log(exp(x0)) of -0.0 is +0.0, as every later step's m + log(s) and logsumexp give it
        return (x0, _ew._k(x0, 1.0), hl.select(x0 == zero, zero, x0))

    run = _running("run", first, step, [t, t, t], dims)
    out = hl.Func("out")
    out[i, r, o] = run[i, r, o][2]
    return out


def _np_logcumsumexp(x, axis):
    out = np.logaddexp.accumulate(np.asarray(x), axis=axis)
    return out + np.zeros((), out.dtype)         # the first element's -0.0 as +0.0 (log(exp(-0.0)))


cumsum = _scan("cumsum", lambda a, b: a + b, lambda x, axis: np.cumsum(
    x, axis, dtype=np.int64 if np.asarray(x).dtype.kind in "iu" else None),
    "Cumulative sum along ``axis`` (``np.cumsum``/``torch.cumsum``; int32 gives int64). As in "
    "NumPy, ``axis=None`` (the default) scans the flattened array.",
    _FLOATS + ["int32", "int64"], widen=True, default_axis=None)
cumprod = _scan("cumprod", lambda a, b: a * b, lambda x, axis: np.cumprod(
    x, axis, dtype=np.int64 if np.asarray(x).dtype.kind in "iu" else None),
    "Cumulative product along ``axis`` (int32 gives int64). As in NumPy, ``axis=None`` (the "
    "default) scans the flattened array.", _FLOATS + ["int32", "int64"],
    widen=True, default_axis=None)
logcumsumexp = _declare_scan("logcumsumexp", _logcumsumexp, _np_logcumsumexp,
                             "``log(cumsum(exp(x)))`` along ``axis``, without overflow "
                             "(``torch.logcumsumexp``).", _FLOATS)


def _cumext_ref(largest):
    def ref(x, axis=-1):
        x = np.moveaxis(np.asarray(x), axis, -1)
        vals, idx = np.empty_like(x), np.zeros(x.shape, np.int64)
        for pos in np.ndindex(x.shape[:-1]):
            best, at = x[pos][0], 0
            for j, v in enumerate(x[pos]):
                if np.isnan(v) or (not np.isnan(best) and (v >= best if largest else v <= best)):
                    best, at = v, j
                vals[pos][j], idx[pos][j] = best, at
        return np.moveaxis(vals, -1, axis), np.moveaxis(idx, -1, axis)
    return ref


def _better(largest, t):
    """Whether ``cur`` takes over from the running extreme ``prev`` (ties and NaN move on)."""
    def better(prev, cur):
        b = (cur >= prev) if largest else (cur <= prev)
        if t.is_float():
            b = _ew._is_nan(cur) | (hl.logical_not(_ew._is_nan(prev)) & b)
        return b
    return better


def _cumext(name, largest):
    def algorithm(x, *, dims):
        i, r, o = hl.Var("i"), hl.Var("r"), hl.Var("o")
        t, i64 = x.type(), hl.Int(64)
        better = _better(largest, t)

        def step(prev, ii, k, oo):
            cur = _expr(x[ii, k, oo])
            take = better(_expr(prev[0]), cur)
            return (hl.select(take, cur, prev[0]), hl.select(take, k, prev[1]))

        # One scan of (running extreme, its index); the values are the input at the indices.
        pair = _running("pair", lambda ii, oo: (x[ii, 0, oo], hl.i32(0)), step,
                        [t, hl.Int(32)], dims)
        values, indices = hl.Func("values"), hl.Func("indices")
        indices[i, r, o] = hl.cast(i64, pair[i, r, o][1])
        # An index is always in [0, R): the promise spares a clamp per element.
        at = hl.unsafe_promise_clamped(hl.cast(hl.Int(32), indices[i, r, o]), 0, dims.R - 1)
        values[i, r, o] = x[i, at, o]
        return values, indices

    def frontend(x, axis=-1):
        return _scan_call(the_op, x, axis)
    frontend.__doc__ = (f"Running {'maximum' if largest else 'minimum'} along ``axis`` and "
                        f"where it was found (``torch.{name}``): ``(values, indices)``.")
    algorithm.__name__ = name
    ref = _cumext_ref(largest)
    the_op = op(name=name, category="scan", inputs={"x": "O R I"},
                outputs={"values": "O R I", "indices": "O R I"},
                dtypes=_FLOATS + ["int32", "int64"], reference=ref,
                kernel_reference=lambda x: ref(x, 1), frontend=frontend,
                example={"O": 8, "R": 100, "I": 3}, doc=frontend.__doc__)(algorithm)
    return the_op


cummax = _cumext("cummax", True)
cummin = _cumext("cummin", False)


# -- cummax/cummin of one long row, by chunks ----------------------------------------------------

#: A row at least this long, alone in its array, takes the chunked form on a CPU target: the
#: general kernel scans a single row serially on one core, through a running buffer as long as
#: the row (cummax of 64M float32: 0.62-0.75x torch before, under load).
LONG_ROW = 1 << 20


def _cumext_long(largest):
    """cummax/cummin of one row [R] in chunks of CHUNK. The running extreme is associative, ties
    and NaN included (the later of two equal extremes wins either way), so the chunks give exactly
    the serial result: ``summary`` reduces each chunk to its (extreme, index), ``carry`` scans
    those (one step a chunk), and ``run`` scans every chunk again from its carry, so chunks run
    in parallel and side by side in vector lanes. The values are the input at the indices."""
    def algorithm(x, *, dims):
        t, n = x.type(), dims.R
        better = _better(largest, t)
        c, r = hl.Var("c"), hl.Var("r")

        def pick(a, b):
            """(value, index) ``b`` when it takes over from ``a``."""
            take = better(_expr(a[0]), _expr(b[0]))
            return (hl.select(take, b[0], a[0]), hl.select(take, b[1], a[1]))

        # Every chunk but the last is full, and only those are summarised.
        j = hl.RDom([hl.Range(1, CHUNK - 1)], "j")
        summary = hl.Func("summary")
        summary[c] = (x[c * CHUNK], c * CHUNK)
        summary[c] = pick(summary[c], (x[c * CHUNK + j], c * CHUNK + j))
        q = hl.RDom([hl.Range(1, (n - 1) // CHUNK)], "q")
        carry = hl.Func("carry")
        carry[c] = (x[0], hl.i32(0))
        carry[q.x] = pick(carry[q.x - 1], summary[q.x - 1])
        def at(cc, jj):
            """Element jj of chunk cc and its index; past the row's end, the last element (read,
            never written out)."""
            pos = hl.min(cc * CHUNK + jj, n - 1)
            return (x[pos], pos)

        # run[j, c]: chunk c scanned from its carry.
        k = hl.RDom([hl.Range(1, CHUNK - 1)], "k")
        run = hl.Func("run")
        run[r, c] = (hl.undef(t), hl.undef(hl.Int(32)))
        run[0, c] = pick(carry[c], at(c, 0))
        run[k, c] = pick(run[k - 1, c], at(c, k))
        values, indices = hl.Func("values"), hl.Func("indices")
        indices[r] = hl.cast(hl.Int(64), run[r % CHUNK, r // CHUNK][1])
        idx = hl.unsafe_promise_clamped(hl.cast(hl.Int(32), indices[r]), 0, n - 1)
        values[r] = x[idx]
        return values, indices

    name = f"cum{'max' if largest else 'min'}_long"
    algorithm.__name__ = name
    ref = _cumext_ref(largest)
    return op(name=name, category="scan", inputs={"x": "R"},
              outputs={"values": "R", "indices": "R"}, dtypes=_FLOATS + ["int32", "int64"],
              reference=lambda x: ref(x, 0), register=False,
              example={"R": 3 * CHUNK + 5}, doc=f"``{name[:6]}`` of one long row.")(algorithm)


def _lse_long(x, *, dims):
    """logcumsumexp of one row [R] by chunks of CHUNK, as cummax's chunked form: each chunk's
    running (m, s), their carries joined chunk by chunk, and every chunk scanned again from its
    carry. Each element's sum then holds at most one chunk's terms plus one carry, so a long row
    loses less to rounding than the serial scan (whose float32 sum stops growing near 2**24
    terms): 64M standard normal float32, largest error 0.32 serial, torch's 1e-6."""
    t, n = x.type(), dims.R
    c, r = hl.Var("c"), hl.Var("r")
    j = hl.RDom([hl.Range(1, CHUNK - 1)], "j")
    summary = hl.Func("summary")
    summary[c] = (x[c * CHUNK], _ew._k(x[0], 1.0))
    summary[c] = _lse_step(summary[c], x[c * CHUNK + j])[:2]
    q = hl.RDom([hl.Range(1, (n - 1) // CHUNK)], "q")
    carry = hl.Func("carry")
    carry[c] = (_ew._k(x[0], float("-inf")), _ew._k(x[0], 0.0))
    carry[q.x] = _lse_join(carry[q.x - 1], summary[q.x - 1])
    # run[j, c]: chunk c scanned from its carry; past the row's end it repeats the last element
    # (read, never written out).
    k = hl.RDom([hl.Range(1, CHUNK - 1)], "k")
    run = hl.Func("run")
    run[r, c] = (hl.undef(t), hl.undef(t), hl.undef(t))
    first = _lse_join(carry[c], (x[hl.min(c * CHUNK, n - 1)], _ew._k(x[0], 1.0)))
    run[0, c] = (first[0], first[1], _lse_result(*first))
    run[k, c] = _lse_step(run[k - 1, c], x[hl.min(c * CHUNK + k, n - 1)])
    out = hl.Func("out")
    out[r] = run[r % CHUNK, r // CHUNK][2]
    return out


_LONG = {"cummax": _cumext_long(True), "cummin": _cumext_long(False),
         "logcumsumexp": op(name="logcumsumexp_long", category="scan", inputs={"x": "R"},
                            output="R", dtypes=_FLOATS, register=False,
                            reference=lambda x: _np_logcumsumexp(x, 0),
                            example={"R": 3 * CHUNK + 5},
                            doc="``logcumsumexp`` of one long row.")(_lse_long)}
