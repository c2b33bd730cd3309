"""JIT compilation: op + dtypes + params + schedule + target -> a callable, cached in memory."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Mapping
from typing import Any

import halide as hl
import numpy as np

from ..errors import CompileError, ScheduleError
from ..infra.profiling import active as _profiling
from ..schedule.apply import apply_schedule
from ..schedule.defaults import default_schedule
from ..schedule.schedule import Schedule
from . import targets
from .lower import Built, build, fingerprint, rdom_digest


@dataclasses.dataclass
class Kernel:
    """A compiled pipeline ready to run, and how it was made."""

    op: Any
    callable: Any
    out_dtypes: tuple[str, ...]
    schedule: Schedule
    fingerprint: str
    target: str
    source: str  # where the schedule came from: "default", "database: <file>", "given"
    python: list[str]  # the schedule as Halide Python
    disk: bool = False  # loaded from the persistent compile cache (called with NumPy arrays)


class _Selection(dict):
    """The kernel chosen per call key. Clearing it (a database added or removed, the memory cache
    dropped) also retires the runtime's per-signature fast paths, which hold chosen kernels."""

    def clear(self) -> None:
        global generation
        super().clear()
        generation += 1


#: Bumped whenever chosen kernels are forgotten; a fast path made under another value is stale.
generation = 0
_lock = threading.Lock()
_compiled: dict[tuple, Kernel] = {}   # (op, dtypes, params, schedule hash, target) -> Kernel
_selected: _Selection = _Selection()  # (op, dtypes, params, dims, target) -> Kernel
# Schedules that could not be compiled, by the key they would have in _compiled, with the error:
# a later database pick of the same schedule falls back at once, an explicit request raises again.
_failed: dict[tuple, ScheduleError | CompileError] = {}
#: Keys being compiled now, each with the lock its compiling thread holds (see _compiled_or_failed).
_compiling: dict[tuple, threading.RLock] = {}


#: Parameter values keyed by their repr when zero: -0.0 == 0.0 (and hashes alike), and the kernel
#: compiled for one of them wrote the other's sign (masked_fill(x, m, 0.0) after -0.0). The
#: runtime's fast-path keys (runtime.py) write the same test inline.
FLOAT_TYPES = (float, np.floating)


def _params_key(params: Mapping[str, Any]) -> tuple:
    return tuple(sorted((k, repr(v) if isinstance(v, FLOAT_TYPES) and v == 0 else v)
                        for k, v in params.items()))


_support_loaded = False


def _runtime_support() -> None:
    """Makes the compiler runtime's helpers visible to Halide's in-memory JIT: LLVM lowers a
    float64 -> float16 conversion to a call of ``__truncdfhf2``, which the JIT resolves from the
    process's global symbols (libgcc_s has it since GCC 12). Without it float16 kernels that
    round a float64 value fail to link. Disk-cached kernels link it themselves."""
    global _support_loaded
    if _support_loaded:
        return
    _support_loaded = True
    import ctypes

    try:
        ctypes.CDLL("libgcc_s.so.1", mode=ctypes.RTLD_GLOBAL)
    except OSError:       # another C runtime: float16 kernels that need it report the symbol
        pass


