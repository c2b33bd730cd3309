"""Reductions: sum, mean, prod, max, min, argmax, argmin, var, std and logsumexp.

The public functions follow NumPy: ``sum(x, axis=None, keepdims=False)`` where ``axis`` is None
(every axis), an int (negative counts from the end) or a tuple of distinct ints, and ``keepdims``
keeps each reduced axis as size 1. ``argmax``/``argmin`` take one int axis or None (None indexes
the flattened array, in C order). A 0-d array takes axis 0 or -1 and is its own reduction (as
NumPy's ``sum``, ``prod``, ``max``, ``min``, ``argmax`` and ``argmin`` and all of torch's; NumPy's
``mean``, ``var`` and ``std`` refuse the axis).

Each op has one kernel on a 2-D array [O, R] that reduces every row over R, giving [O]. The
public call moves the reduced axes last and flattens them into R and the kept ones into O
(``axis=None`` makes O = 1); a call on a 2-D array with ``axis=-1`` is exactly a kernel call.

Conventions:

- float32 sums (``sum``, ``mean``, ``var``, ``std``, ``logsumexp``) are accumulated in float64 and
  rounded once, so they stay accurate over any number of elements; ``sum``/``mean`` (and
  ``nansum``) first add ``GROUP`` elements in float32, one from each of ``GROUP`` runs of a
  block of the row (:func:`_float_sum`), so a float32 rounding covers at most ``GROUP``
  elements. ``prod`` multiplies in the input type (float32 overflows like NumPy's float32
  product).
- int32 and int64 input: ``sum`` and ``prod`` give int64 (wrapping on overflow, as NumPy's do)
  and ``max``/``min`` the input's dtype (NumPy's result dtypes on 64-bit Linux);
  ``argmax``/``argmin`` always give int64.
- NaN: ``max``/``min``/``logsumexp`` of a row holding a NaN are NaN; ``argmax``/``argmin`` return
  the index of the first NaN; otherwise the first index of the extreme value (-0.0 equals 0.0).
- ``var``/``std`` use two passes (the mean, then the squared deviations) and divide by
  ``max(N - ddof, 0)`` like NumPy.
- ``logsumexp`` is ``scipy.special.logsumexp``: ``m + log(sum(exp(x - m)))`` with ``m`` the row
  maximum; a row whose maximum is +-inf or NaN gives that maximum.
"""

from __future__ import annotations

import math
import operator

import halide as hl
import numpy as np

from ..errors import ParamError
from .. import runtime as _runtime
from ..runtime import as_array
from ..schedule.templates.reduce import BLOCK, CHUNK, GROUP
from . import elementwise as _ew
from ._consts import lit64
from ._op import Param, op
from .elementwise import kernel_exp

_FLOATS = ["float32", "float64"]
_WITH_INT = ["float32", "float64", "int32", "int64"]
_EXAMPLE = {"O": 16, "R": 100}


# -- axis handling -------------------------------------------------------------------------------

def _axes(name: str, axis, ndim: int, *, single: bool = False) -> tuple[int, ...]:
    """The reduced axes as sorted non-negative ints; ParamError for a bad or repeated axis.

    A 0-d array takes axis 0 or -1 (alone or in a tuple), which reduce nothing: NumPy's sum,
    prod, max, min, argmax and argmin take them, and torch's reductions all do."""
    if axis is None:
        return tuple(range(ndim))
    if single and isinstance(axis, (tuple, list)):
        raise ParamError(f"{name}: parameter 'axis' must be None or a single int, got {axis!r}")
    items = tuple(axis) if isinstance(axis, (tuple, list)) else (axis,)
    n = max(ndim, 1)
    out = []
    for a in items:
        if isinstance(a, (bool, np.bool_)) or not hasattr(a, "__index__"):
            raise ParamError(f"{name}: parameter 'axis' must be None, an int or a tuple of ints, "
                             f"got {axis!r}")
        try:
            a = operator.index(a)
        except TypeError:       # an array of several numbers has __index__ but no single value
            raise ParamError(f"{name}: parameter 'axis' must be None, an int or a tuple of ints, "
                             f"got {axis!r}") from None
        if not -n <= a < n:
            raise ParamError(f"{name}: parameter 'axis' must be in [{-n}, {n - 1}] for an "
                             f"input of rank {ndim}, got {a}")
        out.append(a % n)
    if len(set(out)) != len(out):
        raise ParamError(f"{name}: parameter 'axis' repeats an axis: {axis!r} (rank {ndim})")
    return tuple(sorted(out)) if ndim else ()


