"""Linear algebra: matrix products and transposes.

``matmul`` follows ``np.matmul``: 2-D operands run the ``matmul`` kernel, stacks of matrices run
``batch_matmul`` after their batch dims are broadcast together, and a 1-D operand is promoted to a
matrix (a row for the left operand, a column for the right one) whose added axis is dropped from the
result. ``linear`` is ``torch.nn.functional.linear``: ``x @ weight.T + bias``. ``transpose`` is
``np.transpose`` that returns a new dense array.

float16 operands are multiplied and accumulated in float32 and the result is rounded to float16.
"""

from __future__ import annotations

import inspect
import math
import operator

import halide as hl
import numpy as np

from ..errors import ParamError, ShapeError
from ..runtime import as_array, check_inputs, traced
from ._op import op

_MATMUL_DTYPES = ["float32", "float64", "float16"]


def _acc_type(t: hl.Type) -> hl.Type:
    """The type products are accumulated in: float32 for float16 inputs, else the input type."""
    return hl.Float(32) if t.is_float() and t.bits() == 16 else t


def _writable(a: np.ndarray) -> np.ndarray:
    """``a`` or a dense copy of it when it cannot be handed to a kernel as is (a broadcast view)."""
    return a if a.flags.writeable else np.array(a, order="C")


def _transposed(x) -> bool:
    """True for the transpose of a C-ordered matrix (``w.T``): a NumPy array whose rows are
    not contiguous but whose columns are."""
    return (type(x) is np.ndarray and x.ndim == 2 and min(x.shape) > 1
            and not x.flags.c_contiguous and x.T.flags.c_contiguous and x.flags.writeable)


def _matmul_2d(a, b):
    """``a @ b`` of two matrices. A transposed ``b`` (``w.T``) is read as it is by linear's
    kernel (``a @ w.T``); a transposed ``a`` is made dense by the blocked transpose kernel. Handed
    to the kernel, either was first copied by NumPy's strided copy (``a @ w.T`` at 64x512x2048
    took 50 ms against 2.5 for ``a @ w``; NumPy's copy of ``w.T`` alone 9-22 ms, the transpose
    kernel's 0.5; one thread, under load)."""
    if type(a) is np.ndarray and type(b) is np.ndarray and a.dtype == b.dtype \
            and a.shape[1] == b.shape[0]:
        if _transposed(a) and a.size >= 1 << 12:
            a = transpose.kernel(a.T)
        if _transposed(b):
            return linear.kernel(_writable(a), b.T, np.zeros(b.shape[1], b.dtype))
    return matmul.kernel(_writable(a), _writable(b))


def _stacked(x, batch: tuple) -> np.ndarray:
    """``x`` with its batch dims broadcast to ``batch``: ``x`` itself when they are already
    ``batch`` (a broadcast view is read-only and would be copied for the kernel), else a dense copy
    of the broadcast."""
    if tuple(x.shape[:-2]) == tuple(batch):
        return x
    return _writable(np.broadcast_to(x, tuple(batch) + tuple(x.shape[-2:])))


# -- references ----------------------------------------------------------------------------------

def _float16_safe(fn):
    """Runs a NumPy reference in float32 for float16 operands and rounds the result back."""

    def ref(*arrays, **kw):
        arrays = [None if a is None else np.asarray(a) for a in arrays]
        if any(a is not None and a.dtype == np.float16 for a in arrays):
            out = fn(*[None if a is None else a.astype(np.float32) for a in arrays], **kw)
            return np.asarray(out).astype(np.float16)
        return fn(*arrays, **kw)

    ref.__name__ = fn.__name__
    ref.__doc__ = fn.__doc__
    ref.__signature__ = inspect.signature(fn)
    return ref


@_float16_safe
def _matmul_ref(a, b):
    return np.matmul(a, b)


@_float16_safe
def _linear_ref(x, weight, bias=None):
    out = np.matmul(x, np.swapaxes(weight, -1, -2))
    if bias is not None:
        out = out + bias
    return out


def _transpose_ref(x, axes=None):
    return np.transpose(x, axes).copy()


def _batch_transpose_ref(x):
    return np.transpose(x, (0, 2, 1, 3)).copy()


# -- matmul --------------------------------------------------------------------------------------

_MATMUL_KINDS = frozenset(_MATMUL_DTYPES)


