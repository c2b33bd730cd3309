"""Contractions: einsum, outer, addmm, baddbmm and trace.

- ``einsum(subscripts, *operands)`` follows ``np.einsum``/``torch.einsum``: explicit (``->``) or
  implicit output (the labels used once, in alphabetical order), ``...`` for broadcast leading
  dims, repeated labels within an operand (diagonals). A label's sizes must agree across the
  operands or be 1 (broadcast). Operands are contracted left to right, two at a time; each
  contraction is one batched matrix product (the ``einsum`` kernel, ``[B, M, K] x [B, K, N]``)
  after its operands are permuted to ``(batch, kept, contracted)`` order, with labels that only
  one operand has and the result does not need summed out first (``sum``), and diagonals taken
  with ``diagonal``. Floats only (float16 accumulates in float32, as ``matmul``).
- ``outer(a, b)``: ``np.outer`` (operands flattened); any numeric dtype.
- ``addmm(input, mat1, mat2, *, beta=1, alpha=1)``: ``torch.addmm``,
  ``beta * input + alpha * (mat1 @ mat2)`` with ``input`` broadcast to [M, N]; with ``beta=0``
  ``input`` is not read (a NaN there does not propagate), as in torch.
- ``baddbmm(input, batch1, batch2, *, beta=1, alpha=1)``: ``torch.baddbmm``, the same per batch
  entry of [B, M, K] x [B, K, N].
- ``trace(x, offset=0, axis1=0, axis2=1)``: ``np.trace``: sums along diagonals of the
  (axis1, axis2) planes; integers sum to int64 and floats in float64 (rounded once).
"""

from __future__ import annotations

import inspect
import math
import operator
import string

import halide as hl
import numpy as np

from ..errors import ArgumentError, DtypeError, ParamError, ShapeError
from ..runtime import as_array
from ._consts import lit
from ._op import Param, op
from .linalg import _MATMUL_DTYPES, _acc_type, _float16_safe

_LETTERS = set(string.ascii_letters)


def _writable(a):
    """``a``, or a dense copy when it cannot be handed to a kernel (a broadcast view)."""
    if isinstance(a, np.ndarray) and not a.flags.writeable:
        return np.array(a, order="C")
    return a


# -- einsum: parsing ----------------------------------------------------------------------------

def _parse(subscripts, shapes):
    """(labels per operand, output labels): each label a letter or an ellipsis dim ``...k``."""
    name = "einsum"
    if not isinstance(subscripts, str):
        raise ParamError(f"{name}: the first argument must be the subscripts string, e.g. "
                         f"'ij,jk->ik', got {subscripts!r}")
    s = subscripts.replace(" ", "")
    if s.count("->") > 1:
        raise ParamError(f"{name}: subscripts {subscripts!r} have more than one '->'")
    lhs, arrow, rhs = s.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(shapes):
        raise ParamError(f"{name}: subscripts {subscripts!r} name {len(terms)} operand(s), but "
                         f"{len(shapes)} were given")

    def split(term, where):
        if term.count("...") > 1:
            raise ParamError(f"{name}: {where} {term!r} has more than one '...'")
        before, dots, after = term.partition("...")
        for c in before + after:
            if c not in _LETTERS:
                raise ParamError(f"{name}: {where} {term!r} holds {c!r}; labels are letters "
                                 f"a-z, A-Z (and '...')")
        return list(before), bool(dots), list(after)

    parsed = [split(t, f"operand {i}'s subscripts") for i, t in enumerate(terms)]
    # How many dims each ellipsis stands for; they broadcast right-aligned.
    n_ell = 0
    labels = []
    for i, ((before, dots, after), shape) in enumerate(zip(parsed, shapes)):
        named = len(before) + len(after)
        if (not dots and named != len(shape)) or (dots and named > len(shape)):
            raise ShapeError(f"{name}: operand {i} has {len(shape)} dims (shape {tuple(shape)}) "
                             f"but its subscripts {terms[i]!r} name {named}"
                             + ("" if dots else "; use '...' for the others"))
        k = len(shape) - named if dots else 0
        n_ell = max(n_ell, k)
        labels.append((before, k, after))
    ops_labels = [b + [f"...{n_ell - k + j}" for j in range(k)] + a for b, k, a in labels]
    ell = [f"...{j}" for j in range(n_ell)]
    counts: dict = {}
    for ls in ops_labels:
        for lab in ls:
            counts[lab] = counts.get(lab, 0) + 1
    if arrow:
        before, dots, after = split(rhs, "the output")
        if not dots and n_ell and any(lab.startswith("...") for ls in ops_labels for lab in ls):
            # NumPy: an output without '...' sums the broadcast dims away.
            out = before + after
        else:
            out = before + (ell if dots else []) + after
        letters = [c for c in out if not c.startswith("...")]
        if len(set(letters)) != len(letters):
            raise ParamError(f"{name}: the output subscripts {rhs!r} repeat a label")
        for c in letters:
            if c not in counts:
                raise ParamError(f"{name}: output label {c!r} appears in no operand")
    else:
        out = ell + sorted(c for c, n in counts.items() if n == 1 and not c.startswith("..."))
    return ops_labels, out


