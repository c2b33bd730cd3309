"""1-D and 3-D max and average pooling in ``torch.nn.functional``'s conventions (the 2-D ones
live in ``nn``).

``x`` is [N, C, L] (1-D) or [N, C, D, H, W] (3-D); without its batch axis it is one unbatched
sample, as in torch. ``kernel_size``, ``stride`` (default: the kernel size) and ``padding`` are an
int or one int per spatial axis; padding is at most half the kernel, as torch requires, and
``avg_pool3d``, as torch's, refuses an input smaller than the kernel on some axis even where
padding or ceil_mode would let a window fit (the other poolings, as torch's, accept it). Max pooling
pads with -inf and a NaN in a window makes its result NaN; average pooling pads with zeros and
divides by the whole window (``count_include_pad=True``, torch's default) or by the number of
input elements in it. Output size per axis: ``(n + 2 pad - k) // stride + 1``; with
``ceil_mode=True`` it is ``ceil((n + 2 pad - k) / stride) + 1``, less one where the last window
would start at or past the input's end (``(out - 1) stride >= n + pad``: every window starts inside
the input or the left padding), and windows overhanging the end read only what they cover: a max ignores the missing positions; an
average divides by the window clipped at ``n + pad`` (``count_include_pad=True``) or by the inputs
it covers. ``dilation``, ``return_indices`` and ``divisor_override`` are not offered.

``ceil_mode`` is the frontends' (``ceil_pool``, shared with ``nn``'s 2-D poolings), not a kernel
parameter. Every parameter of a kernel, defaults filled in (``Op.resolve_params``), is part of its
database key (``Key.params``, which lookup matches exactly) and of its compile-cache key, so a
``ceil_mode`` Param, even defaulting to False, would have changed the key of every floor-mode call
and orphaned the schedules stored for it. Instead the frontend pads x on the far side (-inf for
max, zeros for average) by the inputs the last window overhangs, runs the unchanged floor-mode
kernel on it (keys, schedules and fingerprints as for that shape) and, for average pooling,
multiplies the windows whose divisor torch clips by (the kernel's divisor / torch's). Gradients
follow from the pad, pooling and mul rules. The price: a copy of x per padded axis (and a pass
over the output for average pooling), only when a window overhangs.
"""

from __future__ import annotations

import inspect
import itertools

import halide as hl
import numpy as np

from ..errors import ParamError, ShapeError
from ._consts import lit
from ._op import Param, op
from .binary import mul
from .conv import _AXES, axis_params, batched, check_float, conv_out, ntuple, per_axis, \
    zero_padded
from .layout import pad

_FLOATS = ["float32", "float64"]
_KERNEL = ("kernel", 1, 1, "window size")   # made required below, as torch's kernel_size
_STRIDE = ("stride", 1, 1, "step between windows, in inputs")
_PAD = ("pad", 0, 0, "padding on both sides (at most half the window)")
_INCLUDE = Param("count_include_pad", bool, True, doc="divide by the whole window, padding included")


def _required_kernel(nsp):
    """axis_params with the window size required (no default)."""
    ps = axis_params(nsp, (_KERNEL,))
    return [Param(p.name, int, low=p.low, high=p.high, doc=p.doc) for p in ps]


