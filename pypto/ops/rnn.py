"""Recurrent cells in PyTorch's conventions: gru_cell (``torch.nn.GRUCell``) and rnn_cell
(``torch.nn.RNNCell``, tanh or relu). ``lstm_cell`` lives in ``nn``.

Weights are laid out as torch stores them: ``w_ih`` [G * HID, IN], ``w_hh`` [G * HID, HID] and
biases [G * HID] with G = 3 gates (r, z, n in that order) for the GRU and G = 1 for the plain RNN.
``x`` is [B, IN] and ``h`` [B, HID]; a 1-D ``x`` [IN] with ``h`` [HID] is one unbatched step. A
missing ``h`` is zeros and a missing bias counts as zero, as in torch.

GRU step (torch's formulas)::

    r = sigmoid(x w_ir^T + b_ir + h w_hr^T + b_hr)
    z = sigmoid(x w_iz^T + b_iz + h w_hz^T + b_hz)
    n = tanh(x w_in^T + b_in + r * (h w_hn^T + b_hn))
    h' = (1 - z) * n + z * h

The kernels see the gate weights as [G, HID, IN] (a reshape of torch's layout).
"""

from __future__ import annotations

import halide as hl
import numpy as np

from ..errors import ShapeError
from ..runtime import as_array
from ._op import Param, op
from .conv import check_float
from .nn import _sigmoid, _tanh

_FLOATS = ["float32", "float64"]


def _sig(v):
    with np.errstate(over="ignore"):
        return 1.0 / (1.0 + np.exp(-v))


def _gru_reference(x, h, w_ih, w_hh, b_ih=None, b_hh=None):
    """NumPy GRU cell in float64 from torch's formulas (gates split from the stacked rows)."""
    x, w_ih, w_hh = (np.asarray(a) for a in (x, w_ih, w_hh))
    hid = w_hh.shape[1]
    h = np.zeros(x.shape[:-1] + (hid,), x.dtype) if h is None else np.asarray(h)
    f = [a.astype(np.float64) for a in (x, h, w_ih, w_hh)]
    gi = f[0] @ f[2].T
    gh = f[1] @ f[3].T
    if b_ih is not None:
        gi = gi + np.asarray(b_ih, np.float64)
    if b_hh is not None:
        gh = gh + np.asarray(b_hh, np.float64)
    i_r, i_z, i_n = np.split(gi, 3, axis=-1)
    h_r, h_z, h_n = np.split(gh, 3, axis=-1)
    r, z = _sig(i_r + h_r), _sig(i_z + h_z)
    n = np.tanh(i_n + r * h_n)
    return ((1 - z) * n + z * f[1]).astype(x.dtype)


def _rnn_reference(x, h, w_ih, w_hh, b_ih=None, b_hh=None, nonlinearity="tanh"):
    """NumPy RNN cell in float64: act(x w_ih^T + b_ih + h w_hh^T + b_hh)."""
    x, w_ih, w_hh = (np.asarray(a) for a in (x, w_ih, w_hh))
    hid = w_hh.shape[1]
    h = np.zeros(x.shape[:-1] + (hid,), x.dtype) if h is None else np.asarray(h)
    pre = x.astype(np.float64) @ w_ih.astype(np.float64).T + \
        h.astype(np.float64) @ w_hh.astype(np.float64).T
    for b in (b_ih, b_hh):
        if b is not None:
            pre = pre + np.asarray(b, np.float64)
    out = np.tanh(pre) if nonlinearity == "tanh" else np.maximum(pre, 0.0)
    return out.astype(x.dtype)