# -- einsum: evaluation -------------------------------------------------------------------------

def _sum_out(x, labels, drop):
    """``x`` summed over the axes labelled in ``drop``; returns (array, remaining labels).

    Summed axes in front are a product ``ones @ x`` through the einsum kernel (vectorized along
    the kept axes, no transpose); otherwise they are moved last and summed by rows with the
    ``sum`` op, or for float16 (which ``sum`` does not take) by ``x @ ones``, accumulating in
    float32."""
    axes = [i for i, lab in enumerate(labels) if lab in drop]
    if not axes:
        return x, labels
    kept = [i for i in range(len(labels)) if i not in axes]
    left = [labels[i] for i in kept]
    lead = tuple(x.shape[i] for i in kept)
    o, r = math.prod(lead), math.prod(x.shape[i] for i in axes)
    if axes == list(range(len(axes))):
        res = einsum.kernel(np.ones((1, 1, r), x.dtype), _writable(x).reshape(1, r, o))
        return res.reshape(lead), left
    from ._registry import get_op

    if kept + axes != list(range(len(labels))):
        x = x.transpose(kept + axes)
    total = get_op("sum")
    if any(x.dtype.name in sig for sig in total.dtypes):
        res = total(_writable(x).reshape(o, r), axis=1)
    else:
        res = einsum.kernel(_writable(x).reshape(1, o, r), np.ones((1, r, 1), x.dtype))
    return res.reshape(lead), left


def _diagonals(x, labels, i):
    """Repeated labels of one operand taken as diagonals (``np.einsum('ii->i')``)."""
    from .creation import diagonal

    while len(set(labels)) != len(labels):
        lab = next(lab for lab in labels if labels.count(lab) > 1)
        a1 = labels.index(lab)
        a2 = labels.index(lab, a1 + 1)
        if x.shape[a1] != x.shape[a2]:
            raise ShapeError(f"einsum: label {lab!r} is repeated in operand {i} over dims of "
                             f"sizes {x.shape[a1]} and {x.shape[a2]}; they must agree")
        if isinstance(x, np.ndarray):
            x = np.diagonal(x, 0, a1, a2)     # a view; the next kernel call reads it
        elif x.dtype.name in diagonal.dtypes[0] or any(x.dtype.name in d for d in
                                                       diagonal.dtypes):
            x = diagonal(x, 0, a1, a2)
        else:
            raise DtypeError(f"einsum: repeated label {lab!r} (a diagonal) of a traced "
                             f"{x.dtype.name} operand is not supported; use float32 or float64")
        labels = [lb for j, lb in enumerate(labels) if j not in (a1, a2)] + [lab]
    return x, labels


def _permute(x, labels, order):
    perm = [labels.index(lab) for lab in order]
    if perm != list(range(len(perm))):
        x = x.transpose(perm)
    return x


def _sizes(x, labels):
    return {lab: n for lab, n in zip(labels, x.shape)}


