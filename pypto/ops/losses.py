"""Losses and distances in ``torch.nn.functional``'s names and conventions.

Elementwise losses (``mse_loss``, ``l1_loss``, ``smooth_l1_loss``, ``huber_loss``, ``kl_div``,
``binary_cross_entropy``, ``binary_cross_entropy_with_logits``) have a kernel on [R, C] giving
the per-element loss; ``reduction="mean"`` / ``"sum"`` then run the ``mean`` / ``sum`` ops (float64
accumulation), ``"none"`` returns the elementwise loss. ``input`` and ``target`` must have one
shape (torch only warns when they broadcast); ``weight`` and ``pos_weight`` broadcast to it.

``cross_entropy`` and ``nll_loss`` take class indices (int32/int64) as targets: input [N, C],
[C] or [N, C, d1, ...] like torch. Their kernel gives each sample's loss and weight
``w[target]`` (0 where ``target == ignore_index``); ``"mean"`` divides the summed loss by the
summed weights, as torch does (all ignored: NaN). ``label_smoothing`` mixes in
``-(sum_c w_c log p_c) / C``. A target outside [0, C) that is not ``ignore_index`` is a
``ParamError`` naming it (clamped into range inside traced programs, see ``indexing``).
``cross_entropy`` also takes class probabilities (a float target of the input's shape), as
torch: ``-sum_c w_c y_c log_softmax(x)_c`` per sample, ``"mean"`` over the samples.

Distances: ``cosine_similarity(x1, x2, dim=1, eps=1e-8)`` normalizes each by
``max(||x||, eps)`` first (torch's current definition); ``pairwise_distance(x1, x2, p, eps)`` is
``||x1 - x2 + eps||_p`` over the last axis; ``cdist(x1, x2, p)`` all pairs of rows, [B, P, M] x
[B, R, M] -> [B, P, R] (batch axes broadcast), summed directly (torch's ``cdist`` switches to a
matrix product for p = 2 on large inputs, which is faster and less accurate). Both take torch's
p = 0 and p = inf too (see ``distance``).
"""

from __future__ import annotations

import inspect
import math

import halide as hl
import numpy as np

from ..errors import DtypeError, ParamError, ShapeError
from ..runtime import as_array, as_traced, traced
from ._consts import lit, lit64
from . import elementwise as _ew
from . import reduce as _red
from ._args import choice, int_arg
from ._op import Param, op
from .binary import _plan
from .indexing import _checked, check_range
from .layout import _axis, bcast

_FLOATS = ["float32", "float64"]
_REDUCTIONS = ("none", "mean", "sum")
_EX = {"R": 16, "C": 100}


def _arrays(name, named):
    arrs = [as_array(v, name, n) for n, v in named]
    if traced(arrs):
        arrs = as_traced(arrs)
    return arrs


def _reduce(name, loss, reduction, extra=("none", "mean", "sum")):
    reduction = choice(name, "reduction", reduction, extra)
    if reduction == "none":
        return loss
    if reduction == "sum":
        return _red.sum_(loss)
    if reduction == "batchmean":
        return _red.sum_(loss) / loss.shape[0] if loss.ndim else _red.sum_(loss)
    return _red.mean(loss)


def _np_reduce(loss, reduction):
    if reduction == "none":
        return loss.astype(loss.dtype)
    if reduction == "batchmean":
        return np.asarray(loss.sum(dtype=np.float64) / loss.shape[0]).astype(loss.dtype)[()]
    f = np.sum if reduction == "sum" else np.mean
    return np.asarray(f(loss, dtype=np.float64)).astype(loss.dtype)[()]


# -- elementwise losses --------------------------------------------------------------------------

