"""Output memory for op calls: fresh arrays, or a pool that recycles what the caller dropped.

``pypto.memory_policy(strategy="aggressive_reuse")`` (a context manager, or a process-wide setting
with ``pypto.memory_policy.set(...)``) makes op outputs come from a :class:`Pool`. A new 64 MiB
output costs about as much as a memory-bound kernel in page faults; a recycled one is already
mapped.

The guarantee: **an array you still hold is never handed out again.** The pool keeps its own
reference to every buffer it lends and reuses a buffer only when that reference is the only one
left (``sys.getrefcount``). Any view, slice, reshape, ``memoryview``, torch tensor made with
``torch.from_numpy`` or ctypes pointer object made from the array keeps a reference to the
buffer, so while any of them lives the buffer stays yours. What is not tracked: a raw integer
address you took out yourself (``a.ctypes.data`` stored as an int) does not hold the memory,
exactly as with NumPy's own arrays once they are freed.

The pool holds at most ``per_size`` buffers of each byte size (``PER_SIZE`` by default), and at
most ``max_bytes`` of memory in all; a call that finds none free allocates a buffer the pool does
not track (NumPy frees it as usual). A program's pipelines hand many values of one size to one
another (an LSTM layer's steps: dozens of [64, 512] states), so a handful per size recycled
almost nothing of them.
"""

from __future__ import annotations

import contextlib
import contextvars
import sys
import threading

import numpy as np

STRATEGIES = ("fresh", "aggressive_reuse")
#: Buffers kept per byte size by default. value_and_grad of a 32-step LSTM layer (batch 64,
#: hidden 512), single calls after a pause, 6 rounds in rotating order, one process: fresh
#: arrays 213-225 ms (median 219), 4 per size 171-278 (203), 64 per size 162-196 (174).
PER_SIZE = 64


class Pool:
    """Buffers lent to op outputs, reused once nothing outside the pool refers to them."""

    def __init__(self, *, per_size: int = PER_SIZE, max_bytes: int = 1 << 31):
        self.per_size = per_size
        self.max_bytes = max_bytes
        self._bufs: dict[int, list[np.ndarray]] = {}   # byte size -> raw uint8 buffers
        self._lock = threading.Lock()
        self.reused = 0      # how many outputs came from a recycled buffer
        self.allocated = 0   # how many the pool had to allocate

    def empty(self, shape: tuple[int, ...], dtype) -> np.ndarray:
        """An uninitialised C-contiguous array of ``shape`` and ``dtype`` (like ``np.empty``)."""
        dtype = np.dtype(dtype)
        n = dtype.itemsize
        for s in shape:
            n *= s
        if n == 0:
            return np.empty(shape, dtype)
        with self._lock:
            bufs = self._bufs.setdefault(n, [])
            raw = None
            for b in bufs:
                # Three references: the pool's list, the loop variable and getrefcount's
                # argument. More means someone outside holds the buffer (or a view of it).
                if sys.getrefcount(b) == 3:
                    raw = b
                    break
            if raw is not None:
                self.reused += 1
            else:
                raw = np.empty(n, np.uint8)
                self.allocated += 1
                if len(bufs) < self.per_size and self._idle_cap_allows(n):
                    bufs.append(raw)
        # Every array handed out is a view whose .base is ``raw``: holding it holds the buffer.
        return raw.view(dtype).reshape(shape)

    def _idle_cap_allows(self, n: int) -> bool:
        held = sum(size * len(bs) for size, bs in self._bufs.items())
        return held + n <= self.max_bytes

    def held_bytes(self) -> int:
        """Bytes of all buffers the pool tracks (lent or idle)."""
        with self._lock:
            return sum(size * len(bs) for size, bs in self._bufs.items())

    def clear(self) -> None:
        """Forgets every buffer (those still lent stay valid: their holders keep them alive)."""
        with self._lock:
            self._bufs.clear()


_global = {"strategy": "fresh", "pool": None}
_scoped: contextvars.ContextVar[Pool | None | bool] = contextvars.ContextVar(
    "pypto_memory_policy", default=False)   # False: no scope active, use the global setting


def _check(strategy: str) -> str:
    if strategy not in STRATEGIES:
        from ..errors import ParamError

        raise ParamError(f"memory_policy: strategy must be one of {list(STRATEGIES)}, got "
                         f"{strategy!r}")
    return strategy


_shared: dict[tuple[int, int], Pool] = {}   # (per_size, max_bytes) -> the process's pool


def _make(strategy: str, per_size: int, max_bytes: int) -> Pool | None:
    """The pool for ``strategy``: one per process and setting, so that every block (and the
    process-wide setting) recycles the same buffers."""
    if strategy != "aggressive_reuse":
        return None
    key = (per_size, max_bytes)
    if key not in _shared:
        _shared[key] = Pool(per_size=per_size, max_bytes=max_bytes)
    return _shared[key]


def active_pool() -> Pool | None:
    """The pool op outputs come from right now, or None (fresh arrays)."""
    p = _scoped.get()
    return _global["pool"] if p is False else p


class _Policy:
    """``pypto.memory_policy``: call it as a context manager, or ``.set()`` it for the process."""

    STRATEGIES = STRATEGIES

    @contextlib.contextmanager
    def __call__(self, strategy: str = "aggressive_reuse", *, per_size: int = PER_SIZE,
                 max_bytes: int = 1 << 31):
        """Inside the block, op outputs follow ``strategy`` ("fresh" or "aggressive_reuse").

        Yields the :class:`Pool` (None for "fresh"), whose ``reused``/``allocated`` counters say
        what happened. Every block with the same settings shares one pool, so buffers dropped in
        one block are recycled in the next.
        """
        pool = _make(_check(strategy), per_size, max_bytes)
        token = _scoped.set(pool)
        try:
            yield pool
        finally:
            _scoped.reset(token)

    def set(self, strategy: str = "aggressive_reuse", *, per_size: int = PER_SIZE,
            max_bytes: int = 1 << 31) -> Pool | None:
        """Makes ``strategy`` the process-wide default (outside any ``with`` block)."""
        _global["pool"] = _make(_check(strategy), per_size, max_bytes)
        _global["strategy"] = strategy
        return _global["pool"]

    def get(self) -> str:
        """The strategy in effect here: "fresh" or "aggressive_reuse"."""
        return "fresh" if active_pool() is None else "aggressive_reuse"


memory_policy = _Policy()
