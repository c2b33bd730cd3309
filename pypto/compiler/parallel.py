"""PyPTO's parallel runtime: one thread pool for every kernel loaded from the compile cache.

Each cached kernel library carries its own Halide runtime and so its own thread pool, whose
workers sleep as soon as a parallel loop ends. On a small machine the next call then often wakes
the worker on the caller's core, and both share it: a 2.3 ms matmul took 5.5 ms after a 20 ms
pause. ``parallel.c`` holds a pool that every cached kernel uses instead (it is installed with
``halide_set_custom_do_par_for``): its workers spin for a bounded time after their last task, so
the ops of a program or a model step find them awake. A sleeping worker is woken off the
caller's core: its affinity is narrowed to the other cores just before the wake-up and restored
once it runs (a worker that still wakes on the caller's core moves itself). Left to the
scheduler, a VM's worker woke on the caller's core and then waited for the idle vCPU: after a
0.3 s pause it took no part in the next five matmul 256^3 calls.

The library is compiled once per user with the system C compiler into the compile cache
(``<cache>/runtime/<hash>/``) under the cache's trust rules, and loaded by each process on first
use. Settings, read when a process first runs a cached kernel:

- ``PYPTO_PARALLEL_RUNTIME=halide`` keeps each kernel's own Halide thread pool;
- ``PYPTO_SPIN_US`` (default 1000) is how long idle workers spin before they sleep; 0 never spins;
- ``HL_NUM_THREADS`` sets the thread count, as it does for Halide's own pool;
- ``PYPTO_KERNEL_CACHE_MB`` (default 256): the same library serves the cached kernels' heap
  memory (the buffers of their intermediates) and keeps freed blocks of 64 KiB or more, up to
  this many MiB, for the next call to reuse instead of returning them to the system (munmap, then
  a page fault per page of the next buffer); 0 keeps none. :func:`trim` releases them.

Kernels compiled in memory (no C++ compiler, the cache off, GPU targets) keep Halide's pool.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import threading
import warnings
from pathlib import Path

from ..errors import DatabaseError
from ..infra.jsonio import strict_loads

SOURCE = Path(__file__).with_name("parallel.c")
LIBRARY = "libpypto_parallel.so"  # fixed: never read from the metadata
_FORMAT = 1
_lock = threading.Lock()
_state: dict = {}


def enabled() -> bool:
    """Whether cached kernels use PyPTO's pool (``PYPTO_PARALLEL_RUNTIME`` is not ``halide``)."""
    value = os.environ.get("PYPTO_PARALLEL_RUNTIME", "pypto").strip().lower()
    if value not in ("pypto", "halide"):
        _warn(f"PYPTO_PARALLEL_RUNTIME={value!r} is not 'pypto' or 'halide'; using 'pypto'")
    return value != "halide"


def _warn(msg: str) -> None:
    warnings.warn(f"pypto: {msg}", RuntimeWarning, stacklevel=3)


def _compiler() -> list[str] | None:
    for c in (os.environ.get("CC"), "cc", "gcc", "clang"):
        if c and shutil.which(c):
            return [c]
    for c in (os.environ.get("CXX"), "c++", "g++", "clang++"):
        if c and shutil.which(c):
            return [c, "-x", "c"]
    return None


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _key(cc: list[str], source: bytes) -> str:
    return hashlib.sha256(json.dumps([_FORMAT, cc, source.hex()]).encode()).hexdigest()[:24]


def _build(cc: list[str], root: Path, key: str) -> Path:
    """Compiles the pool into ``root/runtime/key`` (built in a private folder, renamed in)."""
    from .trust import private_dir, untrusted

    base = root / "runtime"
    dest = base / key
    lib = dest / LIBRARY
    if os.path.lexists(dest):
        meta_path = dest / "meta.json"
        for p in (base, dest, lib, meta_path):
            if p in (lib, meta_path) and not os.path.lexists(p):
                continue           # damaged: rebuilt below
            why = untrusted(p)
            if why is not None:    # loading it would run code someone else could have written
                raise PermissionError(f"{p} {why}: remove it (pypto cache clear) or make it "
                                      f"yours and private (chmod go-w)")
        try:
            meta = strict_loads(meta_path.read_bytes(), str(meta_path))  # no RecursionError
            if isinstance(meta, dict) and meta.get("sha256") == _sha(lib):
                return lib
        except (OSError, ValueError, DatabaseError):
            pass
        shutil.rmtree(dest, ignore_errors=True)  # damaged: build again
    private_dir(root)
    private_dir(base)
    tmp = Path(tempfile.mkdtemp(prefix=f".{key}.", dir=base))
    try:
        cmd = [*cc, "-O2", "-shared", "-fPIC", "-pthread", str(SOURCE), "-o", str(tmp / LIBRARY)]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode:
            raise OSError(f"compiling {SOURCE.name} failed: {r.stderr.strip()[:1000]}")
        os.chmod(tmp / LIBRARY, 0o700)
        (tmp / "meta.json").write_text(json.dumps({"format": _FORMAT, "sha256": _sha(tmp / LIBRARY)}))
        os.chmod(tmp / "meta.json", 0o600)
        try:
            os.rename(tmp, dest)
        except OSError:
            pass  # another process got there first: its copy is used
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return lib