def _contract(a, la, b, lb, keep, where):
    """One pairwise contraction: labels in ``keep`` survive, the other shared ones are summed.

    Returns (result, its labels, the kernel's operand shapes when it ran on reshapes of ``a``
    and ``b`` as given (nothing summed first, permuted or broadcast), else None)."""
    a0, b0 = a, b
    a, la = _sum_out(a, la, {lab for lab in la if lab not in lb and lab not in keep})
    b, lb = _sum_out(b, lb, {lab for lab in lb if lab not in la and lab not in keep})
    batch = [lab for lab in la if lab in lb and lab in keep]
    contracted = [lab for lab in la if lab in lb and lab not in keep]
    m_labs = [lab for lab in la if lab not in lb]
    n_labs = [lab for lab in lb if lab not in la]
    sa, sb = _sizes(a, la), _sizes(b, lb)
    size = {}
    for lab in batch + contracted:
        p, q = sa[lab], sb[lab]
        if p != q and 1 not in (p, q):
            raise ShapeError(f"einsum: label {lab!r} has size {p} in {where[0]} but {q} in "
                             f"{where[1]}; sizes must agree (or be 1 to broadcast)")
        size[lab] = max(p, q)
    a = _permute(a, la, batch + m_labs + contracted)
    b = _permute(b, lb, batch + contracted + n_labs)
    a_shape = tuple(size[lab] for lab in batch) + tuple(sa[lab] for lab in m_labs) + tuple(
        size[lab] for lab in contracted)
    b_shape = tuple(size[lab] for lab in batch + contracted) + tuple(sb[lab] for lab in n_labs)
    if tuple(a.shape) != a_shape:
        a = np.broadcast_to(a, a_shape)
    if tuple(b.shape) != b_shape:
        b = np.broadcast_to(b, b_shape)
    nb = math.prod(size[lab] for lab in batch)
    nm = math.prod(sa[lab] for lab in m_labs)
    nk = math.prod(size[lab] for lab in contracted)
    nn = math.prod(sb[lab] for lab in n_labs)
    res = einsum.kernel(_writable(a).reshape(nb, nm, nk), _writable(b).reshape(nb, nk, nn))
    shape = tuple(size[lab] for lab in batch) + tuple(sa[lab] for lab in m_labs) + tuple(
        sb[lab] for lab in n_labs)
    plain = a is a0 and b is b0   # no sum, permute or broadcast made new arrays
    return res.reshape(shape), batch + m_labs + n_labs, (
        ((nb, nm, nk), (nb, nk, nn)) if plain else None)


#: Signatures (subscripts; each operand's dtype, shape, strides) whose einsum is one product of
#: reshapes of its two operands, with its result a reshape of the product's: (shape of a, shape
#: of b, result shape). Parsing and planning cost about 90 us a call; the kernel call 10 us.
_PLANS: dict = {}


