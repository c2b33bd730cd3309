"""Broadcasting binary ops: add, sub, mul, div, pow, maximum, minimum, where, swiglu.

The public calls follow NumPy: ``add(a, b)``, ``where(cond, a, b)``, ``swiglu(x, y)``.

Broadcasting: the inputs broadcast together like NumPy's (``np.broadcast_shapes``) and the result
has the broadcast shape. The kernel works on a 2-D form [R, C] of that shape: C is the product of
the trailing axes (the last axis, or more when the last axes are short) and R of the leading ones.
An input that already has the full shape is passed as a view when its rows are contiguous; an
input that is broadcast is passed as a stride-0 view when the broadcasting is along whole rows
(a bias over the last axes, a scalar), and is otherwise materialized with ``np.broadcast_to`` and
made dense (a copy the size of the result).

dtypes: float32, float64 and float16 (float16 is computed in float32 and rounded once, as NumPy
does), and int32 and int64 for ``add``, ``sub``, ``mul``, ``maximum``, ``minimum`` and ``where``
(wrapping on overflow like NumPy). Both array inputs must have the same dtype: a float32 array with a float64
array is a DtypeError (cast one of them); nothing is promoted silently. Python scalars take the
dtype NumPy gives them next to the arrays (``add(x32, 2.0)`` is float32; ``add(i32, 2.5)`` is
float64, as in NumPy). ``where`` takes a bool ``cond``.

Semantics: ``div`` is true division (``a / b``; +-inf or NaN at zero like NumPy); ``pow`` is
``np.power`` for floats with C's ``pow`` special cases (a finite negative base with a non-integer
exponent is NaN; ``x**0 = 1**y = 1`` even for NaN; float32 is computed in float64 and rounded once;
float64 is within about 1e-13 relative);
``maximum``/``minimum`` propagate NaN like ``np.maximum``; ``swiglu(x, y) = silu(x) * y`` with
``silu(x) = x * sigmoid(x)``.
"""

from __future__ import annotations

import inspect
import math

import halide as hl
import numpy as np

from ..errors import ArgumentError, DtypeError, ShapeError
from ..runtime import as_array, as_traced, traced
from ._consts import lit64
from . import elementwise as _ew
from ._op import op

FLOATS = ("float32", "float64", "float16")
WITH_INT = FLOATS + ("int32", "int64")
_EXAMPLE = {"R": 64, "C": 100}
#: Rows shorter than this are merged with the axes before them, so that vectors fill up.
MIN_ROW = 64

# -- element functions -----------------------------------------------------------------------------


def _add(a, b):
    return a + b


def _sub(a, b):
    return a - b


def _mul(a, b):
    return a * b


def _div(a, b):
    return a / b


def _maximum(a, b):
    if a.type().is_float():
        return hl.select(_ew._is_nan(a) | (a > b), a, b)
    return hl.max(a, b)


def _minimum(a, b):
    if a.type().is_float():
        return hl.select(_ew._is_nan(a) | (a < b), a, b)
    return hl.min(a, b)


def _pow_core(x, y):
    """np.power for floats of one type: exp(y * log|x|) plus the IEEE (C99 pow) special cases."""
    x = _ew._let("pow_base", x)
    y = _ew._let("pow_exponent", y)
    one = _ew._k(x, 1.0)
    ax = hl.abs(x)
    mag = _ew._exp(y * _ew._log(ax))
    y_finite = _ew._is_finite(y)
    y_int = y_finite & (hl.floor(y) == y)
    half = y * _ew._k(x, 0.5)
    big = 2.0 ** (53 if x.type().bits() == 64 else 24)   # beyond this every float is even
    y_odd = y_int & (hl.abs(y) < _ew._k(x, big)) & (hl.floor(half) != half)
    res = _ew._flipsign(mag, hl.select(y_odd, x, one))             # (-x)**odd = -(x**odd)
    neg_base = (x < _ew._k(x, 0.0)) & _ew._is_finite(x)
    res = hl.select(neg_base & y_finite & hl.logical_not(y_int), _ew._nan(x), res)
    res = hl.select(_ew._is_nan(x) | _ew._is_nan(y), _ew._nan(x), res)
    res = hl.select((ax == one) & _ew._is_inf(y), one, res)          # (+-1)**(+-inf) = 1
    return hl.select((y == _ew._k(x, 0.0)) | (x == one), one, res)  # x**0 = 1**y = 1, even NaN


