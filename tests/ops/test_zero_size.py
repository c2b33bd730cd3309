"""Zero-size arrays in the eager ops, as NumPy (and torch where NumPy has no such op) handles them.

Two sweeps:

* every registered op's kernel (its canonical named-dim form) with each input dim set to 0 in
  turn: the call either gives the right result (the empty output of the right shape, or the
  value the kernel reference gives) or refuses with a ShapeError / ParamError, never another
  exception;
* the public calls of every family with zero-size inputs, compared with NumPy or torch.

No kernel is compiled for a zero-size call (the runtime answers it on the first-call path), so
these tests stay fast.
"""

from __future__ import annotations

import inspect
import warnings

import numpy as np
import pytest

import pypto
from pypto.errors import ParamError, PyptoError, ShapeError
from pypto.infra.inputs import make_inputs

P = pypto.ops
f32, f64 = np.float32, np.float64
CLEAR = (ShapeError, ParamError)


def Z(*shape, dtype=f32):
    return np.zeros(shape, dtype)


def R(*shape, dtype=f32, seed=0):
    return np.random.default_rng(seed).uniform(-1, 1, shape).astype(dtype)


# -- every op's kernel, each input dim zero in turn ---------------------------------------------

def _required(op):
    out = {}
    for p in op.params:
        if p.default is inspect.Parameter.empty:
            v = {float: 0.5, int: 2, bool: False, str: "x"}[p.kind]
            if p.choices:
                v = p.choices[0]
            if p.kind is int and p.low is not None:
                v = max(2, int(p.low))
            out[p.name] = v
    return out


def _base(op):
    params = _required(op)
    ex = dict(op.example or {})
    for d in op.input_dims:
        ex.setdefault(d, 4)
    for dims in ({d: min(v, 5) for d, v in ex.items()}, ex):
        try:
            return make_inputs(op, op.dtypes[0], dims, params), params
        except Exception:   # noqa: BLE001 - some ops need larger example dims
            continue
    return None, params


def _zeroed(op, arrays, dim):
    out = []
    for spec, a in zip(op.inputs, arrays):
        a = np.asarray(a)
        for axis, d in enumerate(spec.dims):
            if d == dim:
                a = np.ascontiguousarray(np.take(a, [], axis=axis))
        out.append(a)
    return out


#: Ops whose kernel gives a non-empty result from an empty input where the NumPy kernel
#: reference cannot take one (checked by value in the public tests below).
_IDENTITY_WITHOUT_REF = {"logsumexp", "nms", "batched_nms", "histogram", "cummax", "cummin",
                         "scaled_dot_product_attention", "masked_attention"}


def _kernel_sweep_ops():
    return [o.name for o in pypto.list_ops() if o.inputs]


def _no_compile(monkeypatch):
    from pypto.compiler import jit as _jit

    def refuse(*a, **k):
        raise AssertionError("a kernel was compiled for a zero-size call")
    monkeypatch.setattr(_jit, "get_kernel", refuse)


def _each_zero_dim(op):
    """(dim, the op's canonical example arrays with dim set to 0, params) per input dim; skips
    an op without example inputs."""
    arrays, params = _base(op)
    if arrays is None:
        pytest.skip("no example inputs")
    for dim in op.input_dims:
        yield dim, _zeroed(op, arrays, dim), params


@pytest.mark.parametrize("name", _kernel_sweep_ops())
def test_every_kernel_takes_or_clearly_refuses_each_zero_dim(name, monkeypatch):
    _no_compile(monkeypatch)
    op = pypto.get_op(name)
    for dim, zs, params in _each_zero_dim(op):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                got = op.kernel(*zs, **params)
            except CLEAR:
                continue
            except PyptoError as e:       # a DtypeError would be a bug of this sweep's inputs
                pytest.fail(f"{name} {dim}=0: {type(e).__name__}: {e}")
            except Exception as e:        # noqa: BLE001 - what this test exists to catch
                pytest.fail(f"{name} {dim}=0 {[z.shape for z in zs]}: raw {type(e).__name__}: {e}")
            got = got if isinstance(got, tuple) else (got,)
            try:
                want = op.kernel_ref(*zs, **params)
            except Exception:             # noqa: BLE001 - NumPy cannot: see below
                want = None
        if all(g.size == 0 for g in got):
            if want is not None:
                want = want if isinstance(want, tuple) else (want,)
                assert [g.shape for g in got] == [np.shape(w) for w in want], (name, dim)
            continue
        # A non-empty result from an empty input: an identity (sum 0, matmul zeros, ...).
        if want is None:
            assert name in _IDENTITY_WITHOUT_REF, (name, dim, [g.shape for g in got])
            continue
        want = want if isinstance(want, tuple) else (want,)
        for g, w in zip(got, want):
            w = np.asarray(w)
            assert g.shape == w.shape, (name, dim, g.shape, w.shape)
            np.testing.assert_allclose(g.astype(f64), w.astype(f64), rtol=1e-5, atol=1e-6,
                                       equal_nan=True, err_msg=f"{name} {dim}=0")


# -- the public calls, family by family ---------------------------------------------------------

def _torch():
    return pytest.importorskip("torch")


def T(a):
    return _torch().from_numpy(np.ascontiguousarray(a))


def _np(x):
    if isinstance(x, (tuple, list)):
        return tuple(_np(v) for v in x)
    return x.detach().numpy() if hasattr(x, "detach") else np.asarray(x)


