"""Layout ops: concat, stack, split, pad, tile, repeat, flip and roll, each its input's elements in
a new arrangement (a new array, or NumPy's view where NumPy returns one, see below).

The public calls follow NumPy (``concat`` is ``np.concatenate``, ``split`` is ``np.split``,
``stack``, ``tile``, ``repeat``, ``flip``, ``roll``) except ``pad``, which follows ``torch.nn.functional.pad``: ``pad`` lists (before, after)
pairs starting from the last axis, and ``mode`` is ``"constant"``, ``"reflect"``, ``"replicate"`` or
``"circular"``.

Kernel forms: an op that works along one axis sees the array as [O, A, I] (the axes before it
flattened into O, the axes after it into I) so the public call only reshapes, never transposes;
an op that works along several axes makes one pass per axis (adjacent axes that merge are one
pass). ``concat`` sees [O, A] and [O, B]: the copied block of each input is contiguous.

Views, as in NumPy: an eager call of ``split`` or ``flip`` on a NumPy array returns what NumPy
returns, views of the input (no kernel runs, nothing is copied; writing into a view writes into
the input). A kernel writes them where a view cannot be the answer: inside a traced program (the
result is a node of the program), and with ``out=`` (the kernel writes into ``out``). The other
ops make new arrays, as NumPy's do.

The public calls pick the kernel form with the longest contiguous innermost axis the op allows:
``tile`` repeats whole [A x I] blocks, so it runs as [O, 1, A*I]; ``roll`` by s moves runs of
I * gcd(A, s) elements, so it runs with those runs innermost; the copies of ``split`` and
``flip`` into ``out=`` run as [O, 1, L*I] blocks and [O, A, I]. (A kernel copying along a middle
axis A with I = 1 reads and writes one element at a time, through the run-time stride of A,
which the compiled kernel does not know to be 1.) Zero-size results are refused, as everywhere
in PyPTO, except the empty views of ``split``.
"""

from __future__ import annotations

import math
import operator

import halide as hl
import numpy as np

from .. import runtime as _rt
from ..errors import DtypeError, ParamError, ShapeError, ZeroSizeError
from ..runtime import as_array, as_traced, pending_out, traced
from ._consts import fill
from ._op import Param, op

#: The dtypes every layout op accepts (a copy needs no arithmetic); float32 first.
ANY = ["float32", "float64", "int32", "int64", "bool"]
#: Ops whose eager result is a NumPy view (flip, split, diagonal) take every dtype NumPy's view
#: does, so that their kernels (out=, traced programs) accept what the eager call accepts.
VIEW_TYPES = ["float32", "float64", "float16", "int8", "int16", "int32", "int64", "uint8",
              "uint16", "uint32", "bool"]
_BIG = 1 << 30
_OAI = {"O": 4, "A": 9, "I": 5}


# -- helpers -------------------------------------------------------------------------------------

def _axis(name: str, axis, ndim: int) -> int:
    """A single axis as a non-negative int; ParamError otherwise."""
    if type(axis) is int and -ndim <= axis < ndim:      # the common case, checked quickly
        return axis % ndim
    if isinstance(axis, (bool, np.bool_)) or not hasattr(axis, "__index__"):
        raise ParamError(f"{name}: 'axis' must be an int, got {axis!r}")
    a = any_int(name, "axis", axis)     # an array of several (or no) ints: a ParamError
    n = max(ndim, 1)                    # a 0-d input takes 0 and -1, as in torch
    if not -n <= a < n:
        raise ParamError(f"{name}: 'axis' must be in [{-n}, {n - 1}] for an input of rank "
                         f"{ndim}, got {a}")
    return a % n


def _int(name: str, arg: str, value, low: int | None = None) -> int:
    """An int argument, at least ``low`` and below 2**30 in magnitude; ParamError otherwise."""
    if type(value) is int and -_BIG < value < _BIG and (low is None or value >= low):
        return value                                    # the common case, checked quickly
    v = any_int(name, arg, value)
    if low is not None and v < low:
        raise ParamError(f"{name}: '{arg}' must be >= {low}, got {v}")
    if abs(v) >= _BIG:
        raise ParamError(f"{name}: '{arg}' must be below 2**30 in magnitude, got {v}")
    return v


def any_int(name: str, arg: str, value) -> int:
    """An int argument of any size (a bool is not one); ParamError otherwise."""
    if isinstance(value, (bool, np.bool_)) or not hasattr(value, "__index__"):
        raise ParamError(f"{name}: '{arg}' must be an int, got {value!r}")
    try:
        return operator.index(value)
    except TypeError:       # an array of other than one integer (an empty one, say)
        raise ParamError(f"{name}: '{arg}' must be an int, got an array of shape "
                         f"{np.shape(value)}") from None


def _oai(x, axis: int):
    """``x`` as [O, A, I] around ``axis`` (a reshape)."""
    s = x.shape
    return x.reshape(math.prod(s[:axis]), s[axis], math.prod(s[axis + 1:]))