def _einsum_frontend(*args, **kwargs):
    """``np.einsum(subscripts, *operands)`` for float operands of one dtype (see the module
    doc): contractions run as batched matrix products, sums and diagonals as their ops.
    ``subscripts`` may also be given by keyword, after the operands."""
    name = "einsum"
    if "subscripts" in kwargs:
        subscripts, operands = kwargs.pop("subscripts"), args
    elif args:
        subscripts, operands = args[0], args[1:]
    else:
        raise ParamError(f"{name}: give the subscripts, e.g. einsum('ij,jk->ik', a, b)")
    if kwargs:
        raise ArgumentError(f"{name}: unknown keyword argument(s) {sorted(kwargs)}; einsum takes "
                            f"the subscripts and the operands")
    if not operands:
        raise ParamError(f"{name}: give at least one operand after the subscripts")
    ops = [as_array(x, name, f"operands[{i}]") for i, x in enumerate(operands)]
    key = None
    if (len(ops) == 2 and isinstance(subscripts, str)
            and all(type(x) is np.ndarray and x.flags.writeable for x in ops)):
        # A signature seen before passed every check below (a plan is stored only then): the
        # checks, dtype names above all, cost more than the kernel call at small sizes.
        key = (subscripts, *[(x.dtype, x.shape, x.strides) for x in ops])
        plan = _PLANS.get(key)
        if plan is not None:
            return einsum.kernel(ops[0].reshape(plan[0]), ops[1].reshape(plan[1])).reshape(
                plan[2])
    dts = {x.dtype for x in ops}
    if len(dts) > 1:
        raise DtypeError(f"{name}: the operands must share one dtype, got "
                         f"{', '.join(sorted(d.name for d in dts))}; cast them first "
                         f"(x.astype(...))")
    dt = ops[0].dtype
    if dt.name not in _MATMUL_DTYPES:
        raise DtypeError(f"{name}: operands of dtype {dt.name} are not supported; use one of "
                         f"{', '.join(_MATMUL_DTYPES)}")
    labels, out = _parse(subscripts, [x.shape for x in ops])
    arrs = []
    for i, (x, ls) in enumerate(zip(ops, labels)):
        x, ls = _diagonals(x, list(ls), i)
        arrs.append((x, ls))
    x, lx = arrs[0]
    shapes = None
    for j in range(1, len(arrs)):
        y, ly = arrs[j]
        later = {lab for _, ls in arrs[j + 1:] for lab in ls} | set(out)
        x, lx, shapes = _contract(x, lx, y, ly, later,
                                  ("operand 0" if j == 1 else
                                   f"the product of operands 0..{j - 1}", f"operand {j}"))
    if (key is not None and shapes is not None and lx == list(out) and len(out)
            and all(a is o for (a, _), o in zip(arrs, ops))):
        if len(_PLANS) > 64:
            _PLANS.clear()   # bounded: a model's signatures repeat, a sweep's do not
        _PLANS[key] = (*shapes, x.shape)
    x, lx = _sum_out(x, lx, {lab for lab in lx if lab not in out})
    # An ellipsis dim broadcast to size 1 everywhere may be missing from the result: add it.
    for lab in out:
        if lab not in lx:
            x = x.reshape(x.shape + (1,))
            lx = lx + [lab]
    x = _permute(x, lx, out)
    if isinstance(x, np.ndarray):
        if x.ndim == 0:
            return x[()]
        return np.ascontiguousarray(x)
    return x


def _einsum_ref(*args, subscripts=None):
    if subscripts is None:
        subscripts, args = args[0], args[1:]
    ops = [np.asarray(x) for x in args]
    if ops and ops[0].dtype == np.float16:
        return np.einsum(subscripts, *[x.astype(np.float32) for x in ops]).astype(np.float16)
    return np.einsum(subscripts, *ops)


def _einsum_kernel_ref(a, b):
    return _float16_safe(lambda p, q: np.matmul(p, q))(a, b)


_einsum_frontend.__signature__ = inspect.Signature([
    inspect.Parameter("subscripts", inspect.Parameter.POSITIONAL_OR_KEYWORD),
    inspect.Parameter("operands", inspect.Parameter.VAR_POSITIONAL)])


@op(category="linalg", inputs={"a": "B M K", "b": "B K N"}, output="B M N",
    dtypes=_MATMUL_DTYPES, reference=_einsum_ref, kernel_reference=_einsum_kernel_ref,
    frontend=_einsum_frontend, doc=_einsum_frontend.__doc__,
    example={"B": 4, "M": 32, "K": 48, "N": 40})
def einsum(a, b, *, dims):
    """The contraction every einsum reduces to: [B, M, K] x [B, K, N] -> [B, M, N]."""
    n, m, bb = hl.Var("n"), hl.Var("m"), hl.Var("b")
    k = hl.RDom([hl.Range(0, dims.K)], "k")
    acc_t = _acc_type(a.type())
    acc = hl.Func("acc")
    acc[n, m, bb] = hl.cast(acc_t, 0)
    acc[n, m, bb] += hl.cast(acc_t, a[k.x, m, bb]) * hl.cast(acc_t, b[n, k.x, bb])
    out = hl.Func("out")
    out[n, m, bb] = hl.cast(a.type(), acc[n, m, bb])
    return out