def _reduce_call(the_op, x, axis, keepdims, single=False, **params):
    """Runs ``the_op``'s [O, R] kernel for a NumPy-style reduction over ``axis``."""
    name = the_op.name
    x = as_array(x, name, "x")
    if not isinstance(keepdims, (bool, np.bool_)):
        raise ParamError(f"{name}: parameter 'keepdims' expects a bool, got {keepdims!r}")
    axes = _axes(name, axis, x.ndim, single=single)
    kept = [i for i in range(x.ndim) if i not in axes]
    # Python ints: np.prod of a short list costs microseconds, a small call's whole budget.
    o = math.prod([x.shape[i] for i in kept])
    r = math.prod([x.shape[i] for i in axes])
    order = kept + list(axes)
    # argmax/argmin of a 64-bit input keep two reductions per row (see _arg_extreme): the
    # column schedule wants one.
    one_value = not single or x.dtype.itemsize == 4
    if (one_value and axes == tuple(range(len(axes))) and kept and o >= 8 and r >= 64
            and o * r >= _LEADING_MIN and _runtime._leading_reduce is not None
            and x.flags.c_contiguous and not _runtime.traced((x,))):
        # Leading axes (``x.sum(axis=0)``): the [O, R] kernel would read a transposed view
        # across rows (a column sum of 4096x1024 took 124 ms, NumPy 2); a one-op program reads
        # the rows in place instead.
        res = _runtime._leading_reduce(the_op, x.reshape(r, o), params)
    else:
        moved = np.transpose(x, order) if x.ndim and order != list(range(x.ndim)) else x
        flat = moved.reshape(o, r)
        res = (_arg_blocks(the_op, flat) if single and x.dtype.itemsize == 8
               else the_op.kernel(flat, **params))
    if keepdims:
        shape = tuple(1 if i in axes else n for i, n in enumerate(x.shape))
    else:
        shape = tuple(x.shape[i] for i in kept)
    return res.reshape(shape)[()]


#: Reductions over leading axes of at least this many elements run as one-op programs.
_LEADING_MIN = 1 << 15

#: argmax/argmin of one long row search blocks of this many elements in parallel.
_ARG_BLOCK = 1 << 14


def _arg_blocks(the_op, flat: np.ndarray) -> np.ndarray:
    """argmax/argmin of float64 [O, R]; one long row is cut into blocks searched as rows of their
    own (a 32-bit input's single reduction is split into parallel chunks by its schedule).

    Each block's answer is its first extreme element (its first NaN, if any); the answer for the
    row is the first extreme among those candidates, in block order, so it is the same index.
    """
    o, r = flat.shape
    if o != 1 or r < 8 * _ARG_BLOCK:
        return the_op.kernel(flat)
    row = flat[0]
    nb = r // _ARG_BLOCK
    idx = the_op.kernel(row[:nb * _ARG_BLOCK].reshape(nb, _ARG_BLOCK))
    cand = idx + np.arange(nb, dtype=np.int64) * _ARG_BLOCK
    if nb * _ARG_BLOCK < r:
        tail = the_op.kernel(row[nb * _ARG_BLOCK:].reshape(1, -1))
        cand = np.append(cand, tail + nb * _ARG_BLOCK)
    pick = the_op.kernel(row[cand].reshape(1, -1))[0]
    return cand[pick:pick + 1]


# -- helpers inside algorithms -------------------------------------------------------------------

def _sum_type(t: hl.Type) -> hl.Type:
    """The accumulator of a sum: float64 for floats, int64 for ints."""
    return hl.Float(64) if t.is_float() else hl.Int(64)


def _key(v, nan_high: bool, zero_equal: bool = False):
    """An integer ordered like the float ``v``; NaN is above every value when ``nan_high`` and
    below every value otherwise; -0.0 is below 0.0 unless ``zero_equal``. Integer ``v`` is its
    own key.

    Integer keys make NaN-aware extremes plain integer max/min reductions, which vectorize and
    which Halide can ``rfactor``; the NaN test is on the bits too, since Halide compiles float
    comparisons as if no operand were NaN."""
    t = v.type()
    if not t.is_float():
        return v
    nbits = t.bits()
    it = hl.Int(nbits)
    bits = hl.reinterpret(it, v)
    mask = hl.cast(it, (1 << (nbits - 1)) - 1)
    inf_bits = hl.cast(it, 0x7F800000 if nbits == 32 else 0x7FF0000000000000)
    magnitude = bits & mask
    # Negative floats order backwards as integers: flip their magnitude bits.
    key = bits ^ ((bits >> (nbits - 1)) & mask)
    if zero_equal:
        key = hl.select(magnitude == 0, hl.cast(it, 0), key)
    return hl.select(magnitude > inf_bits, it.max() if nan_high else it.min(), key)


