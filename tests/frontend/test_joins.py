"""Joins of many pieces: a tree of ``concat`` nodes in a program is lowered as one Func (one block
copy per piece, over the pieces' own shapes), and eager ``concat``/``stack`` of three or more
large arrays run as such a one-op program. Values are checked against NumPy's concatenate and
stack; the structure (one join, no intermediate joins) is read from the compiled program."""

import sys

import numpy as np
import pytest

import pypto
from pypto import ops

jit_mod = sys.modules["pypto.frontend.jit"]     # (``pypto.frontend.jit`` is the decorator)

RNG = np.random.default_rng(11)


def _arr(shape, dtype=np.float32):
    if np.dtype(dtype) == np.bool_:
        return RNG.random(shape) > 0.5
    return (RNG.standard_normal(shape) * 50).astype(dtype)


def _segment(f):
    return next(iter(f._cache.values())).segment


def _joins_of(f):
    """The join anchors and the concat anchors built as the op in ``f``'s compiled program."""
    plan = _segment(f).op.plan
    joins = [a for a in plan.anchors if "join" in a]
    concats = [a for a in plan.anchors if "join" not in a and a["node"].op.name == "concat"]
    return joins, concats


@pytest.mark.parametrize("shape,axis,n", [((64, 96), 0, 8), ((6, 40), 1, 5), ((33,), 0, 3),
                                          ((3, 4, 5), 1, 6), ((2, 3, 17), -1, 3),
                                          ((4, 1, 9), 0, 4)])
def test_a_program_joins_many_pieces_in_one_func(shape, axis, n):
    xs = [_arr(shape) for _ in range(n)]
    f = pypto.jit(lambda *a: ops.concat(list(a), axis=axis) * 2.0)
    np.testing.assert_array_equal(f(*xs), np.concatenate(xs, axis=axis) * 2)
    joins, concats = _joins_of(f)
    assert len(joins) == 1 and not concats
    assert len(joins[0]["join"][1]) == n          # one block copy per piece
    assert _segment(f).kernel.source == "default (fused)"


def test_pieces_of_different_extents_and_slices_of_one_array():
    x = _arr((10, 6))
    f = pypto.jit(lambda x: ops.concat([x[0:3], x[5:6] * 3.0, x[2:10], x[::-1]], axis=0) + 1.0)
    want = np.concatenate([x[0:3], x[5:6] * 3, x[2:10], x[::-1]]) + 1
    np.testing.assert_array_equal(f(x), want)
    g = pypto.jit(lambda x: ops.concat([x[:, 0:3], x[:, 5:6], x[:, 2:]], axis=1).sum(axis=1))
    np.testing.assert_allclose(g(x), np.concatenate([x[:, 0:3], x[:, 5:6], x[:, 2:]], 1).sum(1),
                               rtol=1e-5)


def test_a_join_read_by_a_product_and_by_another_op():
    a, b, c = _arr((16, 8)), _arr((16, 8)), _arr((32, 8))
    w = _arr((8, 5))

    def fn(a, b, c, w):
        j = ops.concat([a, b, c], axis=0)
        return j @ w, j.sum()

    f = pypto.jit(fn)
    p, s = f(a, b, c, w)
    j = np.concatenate([a, b, c]).astype(np.float64)
    np.testing.assert_allclose(p, j @ w, rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(s, j.sum(), rtol=1e-4, atol=1e-2)
    joins, concats = _joins_of(f)
    assert len(joins) == 1 and not concats


def test_an_intermediate_join_that_is_also_read_elsewhere_is_kept():
    a, b, c = _arr((4, 8)), _arr((4, 8)), _arr((4, 8))

    def fn(a, b, c):
        ab = ops.concat([a, b], axis=0)
        return ops.concat([ab, c], axis=0), ab * 2.0

    f = pypto.jit(fn)
    abc, ab2 = f(a, b, c)
    np.testing.assert_array_equal(abc, np.concatenate([a, b, c]))
    np.testing.assert_array_equal(ab2, np.concatenate([a, b]) * 2)
    joins, _ = _joins_of(f)
    assert len(joins) == 2


def test_one_array_joined_with_itself():
    x = _arr((5, 7))
    f = pypto.jit(lambda x: ops.concat([x, x, x * 2.0], axis=1))
    np.testing.assert_array_equal(f(x), np.concatenate([x, x, x * 2], axis=1))


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64, np.bool_])
@pytest.mark.parametrize("axis", [0, 1, -1, None])
def test_eager_concat_of_many_large_arrays_is_one_program(dtype, axis):
    xs = [_arr((40, 300), dtype) for _ in range(5)]
    got = ops.concat(xs, axis=axis)
    want = np.concatenate(xs, axis=axis)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)
    shapes = [(x.size,) if axis is None else x.shape for x in xs]
    key = (0 if axis is None else axis % 2, tuple((s, x.dtype.str) for s, x in zip(shapes, xs)))
    joins, concats = _joins_of(jit_mod._joins[key])
    assert len(joins) == 1 and not concats


