"""``pypto.memory_policy``: a pool that recycles dropped outputs and never one still held."""

from __future__ import annotations

import gc

import numpy as np
import pytest

import pypto
import pypto.ops as P
from pypto.errors import ParamError
from pypto.infra.pool import Pool, active_pool


def test_a_held_buffer_is_never_handed_out_again():
    pool = Pool()
    a = pool.empty((4, 4), np.float32)
    b = pool.empty((4, 4), np.float32)
    assert not np.shares_memory(a, b)
    view = a[1:, 1:]
    del a
    c = pool.empty((4, 4), np.float32)          # a lives on through its view
    assert not np.shares_memory(c, view) and not np.shares_memory(c, b)
    del view, c
    gc.collect()
    d = pool.empty((4, 4), np.float32)
    assert pool.reused == 1 and pool.allocated == 3
    d[:] = 1.0
    assert not np.shares_memory(d, b)


def test_a_dropped_buffer_comes_back_with_any_dtype_of_the_same_size():
    pool = Pool()
    a = pool.empty((8,), np.float64)
    addr = a.ctypes.data
    del a
    b = pool.empty((4, 4), np.float32)
    assert b.ctypes.data == addr and b.shape == (4, 4) and b.dtype == np.float32
    assert b.flags.c_contiguous and b.flags.writeable


def test_other_holders_count_too():
    pool = Pool()
    a = pool.empty((16,), np.float32)
    addr = a.ctypes.data
    mv = memoryview(a)
    del a
    assert pool.empty((16,), np.float32).ctypes.data != addr   # the memoryview holds it
    del mv
    assert pool.empty((16,), np.float32).ctypes.data == addr
    assert pool.reused == 1


def test_the_pool_is_bounded():
    pool = Pool(per_size=2)
    held = [pool.empty((32,), np.uint8) for _ in range(5)]
    assert pool.held_bytes() == 64
    del held
    pool.empty((32,), np.uint8)
    assert pool.reused == 1


def test_op_outputs_come_from_the_pool_inside_the_block():
    x = np.random.default_rng(0).uniform(-1, 1, (64, 64)).astype(np.float32)
    want = np.exp(x)
    with pypto.memory_policy("aggressive_reuse") as pool:
        kept = P.exp(x)
        for _ in range(4):
            r = P.exp(x)
            assert not np.shares_memory(r, kept)
            np.testing.assert_allclose(r, want, rtol=2e-6)
            del r
        assert pool.reused >= 3
    np.testing.assert_allclose(kept, want, rtol=2e-6)
    assert active_pool() is None
    assert pypto.memory_policy.get() == "fresh"


def test_set_makes_it_the_process_default_and_a_block_overrides_it():
    try:
        pool = pypto.memory_policy.set("aggressive_reuse")
        assert active_pool() is pool and pypto.memory_policy.get() == "aggressive_reuse"
        with pypto.memory_policy("fresh") as none:
            assert none is None and active_pool() is None
        assert active_pool() is pool
    finally:
        pypto.memory_policy.set("fresh")
    assert active_pool() is None


def test_an_unknown_strategy_is_a_param_error():
    with pytest.raises(ParamError, match="memory_policy: strategy must be one of"):
        pypto.memory_policy.set("lru")
    with pytest.raises(ParamError, match="aggressive_reuse"):
        with pypto.memory_policy("reuse"):
            pass


def test_a_programs_many_values_of_one_size_are_recycled_by_default(monkeypatch):
    """A program cut into pipelines hands many values of one size on (an LSTM's per-step
    states): with the default settings a second call takes nearly all of them from the pool.
    With 4 buffers per size (the old default) most were allocated afresh every call."""
    import sys

    monkeypatch.setattr(sys.modules["pypto.frontend.jit"], "FUNC_BUDGET", 6)
    rng = np.random.default_rng(3)
    x = rng.standard_normal((24, 16, 32)).astype(np.float32)
    w = (rng.standard_normal((32, 32)) * 0.2).astype(np.float32)

    def prog(x, w):
        h, outs = x[0], []
        for t in range(x.shape[0]):
            h = P.tanh(P.matmul(h, w) + x[t])
            outs.append(h)
        return P.stack(outs)

    f = pypto.jit(prog)
    want = f(x, w)
    with pypto.memory_policy("aggressive_reuse") as pool:
        f(x, w)
        first = pool.allocated
        gc.collect()
        got = f(x, w)
        again = pool.allocated - first
    np.testing.assert_array_equal(got, want)
    assert first > 8, first                   # many pooled values in the first call
    assert again <= 2, (first, again)         # the second reuses them (its output is new)