def _matmul_frontend(a, b):
    """``a @ b`` with ``np.matmul``'s rules for 1-D operands and broadcast batch dims."""
    a = as_array(a, "matmul", "a")
    b = as_array(b, "matmul", "b")
    for name, x in (("a", a), ("b", b)):
        if x.ndim == 0:
            raise ShapeError(f"matmul: argument '{name}' must have at least 1 dimension, "
                             f"got a 0-D array (use multiply for scalars)")
    if a.dtype != b.dtype or np.dtype(a.dtype).name not in _MATMUL_KINDS:
        # Checked here, named as matmul: the kernel picked below (linear for a transposed b,
        # batch_matmul for stacks) would name itself. Only the dtypes of these stand-ins count.
        check_inputs(matmul, [np.empty((1, 1), a.dtype), np.empty((1, 1), b.dtype)])
    if a.ndim == 2 and b.ndim == 2:
        return _matmul_2d(a, b)
    a_vec, b_vec = a.ndim == 1, b.ndim == 1
    a2 = a[None, :] if a_vec else a
    b2 = b[:, None] if b_vec else b
    k_a, k_b = a2.shape[-1], b2.shape[-2]
    if k_a != k_b:
        raise ShapeError(f"matmul: dim K is {k_a} in 'a' (its last axis) but {k_b} in 'b' "
                         f"(its {'only' if b_vec else 'second-to-last'} axis); shapes must agree")
    try:
        batch = np.broadcast_shapes(a2.shape[:-2], b2.shape[:-2])
    except ValueError:
        raise ShapeError(f"matmul: the batch dims of 'a' {a2.shape[:-2]} and 'b' {b2.shape[:-2]} "
                         f"cannot be broadcast together (shapes {a.shape} and {b.shape})") from None
    m, n = a2.shape[-2], b2.shape[-1]
    if b2.ndim == 2 and a2.ndim > 2:
        # A stack times one matrix is one tall matrix product.
        out = matmul.kernel(_writable(a2).reshape(math.prod(a2.shape[:-1]), k_a), _writable(b2))
    elif a2.ndim == 2 and b2.ndim == 2:
        out = matmul.kernel(_writable(a2), _writable(b2))
    else:
        nb = int(np.prod(batch, dtype=np.int64))
        a3 = _stacked(a2, batch).reshape(nb, m, k_a)
        b3 = _stacked(b2, batch).reshape(nb, k_b, n)
        out = batch_matmul.kernel(_writable(a3), _writable(b3))
    out = out.reshape(batch + (m, n))
    if a_vec:
        out = out[..., 0, :]
    if b_vec:
        out = out[..., 0]
    if out.ndim == 0:
        return out[()]  # 1-D @ 1-D is a scalar, as in NumPy
    # (a traced Tensor has no memory layout: np.ascontiguousarray would ask for its value)
    return np.ascontiguousarray(out) if isinstance(out, np.ndarray) else out


def _product(a, b, k: hl.RDom, n_index, m_index, batch=()):
    """acc[n, m, *batch] = sum_k a[k, m, *batch] * b[n, k, *batch], accumulated in float32+."""
    acc_t = _acc_type(a.type())
    acc = hl.Func("acc")
    vars_ = (n_index, m_index) + tuple(batch)
    acc[vars_] = hl.cast(acc_t, 0)
    acc[vars_] += (hl.cast(acc_t, a[(k.x, m_index) + tuple(batch)])
                   * hl.cast(acc_t, b[(n_index, k.x) + tuple(batch)]))
    return acc


@op(category="linalg", inputs={"a": "M K", "b": "K N"}, output="M N", dtypes=_MATMUL_DTYPES,
    reference=_matmul_ref, frontend=_matmul_frontend, example={"M": 64, "K": 48, "N": 80})
def matmul(a, b, *, dims):
    """Matrix product ``a @ b`` (``np.matmul``): 2-D kernel [M, K] x [K, N] -> [M, N]; stacks
    broadcast their batch dims, and 1-D operands are promoted as NumPy does."""
    n, m = hl.Var("n"), hl.Var("m")
    k = hl.RDom([hl.Range(0, dims.K)], "k")
    acc = _product(a, b, k, n, m)
    out = hl.Func("out")
    out[n, m] = hl.cast(a.type(), acc[n, m])
    return out