def _pointwise(name, fn, ref_fn, doc, extra_inputs=(), params=(), reductions=_REDUCTIONS,
               make_inputs=None, positive=()):
    """Declares an elementwise loss; ``fn(input, target, *extra, **params)`` on Exprs. The
    parameters named in ``positive`` must be > 0 (a Param's ``low`` admits its bound)."""
    names = ("input", "target") + tuple(extra_inputs)
    me = {}     # the op, for the frontend (declared below)

    def algorithm(*images, **kw):
        c, r = hl.Var("c"), hl.Var("r")
        vals = [im[c, r] for im in images]
        out = hl.Func("out")
        # Strict: the formulas rely on their rounding (Halide would otherwise reassociate).
        out[c, r] = hl.strict_float(fn(*vals, **{k: v for k, v in kw.items() if k != "dims"}))
        return out

    def frontend(input, target, *args, reduction="mean", **kw):  # noqa: A002
        extra = dict(zip(extra_inputs, args))
        extra.update({k: kw.pop(k) for k in list(kw) if k in extra_inputs})
        for k in positive:      # (torch refuses 0 and below; NaN too)
            v = kw.get(k)
            if isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(
                    v, (bool, np.bool_)) and not v > 0:
                raise ParamError(f"{name}: parameter '{k}' must be > 0, got {v!r}")
        x, t = _arrays(name, [("input", input), ("target", target)])
        if x.shape != t.shape:
            raise ShapeError(f"{name}: input {x.shape} and target {t.shape} must have one shape")
        if x.dtype != t.dtype:
            raise DtypeError(f"{name}: input ({x.dtype.name}) and target ({t.dtype.name}) must "
                             "have one dtype")
        shape = x.shape
        _, rr, cc = _plan(shape) if shape else (0, 1, 1)
        ins = [x, t]
        for n in extra_inputs:
            v = extra.get(n)
            v = np.ones((), x.dtype) if v is None else as_array(v, name, n)
            if traced(ins + [v]):
                v = as_traced([v])[0]
            try:
                v = bcast(v, shape)
            except ValueError:
                raise ShapeError(f"{name}: '{n}' {v.shape} does not broadcast to {shape}") \
                    from None
            ins.append(v)
        loss = me["op"].kernel(*[a.reshape(rr, cc) for a in ins], **kw).reshape(shape)
        return _reduce(name, loss, reduction, reductions)

    def reference(input, target, *args, reduction="mean", **kw):  # noqa: A002
        x = np.asarray(input)
        extra = [np.ones((), x.dtype) if a is None else np.asarray(a) for a in args]
        extra += [np.ones((), x.dtype)] * (len(extra_inputs) - len(extra))
        with np.errstate(all="ignore"):
            loss = ref_fn(x.astype(np.float64), np.asarray(target, np.float64),
                          *[e.astype(np.float64) for e in extra], **kw)
        return _np_reduce(np.asarray(loss).astype(x.dtype), reduction)

    def kernel_ref(*arrays, **kw):
        with np.errstate(all="ignore"):
            return np.asarray(ref_fn(*[a.astype(np.float64) for a in arrays], **kw)).astype(
                arrays[0].dtype)

    frontend.__doc__ = doc
    algorithm.__name__ = name
    P_ = inspect.Parameter
    algorithm.__signature__ = inspect.Signature(
        [P_(n, P_.POSITIONAL_OR_KEYWORD) for n in names]
        + [P_(p.name, P_.KEYWORD_ONLY) for p in params] + [P_("dims", P_.KEYWORD_ONLY)])
    me["op"] = op(name=name, category="loss", inputs={n: "R C" for n in names}, output="R C",
                  dtypes=_FLOATS, params=list(params), reference=reference,
                  kernel_reference=kernel_ref, frontend=frontend, example=_EX, doc=doc,
                  make_inputs=make_inputs)(algorithm)
    return me["op"]


def _k(like, v):
    return lit(like.type(), v)


def _nanlog(v):
    """log(v) for v >= 0 (the vectorizable log; 0 gives -inf)."""
    return hl.select(v == _k(v, 0), _k(v, -math.inf), _ew._log(v))


mse_loss = _pointwise(
    "mse_loss", lambda x, t: (x - t) * (x - t), lambda x, t: (x - t) ** 2,
    "Mean squared error ``(input - target)**2`` (``F.mse_loss``).")
l1_loss = _pointwise(
    "l1_loss", lambda x, t: hl.abs(x - t), lambda x, t: np.abs(x - t),
    "Absolute error ``|input - target|`` (``F.l1_loss``).")

_BETA = Param("beta", float, 1.0, low=0.0, doc="below it the loss is quadratic")
_DELTA = Param("delta", float, 1.0, low=0.0, doc="above it the loss is linear")


def _smooth_l1(x, t, beta):
    d = hl.abs(x - t)
    if beta == 0:
        return d
    return hl.select(d < _k(d, beta), _k(d, 0.5 / beta) * d * d, d - _k(d, 0.5 * beta))


def _huber(x, t, delta):
    d = hl.abs(x - t)
    return hl.select(d <= _k(d, delta), _k(d, 0.5) * d * d, _k(d, delta) * (d - _k(d, 0.5 * delta)))