def test_buffers_lent_before_clear_do_not_come_back():
    pool = Pool()
    a = pool.empty((16,), np.float32)
    pool.clear()
    del a
    b = pool.empty((16,), np.float32)
    assert pool.reused == 0 and pool.allocated == 2 and pool.held_bytes() == 64
    assert pool.idle_bytes() == 0                       # a's buffer did not come back
    b_addr = b.ctypes.data
    del b                                               # b's buffer, lent after clear, does
    assert pool.idle_bytes() == 64
    assert pool.empty((16,), np.float32).ctypes.data == b_addr and pool.reused == 1


def test_hundreds_of_one_size_are_tracked_and_recycled():
    pool = Pool()
    lent = [pool.empty((64, 8), np.float32) for _ in range(300)]
    addrs = {a.ctypes.data for a in lent}
    assert pool.held_bytes() == 300 * 64 * 8 * 4
    keep = lent[7]
    del lent
    again = [pool.empty((64, 8), np.float32) for _ in range(299)]
    assert pool.reused == 299
    assert {a.ctypes.data for a in again} == addrs - {keep.ctypes.data}
    assert pool.idle_bytes() == 0


def _recurrence():
    def prog(x, w):
        h, outs = x[0], []
        for t in range(x.shape[0]):
            h = P.tanh(P.matmul(h, w) + x[t])
            outs.append(h)
        return P.stack(outs), h

    rng = np.random.default_rng(5)
    x = rng.standard_normal((12, 16, 32)).astype(np.float32)
    w = (rng.standard_normal((32, 32)) * 0.2).astype(np.float32)
    return pypto.jit(prog), x, w


def test_a_program_recycles_its_values_without_a_policy(monkeypatch):
    """The values a program's pipelines pass on come from the program pool by default; what a
    caller still holds from an earlier call is never written by a later one."""
    import sys

    from pypto.infra import pool as pool_mod

    monkeypatch.setattr(sys.modules["pypto.frontend.jit"], "FUNC_BUDGET", 6)
    monkeypatch.setattr(pool_mod, "_programs", {})
    f, x, w = _recurrence()
    assert pypto.memory_policy.get() == "fresh"
    first, h_first = f(x, w)
    want, h_want = first.copy(), h_first.copy()
    pool = pool_mod.program_pool()
    assert pool is not None and pool.allocated > 4
    made = pool.allocated
    gc.collect()
    for k in range(3):
        second, _ = f(x[::-1].copy(), w)   # other values, held results kept
        del second
    np.testing.assert_array_equal(first, want)
    np.testing.assert_array_equal(h_first, h_want)
    assert pool.reused > 0
    assert pool.allocated - made <= 2 * 3 + 4, (made, pool.allocated)


def test_the_program_pool_can_be_turned_off(monkeypatch):
    from pypto.errors import ParamError
    from pypto.infra import pool as pool_mod

    monkeypatch.setattr(pool_mod, "_programs", {})
    monkeypatch.setenv("PYPTO_PROGRAM_POOL_MB", "0")
    assert pool_mod.program_pool() is None
    f, x, w = _recurrence()
    got, _ = f(x, w)
    root = got
    while root.base is not None:
        root = root.base
    assert type(root) is np.ndarray                     # plain NumPy memory, no lease
    monkeypatch.setattr(pool_mod, "_programs", {})
    monkeypatch.setenv("PYPTO_PROGRAM_POOL_MB", "lots")
    with pytest.raises(ParamError, match="PYPTO_PROGRAM_POOL_MB must be a whole number"):
        pool_mod.program_pool()
    monkeypatch.setattr(pool_mod, "_programs", {})
    monkeypatch.delenv("PYPTO_PROGRAM_POOL_MB")
    with pypto.memory_policy("aggressive_reuse") as user:
        assert pool_mod.program_pool() is user           # a policy's pool serves programs too
