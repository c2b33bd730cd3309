"""Indexing ops: take_along_axis, gather, index_select, embedding, one_hot, scatter_add,
masked_fill, sequence_mask, tril, triu, diag, diagonal, eye and arange.

Names and arguments follow NumPy (``take_along_axis``, ``tril``, ``triu``, ``diag``,
``diagonal``, ``eye``, ``arange``) or PyTorch (``gather(x, dim, index)``, ``index_select``,
``scatter_add``, ``masked_fill``, ``F.embedding``, ``F.one_hot``); ``sequence_mask(lengths,
max_len)`` is TensorFlow's. Indices are int32 or int64 arrays.

Out-of-range indices are a ``ParamError`` naming the argument, the position, the value and the
valid range, in traced programs too: there the indices a program is given (an argument, a weight,
or a view of one) are checked on every call before its pipeline runs, with the eager call's
message and the line that traced the op. Indices the program computes itself (an argmax plus
an offset) are computed by a pipeline of their own, then checked the same way before the
pipeline that reads them. Under ``@pypto.fuse`` (one pipeline) and for the indices the
library's own gradient rules compute (:func:`trusted_indices`), the kernels clamp indices into
range instead (they never read or write outside an array). ``take_along_axis`` accepts negative
indices like NumPy (``-1`` is the last); the PyTorch-named ops refuse them, as PyTorch does.

Kernel forms: ops along one axis see [O, A, I] (see ``layout``): ``take_along_axis`` and
``gather`` read x [O, A, I] at index [O, J, I]; ``index_select`` reads x [O, A, I] at index [J].
"""

from __future__ import annotations

import contextlib
import math
import threading

import halide as hl
import numpy as np

from ..errors import DtypeError, ParamError, ShapeError
from ..runtime import as_array, as_traced, traced
from ._consts import fill
from ._args import int_arg
from ._op import Param, op
from .layout import ANY, _axis, _int, _oai, bcast

_IDX = ("int32", "int64")
_BIG = 1 << 30


def _e(v):
    return v if isinstance(v, hl.Expr) else hl.Expr(v)


def _checked(v, n, what: str, wrap: bool = False):
    """Index ``v`` as an Int(32) in [0, n): negative ones wrapped when ``wrap``, then clamped, so
    that no index ever reads or writes outside an array (the frontends check the values)."""
    if str(n) in ("1", "<halide.Expr of type int32: 1>"):   # an int or a constant Expr
        # Every index reads position 0. Said so without reading v: the clamp to [0, 0] was
        # simplified to 0 after the index Func was scheduled at root, which then had no reader
        # and no bounds (a fused program gathering computed indices along an axis of extent 1
        # failed to compile: "Symbol not found: n4_out.s0.n4_x1.max").
        return hl.Expr(0)
    v = _e(v)
    if wrap:
        v = hl.select(v < 0, v + hl.cast(v.type(), n), v)
    return hl.clamp(hl.cast(hl.Int(32), v), 0, n - 1)


_trust = threading.local()


@contextlib.contextmanager
def trusted_indices():
    """Within it, traced index values get no per-call check (and so no pipeline of their own):
    for indices the library computes in range by construction, or clamps on purpose (a gradient
    rule's gathers of clipped coordinates, where a NaN coordinate is read as clamped)."""
    before = getattr(_trust, "on", False)
    _trust.on = True
    try:
        yield
    finally:
        _trust.on = before


def trusted() -> bool:
    return getattr(_trust, "on", False)


