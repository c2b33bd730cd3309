"""Rules of views and casts: the index remaps the frontends record around every op call."""

from __future__ import annotations

import numpy as np

from .. import shapes
from . import rule


@rule("view:reshape")
def _reshape(c):
    return [c.dy.reshape(c.inputs[0].shape)]


@rule("view:permute")
def _permute(c):
    axes = c.params["aux"][1]
    inv = [0] * len(axes)
    for i, a in enumerate(axes):
        inv[a] = i
    return [c.dy.transpose(inv)]


@rule("view:broadcast")
def _broadcast(c):
    """Un-broadcasting: sum over the leading axes added and the axes stretched from 1."""
    x = c.inputs[0]
    out_shape = c.dy.shape
    lead = len(out_shape) - x.ndim
    axes = tuple(range(lead)) + tuple(lead + i for i, n in enumerate(x.shape)
                                      if n == 1 and out_shape[lead + i] != 1)
    if not axes:
        return [c.dy.reshape(x.shape)]
    return [shapes.total(c.dy, axes, keepdims=True).reshape(x.shape)]


@rule("view:slice")
def _slice(c):
    _, starts, steps = c.params["aux"]
    return [shapes.Unsliced(c.dy, c.inputs[0].shape, starts, steps)]


@rule("cast")
def _cast(c):
    x = c.inputs[0]
    if np.dtype(x.dtype).kind != "f":
        return [None]
    return [c.dy.astype(x.dtype)]