@op(category="linalg", inputs={"a": "B M K", "b": "B K N"}, output="B M N",
    dtypes=_MATMUL_DTYPES, reference=_matmul_ref, example={"B": 3, "M": 32, "K": 24, "N": 40})
def batch_matmul(a, b, *, dims):
    """Batched matrix product: [B, M, K] x [B, K, N] -> [B, M, N], one product per batch entry."""
    n, m, bb = hl.Var("n"), hl.Var("m"), hl.Var("b")
    k = hl.RDom([hl.Range(0, dims.K)], "k")
    acc = _product(a, b, k, n, m, (bb,))
    out = hl.Func("out")
    out[n, m, bb] = hl.cast(a.type(), acc[n, m, bb])
    return out


# -- linear --------------------------------------------------------------------------------------

def _linear_frontend(x, weight, bias=None):
    """``x @ weight.T + bias`` for ``x`` of shape [..., in] and ``weight`` of shape [out, in]."""
    x = as_array(x, "linear", "x")
    weight = as_array(weight, "linear", "weight")
    if weight.ndim != 2:
        raise ShapeError(f"linear: argument 'weight' must be 2-D [out_features, in_features], "
                         f"got shape {weight.shape}")
    if x.ndim == 0:
        raise ShapeError("linear: argument 'x' must have at least 1 dimension [..., in_features], "
                         "got a 0-D array")
    if x.shape[-1] != weight.shape[1]:
        raise ShapeError(f"linear: dim I (in_features) is {x.shape[-1]} in 'x' (its last axis) "
                         f"but {weight.shape[1]} in 'weight' (axis 1); shapes must agree")
    if bias is None:
        bias = np.zeros(weight.shape[0], dtype=weight.dtype)
    else:
        bias = as_array(bias, "linear", "bias")
        if bias.ndim != 1:
            raise ShapeError(f"linear: argument 'bias' must be 1-D [out_features], "
                             f"got shape {bias.shape}")
    lead = x.shape[:-1]
    out = linear.kernel(_writable(x).reshape(math.prod(x.shape[:-1]), x.shape[-1]),
                       _writable(weight), _writable(bias))
    return out.reshape(lead + (weight.shape[0],))


@op(category="linalg", inputs={"x": "R I", "weight": "O I", "bias": "O"}, output="R O",
    dtypes=_MATMUL_DTYPES, reference=_linear_ref, frontend=_linear_frontend,
    example={"R": 40, "I": 48, "O": 24})
def linear(x, weight, bias, *, dims):
    """Affine map ``x @ weight.T + bias`` (``torch.nn.functional.linear``): x [..., I],
    weight [O, I], optional bias [O] -> [..., O]."""
    o, r = hl.Var("o"), hl.Var("r")
    i = hl.RDom([hl.Range(0, dims.I)], "i")
    acc_t = _acc_type(x.type())
    # The weight read with the output dim innermost, so that products vectorize along O.
    j = hl.Var("j")
    wt = hl.Func("wt")
    wt[o, j] = hl.cast(acc_t, weight[j, o])
    acc = hl.Func("acc")
    acc[o, r] = hl.cast(acc_t, bias[o])
    acc[o, r] += hl.cast(acc_t, x[i.x, r]) * wt[o, i.x]
    out = hl.Func("out")
    out[o, r] = hl.cast(x.type(), acc[o, r])
    return out


# -- transpose -----------------------------------------------------------------------------------

def _merge_axes(shape, axes):
    """Drops size-1 axes and merges input axes that stay neighbours in ``axes``.

    Returns (merged input shape, permutation of the merged axes).
    """
    keep = [ax for ax in axes if shape[ax] != 1]
    if not keep:
        return (), ()
    # Groups of input axes that stay consecutive and in order in the output.
    groups: list[list[int]] = []
    for ax in keep:
        if groups and ax == _next_kept(shape, groups[-1][-1]):
            groups[-1].append(ax)
        else:
            groups.append([ax])
    order = sorted(range(len(groups)), key=lambda g: groups[g][0])
    sizes = [int(np.prod([shape[a] for a in groups[g]])) for g in order]
    rank_in = {g: i for i, g in enumerate(order)}
    return tuple(sizes), tuple(rank_in[g] for g in range(len(groups)))