def check_range(name: str, arg: str, idx, n: int, wrap: bool = False, skip=None) -> None:
    """ParamError naming the first index of ``idx`` outside [0, n) ([-n, n) when ``wrap``);
    ``skip`` is a value that is allowed anyway (ignore_index). A traced Tensor holds no values:
    a program checks its array on each call (``Tensor.require_values``), unless
    :func:`trusted_indices` is on."""
    if not isinstance(idx, np.ndarray):
        require = getattr(idx, "require_values", None)    # a traced value: checked per call
        if require is not None and not trusted():
            require(lambda a: check_range(name, arg, a, n, wrap, skip))
        return
    if idx.size == 0:
        return
    lo = -n if wrap else 0
    bad = (idx < lo) | (idx >= n)
    if skip is not None:
        bad &= idx != skip
    if bad.any():
        at = np.unravel_index(int(np.flatnonzero(bad)[0]), idx.shape)
        raise ParamError(f"{name}: {arg}[{', '.join(map(str, at))}] = {int(idx[at])} is out of "
                         f"range; valid indices are {lo} to {n - 1}")


def _sigs(data=ANY, idx=_IDX):
    return [(d, i) for d in data for i in idx]


def _index_array(name, value, arg="index"):
    a = as_array(value, name, arg)
    if a.dtype.name not in _IDX:
        raise DtypeError(f"{name}: '{arg}' must be an int32 or int64 array, got {a.dtype.name}")
    return a


def _pair(name, x, idx):
    x, idx = as_array(x, name, "x"), _index_array(name, idx)
    if traced([x, idx]):
        x, idx = as_traced([x, idx])
    return x, idx


# -- take_along_axis and gather ------------------------------------------------------------------

def _along_call(the_op, name, x, idx, axis):
    if idx.ndim != x.ndim:
        raise ShapeError(f"{name}: index must have the rank of x ({x.ndim}), got shape "
                         f"{idx.shape}")
    ax = _axis(name, axis, x.ndim)
    check_range(name, "index" if the_op is gather else "indices", idx, x.shape[ax],
                wrap=the_op is take_along_axis)
    out = the_op.kernel(_oai(x, ax), _oai(idx, ax))
    return out.reshape(idx.shape)


def _take_frontend(arr, indices, axis):
    """``np.take_along_axis``: out[..., j, ...] = arr[..., indices[..., j, ...], ...] along
    ``axis``; the other axes of ``indices`` broadcast against ``arr``. ``axis=None`` takes the
    1-D ``indices`` into the flattened ``arr``. Negative indices count from the end."""
    name = "take_along_axis"
    x, idx = _pair(name, arr, indices)
    if axis is None:
        if idx.ndim != 1:
            raise ShapeError(f"take_along_axis: with axis=None (arr flattened) indices must be "
                             f"1-D, got shape {idx.shape}")
        x, axis = x.reshape(-1), 0
    if x.ndim == 0:
        raise ShapeError("take_along_axis: arr is 0-d and has no axis to take along; give "
                         "axis=None (arr flattened) and 1-D indices")
    ax = _axis(name, axis, x.ndim)
    if idx.ndim == x.ndim:
        others = [tuple(n for i, n in enumerate(a.shape) if i != ax) for a in (x, idx)]
        try:
            shape = list(np.broadcast_shapes(*others))
        except ValueError:
            raise ShapeError(f"take_along_axis: arr {x.shape} and indices {idx.shape} do not "
                             f"broadcast on the axes other than axis {ax} ({others[0]} against "
                             f"{others[1]})") from None
        xs, js = list(shape), list(shape)
        xs.insert(ax, x.shape[ax])
        js.insert(ax, idx.shape[ax])
        x, idx = bcast(x, tuple(xs)), bcast(idx, tuple(js))
    return _along_call(take_along_axis, name, x, idx, ax)


def _gather_alg(x, index, dims, what, wrap):
    i, j, o = hl.Var("i"), hl.Var("j"), hl.Var("o")
    out = hl.Func("out")
    out[i, j, o] = x[i, _checked(index[i, j, o], dims.A, what, wrap), o]
    return out


_GATHER_EX = {"O": 4, "A": 9, "I": 5, "J": 7}


def _gather_inputs(wrap):
    def make(dims, dtypes, params, rng):
        x = (rng.uniform(-1, 1, (dims["O"], dims["A"], dims["I"])) * 10).astype(dtypes[0])
        lo = -dims["A"] if wrap else 0
        idx = rng.integers(lo, dims["A"], (dims["O"], dims["J"], dims["I"])).astype(dtypes[1])
        return [x, idx]
    return make


