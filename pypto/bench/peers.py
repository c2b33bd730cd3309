"""Peer implementations of ops for side-by-side comparisons: NumPy, PyTorch eager, torch.compile.

Each entry takes the op's canonical-form arrays and parameters (what the tuner and benchmarks
hold) and returns a zero-argument callable running the same computation on data made once, up
front, so that only the computation is timed. Outputs are compared with the op's reference before
anything is timed, like every other candidate.

The NumPy peers are what a NumPy user would write for speed (float32 throughout, BLAS for
products, an im2col convolution); the op references, which favour exactness (float64
accumulation, plain loops), are what every result is checked against, and stand in as the NumPy
peer of ops without a faster form. Where NumPy's API lets the fast form write into an array made
once (``np.matmul(a, b, out=o)``), it does: a NumPy user at their best does that, and such a peer
is marked (:func:`form`) so that PyPTO is compared with it in the same form (``out=``).

:func:`pypto_call` builds PyPTO's side as a user writes it: ``pypto.ops.X(arrays, ...)`` in the
op's public form, with a fresh output per call or with ``out=``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

#: How a candidate's output is made, as reports say it.
FRESH = "fresh output"
PREALLOCATED = "preallocated output"


def torch_available() -> bool:
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    return True


def _t(a: np.ndarray):
    import torch

    return torch.from_numpy(np.ascontiguousarray(a))


_TORCH: dict[str, Callable] = {}


def _builders() -> dict[str, Callable]:
    """op -> torch eager builder: the family tables of :mod:`.torch_peers`, with the entries
    written here laid over them (made once per process)."""
    if not _TORCH:
        from .torch_peers import builders

        _TORCH.update(builders())
        _TORCH.update(_own_builders())
    return _TORCH


def _own_builders() -> dict[str, Callable]:
    import torch
    import torch.nn.functional as F

    def conv(x, w, b, p):
        tx, tw, tb = _t(x), _t(w), _t(b)
        return lambda: F.conv2d(tx, tw, tb, stride=(p["stride_h"], p["stride_w"]),
                                padding=(p["pad_h"], p["pad_w"]), dilation=(p["dil_h"], p["dil_w"]),
                                groups=p["groups"])

    def depthwise(x, w, p):
        tx, tw = _t(x), _t(w)
        return lambda: F.conv2d(tx, tw, stride=(p["stride_h"], p["stride_w"]),
                                padding=(p["pad_h"], p["pad_w"]), groups=tx.shape[1])

    def blur(x, p):
        tx = _t(x)[:, None]
        r = p["size"] // 2
        return lambda: F.avg_pool2d(F.pad(tx, (r, r, r, r), mode="replicate"), p["size"], stride=1)[:, 0]

    def layer_norm(x, g, b, p):
        tx, tg, tb = _t(x), _t(g), _t(b)
        return lambda: F.layer_norm(tx, (tx.shape[-1],), tg, tb, eps=p["eps"])

    def sdpa(q, k, v, p):
        tq, tk, tv = _t(q), _t(k), _t(v)
        scale = p.get("scale")
        return lambda: F.scaled_dot_product_attention(tq, tk, tv, scale=scale)

    def two(fn):
        return lambda a, b, p: (lambda ta, tb: (lambda: fn(ta, tb)))(_t(a), _t(b))

    def one(fn):
        return lambda a, p: (lambda ta: (lambda: fn(ta)))(_t(a))

    return {
        "matmul": two(torch.matmul),
        "batch_matmul": two(torch.bmm),
        "conv2d": conv,
        "depthwise_conv2d": depthwise,
        "box_blur": blur,
        "softmax": one(lambda x: torch.softmax(x, dim=-1)),
        "log_softmax": one(lambda x: torch.log_softmax(x, dim=-1)),
        "layer_norm": layer_norm,
        "sum": one(lambda x: x.sum(dim=-1)),
        "swiglu": two(lambda x, y: F.silu(x) * y),
        "add": two(torch.add),
        "exp": one(torch.exp),
        "tanh": one(torch.tanh),
        "scaled_dot_product_attention": sdpa,
    }


def _numpy_builders() -> dict[str, Callable]:
    from numpy.lib.stride_tricks import sliding_window_view

    def conv(x, w, b, p):
        if p["groups"] != 1:
            return None
        sh, sw, dh, dw = p["stride_h"], p["stride_w"], p["dil_h"], p["dil_w"]
        O, C, KH, KW = w.shape
        wm = np.ascontiguousarray(w.reshape(O, C * KH * KW).T)

        def run():
            xp = np.pad(x, ((0, 0), (0, 0), (p["pad_h"],) * 2, (p["pad_w"],) * 2))
            win = sliding_window_view(xp, ((KH - 1) * dh + 1, (KW - 1) * dw + 1), axis=(2, 3))
            win = win[:, :, ::sh, ::sw, ::dh, ::dw]          # N C OH OW KH KW
            N, _, OH, OW = win.shape[:4]
            cols = win.transpose(0, 2, 3, 1, 4, 5).reshape(N * OH * OW, C * KH * KW)
            out = (cols @ wm + b).reshape(N, OH, OW, O)
            return out.transpose(0, 3, 1, 2)
        return run

    def depthwise(x, w, p):
        if w.shape[1] != 1:
            return None
        sh, sw = p["stride_h"], p["stride_w"]
        KH, KW = w.shape[2:]

        def run():
            xp = np.pad(x, ((0, 0), (0, 0), (p["pad_h"],) * 2, (p["pad_w"],) * 2))
            OH = (xp.shape[2] - KH) // sh + 1
            OW = (xp.shape[3] - KW) // sw + 1
            out = np.zeros((x.shape[0], x.shape[1], OH, OW), x.dtype)
            for i in range(KH):
                for j in range(KW):
                    out += xp[:, :, i:i + sh * OH:sh, j:j + sw * OW:sw] * w[None, :, 0, i, j, None, None]
            return out
        return run

    def blur(x, p):
        r = p["size"] // 2
        if x.dtype.kind != "f":
            return None

        def run():
            xp = np.pad(x, ((0, 0), (r, r), (r, r)), mode="edge")
            H, W = x.shape[1:]
            rows = sum(xp[:, i:i + H, :] for i in range(p["size"]))
            return sum(rows[:, :, j:j + W] for j in range(p["size"])) * np.float32(1.0 / p["size"] ** 2)
        return run

    def softmax(x, p):
        def run():
            e = np.exp(x - x.max(axis=-1, keepdims=True))
            e /= e.sum(axis=-1, keepdims=True)
            return e
        return run

    def layer_norm(x, g, b, p):
        def run():
            mu = x.mean(axis=-1, keepdims=True)
            d = x - mu
            var = np.mean(d * d, axis=-1, keepdims=True)
            return d / np.sqrt(var + np.float32(p["eps"])) * g + b
        return run

    def sdpa(q, k, v, p):
        scale = np.float32(p["scale"] if p.get("scale") is not None else 1.0 / np.sqrt(q.shape[-1]))

        def run():
            s = (q @ k.swapaxes(-1, -2)) * scale
            e = np.exp(s - s.max(axis=-1, keepdims=True))
            e /= e.sum(axis=-1, keepdims=True)
            return e @ v
        return run

    def two(fn):
        return lambda a, b, p: (lambda: fn(a, b))

    def one(fn):
        return lambda a, p: (lambda: fn(a))

    def two_into(ufunc):
        """``ufunc(a, b, out=o)`` into one array made here: the form a NumPy user writes in a loop."""
        def build(a, b, p):
            o = np.empty(np.broadcast_shapes(a.shape, b.shape) if ufunc is not np.matmul
                         else a.shape[:-1] + b.shape[-1:], np.result_type(a, b))
            return _into(lambda: ufunc(a, b, out=o))
        return build

    def one_into(ufunc):
        def build(a, p):
            o = np.empty_like(a)
            return _into(lambda: ufunc(a, out=o))
        return build

    def row_sum(x, p):
        o = np.empty(x.shape[:-1], x.dtype)
        return _into(lambda: np.sum(x, axis=-1, out=o))

    return {
        "matmul": two_into(np.matmul),
        "batch_matmul": two_into(np.matmul),
        "linear": lambda x, w, b, p: (lambda: x @ w.T + b),
        "conv2d": conv,
        "depthwise_conv2d": depthwise,
        "box_blur": blur,
        "softmax": softmax,
        "layer_norm": layer_norm,
        "sum": row_sum,
        "mean": one(lambda x: x.mean(axis=-1)),
        "max": one(lambda x: x.max(axis=-1)),
        "swiglu": two(lambda x, y: x / (np.float32(1) + np.exp(-x)) * y),
        "add": two_into(np.add),
        "mul": two_into(np.multiply),
        "exp": one_into(np.exp),
        "tanh": one_into(np.tanh),
        "transpose": one(lambda x: np.ascontiguousarray(x.T)),
        "scaled_dot_product_attention": sdpa,
    }


def _into(fn):
    """Marks a peer that writes into an output made once, up front (see :func:`form`)."""
    fn.pypto_form = PREALLOCATED
    return fn


def form(fn) -> str:
    """How ``fn`` (a peer) gets its output: :data:`PREALLOCATED` or :data:`FRESH`."""
    return getattr(fn, "pypto_form", FRESH)


def numpy_peer(op_name: str, arrays: Sequence[np.ndarray], params: Mapping[str, Any], *,
               op=None):
    """(callable, label): the fast NumPy form of the op, else its reference implementation
    (of ``op`` when given: a traced program's op is not in the registry).

    This is the NumPy figure everywhere a figure is quoted: ``pypto bench`` and the tuner's
    baselines (a float64 reference would make PyPTO look several times better than NumPy is).
    """
    build = _numpy_builders().get(op_name)
    if build is not None:
        fn = build(*arrays, dict(params))
        if fn is not None:
            return fn, "numpy"
    if op is None:
        from ..ops import get_op

        op = get_op(op_name)
    ref = (lambda: op.kernel_ref(*arrays, **params))
    if _is_view(ref(), arrays):
        # The kernel form returns a new array; a reference that returns a view of an input
        # (split's piece, diagonal) is timed with its result copied, as NumPy would make one.
        return (lambda: _owned(ref())), "numpy (reference, view copied)"
    return ref, "numpy (reference)"


def _results(out) -> list:
    return list(out) if isinstance(out, (tuple, list)) else [out]


def _is_view(out, arrays: Sequence[np.ndarray]) -> bool:
    """Whether a result (or one of a tuple of results) may share memory with one of ``arrays``
    (by address bounds: a result the reference allocated never overlaps an input's bounds, and
    the bounds check is constant time where ``np.shares_memory`` can search at length)."""
    return any(isinstance(r, np.ndarray) and isinstance(a, np.ndarray) and r.size
               and np.may_share_memory(r, a) for r in _results(out) for a in arrays)


def _owned(out):
    """``out`` with every array result copied into memory of its own."""
    copied = [np.array(r) if isinstance(r, np.ndarray) else r for r in _results(out)]
    return tuple(copied) if isinstance(out, (tuple, list)) else copied[0]


def blas_info() -> str:
    """Which BLAS NumPy runs and with which kernel, e.g. ``openblas 0.3.29 Zen, 2 threads``."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return "unknown (threadpoolctl not installed)"
    libs = [i for i in threadpool_info() if i.get("user_api") == "blas"]
    if not libs:
        return "none found"
    i = libs[0]
    return (f"{i.get('internal_api')} {i.get('version')} {i.get('architecture') or ''}, "
            f"{i.get('num_threads')} threads").replace("  ", " ")


def torch_compiled(fn):
    """``fn`` (a torch peer) through ``torch.compile``; compiled by its first call."""
    import torch

    graph = torch.compile(lambda: fn(), dynamic=False)
    return graph


def torch_peer(op_name: str, arrays: Sequence[np.ndarray], params: Mapping[str, Any]):
    """A callable running the op in PyTorch eager, or None when torch or a mapping is missing."""
    if not torch_available():
        return None
    build = _builders().get(op_name)
    if build is None:
        return None
    try:
        return build(*arrays, dict(params))
    except (TypeError, KeyError):
        return None
    except Exception as e:  # a mapping that breaks is reported by verification, never timed
        def broken(err=e):
            raise err
        return broken


def torch_output(fn) -> list[np.ndarray]:
    out = fn()
    outs = out if isinstance(out, (tuple, list)) else (out,)
    return [o.detach().numpy() for o in outs]


# -- PyPTO as a user calls it -------------------------------------------------------------------

def _pair(p, name):
    return (p[f"{name}_h"], p[f"{name}_w"])


def _public_forms() -> dict[str, Callable]:
    """op -> (canonical arrays, params) -> (args, kwargs) of the public call ``pypto.ops.X``."""
    return {
        "conv2d": lambda a, p: (tuple(a), {"stride": _pair(p, "stride"), "padding": _pair(p, "pad"),
                                           "dilation": _pair(p, "dil"), "groups": p["groups"]}),
        "depthwise_conv2d": lambda a, p: (tuple(a), {"stride": _pair(p, "stride"),
                                                     "padding": _pair(p, "pad")}),
        "softmax": lambda a, p: (tuple(a), {"axis": -1}),
        "log_softmax": lambda a, p: (tuple(a), {"axis": -1}),
        "layer_norm": lambda a, p: (tuple(a), {"eps": p["eps"]}),
        "box_blur": lambda a, p: (tuple(a), {"size": p["size"]}),
        "sum": lambda a, p: (tuple(a), {"axis": -1}),
        "scaled_dot_product_attention": lambda a, p: (tuple(a), {"scale": p.get("scale")}),
        "matmul": lambda a, p: (tuple(a), {}),
        "swiglu": lambda a, p: (tuple(a), {}),
    }


def pypto_call(op_name: str, arrays: Sequence[np.ndarray], params: Mapping[str, Any]):
    """(call, how): ``call(out=None)`` runs the op as a user calls it, ``how`` says in words.

    The public call ``pypto.ops.X(...)`` where the op's public form is known here (or the op has
    no frontend, so the canonical form is its public form); else ``pypto.ops.X.kernel(...)``, the
    canonical-form call without the frontend. Either goes through the whole call path (checks,
    schedule lookup, the compiled-kernel cache); ``out=`` writes into a given array.
    """
    from ..ops import get_op

    op = get_op(op_name)
    shape = _public_forms().get(op_name)
    if shape is not None:
        args, kwargs = shape(arrays, dict(params))
        return (lambda out=None: op(*args, out=out, **kwargs)), f"pypto.ops.{op_name}(...)"
    if op.frontend is None:
        kwargs = dict(params)
        return (lambda out=None: op(*arrays, out=out, **kwargs)), f"pypto.ops.{op_name}(...)"
    kwargs = dict(params)
    return ((lambda out=None: op.kernel(*arrays, out=out, **kwargs)),
            f"pypto.ops.{op_name}.kernel(...) (canonical form; no public mapping here)")
