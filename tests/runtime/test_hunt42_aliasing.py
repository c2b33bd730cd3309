"""Buffer aliasing: an array the caller holds is never overwritten by a later call, and an
``out=`` over one of the call's own inputs gives the result a fresh output gets.

Found by a differential hunt (helper 42): each case is compared bit for bit with the same call on
copies, or with the values the held array had when it was returned.
"""

from __future__ import annotations

import gc
import threading

import numpy as np
import pytest

import pypto
import pypto.ops as P


def _rand(seed, *shape):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


# -- out= over an input that is not a plain ndarray argument ----------------------------------------
# The overlap check looked only at arguments of type np.ndarray: an input inside a list (concat),
# an ndarray subclass or a CPU torch tensor that shares memory with out= was missed, and the
# kernel wrote out= while still reading that input (silently wrong values).

_REORDERING = {
    "sort": lambda a, **k: P.sort(a, axis=1, **k),
    "transpose": lambda a, **k: P.transpose(a, **k),
    "roll": lambda a, **k: P.roll(a, 5, axis=1, **k),
}


class _Sub(np.ndarray):
    pass


@pytest.mark.parametrize("name", sorted(_REORDERING))
def test_out_over_an_ndarray_subclass_input_gives_the_fresh_result(name):
    fn = _REORDERING[name]
    base = _rand(0, 16, 16)
    want = np.array(fn(base.copy()))
    for _ in range(2):             # the first call and the repeated one
        buf = base.copy()
        got = fn(buf.view(_Sub), out=buf)
        assert got is buf
        np.testing.assert_array_equal(buf, want)


@pytest.mark.parametrize("name", ["sort", "transpose"])
def test_out_over_a_torch_tensor_input_gives_the_fresh_result(name):
    torch = pytest.importorskip("torch")
    fn = _REORDERING[name]
    base = _rand(1, 16, 16)
    want = np.array(fn(base.copy()))
    for _ in range(2):
        t = torch.from_numpy(base.copy())
        fn(t, out=t.numpy())
        np.testing.assert_array_equal(t.numpy(), want)


@pytest.mark.parametrize("offset", [0, 3, 40])
def test_concat_out_over_a_listed_input_gives_the_fresh_result(offset):
    for _ in range(2):
        buf = _rand(2, 96)
        a, b = _rand(3, 48), buf[offset:offset + 48]
        want = np.concatenate([a, b])
        assert P.concat([a, b], axis=0, out=buf) is buf
        np.testing.assert_array_equal(buf, want)


def test_overlap_check_sees_through_sequences_and_array_protocols():
    from pypto.runtime import overlaps

    buf = np.zeros(16, np.float32)
    out = buf[4:12]

    class Wrapped:                       # any object exposing the array interface
        def __init__(self, a):
            self.__array_interface__ = a.__array_interface__

    assert overlaps([out], [[np.ones(3, np.float32), (buf[:6],)]])
    assert overlaps([out], [Wrapped(buf[10:])])
    assert overlaps([out], [buf[8:].view(_Sub)])
    assert not overlaps([out], [[1.0, 2.0], Wrapped(buf[12:]), buf[:4], None, 3])


# -- held arrays never change ----------------------------------------------------------------------

@pypto.jit
def _twice(a, b):
    t = P.tanh(a * b)
    return t, t, t.T, a, (t + 1.0).reshape(-1)


def _loss(w, x):
    return P.sum(P.tanh(P.matmul(x, w)))


@pytest.mark.parametrize("policy", ["fresh", "aggressive_reuse"])
def test_held_outputs_views_and_program_results_never_change(policy):
    torch = None
    try:
        import torch
    except ImportError:
        pass
    with pypto.memory_policy(policy):
        x, w = _rand(4, 6, 10), _rand(5, 10, 6)
        held = [P.exp(x)[1:, 2:], P.tanh(x).T, P.softmax(x).reshape(60), P.sum(x, axis=1)[::2],
                np.asarray(memoryview(P.exp(x)))]
        if torch is not None:
            held.append(torch.from_numpy(P.add(x, x))[2:].numpy())
        held += list(_twice(x, x))
        held.append(pypto.grad(_loss)(w, x))
        value, (gw, gx) = pypto.value_and_grad(_loss, argnums=(0, 1))(w, x)
        held += [np.asarray(value), gw, gx]
        copies = [h.copy() for h in held]
        gc.collect()
        for i in range(6):           # same sizes again, everything dropped: recycled buffers
            a, b = _rand(10 + i, 6, 10), _rand(20 + i, 10, 6)
            P.exp(a), P.tanh(a), P.softmax(a), P.sum(a, axis=1), P.add(a, a), _twice(a, a)
            pypto.grad(_loss)(b, a)
            pypto.value_and_grad(_loss, argnums=(0, 1))(b, a)
        for h, c in zip(held, copies):
            np.testing.assert_array_equal(h, c)


def test_held_outputs_survive_other_threads_recycling_the_pool():
    x = _rand(6, 8, 8)
    with pypto.memory_policy("aggressive_reuse"):
        held = [P.exp(x)[::2], P.cumsum(x, axis=1).T]
    copies = [h.copy() for h in held]

    def churn(seed):
        with pypto.memory_policy("aggressive_reuse"):
            for i in range(30):
                P.exp(_rand(seed + i, 8, 8)), P.cumsum(_rand(seed, 8, 8), axis=1)

    threads = [threading.Thread(target=churn, args=(100 * k,)) for k in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    for h, c in zip(held, copies):
        np.testing.assert_array_equal(h, c)


# -- a refused out= tuple leaves the caller's arrays as they were ------------------------------------
# Op._call_into (ops/_op.py) checked each entry of a tuple out= against the frontend's result and
# copied it in one at a time: with a wrong second entry the call raised ShapeError after the
# first array was already overwritten (NumPy and pypto.jit check every entry before writing any).
# It now checks every entry, then copies.

@pytest.mark.parametrize("call", ["split", "topk"])
def test_a_refused_out_tuple_writes_nothing(call):
    x = np.arange(24, dtype=np.float32).reshape(4, 6)
    first = np.full((4, 3), -7.0, np.float32)
    wrong = np.empty((4, 2), np.float32)
    with pytest.raises(pypto.ShapeError):
        if call == "split":
            P.split(x, 2, axis=1, out=(first, wrong))
        else:
            P.topk(x, 3, out=(first, wrong))
    np.testing.assert_array_equal(first, -7.0)