def _same(got, want, name):
    got, want = _np(got), _np(want)
    if isinstance(want, tuple):
        assert isinstance(got, tuple) and len(got) == len(want), name
        for g, w in zip(got, want):
            _same(g, w, name)
        return
    got = np.asarray(got)
    assert got.shape == want.shape, (name, got.shape, want.shape)
    if got.size:
        np.testing.assert_allclose(got.astype(f64), want.astype(f64), rtol=1e-5, atol=1e-6,
                                   equal_nan=True, err_msg=name)


def _tf():
    return _torch().nn.functional


#: (id, pypto call, NumPy/torch call): equal results expected.
SAME = [
    # reductions: identities over an empty axis, empty results over a non-empty one
    ("sum_all", lambda: P.sum(Z(0)), lambda: np.sum(Z(0))),
    ("sum_axis1", lambda: P.sum(Z(3, 0), axis=1), lambda: np.sum(Z(3, 0), axis=1)),
    ("sum_axis0", lambda: P.sum(Z(3, 0), axis=0), lambda: np.sum(Z(3, 0), axis=0)),
    ("sum_keepdims", lambda: P.sum(Z(3, 0), axis=1, keepdims=True),
     lambda: np.sum(Z(3, 0), axis=1, keepdims=True)),
    ("sum_int", lambda: P.sum(Z(2, 0, dtype=np.int32), axis=1),
     lambda: np.zeros(2, np.int32)),
    ("nansum", lambda: P.nansum(Z(0, 4), axis=0), lambda: np.nansum(Z(0, 4), axis=0)),
    ("prod", lambda: P.prod(Z(3, 0), axis=1), lambda: np.prod(Z(3, 0), axis=1)),
    ("count_nonzero", lambda: P.count_nonzero(Z(2, 0), axis=1),
     lambda: np.count_nonzero(Z(2, 0), axis=1)),
    ("all", lambda: P.all(Z(0, dtype=bool)), lambda: np.all(Z(0, dtype=bool))),
    ("any", lambda: P.any(Z(2, 0, dtype=bool), axis=1),
     lambda: np.any(Z(2, 0, dtype=bool), axis=1)),
    ("mean", lambda: P.mean(Z(3, 0), axis=1), lambda: np.mean(Z(3, 0), axis=1)),
    ("mean_all", lambda: P.mean(Z(0)), lambda: np.mean(Z(0))),
    ("nanmean", lambda: P.nanmean(Z(3, 0), axis=1), lambda: np.nanmean(Z(3, 0), axis=1)),
    ("var", lambda: P.var(Z(3, 0), axis=1), lambda: np.var(Z(3, 0), axis=1)),
    ("std", lambda: P.std(Z(0, 2), axis=0), lambda: np.std(Z(0, 2), axis=0)),
    ("median", lambda: P.median(Z(2, 0), axis=1), lambda: np.median(Z(2, 0), axis=1)),
    ("max_nonempty_axis", lambda: P.max(Z(0, 3), axis=1), lambda: np.max(Z(0, 3), axis=1)),
    ("argmin_nonempty_axis", lambda: P.argmin(Z(0, 3), axis=1),
     lambda: np.argmin(Z(0, 3), axis=1)),
    ("nanmax_nonempty_axis", lambda: P.nanmax(Z(3, 0), axis=0),
     lambda: np.nanmax(Z(3, 0), axis=0)),
    ("logsumexp", lambda: P.logsumexp(Z(3, 0), axis=1),
     lambda: _torch().logsumexp(T(Z(3, 0)), 1)),
    ("vector_norm", lambda: P.vector_norm(Z(3, 0), axis=1),
     lambda: _torch().linalg.vector_norm(T(Z(3, 0)), dim=1)),
    ("vector_norm_1", lambda: P.vector_norm(Z(0), ord=1), lambda: np.float32(0)),
    # scans and sorts
    ("cumsum", lambda: P.cumsum(Z(0)), lambda: np.cumsum(Z(0))),
    ("cumsum_axis", lambda: P.cumsum(Z(2, 0), axis=1), lambda: np.cumsum(Z(2, 0), axis=1)),
    ("cumprod", lambda: P.cumprod(Z(0, 3), axis=0), lambda: np.cumprod(Z(0, 3), axis=0)),
    ("logcumsumexp", lambda: P.logcumsumexp(Z(2, 0)),
     lambda: _torch().logcumsumexp(T(Z(2, 0)), -1)),
    ("cummax", lambda: P.cummax(Z(0, 3)), lambda: tuple(_torch().cummax(T(Z(0, 3)), -1))),
    ("sort", lambda: P.sort(Z(3, 0)), lambda: np.sort(Z(3, 0))),
    ("argsort", lambda: P.argsort(Z(0)), lambda: np.argsort(Z(0))),
    ("topk_empty_rows", lambda: P.topk(Z(0, 5), 2),
     lambda: tuple(_torch().topk(T(Z(0, 5)), 2))),
    ("topk_k0", lambda: P.topk(R(3, 4), 0), lambda: tuple(_torch().topk(T(R(3, 4)), 0))),
    ("topk_k0_empty_axis", lambda: P.topk(Z(3, 0), 0),
     lambda: tuple(_torch().topk(T(Z(3, 0)), 0))),
    # elementwise, binary, compare, activations
    ("exp", lambda: P.exp(Z(0, 3)), lambda: np.exp(Z(0, 3))),
    ("add", lambda: P.add(Z(0, 3), Z(3)), lambda: Z(0, 3) + Z(3)),
    ("add_broadcast_to_empty", lambda: P.add(Z(0, 1), Z(1, 4)), lambda: Z(0, 1) + Z(1, 4)),
    ("where", lambda: P.where(Z(0, dtype=bool), Z(0), Z(0)), lambda: Z(0)),
    ("less", lambda: P.less(Z(2, 0), Z(2, 0)), lambda: Z(2, 0) < Z(2, 0)),
    ("clip", lambda: P.clip(Z(0), 0, 1), lambda: np.clip(Z(0), 0, 1)),
    ("cast", lambda: P.cast(Z(0), dtype="int32"), lambda: Z(0).astype(np.int32)),
    ("relu", lambda: P.relu(Z(4, 0)), lambda: Z(4, 0)),
    ("gelu", lambda: P.gelu(Z(0)), lambda: Z(0)),
    ("prelu", lambda: P.prelu(Z(0, 3), np.ones(3, f32)),
     lambda: _tf().prelu(T(Z(0, 3)), T(np.ones(3, f32)))),
    ("lerp", lambda: P.lerp(Z(0), Z(0), Z(0)), lambda: Z(0)),
    ("swiglu", lambda: P.swiglu(Z(0, 4), Z(0, 4)), lambda: Z(0, 4)),
    # linalg and contractions: K = 0 gives zeros
    ("matmul_k0", lambda: P.matmul(R(3, 0), R(0, 4)), lambda: R(3, 0) @ R(0, 4)),
    ("matmul_m0", lambda: P.matmul(R(0, 3), R(3, 4)), lambda: R(0, 3) @ R(3, 4)),
    ("matmul_batched_k0", lambda: P.matmul(R(2, 3, 0), R(2, 0, 4)),
     lambda: R(2, 3, 0) @ R(2, 0, 4)),
    ("matmul_stack_k0", lambda: P.matmul(R(2, 3, 0), R(0, 4)), lambda: R(2, 3, 0) @ R(0, 4)),
    ("batch_matmul_k0", lambda: P.batch_matmul(R(2, 3, 0), R(2, 0, 4)),
     lambda: R(2, 3, 0) @ R(2, 0, 4)),
    ("linear_k0", lambda: P.linear(R(2, 0), R(3, 0), R(3)),
     lambda: _tf().linear(T(R(2, 0)), T(R(3, 0)), T(R(3)))),
    ("linear_nobias_k0", lambda: P.linear(R(2, 0), R(3, 0)),
     lambda: _tf().linear(T(R(2, 0)), T(R(3, 0)))),
    ("linear_batch0", lambda: P.linear(R(0, 5), R(3, 5), R(3)),
     lambda: _tf().linear(T(R(0, 5)), T(R(3, 5)), T(R(3)))),
    ("addmm_k0", lambda: P.addmm(R(2, 3), R(2, 0), R(0, 3), beta=0.5),
     lambda: _torch().addmm(T(R(2, 3)), T(R(2, 0)), T(R(0, 3)), beta=0.5)),
    ("baddbmm_k0", lambda: P.baddbmm(R(2, 2, 3), R(2, 2, 0), R(2, 0, 3)),
     lambda: _torch().baddbmm(T(R(2, 2, 3)), T(R(2, 2, 0)), T(R(2, 0, 3)))),
    ("einsum_k0", lambda: P.einsum("ik,kj->ij", R(3, 0), R(0, 2)),
     lambda: np.einsum("ik,kj->ij", R(3, 0), R(0, 2))),
    ("outer", lambda: P.outer(R(0), R(3)), lambda: np.outer(R(0), R(3))),
    ("transpose", lambda: P.transpose(Z(0, 3)), lambda: Z(0, 3).T),
    ("batch_transpose", lambda: P.batch_transpose(Z(2, 0, 3, 1)),
     lambda: np.swapaxes(Z(2, 0, 3, 1), 1, 2)),
    ("trace", lambda: P.trace(Z(0, 3)), lambda: np.trace(Z(0, 3))),
    ("quantized_matmul_k0", lambda: P.quantized_matmul(Z(2, 0, dtype=np.int8),
                                                       Z(0, 3, dtype=np.int8)),
     lambda: np.zeros((2, 3), np.int32)),
    # layout
    ("concat_empty_first", lambda: P.concat([Z(0, 4), np.ones((2, 4), f32)]),
     lambda: np.concatenate([Z(0, 4), np.ones((2, 4), f32)])),
    ("concat_empty_middle", lambda: P.concat([R(2, 4), Z(0, 4), R(1, 4, seed=1)]),
     lambda: np.concatenate([R(2, 4), Z(0, 4), R(1, 4, seed=1)])),
    ("concat_axis1", lambda: P.concat([R(2, 0), R(2, 3)], axis=1),
     lambda: np.concatenate([R(2, 0), R(2, 3)], axis=1)),
    ("concat_all_empty", lambda: P.concat([Z(0, 4), Z(0, 4)]), lambda: Z(0, 4)),
    ("concat_other_axis_empty", lambda: P.concat([Z(2, 0), Z(3, 0)]), lambda: Z(5, 0)),
    ("concat_flat", lambda: P.concat([Z(0), R(3)], axis=None),
     lambda: np.concatenate([Z(0), R(3)], axis=None)),
    ("stack", lambda: P.stack([Z(0, 4), Z(0, 4)]), lambda: np.stack([Z(0, 4), Z(0, 4)])),
    ("stack_axis1", lambda: P.stack([Z(0, 4), Z(0, 4)], axis=1),
     lambda: np.stack([Z(0, 4), Z(0, 4)], axis=1)),
    ("flip", lambda: P.flip(Z(0, 3), axis=0), lambda: np.flip(Z(0, 3), axis=0)),
    ("pad_empty_rows", lambda: P.pad(Z(0, 3), (1, 1)), lambda: _tf().pad(T(Z(0, 3)), (1, 1))),
    ("pad_constant_fills", lambda: P.pad(Z(2, 0), (1, 2), value=3.0),
     lambda: _tf().pad(T(Z(2, 0)), (1, 2), value=3.0)),
    ("repeat", lambda: P.repeat(Z(0, 3), 2, axis=0), lambda: np.repeat(Z(0, 3), 2, axis=0)),
    ("repeat_zero_times", lambda: P.repeat(R(2, 3), 0, axis=0),
     lambda: np.repeat(R(2, 3), 0, axis=0)),
    ("repeat_zero_times_flat", lambda: P.repeat(R(2, 3), 0), lambda: np.repeat(R(2, 3), 0)),
    ("roll", lambda: P.roll(Z(0, 3), 1, axis=0), lambda: np.roll(Z(0, 3), 1, axis=0)),
    ("roll_flat", lambda: P.roll(Z(0), 2), lambda: np.roll(Z(0), 2)),
    ("tile", lambda: P.tile(Z(0, 3), 2), lambda: np.tile(Z(0, 3), 2)),
    ("tile_zero_times", lambda: P.tile(R(2, 3), (2, 0)), lambda: np.tile(R(2, 3), (2, 0))),
    ("tile_zero_times_new_axis", lambda: P.tile(R(3), (0, 2)), lambda: np.tile(R(3), (0, 2))),
    ("split", lambda: P.split(Z(0, 4), 2, axis=1), lambda: tuple(np.split(Z(0, 4), 2, axis=1))),
    # creation
    ("eye0", lambda: P.eye(0), lambda: np.eye(0, dtype=f32)),
    ("eye_cols0", lambda: P.eye(3, 0), lambda: np.eye(3, 0, dtype=f32)),
    ("arange0", lambda: P.arange(0), lambda: np.arange(0)),
    ("arange_backwards", lambda: P.arange(5, 2), lambda: np.arange(5, 2)),
    ("tril", lambda: P.tril(Z(0, 3)), lambda: np.tril(Z(0, 3))),
    ("triu_batch0", lambda: P.triu(Z(0, 3, 3)), lambda: np.triu(Z(0, 3, 3))),
    ("diag_empty", lambda: P.diag(Z(0)), lambda: np.diag(Z(0))),
    ("diag_empty_k", lambda: P.diag(Z(0), k=2), lambda: np.diag(Z(0), k=2)),
    ("diagonal_none", lambda: P.diagonal(R(2, 3), offset=5), lambda: np.diagonal(R(2, 3), 5)),
    ("diagonal_empty", lambda: P.diagonal(Z(0, 3)), lambda: np.diagonal(Z(0, 3))),
    # indexing
    ("embedding", lambda: P.embedding(np.zeros(0, np.int64), R(5, 3)),
     lambda: _tf().embedding(_torch().zeros(0, dtype=_torch().int64), T(R(5, 3)))),
    ("gather", lambda: P.gather(R(3, 4), 1, np.zeros((3, 0), np.int64)),
     lambda: _torch().gather(T(R(3, 4)), 1, _torch().zeros((3, 0), dtype=_torch().int64))),
    ("index_select", lambda: P.index_select(R(3, 4), 0, np.zeros(0, np.int64)),
     lambda: R(3, 4)[np.zeros(0, np.int64)]),
    ("take_along_axis", lambda: P.take_along_axis(R(3, 4), np.zeros((3, 0), np.int64), 1),
     lambda: np.take_along_axis(R(3, 4), np.zeros((3, 0), np.int64), 1)),
    ("scatter_add_nothing", lambda: P.scatter_add(R(3, 4), 1, np.zeros((3, 0), np.int64),
                                                  Z(3, 0)),
     lambda: R(3, 4)),
    ("masked_fill", lambda: P.masked_fill(Z(0, 3), Z(0, 3, dtype=bool), 1.0), lambda: Z(0, 3)),
    ("one_hot", lambda: P.one_hot(np.zeros(0, np.int64), 4),
     lambda: np.zeros((0, 4), np.int64)),
    ("sequence_mask", lambda: P.sequence_mask(np.zeros(0, np.int64), 3),
     lambda: np.zeros((0, 3), bool)),
    # nn: an empty batch gives an empty result
    ("softmax_rows0", lambda: P.softmax(Z(0, 4)), lambda: _tf().softmax(T(Z(0, 4)), -1)),
    ("softmax_cols0", lambda: P.softmax(Z(4, 0)), lambda: _tf().softmax(T(Z(4, 0)), -1)),
    ("log_softmax", lambda: P.log_softmax(Z(0, 4)), lambda: Z(0, 4)),
    ("softmin", lambda: P.softmin(Z(2, 0)), lambda: Z(2, 0)),
    ("layer_norm", lambda: P.layer_norm(Z(0, 4)), lambda: _tf().layer_norm(T(Z(0, 4)), (4,))),
    ("rms_norm", lambda: P.rms_norm(Z(0, 4)), lambda: Z(0, 4)),
    ("batch_norm", lambda: P.batch_norm(Z(0, 3, 4), Z(3), np.ones(3, f32)), lambda: Z(0, 3, 4)),
    ("group_norm", lambda: P.group_norm(Z(0, 4, 3), 2),
     lambda: _tf().group_norm(T(Z(0, 4, 3)), 2)),
    ("instance_norm", lambda: P.instance_norm(Z(0, 3, 4)), lambda: Z(0, 3, 4)),
    ("conv2d_batch0", lambda: P.conv2d(Z(0, 3, 5, 5), R(4, 3, 3, 3)),
     lambda: _tf().conv2d(T(Z(0, 3, 5, 5)), T(R(4, 3, 3, 3)))),
    # no output channels: empty (torch refuses a weight of 0 filters)
    ("conv2d_out_ch0", lambda: P.conv2d(R(1, 3, 5, 5), Z(0, 3, 3, 3)), lambda: Z(1, 0, 3, 3)),
    ("conv1d_batch0", lambda: P.conv1d(Z(0, 2, 5), R(3, 2, 3)),
     lambda: _tf().conv1d(T(Z(0, 2, 5)), T(R(3, 2, 3)))),
    ("conv_transpose2d_batch0", lambda: P.conv_transpose2d(Z(0, 2, 3, 3), R(2, 3, 2, 2)),
     lambda: _tf().conv_transpose2d(T(Z(0, 2, 3, 3)), T(R(2, 3, 2, 2)))),
    ("depthwise_conv2d_batch0", lambda: P.depthwise_conv2d(Z(0, 2, 4, 4), R(2, 1, 3, 3)),
     lambda: Z(0, 2, 2, 2)),
    ("max_pool2d_batch0", lambda: P.max_pool2d(Z(0, 2, 4, 4), 2),
     lambda: _tf().max_pool2d(T(Z(0, 2, 4, 4)), 2)),
    ("avg_pool1d_batch0", lambda: P.avg_pool1d(Z(0, 2, 4), 2),
     lambda: _tf().avg_pool1d(T(Z(0, 2, 4)), 2)),
    ("adaptive_avg_pool2d_batch0", lambda: P.adaptive_avg_pool2d(Z(0, 2, 4, 4), 2),
     lambda: _tf().adaptive_avg_pool2d(T(Z(0, 2, 4, 4)), 2)),
    ("global_avg_pool2d_batch0", lambda: P.global_avg_pool2d(Z(0, 2, 4, 4)),
     lambda: Z(0, 2, 1, 1)),
    ("glu", lambda: P.glu(Z(0, 4)), lambda: _tf().glu(T(Z(0, 4)))),
    ("sdpa_batch0", lambda: P.scaled_dot_product_attention(Z(0, 2, 3, 4), Z(0, 2, 5, 4),
                                                           Z(0, 2, 5, 4)),
     lambda: _tf().scaled_dot_product_attention(T(Z(0, 2, 3, 4)), T(Z(0, 2, 5, 4)),
                                                 T(Z(0, 2, 5, 4)))),
    ("sdpa_seq0", lambda: P.scaled_dot_product_attention(Z(1, 2, 0, 4), R(1, 2, 5, 4),
                                                         R(1, 2, 5, 4)),
     lambda: Z(1, 2, 0, 4)),
    ("sdpa_no_keys", lambda: P.scaled_dot_product_attention(R(1, 2, 3, 4), Z(1, 2, 0, 4),
                                                           Z(1, 2, 0, 5)),
     lambda: _tf().scaled_dot_product_attention(T(R(1, 2, 3, 4)), T(Z(1, 2, 0, 4)),
                                                 T(Z(1, 2, 0, 5)))),
    ("sdpa_causal_no_keys", lambda: P.scaled_dot_product_attention(
        R(1, 2, 3, 4), Z(1, 2, 0, 4), Z(1, 2, 0, 5), is_causal=True),
     lambda: _tf().scaled_dot_product_attention(T(R(1, 2, 3, 4)), T(Z(1, 2, 0, 4)),
                                                 T(Z(1, 2, 0, 5)), is_causal=True)),
    ("global_avg_pool2d_no_pixels", lambda: P.global_avg_pool2d(Z(2, 3, 0, 0)),
     lambda: np.mean(Z(2, 3, 0, 0), axis=(-2, -1), keepdims=True)),
    ("cross_entropy_spatial_batch0",
     lambda: P.cross_entropy(Z(0, 4, 2), np.zeros((0, 2), np.int64), reduction="none"),
     lambda: Z(0, 2)),
    ("lstm_cell_batch0", lambda: P.lstm_cell(Z(0, 3), Z(0, 2), Z(0, 2), R(8, 3), R(8, 2)),
     lambda: (Z(0, 2), Z(0, 2))),
    ("gru_cell_batch0", lambda: P.gru_cell(Z(0, 3), Z(0, 2), R(6, 3), R(6, 2)),
     lambda: Z(0, 2)),
    ("pixel_shuffle_batch0", lambda: P.pixel_shuffle(Z(0, 4, 2, 2), 2),
     lambda: _tf().pixel_shuffle(T(Z(0, 4, 2, 2)), 2)),
    ("upsample_nearest_batch0", lambda: P.upsample_nearest(Z(0, 2, 3, 3), scale_factor=2),
     lambda: Z(0, 2, 6, 6)),
    ("rotary_embedding_seq0", lambda: P.rotary_embedding(Z(1, 2, 0, 4), Z(0, 4), Z(0, 4)),
     lambda: Z(1, 2, 0, 4)),
    # losses: elementwise over an empty batch; 'mean' of nothing is NaN as in torch
    ("mse_none", lambda: P.mse_loss(Z(0, 3), Z(0, 3), reduction="none"), lambda: Z(0, 3)),
    ("mse_sum", lambda: P.mse_loss(Z(0, 3), Z(0, 3), reduction="sum"),
     lambda: _tf().mse_loss(T(Z(0, 3)), T(Z(0, 3)), reduction="sum")),
    ("mse_mean", lambda: P.mse_loss(Z(0, 3), Z(0, 3)),
     lambda: _tf().mse_loss(T(Z(0, 3)), T(Z(0, 3)))),
    ("l1_mean", lambda: P.l1_loss(Z(0), Z(0)), lambda: _tf().l1_loss(T(Z(0)), T(Z(0)))),
    ("cross_entropy_none", lambda: P.cross_entropy(Z(0, 4), np.zeros(0, np.int64),
                                                   reduction="none"),
     lambda: Z(0)),
    ("cross_entropy_mean", lambda: P.cross_entropy(Z(0, 4), np.zeros(0, np.int64)),
     lambda: _tf().cross_entropy(T(Z(0, 4)), _torch().zeros(0, dtype=_torch().int64))),
    ("nll_loss_sum", lambda: P.nll_loss(Z(0, 4), np.zeros(0, np.int64), reduction="sum"),
     lambda: _tf().nll_loss(T(Z(0, 4)), _torch().zeros(0, dtype=_torch().int64),
                            reduction="sum")),
    ("bce_sum", lambda: P.binary_cross_entropy(Z(0), Z(0), reduction="sum"),
     lambda: np.float32(0)),
    # distances
    ("cdist_rows0", lambda: P.cdist(Z(0, 3), R(2, 3)),
     lambda: _torch().cdist(T(Z(0, 3)), T(R(2, 3)))),
    ("cdist_features0", lambda: P.cdist(Z(2, 0), Z(3, 0)),
     lambda: _torch().cdist(T(Z(2, 0)), T(Z(3, 0)))),
    ("pairwise_distance_rows0", lambda: P.pairwise_distance(Z(0, 3), Z(0, 3)),
     lambda: _tf().pairwise_distance(T(Z(0, 3)), T(Z(0, 3)))),
    ("pairwise_distance_features0", lambda: P.pairwise_distance(Z(2, 0), Z(2, 0)),
     lambda: _tf().pairwise_distance(T(Z(2, 0)), T(Z(2, 0)))),
    ("cosine_similarity_features0", lambda: P.cosine_similarity(Z(2, 0), Z(2, 0)),
     lambda: _tf().cosine_similarity(T(Z(2, 0)), T(Z(2, 0)))),
    # detection and image
    ("box_iou", lambda: P.box_iou(Z(0, 4), R(2, 4)), lambda: Z(0, 2)),
    ("box_convert", lambda: P.box_convert(Z(0, 4), "xyxy", "cxcywh"), lambda: Z(0, 4)),
    ("nms", lambda: P.nms(Z(0, 4), Z(0), 0.5), lambda: (np.zeros(0, np.int64), np.array(0))),
    ("batched_nms", lambda: P.batched_nms(Z(0, 4), Z(0), np.zeros(0, np.int64), 0.5),
     lambda: (np.zeros(0, np.int64), np.array(0))),
    ("histogram", lambda: P.histogram(Z(0), bins=4, range=(0.0, 1.0)),
     lambda: np.histogram(Z(0), bins=4, range=(0.0, 1.0))),
    ("gaussian_blur_batch0", lambda: P.gaussian_blur(Z(0, 4, 4)), lambda: Z(0, 4, 4)),
    ("rgb_to_gray_batch0", lambda: P.rgb_to_gray(Z(0, 3, 2, 2)), lambda: Z(0, 1, 2, 2)),
    ("integral_image_batch0", lambda: P.integral_image(Z(0, 3, 3)), lambda: Z(0, 3, 3)),
    ("resize_bilinear_batch0", lambda: P.resize_bilinear(Z(0, 3, 3), 4, 5), lambda: Z(0, 4, 5)),
    ("roi_pool_no_boxes", lambda: P.roi_pool(R(1, 2, 4, 4), Z(0, 5), 2), lambda: Z(0, 2, 2, 2)),
    ("roi_align_no_boxes", lambda: P.roi_align(R(1, 2, 4, 4), Z(0, 5), 2),
     lambda: Z(0, 2, 2, 2)),
    ("bilateral_filter", lambda: P.bilateral_filter(Z(0, 4, 4), 3, 0.1, 1.0),
     lambda: Z(0, 4, 4)),
    ("box_blur", lambda: P.box_blur(Z(0, 4, 4)), lambda: Z(0, 4, 4)),
    ("dilate", lambda: P.dilate(Z(0, 4, 4)), lambda: Z(0, 4, 4)),
    ("erode", lambda: P.erode(Z(0, 4, 4)), lambda: Z(0, 4, 4)),
    ("morph_open", lambda: P.morph_open(Z(0, 4, 4)), lambda: Z(0, 4, 4)),
    ("morph_close", lambda: P.morph_close(Z(0, 4, 4)), lambda: Z(0, 4, 4)),
    ("median_blur", lambda: P.median_blur(Z(0, 4, 4)), lambda: Z(0, 4, 4)),
    ("laplacian", lambda: P.laplacian(Z(0, 4, 4)), lambda: Z(0, 4, 4)),
    ("sobel", lambda: P.sobel(Z(0, 4, 4)), lambda: Z(0, 4, 4)),
    ("equalize_hist", lambda: P.equalize_hist(Z(0, 4, 4, dtype=np.uint8)),
     lambda: Z(0, 4, 4, dtype=np.uint8)),
    ("hsv_to_rgb", lambda: P.hsv_to_rgb(Z(0, 3, 2, 2)), lambda: Z(0, 3, 2, 2)),
    ("rgb_to_hsv", lambda: P.rgb_to_hsv(Z(3, 0, 2)), lambda: Z(3, 0, 2)),
    ("rgb_to_yuv", lambda: P.rgb_to_yuv(Z(0, 3, 2, 2)), lambda: Z(0, 3, 2, 2)),
    ("yuv_to_rgb", lambda: P.yuv_to_rgb(Z(3, 0, 2)), lambda: Z(3, 0, 2)),
    ("resize_bicubic", lambda: P.resize_bicubic(Z(0, 3, 3), 4, 5), lambda: Z(0, 4, 5)),
    ("resize_nearest", lambda: P.resize_nearest(Z(0, 3, 3), 4, 5), lambda: Z(0, 4, 5)),
    ("warp_affine", lambda: P.warp_affine(Z(0, 1, 4, 4), Z(0, 2, 3)), lambda: Z(0, 1, 4, 4)),
    ("warp_perspective", lambda: P.warp_perspective(Z(0, 1, 4, 4), Z(0, 3, 3)),
     lambda: Z(0, 1, 4, 4)),
    ("grid_sample", lambda: P.grid_sample(Z(0, 1, 4, 4), Z(0, 3, 3, 2)),
     lambda: _tf().grid_sample(T(Z(0, 1, 4, 4)), T(Z(0, 3, 3, 2)), align_corners=False)),
    ("avg_pool2d", lambda: P.avg_pool2d(Z(0, 2, 4, 4), 2),
     lambda: _tf().avg_pool2d(T(Z(0, 2, 4, 4)), 2)),
    ("avg_pool3d", lambda: P.avg_pool3d(Z(0, 2, 4, 4, 4), 2),
     lambda: _tf().avg_pool3d(T(Z(0, 2, 4, 4, 4)), 2)),
    ("max_pool1d", lambda: P.max_pool1d(Z(0, 2, 4), 2),
     lambda: _tf().max_pool1d(T(Z(0, 2, 4)), 2)),
    ("max_pool3d", lambda: P.max_pool3d(Z(0, 2, 4, 4, 4), 2),
     lambda: _tf().max_pool3d(T(Z(0, 2, 4, 4, 4)), 2)),
    ("conv3d", lambda: P.conv3d(Z(0, 2, 4, 4, 4), R(3, 2, 2, 2, 2)),
     lambda: _tf().conv3d(T(Z(0, 2, 4, 4, 4)), T(R(3, 2, 2, 2, 2)))),
    ("conv_transpose1d", lambda: P.conv_transpose1d(Z(0, 2, 4), R(2, 3, 2)),
     lambda: _tf().conv_transpose1d(T(Z(0, 2, 4)), T(R(2, 3, 2)))),
    ("geglu", lambda: P.geglu(Z(0, 4)), lambda: Z(0, 2)),
    ("masked_attention", lambda: P.masked_attention(
        Z(0, 2, 3, 4), Z(0, 2, 5, 4), Z(0, 2, 5, 4), np.ones((1, 1, 3, 5), bool),
        np.zeros(0, np.int32), np.zeros(0, np.int32)), lambda: Z(0, 2, 3, 4)),
    ("rnn_cell", lambda: P.rnn_cell(Z(0, 3), Z(0, 2), R(2, 3), R(2, 2)), lambda: Z(0, 2)),
    # (torch 2.13 gives back the input's shape (0, 1, 4, 4) for an empty batch)
    ("pixel_unshuffle", lambda: P.pixel_unshuffle(Z(0, 1, 4, 4), 2), lambda: Z(0, 4, 2, 2)),
    ("cummin", lambda: P.cummin(Z(2, 0)), lambda: tuple(_torch().cummin(T(Z(2, 0)), -1))),
    ("nanmin_nonempty_axis", lambda: P.nanmin(Z(0, 3), axis=1), lambda: Z(0)),
    ("bce_logits_mean", lambda: P.binary_cross_entropy_with_logits(Z(0), Z(0)),
     lambda: _tf().binary_cross_entropy_with_logits(T(Z(0)), T(Z(0)))),
    ("huber_none", lambda: P.huber_loss(Z(0, 3), Z(0, 3), reduction="none"), lambda: Z(0, 3)),
    ("kl_div_sum", lambda: P.kl_div(Z(0, 3), Z(0, 3), reduction="sum"),
     lambda: _tf().kl_div(T(Z(0, 3)), T(Z(0, 3)), reduction="sum")),
    ("smooth_l1_mean", lambda: P.smooth_l1_loss(Z(0), Z(0)),
     lambda: _tf().smooth_l1_loss(T(Z(0)), T(Z(0)))),
    # quantization
    ("quantize", lambda: P.quantize(Z(0), 0.1, 0), lambda: np.zeros(0, np.int8)),
    ("dequantize", lambda: P.dequantize(np.zeros(0, np.int8), 0.1, 0), lambda: Z(0)),
    ("requantize", lambda: P.requantize(Z(0, dtype=np.int32), 0.1, 0),
     lambda: np.zeros(0, np.int8)),
    ("quantized_add", lambda: P.quantized_add(Z(0, dtype=np.int8), Z(0, dtype=np.int8), 0.1, 0,
                                              0.1, 0, 0.1, 0), lambda: np.zeros(0, np.int8)),
    ("quantized_relu", lambda: P.quantized_relu(Z(0, dtype=np.int8), 0.1, 0),
     lambda: np.zeros(0, np.int8)),
    ("quantized_conv2d", lambda: P.quantized_conv2d(Z(0, 2, 4, 4, dtype=np.int8),
                                                    Z(3, 2, 2, 2, dtype=np.int8)),
     lambda: np.zeros((0, 3, 3, 3), np.int32)),
    ("fake_quantize_per_tensor", lambda: P.fake_quantize_per_tensor_affine(Z(0), 0.1, 0, -128,
                                                                           127), lambda: Z(0)),
    ("fake_quantize_per_channel", lambda: P.fake_quantize_per_channel_affine(
        Z(0, 3), np.ones(3, f32), np.zeros(3, np.int32), 1, -128, 127), lambda: Z(0, 3)),
]


