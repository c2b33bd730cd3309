"""Sorting: sort, argsort, topk and median.

``sort`` and ``argsort`` run a bitonic sorting network on each row padded to a
power of two n (the ``width`` parameter; padding sorts last): log2(n) (log2(n) + 1) / 2 stages of
compare-exchanges, O(n log**2 n) per row against NumPy's O(n log n), but branch-free and
vectorized across rows (each stage reads its partner at the same index in every row). Rows may
hold up to 8192 elements; a network is compiled per width (well under a second for a few dozen
elements, tens of seconds near the limit).

``topk`` selects instead: k passes, pass t taking the best element that ranks after pass t - 1,
O(k n) per row, vectorized across rows: fast for the small k of classifiers and detectors, and
as slow as O(n**2) when k approaches n (sort then slice in that case).

Order: elements are compared as (key, index) pairs, all distinct, so every result is the stable
one. Ascending puts NaN last, like NumPy; -0.0 and 0.0 are equal. ``descending=True`` puts NaN
first (it is largest, as in torch) and keeps ties in input order. ``topk(x, k, dim=-1,
largest=True)`` returns torch's ``(values, indices)``, sorted, ties in input order. ``median``
is NumPy's: the mean of the two middle elements of an even row, NaN when the row holds a NaN
(torch's ``median`` returns the lower one instead); it selects instead of sorting (counting
passes over the row's keys, one per bit), within the same row-length limit.

Kernel form: [O, R, I] (the axes before and after the sorted axis merged, no transpose).
"""

from __future__ import annotations

import math

import halide as hl
import numpy as np

from ..errors import ParamError, ShapeError
from ..runtime import as_array
from . import elementwise as _ew
from ._op import Param, op
from .layout import _axis, _int, _oai
from .reduce import _axes, _key, _unkey

_FLOATS = ["float32", "float64"]
_NUM = _FLOATS + ["int32", "int64"]
_EX = {"O": 16, "R": 64, "I": 1}
_DESC = Param("descending", bool, False, doc="largest first (NaN first)")


def _keys(x, i, r, o, descending: bool):
    """The sort key of x[i, r, o]: an integer ordered like the value, NaN largest (-0.0 equal
    to 0.0); complemented for a descending sort, which also puts NaN first."""
    k = _key(x[i, r, o], True, zero_equal=True)
    return ~k if descending else k


def _bitonic(x, dims, descending: bool, n: int):
    """(key, index) of the t-th element of each sorted row, as a Func ``sorted_kv[o, i, t]``.

    A bitonic network over the row padded to a power of two n: log2(n) (log2(n) + 1) / 2 stages
    of compare-exchanges, each stage a Func. Elements are compared as (key, index) pairs, all
    distinct, so the order is the stable one; padding (the largest key, indices >= R) sorts last.
    The row index o comes first in every stage so that vectors run across rows.
    """
    o, i, t = hl.Var("o"), hl.Var("i"), hl.Var("t")
    kt = _key(x[0, 0, 0], True).type()
    first = hl.Func("stage0")
    real = t < dims.R
    src = hl.clamp(t, 0, dims.R - 1)
    first[o, i, t] = (hl.select(real, _keys(x, i, src, o, descending), kt.max()), t)
    _materialized(first, o, i, 0)
    cur, s = first, 0
    p = 1
    while p < n:
        q = p
        while q >= 1:
            s += 1
            st = hl.Func(f"stage{s}")
            # t ^ q, written without the xor: Halide's bounds inference cannot bound an xor,
            # and once the clamp is simplified away (t ^ q provably in range) a consumer that
            # reads this network at a computed index (a reshape's t % R) left it unbounded.
            partner = hl.clamp(hl.select((t & q) == 0, t + q, t - q), 0, n - 1)
            ka, ia = cur[o, i, t][0], cur[o, i, t][1]
            kb, ib = cur[o, i, partner][0], cur[o, i, partner][1]
            a_first = (ka < kb) | ((ka == kb) & (ia < ib))
            up = (t & (2 * p)) == 0             # this block ascends
            keep_a = a_first == ((t < partner) == up)
            st[o, i, t] = (hl.select(keep_a, ka, kb), hl.select(keep_a, ia, ib))
            _materialized(st, o, i, s)
            cur = st
            q //= 2
        p *= 2
    return cur