def _pow32_specials(x, y, ax, mag):
    """np.power for float32 from ``mag`` = |x|**y, which is already right for x = 0, +-inf and
    NaN (see :func:`_pow32`): the sign of an odd power, NaN for a finite negative base with a
    finite non-integer exponent, and the powers that are 1 (C99 pow)."""
    u32 = hl.UInt(32)
    # y's integer tests on a copy clamped below 2**31 for the conversion: floats that large are
    # even integers, and a NaN y makes the result NaN in mag already
    yc = hl.min(hl.max(y, hl.f32(-2.0 ** 30)), hl.f32(2.0 ** 30))
    yi = _ew._let("pow_yi", hl.cast(hl.Int(32), yc))
    y_int = hl.cast(hl.Float(32), yi) == yc
    xbits = hl.reinterpret(u32, x)
    sign = xbits & hl.cast(u32, 0x80000000)
    flipped = hl.reinterpret(hl.Float(32), hl.reinterpret(u32, mag) ^ sign)
    res = hl.select(y_int & ((yi & 1) != 0), flipped, mag)          # (-x)**odd = -(x**odd)
    # x < 0 and finite: its bits lie in (0x80000000, 0xFF800000)
    neg_finite = xbits - hl.cast(u32, 0x80000001) < hl.cast(u32, 0x7F7FFFFF)
    res = hl.select(neg_finite & hl.logical_not(y_int), hl.f32(math.nan), res)
    one = (y == hl.f32(0.0)) | (x == hl.f32(1.0)) | ((ax == hl.f32(1.0)) & _ew._is_inf(y))
    return hl.select(one, hl.f32(1.0), res)          # x**0 = 1**y = (-1)**(+-inf) = 1, even NaN


#: log2(1 + f) = s P(s**2), s = f / (2 + f) = (m - 1) / (m + 1), |s| <= 0.1716: P's 5 terms by
#: Chebyshev interpolation in mpmath (50 digits) on s**2 in [0, 0.02944]: relative error
#: 2**-37.8, so that y log2|x| (at most 150 where the result is a nonzero float32, and never
#: smaller than y P's part) is within 2**-30.6 and the power within 0.008 ulp of float32 before
#: its one rounding (the 6-term fit, 2**-45, costs 4% more time for 0.003 ulp).
_POW32_LOG = (2.885390081789993, 0.9617966734432283, 0.5770835677034892, 0.411673658400816,
              0.340714136651912)
#: 2**r on |r| <= 1/2, degree 7, fitted for relative error (iteratively reweighted least squares
#: on 3000 Chebyshev points against mpmath): 2**-34.5 on a 20001-point check grid, far below the
#: 2**-31 the float64 power is allowed (the degree-8 fit it replaces was within 2**-40, one fused
#: multiply-add per float64 vector dearer).
_POW32_EXP2 = (0.9999999999616386, 0.6931471807265976, 0.24022651198496808, 0.055504103595103646,
               0.009618027217259352, 0.001333391765153188, 0.00015469300882912378,
               1.5203053881855351e-05)
#: 1.5 * 2**52 + 1023: adding it to a float64 |t| < 2**51 rounds t to an integer k held in the
#: low bits, as k + 1023, the biased exponent of 2**k.
_ROUND_MAGIC = 6755399441055744.0 + 1023.0
#: The bits of sqrt(1/2): |x|'s bits minus these, shifted, are the exponent e of
#: |x| = 2**e * m with m in [sqrt(1/2), sqrt(2)).
_SQRT_HALF_BITS = 0x3F3504F3