@op(category="indexing", inputs={"x": "O A I", "index": "O J I"}, output="O J I",
    dtypes=_sigs(), reference=lambda arr, indices, axis: np.take_along_axis(arr, indices, axis),
    kernel_reference=lambda x, index: np.take_along_axis(x, index.astype(np.int64), 1),
    frontend=_take_frontend, make_inputs=_gather_inputs(True), example=_GATHER_EX)
def take_along_axis(x, index, *, dims):
    """out[o, j, i] = x[o, index[o, j, i], i]; negative indices count from the end."""
    return _gather_alg(x, index, dims, "indices", True)


def _gather_frontend(x, dim, index):
    """``torch.gather``: out[..., j, ...] = x[..., index[..., j, ...], ...] along ``dim``;
    ``index`` may be shorter than ``x`` on the other axes (only its extent is read). As in
    torch, a 0-d ``x`` or ``index`` counts as one of shape (1,) against a 1-D or 0-d other: the
    result has ``index``'s shape."""
    name = "gather"
    x, idx = _pair(name, x, index)
    if min(x.ndim, idx.ndim) == 0 and max(x.ndim, idx.ndim) <= 1:
        # torch reads a 0-d x or index as one of shape (1,); the result has index's shape
        _axis(name, dim, x.ndim)
        return _gather_frontend(x.reshape(-1), 0, idx.reshape(-1)).reshape(idx.shape)
    if idx.ndim != x.ndim:
        raise ShapeError(f"gather: index must have the rank of x ({x.ndim}), got {idx.shape}")
    ax = _axis(name, dim, x.ndim)
    for d in range(x.ndim):
        if d != ax and idx.shape[d] > x.shape[d]:
            raise ShapeError(f"gather: index has {idx.shape[d]} elements on axis {d} but x "
                             f"only {x.shape[d]} (index {idx.shape}, x {x.shape})")
    x = x[tuple(slice(None) if d == ax else slice(0, idx.shape[d]) for d in range(x.ndim))]
    return _along_call(gather, name, x, idx, ax)


@op(category="indexing", inputs={"x": "O A I", "index": "O J I"}, output="O J I",
    dtypes=_sigs(), reference=lambda x, dim, index: np.take_along_axis(
        np.asarray(x)[tuple(slice(0, n) if d != dim % np.ndim(x) else slice(None)
                            for d, n in enumerate(np.shape(index)))], np.asarray(index), dim),
    kernel_reference=lambda x, index: np.take_along_axis(x, index.astype(np.int64), 1),
    frontend=_gather_frontend, make_inputs=_gather_inputs(False), example=_GATHER_EX)
def gather(x, index, *, dims):
    """out[o, j, i] = x[o, index[o, j, i], i] (torch.gather); index in [0, A)."""
    return _gather_alg(x, index, dims, "index", False)


def _index_select_frontend(x, dim, index):
    """``torch.index_select``: the slices of ``x`` at the 1-D ``index`` along ``dim``. As in
    torch, a 0-d ``index`` is one of shape (1,), and a 0-d ``x`` takes exactly one index
    (0), giving a 0-d result."""
    name = "index_select"
    x, idx = _pair(name, x, index)
    if idx.ndim > 1:
        raise ShapeError(f"index_select: index must be 1-D (or 0-d), got shape {idx.shape}")
    if idx.ndim == 0:
        idx = idx.reshape(1)            # torch reads a 0-d index as one of shape (1,)
    if x.ndim == 0:
        # ... and a 0-d x as one of shape (1,), giving a 0-d result for its one index
        _axis(name, dim, 0)
        if idx.shape != (1,):
            raise ShapeError(f"index_select: a 0-d x takes exactly one index, got "
                             f"{idx.shape[0]}")
        return _index_select_frontend(x.reshape(1), 0, idx).reshape(())
    ax = _axis(name, dim, x.ndim)
    check_range(name, "index", idx, x.shape[ax])
    out = index_select.kernel(_oai(x, ax), idx)
    return out.reshape(x.shape[:ax] + idx.shape + x.shape[ax + 1:])