def _along(the_op, x, axis: int, size: int, **params):
    """Runs an [O, A, I] -> [O, T, I] kernel along ``axis``; the result has ``size`` there."""
    out = the_op.kernel(_oai(x, axis), **params)
    return out.reshape(x.shape[:axis] + (size,) + x.shape[axis + 1:])


def _inputs(name: str, arrays, arg: str = "arrays"):
    """A non-empty sequence of arrays of one dtype (Tensors if any is one)."""
    if (isinstance(arrays, np.ndarray) or traced([arrays])) and arrays.ndim >= 1:
        arrays = list(arrays)           # like NumPy: an array is a sequence of its sub-arrays
    if not isinstance(arrays, (list, tuple)) or not arrays:
        raise ParamError(f"{name}: '{arg}' must be a non-empty list or tuple of arrays")
    arrs = [as_array(a, name, f"{arg}[{i}]") for i, a in enumerate(arrays)]
    if traced(arrs):
        arrs = as_traced(arrs)
    dts = {a.dtype for a in arrs}
    if len(dts) > 1:
        to = np.result_type(*dts).name
        raise DtypeError(f"{name}: the arrays have different dtypes {sorted(d.name for d in dts)};"
                         f" cast them to one dtype first, e.g. [a.astype(np.{to}) for a in "
                         f"{arg}] ({to}, NumPy's promotion of them; {name} does not promote)")
    return arrs


def bcast(a, shape):
    """``a`` broadcast to ``shape``: a stride-0 view of an array, a view node of a Tensor; ``a``
    itself when it has that shape already (NumPy's broadcast view is read-only, and a read-only
    input is copied before a kernel reads it: 2048 x 2048 float32 pairs cost 8 ms that way)."""
    if tuple(a.shape) == tuple(shape):
        return a
    if isinstance(a, np.ndarray):
        return np.broadcast_to(a, shape)
    return a.broadcast_to(shape)


def _tree(fn, items):
    """Combines ``items`` pairwise in a balanced tree (log2(n) passes over the data)."""
    while len(items) > 1:
        items = [fn(items[i], items[i + 1]) if i + 1 < len(items) else items[i]
                 for i in range(0, len(items), 2)]
    return items[0]


def _eager(the_op, x) -> bool:
    """True when the public call of ``the_op`` on ``x`` returns NumPy's view of ``x``: ``x`` is a
    NumPy array, no program is being traced, and no ``out=`` of this call waits for the kernel."""
    if type(x) is not np.ndarray or (_rt._tracing is not None and _rt._tracing() is not None):
        return False
    pend = pending_out.get()
    return pend is None or pend[0] is not the_op


def _take_out(the_op, shapes, dtype):
    """The caller's ``out=`` of this public call of ``the_op`` (a list, one array per shape in
    ``shapes``, the public result's shapes) for the kernel calls that make the final result, or
    None without one.

    It is taken (no other kernel call of the frontend is offered it) whether or not it fits: one
    that does not fit exactly (count, shape, dtype, a writeable C-contiguous array) gives None,
    and ``Op._call_into`` then checks the result against it and names what is wrong.
    """
    pend = pending_out.get()
    if pend is None or pend[0] is not the_op:
        return None
    pend[0], pend[2] = None, True
    outs = (pend[1],) if isinstance(pend[1], np.ndarray) else pend[1]
    if not isinstance(outs, tuple) or len(outs) != len(shapes):
        return None
    for o, shape in zip(outs, shapes):
        if (type(o) is not np.ndarray or o.dtype != dtype or o.shape != tuple(shape)
                or not o.flags.c_contiguous or not o.flags.writeable):
            return None
    return list(outs)


def _ref_oai(fn):
    """A kernel reference for an [O, A, I] op: ``fn`` along axis 1."""
    return lambda x, **p: fn(np.asarray(x), axis=1, **p)


# -- concat and stack ----------------------------------------------------------------------------

#: Joins of three or more NumPy arrays with at least this many elements in all run as one-op
#: programs (one pass over the data; below it the kernels' tree costs less than a program call).
_JOIN_MIN = 1 << 15


def _many(the_op, arrs) -> bool:
    """True when this public call of ``the_op`` joins its arrays in one program pass."""
    if len(arrs) < 3 or _rt._join_many is None or not _eager(the_op, arrs[0]):
        return False
    return (all(type(a) is np.ndarray for a in arrs)
            and sum(a.size for a in arrs) >= _JOIN_MIN)


def _concat_frontend(arrays, axis=0):
    """Joins arrays along an existing axis (``np.concatenate``; ``axis=None`` flattens them)."""
    name = "concat"
    arrs = _inputs(name, arrays)
    if axis is None:
        arrs, axis = [a.reshape(-1) for a in arrs], 0
    nd = arrs[0].ndim
    if nd == 0 or any(a.ndim != nd for a in arrs):
        raise ShapeError(f"concat: the arrays must have the same rank >= 1, got shapes "
                         f"{[a.shape for a in arrs]}")
    ax = _axis(name, axis, nd)
    for i, a in enumerate(arrs):
        if a.shape[:ax] + a.shape[ax + 1:] != arrs[0].shape[:ax] + arrs[0].shape[ax + 1:]:
            raise ShapeError(f"concat: arrays[{i}] has shape {a.shape} but arrays[0] has "
                             f"{arrs[0].shape}; all axes but axis {ax} must match")
    if len(arrs) > 1 and not traced(arrs) and len({a.dtype for a in arrs}) == 1:
        # Pieces empty along the axis add nothing (their other axes were checked above); when
        # all are, the two first give the empty result (through the kernel's checks).
        kept = [a for a in arrs if a.shape[ax]]
        arrs = kept if kept else arrs[:2]
    if _many(concat, arrs):
        return _rt._join_many(arrs, ax)
    return join_tree(arrs, ax)