@pytest.mark.parametrize("name, call, ref", SAME, ids=[c[0] for c in SAME])
def test_public_call_matches_numpy_or_torch(name, call, ref):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)    # NumPy's "Mean of empty slice"
        want = ref()
        got = call()
    _same(got, want, name)


#: (id, pypto call, the words the error must hold): NumPy and torch refuse these too.
REFUSED = [
    ("max_all", lambda: P.max(Z(0)), "zero-size array to reduction operation maximum"),
    ("min_axis", lambda: P.min(Z(3, 0), axis=1), "minimum which has no identity"),
    ("argmax", lambda: P.argmax(Z(0)), "argmax which has no identity"),
    ("argmin_axis", lambda: P.argmin(Z(2, 0), axis=1), "argmin which has no identity"),
    ("nanmax", lambda: P.nanmax(Z(0)), "no identity"),
    ("vector_norm_inf", lambda: P.vector_norm(Z(0), ord=np.inf), "empty axis"),
    ("matmul_mismatch", lambda: P.matmul(Z(3, 0), Z(2, 4)), "K"),
    ("concat_other_dims", lambda: P.concat([Z(0, 3), Z(2, 4)]), "must match"),
    ("conv2d_small", lambda: P.conv2d(Z(1, 3, 0, 5), R(4, 3, 3, 3)), "conv2d"),
    ("max_pool_small", lambda: P.max_pool2d(Z(1, 2, 0, 4), 2), "max_pool2d"),
    ("resize_from_nothing", lambda: P.resize_bilinear(Z(1, 0, 3), 4, 5), "zero-size"),
    ("pad_replicate_empty", lambda: P.pad(Z(2, 0), (1, 1), mode="replicate"), "constant"),
    ("pad_reflect_empty", lambda: P.pad(Z(2, 0), (1, 1), mode="reflect"), "smaller than"),
    ("anchor_boxes_no_rows", lambda: P.anchor_boxes(0, 3, 8, [16.0], [1.0]), "feat_h"),
    ("affine_grid_no_batch", lambda: P.affine_grid(Z(0, 2, 3), (0, 1, 4, 4)), "size"),
    ("sdpa_no_features", lambda: P.scaled_dot_product_attention(Z(1, 1, 2, 0), Z(1, 1, 3, 0),
                                                                 R(1, 1, 3, 4)), "feature"),
    ("cross_entropy_no_classes", lambda: P.cross_entropy(Z(2, 0), np.zeros(2, np.int64)),
     "out of range"),
    ("embedding_empty_table", lambda: P.embedding(np.zeros(2, np.int64), Z(0, 3)), "range"),
]