# -- outer --------------------------------------------------------------------------------------

_OUTER_DTYPES = ["float32", "float64", "float16", "int32", "int64"]


def _outer_ref(a, b):
    return np.outer(np.asarray(a), np.asarray(b))


def _outer_frontend(a, b):
    """``np.outer(a, b)``: ``out[i, j] = a[i] * b[j]`` with both operands flattened (one dtype;
    integers wrap as in NumPy)."""
    a = as_array(a, "outer", "a")
    b = as_array(b, "outer", "b")
    return outer.kernel(a.reshape(-1), b.reshape(-1))


@op(category="linalg", inputs={"a": "M", "b": "N"}, output="M N", dtypes=_OUTER_DTYPES,
    reference=_outer_ref, frontend=_outer_frontend, doc=_outer_frontend.__doc__,
    example={"M": 300, "N": 400})
def outer(a, b):
    """Every product of an element of a with an element of b."""
    n, m = hl.Var("n"), hl.Var("m")
    out = hl.Func("out")
    out[n, m] = a[m] * b[n]
    return out


# -- addmm and baddbmm --------------------------------------------------------------------------

def _scalar(name, arg, v):
    if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)) or \
            not math.isfinite(v):
        raise ParamError(f"{name}: parameter '{arg}' must be a finite number, got {v!r}")
    return float(v)


@_float16_safe
def _addmm_np(c, a, b, beta=1.0, alpha=1.0):
    prod = np.matmul(a, b)
    if beta == 0:
        return (alpha * prod).astype(prod.dtype)
    return (beta * c + alpha * prod).astype(prod.dtype)


def _addmm_ref(input, mat1, mat2, *, beta=1, alpha=1):     # noqa: A002 - torch's name
    return _addmm_np(input, mat1, mat2, beta=beta, alpha=alpha)


def _addmm_kernel_ref(input, mat1, mat2, beta=1.0, alpha=1.0):      # noqa: A002
    return _addmm_np(input, mat1, mat2, beta=beta, alpha=alpha)


def _gemm_plus(name, c, a, b, beta, alpha, batch: bool):
    c = as_array(c, name, "input")
    a = as_array(a, name, "mat1" if not batch else "batch1")
    b = as_array(b, name, "mat2" if not batch else "batch2")
    rank = 3 if batch else 2
    an, bn = ("batch1", "batch2") if batch else ("mat1", "mat2")
    for arg, x in ((an, a), (bn, b)):
        if x.ndim != rank:
            raise ShapeError(f"{name}: '{arg}' must be {rank}-D "
                             f"({'[B, M, K] and [B, K, N]' if batch else '[M, K] and [K, N]'}),"
                             f" got shape {tuple(x.shape)}")
    if a.shape[-1] != b.shape[-2]:
        raise ShapeError(f"{name}: dim K is {a.shape[-1]} in '{an}' but {b.shape[-2]} in "
                         f"'{bn}'; they must agree")
    if batch and a.shape[0] != b.shape[0]:
        raise ShapeError(f"{name}: the batch sizes of '{an}' ({a.shape[0]}) and '{bn}' "
                         f"({b.shape[0]}) must agree")
    want = a.shape[:-1] + b.shape[-1:]
    try:
        if np.broadcast_shapes(c.shape, want) != want:
            raise ValueError
    except ValueError:
        raise ShapeError(f"{name}: 'input' of shape {tuple(c.shape)} cannot be broadcast to the "
                         f"product's shape {want}") from None
    beta, alpha = _scalar(name, "beta", beta), _scalar(name, "alpha", alpha)
    if tuple(c.shape) != want:
        c = _writable(np.broadcast_to(c, want))
    the_op = baddbmm if batch else addmm
    return the_op.kernel(c, a, b, beta=beta, alpha=alpha)