def join_tree(arrs, ax: int):
    """``arrs`` (same rank, agreeing but on axis ``ax``) joined by the concat kernel, two at a time
    (in a traced program the tree is lowered as one join)."""
    lead, tail = arrs[0].shape[:ax], arrs[0].shape[ax + 1:]
    o, inner = math.prod(lead), math.prod(tail)
    flat = [a.reshape(o, a.shape[ax] * inner) for a in arrs]
    if len(flat) == 1:                  # a new array, as NumPy's (a copy along the rows)
        out = tile.kernel(flat[0].reshape(o, 1, flat[0].shape[1]), reps=1).reshape(flat[0].shape)
    else:
        out = _tree(concat.kernel, flat)
    return out.reshape(lead + (sum(a.shape[ax] for a in arrs),) + tail)


@op(category="layout", inputs={"a": "O A", "b": "O B"}, output="O S", dtypes=ANY,
    reference=lambda arrays, axis=0: np.concatenate(arrays, axis=axis),
    kernel_reference=lambda a, b: np.concatenate([a, b], axis=1), frontend=_concat_frontend,
    derive=lambda d, p: {"S": d["A"] + d["B"]}, example={"O": 64, "A": 100, "B": 60})
def concat(a, b, *, dims):
    """[O, A] and [O, B] side by side: [O, A + B]."""
    # Two block copies into an undefined pure definition: a select over both inputs read each
    # through clamped indices, which Halide vectorizes as gathers (8 rows of 64x2048 joined
    # took 19 ms against NumPy's 0.5).
    s, o = hl.Var("s"), hl.Var("o")
    out = hl.Func("out")
    out[s, o] = hl.undef(a.type())
    ra = hl.RDom([hl.Range(0, dims.A)], "ra")
    rb = hl.RDom([hl.Range(0, dims.B)], "rb")
    out[ra.x, o] = a[ra.x, o]
    out[dims.A + rb.x, o] = b[rb.x, o]
    return out


def _stack_frontend(arrays, axis=0):
    """Joins arrays of one shape along a new axis (``np.stack``)."""
    name = "stack"
    arrs = _inputs(name, arrays)
    shape = arrs[0].shape
    for i, a in enumerate(arrs):
        if a.shape != shape:
            raise ShapeError(f"stack: arrays[{i}] has shape {a.shape} but arrays[0] has {shape};"
                             " all must have the same shape")
    ax = _axis(name, axis, len(shape) + 1)
    if _many(stack, arrs) or len(arrs) > 1 and traced(arrs):
        # Many large arrays, or a traced program: one join of the pieces with the new axis
        # (a program lowers it as one Func, a block copy per piece: ``Lowering._join``).
        pieces = [a.reshape(shape[:ax] + (1,) + shape[ax:]) for a in arrs]
        return join_tree(pieces, ax) if traced(arrs) else _rt._join_many(pieces, ax)
    o, inner = math.prod(shape[:ax]), math.prod(shape[ax:])
    flat = [a.reshape(o, inner) for a in arrs]
    if len(flat) == 1:                  # a copy with the new axis
        return tile.kernel(flat[0].reshape(o, 1, inner)).reshape(shape[:ax] + (1,) + shape[ax:])
    pairs = [stack.kernel(flat[i], flat[i + 1]).reshape(o, 2 * inner)
             for i in range(0, len(flat) - 1, 2)]
    if len(flat) % 2:
        pairs.append(flat[-1])
    out = _tree(lambda a, b: concat.kernel(a, b), pairs)
    return out.reshape(shape[:ax] + (len(arrs),) + shape[ax:])


@op(category="layout", inputs={"a": "O I", "b": "O I"}, output="O T I", dtypes=ANY,
    reference=lambda arrays, axis=0: np.stack(arrays, axis=axis),
    kernel_reference=lambda a, b: np.stack([a, b], axis=1), frontend=_stack_frontend,
    derive=lambda d, p: {"T": 2}, example={"O": 64, "I": 100})
def stack(a, b, *, dims):
    """[O, I] and [O, I] interleaved along a new middle axis: [O, 2, I]."""
    i, t, o = hl.Var("i"), hl.Var("t"), hl.Var("o")
    out = hl.Func("out")
    out[i, t, o] = hl.select(t == 0, a[i, o], b[i, o])
    return out


# -- split ---------------------------------------------------------------------------------------