smooth_l1_loss = _pointwise(
    "smooth_l1_loss", _smooth_l1,
    lambda x, t, beta=1.0: np.abs(x - t) if beta == 0 else np.where(
        np.abs(x - t) < beta, 0.5 * (x - t) ** 2 / beta, np.abs(x - t) - 0.5 * beta),
    "Smooth L1 (``F.smooth_l1_loss``): ``0.5 d**2 / beta`` below ``beta``, ``|d| - beta / 2``"
    " above.", params=[_BETA])
huber_loss = _pointwise(
    "huber_loss", _huber,
    lambda x, t, delta=1.0: np.where(np.abs(x - t) <= delta, 0.5 * (x - t) ** 2,
                                     delta * (np.abs(x - t) - 0.5 * delta)),
    "Huber (``F.huber_loss``): ``0.5 d**2`` up to ``delta``, ``delta (|d| - delta / 2)`` "
    "above.", params=[_DELTA], positive=("delta",))


def _kl(x, t, log_target):
    if log_target:
        return _ew._exp(t) * (t - x)
    return hl.select(t == _k(t, 0), _k(t, 0), t * (_nanlog(t) - x))


def _kl_ref(x, t, log_target=False):
    if log_target:
        return np.exp(t) * (t - x)
    return np.where(t == 0, 0.0, t * (np.log(np.where(t == 0, 1.0, t)) - x))


def _kl_inputs(dims, dtypes, params, rng):
    shape = (dims["R"], dims["C"])
    x = np.log(rng.uniform(0.05, 1, shape)).astype(dtypes[0])
    t = rng.uniform(0, 1, shape)
    t[0, 0] = 0.0
    return [x, (np.log(t + 0.01) if params.get("log_target") else t).astype(dtypes[1])]


kl_div = _pointwise(
    "kl_div", _kl, _kl_ref,
    "KL divergence (``F.kl_div``): ``target * (log(target) - input)`` pointwise (0 where "
    "target is 0), ``input`` holding log-probabilities; ``log_target=True`` takes target as "
    "log-probabilities. ``reduction`` may also be ``\"batchmean\"`` (the sum over input.shape[0]).",
    params=[Param("log_target", bool, False, doc="target holds log-probabilities")],
    reductions=_REDUCTIONS + ("batchmean",), make_inputs=_kl_inputs)


def _bce(x, t, w):
    lo = _k(x, -100.0)
    one = _k(x, 1.0)
    # torch's form and order: log1p(-x), not log(1 - x), which rounds 1 - x first (x = 1e-8
    # gave a loss of 0 where torch gives 1e-8), and (t - 1) a - t b, whose zero is +0 at
    # x = t = 0 as torch's.
    loss = ((t - one) * hl.max(_ew._log1p(-x), lo) - t * hl.max(_nanlog(x), lo)) * w
    # An input outside [0, 1] (or NaN) is no probability: NaN, as the reference gives (the
    # clamp at -100 would hide the NaN log of a negative number: 1.5 with target 1 gave -0.41).
    # (The NaN test is on the bits: Halide compiles float compares as if no operand were NaN.)
    inside = (x >= _k(x, 0.0)) & (x <= one) & hl.logical_not(_ew._is_nan(x))
    return hl.select(inside, loss, _k(x, math.nan))


def _bce_ref(x, t, w):
    with np.errstate(divide="ignore"):
        return w * ((t - 1) * np.maximum(np.log1p(-x), -100) - t * np.maximum(np.log(x), -100))


def _bce_inputs(dims, dtypes, params, rng):
    shape = (dims["R"], dims["C"])
    return [rng.uniform(0, 1, shape).astype(dtypes[0]), rng.uniform(0, 1, shape).astype(
        dtypes[1]), rng.uniform(0.5, 2, shape).astype(dtypes[2])]


binary_cross_entropy = _pointwise(
    "binary_cross_entropy", _bce, _bce_ref,
    "``-weight * (t log(x) + (1 - t) log(1 - x))`` with each log clamped at -100 "
    "(``F.binary_cross_entropy``); input holds probabilities in [0, 1]. An input outside [0, 1] "
    "or NaN gives a NaN loss (``\"mean\"``/``\"sum\"``: NaN) where torch raises: the check "
    "costs no pass over the data and works inside traced programs.",
    extra_inputs=("weight",), make_inputs=_bce_inputs)