def _addmm_frontend(input, mat1, mat2, *, beta=1, alpha=1):     # noqa: A002 - torch's name
    """``torch.addmm``: ``beta * input + alpha * (mat1 @ mat2)``; ``input`` broadcasts to
    [M, N]; with ``beta=0`` it is not read."""
    return _gemm_plus("addmm", input, mat1, mat2, beta, alpha, batch=False)


def _baddbmm_frontend(input, batch1, batch2, *, beta=1, alpha=1):     # noqa: A002
    """``torch.baddbmm``: ``beta * input + alpha * (batch1 @ batch2)`` per batch entry;
    ``input`` broadcasts to [B, M, N]; with ``beta=0`` it is not read."""
    return _gemm_plus("baddbmm", input, batch1, batch2, beta, alpha, batch=True)


def _baddbmm_ref(input, batch1, batch2, *, beta=1, alpha=1):     # noqa: A002
    return _addmm_np(input, batch1, batch2, beta=beta, alpha=alpha)


_AB = [Param("beta", float, 1.0, doc="factor of input (0: input not read)"),
       Param("alpha", float, 1.0, doc="factor of the product")]


def _scaled_sum(c, acc, t, beta, alpha, args):
    acc_t = acc.type() if isinstance(acc, hl.Expr) else hl.Expr(acc).type()
    prod = hl.Expr(acc)
    if alpha != 1.0:
        prod = lit(acc_t, alpha) * prod
    if beta == 0.0:
        return hl.cast(t, prod)
    cv = hl.cast(acc_t, c[tuple(args)])
    if beta != 1.0:
        cv = lit(acc_t, beta) * cv
    return hl.cast(t, cv + prod)


@op(category="linalg", inputs={"input": "M N", "mat1": "M K", "mat2": "K N"}, output="M N",
    dtypes=_MATMUL_DTYPES, params=_AB, reference=_addmm_ref,
    kernel_reference=_addmm_kernel_ref, frontend=_addmm_frontend, doc=_addmm_frontend.__doc__,
    example={"M": 64, "K": 48, "N": 80})
def addmm(input, mat1, mat2, *, beta, alpha, dims):     # noqa: A002 - torch's name
    """A matrix product plus a scaled matrix, the sum formed as the product is written."""
    n, m = hl.Var("n"), hl.Var("m")
    k = hl.RDom([hl.Range(0, dims.K)], "k")
    acc_t = _acc_type(mat1.type())
    acc = hl.Func("acc")
    acc[n, m] = hl.cast(acc_t, 0)
    acc[n, m] += hl.cast(acc_t, mat1[k.x, m]) * hl.cast(acc_t, mat2[n, k.x])
    out = hl.Func("out")
    out[n, m] = _scaled_sum(input, acc[n, m], mat1.type(), beta, alpha, [n, m])
    return out


@op(category="linalg", inputs={"input": "B M N", "batch1": "B M K", "batch2": "B K N"},
    output="B M N", dtypes=_MATMUL_DTYPES, params=_AB, reference=_baddbmm_ref,
    kernel_reference=_addmm_kernel_ref, frontend=_baddbmm_frontend,
    doc=_baddbmm_frontend.__doc__, example={"B": 3, "M": 32, "K": 24, "N": 40})
def baddbmm(input, batch1, batch2, *, beta, alpha, dims):     # noqa: A002 - torch's name
    """addmm for each batch entry."""
    n, m, bb = hl.Var("n"), hl.Var("m"), hl.Var("b")
    k = hl.RDom([hl.Range(0, dims.K)], "k")
    acc_t = _acc_type(batch1.type())
    acc = hl.Func("acc")
    acc[n, m, bb] = hl.cast(acc_t, 0)
    acc[n, m, bb] += hl.cast(acc_t, batch1[k.x, m, bb]) * hl.cast(acc_t, batch2[n, k.x, bb])
    out = hl.Func("out")
    out[n, m, bb] = _scaled_sum(input, acc[n, m, bb], batch1.type(), beta, alpha, [n, m, bb])
    return out


# -- trace --------------------------------------------------------------------------------------

_TRACE_DTYPES = ["float32", "float64", "int32", "int64"]