def _pow32(x, y):
    """float32 x**y: |x|**y = 2**(y log2|x|) in float64, rounded once to float32.

    float64 leaves room for short polynomials (see _POW32_LOG and _POW32_EXP2): within 0.51 ulp
    of float32 where the result is finite. |x| is split into exponent and mantissa in float32,
    16 lanes at a time and without a comparison (subnormals scaled by 2**24 first); only then
    does the work move to float64, whose vectors hold half as many lanes. log2|x| is -inf at 0
    and |x| itself at inf and NaN, so that the power is 0, inf or NaN there by itself; the clamp
    of y log2|x| lets NaN through.

    The earlier form (7-term log, a compared split at sqrt(2), the special cases as selects of
    their own) took 169 instructions a 16-float vector against 113. 4M elements (x in [0.1, 10],
    y in [0.1, 3]), ``out=``, one Halide thread, CPU time per call, old and new kernels and NumPy
    in turn (30 rounds of 5 calls, medians): 7.5-7.7 -> 6.2-6.4 ms (NumPy 3.0-3.1). As users call
    it (fresh output, two threads, ``pypto.infra.timing.measure``, medians of 3 runs,
    single/steady): 4.29/4.28 -> 3.57/3.47 ms, NumPy 3.14/3.33: still about 10% short of NumPy,
    whose SVML power reads its tables from registers; here the float64 multiply-adds set the
    time (a table lookup compiles to one scalar load a lane, dearer than the polynomial terms it
    would save; Estrin's scheme, a float32 division refined in float64, and the exp2 tail in
    float32 measured no better)."""
    x = _ew._let("pow_base", x)
    y = _ew._let("pow_exponent", y)
    f64, i32 = hl.Float(64), hl.Int(32)
    ax = _ew._let("pow_abs", _ew._fabs(x))
    tiny = ax < hl.f32(2.0 ** -126)
    bits = hl.reinterpret(i32, hl.select(tiny, ax * hl.f32(2.0 ** 24), ax))
    e = (bits - _SQRT_HALF_BITS) >> 23
    m = hl.cast(f64, hl.reinterpret(hl.Float(32), bits - (e << 23)))
    ef = hl.cast(hl.Float(32), e) - hl.select(tiny, hl.f32(24.0), hl.f32(0.0))
    ef = hl.select(hl.reinterpret(hl.UInt(32), ax) >= hl.reinterpret(hl.UInt(32), hl.f32(math.inf)),
                   ax, hl.select(ax == hl.f32(0.0), hl.f32(-math.inf), ef))
    s = _ew._let("pow_s", (m - lit64(1.0)) / (m + lit64(1.0)))          # log(m) = 2 atanh(s)
    log2x = _ew._fused("pow_log2", hl.cast(f64, ef) + s * _ew._poly("pow_log", s * s,
                                                                      list(_POW32_LOG)))
    t = _ew._let("pow_t", _ew._clamp(hl.cast(f64, y) * log2x, -160.0, 160.0))
    # k = round(t) by the magic sum (IEEE-strict here, so it is not folded away), and 2**k from
    # the sum's bits
    kk = _ew._let("pow_kk", t + lit64(_ROUND_MAGIC))
    r = _ew._let("pow_r", t - (kk - lit64(_ROUND_MAGIC)))   # strict too: exact, |r| <= 1/2
    p = _ew._poly("pow_exp", r, list(_POW32_EXP2))
    scale = hl.reinterpret(f64, hl.reinterpret(hl.UInt(64), kk) << 52)
    return _pow32_specials(x, y, ax, hl.cast(hl.Float(32), p * scale))


def _pow(a, b):
    """float32 through float64 (rounded once), float64 as it is."""
    if a.type().bits() == 32:
        return _pow32(a, b)
    return _pow_core(a, b)


def _swiglu(x, y):
    return _ew._silu(x) * y


def _apply(fn, vals, args, fn16=None, prefix=""):
    """fn on elements: float16 through float32 (with ``fn16`` if given), float math IEEE-strict,
    ints as they are. ``prefix`` starts the names of its shared values (see ``_ew.sharing``)."""
    t = vals[-1].type()
    with _ew.sharing(args, prefix):
        if t.is_float():
            if t.bits() == 16:
                f32 = [hl.cast(hl.Float(32), v) for v in vals]
                return hl.cast(t, hl.strict_float((fn16 or fn)(*f32)))
            return hl.strict_float(fn(*vals))
        return fn(*vals)


# -- the public call: dtypes, broadcasting and the 2-D form ----------------------------------------


def _is_python_scalar(v) -> bool:
    return isinstance(v, (bool, int, float)) and not isinstance(v, np.generic)


def _mixed_dtypes(name: str, typed) -> str:
    """The error for operands of different dtypes, suggesting the cast NumPy's promotion makes
    (a widening one: int32 with int64 suggests int64, never the narrowing way)."""
    (n1, a1), (n2, a2) = [(n, a) for n, a in typed.items()][:2]
    to = np.result_type(a1.dtype, a2.dtype)
    casts = " and ".join(f"{n}.astype(np.{to.name})" for n, a in ((n1, a1), (n2, a2))
                         if a.dtype != to)
    return (f"{name}: arguments '{n1}' ({a1.dtype.name}) and '{n2}' ({a2.dtype.name}) have "
            f"different dtypes, and {name} does not promote them; cast explicitly, e.g. {casts} "
            f"({to.name}, NumPy's promotion of the two)")