def _bce_logits(x, t, w, pw):
    # torch's (1 - t) x + (1 + (pw - 1) t) softplus(-x), rewritten with softplus(x) =
    # x + softplus(-x) so that nothing cancels: (1 - t) softplus(x) + pw t softplus(-x).
    one = _k(x, 1.0)
    return w * ((one - t) * _ew._softplus(x) + pw * t * _ew._softplus(-x))


def _bce_logits_ref(x, t, w, pw):
    return w * ((1 - t) * x + (1 + (pw - 1) * t) * (np.log1p(np.exp(-np.abs(x)))
                                                     + np.maximum(-x, 0)))


binary_cross_entropy_with_logits = _pointwise(
    "binary_cross_entropy_with_logits", _bce_logits, _bce_logits_ref,
    "Sigmoid plus binary cross entropy in one stable formula "
    "(``F.binary_cross_entropy_with_logits``); ``pos_weight`` weighs the positive term.",
    extra_inputs=("weight", "pos_weight"))


# -- cross_entropy and nll_loss ------------------------------------------------------------------

def _class_args(name, input, target, weight):  # noqa: A002
    """input as [M, C], target as [M] and weight as [C], plus the shape of a 'none' result."""
    x = as_array(input, name, "input")
    t = as_array(target, name, "target")
    if t.dtype.name not in ("int32", "int64"):
        raise DtypeError(f"{name}: target must hold class indices (int32 or int64), got "
                         f"{t.dtype.name}; probability targets are not supported")
    w = None if weight is None else as_array(weight, name, "weight")
    if traced([x, t] + ([w] if w is not None else [])):
        x, t = as_traced([x, t])
        if w is not None:
            w = as_traced([w])[0]
    if x.ndim == 1:
        x, t, shape = x.reshape(1, -1), t.reshape(1), ()
    elif x.ndim >= 2:
        shape = (x.shape[0],) + x.shape[2:]
        if t.shape != shape:
            raise ShapeError(f"{name}: target must have shape {shape} for input {x.shape}, got "
                             f"{t.shape}")
        if x.ndim > 2:
            x = np.moveaxis(x, 1, -1)
        x, t = x.reshape(math.prod(x.shape[:-1]), x.shape[-1]), t.reshape(-1)
    else:
        raise ShapeError(f"{name}: input must be [C], [N, C] or [N, C, d1, ...], got a 0-d array")
    c = x.shape[-1]
    if w is None:
        w = np.ones(c, x.dtype)
    elif w.shape != (c,):
        raise ShapeError(f"{name}: weight must have shape ({c},) (one per class), got {w.shape}")
    return x, t, w, shape


def _class_loss(the_op, name, input, target, weight, ignore_index, reduction, **params):  # noqa: A002
    reduction = choice(name, "reduction", reduction, _REDUCTIONS)
    ignore_index = int_arg(name, "ignore_index", ignore_index, -(1 << 31), (1 << 31) - 1)
    x, t, w, shape = _class_args(name, input, target, weight)
    check_range(name, "target", t, x.shape[-1], skip=ignore_index)
    loss, wt = the_op.kernel(x, t, w, ignore_index=ignore_index, **params)
    if reduction == "none":
        return loss.reshape(shape)
    if reduction == "sum":
        return _red.sum_(loss)
    num, den = _red.sum_(loss), _red.sum_(wt)
    with np.errstate(divide="ignore", invalid="ignore"):    # every sample ignored: NaN, quietly
        return num / den


def _class_alg(log_softmax: bool):
    def algorithm(input, target, weight, *, ignore_index, label_smoothing=0.0, dims):  # noqa: A002
        n = hl.Var("n")
        f64, t = hl.Float(64), input.type()
        c = hl.RDom([hl.Range(0, dims.C)], "c")
        cls = target[n]
        ignored = cls == hl.cast(cls.type(), ignore_index)
        k = hl.Func("k")    # the class; checked unless ignored
        k[n] = hl.select(ignored, 0, _checked(hl.select(ignored, hl.cast(cls.type(), 0), cls),
                                              dims.C, "target"))
        kn = hl.Expr(k[n])
        wt = hl.Func("wt")
        wt[n] = hl.select(ignored, hl.cast(t, 0), weight[kn])
        if log_softmax:
            m = hl.Func("rowmax")
            m[n] = hl.cast(t, -math.inf)
            m[n] = hl.max(m[n], input[c, n])
            s = hl.Func("sumexp")
            s[n] = lit64(0)
            s[n] += hl.cast(f64, _ew._exp(input[c, n] - m[n]))
            lse = hl.cast(f64, m[n]) + hl.log(s[n])
        else:
            lse = lit64(0)
        logp = hl.cast(f64, input[kn, n]) - lse
        loss = -hl.cast(f64, hl.Expr(wt[n])) * logp
        if label_smoothing > 0:
            sm = hl.Func("smooth")
            sm[n] = lit64(0)
            sm[n] += hl.cast(f64, weight[c]) * (hl.cast(f64, input[c, n]) - lse)
            smooth = -hl.Expr(sm[n]) * lit64(label_smoothing) / hl.cast(f64, dims.C)
            loss = lit64(1 - label_smoothing) * loss + hl.select(ignored, lit64(0), smooth)
        out = hl.Func("loss")
        out[n] = hl.cast(t, loss)
        return out, wt
    return algorithm


