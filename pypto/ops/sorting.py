"""Sorting: sort, argsort, topk and median, by rank counting.

Each element's place in its sorted row is counted directly: rank(j) = the number of elements
that sort before element j (a smaller key, or an equal key at a smaller index). The ranks are a
permutation, so the sorted row is one scatter (out[rank(j)] = x[j]) and every output is exact.
Counting is O(R**2) comparisons per row of R elements, vectorized over j: it suits the short
rows of models (top-k over classes or anchors, medians of small windows; up to a few thousand
elements per row); for long rows NumPy's O(R log R) sort wins, and these ops say so in their
docs rather than hide it.

Order: ascending with NaN last, like NumPy; -0.0 and 0.0 are equal; ties keep their input order
(a stable sort). ``descending=True`` puts NaN first (it is largest, as in torch) and also keeps
ties in input order. ``topk(x, k, dim=-1, largest=True)`` returns torch's ``(values, indices)``,
sorted, ties in input order. ``median`` is NumPy's: the mean of the two middle elements of an
even row, NaN when the row holds a NaN (torch's ``median`` returns the lower one instead).

Kernel form: [O, R, I] (the axes before and after the sorted axis merged, no transpose).
"""

from __future__ import annotations

import halide as hl
import numpy as np

from ..errors import ParamError, ShapeError
from ..runtime import as_array
from . import elementwise as _ew
from ._op import Param, op
from .layout import _axis, _int, _oai
from .reduce import _key

_FLOATS = ["float32", "float64"]
_NUM = _FLOATS + ["int32", "int64"]
_EX = {"O": 16, "R": 64, "I": 1}
_DESC = Param("descending", bool, False, doc="largest first (NaN first)")


def _rank(x, dims, descending: bool):
    """rank[r, i, o]: where element r of row (o, i) lands in the sorted row."""
    r, i, o = hl.Var("r"), hl.Var("i"), hl.Var("o")
    k = hl.RDom([hl.Range(0, dims.R)], "k")
    kj = _key(x[i, r, o], True, zero_equal=True)
    kk = _key(x[i, k, o], True, zero_equal=True)
    first = (kk > kj) if descending else (kk < kj)
    before = first | ((kk == kj) & (k < r))
    rank = hl.Func("rank")
    rank[r, i, o] = 0
    rank[r, i, o] += hl.select(before, 1, 0)
    return rank


def _perm(x, dims, descending: bool):
    """perm(i, t, o): the input index of the t-th element of the sorted row."""
    rank = _rank(x, dims, descending)
    i, t, o = hl.Var("i"), hl.Var("t"), hl.Var("o")
    j = hl.RDom([hl.Range(0, dims.R)], "j")
    perm = hl.Func("perm")
    perm[i, t, o] = 0
    perm[i, hl.clamp(rank[j, i, o], 0, dims.R - 1), o] = j.x
    return lambda ii, tt, oo: hl.clamp(perm[ii, tt, oo], 0, dims.R - 1)   # bounded for Halide


def _call(the_op, x, axis, **params):
    name = the_op.name
    x = as_array(x, name, "x")
    if axis is None:
        x, axis = x.reshape(-1), 0
    if x.ndim == 0:
        raise ShapeError(f"{name}: x must have at least one axis")
    ax = _axis(name, axis, x.ndim)
    return x, ax, the_op.kernel(_oai(x, ax), **params)


def _np_sort_idx(x, axis, descending):
    x = np.asarray(x)
    if not descending:
        return np.argsort(x, axis=axis, kind="stable")
    # Largest first, NaN first, ties in input order: sort the negated keys stably.
    key = np.where(np.isnan(x), -np.inf, -x.astype(np.float64)) if x.dtype.kind == "f" else \
        -x.astype(np.int64)
    if x.dtype.kind == "f":
        nan = np.isnan(x)
        order = np.argsort(np.where(nan, 0, key), axis=axis, kind="stable")
        nan_sorted = np.take_along_axis(nan, order, axis)
        return np.take_along_axis(order, np.argsort(~nan_sorted, axis=axis, kind="stable"), axis)
    return np.argsort(key, axis=axis, kind="stable")


def _sort_ref(x, axis=-1, descending=False):
    return np.take_along_axis(np.asarray(x), _np_sort_idx(x, axis, descending), axis)


def _argsort_ref(x, axis=-1, descending=False):
    return _np_sort_idx(x, axis, descending).astype(np.int64)


def _sort_frontend(x, axis=-1, descending=False):
    """The elements of ``x`` sorted along ``axis`` (stable; NaN last, or first when
    ``descending``). O(n**2) per row of n elements: see the module docs."""
    x, ax, out = _call(sort, x, axis, descending=descending)
    return out.reshape(x.shape)


def _argsort_frontend(x, axis=-1, descending=False):
    """The indices (int64) that sort ``x`` along ``axis`` (stable, like
    ``np.argsort(kind="stable")``; NaN last, or first when ``descending``)."""
    x, ax, out = _call(argsort, x, axis, descending=descending)
    return out.reshape(x.shape)


@op(category="sorting", inputs={"x": "O R I"}, output="O R I", dtypes=_NUM, params=[_DESC],
    reference=_sort_ref, kernel_reference=lambda x, descending=False: _sort_ref(
        x, 1, descending), frontend=_sort_frontend, example=_EX)