def _operands(name: str, names, values, cond: str | None):
    """Arrays for the call, with Python scalars typed the NumPy way next to the arrays."""
    arrays: dict[str, np.ndarray] = {}
    scalars: dict[str, object] = {}
    for n, v in zip(names, values):
        if n != cond and _is_python_scalar(v):
            scalars[n] = v
        else:
            arrays[n] = as_array(v, name, n)
    if cond is not None:
        c = arrays[cond]
        if c.dtype != np.bool_:
            raise DtypeError(f"{name}: argument '{cond}' must be a bool array, got dtype "
                             f"{c.dtype.name} (use a comparison such as x > 0)")
    typed = {n: a for n, a in arrays.items() if n != cond}
    numeric = {a.dtype for a in typed.values() if a.dtype != np.bool_}
    if len(numeric) == 1 and len(typed) > 1:
        # A bool mask meets numbers (dy * (x > 0)): True is 1, as NumPy promotes it.
        (to,) = numeric
        typed = {n: (a.astype(to) if a.dtype == np.bool_ else a) for n, a in typed.items()}
        arrays.update(typed)
    dts = {a.dtype for a in typed.values()}
    if len(dts) > 1:
        raise DtypeError(_mixed_dtypes(name, typed))
    try:
        if typed:
            dt = np.result_type(*[np.empty(0, d) for d in dts], *scalars.values())
        else:
            dt = np.result_type(*scalars.values())
    except (TypeError, ValueError, OverflowError) as e:
        raise DtypeError(f"{name}: cannot combine the arguments' types ({e})") from None
    for n, v in scalars.items():
        try:
            arrays[n] = np.asarray(v, dtype=dt)
        except OverflowError:
            raise DtypeError(f"{name}: the Python int {v!r} given as '{n}' does not fit "
                             f"{dt.name}") from None
    for n in typed:
        if arrays[n].dtype != dt:         # promoted by a Python scalar, as NumPy does
            arrays[n] = arrays[n].astype(dt)
    return [arrays[n] for n in names], dt


def _plan(shape: tuple[int, ...]) -> tuple[int, int, int]:
    """(split axis j, R, C): C = prod(shape[j:]) is the shortest tail with >= MIN_ROW elements."""
    k = len(shape)
    j = max(k - 1, 0)
    while j > 0 and math.prod(shape[j:]) < MIN_ROW:
        j -= 1
    return j, math.prod(shape[:j]), math.prod(shape[j:])


def _as_2d(a: np.ndarray, shape, r: int, c: int) -> np.ndarray:
    """``a`` broadcast to ``shape`` as an [r, c] array: a view where strides allow, else a copy."""
    if not isinstance(a, np.ndarray):      # a traced Tensor: broadcasting is a view node
        return a.broadcast_to(shape).reshape(r, c)
    if a.shape != tuple(shape):
        # A stride-0 view of the operand itself (np.broadcast_to's views are read-only, which
        # Halide buffers do not accept, so the runtime would copy them); Halide only reads it.
        lead = len(shape) - a.ndim
        strides = (0,) * lead + tuple(0 if n == 1 and m != 1 else s
                                      for n, m, s in zip(a.shape, shape[lead:], a.strides))
        full = np.lib.stride_tricks.as_strided(a, shape=shape, strides=strides)
    else:
        full = a
    return full.reshape(r, c)         # a view when the strides merge, else a dense copy


_SPLITS: dict[int, tuple[int, int] | None] = {}