def _materialized(st, o, i, s):
    """Gives stage ``st`` a no-op update (it rewrites one element with itself). A Func with an
    update is never inlined, by Halide or by any default schedule: inlined, each stage would
    copy its producer twice and the network would grow as 2**stages."""
    z = hl.RDom([hl.Range(0, 1)], f"z{s}")
    st[o, i, z.x] = (st[o, i, z.x][0], st[o, i, z.x][1])


#: Longest row the sorting network is built for (2**13: 91 stages; building one that size takes
#: tens of seconds, a 64-wide one well under one).
MAX_WIDTH = 1 << 13
_WIDTH = Param("width", int, 64, low=1, high=MAX_WIDTH,
               doc="the network's size: a power of two >= the row length")


def _width(n: int) -> int:
    w = 1
    while w < n:
        w *= 2
    if w > MAX_WIDTH:
        raise ParamError(f"sorting: rows of {n} elements are longer than the sorting network "
                         f"allows ({MAX_WIDTH}); sort shorter rows")
    return w


def _width_validate(d, p):
    w = p["width"]
    if w & (w - 1) or w < d["R"]:
        raise ParamError(f"sorting: 'width' must be a power of two >= the row length "
                         f"{d['R']}, got {w}")


def _call(the_op, x, axis, **params):
    name = the_op.name
    x = as_array(x, name, "x")
    if axis is None:
        x, axis = x.reshape(-1), 0
    if x.ndim == 0:
        raise ShapeError(f"{name}: x must have at least one axis")
    ax = _axis(name, axis, x.ndim)
    return x, ax, the_op.kernel(_oai(x, ax), width=_width(x.shape[ax]), **params)


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
    ``descending``); rows of up to 8192 elements (see the module docs)."""
    x, ax, out = _call(sort, x, axis, descending=descending)
    return out.reshape(x.shape)


def _argsort_frontend(x, axis=-1, descending=False):
    """The indices (int64) that sort ``x`` along ``axis`` (stable, like
    ``np.argsort(kind="stable")``; NaN last, or first when ``descending``)."""
    x, ax, out = _call(argsort, x, axis, descending=descending)
    return out.reshape(x.shape)


@op(category="sorting", inputs={"x": "O R I"}, output="O R I", dtypes=_NUM,
    params=[_DESC, _WIDTH], reference=_sort_ref,
    kernel_reference=lambda x, descending=False, width=64: _sort_ref(x, 1, descending),
    frontend=_sort_frontend, validate=_width_validate, example=_EX)
def sort(x, *, descending, width, dims):
    """Each row of [O, R, I] (along R) sorted by a bitonic network."""
    net = _bitonic(x, dims, descending, width)
    i, r, o = hl.Var("i"), hl.Var("r"), hl.Var("o")
    out = hl.Func("out")
    out[i, r, o] = x[i, hl.clamp(net[o, i, r][1], 0, dims.R - 1), o]
    return out


@op(category="sorting", inputs={"x": "O R I"}, output="O R I", dtypes=_NUM,
    params=[_DESC, _WIDTH], reference=_argsort_ref,
    kernel_reference=lambda x, descending=False, width=64: _argsort_ref(x, 1, descending),
    frontend=_argsort_frontend, validate=_width_validate, example=_EX)
def argsort(x, *, descending, width, dims):
    """The sorting permutation of each row of [O, R, I] (along R), int64."""
    net = _bitonic(x, dims, descending, width)
    i, r, o = hl.Var("i"), hl.Var("r"), hl.Var("o")
    out = hl.Func("out")
    out[i, r, o] = hl.cast(hl.Int(64), net[o, i, r][1])
    return out


# -- topk ----------------------------------------------------------------------------------------

def _topk_ref(x, k, dim=-1, largest=True, sorted=True):  # noqa: A002 - torch's name
    idx = np.take(_np_sort_idx(x, dim, largest), np.arange(k), axis=dim)
    return np.take_along_axis(np.asarray(x), idx, dim), idx.astype(np.int64)


def _topk_frontend(x, k, dim=-1, largest=True, sorted=True):  # noqa: A002 - torch's name
    """The ``k`` largest (or smallest) elements along ``dim`` and their indices, like
    ``torch.topk`` (sorted; ties in input order; NaN counts as largest). ``sorted=False``
    allows any order, as in torch; the result is sorted all the same."""
    if not isinstance(sorted, (bool, np.bool_)):
        raise ParamError(f"topk: 'sorted' must be a bool, got {sorted!r}")
    xa = as_array(x, "topk", "x")
    if xa.ndim == 0:
        raise ShapeError("topk: x must have at least one axis")
    ax = _axis("topk", dim, xa.ndim)
    k = _int("topk", "k", k, low=0 if type(x) is np.ndarray else 1)
    if k == 0:              # nothing to pick (torch.topk): empty values and indices
        if xa.dtype.name not in {s[0] for s in topk.dtypes}:
            topk.kernel(xa.reshape(1, -1, 1), k=1)        # its DtypeError
        shape = xa.shape[:ax] + (0,) + xa.shape[ax + 1:]
        return np.empty(shape, xa.dtype), np.empty(shape, np.int64)
    if k > xa.shape[ax]:
        raise ParamError(f"topk: k={k} is larger than the axis ({xa.shape[ax]})")
    vals, idx = topk.kernel(_oai(xa, ax), k=k, largest=bool(largest))    # (no network)
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
    """k passes of selection: pick t is the best (key, index) pair that ranks after pick t - 1,
    O(k R) per row; vectors run across rows."""
    o, i, kk = hl.Var("o"), hl.Var("i"), hl.Var("k")
    kt = _key(x[0, 0, 0], True).type()
    r = hl.RDom([hl.Range(0, dims.R), hl.Range(0, k)], "r")
    j, t = r.x, r.y
    kj = _keys(x, i, j, o, largest)     # complemented when largest: smaller is always better
    pick = hl.Func("pick")
    pick[o, i, kk] = (kt.max(), dims.R)
    prev_k, prev_i = pick[o, i, hl.max(t - 1, 0)][0], pick[o, i, hl.max(t - 1, 0)][1]
    cur_k, cur_i = pick[o, i, t][0], pick[o, i, t][1]
    after_prev = (t == 0) | (kj > prev_k) | ((kj == prev_k) & (j > prev_i))
    better = (kj < cur_k) | ((kj == cur_k) & (j < cur_i))
    take = after_prev & better
    pick[o, i, t] = (hl.select(take, kj, cur_k), hl.select(take, j, cur_i))
    values, indices = hl.Func("values"), hl.Func("indices")
    at = hl.clamp(pick[o, i, kk][1], 0, dims.R - 1)
    indices[i, kk, o] = hl.cast(hl.Int(64), at)
    values[i, kk, o] = x[i, at, o]
    return values, indices


# -- median --------------------------------------------------------------------------------------

def _median_ref(x, axis=None, keepdims=False):
    with np.errstate(all="ignore"):
        return np.asarray(np.median(x, axis=axis, keepdims=keepdims))[()]


def _median_frontend(x, axis=None, keepdims=False):
    """``np.median`` over ``axis`` (None: all elements; an int or a tuple of ints): the middle
    element, or the mean of the two middle ones; NaN if the reduced elements hold a NaN. A 0-d
    array takes axis 0 or -1, as torch's median does (see ``reduce``)."""
    xa = as_array(x, "median", "x")
    if axis is None:
        out = median.kernel(xa.reshape(1, -1, 1), width=_width(xa.size))
        return out.reshape((1,) * xa.ndim if keepdims else ())[()]
    axes = _axes("median", axis, xa.ndim)
    kept = [i for i in range(xa.ndim) if i not in axes]
    if axes and axes[-1] - axes[0] == len(axes) - 1:
        # One run of adjacent axes (one axis, most often): [O, R, I] around it, a reshape.
        a, b = axes[0], axes[-1] + 1
        s = xa.shape
        rows = xa.reshape(math.prod(s[:a]), math.prod(s[a:b]), math.prod(s[b:]))
    else:       # the reduced axes moved last and merged into R: [O, R, 1]
        moved = xa.transpose(kept + list(axes)) if kept + list(axes) != list(range(xa.ndim)) \
            else xa
        rows = moved.reshape(math.prod(xa.shape[i] for i in kept), -1, 1)
    out = median.kernel(rows, width=_width(rows.shape[1]))
    if keepdims:
        return out.reshape(tuple(1 if i in axes else n for i, n in enumerate(xa.shape)))
    return out.reshape(tuple(xa.shape[i] for i in kept))


