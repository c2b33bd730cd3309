"""The profiling switch: whether op calls are being profiled right now, and by whom.

The JIT reads :func:`active` when it picks a kernel (a profiled kernel is compiled with Halide's
profiler and reports each call); :func:`pypto.profile` in :mod:`pypto.bench.profile` turns it on.
Only the switch lives down here, so the compiler never imports the bench; the profiler it holds
is duck-typed (``target_for(target)``, ``observe(kernel, op, dtypes, dims, probe=None)``).
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from typing import Any

# A context variable, not a global: threads and asyncio tasks each see their own profiler.
_current: contextvars.ContextVar[Any] = contextvars.ContextVar("pypto_profile", default=None)


def active() -> Any:
    """The profiler collecting op calls right now, or None."""
    return _current.get()


@contextlib.contextmanager
def collecting(profiler: Any) -> Iterator[Any]:
    """Makes ``profiler`` the active one inside the block (None: no profiling inside)."""
    token = _current.set(profiler)
    try:
        yield profiler
    finally:
        _current.reset(token)