def test_eager_joins_of_views_and_of_different_extents():
    xs = [_arr((64, 300)) for _ in range(4)]
    for views, axis in [([x[:, ::2] for x in xs], 1), ([x.T for x in xs], 0),
                        ([xs[0][:3], xs[1], xs[2][:1], xs[3][:63]], 0)]:
        np.testing.assert_array_equal(ops.concat(views, axis=axis),
                                      np.concatenate(views, axis=axis))


@pytest.mark.parametrize("axis", [0, 1, 2])
def test_eager_stack_of_many_large_arrays(axis):
    xs = [_arr((40, 300)) for _ in range(6)]
    np.testing.assert_array_equal(ops.stack(xs, axis=axis), np.stack(xs, axis=axis))


def test_small_joins_and_out_keep_the_kernels():
    xs = [_arr((4, 5)) for _ in range(3)]
    before = set(jit_mod._joins)
    np.testing.assert_array_equal(ops.concat(xs, axis=0), np.concatenate(xs))
    assert set(jit_mod._joins) == before             # below the size a program pays off
    big = [_arr((40, 300)) for _ in range(3)]
    out = np.empty((120, 300), np.float32)
    assert ops.concat(big, axis=0, out=out) is out
    np.testing.assert_array_equal(out, np.concatenate(big))


def test_many_signatures_do_not_fall_back_or_warn(recwarn):
    for k in range(12):
        xs = [_arr((40 + k, 300)) for _ in range(3)]
        np.testing.assert_array_equal(ops.concat(xs, axis=0), np.concatenate(xs))
    assert not [w for w in recwarn if "recompile" in str(w.message)]


def test_bad_joins_keep_their_errors():
    with pytest.raises(pypto.ShapeError, match="all axes but axis 0 must match"):
        ops.concat([_arr((40, 300)), _arr((40, 300)), _arr((40, 299))], axis=0)
    with pytest.raises(pypto.DtypeError):
        ops.concat([_arr((40, 300)), _arr((40, 300)), _arr((40, 300), np.float64)], axis=0)


def test_joins_on_the_gpu_target():
    from helpers import opencl_device

    if not opencl_device():
        pytest.skip("needs an OpenCL device (PoCL)")
    xs = [_arr((64, 30)) for _ in range(5)]
    with pypto.target("opencl"):
        f = pypto.jit(lambda *a: ops.concat(list(a), axis=0) * 2.0)
        np.testing.assert_array_equal(f(*xs), np.concatenate(xs) * 2)
        g = pypto.jit(lambda *a: ops.stack(list(a), axis=1) + 1.0)
        np.testing.assert_array_equal(g(*xs), np.stack(xs, 1) + 1)


@pytest.mark.parametrize("axis", [0, 1])
def test_stack_in_a_program_is_one_join_and_has_gradients(axis):
    xs = [_arr((3, 4)) for _ in range(4)]
    f = pypto.jit(lambda *a: ops.stack(list(a), axis=axis) + 1.0)
    np.testing.assert_array_equal(f(*xs), np.stack(xs, axis=axis) + 1)
    joins, concats = _joins_of(f)
    assert len(joins) == 1 and not concats
    assert not [a for a in _segment(f).op.plan.anchors if a["node"].op.name == "stack"]
    w = _arr((4, 3, 4))
    grads = pypto.grad(lambda *a: (ops.stack(list(a), axis=0) * w).sum(), argnums=(0, 1, 2, 3))(*xs)
    for k, gk in enumerate(grads):
        np.testing.assert_allclose(gk, w[k], rtol=1e-6)
