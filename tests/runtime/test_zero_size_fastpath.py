"""Zero-size calls are answered on the first-call path (``runtime._empty_call``): they never make
a per-signature fast path, run no kernel, leave the fast path of non-empty calls as it was, and
honour ``out=``. Traced programs keep refusing zero-size inputs with a clear error."""

from __future__ import annotations

import numpy as np
import pytest

import pypto
import pypto.ops as P
from pypto import runtime
from pypto.errors import ShapeError


def test_a_zero_size_call_makes_no_fast_path_and_runs_no_kernel():
    x = np.zeros((3, 0), np.float32)
    with runtime.observe() as calls:
        for _ in range(3):
            np.testing.assert_array_equal(P.sum(x, axis=1), np.zeros(3, np.float32))
            assert P.matmul.kernel(np.zeros((2, 0), np.float32),
                                   np.zeros((0, 4), np.float32)).shape == (2, 4)
    assert calls == []                    # no kernel ran
    key = runtime._signature([x.reshape(3, 0)], {})
    assert key not in P.sum._fast         # the kernel-level signature holds no plan
    assert all(plan is runtime._UNPLANNED for k, plan in P.sum._public.items()
               if (3, 0) in k)            # the public one always takes the frontend


def test_non_empty_calls_keep_their_fast_path_after_empty_ones(monkeypatch):
    s = np.random.default_rng(0).uniform(-1, 1, (4, 6)).astype(np.float32)
    P.sum(s, axis=1)
    P.sum(np.zeros((4, 0), np.float32), axis=1)       # an empty call between
    P.sum(np.zeros((0, 6), np.float32), axis=1)

    def refuse(*a, **k):
        raise AssertionError("the checked path ran")
    monkeypatch.setattr(runtime, "prepare", refuse)   # a call that works took the fast path
    s2 = np.random.default_rng(1).uniform(-1, 1, (4, 6)).astype(np.float32)
    np.testing.assert_allclose(P.sum(s2, axis=1), s2.sum(axis=1), rtol=1e-6)


def test_empty_results_honour_out_in_place():
    o = np.full(3, 9.0, np.float32)
    assert P.prod(np.zeros((3, 0), np.float32), axis=1, out=o) is o
    np.testing.assert_array_equal(o, 1.0)
    o = np.full((2, 3), 9.0, np.float32)
    assert P.linear(np.zeros((2, 0), np.float32), np.zeros((3, 0), np.float32),
                    np.arange(3, dtype=np.float32), out=o) is o
    np.testing.assert_array_equal(o, [[0, 1, 2], [0, 1, 2]])
    e = np.empty((0, 4), np.float32)
    assert P.softmax(np.zeros((0, 4), np.float32), out=e) is e
    assert P.matmul.kernel(np.zeros((0, 2), np.float32), np.zeros((2, 4), np.float32),
                           out=e) is e


def test_out_of_the_wrong_shape_or_dtype_is_still_refused():
    with pytest.raises(ShapeError, match="shape"):
        P.sum(np.zeros((3, 0), np.float32), axis=1, out=np.empty(2, np.float32))
    with pytest.raises(pypto.DtypeError, match="dtype"):
        P.matmul.kernel(np.zeros((2, 0), np.float32), np.zeros((0, 4), np.float32),
                        out=np.empty((2, 4), np.float64))


def test_checks_still_run_on_zero_size_calls():
    with pytest.raises(pypto.DtypeError):
        P.sum.kernel(np.zeros((3, 0), np.uint16))
    with pytest.raises(ShapeError, match="dim K"):
        P.matmul.kernel(np.zeros((2, 0), np.float32), np.zeros((3, 4), np.float32))
    with pytest.raises(pypto.ParamError, match="unknown parameter"):
        P.sum.kernel(np.zeros((3, 0), np.float32), bogus=1)


def test_an_op_without_a_rule_names_the_empty_axis():
    # conv2d over an empty image with a non-empty output has no meaning: refused, named.
    with pytest.raises(ShapeError, match=r"conv2d.*zero-size axis|conv2d.*smaller"):
        P.conv2d(np.zeros((1, 3, 0, 5), np.float32), np.ones((4, 3, 3, 3), np.float32))
    with pytest.raises(ShapeError, match=r"resize_bilinear: argument 'x' has a zero-size axis"):
        P.resize_bilinear(np.zeros((1, 0, 3), np.float32), 4, 5)


def test_programs_take_zero_size_inputs():
    # A signature with a zero-size array runs op by op (there is no kernel to make): NumPy's
    # shapes, and a reduction's identity.
    f = pypto.jit(lambda x: P.sum(x, axis=1))
    got = f(np.zeros((3, 0), np.float32))
    assert got.shape == (3,) and got.dtype == np.float32
    np.testing.assert_array_equal(got, np.zeros(3, np.float32))
    g = pypto.jit(lambda a, b: P.matmul(a, b))
    got = g(np.zeros((3, 0), np.float32), np.zeros((0, 2), np.float32))
    np.testing.assert_array_equal(got, np.zeros((3, 2), np.float32))