def _index_select_inputs(dims, dtypes, params, rng):
    x = rng.uniform(-1, 1, (dims["O"], dims["A"], dims["I"])).astype(dtypes[0])
    return [x, rng.integers(0, dims["A"], dims["J"]).astype(dtypes[1])]


@op(category="indexing", inputs={"x": "O A I", "index": "J"}, output="O J I", dtypes=_sigs(),
    reference=lambda x, dim, index: np.take(x, index, axis=dim),
    kernel_reference=lambda x, index: np.take(x, index, axis=1),
    frontend=_index_select_frontend, make_inputs=_index_select_inputs, example=_GATHER_EX)
def index_select(x, index, *, dims):
    """out[o, j, i] = x[o, index[j], i]."""
    i, j, o = hl.Var("i"), hl.Var("j"), hl.Var("o")
    k = hl.Func("k")
    k[j] = _checked(index[j], dims.A, "index")
    out = hl.Func("out")
    out[i, j, o] = x[i, k[j], o]
    return out


# -- embedding and one_hot -----------------------------------------------------------------------

def _embedding_frontend(input, weight, padding_idx=None, max_norm=None,  # noqa: A002
                        norm_type=2.0):
    """``F.embedding``: the rows of ``weight`` [V, D] at the integer ``input`` (any shape),
    giving ``input.shape + (D,)``. ``padding_idx`` only matters to gradients: as in torch, that
    row of ``weight`` gets none.

    ``max_norm``: each returned row whose ``norm_type``-norm exceeds it is scaled by
    ``max_norm / (norm + 1e-7)``, torch's renormalisation, but functional: ``weight`` is not
    modified (torch rescales those rows of ``weight`` in place, under no_grad). The gradient is
    that of the returned rows, the scale included (torch's flows to the rescaled weight as if
    no scaling had happened)."""
    name = "embedding"
    idx, w = _index_array(name, input, "input"), as_array(weight, name, "weight")
    if traced([idx, w]):
        idx, w = as_traced([idx, w])
    if w.ndim != 2:
        raise ShapeError(f"embedding: weight must be 2-D [V, D], got shape {w.shape}")
    if padding_idx is not None:
        _int(name, "padding_idx", padding_idx)
        if not -w.shape[0] <= padding_idx < w.shape[0]:
            raise ParamError(f"embedding: padding_idx {padding_idx} is not a row of weight "
                             f"({w.shape[0]} rows)")
    if max_norm is not None:
        _check_renorm(max_norm, norm_type)
    check_range(name, "input", idx, w.shape[0])
    kw = {} if padding_idx is None else {"padding_idx": padding_idx % w.shape[0]}
    out = embedding.kernel(idx.reshape(-1), w, **kw)
    if max_norm is not None:
        out = _renormed(out, float(max_norm), norm_type)
    return out.reshape(idx.shape + (w.shape[1],))


def _is_real(v) -> bool:
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(
        v, (bool, np.bool_))


def _check_renorm(max_norm, norm_type) -> None:
    if not _is_real(max_norm) or not max_norm >= 0:       # (NaN fails >= 0)
        raise ParamError(f"embedding: 'max_norm' must be a number >= 0 (or None: no "
                         f"renormalisation), got {max_norm!r}")
    if not _is_real(norm_type) or not (norm_type >= 0 or norm_type == -math.inf):
        raise ParamError(f"embedding: 'norm_type' must be a number >= 0, inf or -inf (the p of "
                         f"the rows' p-norm), got {norm_type!r}")