def _unkey(key, t: hl.Type):
    """The value of type ``t`` whose key (see :func:`_key`) is ``key``."""
    if not isinstance(key, hl.Expr):
        key = hl.Expr(key)
    if not t.is_float():
        return key
    it = key.type()
    mask = hl.cast(it, (1 << (t.bits() - 1)) - 1)
    return hl.reinterpret(t, key ^ ((key >> (t.bits() - 1)) & mask))


def _rdom(dims):
    return hl.RDom([hl.Range(0, dims.R)], "k")


def _magnitude(v):
    """The bits of float ``v`` without its sign, as a non-negative signed integer (signed
    compares are single vector instructions): above infinity's exactly for a NaN."""
    return hl.reinterpret(hl.Int(v.type().bits()), v) & _magnitude_mask(v.type())


def _magnitude_mask(t: hl.Type):
    return hl.cast(hl.Int(t.bits()), (1 << (t.bits() - 1)) - 1)


def _inf_bits(t: hl.Type):
    return hl.cast(hl.Int(t.bits()), 0x7F800000 if t.bits() == 32 else 0x7FF0000000000000)


def _extreme(x, dims, name: str, largest: bool):
    """``name[o]``: the largest (or smallest) element of row ``o``.

    A float row reduces to a pair: the float extreme, and the largest magnitude bit pattern,
    which exceeds infinity's exactly when the row holds a NaN (:func:`_extreme_value` then gives
    NaN; the float extreme is meaningless, since Halide compiles float comparisons as if no
    operand were NaN). Both are plain vector max/min instructions that Halide can ``rfactor``;
    the sign of a zero extreme is unspecified, as in NumPy."""
    o, k = hl.Var("o"), _rdom(dims)
    t = x.type()
    f = hl.Func(name)
    v = x[k, o]
    pick = hl.max if largest else hl.min
    if not t.is_float():
        f[o] = t.min() if largest else t.max()
        f[o] = pick(f[o], v)
        return f
    inf = float("inf")
    f[o] = (hl.cast(t, -inf if largest else inf), hl.cast(hl.Int(t.bits()), 0))
    f[o] = (pick(f[o][0], v), hl.max(f[o][1], _magnitude(v)))
    return f


def _has_nan(best, o, t: hl.Type):
    """Whether the row reduced by :func:`_extreme` holds a NaN (False for integers)."""
    return best[o][1] > _inf_bits(t)


def _extreme_value(best, o, t: hl.Type):
    """The extreme found by :func:`_extreme`: NaN for a row holding a NaN."""
    if not t.is_float():
        return best[o]
    return hl.select(_has_nan(best, o, t), hl.cast(t, float("nan")), best[o][0])


def _extreme_key(x, dims, name: str, largest: bool, nan_wins: bool = True):
    """``name[o]``: the largest (or smallest) key (:func:`_key`) of row ``o``; a NaN wins (or,
    with ``nan_wins`` False, loses to every element).

    One integer max/min per row, where :func:`_extreme` has a pair: a single value is what the
    frontend's column schedule (a reduction over leading axes) can split into partial rows."""
    o, k = hl.Var("o"), _rdom(dims)
    v = x[k, o]
    t = v.type()
    f = hl.Func(name)
    if not t.is_float():
        f[o] = t.min() if largest else t.max()
        f[o] = hl.max(f[o], v) if largest else hl.min(f[o], v)
        return f
    it = hl.Int(t.bits())
    bits = hl.reinterpret(it, v)
    mask = hl.cast(it, (1 << (t.bits() - 1)) - 1)
    key = bits ^ ((bits >> (t.bits() - 1)) & mask)     # negative floats order backwards
    high = largest == nan_wins
    key = hl.select(_magnitude(v) > _inf_bits(t), it.max() if high else it.min(), key)
    f[o] = it.min() if largest else it.max()
    f[o] = hl.max(f[o], key) if largest else hl.min(f[o], key)
    return f


def _nan_shift(t: hl.Type) -> int:
    """The distance that carries float ``t``'s keys of one sign of NaN past the other end of the
    key range (see :func:`_nan_key`): ``2**mantissa_bits - 1``."""
    return (1 << (23 if t.bits() == 32 else 52)) - 1


