"""``out=`` on every op: filled in place, and a clear error for a wrong shape, dtype or layout.

Every registered op is called once the way its users call it (the public calls of
tests/ops/test_byteorder.py, one per op) or, for ops that file does not list yet, in their
canonical kernel form with inputs from ``pypto.infra.inputs``. The values written into ``out``
are compared with a call that allocates its own output.
"""

from __future__ import annotations

import inspect
import os
import sys

import numpy as np
import pytest

import pypto
import pypto.ops as P
from pypto import runtime
from pypto.errors import DtypeError, ParamError, ShapeError
from pypto.infra.inputs import complete_dims, make_inputs

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__)), "ops"))
from test_byteorder import CALLS  # noqa: E402  (one public call per op, small odd shapes)


def _as_tuple(r):
    return r if isinstance(r, tuple) else (r,)


def _kernel_call(op):
    """(fn, args, kwargs) calling ``op`` in its canonical form at small dims, or None when the op
    cannot be called without parameters of the caller's choosing."""
    try:
        params = op.resolve_params({})
        ex = op.example or {}
        dims = complete_dims(op, {d: min(ex.get(d, 5), 16) for d in op.input_dims}, params)
    except (ParamError, KeyError, TypeError, ShapeError):
        return None
    return op.kernel, make_inputs(op, op.dtypes[0], dims, params), {}


# Public calls of the ops the byte-order test leaves out (no multi-byte array input).
EXTRA = {
    "anchor_boxes": lambda: ((3, 4, 16, [32.0, 64.0], [0.5, 1.0]), {}),
    "dequantize": lambda: ((np.arange(-6, 9, dtype=np.int8).reshape(3, 5), 0.5, 2), {}),
    "threshold": lambda: ((np.linspace(-1, 1, 15, dtype=np.float32).reshape(3, 5), 0.1, -2.0),
                          {}),
}


def _call(name):
    if name in CALLS or name in EXTRA:
        args, kwargs = (CALLS.get(name) or EXTRA[name])()
        return getattr(P, name), list(args), kwargs
    return _kernel_call(pypto.get_op(name))


NAMES = sorted(op.name for op in pypto.ops.builtin_ops())


@pytest.mark.parametrize("name", NAMES)
def test_out_is_filled_in_place_and_checked(name):
    found = _call(name)
    if found is None:
        pytest.skip(f"{name} needs parameters of the caller's choosing and has no public call "
                    "listed in tests/ops/test_byteorder.py")
    fn, args, kwargs = found
    want = _as_tuple(fn(*args, **kwargs))
    want = tuple(np.asarray(w) for w in want)
    outs = tuple(np.full(w.shape, 7, w.dtype) for w in want)
    out = outs[0] if len(outs) == 1 else outs
    got = fn(*args, **kwargs, out=out)
    assert got is out, name
    for o, w in zip(outs, want):
        np.testing.assert_array_equal(o, w, err_msg=name)

    first = want[0]
    other = np.dtype("float64") if first.dtype != np.float64 else np.dtype("float32")
    bad_dtype = tuple(np.empty(w.shape, other) if i == 0 else np.empty(w.shape, w.dtype)
                      for i, w in enumerate(want))
    with pytest.raises(DtypeError, match=rf"{name}: out.* has dtype {other}; expected "
                                         rf"{first.dtype}"):
        fn(*args, **kwargs, out=bad_dtype[0] if len(want) == 1 else bad_dtype)

    bad_shape = tuple(np.empty(w.shape + (2,), w.dtype) if i == 0 else np.empty(w.shape, w.dtype)
                      for i, w in enumerate(want))
    with pytest.raises(ShapeError, match=rf"{name}: out.* has shape"):
        fn(*args, **kwargs, out=bad_shape[0] if len(want) == 1 else bad_shape)

    ro = tuple(np.empty(w.shape, w.dtype) for w in want)
    ro[0].flags.writeable = False
    with pytest.raises(ParamError, match=rf"{name}: out.* is read-only"):
        fn(*args, **kwargs, out=ro[0] if len(want) == 1 else ro)


# Frontends that only reshape their arguments: the kernel writes straight into out, no copy.
IN_PLACE = {
    "add": lambda x: ((x, x), {}),
    "exp": lambda x: ((x,), {}),
    "sum": lambda x: ((x,), {"axis": 1}),
    "softmax": lambda x: ((x,), {}),
    "matmul": lambda x: ((x, x.T.copy()), {}),
    "layer_norm": lambda x: ((x, x[0].copy(), x[1].copy()), {}),
}


@pytest.mark.parametrize("name", sorted(IN_PLACE))
def test_the_kernel_writes_into_out_without_a_copy(name):
    x = np.random.default_rng(0).uniform(-1, 1, (6, 6)).astype(np.float32)
    args, kwargs = IN_PLACE[name](x)
    fn = getattr(P, name)
    want = fn(*args, **kwargs)
    out = np.empty_like(want)
    for _ in range(2):   # the first call records the fast path, the second takes it
        before = dict(runtime.out_stats)
        assert fn(*args, **kwargs, out=out) is out
        assert runtime.out_stats["copied"] == before["copied"]
        assert runtime.out_stats["in_place"] == before["in_place"] + 1
        np.testing.assert_array_equal(out, want)


def test_a_frontend_that_reorders_copies_into_out_once():
    # softmax over axis 0 runs the row kernel on the transpose: the result is put in place.
    x = np.random.default_rng(1).uniform(-1, 1, (4, 5)).astype(np.float32)
    e = np.exp(x - x.max(axis=0))
    out = np.empty_like(x)
    assert P.softmax(x, axis=0, out=out) is out
    np.testing.assert_allclose(out, e / e.sum(axis=0), rtol=2e-6)


def test_multi_output_takes_a_tuple_and_names_the_count():
    args, kwargs = CALLS["lstm_cell"]()
    h, c = P.lstm_cell(*args, **kwargs)
    with pytest.raises(ParamError, match="lstm_cell: out= must be a tuple of 2 arrays"):
        P.lstm_cell(*args, **kwargs, out=np.empty_like(h))
    oh, oc = np.empty_like(h), np.empty_like(c)
    got = P.lstm_cell(*args, **kwargs, out=(oh, oc))
    assert got[0] is oh and got[1] is oc
    np.testing.assert_array_equal(oh, h)
    np.testing.assert_array_equal(oc, c)


def test_out_must_be_an_array_and_c_contiguous():
    x = np.ones((4, 6), np.float32)
    with pytest.raises(ParamError, match=r"add: out= must be an array \(one per output\), got list"):
        P.add(x, x, out=[0.0] * 24)
    with pytest.raises(ParamError, match="lstm_cell: out.* must be a NumPy array, got list"):
        P.lstm_cell(*CALLS["lstm_cell"]()[0], out=(np.empty((2, 4), np.float32), [0.0]))
    with pytest.raises(ParamError, match="add: out must be C-contiguous"):
        P.add(x, x, out=np.empty((6, 4), np.float32).T)


def test_kernel_form_takes_out_of_the_kernel_shape():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    out = np.empty((3, 4), np.float32)
    assert P.add.kernel(x, x, out=out) is out
    np.testing.assert_array_equal(out, 2 * x)
    with pytest.raises(ShapeError, match=r"add: out has shape \(12,\)"):
        P.add.kernel(x, x, out=np.empty(12, np.float32))