def _select_bits(keys, dims, k, nbits: int):
    """The ``k``-th smallest (0-based) of the signed integer ``keys[o, i, r]`` over ``r``, found
    bit by bit from the top: one counting pass over the row per bit. Returns the Func of the
    last candidate and the Func of the last count (see :func:`median`).

    In the order of the unsigned ``key ^ sign``, the answer is the largest ``u`` with fewer
    than ``k + 1`` keys below it: ``cand{b}`` is the answer so far with bit ``b`` set, and
    ``cnt{b}`` counts the keys below it; bit ``b`` stays when ``cnt{b} <= k``. Each candidate is
    a Func of its own, read once by the next one, so nothing grows when Funcs are inlined."""
    o, i = hl.Var("o"), hl.Var("i")
    r = hl.RDom([hl.Range(0, dims.R)], "r")
    it, ut = hl.Int(nbits), hl.UInt(nbits)
    sign = hl.cast(ut, 1) << (nbits - 1)
    cand = cnt = None
    for b in range(nbits - 1, -1, -1):
        bit = hl.cast(ut, 1) << b
        nxt = hl.Func(f"cand{b}")
        if cand is None:
            nxt[o, i] = bit
        else:
            prev = hl.cast(ut, 1) << (b + 1)
            nxt[o, i] = (cand[o, i] & ~hl.select(cnt[o, i] > k, prev, hl.cast(ut, 0))) | bit
        count = hl.Func(f"cnt{b}")
        count[o, i] = 0
        below = keys[o, i, r] < hl.reinterpret(it, nxt[o, i] ^ sign)
        count[o, i] += hl.select(below, 1, 0)
        cand, cnt = nxt, count
    return cand, cnt