def _nan_key(v, nan_high: bool):
    """An integer ordered like the float ``v`` in which every NaN is above (``nan_high``) or
    below every other value; integer ``v`` is its own key. -0.0 is below 0.0.

    The key of :func:`_key` before its NaN select: positive NaNs lie above +inf's key and
    negative NaNs below -inf's, so a wrapping addition of :func:`_nan_shift` to every key, which
    keeps the order of the others, carries the positive NaNs (just above the largest key)
    round to the bottom; a subtraction carries the negative ones round to the top. Five vector
    instructions an element with the max/min (the select took nine, a blend among them on the
    accumulator's chain: max of float32 128x2048 in cache took ~1.6x torch's time)."""
    t = v.type()
    if not t.is_float():
        return v
    nbits = t.bits()
    it, ut = hl.Int(nbits), hl.UInt(nbits)
    bits = hl.reinterpret(it, v)
    key = bits ^ ((bits >> (nbits - 1)) & _magnitude_mask(t))
    shift = hl.cast(ut, _nan_shift(t))
    moved = hl.reinterpret(ut, key)
    # Unsigned: Halide's integer arithmetic wraps for unsigned types only.
    moved = moved - shift if nan_high else moved + shift
    return hl.reinterpret(it, moved)


def _nan_unkey(key, t: hl.Type, nan_high: bool):
    """The value of type ``t`` whose :func:`_nan_key` is ``key`` (a NaN's own bits)."""
    if not isinstance(key, hl.Expr):
        key = hl.Expr(key)
    if not t.is_float():
        return key
    ut = hl.UInt(t.bits())
    shift = hl.cast(ut, _nan_shift(t))
    moved = hl.reinterpret(ut, key)
    return _unkey(hl.reinterpret(hl.Int(t.bits()), moved + shift if nan_high else moved - shift), t)


def _extreme_nan_key(x, dims, name: str, largest: bool):
    """``name[o]``: the largest (or smallest) :func:`_nan_key` of row ``o``, a NaN winning."""
    o, k = hl.Var("o"), _rdom(dims)
    key = _nan_key(x[k, o], nan_high=largest)
    it = key.type()
    f = hl.Func(name)
    f[o] = it.min() if largest else it.max()
    f[o] = hl.max(f[o], key) if largest else hl.min(f[o], key)
    return f


def _row_sum(name: str, value_of, dims, acc_t: hl.Type):
    """``name[o] = sum_k value_of(k, o)`` accumulated in ``acc_t``."""
    o, k = hl.Var("o"), _rdom(dims)
    f = hl.Func(name)
    f[o] = hl.cast(acc_t, 0)
    f[o] += hl.cast(acc_t, value_of(k, o))
    return f


def _float_sum(name: str, value_of, dims, t: hl.Type):
    """``(acc, rest)``: the float sum of row ``o`` is ``acc[o] + rest(o)``, in float64.

    A float32 row is read in blocks of ``GROUP`` runs of ``L`` elements: step ``m`` adds, in
    float32 and as a balanced tree, element ``m % L`` of each of the ``GROUP`` runs of block
    ``m // L``, and accumulates that group sum in float64 (the last block may be narrower: its
    runs are as long as the steps left, so the ``R // GROUP`` steps cover the first
    ``GROUP * (R // GROUP)`` elements exactly once); ``rest(o)`` adds the last
    ``R - GROUP * (R // GROUP)`` (< ``GROUP``) elements. A float32 addition rounds sums of at
    most ``GROUP`` elements, and one conversion to float64 serves ``GROUP`` elements (widening
    every element made the sum conversion-bound).

    ``L`` (:func:`_run_shift`) is a power-of-two multiple of ``BLOCK``, so a vector of ``BLOCK``
    steps loads ``GROUP`` contiguous vectors: ``BLOCK`` itself in short rows, which are then
    read front to back, and up to ``_RUN_MAX`` in long ones, read as ``GROUP`` streams. Measured
    on one thread under load, summing rows of float32 16 MiB: runs of 1 KiB (2048x2048 read as
    eight streams) ~2.1-2.9 ms, 64 bytes ~1.5-1.7, torch ~1.3-1.5; rows of 16K elements the other
    way round, 64-byte runs ~0.8 ms, 8 KiB runs ~0.45, torch ~0.7 (the hardware prefetchers
    serve eight long streams better than one, and a stream of a few KiB hardly at all).

    float64 rows accumulate as they are, one Func with one RVar in either case (GPU
    row-reduction schedules and the column schedule of a reduction over leading axes take it)."""
    f64 = hl.Float(64)
    if t != hl.Float(32):
        return _row_sum(name, value_of, dims, f64), lambda o: lit64(0)
    n = dims.R / GROUP
    o, m = hl.Var("o"), hl.RDom([hl.Range(0, n)], "k")
    shift = _run_shift(n)
    run_len = hl.i32(BLOCK) << shift                    # L
    vec = m / BLOCK                                     # the vector of BLOCK steps holding m
    block = vec >> shift
    run = hl.min(run_len, n - block * run_len)          # L, or the steps left in the last block
    first = block * run_len * GROUP + (vec - (block << shift)) * BLOCK + m % BLOCK
    # The index is at most GROUP * n - 1 (m % L < run): the promise gives bounds inference that
    # range, which interval arithmetic cannot see through the min.
    terms = [value_of(hl.unsafe_promise_clamped(first + i * run, 0, dims.R - 1), o)
             for i in range(GROUP)]
    while len(terms) > 1:
        terms = [terms[j] + terms[j + 1] for j in range(0, len(terms), 2)]
    acc = hl.Func(name)
    acc[o] = lit64(0)
    acc[o] += hl.cast(f64, terms[0])

    def rest(oo):
        total = lit64(0)
        for j in range(GROUP - 1):
            at = GROUP * n + j
            total += hl.select(at < dims.R, hl.cast(f64, value_of(hl.min(at, dims.R - 1), oo)),
                               lit64(0))
        return total

    return acc, rest