def _load(root: Path | None) -> ctypes.CDLL | None:
    """The pool library, built on first use; None (with one warning) when it cannot be had."""
    cc = _compiler()
    if root is None or cc is None:
        return None
    try:
        lib_path = _build(cc, root, _key(cc, SOURCE.read_bytes()))
        lib = ctypes.CDLL(str(lib_path))
        lib.pypto_do_par_for.restype = ctypes.c_int
        return lib
    except (OSError, ValueError, AttributeError, PermissionError) as e:
        _warn(f"PyPTO's parallel runtime is unavailable ({e}); cached kernels use Halide's own "
              f"thread pool. Set PYPTO_PARALLEL_RUNTIME=halide to silence this.")
        return None


def pool(root: Path | None = None) -> ctypes.CDLL | None:
    """The pool library, loaded (and built when needed) under the cache folder ``root`` on first
    use; None when kernels keep Halide's pool (or before first use, without ``root``)."""
    if "lib" not in _state and root is not None:
        with _lock:
            if "lib" not in _state:
                _state["lib"] = _load(root) if enabled() else None
    return _state.get("lib")


def install(kernel_lib: ctypes.CDLL, root: Path | None) -> bool:
    """Points a cached kernel's ``halide_do_par_for`` at the shared pool kept under the cache
    folder ``root``; True when done."""
    lib = pool(root)
    if lib is None:
        return False
    setter = kernel_lib.halide_set_custom_do_par_for
    setter.argtypes = [ctypes.c_void_p]
    setter.restype = ctypes.c_void_p
    setter(ctypes.cast(lib.pypto_do_par_for, ctypes.c_void_p))
    # The heap hooks go in together, before the kernel's first call, so that every block the
    # kernel frees is one the pool's malloc made.
    for name, fn in (("halide_set_custom_malloc", lib.pypto_malloc),
                     ("halide_set_custom_free", lib.pypto_free)):
        set_hook = getattr(kernel_lib, name)
        set_hook.argtypes = [ctypes.c_void_p]
        set_hook.restype = ctypes.c_void_p
        set_hook(ctypes.cast(fn, ctypes.c_void_p))
    return True


def describe(root: Path | None) -> str:
    """One line on the pool cached kernels use (the cache folder ``root``), without building or
    loading it."""
    if not enabled():
        return "Halide's own, one per kernel (PYPTO_PARALLEL_RUNTIME=halide)"
    if _compiler() is None:
        return "Halide's own, one per kernel (no C compiler to build PyPTO's)"
    threads = os.environ.get("HL_NUM_THREADS", "").strip()
    if not threads.isdigit() or int(threads) < 1:
        threads = str(len(os.sched_getaffinity(0)))
    spin = os.environ.get("PYPTO_SPIN_US", "").strip() or "1000"
    keep = os.environ.get("PYPTO_KERNEL_CACHE_MB", "").strip() or "256"
    built = root is not None and any(root.glob(f"runtime/*/{LIBRARY}"))
    return (f"PyPTO's, shared by all cached kernels: {threads} threads, idle workers spin "
            f"{spin} us (PYPTO_SPIN_US), freed kernel buffers kept up to {keep} MiB "
            f"(PYPTO_KERNEL_CACHE_MB){'' if built else '; built on first use'}")


_POOL_COUNTERS = ("threads", "loops", "wakeups", "moves", "spin_us", "aimed")
_MEM_COUNTERS = ("reused", "allocated", "released", "kept_blocks", "kept_bytes", "limit_bytes",
                 "foreign")


def _counters(fn: str, names: tuple) -> dict | None:
    """The runtime's counters filled by its C function ``fn``, by ``names``; None when the
    runtime is not in use."""
    lib = _state.get("lib")
    if lib is None:
        return None
    out = (ctypes.c_long * len(names))()
    getattr(lib, fn)(out)
    return dict(zip(names, out))


def stats() -> dict | None:
    """The pool's counters, or None when it is not in use: threads (the caller included; 0 before
    the first parallel loop), parallel loops run, wake-ups of sleeping workers, workers moved off
    the caller's core after waking there, the spin time in µs, and ``aimed``: sleeping workers
    whose affinity was narrowed to the other cores just before a loop woke them (each restores
    its own once awake)."""
    return _counters("pypto_pool_stats", _POOL_COUNTERS)


def memory_stats() -> dict | None:
    """The cached kernels' heap counters, or None when PyPTO's runtime is not in use: ``reused``
    (allocations served from a kept block), ``allocated`` (allocations of 64 KiB or more that
    found none), ``released`` (kept blocks freed to stay within the limit), ``kept_blocks`` and
    ``kept_bytes`` now, ``limit_bytes`` (``PYPTO_KERNEL_CACHE_MB``), and ``foreign`` (frees of
    blocks the runtime did not make: always 0 unless something is wrong)."""
    return _counters("pypto_mem_stats", _MEM_COUNTERS)


def set_memory_limit(mib: float) -> float | None:
    """Sets how many MiB of freed kernel buffers are kept (``PYPTO_KERNEL_CACHE_MB`` for this
    process from now on; 0 keeps none, and lowering it releases what is kept); returns the old
    limit in MiB, or None when PyPTO's runtime is not in use."""
    lib = _state.get("lib")
    if lib is None:
        return None
    lib.pypto_mem_set_limit.restype = ctypes.c_long
    lib.pypto_mem_set_limit.argtypes = [ctypes.c_long]
    return lib.pypto_mem_set_limit(int(mib * (1 << 20))) / (1 << 20)


def trim() -> int:
    """Returns the heap blocks the cached kernels freed and the runtime kept to the system;
    the bytes released (0 when PyPTO's runtime is not in use)."""
    lib = _state.get("lib")
    if lib is None:
        return 0
    lib.pypto_mem_trim.restype = ctypes.c_long
    return int(lib.pypto_mem_trim())