def _np_class(input, target, weight, ignore_index, reduction, label_smoothing, log_softmax):  # noqa: A002
    x = np.asarray(input).astype(np.float64)
    dt = np.asarray(input).dtype
    t = np.asarray(target)
    if x.ndim == 1:
        x, t = x[None], t.reshape(1)
    elif x.ndim > 2:
        x, t = np.moveaxis(x, 1, -1).reshape(-1, x.shape[1]), t.reshape(-1)
    c = x.shape[1]
    w = np.ones(c) if weight is None else np.asarray(weight, np.float64)
    if log_softmax:
        m = x.max(axis=1, keepdims=True)
        x = x - (m + np.log(np.exp(x - m).sum(axis=1, keepdims=True)))
    ok = t != ignore_index
    tc = np.where(ok, t, 0)
    wt = np.where(ok, w[tc], 0.0)
    loss = -wt * x[np.arange(len(t)), tc]
    if label_smoothing:
        smooth = np.where(ok, -(x * w).sum(axis=1), 0.0)
        loss = (1 - label_smoothing) * loss + label_smoothing / c * smooth
    if reduction == "none":
        shape = () if np.ndim(input) == 1 else (np.shape(input)[0],) + np.shape(input)[2:]
        return loss.reshape(shape).astype(dt)
    if reduction == "sum":
        return np.asarray(loss.sum()).astype(dt)[()]
    with np.errstate(all="ignore"):
        return np.asarray(loss.sum() / wt.sum()).astype(dt)[()]


def _class_inputs(dims, dtypes, params, rng):
    n, c = dims["N"], dims["C"]
    t = rng.integers(0, c, n).astype(dtypes[1])
    t[0] = params.get("ignore_index", -100)
    return [rng.uniform(-3, 3, (n, c)).astype(dtypes[0]), t,
            rng.uniform(0.5, 2, c).astype(dtypes[2])]


_IGNORE = Param("ignore_index", int, -100, low=-(1 << 31), high=(1 << 31) - 1,
                doc="target value that contributes nothing")
_SIGS = [(f, i, f) for f in _FLOATS for i in ("int32", "int64")]


def _ce_frontend(input, target, weight=None, ignore_index=-100, reduction="mean",  # noqa: A002
                 label_smoothing=0.0):
    """``F.cross_entropy``: log_softmax over the class axis, then the negative log-likelihood
    of class-index targets, or with a float target of the input's shape, of class probabilities
    (see the module docs for weights, ignore_index, label_smoothing)."""
    dt = target.dtype if hasattr(target, "dtype") else np.asarray(target).dtype
    if np.dtype(dt).kind == "f":
        return _ce_probabilities(input, target, weight, ignore_index, reduction,
                                 label_smoothing)
    return _class_loss(cross_entropy, "cross_entropy", input, target, weight, ignore_index,
                       reduction, label_smoothing=label_smoothing)