@op(category="sorting", inputs={"x": "O R I"}, output="O I", dtypes=_FLOATS, params=[_WIDTH],
    reference=_median_ref, kernel_reference=lambda x, width=64: _median_ref(x, axis=1),
    frontend=_median_frontend, validate=_width_validate, example=_EX)
def median(x, *, width, dims):
    """The median of each row of [O, R, I] along R, selected on ordered integer keys (the
    sorting network's ``width`` is not used: it stays a parameter for the gradient rule, which
    sorts).

    The lower middle (the ``(R - 1) // 2``-th smallest) is found bit by bit
    (:func:`_select_bits`: 32 or 64 counting passes over the row, each a vector compare and
    subtract per element), the upper middle of an even row by one more pass (the count of keys
    up to the lower one and the smallest key above it), which also finds whether the row holds a
    NaN. O(R * bits) per row, against the network's O(R log**2 R) compare-exchanges of
    (key, index) pairs: float32 [4096, 1024] took ~130 ms sorted, ~10-18 selected, NumPy ~65
    (one thread, under load); float64 ~78, NumPy ~74."""
    t = x.type()
    nbits = t.bits()
    it, ut = hl.Int(nbits), hl.UInt(nbits)
    o, i = hl.Var("o"), hl.Var("i")
    keys = hl.Func("keys")
    r_ = hl.Var("r")
    keys[o, i, r_] = _key(x[i, r_, o], True)          # NaN largest; -0.0 below 0.0
    k = (dims.R - 1) / 2
    cand, cnt = _select_bits(keys, dims, k, nbits)
    sign = hl.cast(ut, 1) << (nbits - 1)
    lo_u = cand[o, i] & ~hl.select(cnt[o, i] > k, hl.cast(ut, 1), hl.cast(ut, 0))
    low = hl.Func("low")
    low[o, i] = hl.reinterpret(it, lo_u ^ sign)
    r = hl.RDom([hl.Range(0, dims.R)], "r")
    kr = keys[o, i, r]
    rest = hl.Func("rest")                 # (keys <= low, smallest key above low, largest key)
    rest[o, i] = (0, it.max(), it.min())
    rest[o, i] = (rest[o, i][0] + hl.select(kr <= low[o, i], 1, 0),
                  hl.min(rest[o, i][1], hl.select(kr > low[o, i], kr, it.max())),
                  hl.max(rest[o, i][2], kr))
    lo = _unkey(low[o, i], t)
    even = dims.R % 2 == 0
    high_key = hl.select(rest[o, i][0] >= k + 2, low[o, i], rest[o, i][1])
    mid = hl.select(even, (lo + _unkey(high_key, t)) / hl.cast(t, 2), lo)
    out = hl.Func("out")
    out[i, o] = hl.select(rest[o, i][2] == it.max(), _ew._nan(x[0, 0, 0]), mid)
    return out
