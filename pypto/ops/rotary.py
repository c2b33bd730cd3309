"""Rotary position embedding in the "rotate half" form (GPT-NeoX, Hugging Face Llama).

``rotary_embedding(x, cos, sin)``:

- ``x`` is [..., S, D]: any leading axes (batch, heads), S positions, D features per head (even);
- ``cos`` and ``sin`` are [S, D], or [..., S, D] with leading axes that broadcast to x's (for
  example [B, 1, S, D] against x [B, heads, S, D], per-sample positions). They hold the angle of
  feature pair i at each position twice, once per half, as Hugging Face builds them:
  ``cos = concat(cos(pos * inv_freq), cos(pos * inv_freq))`` along the last axis;
- the result is ``x * cos + rotate_half(x) * sin`` with
  ``rotate_half(x) = concat(-x[..., D/2:], x[..., :D/2])``: features i and i + D/2 rotate as
  one pair.

The interleaved form (GPT-J: pairs 2i and 2i + 1) is not this op; neither is a partial rotary
dimension (apply the op to ``x[..., :rot]`` and concatenate the rest).

The kernel sees x as [B, H, S, 2, D/2] and cos, sin as [B, S, 2, D/2] (B: the leading axes that
cos and sin carry, H: the ones they broadcast over), so the two halves are separate loops and
every read is contiguous.
"""

from __future__ import annotations

import math

import halide as hl
import numpy as np

from ..errors import ShapeError
from ..runtime import as_array
from ._op import op
from .conv import check_float

_FLOATS = ["float32", "float64"]


def _rotary_reference(x, cos, sin):
    """NumPy rotate-half rotary embedding in float64."""
    x = np.asarray(x)
    xf = x.astype(np.float64)
    half = x.shape[-1] // 2
    rotated = np.concatenate([-xf[..., half:], xf[..., :half]], axis=-1)
    out = xf * np.asarray(cos, np.float64) + rotated * np.asarray(sin, np.float64)
    return out.astype(x.dtype)


def _rotary_kernel_reference(x, cos, sin):
    b, h, s, two, e = x.shape
    full = x.reshape(b, h, s, two * e)
    out = _rotary_reference(full, cos.reshape(b, 1, s, two * e), sin.reshape(b, 1, s, two * e))
    return out.reshape(x.shape)


def _broadcast(a, shape):
    if tuple(a.shape) == tuple(shape):
        return a
    if hasattr(a, "broadcast_to"):         # a traced Tensor
        return a.broadcast_to(shape)
    return np.broadcast_to(a, shape)


def _rotary_frontend(x, cos, sin):
    """Rotary position embedding, rotate-half form: x * cos + rotate_half(x) * sin."""
    name = "rotary_embedding"
    x = as_array(x, name, "x")
    cos = as_array(cos, name, "cos")
    sin = as_array(sin, name, "sin")
    if x.ndim < 2:
        raise ShapeError(f"{name}: x must be [..., S, D] (positions, features), got shape "
                         f"{tuple(x.shape)}")
    *lead, s, d = (int(n) for n in x.shape)
    if d % 2:
        raise ShapeError(f"{name}: the feature axis D={d} of x must be even (features i and "
                         f"i + D/2 rotate together)")
    for arg, c in (("cos", cos), ("sin", sin)):
        if c.ndim < 2 or tuple(c.shape[-2:]) != (s, d):
            hint = (f"; build it at full width, concat(cos(angles), cos(angles)) along the last "
                    f"axis" if c.ndim >= 2 and c.shape[-1] == d // 2 else "")
            raise ShapeError(f"{name}: {arg} must end in [S, D] = [{s}, {d}] like x, got shape "
                             f"{tuple(c.shape)}{hint}")
        if c.ndim > x.ndim:
            raise ShapeError(f"{name}: {arg} has more axes ({c.ndim}) than x ({x.ndim})")
    if tuple(cos.shape) != tuple(sin.shape):
        raise ShapeError(f"{name}: cos and sin must have one shape, got {tuple(cos.shape)} and "
                         f"{tuple(sin.shape)}")
    check_float(name, x=x, cos=cos, sin=sin)
    clead = (1,) * (len(lead) - (cos.ndim - 2)) + tuple(int(n) for n in cos.shape[:-2])
    for i, (cn, xn) in enumerate(zip(clead, lead)):
        if cn not in (1, xn):
            raise ShapeError(f"{name}: cos and sin of shape {tuple(cos.shape)} do not broadcast "
                             f"to x's leading axes {tuple(lead)} (axis {i}: {cn} vs {xn})")
    # cos's leading axes up to its last non-1 one are B; the rest, which it broadcasts over, H.
    p = max((i + 1 for i, cn in enumerate(clead) if cn != 1), default=0)
    cos_b = cos.reshape(clead + (s, d))
    sin_b = sin.reshape(clead + (s, d))
    if any(cn != xn for cn, xn in zip(clead[:p], lead[:p])):
        # Broadcast in the middle of the leading axes: give cos and sin x's leading axes.
        cos_b, sin_b = (_broadcast(a, tuple(lead[:p]) + tuple(clead[p:]) + (s, d))
                        for a in (cos_b, sin_b))
    b, h = math.prod(lead[:p]), math.prod(lead[p:])
    out = rotary_embedding.kernel(x.reshape(b, h, s, 2, d // 2), cos_b.reshape(b, s, 2, d // 2),
                                  sin_b.reshape(b, s, 2, d // 2))
    return out.reshape(x.shape)


_rotary_frontend.shape_only = True


def _rotary_validate(dims, p):
    if dims["T"] != 2:
        raise ShapeError(f"rotary_embedding: the kernel takes D as [2, D/2] (the two halves); "
                         f"got {dims['T']} halves")


@op(category="nn",
    inputs={"x": "B H S T E", "cos": "B S T E", "sin": "B S T E"},
    output="B H S T E",
    dtypes=_FLOATS,
    reference=_rotary_reference,
    kernel_reference=_rotary_kernel_reference,
    frontend=_rotary_frontend,
    validate=_rotary_validate,
    example={"B": 2, "H": 4, "S": 33, "T": 2, "E": 32})
def rotary_embedding(x, cos, sin, *, dims):
    """out[b, h, s, t, e] = x[b, h, s, t, e] * cos[b, s, t, e] + r * sin[b, s, t, e] with
    r = -x[b, h, s, 1, e] for the first half (t = 0) and x[b, h, s, 0, e] for the second."""
    e, t, s, h, b = hl.Var("e"), hl.Var("t"), hl.Var("s"), hl.Var("h"), hl.Var("b")
    other = x[e, 1 - t, s, h, b]
    rotated = hl.select(t == 0, -other, other)
    out = hl.Func("out")
    out[e, t, s, h, b] = x[e, t, s, h, b] * cos[e, t, s, b] + rotated * sin[e, t, s, b]
    return out