def compile_built(built: Built, schedule: Schedule, target: hl.Target, *, source: str,
                  fp: str | None = None, persist: bool = False) -> Kernel:
    """Applies ``schedule`` to ``built`` and compiles it for ``target``.

    With ``persist`` the kernel goes through the on-disk compile cache (see ``diskcache``): loaded
    when another process compiled it already, else compiled ahead of time and stored. Otherwise
    (and for GPU targets, or without a C++ compiler) it is JIT-compiled in memory.
    """
    op = built.op
    fp = fp or fingerprint(built)
    if schedule.fingerprint is not None and schedule.fingerprint != fp:
        from ..errors import StaleScheduleError

        raise StaleScheduleError(
            f"op {op.name!r}: the schedule was made for algorithm fingerprint "
            f"{schedule.fingerprint}, but the op's algorithm now has {fp}; re-tune it "
            f"(`pypto tune {op.name}`) or drop it (`pypto db prune`)")
    from . import diskcache

    if persist and diskcache.enabled(target):
        key = diskcache.entry_key(op.name, fp, built.dtypes, built.params, schedule.hash,
                                  str(target), rdom_digest(built))
        python = apply_schedule(built, schedule)
        nargs = len(built.images) + sum(f.outputs() for f in built.outputs)
        try:
            fn = diskcache.load(key, nargs)
            if fn is None:
                fn = diskcache.store(key, built, target, nargs)
            else:  # made by an earlier process: rebuilt if its first call fails silently
                fn.rebuild = lambda: diskcache.rebuild(key, built, target, nargs)
        except hl.HalideError as e:
            msg = str(e).strip().replace("\n", " ")
            raise CompileError(f"op {op.name!r}: Halide could not compile the pipeline with the "
                               f"{source} schedule for {target}: {msg}") from None
        except OSError:
            fn = None  # no usable cache (read-only, full, not private): fall back to the JIT
        if fn is not None:
            return Kernel(op=op, callable=fn, out_dtypes=built.out_dtypes, schedule=schedule,
                          fingerprint=fp, target=str(target), source=source, python=python,
                          disk=True)
    else:
        python = apply_schedule(built, schedule)
    _runtime_support()
    try:
        fn = built.pipeline.compile_to_callable(built.images, target)
    except hl.HalideError as e:
        msg = str(e).strip().replace("\n", " ")
        raise CompileError(f"op {op.name!r}: Halide could not compile the pipeline with the "
                           f"{source} schedule for {target}: {msg}") from None
    return Kernel(op=op, callable=fn, out_dtypes=built.out_dtypes, schedule=schedule,
                  fingerprint=fp, target=str(target), source=source, python=python)


def get_kernel(op, dtypes: tuple[str, ...], params: Mapping[str, Any], dims: Mapping[str, int],
               *, schedule: Schedule | None = None, target: hl.Target | None = None) -> Kernel:
    """The compiled kernel for a call, from the in-memory cache when possible.

    Without an explicit ``schedule`` the schedule database is consulted, then the default.
    Inside ``pypto.profile()`` the kernel is compiled with Halide's profiler and reports each call.
    """
    prof = _profiling()
    if prof is not None:
        t = prof.target_for(target or targets.current())
        k = _get_kernel(op, dtypes, params, dims, schedule=schedule, target=t)
        probe = None
        if k.source.startswith("database"):
            plain = _get_kernel(op, dtypes, params, dims, schedule=k.schedule, target=target)
            probe = plain.callable if plain.disk == k.disk else None
        return prof.observe(k, op, dtypes, dims, probe=probe)
    return _get_kernel(op, dtypes, params, dims, schedule=schedule, target=target)


def _get_kernel(op, dtypes, params, dims, *, schedule=None, target=None) -> Kernel:
    target = target or targets.current()
    tkey = str(target)
    pkey = _params_key(params)
    skey = (op.name, id(op), dtypes, pkey, tuple(sorted(dims.items())), tkey)
    if schedule is None:
        k = _selected.get(skey)
        if k is not None:
            return k
    built = build(op, dtypes, params)
    fp = fingerprint(built)
    source = "given"
    if schedule is None:
        schedule, source = _choose(op, built, fp, dtypes, params, dims, target)
    k = _compiled_or_failed(built, schedule, target, source, fp, (op.name, id(op), fp, dtypes, pkey))
    if isinstance(k, Exception):
        if not source.startswith("database"):
            raise k
        # A stored schedule that does not apply or that Halide refuses to compile must not break
        # the call (as one failing at run time does not): the default schedule runs instead.
        _warn_fallback(op, dims, source, "could not be compiled", k)
        built = build(op, dtypes, params)
        k = _compiled_or_failed(built, default_schedule(built, dims, target), target,
                                f"default (after {source} failed to compile)", fp,
                                (op.name, id(op), fp, dtypes, pkey))
        if isinstance(k, Exception):
            raise k
    if source != "given":
        _selected[skey] = k
    return k