#: A float32 sum reads a row of at least this many steps (GROUP elements each) in long runs.
_RUN_MIN = 1024
#: Steps per run (a power of two) in the longest rows: 16 KiB of float32, the steps of a parallel
#: chunk of a full reduction, so a chunk reads whole runs.
_RUN_MAX = CHUNK // GROUP


def _run_shift(n):
    """``log2(L / BLOCK)`` for a row of ``n`` steps (see :func:`_float_sum`): ``L`` is ``BLOCK``
    below ``_RUN_MIN`` steps, else the largest power of two up to ``min(n, _RUN_MAX)``."""
    top = hl.i32(31) - hl.cast(hl.Int(32), hl.count_leading_zeros(hl.min(n, _RUN_MAX)))
    return hl.select(n < _RUN_MIN, 0, top - int(math.log2(BLOCK)))


def _variance(x, dims, ddof: float):
    """Row variance in float64 (two passes), divided by ``max(R - ddof, 0)``."""
    n = hl.cast(hl.Float(64), dims.R)
    acc = _row_sum("acc", lambda k, o: x[k, o], dims, hl.Float(64))
    dev = _row_sum("dev", lambda k, o: _sq(hl.cast(hl.Float(64), x[k, o]) - acc[o] / n), dims,
                   hl.Float(64))
    o = hl.Var("o")
    # No division by zero where ddof >= R (NumPy's inf, or NaN for a constant row): with a
    # constant R (a program's kernel) Halide folded dev / 0.0 away and left the output unwritten.
    denom = hl.max(n - lit64(ddof), lit64(0))
    spread = hl.Expr(dev[o])
    return o, hl.select(denom > lit64(0), spread / denom,
                        hl.select(spread > lit64(0), _ew._inf(spread), _ew._nan(spread)))


def _sq(e):
    return e * e


# -- references (NumPy, public signatures) -------------------------------------------------------

def _sum_ref(x, axis=None, keepdims=False):
    return np.sum(x, axis=axis, keepdims=keepdims)


def _mean_ref(x, axis=None, keepdims=False):
    return np.mean(x, axis=axis, keepdims=keepdims)


def _prod_ref(x, axis=None, keepdims=False):
    return np.prod(x, axis=axis, keepdims=keepdims)


def _max_ref(x, axis=None, keepdims=False):
    return np.max(x, axis=axis, keepdims=keepdims)


def _min_ref(x, axis=None, keepdims=False):
    return np.min(x, axis=axis, keepdims=keepdims)


def _argmax_ref(x, axis=None, keepdims=False):
    return np.argmax(x, axis=axis, keepdims=keepdims)


def _argmin_ref(x, axis=None, keepdims=False):
    return np.argmin(x, axis=axis, keepdims=keepdims)


def _var_ref(x, axis=None, ddof=0, keepdims=False):
    return np.var(x, axis=axis, ddof=ddof, keepdims=keepdims)


def _std_ref(x, axis=None, ddof=0, keepdims=False):
    return np.std(x, axis=axis, ddof=ddof, keepdims=keepdims)


def _logsumexp_ref(x, axis=None, keepdims=False):
    x = np.asarray(x)
    m = np.max(x, axis=axis, keepdims=True)
    shift = np.where(np.isfinite(m), m, 0).astype(x.dtype)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        s = np.sum(np.exp(x - shift), axis=axis, keepdims=True)
        out = np.log(s) + shift
    if not keepdims:
        out = np.squeeze(out, axis=axis if axis is not None else None)
    return out.astype(x.dtype)[()]