def _split_bounds(name, n: int, indices_or_sections):
    if isinstance(indices_or_sections, (list, tuple, np.ndarray)):
        cuts = [_int(name, "indices_or_sections", c) for c in indices_or_sections]
        cuts = [min(max(c + n if c < 0 else c, 0), n) for c in cuts]
        edges = [0] + cuts + [n]
        return [(a, max(b, a)) for a, b in zip(edges[:-1], edges[1:])]
    k = _int(name, "indices_or_sections", indices_or_sections, low=1)
    if n % k:
        raise ParamError(f"split: {k} sections do not divide an axis of {n} equally (np.split); "
                         f"give a list of split indices instead")
    return [(j * (n // k), (j + 1) * (n // k)) for j in range(k)]


def _split_frontend(x, indices_or_sections, axis=0):
    """Splits ``x`` into a tuple of arrays along ``axis`` (``np.split``): an int ``k`` gives ``k``
    equal pieces; a list gives the cut indices. Like NumPy's, the pieces of an array are views of
    it; a kernel copies them inside a traced program and into ``out=`` (a tuple, one per piece)."""
    name = "split"
    x = as_array(x, name, "x")
    if x.ndim == 0:
        raise ShapeError("split: x must have at least one axis")
    ax = _axis(name, axis, x.ndim)
    bounds = _split_bounds(name, x.shape[ax], indices_or_sections)
    if _eager(split, x):
        lead = (slice(None),) * ax
        return tuple(x[lead + (slice(start, stop),)] for start, stop in bounds)
    shapes = [x.shape[:ax] + (stop - start,) + x.shape[ax + 1:] for start, stop in bounds]
    if traced([x]):
        if any(stop == start for start, stop in bounds):
            raise ZeroSizeError("split: an empty piece cannot be part of a traced program")
        return tuple(_along(split, x, ax, stop - start, start=start, length=stop - start)
                     for start, stop in bounds)
    # With out= (or a NumPy array inside a trace): each piece is a block of columns of the
    # [O, A*I] view, copied as [O, 1, L*I] so that the kernel's inner loop runs along the block.
    o, inner = math.prod(x.shape[:ax]), math.prod(x.shape[ax + 1:])
    rows = x.reshape(o, x.shape[ax] * inner)
    outs = _take_out(split, shapes, x.dtype)
    pieces = []
    for j, ((start, stop), shape) in enumerate(zip(bounds, shapes)):
        if stop == start:
            pieces.append(outs[j] if outs else np.empty(shape, x.dtype))
            continue
        kshape = (o, 1, (stop - start) * inner)
        block = rows[:, start * inner:stop * inner].reshape(kshape)
        piece = split.kernel(block, start=0, length=1,
                             out=outs[j].reshape(kshape) if outs else None)
        pieces.append(outs[j] if outs else piece.reshape(shape))
    return tuple(pieces)


def _split_validate(d, p):
    if p["start"] + p["length"] > d["A"]:
        raise ShapeError(f"split: the piece [{p['start']}, {p['start'] + p['length']}) does not "
                         f"fit an axis of {d['A']}")


@op(category="layout", inputs={"x": "O A I"}, output="O L I", dtypes=VIEW_TYPES,
    params=[Param("start", int, 0, low=0, high=_BIG, doc="first index of the piece"),
            Param("length", int, 1, low=1, high=_BIG, doc="length of the piece")],
    reference=lambda x, indices_or_sections, axis=0: tuple(np.split(x, indices_or_sections,
                                                                    axis)),
    kernel_reference=lambda x, start=0, length=1: x[:, start:start + length],
    frontend=_split_frontend, validate=_split_validate,
    derive=lambda d, p: {"L": p["length"]}, example=_OAI)
def split(x, *, start, length, dims):
    """One piece of a split: x[:, start:start + length, :]."""
    i, ll, o = hl.Var("i"), hl.Var("l"), hl.Var("o")
    out = hl.Func("out")
    out[i, ll, o] = x[i, ll + start, o]
    return out


# -- pad -----------------------------------------------------------------------------------------

_MODES = ("constant", "reflect", "replicate", "circular")
#: np.pad's names of the same modes.
_NUMPY_MODES = {"edge": "replicate", "wrap": "circular"}


def _numpy_pad_pairs(name, pad, ndim):
    """np.pad's ``pad_width``: an int, ``(n,)``, ``((before, after),)`` for every axis, or one
    ``(before, after)`` (or ``(n,)``) per axis from the first."""
    def pair(p):
        if isinstance(p, (list, tuple, np.ndarray)):
            if len(p) not in (1, 2):
                raise ParamError(f"{name}: each entry of NumPy's pad form is (before, after) or "
                                 f"(n,); got {tuple(p)!r}")
            vals = [_int(name, "pad", v) for v in p]
            return (vals[0], vals[-1])
        v = _int(name, "pad", p)
        return (v, v)

    rows = [pad] if not isinstance(pad, (list, tuple, np.ndarray)) else list(pad)
    if len(rows) == 1:
        rows = rows * ndim
    elif len(rows) != ndim:
        raise ParamError(f"{name}: NumPy's pad form needs one (before, after) pair per axis "
                         f"(or a single pair for all), from the first axis; got {len(rows)} "
                         f"for rank {ndim}")
    return {a: pair(r) for a, r in enumerate(rows)}


def _pad_pairs(name, pad, ndim):
    nested = isinstance(pad, (list, tuple)) and any(
        isinstance(p, (list, tuple, np.ndarray)) for p in pad)
    if nested or isinstance(pad, (int, np.integer)) and not isinstance(pad, bool):
        return _numpy_pad_pairs(name, pad, ndim)
    if isinstance(pad, np.ndarray):     # an array of widths is NumPy's form
        return _numpy_pad_pairs(name, pad.tolist() if pad.ndim == 2 else [pad.tolist()], ndim)
    if not isinstance(pad, (list, tuple)) or len(pad) % 2 or len(pad) // 2 > ndim:
        raise ParamError(f"{name}: 'pad' must be a flat tuple of (before, after) pairs, last "
                         f"axis first, at most {ndim} pairs for rank {ndim} (torch's form), or "
                         f"NumPy's pad_width (an int, or ((before, after), ...) from the first "
                         f"axis); got {pad!r}")
    vals = [_int(name, "pad", v) for v in pad]
    return {ndim - 1 - j: (vals[2 * j], vals[2 * j + 1]) for j in range(len(vals) // 2)}


def _pad_check(n: int, lo: int, hi: int, mode: str):
    """torch's limits on padding an axis of ``n`` by ``(lo, hi)`` (a negative count crops)."""
    kept = n - max(-lo, 0) - max(-hi, 0)       # what the crops leave of the axis
    if n + lo + hi < 0 or (mode == "constant" and kept < 0):
        raise ParamError(f"pad: padding ({lo}, {hi}) crops more than the axis ({n}) holds")
    if mode == "reflect" and max(lo, hi) >= n:
        raise ParamError(f"pad: reflect padding ({lo}, {hi}) must be smaller than the axis ({n})")
    if mode == "circular" and n + lo + hi > 0 and max(lo, hi) > kept:
        where = f"the axis ({n})" if kept == n else f"what the crops leave of the axis ({kept})"
        raise ParamError(f"pad: circular padding ({lo}, {hi}) must be at most {where}")


def _pad_frontend(x, pad, mode="constant", value=0.0):
    """Pads ``x`` like ``torch.nn.functional.pad``: ``pad = (left, right, top, bottom, ...)``
    from the last axis backwards. ``mode``: ``"constant"`` (``value``), ``"reflect"`` (mirror
    without repeating the edge; each pad < the axis), ``"replicate"`` (edge repeated) or
    ``"circular"`` (wrap around; each pad <= the axis).

    NumPy's ``pad_width`` form is accepted too: an int, or (before, after) pairs from the
    first axis (``((1, 2), (0, 3))``; a single pair applies to every axis), and NumPy's mode
    names ``"edge"`` and ``"wrap"``: ``pad(x, ((1, 1), (2, 0)), "edge")`` is
    ``np.pad(x, ((1, 1), (2, 0)), "edge")``. (A flat tuple of ints is always torch's form.)

    A negative pad crops, as in torch: ``pad(x, (-1, 2))`` drops the first element of the last
    axis and adds two at its end. Element ``p`` of the result is element ``p - before`` of the
    axis extended by the mode (so reflect and replicate read the whole axis, and the crops may
    not exceed it in constant mode); circular, as torch's, wraps around what the crops leave
    (each pad at most that). A result with an empty axis is an empty array (eager calls only).
    A 0-d ``x`` takes only ``pad=()``: a copy, in every mode (torch's constant mode; its other
    modes refuse a 0-d input).

    Example:
        >>> import numpy as np, pypto
        >>> pypto.ops.pad(np.arange(5.0), (-1, 2)).tolist()
        [1.0, 2.0, 3.0, 4.0, 0.0, 0.0]
    """
    name = "pad"
    x = as_array(x, name, "x")
    mode = _NUMPY_MODES.get(mode, mode) if isinstance(mode, str) else mode
    if mode not in _MODES:
        raise ParamError(f"pad: 'mode' must be one of {list(_MODES)} (or NumPy's 'edge' and "
                         f"'wrap'), got {mode!r}")
    pairs = _pad_pairs(name, pad, x.ndim)
    if x.ndim == 0:                 # pad == (): a copy (torch's, in constant mode)
        return _pad_frontend(x.reshape(1), (), mode, value).reshape(())
    for a, (before, after) in pairs.items():
        _pad_check(x.shape[a], before, after, mode)
    final = tuple(n + sum(pairs.get(a, (0, 0))) for a, n in enumerate(x.shape))
    if 0 in final and 0 not in x.shape:     # cropped to nothing: torch's empty result
        if traced([x]):
            raise ShapeError(f"pad: the padding {tuple(pad)} leaves shape {final} with an empty "
                             f"axis; a traced program cannot hold a zero-size array")
        return np.empty(final, dtype=x.dtype)
    todo = [(a, p) for a, p in sorted(pairs.items(), reverse=True) if p != (0, 0)] or \
        [(x.ndim - 1, (0, 0))]
    for a, (before, after) in todo:
        x = _along(globals()["pad"], x, a, x.shape[a] + before + after, before=before, after=after,
                   mode=mode, value=float(value))
    return x


def _pad_validate(d, p):
    _pad_check(d["A"], p["before"], p["after"], p["mode"])


def _pad_kernel_ref(x, before=0, after=0, mode="constant", value=0.0):
    np_mode = {"replicate": "edge", "circular": "wrap"}.get(mode, mode)
    kw = {"constant_values": value} if mode == "constant" else {}
    n, crop_lo, crop_hi = x.shape[1], max(-before, 0), max(-after, 0)
    lo, hi = max(before, 0), max(after, 0)
    if mode == "circular":              # torch's: crop, then wrap around what is left
        return np.pad(x[:, crop_lo:n - crop_hi], ((0, 0), (lo, hi), (0, 0)), mode="wrap")
    full = np.pad(x, ((0, 0), (lo, hi), (0, 0)), mode=np_mode, **kw)
    return full[:, crop_lo:full.shape[1] - crop_hi]


@op(category="layout", inputs={"x": "O A I"}, output="O P I", dtypes=ANY,
    params=[Param("before", int, 0, low=-_BIG, high=_BIG,
                  doc="elements added before (a negative count crops)"),
            Param("after", int, 0, low=-_BIG, high=_BIG,
                  doc="elements added after (a negative count crops)"),
            Param("mode", str, "constant", choices=_MODES, doc="how new elements are filled"),
            Param("value", float, 0.0, doc="the fill of constant padding, in x's dtype's range "
                  "(inf and NaN for floats)", finite=False)],
    reference=lambda x, pad, mode="constant", value=0.0: _pad_frontend(x, pad, mode, value),
    kernel_reference=_pad_kernel_ref, frontend=_pad_frontend, validate=_pad_validate,
    derive=lambda d, p: {"P": d["A"] + p["before"] + p["after"]}, example=_OAI)
def pad(x, *, before, after, mode, value, dims):
    """Padding of the middle axis of [O, A, I] by ``before`` and ``after`` elements; a negative
    count crops (out[p] reads the extended axis at p - before; circular wraps around what the
    crops leave, as torch's)."""
    i, p, o = hl.Var("i"), hl.Var("p"), hl.Var("o")
    n = dims.A
    q = p - before
    if mode == "circular" and min(before, after) < 0:
        crop_lo = max(-before, 0)
        kept = n - crop_lo - max(-after, 0)
        src = crop_lo + (p - max(before, 0)) % hl.max(kept, 1)
    elif mode == "reflect":
        period = hl.max(2 * n - 2, 1)
        m = q % period                      # Halide's % is Euclidean: never negative
        src = hl.select(m < n, m, period - m)
    elif mode == "circular":
        src = q % n
    else:
        src = q
    src = hl.clamp(src, 0, n - 1)
    val = x[i, src, o]
    out = hl.Func("out")
    if mode == "constant":
        val = hl.select((q >= 0) & (q < n), val, fill("pad", "value", x.type(), value))
    out[i, p, o] = val
    return out


# -- tile, repeat, flip, roll --------------------------------------------------------------------

def _reps(name, reps, ndim, low=1):
    items = tuple(reps) if isinstance(reps, (list, tuple)) else (reps,)
    items = tuple(_int(name, "reps", r, low=low) for r in items)
    return (1,) * (ndim - len(items)) + items


def _tile_frontend(x, reps):
    """Repeats the whole of ``x`` ``reps`` times per axis (``np.tile``; reps >= 0, 0 giving an
    empty axis)."""
    name = "tile"
    x = as_array(x, name, "x")
    reps = _reps(name, reps, x.ndim, low=0 if type(x) is np.ndarray else 1)
    if len(reps) > x.ndim:
        x = x.reshape((1,) * (len(reps) - x.ndim) + x.shape)
    if 0 in reps:           # no copies along an axis: it is empty, the kernels' empty result
        for a, r in enumerate(reps):
            if r == 0:
                x = np.take(x, [], axis=a)
        reps = tuple(max(r, 1) for r in reps)
    if x.ndim == 0:                      # np.tile(scalar, ()): a copy
        return tile.kernel(x.reshape(1, 1, 1), reps=1).reshape(())
    final = tuple(n * r for n, r in zip(x.shape, reps))
    outs = _take_out(tile, [final], x.dtype)
    todo = [a for a, r in enumerate(reps) if r > 1] or [x.ndim - 1]
    for j, a in enumerate(todo):
        # Tiling axis a repeats each whole block x[o, :, ...] (the axes from a on, contiguous):
        # the kernel form [O, 1, block] copies along the block, its innermost axis.
        s = x.shape
        o, block = math.prod(s[:a]), math.prod(s[a:])
        kshape = (o, reps[a], block)
        last = outs is not None and j == len(todo) - 1
        y = tile.kernel(x.reshape(o, 1, block), reps=reps[a],
                        out=outs[0].reshape(kshape) if last else None)
        x = y.reshape(s[:a] + (s[a] * reps[a],) + s[a + 1:])
    return outs[0] if outs is not None else x


@op(category="layout", inputs={"x": "O A I"}, output="O T I", dtypes=ANY,
    params=[Param("reps", int, 1, low=1, high=_BIG, doc="copies along the axis")],
    reference=lambda x, reps: np.tile(x, reps),
    kernel_reference=lambda x, reps=1: np.tile(x, (1, reps, 1)), frontend=_tile_frontend,
    derive=lambda d, p: {"T": d["A"] * p["reps"]}, example=_OAI)
def tile(x, *, reps, dims):
    """The middle axis of [O, A, I] repeated as a whole: out[:, k * A + a] = x[:, a].

    One block copy (update) over the copies k and the run a: a row's copies are written one
    after the other, in order, while its run of A (times I) elements is in cache. (One update per
    copy made a pass over the whole output per copy, reading x again each time: [2048, 1024, 1]
    twice took 1.5x NumPy's time, one thread; a source index t % A per element is a division and
    an index vector, which Halide reads as a gather.)"""
    i, t, o = hl.Var("i"), hl.Var("t"), hl.Var("o")
    out = hl.Func("out")
    out[i, t, o] = hl.undef(x.type())
    r = hl.RDom([hl.Range(0, dims.A), hl.Range(0, reps)], "r")
    out[i, r.x + r.y * dims.A, o] = x[i, r.x, o]
    return out


def _repeat_frontend(x, repeats, axis=None):
    """Repeats each element ``repeats`` times along ``axis`` (``np.repeat`` with an int
    ``repeats`` >= 0, 0 giving an empty axis; ``axis=None`` repeats the flattened array)."""
    name = "repeat"
    x = as_array(x, name, "x")
    r = _int(name, "repeats", repeats, low=0 if type(x) is np.ndarray else 1)
    if axis is None:
        x, axis = x.reshape(-1), 0
    ax = _axis(name, axis, x.ndim)
    if r == 0:              # no copies (np.repeat): the kernel's empty result, of x's dtype
        x, r = np.take(x, [], axis=ax), 1
    return _along(repeat, x, ax, x.shape[ax] * r, repeats=r)


@op(category="layout", inputs={"x": "O A I"}, output="O T I", dtypes=ANY,
    params=[Param("repeats", int, 1, low=1, high=_BIG, doc="copies of each element")],
    reference=lambda x, repeats, axis=None: np.repeat(x, repeats, axis),
    kernel_reference=lambda x, repeats=1: np.repeat(x, repeats, axis=1),
    frontend=_repeat_frontend, derive=lambda d, p: {"T": d["A"] * p["repeats"]}, example=_OAI)
def repeat(x, *, repeats, dims):
    """Each element of the middle axis repeated: out[:, t] = x[:, t // repeats]."""
    i, t, o = hl.Var("i"), hl.Var("t"), hl.Var("o")
    out = hl.Func("out")
    out[i, t, o] = x[i, t / repeats, o]
    return out


def _axes_list(name, axis, ndim):
    if axis is None:
        return list(range(ndim))
    items = axis if isinstance(axis, (list, tuple)) else (axis,)
    out = sorted({_axis(name, a, ndim) for a in items})
    if len(out) != len(items):
        raise ParamError(f"{name}: 'axis' repeats an axis: {axis!r}")
    return out


def _runs(axes):
    """Adjacent axes grouped: flipping a run of adjacent axes is reversing their merged axis."""
    runs = []
    for a in axes:
        if runs and runs[-1][-1] == a - 1:
            runs[-1].append(a)
        else:
            runs.append([a])
    return runs


def _flip_frontend(x, axis=None):
    """Reverses the order of elements along ``axis`` (``np.flip``; None: every axis, ``()``:
    none, the result equal to ``x``). Like NumPy's, the result for an array is a view of it; a
    kernel copies it inside a traced program and into ``out=``."""
    name = "flip"
    x = as_array(x, name, "x")
    axes = _axes_list(name, axis, x.ndim)
    if _eager(flip, x):
        rev = slice(None, None, -1)
        return x[tuple(rev if a in axes else slice(None) for a in range(x.ndim)) + (Ellipsis,)]
    if x.ndim == 0:
        return flip.kernel(x.reshape(1, 1, 1)).reshape(())
    shape = x.shape
    outs = _take_out(flip, [shape], x.dtype)
    if not axes:                        # np.flip(x, ()) reverses nothing: a copy
        flat = (1, 1, x.size)
        y = tile.kernel(x.reshape(flat), reps=1,
                        out=outs[0].reshape(flat) if outs is not None else None)
        return outs[0] if outs is not None else y.reshape(shape)
    runs = _runs(axes)
    for j, run in enumerate(runs):
        a, b = run[0], run[-1] + 1
        kshape = (math.prod(shape[:a]), math.prod(shape[a:b]), math.prod(shape[b:]))
        last = outs is not None and j == len(runs) - 1
        x = flip.kernel(x.reshape(kshape), out=outs[0].reshape(kshape) if last else None)
        x = x.reshape(shape)
    return outs[0] if outs is not None else x


@op(category="layout", inputs={"x": "O A I"}, output="O A I", dtypes=VIEW_TYPES,
    reference=lambda x, axis=None: np.flip(x, axis).copy(),
    kernel_reference=lambda x: x[:, ::-1].copy(), frontend=_flip_frontend, example=_OAI)
def flip(x, *, dims):
    """The middle axis of [O, A, I] reversed."""
    i, a, o = hl.Var("i"), hl.Var("a"), hl.Var("o")
    out = hl.Func("out")
    out[i, a, o] = x[i, dims.A - 1 - a, o]
    return out


def _roll_frontend(x, shift, axis=None):
    """Rolls elements along ``axis`` (``np.roll``): the element at ``j`` moves to
    ``(j + shift) % n``; ``axis=None`` rolls the flattened array. ``shift`` and ``axis`` may be
    sequences; they broadcast against each other, and the shifts of a repeated axis add up, as
    in NumPy. A shift of any size is taken modulo the axis."""
    name = "roll"
    x = as_array(x, name, "x")
    shape = x.shape
    if axis is None:
        x, axis = x.reshape(-1), 0
    seq = (list, tuple, np.ndarray)
    axes = list(axis) if isinstance(axis, seq) else [axis]
    shifts = list(np.asarray(shift).ravel()) if isinstance(shift, np.ndarray) else \
        list(shift) if isinstance(shift, (list, tuple)) else [shift]
    if len(shifts) != len(axes) and 1 not in (len(shifts), len(axes)):
        raise ParamError(f"roll: 'shift' {shift!r} and 'axis' {axis!r} do not broadcast "
                         f"({len(shifts)} shifts against {len(axes)} axes)")
    n = max(len(shifts), len(axes))
    total: dict[int, int] = {}
    for a, s in zip(axes * n if len(axes) == 1 else axes,
                    shifts * n if len(shifts) == 1 else shifts):
        a = _axis(name, a, x.ndim)
        total[a] = total.get(a, 0) + any_int(name, "shift", s)     # taken modulo the axis
    todo = [(a, s % x.shape[a]) for a, s in sorted(total.items())
            if x.shape[a] and s % x.shape[a]] or [(x.ndim - 1, 0)]     # an empty axis: no roll
    outs = _take_out(roll, [shape], x.dtype)
    if x.size == 0 and type(x) is np.ndarray:      # nothing moves (np.roll of an empty array)
        return outs[0] if outs is not None else np.empty(shape, x.dtype)
    for j, (a, s) in enumerate(todo):
        # Rolling axis a by s rolls the rows of the [O, A*I] view by s*I elements, which is
        # rolling them by s*I / g in runs of g = I * gcd(A, s) elements: the kernel's innermost
        # axis is the longest run that moves as a whole (all of a row when nothing moves).
        o, n = math.prod(x.shape[:a]), math.prod(x.shape[a:])
        g = n // x.shape[a] * math.gcd(x.shape[a], s)
        kshape = (o, n // g, g)
        last = outs is not None and j == len(todo) - 1
        y = roll.kernel(x.reshape(kshape), shift=s * (n // x.shape[a]) // g,
                        out=outs[0].reshape(kshape) if last else None)
        x = y.reshape(x.shape)
    return outs[0] if outs is not None else x.reshape(shape)


def _roll_validate(d, p):
    if p["shift"] >= d["A"]:
        raise ParamError(f"roll: the kernel's 'shift' must be in [0, {d['A']}) for an axis of "
                         f"{d['A']}, got {p['shift']} (the public call reduces it modulo the axis)")


@op(category="layout", inputs={"x": "O A I"}, output="O A I", dtypes=ANY,
    params=[Param("shift", int, 0, low=0, high=_BIG, doc="positions to roll, in [0, A)")],
    reference=lambda x, shift, axis=None: np.roll(x, shift, axis),
    kernel_reference=lambda x, shift=0: np.roll(x, shift, axis=1), frontend=_roll_frontend,
    validate=_roll_validate, example=_OAI)
def roll(x, *, shift, dims):
    """The middle axis of [O, A, I] rolled: out[:, a] = x[:, (a - shift) mod A].

    Two block copies (updates): x[:, :A - shift] to out[:, shift:], then x[:, A - shift:] to
    out[:, :shift] (none for shift 0). Each reads and writes runs in order; a source index found
    per element would be an index vector, which Halide reads as a gather."""
    i, a, o = hl.Var("i"), hl.Var("a"), hl.Var("o")
    out = hl.Func("out")
    out[i, a, o] = hl.undef(x.type())
    body = hl.RDom([hl.Range(0, dims.A - shift)], "rb")
    out[i, body.x + shift, o] = x[i, body.x, o]
    if shift:
        wrap = hl.RDom([hl.Range(0, shift)], "rw")
        out[i, wrap.x, o] = x[i, wrap.x + dims.A - shift, o]
    return out
