"""Layers written as PyPTO programs: ``pypto.nn.lstm``.

A layer is a jitted function of its inputs and weights (weights are pipeline inputs, so layers
with other weights reuse the compiled program), differentiable through ``pypto.grad`` because it
is built from ops that have gradient rules.
"""

from __future__ import annotations

import numpy as np

from .. import ops
from ..errors import ShapeError
from ..frontend import jit

__all__ = ["lstm"]


def _lstm_steps(xs, h, c, w_ih, w_hh, b_ih, b_hh, mask):
    """The layer written out: the input projection of every step as one product, then per step
    one product with the recurrent weight and the gate arithmetic.

    Written this way rather than as a loop of ``lstm_cell``s, the backward reads the gates the
    forward computed (the cell's rule recomputes both products), the input weight's gradient and
    the inputs' gradient are one large product each, and the recurrent weight's per-step
    gradients join as one product too (see :mod:`pypto.autodiff.core`).
    """
    steps, batch, n_in = xs.shape
    hid = h.shape[-1]
    gx = ops.linear(xs.reshape(steps * batch, n_in), w_ih, b_ih + b_hh)
    gx = gx.reshape(steps, batch, 4 * hid)
    # The recurrent weight transposed once into a dense array that every step's product reads
    # as it is (a transposed view was re-staged by each step; [32, 64, 512] forward, in one
    # process: 62 -> 58 ms, torch.nn.LSTM 41).
    w_t = ops.transpose(w_hh)
    outs = []
    for t in range(steps):
        gates = gx[t] + ops.matmul(h, w_t)
        i = ops.sigmoid(gates[:, :hid])
        f = ops.sigmoid(gates[:, hid:2 * hid])
        g = ops.tanh(gates[:, 2 * hid:3 * hid])
        o = ops.sigmoid(gates[:, 3 * hid:])
        c_new = f * c + i * g
        h_new = o * ops.tanh(c_new)
        if mask is not None:
            # A sequence that has ended keeps its state; its outputs past the end are zeros.
            keep = mask[t]                                 # [B, 1] bool
            h = ops.where(keep, h_new, h)
            c = ops.where(keep, c_new, c)
            outs.append(ops.where(keep, h_new, 0.0))
        else:
            h, c = h_new, c_new
            outs.append(h)
    return ops.stack(outs), h, c     # one [T, B, H] output, written in the program


_dense = jit(lambda xs, h, c, w_ih, w_hh, b_ih, b_hh: _lstm_steps(xs, h, c, w_ih, w_hh, b_ih,
                                                                  b_hh, None))
_masked = jit(lambda xs, h, c, w_ih, w_hh, b_ih, b_hh, mask: _lstm_steps(xs, h, c, w_ih, w_hh,
                                                                         b_ih, b_hh, mask))


def lstm(xs, h0, c0, w_ih, w_hh, b_ih=None, b_hh=None, *, lengths=None):
    """An LSTM layer over ``xs`` [T, B, IN] (time first, like ``torch.nn.LSTM``'s default).

    Returns ``(outputs [T, B, H], h_T [B, H], c_T [B, H])``. Gates are ordered i, f, g, o as in
    PyTorch; ``w_ih`` is [4H, IN], ``w_hh`` [4H, H]. With ``lengths`` (ints, [B]) sequences are
    padded: step ``t`` of sequence ``b`` counts only when ``t < lengths[b]``; its outputs past
    the end are zeros and ``h_T``/``c_T`` are the states at each sequence's own last step.
    """
    # Arrays or traced Tensors (inside pypto.jit / pypto.grad): only shapes and dtypes are read.
    if not hasattr(xs, "shape"):
        xs = np.asarray(xs)
    if len(xs.shape) != 3:
        raise ShapeError(f"lstm: xs must be [T, B, IN], got shape {tuple(xs.shape)}")
    hid = (h0.shape if hasattr(h0, "shape") else np.shape(h0))[-1]
    dt = np.dtype(xs.dtype)
    b_ih = np.zeros(4 * hid, dt) if b_ih is None else b_ih
    b_hh = np.zeros(4 * hid, dt) if b_hh is None else b_hh
    if lengths is not None:
        lengths = np.asarray(lengths)
        if lengths.shape != (xs.shape[1],) or lengths.dtype.kind not in "iu":
            raise ShapeError(f"lstm: lengths must be {xs.shape[1]} ints (one per sequence), got "
                             f"{lengths.dtype.name} of shape {lengths.shape}")
        if (lengths < 0).any() or (lengths > xs.shape[0]).any():
            raise ShapeError(f"lstm: lengths must lie in [0, {xs.shape[0]}], got {lengths}")
        mask = (np.arange(xs.shape[0])[:, None] < lengths[None, :])[:, :, None]   # [T, B, 1]
        return _masked(xs, h0, c0, w_ih, w_hh, b_ih, b_hh, mask)
    return _dense(xs, h0, c0, w_ih, w_hh, b_ih, b_hh)