def _last_axis(ref):
    """The kernel reference: ``ref`` over the last axis of a 2-D array."""

    def kernel_ref(x, **params):
        return ref(x, axis=-1, **params)

    return kernel_ref


# -- public frontends ----------------------------------------------------------------------------

def _sum_frontend(x, axis=None, keepdims=False):
    """Sum of the elements over ``axis`` (``np.sum``)."""
    return _reduce_call(sum_, x, axis, keepdims)


def _mean_frontend(x, axis=None, keepdims=False):
    """Arithmetic mean over ``axis`` (``np.mean``)."""
    return _reduce_call(mean, x, axis, keepdims)


def _prod_frontend(x, axis=None, keepdims=False):
    """Product of the elements over ``axis`` (``np.prod``)."""
    return _reduce_call(prod, x, axis, keepdims)


def _max_frontend(x, axis=None, keepdims=False):
    """Largest element over ``axis`` (``np.max``); NaN if the reduced elements hold a NaN."""
    return _reduce_call(max_, x, axis, keepdims)


def _min_frontend(x, axis=None, keepdims=False):
    """Smallest element over ``axis`` (``np.min``); NaN if the reduced elements hold a NaN."""
    return _reduce_call(min_, x, axis, keepdims)


def _argmax_frontend(x, axis=None, keepdims=False):
    """Index of the first largest element along ``axis`` (``np.argmax``; a NaN counts as
    largest); int64."""
    return _reduce_call(argmax, x, axis, keepdims, single=True)


def _argmin_frontend(x, axis=None, keepdims=False):
    """Index of the first smallest element along ``axis`` (``np.argmin``; a NaN counts as
    smallest); int64."""
    return _reduce_call(argmin, x, axis, keepdims, single=True)


def _var_frontend(x, axis=None, ddof=0, keepdims=False):
    """Variance over ``axis`` (``np.var``), divided by ``N - ddof``."""
    return _reduce_call(var, x, axis, keepdims, ddof=ddof)


def _std_frontend(x, axis=None, ddof=0, keepdims=False):
    """Standard deviation over ``axis`` (``np.std``), from the variance divided by ``N - ddof``."""
    return _reduce_call(std, x, axis, keepdims, ddof=ddof)


def _logsumexp_frontend(x, axis=None, keepdims=False):
    """``log(sum(exp(x)))`` over ``axis``, computed without overflow (``scipy.special.logsumexp``)."""
    return _reduce_call(logsumexp, x, axis, keepdims)


# -- the kernels ---------------------------------------------------------------------------------

_DDOF = Param("ddof", float, default=0.0, doc="delta degrees of freedom: divide by N - ddof")


@op(name="sum", category="reduction", inputs={"x": "O R"}, output="O", dtypes=_WITH_INT,
    reference=_sum_ref, kernel_reference=_last_axis(_sum_ref), frontend=_sum_frontend,
    example=_EXAMPLE)
def sum_(x, *, dims):
    """Row sums of [O, R] -> [O]; float32 accumulates in float64, int32 sums to int64."""
    o = hl.Var("o")
    out = hl.Func("out")
    if not x.type().is_float():
        acc = _row_sum("acc", lambda k, oo: x[k, oo], dims, hl.Int(64))
        out[o] = acc[o]
        return out
    acc, rest = _float_sum("acc", lambda k, oo: x[k, oo], dims, x.type())
    out[o] = hl.cast(x.type(), acc[o] + rest(o))
    return out


@op(category="reduction", inputs={"x": "O R"}, output="O", dtypes=_FLOATS, reference=_mean_ref,
    kernel_reference=_last_axis(_mean_ref), frontend=_mean_frontend, example=_EXAMPLE)
def mean(x, *, dims):
    """Row means of [O, R] -> [O], accumulated in float64."""
    acc, rest = _float_sum("acc", lambda k, oo: x[k, oo], dims, x.type())
    o = hl.Var("o")
    out = hl.Func("out")
    out[o] = hl.cast(x.type(), (acc[o] + rest(o)) / hl.cast(hl.Float(64), dims.R))
    return out


@op(category="reduction", inputs={"x": "O R"}, output="O", dtypes=_WITH_INT, reference=_prod_ref,
    kernel_reference=_last_axis(_prod_ref), frontend=_prod_frontend, example=_EXAMPLE)
