"""A pointwise value whose one reader is a reduction is folded into the reduction's loop, not
written out first (a program's lowering materializes the pointwise values its anchors read).
Values are checked against NumPy; which values are materialized is read from the compiled
program's lowering."""

import warnings

import numpy as np

import pypto
from pypto import ops

RNG = np.random.default_rng(5)


def _f32(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def _plan(f):
    return next(iter(f._cache.values())).segment.op.plan


def _quiet(f, *args):
    with warnings.catch_warnings():
        warnings.simplefilter("error", pypto.PerformanceWarning)
        return f(*args)


def test_a_value_read_only_by_a_row_reduction_is_not_materialized():
    x, y = _f32(64, 96), _f32(64, 96)
    f = pypto.jit(lambda x, y: (ops.exp(x) * y).sum(axis=1) + 1.0)
    np.testing.assert_allclose(_quiet(f, x, y), (np.exp(x) * y).sum(1) + 1, rtol=1e-5, atol=1e-4)
    assert not _plan(f).materialize


def test_a_value_read_only_by_a_column_reduction_is_not_materialized():
    # The norm gradients' (dy * xhat).sum(axis=0): the reduction reads a transposed view of it.
    x, y = _f32(256, 48), _f32(256, 48)
    f = pypto.jit(lambda x, y: (x * y - 0.5).sum(axis=0))
    np.testing.assert_allclose(_quiet(f, x, y), (x * y - 0.5).sum(0), rtol=1e-4, atol=1e-4)
    assert not _plan(f).materialize
    assert _plan(f).transposed          # (the column case: it is read through a permute)


def test_a_value_with_another_reader_stays_materialized():
    x = _f32(32, 40)
    f = pypto.jit(lambda x: ops.exp(x) / ops.exp(x).sum(axis=1, keepdims=True))
    e = np.exp(x)
    np.testing.assert_allclose(_quiet(f, x), e / e.sum(1, keepdims=True), rtol=1e-5)
    assert len(_plan(f).materialize) == 1


def test_a_value_read_through_a_broadcast_stays_materialized():
    # Each element is read many times there: folded in, it would be recomputed per read.
    x = _f32(64, 1)
    f = pypto.jit(lambda x: ops.exp(x).reshape(1, 64, 1).broadcast_to((4, 64, 32)).sum(axis=2))
    want = np.broadcast_to(np.exp(x).reshape(1, 64, 1), (4, 64, 32)).sum(2)
    np.testing.assert_allclose(_quiet(f, x), want, rtol=1e-5)
    assert len(_plan(f).materialize) == 1


def test_a_value_read_by_a_product_stays_materialized():
    a, b = _f32(24, 16), _f32(16, 8)
    f = pypto.jit(lambda a, b: ops.tanh(a) @ b)
    np.testing.assert_allclose(_quiet(f, a, b), np.tanh(a) @ b, rtol=1e-4, atol=1e-5)
    assert len(_plan(f).materialize) == 1