def _scalar_split(n: int) -> tuple[int, int] | None:
    """[r, c] for n elements with a number broadcast along r: c divides n, is at most 4096 (the
    row is filled per call) and at least MIN_ROW (a vector's work per row); None if none."""
    got = _SPLITS.get(n, False)
    if got is not False:
        return got
    got = (1, n) if n <= 4096 else None
    c = 4096
    while got is None and c >= MIN_ROW:
        if n % c == 0:
            got = (n // c, c)
        c -= 1
    if len(_SPLITS) > 4096:
        _SPLITS.clear()
    _SPLITS[n] = got
    return got


def _kind_of(v) -> str:
    """How an argument reads in a promotion message: an array's dtype or a Python number's type."""
    if hasattr(v, "dtype"):
        return str(np.dtype(v.dtype))
    return f"a Python {type(v).__name__}"


def _with_scalar(name: str, accepted: set, a0, a1):
    """``op(array, number)`` or ``op(number, array)`` for a C-ordered float array and a Python
    float or int, NumPy's way (the number takes the array's dtype); None for any other call."""
    t0, t1 = type(a0), type(a1)
    if t0 is np.ndarray and (t1 is float or t1 is int):
        arr, num = a0, a1
    elif t1 is np.ndarray and (t0 is float or t0 is int):
        arr, num = a1, a0
    else:
        return None
    if (arr.dtype.kind != "f" or not arr.size or not arr.flags.c_contiguous
            or type(num) is int and abs(num) > 1 << 53):
        return None
    if not accepted:
        accepted.update(np.dtype(s[-1]) for s in _OPS[name].dtypes)
    rc = _scalar_split(arr.size) if arr.dtype in accepted else None
    if rc is None:
        return None
    r, c = rc
    row = np.full(c, num, arr.dtype)
    rows = row.reshape(1, c) if r == 1 else np.ndarray((r, c), arr.dtype, row,
                                                       strides=(0, arr.itemsize))
    x = arr.reshape(r, c)
    res = _OPS[name].kernel(x, rows) if arr is a0 else _OPS[name].kernel(rows, x)
    return res.reshape(arr.shape)


def _frontend(name: str, arg_names, cond: str | None = None):
    """The public call: NumPy dtypes for Python scalars, broadcasting, the [R, C] kernel."""
    sig = inspect.Signature([inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD)
                             for n in arg_names])

    accepted: set = set()   # np.dtype objects of the op's signatures, filled on the first call

    def call(*args, **kwargs):
        if cond is None and not kwargs and len(args) == 2 == len(arg_names):
            # An array and a Python number (x * 2.0): the number as one dense row read again for
            # every row (a stride-0 outer axis), not a full-size array (the general path below
            # made one: mul(x, 2.0) on 4M floats took 48 ms against 11 for two arrays).
            res = _with_scalar(name, accepted, *args)
            if res is not None:
                return res
        if cond is None and not kwargs and len(args) == len(arg_names):
            # Same-shape, same-dtype arrays (the common call): no binding, promotion or
            # broadcasting to work out; the result is what the general path below gives.
            a0 = args[0]
            if type(a0) is np.ndarray and all(type(v) is np.ndarray and v.shape == a0.shape
                                              and v.dtype == a0.dtype for v in args):
                if not accepted:
                    accepted.update(np.dtype(s[-1]) for s in _OPS[name].dtypes)
                if a0.dtype in accepted and a0.size:
                    _, r, c = _plan(a0.shape)
                    return _OPS[name].kernel(*[v.reshape(r, c) for v in args]).reshape(a0.shape)
        try:
            bound = sig.bind(*args, **kwargs)
        except TypeError as e:
            # an ArgumentError (a ParamError and a TypeError, as Python raises for such a call)
            raise ArgumentError(f"{name}: {e}; the call is {name}{sig}") from None
        values = [bound.arguments[n] for n in arg_names]
        arrays, dt = _operands(name, arg_names, values, cond)
        if traced(arrays):           # inside a traced program: scalars become 0-d inputs
            arrays = as_traced(arrays)
        the_op = _OPS[name]
        allowed = sorted({s[-1] for s in the_op.dtypes})
        if dt.name not in allowed:
            given = [(n, v) for n, v in zip(arg_names, values) if n != cond]
            what = next((n for n, v in given if np.dtype(getattr(v, "dtype", "O")) == dt), None)
            if what is not None:
                raise DtypeError(f"{name}: argument '{what}' has dtype {dt.name}; expected "
                                 f"{' or '.join(allowed)}")
            kinds = ", ".join(f"'{n}' {_kind_of(v)}" for n, v in given)
            raise DtypeError(f"{name}: the arguments ({kinds}) promote to {dt.name} (NumPy's "
                             f"rules), which {name} does not take; expected "
                             f"{' or '.join(allowed)}: cast an array first (x.astype(...))")
        try:
            shape = np.broadcast_shapes(*(a.shape for a in arrays))
        except ValueError:
            shapes = ", ".join(f"{a.shape} of '{n}'" for n, a in zip(arg_names, arrays))
            raise ShapeError(f"{name}: shapes {shapes} cannot be broadcast together (NumPy "
                             "broadcasting: aligned from the last axis, each axis must match "
                             "or be 1)") from None
        # A zero-size result goes through the kernel too: the runtime makes it without running
        # one, in the kernel's output dtype (bool for a comparison, not the operands' dtype).
        _, r, c = _plan(shape)
        flat = [_as_2d(a, shape, r, c) for a in arrays]
        return the_op.kernel(*flat).reshape(shape)

    call.__signature__ = sig
    call.__name__ = name
    call.shape_only = True   # no array values read: runtime.call_public may skip it
    return call