def sort(x, *, descending, dims):
    """Each row of [O, R, I] (along R) sorted by rank counting."""
    perm = _perm(x, dims, descending)
    i, r, o = hl.Var("i"), hl.Var("r"), hl.Var("o")
    out = hl.Func("out")
    out[i, r, o] = x[i, perm(i, r, o), o]
    return out


@op(category="sorting", inputs={"x": "O R I"}, output="O R I", dtypes=_NUM, params=[_DESC],
    reference=_argsort_ref, kernel_reference=lambda x, descending=False: _argsort_ref(
        x, 1, descending), frontend=_argsort_frontend, example=_EX)
def argsort(x, *, descending, dims):
    """The sorting permutation of each row of [O, R, I] (along R), int64."""
    perm = _perm(x, dims, descending)
    i, r, o = hl.Var("i"), hl.Var("r"), hl.Var("o")
    out = hl.Func("out")
    out[i, r, o] = hl.cast(hl.Int(64), perm(i, r, o))
    return out


# -- topk ----------------------------------------------------------------------------------------

def _topk_ref(x, k, dim=-1, largest=True):
    idx = np.take(_np_sort_idx(x, dim, largest), np.arange(k), axis=dim)
    return np.take_along_axis(np.asarray(x), idx, dim), idx.astype(np.int64)


def _topk_frontend(x, k, dim=-1, largest=True):
    """The ``k`` largest (or smallest) elements along ``dim`` and their indices, like
    ``torch.topk`` (sorted; ties in input order; NaN counts as largest)."""
    xa = as_array(x, "topk", "x")
    if xa.ndim == 0:
        raise ShapeError("topk: x must have at least one axis")
    ax = _axis("topk", dim, xa.ndim)
    k = _int("topk", "k", k, low=1)
    if k > xa.shape[ax]:
        raise ParamError(f"topk: k={k} is larger than the axis ({xa.shape[ax]})")
    vals, idx = topk.kernel(_oai(xa, ax), k=k, largest=bool(largest))
    shape = xa.shape[:ax] + (k,) + xa.shape[ax + 1:]
    return vals.reshape(shape), idx.reshape(shape)


def _topk_validate(d, p):
    if p["k"] > d["R"]:
        raise ParamError(f"topk: k={p['k']} is larger than the axis ({d['R']})")


@op(category="sorting", inputs={"x": "O R I"}, outputs={"values": "O K I", "indices": "O K I"},
    dtypes=_NUM,
    params=[Param("k", int, 4, low=1, high=1 << 30, doc="how many"),
            Param("largest", bool, True, doc="largest (else smallest) first")],
    reference=_topk_ref, kernel_reference=lambda x, k=4, largest=True: _topk_ref(
        x, k, 1, largest), frontend=_topk_frontend, validate=_topk_validate,
    derive=lambda d, p: {"K": p["k"]}, example=_EX)
def topk(x, *, k, largest, dims):
    """The first k of each row of [O, R, I] sorted descending (largest) or ascending."""
    perm = _perm(x, dims, largest)
    i, kk, o = hl.Var("i"), hl.Var("k"), hl.Var("o")
    values, indices = hl.Func("values"), hl.Func("indices")
    indices[i, kk, o] = hl.cast(hl.Int(64), perm(i, kk, o))
    values[i, kk, o] = x[i, perm(i, kk, o), o]
    return values, indices


# -- median --------------------------------------------------------------------------------------

def _median_ref(x, axis=None, keepdims=False):
    with np.errstate(all="ignore"):
        return np.asarray(np.median(x, axis=axis, keepdims=keepdims))[()]


def _median_frontend(x, axis=None, keepdims=False):
    """``np.median`` along one ``axis`` (None: all elements): the middle element, or the mean
    of the two middle ones; NaN if the reduced elements hold a NaN."""
    xa = as_array(x, "median", "x")
    if axis is None:
        out = median.kernel(xa.reshape(1, -1, 1))
        return out.reshape((1,) * xa.ndim if keepdims else ())[()]
    ax = _axis("median", axis, xa.ndim)
    out = median.kernel(_oai(xa, ax))
    if keepdims:
        return out.reshape(xa.shape[:ax] + (1,) + xa.shape[ax + 1:])
    return out.reshape(xa.shape[:ax] + xa.shape[ax + 1:])


@op(category="sorting", inputs={"x": "O R I"}, output="O I", dtypes=_FLOATS,
    reference=_median_ref, kernel_reference=lambda x: _median_ref(x, axis=1),
    frontend=_median_frontend, example=_EX)
def median(x, *, dims):
    """The median of each row of [O, R, I] along R from the ranks of its elements."""
    perm = _perm(x, dims, False)
    i, o = hl.Var("i"), hl.Var("o")
    lo = x[i, perm(i, (dims.R - 1) / 2, o), o]
    hi = x[i, perm(i, dims.R / 2, o), o]
    last = x[i, perm(i, dims.R - 1, o), o]      # a NaN sorts last
    mid = (lo + hi) / hl.cast(x.type(), 2)
    out = hl.Func("out")
    out[i, o] = hl.select(_ew._is_nan(last), last, mid)
    return out