def _trace_ref(x, offset=0, axis1=0, axis2=1):
    x = np.asarray(x)
    out = np.trace(x.astype(np.float64) if x.dtype.kind == "f" else x.astype(np.int64), offset,
                   axis1, axis2)
    return np.asarray(out).astype(x.dtype if x.dtype.kind == "f" else np.int64)[()]


def _trace_kernel_ref(x, offset=0):
    return np.atleast_1d(_trace_ref(x, offset, 1, 2))


def _axis_index(name, arg, v, nd):
    if isinstance(v, bool) or not hasattr(v, "__index__"):
        raise ParamError(f"{name}: parameter '{arg}' expects an int, got {v!r}")
    v = operator.index(v)
    if not -nd <= v < nd:
        raise ParamError(f"{name}: parameter '{arg}'={v} is out of range for {nd} dims")
    return v % nd


def _trace_frontend(x, offset=0, axis1=0, axis2=1):
    """``np.trace``: the sums along the ``offset`` diagonal of the (axis1, axis2) planes; the
    result has the other axes (a scalar for a matrix). Integers sum to int64, floats in
    float64 rounded once to their dtype; a diagonal outside the plane sums to 0."""
    name = "trace"
    x = as_array(x, name, "x")
    if x.ndim < 2:
        raise ShapeError(f"{name}: 'x' must have at least 2 dims, got shape {tuple(x.shape)}")
    a1, a2 = _axis_index(name, "axis1", axis1, x.ndim), _axis_index(name, "axis2", axis2,
                                                                      x.ndim)
    if a1 == a2:
        raise ParamError(f"{name}: axis1 and axis2 must differ, got {axis1} and {axis2}")
    if isinstance(offset, bool) or not hasattr(offset, "__index__"):
        raise ParamError(f"{name}: parameter 'offset' expects an int, got {offset!r}")
    rest = [i for i in range(x.ndim) if i not in (a1, a2)]
    moved = x.transpose(rest + [a1, a2]) if rest + [a1, a2] != list(range(x.ndim)) else x
    lead = tuple(x.shape[i] for i in rest)
    r, c = x.shape[a1], x.shape[a2]
    off = max(-r, min(c, operator.index(offset)))      # beyond the plane: an empty diagonal
    out = trace.kernel(moved.reshape((math.prod(lead), r, c)), offset=off)
    return out.reshape(lead)[()]


@op(category="linalg", inputs={"x": "B R C"}, output="B", dtypes=_TRACE_DTYPES,
    params=[Param("offset", int, 0, low=-(1 << 30), high=1 << 30, doc="diagonal offset")],
    reference=_trace_ref, kernel_reference=_trace_kernel_ref, frontend=_trace_frontend,
    doc=_trace_frontend.__doc__,
    out_dtype=lambda dtypes, params: dtypes[0] if dtypes[0].startswith("float") else "int64",
    example={"B": 8, "R": 300, "C": 300})
def trace(x, *, offset, dims):
    """The sum of x[i, i + offset] over the diagonal of each [R, C] plane."""
    b = hl.Var("b")
    t = x.type()
    acc_t = hl.Float(64) if t.is_float() else hl.Int(64)
    if offset >= 0:
        start_r, length = 0, hl.max(0, hl.min(dims.R, dims.C - offset))
    else:
        start_r, length = -offset, hl.max(0, hl.min(dims.R + offset, dims.C))
    i = hl.RDom([hl.Range(0, length)], "i")
    acc = hl.Func("acc")
    acc[b] = hl.cast(acc_t, 0)
    row = i.x + start_r
    acc[b] += hl.cast(acc_t, x[hl.clamp(row + offset, 0, dims.C - 1),
                               hl.clamp(row, 0, dims.R - 1), b])
    out = hl.Func("out")
    out[b] = hl.cast(t if t.is_float() else hl.Int(64), acc[b])
    return out


for _fe in (_outer_frontend, _addmm_frontend, _baddbmm_frontend, _trace_frontend):
    _fe.shape_only = True