def _ce_probabilities(input, target, weight, ignore_index, reduction, label_smoothing):  # noqa: A002
    """torch's cross entropy with probability targets: ``-sum_c w_c y_c log_softmax(x)_c`` per
    sample, ``y`` mixed with the uniform ``1 / C`` by ``label_smoothing``; ``"mean"`` divides by
    the number of samples (not by the weights, as torch). Composed of PyPTO ops, so it traces
    and differentiates (in the input and the target) like them."""
    from .. import ops as P

    name = "cross_entropy"
    if reduction not in _REDUCTIONS:
        raise ParamError(f"{name}: 'reduction' must be one of {list(_REDUCTIONS)}, got "
                         f"{reduction!r}")
    if ignore_index != -100:
        raise ParamError(f"{name}: ignore_index applies to class-index targets; a float target "
                         f"holds class probabilities (give int32/int64 class indices to ignore "
                         f"some)")
    x = as_array(input, name, "input")
    t = as_array(target, name, "target")
    w = None if weight is None else as_array(weight, name, "weight")
    if traced([x, t] + ([w] if w is not None else [])):
        x, t = as_traced([x, t])
        if w is not None:
            w = as_traced([w])[0]
    if x.dtype != t.dtype:
        raise DtypeError(f"{name}: a probability target must have the input's dtype "
                         f"({x.dtype.name}), got {t.dtype.name}; cast one of them")
    if tuple(t.shape) != tuple(x.shape):
        raise ShapeError(f"{name}: a probability target must have the input's shape "
                         f"{tuple(x.shape)}, got {tuple(t.shape)} (class indices are int32/int64)")
    if x.ndim == 0:
        raise ShapeError(f"{name}: input must be [C], [N, C] or [N, C, d1, ...], got a 0-d array")
    if not 0.0 <= float(label_smoothing) <= 1.0:
        raise ParamError(f"{name}: 'label_smoothing' must be in [0, 1], got {label_smoothing!r}")
    axis = 0 if x.ndim == 1 else 1
    c = x.shape[axis]
    if w is not None and tuple(w.shape) != (c,):
        raise ShapeError(f"{name}: weight must have shape ({c},) (one per class), got "
                         f"{tuple(w.shape)}")
    y = t
    if label_smoothing:
        y = y * (1.0 - float(label_smoothing)) + float(label_smoothing) / c
    terms = P.log_softmax(x, axis=axis) * y
    if w is not None:
        terms = terms * w.reshape((c,) + (1,) * (x.ndim - 1 - axis))
    loss = -P.sum(terms, axis=axis)
    if reduction == "none":
        return loss
    total = P.sum(loss)
    return total if reduction == "sum" else total / (x.size // c)


@op(category="loss", inputs={"input": "N C", "target": "N", "weight": "C"},
    outputs={"loss": "N", "wt": "N"}, dtypes=_SIGS,
    params=[_IGNORE, Param("label_smoothing", float, 0.0, low=0.0, high=1.0,
                           doc="weight of the uniform target")],
    reference=lambda input, target, weight=None, ignore_index=-100, reduction="mean",
    label_smoothing=0.0: _np_class(input, target, weight, ignore_index, reduction,
                                   label_smoothing, True),
    kernel_reference=lambda input, target, weight, ignore_index=-100, label_smoothing=0.0: (
        _np_class(input, target, weight, ignore_index, "none", label_smoothing, True),
        np.where(target != ignore_index, weight[np.where(target != ignore_index, target, 0)],
                 0).astype(weight.dtype)),
    frontend=_ce_frontend, make_inputs=_class_inputs, example={"N": 32, "C": 10})
def cross_entropy(input, target, weight, *, ignore_index, label_smoothing, dims):  # noqa: A002
    """Per-sample cross entropy of logits [N, C] and its weight w[target]."""
    return _class_alg(True)(input, target, weight, ignore_index=ignore_index,
                            label_smoothing=label_smoothing, dims=dims)


def _nll_frontend(input, target, weight=None, ignore_index=-100, reduction="mean"):  # noqa: A002
    """``F.nll_loss``: ``-weight[target] * input[target]`` for log-probability ``input``."""
    return _class_loss(nll_loss, "nll_loss", input, target, weight, ignore_index, reduction)


@op(category="loss", inputs={"input": "N C", "target": "N", "weight": "C"},
    outputs={"loss": "N", "wt": "N"}, dtypes=_SIGS, params=[_IGNORE],
    reference=lambda input, target, weight=None, ignore_index=-100, reduction="mean":
    _np_class(input, target, weight, ignore_index, reduction, 0.0, False),
    kernel_reference=lambda input, target, weight, ignore_index=-100: (
        _np_class(input, target, weight, ignore_index, "none", 0.0, False),
        np.where(target != ignore_index, weight[np.where(target != ignore_index, target, 0)],
                 0).astype(weight.dtype)),
    frontend=_nll_frontend, make_inputs=_class_inputs, example={"N": 32, "C": 10})
def nll_loss(input, target, weight, *, ignore_index, dims):  # noqa: A002
    """Per-sample negative log-likelihood of [N, C] and its weight w[target]."""
    return _class_alg(False)(input, target, weight, ignore_index=ignore_index, dims=dims)