# -- output sizes and ceil_mode (shared with nn's 2-D poolings) -----------------------------------
def pool_out(n: int, k: int, stride: int, padding: int, ceil_mode: bool = False) -> int:
    """torch's pooling output size along one axis: ``floor((n + 2 padding - k) / stride) + 1``;
    with ``ceil_mode`` the ceiling, less one when the last window would start at or past the
    input's end (``(m - 1) stride``, counted from the left padding, ``>= n + padding``)."""
    if not ceil_mode:
        return conv_out(n, k, stride, padding)
    m = -(-(n + 2 * padding - k) // stride) + 1
    return m - 1 if (m - 1) * stride >= n + padding else m


def _x(vals) -> str:
    return " x ".join(map(str, vals))


def too_small(name: str, sizes, ks, ss, ps, outs, ceil_mode: bool = False) -> ShapeError:
    """The ShapeError of a pooling whose output would be empty on some axis: the op, the input
    size, kernel, stride and padding, and what to change. (nn's 2-D poolings use it too.)"""
    padded = _x(n + 2 * p for n, p in zip(sizes, ps))
    if ceil_mode:
        why = (f" with ceil_mode=True; the padded input {padded} must be longer than the kernel "
               f"{_x(ks)} less the stride {_x(ss)} on every axis")
    else:
        why = f"; the padded input {padded} is smaller than the kernel {_x(ks)}"
    return ShapeError(f"{name}: the output would be {_x(outs)}{why} (input {_x(sizes)}, "
                      f"kernel_size {_x(ks)}, stride {_x(ss)}, padding {_x(ps)}): give a smaller "
                      f"kernel_size, more padding (at most half the kernel) or a larger input")


def check_ceil_out(name: str, sizes, ks, ss, ps) -> list[int]:
    """The ceil_mode output sizes; ShapeError when one would be below 1."""
    outs = [pool_out(n, k, s, p, True) for n, k, s, p in zip(sizes, ks, ss, ps)]
    if min(outs) < 1:
        raise too_small(name, sizes, ks, ss, ps, outs, True)
    return outs


def check_avg3d_input(sizes, ks, ps) -> None:
    """torch's avg_pool3d (alone of the poolings) refuses an input smaller than the kernel on
    some axis even where padding or ceil_mode would let a window fit; so does PyPTO's."""
    if any(n < k for n, k in zip(sizes, ks)):
        raise ShapeError(
            f"avg_pool3d: the input {_x(sizes)} is smaller than kernel_size {_x(ks)} on some "
            f"axis (padding {_x(ps)}); torch's avg_pool3d refuses this even where padding or "
            f"ceil_mode would let a window fit: give a kernel_size no larger than the input on "
            f"every axis, or pad x (pypto.ops.pad) to at least the kernel first")


def ceil_pool(kind: str, name: str, x, ks, ss, ps, run, count_include_pad: bool = True):
    """torch's ``ceil_mode=True`` pooling of ``x`` [N, C, *S] through the floor-mode kernel,
    which ``run(x, count_include_pad)`` calls (see the module docstring)."""
    if x.ndim != len(ks) + 2:
        return run(x, count_include_pad)     # the kernel names the rank it needs
    check_float(name, x=x)
    sizes = tuple(x.shape[2:])
    outs = check_ceil_out(name, sizes, ks, ss, ps)
    # Inputs the windows need past the far padding; with them floor mode gives these sizes.
    far = [max(0, (m - 1) * s + k - n - 2 * p) for n, k, s, p, m in zip(sizes, ks, ss, ps, outs)]
    if not any(far):
        return run(x, count_include_pad)     # no window overhangs: floor mode is ceil mode
    widths = [w for e in reversed(far) for w in (0, e)]     # torch's order: last axis first
    out = run(pad(x, widths, value=float("-inf") if kind == "max" else 0.0), count_include_pad)
    if kind == "max":
        return out
    ratio = np.ones(())
    for n, k, s, p, m, e in zip(sizes, ks, ss, ps, outs, far):
        start = np.arange(m) * s - p
        end = start + k
        if count_include_pad:    # the kernel divides by k; torch by the window clipped at n + p
            have, want = np.full(m, k), np.minimum(end, n + p) - start
        else:                    # both count the inputs covered; the kernel's input is n + e long
            have = np.minimum(end, n + e) - np.maximum(start, 0)
            want = np.minimum(end, n) - np.maximum(start, 0)
        ratio = np.multiply.outer(ratio, have / want)
    if (ratio == 1).all():
        return out
    return mul(out, ratio.astype(x.dtype))


# -- references --------------------------------------------------------------------------------
def _windows(xp, ks, ss, outs):
    """Yields the [N, C, *outs] view of padded ``xp`` that each window offset meets."""
    for tap in itertools.product(*(range(k) for k in ks)):
        sl = tuple(slice(t, t + s * (m - 1) + 1, s) for t, s, m in zip(tap, ss, outs))
        yield xp[(slice(None), slice(None)) + sl]


def _count_windows(n, k, s, p, ceil_mode):
    """Windows i = 0, 1, ... along an axis, counted one by one (not by pool_out's formula): those
    inside the padded input or, with ceil_mode, those that start less than a stride past the
    last start that fits, and inside the input or the left padding."""
    if ceil_mode:
        return sum(1 for i in range(n + 2 * p + 1) if i * s + k < n + 2 * p + s and i * s - p < n)
    return sum(1 for i in range(n + 2 * p + 1) if i * s + k <= n + 2 * p)


def window_reference(kind, x, ks, ss, ps, ceil_mode=False, count_include_pad=True):
    """NumPy pooling of [N, C, *S] ``x`` (float64 inside) with per-axis kernel, stride and padding
    tuples: every window read from padded copies, never through the kernels. Also nn's 2-D one."""
    sizes = x.shape[2:]
    outs = [_count_windows(m, k, s, p, ceil_mode) for m, k, s, p in zip(sizes, ks, ss, ps)]
    if min(outs) < 1:
        raise ShapeError(f"reference: no window fits in {tuple(sizes)} (kernel {ks}, stride "
                         f"{ss}, padding {ps}, ceil_mode={ceil_mode})")
    # Room past the far padding for windows that overhang it (ceil_mode): filled like padding for
    # the values, never counted in a divisor.
    far = [max(0, (m - 1) * s + k - n - 2 * p) for n, k, s, p, m in zip(sizes, ks, ss, ps, outs)]
    both = [(0, 0), (0, 0)] + [(p, p) for p in ps]
    beyond = [(0, 0), (0, 0)] + [(0, e) for e in far]
    fill = -np.inf if kind == "max" else 0.0
    xp = np.pad(np.pad(x.astype(np.float64), both, constant_values=fill), beyond,
                constant_values=fill)
    views = np.stack(list(_windows(xp, ks, ss, outs)))
    if kind == "max":
        out = views.max(axis=0)
    else:
        # each window's divisor: how many of its positions count (the padding too, or not)
        counted = np.pad(np.ones((1, 1) + tuple(sizes)), both,
                         constant_values=1.0 if count_include_pad else 0.0)
        out = views.sum(axis=0) / sum(_windows(np.pad(counted, beyond), ks, ss, outs))
    return out.astype(x.dtype)


def _pool_reference(kind, nsp):
    def ref(x, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
        x = np.asarray(x)
        unbatched = x.ndim == nsp + 1
        if unbatched:
            x = x[np.newaxis]
        ks = ntuple(kernel_size, nsp, "ref", "kernel_size", 1)
        ss = ks if stride is None else ntuple(stride, nsp, "ref", "stride", 1)
        ps = ntuple(padding, nsp, "ref", "padding", 0)
        out = window_reference(kind, x, ks, ss, ps, ceil_mode, count_include_pad)
        return out[0] if unbatched else out
    if kind == "max":
        def max_ref(x, kernel_size, stride=None, padding=0, ceil_mode=False):
            """NumPy max pooling over each window (padding counts as -inf; NaN wins)."""
            return ref(x, kernel_size, stride, padding, ceil_mode)
        return max_ref
    return ref


def _pool_kernel_reference(kind, nsp):
    ref = _pool_reference(kind, nsp)

    def kref(x, count_include_pad=True, **p):
        p = {**{f"{a}{sfx}": 1 if a == "stride" else 0 for a in ("stride", "pad")
                for *_, sfx in _AXES[nsp]}, **p}
        extra = {} if kind == "max" else {"count_include_pad": count_include_pad}
        return ref(x, per_axis(p, "kernel", nsp), per_axis(p, "stride", nsp),
                   per_axis(p, "pad", nsp), False, **extra)
    return kref


def _pool_validate(name, nsp):
    def validate(dims, p):
        ks, ps = per_axis(p, "kernel", nsp), per_axis(p, "pad", nsp)
        if any(2 * q > k for q, k in zip(ps, ks)):
            raise ParamError(f"{name}: padding {ps} must be at most half of the kernel {ks}")
        sizes = [pool_out(dims[i], p[f"kernel{sfx}"], p[f"stride{sfx}"], p[f"pad{sfx}"])
                 for i, _, _, sfx in _AXES[nsp]]
        if min(sizes) < 1:
            raise too_small(name, [dims[i] for i, *_ in _AXES[nsp]], ks,
                            per_axis(p, "stride", nsp), ps, sizes)
    return validate


def _pool_derive(nsp):
    def derive(dims, p):
        return {o: pool_out(dims[i], p[f"kernel{sfx}"], p[f"stride{sfx}"], p[f"pad{sfx}"])
                for i, _, o, sfx in _AXES[nsp]}
    return derive


def _pool_frontend(kind, nsp):
    name = f"{kind}_pool{nsp}d"
    names = ", ".join(i for i, _, _, _ in _AXES[nsp])

    def call(x, kernel_size, stride, padding, ceil_mode, include=True):
        if not isinstance(ceil_mode, (bool, np.bool_)):
            raise ParamError(f"{name}: 'ceil_mode' must be a bool, got {ceil_mode!r}")
        x, unbatched = batched(x, nsp, name, names)
        check_float(name, x=x)
        ks = ntuple(kernel_size, nsp, name, "kernel_size", 1)
        ss = ks if stride is None else ntuple(stride, nsp, name, "stride", 1)
        ps = ntuple(padding, nsp, name, "padding", 0)
        if any(2 * p > k for p, k in zip(ps, ks)):
            raise ParamError(f"{name}: 'padding' must be at most half of kernel_size {ks}, "
                             f"got {padding!r}")
        if kind == "avg" and nsp == 3:
            check_avg3d_input(x.shape[2:], ks, ps)
        kw = {}
        for prefix, vals in (("kernel", ks), ("stride", ss), ("pad", ps)):
            kw.update({f"{prefix}{sfx}": v for (*_, sfx), v in zip(_AXES[nsp], vals)})
        the_op = _OPS[name]

        def run(xs, count_include_pad):
            extra = {} if kind == "max" else {"count_include_pad": count_include_pad}
            return the_op.kernel(xs, **kw, **extra)
        out = ceil_pool(kind, name, x, ks, ss, ps, run, include) if ceil_mode else run(x, include)
        return out[0] if unbatched else out

    if kind == "max":
        def frontend(x, kernel_size, stride=None, padding=0, ceil_mode=False):
            return call(x, kernel_size, stride, padding, ceil_mode)
    else:
        def frontend(x, kernel_size, stride=None, padding=0, ceil_mode=False,
                     count_include_pad=True):
            if not isinstance(count_include_pad, (bool, np.bool_)):
                raise ParamError(f"{name}: 'count_include_pad' must be a bool, got "
                                 f"{count_include_pad!r}")
            return call(x, kernel_size, stride, padding, ceil_mode, bool(count_include_pad))
    what = "max (padding counts as -inf)" if kind == "max" else "average (zero padding)"
    frontend.__doc__ = f"{nsp}-D {what} pooling of [N, C, {names}] x, like F.{name}."
    frontend.shape_only = True
    return frontend


def _pool_algorithm(kind, x, p, nsp, dims, count_include_pad=True):
    axes = _AXES[nsp][::-1]                                   # innermost first
    ov = [hl.Var(o.lower()) for _, _, o, _ in axes]
    c, n = hl.Var("c"), hl.Var("n")
    ks = [p[f"kernel{sfx}"] for *_, sfx in axes]
    ss = [p[f"stride{sfx}"] for *_, sfx in axes]
    ps = [p[f"pad{sfx}"] for *_, sfx in axes]
    extents = [getattr(dims, i) for i, _, _, _ in axes]
    t = x.type()
    xp = zero_padded(x, "x_pad", extents, ps, float("-inf") if kind == "max" else 0.0)
    r = hl.RDom([hl.Range(0, k) for k in ks], "r")
    tap = xp[(*[v * s + r[j] - q for j, (v, s, q) in enumerate(zip(ov, ss, ps))], c, n)]
    acc = hl.Func("acc")
    out = hl.Func("out")
    if kind == "max":
        acc[(*ov, c, n)] = hl.cast(t, float("-inf"))
        cur = acc[(*ov, c, n)]
        acc[(*ov, c, n)] = hl.select((tap > cur) | hl.is_nan(tap), tap, cur)
        out[(*ov, c, n)] = acc[(*ov, c, n)]
        return out
    acc[(*ov, c, n)] = hl.cast(t, 0)
    acc[(*ov, c, n)] += tap
    if count_include_pad or not any(ps):
        size = 1
        for k in ks:
            size *= k
        out[(*ov, c, n)] = acc[(*ov, c, n)] * lit(t, 1.0 / size)
    else:
        count = None
        for v, s, q, k, e in zip(ov, ss, ps, ks, extents):
            start = v * s - q
            inside = hl.min(start + k, e) - hl.max(start, 0)
            count = inside if count is None else count * inside
        out[(*ov, c, n)] = acc[(*ov, c, n)] / hl.cast(t, count)
    return out


def _declare(kind, nsp, example):
    name = f"{kind}_pool{nsp}d"
    inputs = "N C " + " ".join(i for i, _, _, _ in _AXES[nsp])
    output = "N C " + " ".join(o for _, _, o, _ in _AXES[nsp])
    params = _required_kernel(nsp) + axis_params(nsp, (_STRIDE, _PAD))
    if kind == "avg":
        params.append(_INCLUDE)
    names = [q.name for q in params]

    def algorithm(x, *, dims, **p):
        include = p.pop("count_include_pad", True)
        return _pool_algorithm(kind, x, p, nsp, dims, include)
    algorithm.__name__ = name
    algorithm.__qualname__ = name
    algorithm.__module__ = __name__
    if kind == "max":
        algorithm.__doc__ = (f"{nsp}-D max pooling: each output is the largest input of its "
                             f"window (window i covers inputs i * stride - pad + [0, kernel) per "
                             f"axis); padding counts as -inf and a NaN makes the result NaN.")
    else:
        algorithm.__doc__ = (f"{nsp}-D average pooling: the mean of each window (see the max "
                             f"pooling); padding is zero and counts in the divisor unless "
                             f"count_include_pad is false.")
    # The algorithm takes its parameters by name (Op.build passes the ones it accepts).
    algorithm.__signature__ = _signature(names)
    return op(category="nn", inputs={"x": inputs}, output=output, dtypes=_FLOATS, params=params,
              reference=_pool_reference(kind, nsp),
              kernel_reference=_pool_kernel_reference(kind, nsp),
              frontend=_pool_frontend(kind, nsp), validate=_pool_validate(name, nsp),
              derive=_pool_derive(nsp), example=example, name=name)(algorithm)


def _signature(names):
    kinds = inspect.Parameter
    return inspect.Signature([kinds("x", kinds.POSITIONAL_OR_KEYWORD)]
                             + [kinds(n, kinds.KEYWORD_ONLY) for n in names]
                             + [kinds("dims", kinds.KEYWORD_ONLY)])


_EX1 = {"N": 2, "C": 16, "L": 61}
_EX3 = {"N": 1, "C": 8, "D": 9, "H": 11, "W": 13}
max_pool1d = _declare("max", 1, _EX1)
avg_pool1d = _declare("avg", 1, _EX1)
max_pool3d = _declare("max", 3, _EX3)
avg_pool3d = _declare("avg", 3, _EX3)
_OPS = {o.name: o for o in (max_pool1d, avg_pool1d, max_pool3d, avg_pool3d)}