def _renormed(rows, max_norm: float, norm_type):
    """[N, D] ``rows`` with those whose norm exceeds ``max_norm`` scaled down to it, in ops (so
    traced programs and gradients go through it)."""
    from .binary import add, div, mul, where   # indexing loads before these families
    from .compare import greater
    from .scan import vector_norm

    norms = vector_norm(rows, norm_type, axis=1, keepdims=True)            # [N, 1]
    scale = where(greater(norms, max_norm), div(max_norm, add(norms, 1e-7)), 1.0)
    return mul(rows, scale)


def _embedding_ref(input, weight, max_norm, norm_type):  # noqa: A002
    """NumPy lookup; with ``max_norm``, torch's renorm of each distinct row looked up (in float64,
    on a copy: the weight is not modified)."""
    w = np.asarray(weight)
    idx = np.asarray(input)
    if max_norm is None:
        return w[idx]
    w = w.astype(np.float64)
    for i in np.unique(idx):
        norm = np.linalg.norm(w[i], norm_type) if norm_type != 0 else np.count_nonzero(w[i])
        if norm > max_norm:
            w[i] = w[i] * (max_norm / (norm + 1e-7))
    return w[idx].astype(np.asarray(weight).dtype)


def _embedding_inputs(dims, dtypes, params, rng):
    return [rng.integers(0, dims["V"], dims["N"]).astype(dtypes[0]),
            rng.uniform(-1, 1, (dims["V"], dims["D"])).astype(dtypes[1])]


@op(category="indexing", inputs={"input": "N", "weight": "V D"}, output="N D",
    dtypes=[(i, f) for f in ("float32", "float64") for i in _IDX],
    params=[Param("padding_idx", int, -1, low=-1, high=1 << 30,
                  doc="a row of weight that gets no gradient (-1: none); the forward ignores it")],
    reference=lambda input, weight, padding_idx=None, max_norm=None, norm_type=2.0:  # noqa: A002
    _embedding_ref(input, weight, max_norm, norm_type),
    kernel_reference=lambda input, weight, padding_idx=-1: weight[input],
    frontend=_embedding_frontend, make_inputs=_embedding_inputs,
    example={"N": 64, "V": 50, "D": 32})
def embedding(input, weight, *, dims):  # noqa: A002
    """out[n, d] = weight[input[n], d] (``padding_idx`` is for the gradient only)."""
    d, n = hl.Var("d"), hl.Var("n")
    k = hl.Func("k")
    k[n] = _checked(input[n], dims.V, "input")
    out = hl.Func("out")
    out[d, n] = weight[d, k[n]]
    return out


def _one_hot_frontend(tensor, num_classes=-1):
    """``F.one_hot``: int64 [..., C] with a 1 at each index. ``num_classes=-1`` takes the
    largest index plus one (NumPy arrays only: a traced program must give it)."""
    name = "one_hot"
    idx = _index_array(name, tensor, "tensor")
    num_classes = int_arg(name, "num_classes", num_classes)
    if num_classes == -1:
        if traced([idx]):
            raise ParamError("one_hot: give num_classes inside a traced program (the largest "
                             "index is data)")
        num_classes = int(idx.max()) + 1 if idx.size else 1
    c = _int(name, "num_classes", num_classes, low=1)
    check_range(name, "tensor", idx, c)
    return one_hot.kernel(idx.reshape(-1), num_classes=c).reshape(idx.shape + (c,))


def _one_hot_inputs(dims, dtypes, params, rng):
    return [rng.integers(0, params["num_classes"], dims["N"]).astype(dtypes[0])]


@op(category="indexing", inputs={"tensor": "N"}, output="N C", dtypes=list(_IDX),
    params=[Param("num_classes", int, 8, low=1, high=_BIG, doc="classes (output columns)")],
    reference=lambda tensor, num_classes=-1: np.eye(
        num_classes if num_classes > 0 else int(np.max(tensor)) + 1, dtype=np.int64)[tensor],
    kernel_reference=lambda tensor, num_classes=8: np.eye(num_classes, dtype=np.int64)[tensor],
    frontend=_one_hot_frontend, make_inputs=_one_hot_inputs,
    derive=lambda d, p: {"C": p["num_classes"]}, example={"N": 100})