@pytest.mark.parametrize("name, call, words", REFUSED, ids=[c[0] for c in REFUSED])
def test_public_call_refuses_clearly(name, call, words):
    with pytest.raises(CLEAR, match=words):
        call()


def test_mean_of_nothing_warns_as_numpy():
    with pytest.warns(RuntimeWarning, match="Mean of empty slice"):
        assert np.isnan(P.mean(Z(0)))


def test_out_is_honoured():
    o = np.full(3, 7.0, f32)
    assert P.sum(Z(3, 0), axis=1, out=o) is o
    np.testing.assert_array_equal(o, 0)
    e = np.empty((0, 4), f32)
    assert P.exp(Z(0, 4), out=e) is e
    m = np.full((2, 3), 5.0, f32)
    assert P.matmul(R(2, 0), R(0, 3), out=m) is m
    np.testing.assert_array_equal(m, 0)
    with pytest.raises(ShapeError, match="shape"):
        P.sum(Z(3, 0), axis=1, out=np.empty(4, f32))


def _elementwise_ops():
    return [o.name for o in pypto.list_ops("elementwise") if o.name != "prelu"]


@pytest.mark.parametrize("name", _elementwise_ops())
def test_every_elementwise_op_maps_empty_to_empty(name):
    """Each elementwise op (every input zero-size, in its first dtype signature) gives the empty
    result its NumPy reference gives, without a kernel."""
    op = pypto.get_op(name)
    arrays = [np.zeros((0, 3), dt) for dt in op.dtypes[0]]
    params = _required(op)
    if name == "cast":
        params = {"dtype": "int32"}
    with pytest.MonkeyPatch.context() as mp:
        _no_compile(mp)
        got = op(*arrays, **params)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = op.reference(*arrays, **params)
    assert got.shape == np.shape(want) == (0, 3), name


@pytest.mark.parametrize("name", _kernel_sweep_ops())
def test_every_public_call_on_zero_size_canonical_arrays_never_raises_raw(name):
    """The public call of every op on its canonical arrays with each dim zero in turn (not
    always the public form: then the frontend's own argument errors): a result or a PyptoError
    (ShapeError, ParamError, ArgumentError, DtypeError), never a raw Python exception."""
    op = pypto.get_op(name)
    for dim, zs, params in _each_zero_dim(op):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                op(*zs, **params)
            except PyptoError:
                pass
            except Exception as e:        # noqa: BLE001 - what this test exists to catch
                pytest.fail(f"{name} {dim}=0 {[z.shape for z in zs]}: raw "
                            f"{type(e).__name__}: {e}")


def test_an_empty_array_where_an_int_is_expected_is_a_param_error():
    with pytest.raises(ParamError, match="'N' must be an int"):
        P.eye(np.zeros(0))
    with pytest.raises(ParamError, match="'axis' must be an int, got an array of shape"):
        P.concat([Z(2, 3), Z(2, 3)], axis=np.zeros(0, np.int64))