def prod(x, *, dims):
    """Row products of [O, R] -> [O]; floats multiply in their own type, int32 in int64."""
    t = x.type() if x.type().is_float() else hl.Int(64)
    o, k = hl.Var("o"), _rdom(dims)
    acc = hl.Func("acc")
    acc[o] = hl.cast(t, 1)
    acc[o] *= hl.cast(t, x[k, o])
    out = hl.Func("out")
    out[o] = acc[o]
    return out


@op(name="max", category="reduction", inputs={"x": "O R"}, output="O", dtypes=_WITH_INT,
    reference=_max_ref, kernel_reference=_last_axis(_max_ref), frontend=_max_frontend,
    example=_EXAMPLE)
def max_(x, *, dims):
    """Row maxima of [O, R] -> [O]; a row holding a NaN gives NaN."""
    best = _extreme_nan_key(x, dims, "best", largest=True)
    o = hl.Var("o")
    out = hl.Func("out")
    out[o] = _nan_unkey(best[o], x.type(), nan_high=True)
    return out


@op(name="min", category="reduction", inputs={"x": "O R"}, output="O", dtypes=_WITH_INT,
    reference=_min_ref, kernel_reference=_last_axis(_min_ref), frontend=_min_frontend,
    example=_EXAMPLE)
def min_(x, *, dims):
    """Row minima of [O, R] -> [O]; a row holding a NaN gives NaN."""
    best = _extreme_nan_key(x, dims, "best", largest=False)
    o = hl.Var("o")
    out = hl.Func("out")
    out[o] = _nan_unkey(best[o], x.type(), nan_high=False)
    return out


def _arg_key(v, largest: bool):
    """An int32 ordered like the 32-bit ``v``: -0.0 and 0.0 share the key 0, and a NaN of either
    sign gets the key that wins (the largest for argmax, the smallest for argmin). Integer ``v``
    is its own key. The sign-magnitude bits become two's complement (negate the magnitude of a
    negative), which is what makes the zeros equal."""
    t = v.type()
    if not t.is_float():
        return v
    it = hl.Int(32)
    bits = hl.reinterpret(it, v)
    mag = bits & _magnitude_mask(t)
    neg = bits >> 31                                   # -1 for a negative float, else 0
    key = (mag ^ neg) - neg
    return hl.select(mag > _inf_bits(t), it.max() if largest else it.min(), key)


#: The low half of an argmax pair counts down from this (see :func:`_arg_pair`).
_LOW = 0xFFFFFFFF


def _arg_pair(x, dims, largest: bool):
    """First index of the extreme of each row of a 32-bit input, in one pass: each element is the
    int64 ``key << 32 | low`` (:func:`_arg_key`), ``low`` being the index for argmin and
    ``2**32 - 1 - index`` for argmax, so the largest (smallest) pair is the extreme key at its
    first index. One plain integer max/min per row: it vectorizes and ``rfactor``-s in any order
    (lanes, chunks, GPU threads, the column schedule of a reduction over leading axes), where a
    (value, index) tuple would need its partials merged in index order."""
    o, k = hl.Var("o"), _rdom(dims)
    i64 = hl.Int(64)
    high = hl.cast(i64, _arg_key(x[k, o], largest)) << 32
    low = hl.i64(_LOW) - hl.cast(i64, k) if largest else hl.cast(i64, k)
    best = hl.Func("best")
    best[o] = i64.min() if largest else i64.max()
    best[o] = hl.max(best[o], high | low) if largest else hl.min(best[o], high | low)
    out = hl.Func("out")
    low_of = best[o] & hl.i64(_LOW)
    out[o] = hl.i64(_LOW) - low_of if largest else low_of
    return out