def one_hot(tensor, *, num_classes, dims):
    """out[n, c] = 1 if tensor[n] == c else 0 (int64)."""
    c, n = hl.Var("c"), hl.Var("n")
    out = hl.Func("out")     # (an index out of range gives a row of zeros; nothing is read)
    out[c, n] = hl.cast(hl.Int(64), tensor[n] == hl.cast(tensor.type(), c))
    return out


# -- scatter_add ---------------------------------------------------------------------------------

def _scatter_add_frontend(input, dim, index, src):  # noqa: A002
    """``torch.scatter_add``: a copy of ``input`` with ``src[..., j, ...]`` added at
    ``index[..., j, ...]`` along ``dim``. ``index`` must match ``input`` on the other axes;
    ``src`` is read over ``index``'s extent. Duplicate indices all add."""
    name = "scatter_add"
    x, idx = _pair(name, input, index)
    s = as_array(src, name, "src")
    if traced([x, idx, s]):
        x, idx, s = as_traced([x, idx, s])
    if not (idx.ndim == x.ndim == s.ndim):
        raise ShapeError(f"scatter_add: input, index and src must have one rank, got "
                         f"{x.shape}, {idx.shape}, {s.shape}")
    ax = _axis(name, dim, x.ndim)
    for d in range(x.ndim):
        if (d != ax and idx.shape[d] != x.shape[d]) or idx.shape[d] > s.shape[d]:
            raise ShapeError(f"scatter_add: index {idx.shape} must equal input {x.shape} on "
                             f"every axis but {ax}, and fit in src {s.shape}")
    check_range(name, "index", idx, x.shape[ax])
    s = s[tuple(slice(0, n) for n in idx.shape)]
    return scatter_add.kernel(_oai(x, ax), _oai(idx, ax), _oai(s, ax)).reshape(x.shape)


def _scatter_ref(input, dim, index, src):  # noqa: A002
    out = np.array(input, copy=True)
    idx = np.asarray(index)
    src = np.asarray(src)[tuple(slice(0, n) for n in idx.shape)]
    grids = list(np.indices(idx.shape))
    grids[dim % out.ndim] = idx
    np.add.at(out, tuple(grids), src)
    return out


def _scatter_inputs(dims, dtypes, params, rng):
    o, a, i, j = dims["O"], dims["A"], dims["I"], dims["J"]
    return [rng.uniform(-1, 1, (o, a, i)).astype(dtypes[0]),
            rng.integers(0, a, (o, j, i)).astype(dtypes[1]),
            rng.uniform(-1, 1, (o, j, i)).astype(dtypes[2])]


@op(category="indexing", inputs={"input": "O A I", "index": "O J I", "src": "O J I"},
    output="O A I",
    dtypes=[(d, i, d) for d in ("float32", "float64", "int32", "int64") for i in _IDX],
    reference=_scatter_ref, kernel_reference=lambda input, index, src: _scatter_ref(
        input, 1, index, src),
    frontend=_scatter_add_frontend, make_inputs=_scatter_inputs, example=_GATHER_EX)
def scatter_add(input, index, src, *, dims):  # noqa: A002
    """out = input; out[o, index[o, j, i], i] += src[o, j, i] for every j, in order."""
    i, a, o = hl.Var("i"), hl.Var("a"), hl.Var("o")
    r = hl.RDom([hl.Range(0, dims.J)], "r")
    out = hl.Func("out")
    out[i, a, o] = input[i, a, o]
    out[i, _checked(index[i, r, o], dims.A, "index"), o] += src[i, r, o]
    return out


# -- masked_fill and sequence_mask ---------------------------------------------------------------