def _cell_args(name, gates, x, h, w_ih, w_hh, b_ih, b_hh):
    """Checks a cell call; returns (x, h, w_ih, w_hh, b_ih, b_hh, unbatched) in kernel form,
    weights [G, HID, *] and biases [G, HID]."""
    x = as_array(x, name, "x")
    w_ih = as_array(w_ih, name, "w_ih")
    w_hh = as_array(w_hh, name, "w_hh")
    if x.ndim not in (1, 2):
        raise ShapeError(f"{name}: x must be [B, IN] (or [IN] for one unbatched step), got shape "
                         f"{tuple(x.shape)}")
    rows = f"{gates} * hidden" if gates > 1 else "hidden"
    for arg, w in (("w_ih", w_ih), ("w_hh", w_hh)):
        if w.ndim != 2:
            raise ShapeError(f"{name}: {arg} must be 2-D [{rows}, *] as torch lays it out, got "
                             f"shape {tuple(w.shape)}")
    g_rows, hid = w_hh.shape
    if g_rows != gates * hid:
        raise ShapeError(f"{name}: w_hh must be [{rows}, hidden] = [{gates * hid}, {hid}] for "
                         f"hidden size {hid}, got {tuple(w_hh.shape)}")
    if w_ih.shape[0] != g_rows:
        raise ShapeError(f"{name}: w_ih has {w_ih.shape[0]} rows but w_hh has {g_rows}; both "
                         f"are [{rows}, *]")
    if w_ih.shape[1] != x.shape[-1]:
        raise ShapeError(f"{name}: x has {x.shape[-1]} input features but w_ih expects "
                         f"{w_ih.shape[1]} (w_ih is [{rows}, IN])")
    unbatched = x.ndim == 1
    if unbatched:
        x = x.reshape(1, -1)
    dt = x.dtype if np.dtype(x.dtype).kind == "f" else np.float32
    if h is None:
        h = np.zeros((x.shape[0], hid), dt)
    else:
        h = as_array(h, name, "h")
        want = (hid,) if unbatched else (x.shape[0], hid)
        if tuple(h.shape) != want:
            raise ShapeError(f"{name}: h must have shape {want} ([B, hidden] like x's batch), "
                             f"got {tuple(h.shape)}")
        h = h.reshape(x.shape[0], hid)
    bs = []
    for arg, b in (("b_ih", b_ih), ("b_hh", b_hh)):
        if b is None:
            b = np.zeros(g_rows, dt)
        else:
            b = as_array(b, name, arg)
            if tuple(b.shape) != (g_rows,):
                raise ShapeError(f"{name}: {arg} must have shape ({g_rows},), got "
                                 f"{tuple(b.shape)}")
        bs.append(b.reshape(gates, hid))
    check_float(name, x=x, h=h, w_ih=w_ih, w_hh=w_hh, b_ih=bs[0], b_hh=bs[1])
    return (x, h, w_ih.reshape(gates, hid, -1), w_hh.reshape(gates, hid, hid), bs[0], bs[1],
            unbatched)


def _gates(x, h, w_ih, w_hh, b_ih, b_hh, dims):
    """gates_ih[j, b, t] = b_ih[t, j] + (x w_ih[t]^T)[b, j]; gates_hh the same with h, w_hh.

    Each is a matrix product per gate t in the form linear's blocked template computes (the
    accumulator ``<name>_acc``, the weight read transposed as ``<name>_wt``, gate row j
    innermost)."""
    j, t, b, k = hl.Var("j"), hl.Var("t"), hl.Var("b"), hl.Var("k")
    out = []
    for name, a, w, bias, n_k in (("gates_ih", x, w_ih, b_ih, dims.IN),
                                  ("gates_hh", h, w_hh, b_hh, dims.HID)):
        r = hl.RDom([hl.Range(0, n_k)], f"{name}_r")
        wt = hl.Func(f"{name}_wt")
        wt[j, k, t] = w[k, j, t]
        acc = hl.Func(f"{name}_acc")
        acc[j, b, t] = bias[j, t]
        acc[j, b, t] += a[r.x, b] * wt[j, r.x, t]
        g = hl.Func(name)
        g[j, b, t] = acc[j, b, t]
        out.append(g)
    return tuple(out)


def _gru_frontend(x, h, w_ih, w_hh, b_ih=None, b_hh=None):
    """One GRU step like torch.nn.GRUCell (torch.gru_cell); h=None means zeros."""
    x, h, w_ih, w_hh, b_ih, b_hh, unbatched = _cell_args("gru_cell", 3, x, h, w_ih, w_hh, b_ih,
                                                         b_hh)
    out = gru_cell.kernel(x, h, w_ih, w_hh, b_ih, b_hh)
    return out[0] if unbatched else out


def _cell_validate(name: str, gates: int, which: str):
    """The checks both cells make of their weights: ``gates`` on the gate axis, one row per
    hidden unit in each gate."""
    def validate(dims, p):
        if dims["T"] != gates:
            raise ShapeError(f"{name}: the gate axis of w_ih, w_hh, b_ih and b_hh must be "
                             f"{gates}{which}, got {dims['T']}")
        if dims["HO"] != dims["HID"]:
            raise ShapeError(f"{name}: the weights have {dims['HO']} rows per gate but h has "
                             f"{dims['HID']} hidden units")
    return validate