def _arg_extreme(x, dims, largest: bool):
    """First index of the extreme of each row. 32-bit inputs: one pass (:func:`_arg_pair`).
    float64: one pass finds the extreme (:func:`_extreme`), a second one the first index holding
    it (-0.0 equals 0.0), or the first NaN in a row holding one. (Both are plain row reductions,
    the shape GPU row-reduction schedules take; one pass keeping an index per vector lane needs a
    merge in index order that Halide's ``rfactor`` does not express.)"""
    t = x.type()
    if t.bits() == 32:
        return _arg_pair(x, dims, largest)
    best = _extreme(x, dims, "best", largest)
    o, k = hl.Var("o"), _rdom(dims)
    v = x[k, o]
    first = hl.Func("first")
    first[o] = hl.cast(hl.Int(32), dims.R)
    out = hl.Func("out")
    if not t.is_float():                                # int64: the first index equal to it
        first[o] = hl.min(first[o], hl.select(v == best[o], k, dims.R))
        out[o] = hl.cast(hl.Int(64), first[o])
        return out
    # Per row, on the bits (a float comparison with a NaN is not safe: the compiler may fold one
    # it assumes has no NaN operand): the pattern sought, under a mask that drops the sign when
    # the extreme is a zero (-0.0 equals 0.0), and the magnitude above which an element counts
    # (a NaN's in a row holding one, else none). In a row holding a NaN the pattern sought is
    # itself a NaN's. No per-element select: one packs masks bytewise.
    it = hl.Int(t.bits())
    nan = _has_nan(best, o, t)
    m = hl.Expr(best[o][0])
    m_bits = hl.reinterpret(it, m)
    sign_free = _magnitude(m) == hl.cast(it, 0)
    mask = hl.select(sign_free & hl.logical_not(nan), _magnitude_mask(t), hl.cast(it, -1))
    sought = hl.select(nan, _magnitude_mask(t), m_bits & mask)
    limit = hl.select(nan, _inf_bits(t), it.max())
    hit = ((hl.reinterpret(it, v) & mask) == sought) | (_magnitude(v) > limit)
    first[o] = hl.min(first[o], hl.select(hit, k, dims.R))
    out[o] = hl.cast(hl.Int(64), first[o])
    return out


@op(category="reduction", inputs={"x": "O R"}, output="O", dtypes=_WITH_INT,
    reference=_argmax_ref, kernel_reference=_last_axis(_argmax_ref), frontend=_argmax_frontend,
    example=_EXAMPLE)
def argmax(x, *, dims):
    """Index (int64) of the first largest element of each row of [O, R]; a NaN is largest."""
    return _arg_extreme(x, dims, largest=True)


@op(category="reduction", inputs={"x": "O R"}, output="O", dtypes=_WITH_INT,
    reference=_argmin_ref, kernel_reference=_last_axis(_argmin_ref), frontend=_argmin_frontend,
    example=_EXAMPLE)
def argmin(x, *, dims):
    """Index (int64) of the first smallest element of each row of [O, R]; a NaN is smallest."""
    return _arg_extreme(x, dims, largest=False)


@op(category="reduction", inputs={"x": "O R"}, output="O", dtypes=_FLOATS, params=[_DDOF],
    reference=_var_ref, kernel_reference=_last_axis(_var_ref), frontend=_var_frontend,
    example=_EXAMPLE)
def var(x, ddof, *, dims):
    """Row variances of [O, R] -> [O]: mean of squared deviations, divided by ``R - ddof``."""
    o, v = _variance(x, dims, ddof)
    out = hl.Func("out")
    out[o] = hl.cast(x.type(), v)
    return out


@op(category="reduction", inputs={"x": "O R"}, output="O", dtypes=_FLOATS, params=[_DDOF],
    reference=_std_ref, kernel_reference=_last_axis(_std_ref), frontend=_std_frontend,
    example=_EXAMPLE)
def std(x, ddof, *, dims):
    """Row standard deviations of [O, R] -> [O]: ``sqrt(var(x, ddof))``."""
    o, v = _variance(x, dims, ddof)
    out = hl.Func("out")
    out[o] = hl.cast(x.type(), hl.sqrt(v))
    return out


@op(category="reduction", inputs={"x": "O R"}, output="O", dtypes=_FLOATS,
    reference=_logsumexp_ref, kernel_reference=_last_axis(_logsumexp_ref),
    frontend=_logsumexp_frontend, example=_EXAMPLE)
def logsumexp(x, *, dims):
    """``m + log(sum(exp(x - m)))`` per row of [O, R], ``m`` the row maximum (NaN or +-inf rows
    give ``m``); the exponentials are summed in float64."""
    t = x.type()
    best = _extreme(x, dims, "best", largest=True)
    o = hl.Var("o")
    m = _extreme_value(best, o, t)
    acc = _row_sum("acc", lambda k, oo: kernel_exp(x[k, oo] - _extreme_value(best, oo, t)), dims,
                   hl.Float(64))
    out = hl.Func("out")
    finite = hl.cast(t, hl.cast(hl.Float(64), m) + hl.log(acc[o]))
    out[o] = hl.select(hl.is_finite(m), finite, m)
    return out


# These frontends depend only on their arguments' dtypes, shapes and parameters, never on array
# values: a repeated call may skip them (runtime.call_public records what they did once).
for _fe in (_sum_frontend, _mean_frontend, _prod_frontend, _max_frontend, _min_frontend, _argmax_frontend, _argmin_frontend, _var_frontend, _std_frontend, _logsumexp_frontend):
    _fe.shape_only = True