_OPS: dict = {}


def _binary(name, fn, reference, doc, dtypes=FLOATS, arg_names=("a", "b"), fn16=None,
            make_inputs=None, fixup=None):
    """Declares the broadcasting op ``name``: out[c, r] = fn(inputs at [c, r]), then
    ``fixup(out, images, dims)``'s updates of ``out`` if given."""
    def algorithm(*images, dims=None):
        c, r = hl.Var("c"), hl.Var("r")
        out = hl.Func("out")
        out[c, r] = _apply(fn, [im[c, r] for im in images], [c, r], fn16=fn16)
        if fixup is not None:
            fixup(out, images, dims)
        return out

    params = [inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD) for n in arg_names]
    if fixup is not None:
        params.append(inspect.Parameter("dims", inspect.Parameter.KEYWORD_ONLY))
    algorithm.__signature__ = inspect.Signature(params)
    algorithm.__name__ = name
    the_op = op(category="elementwise", inputs={n: "R C" for n in arg_names}, output="R C",
                dtypes=list(dtypes), reference=reference, frontend=_frontend(name, arg_names),
                example=dict(_EXAMPLE), make_inputs=make_inputs, name=name, doc=doc)(algorithm)
    _OPS[name] = the_op
    return the_op


def _pow_inputs(dims, dtypes, params, rng):
    """Positive bases (a real power everywhere) and exponents in [-3, 3]."""
    shape = (dims["R"], dims["C"])
    return [rng.uniform(0.1, 4.0, size=shape).astype(dtypes[0]),
            rng.uniform(-3.0, 3.0, size=shape).astype(dtypes[1])]


_quiet = _ew._quiet     # a reference that computes through overflow and domain warnings silently


@_quiet
def _ref_swiglu(x, y):
    x, y = np.asarray(x), np.asarray(y)
    silu = x / (np.asarray(1, x.dtype) + np.exp(-x))
    return np.where(np.isneginf(x), np.asarray(-0.0, x.dtype), silu) * y


add = _binary("add", _add, lambda a, b: np.add(a, b), "a + b, broadcasting like NumPy.",
              WITH_INT)
sub = _binary("sub", _sub, lambda a, b: np.subtract(a, b), "a - b, broadcasting like NumPy.",
              WITH_INT)
mul = _binary("mul", _mul, lambda a, b: np.multiply(a, b), "a * b, broadcasting like NumPy.",
              WITH_INT)
div = _binary("div", _div, _quiet(lambda a, b: np.true_divide(a, b)),
              "a / b (true division), broadcasting like NumPy.")
# float16 needs no float64 inside (and Halide's JIT cannot round float64 to float16 directly).
pow = _binary("pow", _pow, _quiet(lambda a, b: np.power(a, b)),  # noqa: A001 - the public name
              "a ** b (np.power for floats), broadcasting like NumPy.", fn16=_pow_core,
              make_inputs=_pow_inputs)
maximum = _binary("maximum", _maximum, lambda a, b: np.maximum(a, b),
                  "Elementwise maximum; NaN if either is NaN (np.maximum).", WITH_INT)
minimum = _binary("minimum", _minimum, lambda a, b: np.minimum(a, b),
                  "Elementwise minimum; NaN if either is NaN (np.minimum).", WITH_INT)
swiglu = _binary("swiglu", _swiglu, _ref_swiglu,
                 "silu(x) * y, the gated activation of SwiGLU feed-forward layers.",
                 arg_names=("x", "y"))


def _where_algorithm(cond, a, b):
    c, r = hl.Var("c"), hl.Var("r")
    out = hl.Func("out")
    out[c, r] = hl.select(cond[c, r], a[c, r], b[c, r])
    return out


where = op(category="elementwise", inputs={"cond": "R C", "a": "R C", "b": "R C"},
           output="R C", dtypes=[("bool", t, t) for t in WITH_INT],
           reference=lambda cond, a, b: np.where(cond, a, b),
           frontend=_frontend("where", ("cond", "a", "b"), cond="cond"),
           example=dict(_EXAMPLE), name="where",
           doc="a where cond is true, else b, broadcasting like NumPy (np.where).")(
               _where_algorithm)
_OPS["where"] = where
