"""Output memory for op calls: fresh arrays, or a pool that recycles what the caller dropped.

``pypto.memory_policy(strategy="aggressive_reuse")`` (a context manager, or a process-wide setting
with ``pypto.memory_policy.set(...)``) makes op outputs come from a :class:`Pool`. A new 64 MiB
output costs about as much as a memory-bound kernel in page faults; a recycled one is already
mapped.

The guarantee: **an array you still hold is never handed out again.** Every array the pool lends
is a view of a small lease object (a ctypes array over the pool's buffer), and the buffer goes
back to the pool only when that lease is freed, which is when the last array, view, slice,
reshape, ``memoryview``, torch tensor made with ``torch.from_numpy`` or ctypes pointer object
made from it is gone. What is not tracked: a raw integer address you took out yourself
(``a.ctypes.data`` stored as an int) does not hold the memory, exactly as with NumPy's own arrays
once they are freed. Taking a buffer and giving it back are O(1) whatever the number lent. (An
earlier pool scanned its buffers' reference counts on every call: value_and_grad of a 32-step
LSTM layer took 171 ms with 64 buffers per size tracked and 188 with 1024, the scan costing more
than the page faults it saved.)

The pool tracks at most ``per_size`` buffers of each byte size (``PER_SIZE`` by default) and at
most ``max_bytes`` in all, lent or idle; a call that finds none idle and no room allocates a
buffer the pool does not track (NumPy frees it as usual).

The values a traced program passes between its pipelines (and the results of its last one) come
from a pool whatever the policy (:func:`program_pool`): the policy's pool inside a
``memory_policy("aggressive_reuse")`` block, else the process's program pool, which keeps up to
``PYPTO_PROGRAM_POOL_MB`` MiB (default 512; 0 turns it off). value_and_grad of a 32-step LSTM
layer (batch 64, hidden 512) allocated about 100 MiB of such values per call, and with fresh
arrays spent a third of its time in page faults.
"""

from __future__ import annotations

import contextlib
import contextvars
import ctypes
import os
import threading
import weakref

import numpy as np

STRATEGIES = ("fresh", "aggressive_reuse")
#: Buffers tracked per byte size by default: a program's pipelines hand many values of one size
#: to one another (value_and_grad of a 32-step LSTM layer, batch 64, hidden 512: about 200
#: [64, 512] states and gates alive at once).
PER_SIZE = 1024


class Pool:
    """Buffers lent to op outputs, taken back when every array made from one is gone."""

    def __init__(self, *, per_size: int = PER_SIZE, max_bytes: int = 1 << 31):
        self.per_size = per_size
        self.max_bytes = max_bytes
        self._idle: dict[int, list[np.ndarray]] = {}   # byte size -> idle raw uint8 buffers
        self._count: dict[int, int] = {}              # byte size -> buffers tracked (lent or idle)
        self._held = 0                                # bytes tracked
        self._generation = 0                          # clear() forgets buffers lent before it
        # Reentrant: a lease can be freed (and given back) by a garbage collection that runs
        # while this thread holds the lock.
        self._lock = threading.RLock()
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
            idle = self._idle.get(n)
            raw = idle.pop() if idle else None
            if raw is not None:
                self.reused += 1
            else:
                self.allocated += 1
                track = (self._count.get(n, 0) < self.per_size and
                         self._held + n <= self.max_bytes)
                if track:
                    self._count[n] = self._count.get(n, 0) + 1
                    self._held += n
            generation = self._generation
        if raw is None:
            raw = np.empty(n, np.uint8)
            if not track:
                return raw.view(dtype).reshape(shape)
        lease = (ctypes.c_char * n).from_buffer(raw)
        done = weakref.finalize(lease, self._give_back, raw, generation)
        done.atexit = False
        # frombuffer's array reads the lease (not ``raw``): every view of it keeps the lease.
        return np.frombuffer(lease, dtype).reshape(shape)

    def _give_back(self, raw: np.ndarray, generation: int) -> None:
        with self._lock:
            if generation == self._generation:
                self._idle.setdefault(raw.nbytes, []).append(raw)

    def held_bytes(self) -> int:
        """Bytes of all buffers the pool tracks (lent or idle)."""
        with self._lock:
            return self._held

    def idle_bytes(self) -> int:
        """Bytes of the buffers waiting to be lent again."""
        with self._lock:
            return sum(n * len(bs) for n, bs in self._idle.items())

    def clear(self) -> None:
        """Forgets every buffer: idle ones are freed, lent ones stay valid (their holders keep
        them alive) and are freed when dropped instead of coming back."""
        with self._lock:
            self._idle.clear()
            self._count.clear()
            self._held = 0
            self._generation += 1


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


_programs: dict[str, Pool | None] = {}


def program_pool() -> Pool | None:
    """The pool a traced program's pipelines write their values into: the policy's pool where
    one is active, else the process's program pool (None when ``PYPTO_PROGRAM_POOL_MB`` is 0)."""
    p = active_pool()
    if p is not None:
        return p
    if "pool" not in _programs:
        mb = _program_pool_mb()
        _programs["pool"] = Pool(max_bytes=mb << 20) if mb > 0 else None
    return _programs["pool"]


def _program_pool_mb() -> int:
    text = os.environ.get("PYPTO_PROGRAM_POOL_MB", "").strip()
    if not text:
        return 512
    try:
        return max(0, int(text))
    except ValueError:
        from ..errors import ParamError

        raise ParamError(f"PYPTO_PROGRAM_POOL_MB must be a whole number of MiB (0 turns the "
                         f"program pool off), got {text!r}") from None


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

        Threads: the block's setting is a context variable, like ``pypto.target``: it holds in
        the thread (and asyncio task) that entered it. A ``threading.Thread`` or a
        ``ThreadPoolExecutor`` worker started inside it runs with the process-wide setting
        (:meth:`set`, "fresh" unless changed). To carry the block into a worker, submit
        ``contextvars.copy_context().run`` with the function (``pool.submit(ctx.run, fn, x)``),
        or use :meth:`set`, which every thread sees. A pool is safe to share between threads.
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