def _compiled_or_failed(built: Built, schedule: Schedule, target, source: str, fp: str,
                        base: tuple) -> Kernel | ScheduleError | CompileError:
    """The kernel of ``schedule`` (compiled now or earlier), or the error it failed with.

    Both are remembered under the schedule's own hash, so a fallback kernel is never handed out
    for the schedule that failed.
    """
    ckey = (*base, schedule.hash, str(target))
    k = _known(ckey, source)
    if k is not None:
        return k
    # One compile per key: threads making the first call of one signature at once wait for the
    # first one's kernel instead of each compiling it (N threads cost N compiles of the same
    # code, on a 2-core machine several times the first call's latency).
    with _lock:
        gate = _compiling.setdefault(ckey, threading.RLock())
    with gate:
        k = _known(ckey, source)
        if k is not None:
            return k
        try:
            k = compile_built(built, schedule, target, source=source, fp=fp, persist=True)
        except (ScheduleError, CompileError) as e:
            k = e
            with _lock:
                _failed[ckey] = type(e)(str(e))  # kept without its traceback (and its frames)
        else:
            with _lock:
                _compiled[ckey] = k
        finally:       # after the result is kept: a thread arriving now finds it
            with _lock:
                _compiling.pop(ckey, None)
    return k


def _known(ckey: tuple, source: str) -> Kernel | ScheduleError | CompileError | None:
    """The kernel (or the error) compiled before under ``ckey``, as this call names it."""
    with _lock:
        k = _compiled.get(ckey) or _failed.get(ckey)
    if isinstance(k, Exception):
        return type(k)(str(k))  # a fresh exception: re-raising one object grows its traceback
    if k is not None:
        # The same schedule compiled for another call (e.g. exact for one shape, nearest here):
        # the code is the same, where it came from for this call is not.
        return k if k.source == source else dataclasses.replace(k, source=source)
    return None


def _warn_fallback(op, dims, source: str, what: str, err) -> None:
    """A PerformanceWarning that a stored schedule did not serve a call (once per call key: the
    fallback kernel is remembered for it)."""
    import warnings

    from ..errors import PerformanceWarning

    first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
    if "Error: " in first:       # Halide's own words, after PyPTO's prefix naming the schedule
        first = first[first.index("Error: "):]
    first = first[:300]
    shape = ",".join(f"{d}={n}" for d, n in sorted(dims.items()))
    warnings.warn(f"{op.name} at {shape}: the schedule from {source} {what} ({first}); the "
                  f"default schedule runs instead. `pypto db revalidate` re-checks stored "
                  f"entries", PerformanceWarning, stacklevel=4)


def fallback_kernel(op, dtypes, params, dims, failed: Kernel, err=None) -> Kernel:
    """The default-schedule kernel, remembered for this call's key after a stored one failed."""
    _warn_fallback(op, dims, failed.source, "failed at run time", err or "")
    target = targets.current()
    built = build(op, dtypes, params)
    schedule = default_schedule(built, dims, target)
    k = compile_built(built, schedule, target, source=f"default (after {failed.source} failed)",
                      persist=True)
    skey = (op.name, id(op), dtypes, _params_key(params), tuple(sorted(dims.items())), str(target))
    _selected[skey] = k
    prof = _profiling()
    if prof is not None:  # inside pypto.profile(): the call that falls back is reported too
        kp = _get_kernel(op, dtypes, params, dims, schedule=schedule, target=prof.target_for(target))
        return prof.observe(dataclasses.replace(kp, source=k.source), op, dtypes, dims)
    return k


def _choose(op, built, fp, dtypes, params, dims, target) -> tuple[Schedule, str]:
    from ..database.lookup import lookup

    found = lookup(op, fp, dtypes, params, dims, target)
    if found is not None:
        return found.schedule, found.source
    return default_schedule(built, dims, target), "default"


def clear_memory_cache() -> None:
    with _lock:
        _compiled.clear()
        _selected.clear()
        _failed.clear()
