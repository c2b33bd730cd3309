"""Peer implementations of ops for side-by-side comparisons: PyTorch eager CPU, when installed.

Each entry takes the op's canonical-form arrays and parameters (what the tuner and benchmarks
hold) and returns a zero-argument callable running the same computation in PyTorch on tensors
made once, up front, so that only the computation is timed. Outputs are compared with the NumPy
reference before anything is timed, like every other candidate.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np


def torch_available() -> bool:
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    return True


def _t(a: np.ndarray):
    import torch

    return torch.from_numpy(np.ascontiguousarray(a))


def _builders() -> dict[str, Callable]:
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


def torch_output(fn) -> list[np.ndarray]:
    out = fn()
    outs = out if isinstance(out, (tuple, list)) else (out,)
    return [o.detach().numpy() for o in outs]
