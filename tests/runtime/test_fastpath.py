"""The per-signature fast path: taken by repeated calls, never by a call that would fail a check,
invisible to traced programs, retired when the chosen kernels are forgotten."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import pypto
import pypto.ops as P
from pypto import runtime
from pypto.compiler import diskcache, jit
from pypto.errors import DtypeError, ParamError, ShapeError


def _x(shape=(3, 5), dtype=np.float32, seed=0):
    return np.random.default_rng(seed).uniform(-1, 1, shape).astype(dtype)


@pytest.fixture
def no_checks(monkeypatch):
    """Makes the checked path fail loudly: a call that still works took the fast path."""
    def refuse(*a, **k):
        raise AssertionError("the checked path ran")
    return lambda: monkeypatch.setattr(runtime, "prepare", refuse)


def test_a_repeated_call_skips_the_checks_and_gives_the_same_values(no_checks):
    x, y = _x(), _x(seed=1)
    first = P.add(x, y)
    s = _x((4, 6))
    P.sum(s, axis=1)
    P.matmul(s, s.T.copy())
    no_checks()
    for _ in range(3):
        x2, y2 = _x(seed=2), _x(seed=3)        # new arrays, same signature
        np.testing.assert_array_equal(P.add(x2, y2), x2 + y2)
        s2 = _x((4, 6), seed=4)
        np.testing.assert_allclose(P.sum(s2, axis=1), s2.sum(axis=1, dtype=np.float64),
                                   rtol=1e-6)
        np.testing.assert_allclose(P.matmul(s2, s2.T.copy()), s2 @ s2.T, rtol=1e-5, atol=1e-6)
    assert first.shape == (3, 5)


def test_a_bad_call_after_a_good_one_still_gets_its_error():
    x = _x((4, 6))
    P.sum(x, axis=1)
    P.softmax.kernel(x)
    with pytest.raises(ParamError, match="axis"):
        P.sum(x, axis=True)                      # True == 1, but it is not an axis
    with pytest.raises(ParamError, match="sum: parameter 'axis' must be in"):
        P.sum(x, axis=2)
    with pytest.raises(DtypeError, match="softmax: argument 'x' has dtype int32"):
        P.softmax.kernel(x.astype(np.int32))
    with pytest.raises(ParamError, match="softmax: unknown parameter"):
        P.softmax.kernel(x, bogus=1)
    with pytest.raises(ShapeError, match="matmul: dim K"):
        P.matmul.kernel(x, x)


def test_views_and_odd_layouts_give_numpy_values_every_time():
    base = _x((6, 10))
    for _ in range(2):
        for v in (base[:, ::2], base.T, base[::-1], base[1:, 1:]):
            np.testing.assert_array_equal(P.neg(v), -v)
    # A misaligned float32 array (a byte offset): the result is still right.
    raw = np.zeros(4 * 16 + 1, np.uint8)
    mis = np.frombuffer(raw.data, dtype=np.float32, count=16, offset=1)
    np.testing.assert_array_equal(P.neg(mis), -mis)
    ro = _x((16,))
    ro.flags.writeable = False
    for _ in range(2):
        np.testing.assert_array_equal(P.neg(ro), -ro)


def test_traced_calls_are_recorded_not_run(monkeypatch):
    x = _x((4, 6))
    P.exp(x)
    P.exp(x)                                   # a fast path exists for this signature
    recorded = []
    real = runtime._record
    monkeypatch.setattr(runtime, "_record",
                        lambda op, *a: recorded.append(op.name) or real(op, *a))
    f = pypto.jit(lambda a: pypto.ops.exp(a) * 2)
    np.testing.assert_allclose(f(x), np.exp(x) * 2, rtol=2e-6)
    assert f.stats.traces == 1 and "exp" in recorded
    # A plain array given to an op inside the traced function is recorded too.
    g = pypto.jit(lambda a: pypto.ops.exp(x) + a)
    np.testing.assert_allclose(g(x), np.exp(x) + x, rtol=2e-6)
    assert recorded.count("exp") == 2


def test_forgetting_the_chosen_kernels_retires_the_fast_paths(monkeypatch):
    x = _x()
    P.add(x, x)
    P.add(x, x)
    jit._selected.clear()                      # what adding a schedule database does
    calls = []
    real = runtime.prepare
    monkeypatch.setattr(runtime, "prepare", lambda *a, **k: calls.append(1) or real(*a, **k))
    P.add(x, x)
    assert calls, "a stale fast path was taken"
    calls.clear()
    P.add(x, x)
    assert not calls


def test_observe_sees_fast_calls():
    x = _x()
    P.add(x, x)
    with runtime.observe() as seen:
        P.add(x, x)
        P.add.kernel(x, x)
    assert [c[0].name for c in seen] == ["add", "add"]


@pytest.fixture
def disk_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PYPTO_CACHE_DIR", str(tmp_path / "cache"))
    jit.clear_memory_cache()
    yield
    jit.clear_memory_cache()


def test_cached_kernels_run_through_prepared_buffers_from_many_threads(disk_cache):
    x = _x((3, 5), np.float64)
    want = np.exp(x)
    got = P.exp(x)
    plan = P.exp._public.get(runtime._signature((x,), {}))
    assert plan, "no fast path was recorded"
    assert plan.kplan.kernel.disk and isinstance(plan.kplan.launch, diskcache.Launcher)
    np.testing.assert_allclose(got, want, rtol=1e-15)
    errors = []

    def work(seed):
        try:
            for i in range(200):
                a = _x((3, 5), np.float64, seed=seed * 1000 + i)
                np.testing.assert_allclose(P.exp(a), np.exp(a), rtol=1e-15)
        except AssertionError as e:      # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    out = np.empty_like(x)
    assert P.exp(x, out=out) is out
    np.testing.assert_allclose(out, want, rtol=1e-15)


def test_the_data_pointer_shortcut_agrees_with_numpy():
    assert diskcache._RAW_POINTERS      # CPython and NumPy as built here: the fast way is used
    a = np.arange(10.0)[3:]
    got = diskcache._pointer_at(id(a) + diskcache._DATA_AT).value
    assert got == a.ctypes.data
    base = np.zeros((6, 8), np.float32)
    for view in (base, base[2:], base[:, 3:], base.T, base[1:, 1:].reshape(-1)[5:], base[::2]):
        assert diskcache.data_address(view) == view.ctypes.data


def test_out_is_written_in_place_only_where_the_result_is_out_itself():
    # diagonal's frontend returns a reshape of the kernel's output: out= into a dense array is
    # filled by the kernel itself; into a view of a larger array (shifted start) it still is,
    # and the result compares equal to NumPy's either way.
    x = _x((3, 5, 5), np.float32, seed=4)
    want = np.diagonal(x, 0, 1, 2)
    before = dict(runtime.out_stats)
    out = np.empty((3, 5), np.float32)
    assert P.diagonal(x, 0, 1, 2, out=out) is out
    np.testing.assert_array_equal(out, want)
    assert runtime.out_stats["in_place"] == before["in_place"] + 1
    big = np.full((4, 5), 7.0, np.float32)
    view = big[1:]
    assert P.diagonal(x, 0, 1, 2, out=view) is view
    np.testing.assert_array_equal(big[1:], want)
    assert runtime.out_stats["in_place"] == before["in_place"] + 2
    np.testing.assert_array_equal(big[0], np.full(5, 7.0, np.float32))


def test_the_same_array_twice_does_not_fix_where_later_arguments_come_from():
    a = np.arange(4, dtype=np.float32)
    np.testing.assert_array_equal(pypto.ops.add(a, a), a + a)
    np.testing.assert_array_equal(pypto.ops.add(a, -a), np.zeros(4, np.float32))
    np.testing.assert_array_equal(pypto.ops.add(a, a[::-1]), a + a[::-1])