def _next_kept(shape, ax):
    ax += 1
    while ax < len(shape) and shape[ax] == 1:
        ax += 1
    return ax


def _transpose_frontend(x, axes=None):
    """``np.transpose(x, axes)`` as a new dense array (``axes`` None reverses the axes)."""
    x = as_array(x, "transpose", "x")
    nd = x.ndim
    if axes is None:
        axes = tuple(range(nd))[::-1]
    else:
        if isinstance(axes, (int, np.integer)):
            axes = (axes,)
        try:
            axes = tuple(operator.index(a) for a in axes)
        except TypeError:
            raise ParamError(f"transpose: parameter 'axes' must be a sequence of ints, "
                             f"got {axes!r}") from None
        if len(axes) != nd:
            raise ParamError(f"transpose: parameter 'axes' must list each of the {nd} axes of 'x' "
                             f"once, got {axes} ({len(axes)} entries)")
        for a in axes:
            if not -nd <= a < nd:
                raise ParamError(f"transpose: parameter 'axes' entry {a} is out of range for a "
                                 f"{nd}-D array; expected -{nd}..{nd - 1}")
        axes = tuple(a % nd for a in axes)
        if len(set(axes)) != nd:
            raise ParamError(f"transpose: parameter 'axes' repeats an axis: {axes}")
    out_shape = tuple(x.shape[a] for a in axes)
    if x.size == 0 and not traced((x,)):
        return np.empty(out_shape, x.dtype)     # nothing to move, as NumPy's (a new array)
    sizes, perm = _merge_axes(x.shape, axes)
    if len(perm) <= 1:
        # Nothing moves: the result is a dense copy (in a program, a reshape of the traced
        # value: np.array of it needed its value in Python, a graph break, and @fuse failed
        # on the transpose of a [1, N] value).
        if traced((x,)):
            return x.reshape(out_shape)
        return np.array(x, order="C").reshape(out_shape)
    cur = _writable(x).reshape(sizes)
    if len(perm) == 2:
        return transpose.kernel(_writable(cur)).reshape(out_shape)
    # Bring the axes into place one at a time; each step swaps two neighbouring axis groups.
    cur_axes = list(range(len(perm)))
    shape = list(sizes)
    for pos, want in enumerate(perm):
        j = cur_axes.index(want)
        if j == pos:
            continue
        b = int(np.prod(shape[:pos]))
        r = int(np.prod(shape[pos:j]))
        c = shape[j]
        e = int(np.prod(shape[j + 1:]))
        cur = batch_transpose.kernel(cur.reshape(b, r, c, e))
        cur_axes = cur_axes[:pos] + [want] + cur_axes[pos:j] + cur_axes[j + 1:]
        shape = shape[:pos] + [shape[j]] + shape[pos:j] + shape[j + 1:]
    return cur.reshape(out_shape)


_ALL = ["float32", "float64", "float16", "int8", "int16", "int32", "int64", "uint8", "uint16",
        "uint32", "bool"]


@op(category="linalg", inputs={"x": "R C"}, output="C R", dtypes=_ALL, params=[],
    reference=_transpose_ref, frontend=_transpose_frontend, example={"R": 64, "C": 100})
def transpose(x):
    """Permutes the axes of ``x`` (``np.transpose``) into a new dense array; the kernel swaps the
    two axes of a matrix."""
    r, c = hl.Var("r"), hl.Var("c")
    out = hl.Func("out")
    out[r, c] = x[c, r]
    return out


@op(category="linalg", inputs={"x": "B R C E"}, output="B C R E", dtypes=_ALL,
    reference=_batch_transpose_ref, example={"B": 2, "R": 24, "C": 40, "E": 3})
def batch_transpose(x):
    """Swaps axes 1 and 2 of a 4-D array into a new dense array: [B, R, C, E] -> [B, C, R, E]."""
    e, r, c, b = hl.Var("e"), hl.Var("r"), hl.Var("c"), hl.Var("b")
    out = hl.Func("out")
    out[e, r, c, b] = x[e, c, r, b]
    return out


# These frontends depend only on their arguments' dtypes, shapes and parameters, never on array
# values: a repeated call may skip them (runtime.call_public records what they did once).
for _fe in (_matmul_frontend, _linear_frontend, _transpose_frontend):
    _fe.shape_only = True