def _masked_fill_frontend(input, mask, value):  # noqa: A002
    """``torch.masked_fill``: ``value`` where the bool ``mask`` (broadcast to ``input``) is
    true, ``input`` elsewhere."""
    name = "masked_fill"
    x, m = as_array(input, name, "input"), as_array(mask, name, "mask")
    if traced([x, m]):
        x, m = as_traced([x, m])
    if m.dtype != np.bool_:
        raise DtypeError(f"masked_fill: mask must be a bool array, got {m.dtype.name}")
    try:
        m = bcast(m, x.shape)
    except ValueError:
        raise ShapeError(f"masked_fill: mask {m.shape} does not broadcast to input "
                         f"{x.shape}") from None
    if isinstance(value, str) or not hasattr(value, "__float__"):
        raise ParamError(f"masked_fill: 'value' must be a number (or a 0-d array), got "
                         f"{value!r}")
    try:
        float(value)
    except (TypeError, ValueError):   # an array of several numbers
        raise ParamError(f"masked_fill: 'value' must be one number, got {value!r}") from None
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool) \
            and int(float(value)) != int(value):
        # the fill reaches the kernel as a float64 parameter
        raise ParamError(f"masked_fill: value {int(value)} has no exact float64 form (fills are "
                         f"passed as float64, exact up to 2**53); use "
                         f"np.where(mask, {int(value)}, input)")
    c = x.shape[-1] if x.ndim else 1
    rows = math.prod(x.shape[:-1])
    out = masked_fill.kernel(x.reshape(rows, c), m.reshape(rows, c), value=float(value))
    return out.reshape(x.shape)


@op(category="indexing", inputs={"input": "R C", "mask": "R C"}, output="R C",
    dtypes=[(d, "bool") for d in ("float32", "float64", "int32", "int64")],
    params=[Param("value", float, 0.0, finite=False,
                  doc="the fill, in input's dtype's range (ints truncate a fraction; inf, "
                      "-inf and NaN for floats)")],
    reference=lambda input, mask, value: np.where(mask, np.asarray(value).astype(
        np.asarray(input).dtype), input),
    kernel_reference=lambda input, mask, value=0.0: np.where(mask, np.asarray(value).astype(
        input.dtype), input),
    frontend=_masked_fill_frontend, example={"R": 64, "C": 100})
def masked_fill(input, mask, *, value, dims):  # noqa: A002
    """out = value where mask else input."""
    c, r = hl.Var("c"), hl.Var("r")
    out = hl.Func("out")
    out[c, r] = hl.select(mask[c, r], fill("masked_fill", "value", input.type(), value),
                          input[c, r])
    return out


def _sequence_mask_frontend(lengths, max_len=None):
    """``tf.sequence_mask``: bool [..., max_len], true at positions ``j < lengths[...]``.
    ``max_len=None`` takes the largest length (NumPy arrays only)."""
    name = "sequence_mask"
    n = _index_array(name, lengths, "lengths")
    if max_len is None:
        if traced([n]):
            raise ParamError("sequence_mask: give max_len inside a traced program")
        max_len = max(int(np.max(n)), 1) if n.size else 1
    m = _int(name, "max_len", max_len, low=1)
    return sequence_mask.kernel(n.reshape(-1), max_len=m).reshape(n.shape + (m,))


@op(category="indexing", inputs={"lengths": "N"}, output="N L", dtypes=list(_IDX),
    params=[Param("max_len", int, 16, low=1, high=_BIG, doc="positions per sequence")],
    reference=lambda lengths, max_len=None: np.arange(
        max_len if max_len else max(int(np.max(lengths)), 1)) < np.asarray(lengths)[..., None],
    kernel_reference=lambda lengths, max_len=16: np.arange(max_len) < lengths[:, None],
    frontend=_sequence_mask_frontend, derive=lambda d, p: {"L": p["max_len"]},
    example={"N": 32})
def sequence_mask(lengths, *, max_len, dims):
    """out[n, l] = l < lengths[n]."""
    ll, n = hl.Var("l"), hl.Var("n")
    out = hl.Func("out")
    out[ll, n] = hl.cast(lengths.type(), ll) < lengths[n]
    return out