_gru_validate = _cell_validate("gru_cell", 3, " (r, z, n)")


@op(category="nn",
    inputs={"x": "B IN", "h": "B HID", "w_ih": "T HO IN", "w_hh": "T HO HID", "b_ih": "T HO",
            "b_hh": "T HO"},
    output="B HID",
    dtypes=_FLOATS,
    reference=_gru_reference,
    kernel_reference=lambda x, h, w_ih, w_hh, b_ih, b_hh: _gru_reference(
        x, h, w_ih.reshape(-1, w_ih.shape[2]), w_hh.reshape(-1, w_hh.shape[2]),
        b_ih.reshape(-1), b_hh.reshape(-1)),
    frontend=_gru_frontend,
    validate=_gru_validate,
    example={"B": 4, "IN": 24, "HID": 16, "HO": 16, "T": 3})
def gru_cell(x, h, w_ih, w_hh, b_ih, b_hh, *, dims):
    """GRU cell: with gates_ih = x @ w_ih[t].T + b_ih[t] and gates_hh likewise for t = r, z, n:
    r = sigmoid(ih_r + hh_r), z = sigmoid(ih_z + hh_z), n = tanh(ih_n + r * hh_n),
    out = (1 - z) * n + z * h."""
    hid, b = hl.Var("hid"), hl.Var("b")
    gi, gh = _gates(x, h, w_ih, w_hh, b_ih, b_hh, dims)
    r = _sigmoid(gi[hid, b, 0] + gh[hid, b, 0])
    z = _sigmoid(gi[hid, b, 1] + gh[hid, b, 1])
    n = _tanh(gi[hid, b, 2] + r * gh[hid, b, 2])
    out = hl.Func("out")
    out[hid, b] = (hl.cast(x.type(), 1) - z) * n + z * h[hid, b]
    return out


def _rnn_frontend(x, h, w_ih, w_hh, b_ih=None, b_hh=None, nonlinearity="tanh"):
    """One RNN step like torch.nn.RNNCell (tanh or relu); h=None means zeros."""
    from ..errors import ParamError

    if nonlinearity not in ("tanh", "relu"):
        raise ParamError(f"rnn_cell: 'nonlinearity' must be 'tanh' or 'relu', got "
                         f"{nonlinearity!r}")
    x, h, w_ih, w_hh, b_ih, b_hh, unbatched = _cell_args("rnn_cell", 1, x, h, w_ih, w_hh, b_ih,
                                                         b_hh)
    out = rnn_cell.kernel(x, h, w_ih, w_hh, b_ih, b_hh, nonlinearity=nonlinearity)
    return out[0] if unbatched else out


_rnn_validate = _cell_validate("rnn_cell", 1, "")


@op(category="nn",
    inputs={"x": "B IN", "h": "B HID", "w_ih": "T HO IN", "w_hh": "T HO HID", "b_ih": "T HO",
            "b_hh": "T HO"},
    output="B HID",
    dtypes=_FLOATS,
    params=[Param("nonlinearity", str, "tanh", choices=("tanh", "relu"),
                  doc="the activation: tanh or relu")],
    reference=_rnn_reference,
    kernel_reference=lambda x, h, w_ih, w_hh, b_ih, b_hh, nonlinearity="tanh": _rnn_reference(
        x, h, w_ih.reshape(-1, w_ih.shape[2]), w_hh.reshape(-1, w_hh.shape[2]),
        b_ih.reshape(-1), b_hh.reshape(-1), nonlinearity),
    frontend=_rnn_frontend,
    validate=_rnn_validate,
    example={"B": 4, "IN": 24, "HID": 16, "HO": 16, "T": 1})
def rnn_cell(x, h, w_ih, w_hh, b_ih, b_hh, *, nonlinearity, dims):
    """RNN cell: out = act(x @ w_ih[0].T + b_ih[0] + h @ w_hh[0].T + b_hh[0]), act tanh or
    relu."""
    hid, b = hl.Var("hid"), hl.Var("b")
    gi, gh = _gates(x, h, w_ih, w_hh, b_ih, b_hh, dims)
    pre = gi[hid, b, 0] + gh[hid, b, 0]
    out = hl.Func("out")
    out[hid, b] = _tanh(pre) if nonlinearity == "tanh" else hl.max(pre, hl.cast(x.type(), 0))
    return out


for _fe in (_gru_frontend, _rnn_frontend):
    _fe.shape_only = True
