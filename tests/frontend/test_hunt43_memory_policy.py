"""``pypto.memory_policy`` and threads.

The ``with pypto.memory_policy(...)`` block is a context variable, as ``pypto.target`` and
Python's ``decimal.localcontext`` are: it holds in the thread (and context) that entered it.
A ``ThreadPoolExecutor`` worker does not inherit it; work submitted through
``contextvars.copy_context().run`` does, and ``pypto.memory_policy.set(...)`` reaches every
thread. These tests pin that behaviour, and that the docstring says so (it did not)."""

import contextvars
import inspect
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import pypto


def _add_one():
    x = np.ones(4096, np.float32)
    return pypto.memory_policy.get(), pypto.ops.add(x, 1.0)


def test_a_worker_thread_does_not_inherit_the_block():
    with pypto.memory_policy("aggressive_reuse") as pool:
        before = pool.reused + pool.allocated
        with ThreadPoolExecutor(1) as ex:
            strategy, y = ex.submit(_add_one).result()
        assert strategy == "fresh"
        np.testing.assert_array_equal(y, np.full(4096, 2.0, np.float32))
        assert pool.reused + pool.allocated == before     # the worker's output is not pooled


def test_copy_context_carries_the_block_into_a_worker():
    with pypto.memory_policy("aggressive_reuse") as pool:
        before = pool.reused + pool.allocated
        with ThreadPoolExecutor(1) as ex:
            ctx = contextvars.copy_context()
            strategy, y = ex.submit(ctx.run, _add_one).result()
        assert strategy == "aggressive_reuse"
        np.testing.assert_array_equal(y, np.full(4096, 2.0, np.float32))
        assert pool.reused + pool.allocated == before + 1


def test_the_process_wide_setting_reaches_worker_threads():
    try:
        pool = pypto.memory_policy.set("aggressive_reuse")
        before = pool.reused + pool.allocated
        with ThreadPoolExecutor(1) as ex:
            strategy, _ = ex.submit(_add_one).result()
        assert strategy == "aggressive_reuse"
        assert pool.reused + pool.allocated == before + 1
    finally:
        pypto.memory_policy.set("fresh")
    assert pypto.memory_policy.get() == "fresh"


def test_the_docstring_says_what_threads_see():
    doc = inspect.getdoc(type(pypto.memory_policy).__call__) or ""
    assert "thread" in doc.lower() and "copy_context" in doc
