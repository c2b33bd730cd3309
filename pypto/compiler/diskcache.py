"""The persistent compile cache: compiled kernels on disk, shared by every process of a user.

A kernel is compiled ahead of time into a shared object (Halide static library linked with the
system C++ compiler) and kept under ``<cache>/<k[:2]>/<k>/``, where ``k`` hashes everything that
can change the machine code: op, algorithm fingerprint, dtypes, parameters, schedule hash, target,
Halide and PyPTO versions. A second process loads it with ``ctypes`` instead of compiling.

Writers build in a private temporary folder and rename it into place, so concurrent processes
never see half an entry (the loser of a race drops its copy). Each entry records the SHA-256 of
its library; an entry that is truncated or altered fails the check, is removed and rebuilt.

Loading a library runs its code, so the cache trusts only what no one else can write: the library
file name is fixed (``kernel.so``, never read from the metadata), and the cache folder, each entry
and its files must belong to the current user and not be writable by group or others (folders
are created ``0700``). Anything else is refused with a warning, and the kernel is JIT-compiled in
memory instead. The SHA-256 only detects damage: whoever can write the folder can rewrite it too.
An entry whose entry point or metadata does not match its key, or that fails its first call, is
removed and rebuilt.

The cache folder is ``$PYPTO_CACHE_DIR``, else ``$XDG_CACHE_HOME/pypto``, else ``~/.cache/pypto``;
``PYPTO_CACHE_DIR=off`` turns it off (kernels are then JIT-compiled in memory only).
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
import re
import shutil
import tempfile
import threading
import warnings
from pathlib import Path

import halide as hl
import numpy as np

from ..errors import DatabaseError
from ..infra.jsonio import strict_loads
from . import parallel
from .trust import private_dir, untrusted, untrusted_ancestor

FORMAT = 1
LIBRARY = "kernel.so"  # fixed: a name read from the metadata could point anywhere
_TYPE_CODE = {"i": 0, "u": 1, "f": 2, "b": 1}
_lock = threading.Lock()
_errors = threading.local()
_warned: set[str] = set()


def cache_dir() -> Path | None:
    env = os.environ.get("PYPTO_CACHE_DIR")
    if env == "off":
        return None
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "pypto"


class UntrustedCache(PermissionError):
    """A cache folder or entry that another user could have written: it is never loaded."""


def _warn_once(msg: str) -> None:
    if msg not in _warned:  # once per process: every call of the op would repeat it
        _warned.add(msg)
        warnings.warn(msg, RuntimeWarning, stacklevel=2)


def _refuse(what: str, fix: str) -> UntrustedCache:
    msg = (f"pypto: not using the compile cache: {what}; kernels are JIT-compiled in memory "
           f"instead. {fix}")
    _warn_once(msg)
    return UntrustedCache(msg)


def usable_dir() -> Path | None:
    """The cache folder when it may be used, else None (off, or refused with a warning)."""
    root = cache_dir()
    if root is None:
        return None
    elsewhere = "set PYPTO_CACHE_DIR to a folder of your own"
    why = untrusted_ancestor(Path(os.path.realpath(root)))  # where a link to it really points
    fix = f"A folder above it lets others replace it: {elsewhere}."
    if why is None and os.path.lexists(root) and not os.path.isdir(root):
        why, fix = f"{root} is not a folder", f"Remove it, or {elsewhere}."
    elif why is None and os.path.lexists(root):
        why = untrusted(root, follow=True)
        why = why and f"{root} {why}"
        fix = f"Make it yours and private (chmod go-w {root}), or {elsewhere}."
    if why is not None:
        _refuse(why, fix)
        return None
    return root


def enabled(target: hl.Target) -> bool:
    return (not target.has_gpu_feature() and shutil.which("c++") is not None
            and usable_dir() is not None)


def function_name(key: str) -> str:
    """The C entry point of an entry: derived from its key, never read from its metadata."""
    return f"pypto_{key[:12]}"


def entry_key(op_name: str, fp: str, dtypes, params, schedule_hash: str, target: str,
              salt: str = "") -> str:
    """The cache key of a kernel; ``salt`` is the digest of the algorithm's reduction domains
    (``lower.rdom_digest``: the fingerprint cannot see their bounds), appended only when there
    is one so that other keys stay as they were."""
    from ..infra.version import __version__
    from ..infra.version import halide_version as _halide_version

    parts = [FORMAT, op_name, fp, list(dtypes), sorted(params.items()), schedule_hash,
             target.replace("-jit", ""), _halide_version(), __version__]
    text = json.dumps(parts + ([salt] if salt else []), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


class _Dim(ctypes.Structure):
    _fields_ = [("min", ctypes.c_int32), ("extent", ctypes.c_int32), ("stride", ctypes.c_int32),
                ("flags", ctypes.c_uint32)]


class _Type(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _Buffer(ctypes.Structure):
    _fields_ = [("device", ctypes.c_uint64), ("device_interface", ctypes.c_void_p),
                ("host", ctypes.c_void_p), ("flags", ctypes.c_uint64), ("type", _Type),
                ("dimensions", ctypes.c_int32), ("dim", ctypes.POINTER(_Dim)),
                ("padding", ctypes.c_void_p)]


def _buffer(a: np.ndarray, keep: list) -> _Buffer:
    """A halide_buffer_t over ``a`` (NumPy's last axis is Halide's dimension 0)."""
    dims = (_Dim * a.ndim)(*[_Dim(0, a.shape[i], a.strides[i] // a.itemsize, 0)
                             for i in reversed(range(a.ndim))])
    keep.append(dims)
    bits = 1 if a.dtype.kind == "b" else a.itemsize * 8
    return _Buffer(host=a.ctypes.data, type=_Type(_TYPE_CODE[a.dtype.kind], bits, 1),
                   dimensions=a.ndim, dim=dims)


_HANDLER = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_char_p)


@_HANDLER
def _on_error(_ctx, msg):
    _errors.last = msg.decode("utf-8", "replace").strip() if msg else "unknown error"


class _Metadata(ctypes.Structure):  # halide_filter_metadata_t
    _fields_ = [("version", ctypes.c_int32), ("num_arguments", ctypes.c_int32),
                ("arguments", ctypes.c_void_p), ("target", ctypes.c_char_p),
                ("name", ctypes.c_char_p)]


def _check_entry_point(lib: ctypes.CDLL, function: str, nargs: int | None) -> None:
    """Raises ValueError unless ``lib`` holds the Halide pipeline ``function`` with ``nargs``
    buffers, as its own metadata describes it (an exported name alone proves little)."""
    getter = getattr(lib, f"{function}_metadata")
    getter.restype = ctypes.POINTER(_Metadata)
    md = getter()
    if not md:
        raise ValueError(f"{function}: no metadata")
    m = md.contents
    if m.version != 1 or (m.name or b"").decode("utf-8", "replace") != function:
        raise ValueError(f"{function}: the metadata describes another pipeline")
    if nargs is not None and m.num_arguments != nargs:
        raise ValueError(f"{function}: {m.num_arguments} arguments, {nargs} expected")


class DiskCallable:
    """Calls a kernel in a cached shared object with NumPy arrays."""

    def __init__(self, lib: ctypes.CDLL, function: str, path: Path, nargs: int | None = None):
        _check_entry_point(lib, function, nargs)
        self.lib = lib
        self.fn = getattr(lib, function)
        self.fn.restype = ctypes.c_int
        self.path = path
        self.compiled_now = False  # True when this process compiled it (a cache miss)
        self.rebuild = None  # set for a library from an earlier process: how to rebuild it
        lib.halide_set_error_handler(_on_error)
        self.shared_pool = parallel.install(lib, usable_dir())  # PyPTO's pool (parallel.py)

    def _invoke(self, arrays) -> tuple[int, str | None]:
        keep: list = []
        bufs = [_buffer(a, keep) for a in arrays]
        _errors.last = None
        rc = self.fn(*[ctypes.byref(b) for b in bufs])
        return rc, getattr(_errors, "last", None)

    def launcher(self, arrays) -> Launcher:
        """A :class:`Launcher` for arrays laid out like ``arrays`` (same shapes, strides, dtypes)."""
        return Launcher(self, arrays)

    def __call__(self, *arrays: np.ndarray) -> None:
        rc, msg = self._invoke(arrays)
        rebuild, self.rebuild = self.rebuild, None  # only the first call may rebuild
        if rc != 0 and msg is None and rebuild is not None:
            # A working pipeline reports its errors through the handler; a silent failure of a
            # library an earlier process left means the entry itself is broken: rebuild it once.
            try:
                fresh = rebuild()
            except (OSError, hl.HalideError) as e:
                raise hl.HalideError(f"Halide error code {rc} from the cached kernel {self.path}; "
                                     f"rebuilding it failed too: {e}") from None
            self.lib, self.fn, self.path = fresh.lib, fresh.fn, fresh.path
            self.compiled_now = True
            rc, msg = self._invoke(arrays)
        if rc != 0:
            raise hl.HalideError(msg or f"Halide error code {rc}")



# Where an ndarray keeps its data pointer: right after the object header (NumPy's
# PyArrayObject_fields starts with PyObject_HEAD, then ``char *data``). Reading it there costs a
# fraction of ``a.ctypes.data`` (which builds two objects per call). Checked once against NumPy's
# own answer; where it differs (an unusual build), the slow, documented way is used.
_DATA_AT = object.__basicsize__
_pointer_at = ctypes.c_void_p.from_address


def _data_offset_works() -> bool:
    probe = np.arange(7, dtype=np.float64)[2:]
    got = _pointer_at(id(probe) + _DATA_AT).value
    return got == probe.__array_interface__["data"][0]


_RAW_POINTERS = _data_offset_works()


def data_address(a: np.ndarray) -> int | None:
    """The address of ndarray ``a``'s data, as ``a.ctypes.data`` gives it, for a tenth of the cost
    (that builds two objects per call: ~1.8 us here, a fifth of a small call's budget)."""
    if _RAW_POINTERS:
        return _pointer_at(id(a) + _DATA_AT).value
    return a.ctypes.data


class Launcher:
    """Calls one cached kernel again and again on arrays of one fixed layout.

    The ``halide_buffer_t`` structures (shape, strides, type) are built once; a call only writes
    each array's data pointer into them. Only arrays with exactly the shapes, strides and dtypes
    given at construction may be passed (the runtime's fast path keys on them). Threads may call
    one launcher at once: each call takes its own set of structures from a free list.
    """

    def __init__(self, owner: DiskCallable, arrays):
        self.owner = owner
        self._layout = [(a.shape, a.strides, a.dtype) for a in arrays]
        self._free: list = []

    def _structures(self):
        keep: list = []
        bufs = []
        for shape, strides, dt in self._layout:
            proto = np.lib.stride_tricks.as_strided(np.empty(1, dt), shape=shape, strides=strides)
            b = _buffer(proto, keep)
            b.host = None
            bufs.append(b)
        return bufs, keep, [ctypes.byref(b) for b in bufs]

    def __call__(self, arrays, _at=_pointer_at, _off=_DATA_AT) -> None:
        free = self._free
        st = free.pop() if free else self._structures()
        try:
            if _RAW_POINTERS:
                for b, a in zip(st[0], arrays):
                    b.host = _at(id(a) + _off).value
            else:
                for b, a in zip(st[0], arrays):
                    b.host = a.ctypes.data
            rc = self.owner.fn(*st[2])
        finally:
            free.append(st)
        if rc != 0:
            self.owner(*arrays)   # the checked call reports the error (and rebuilds if it must)


def _check_private(path: Path) -> None:
    why = untrusted(path)
    if why is not None:
        raise _refuse(f"{path} {why}", f"Remove it (pypto cache clear), or make it yours and "
                                       f"private (chmod go-w {path}).")


def load(key: str, nargs: int | None = None) -> DiskCallable | None:
    """The cached kernel, or None (missing, or corrupt: then it is removed to be rebuilt).

    ``nargs`` is the number of buffers the pipeline takes, checked against the library's metadata.

    Raises:
        UntrustedCache: the cache folder, the entry or one of its files could have been written by
            another user (a warning says which); the caller compiles in memory instead.
    """
    root = usable_dir()
    if root is None:
        raise UntrustedCache(f"the compile cache {cache_dir()} is off or not trusted")
    d = root / key[:2] / key
    if not os.path.lexists(d):
        return None
    for p in (d.parent, d):
        _check_private(p)
    meta_path, lib_path = d / "meta.json", d / LIBRARY
    for p in (meta_path, lib_path):
        if os.path.lexists(p):
            _check_private(p)
    function = function_name(key)
    try:
        from .aot import _sha

        meta = strict_loads(meta_path.read_bytes(), str(meta_path))  # bounded: no RecursionError
        if not isinstance(meta, dict) or meta.get("format") != FORMAT:
            raise ValueError("unknown format")
        if meta.get("function") != function:
            raise ValueError(f"the entry point is {meta.get('function')!r}, not {function!r}")
        if _sha(lib_path) != meta.get("sha256"):
            raise ValueError("checksum mismatch")
        return DiskCallable(ctypes.CDLL(str(lib_path)), function, lib_path, nargs)
    except (OSError, ValueError, KeyError, AttributeError, TypeError, DatabaseError):
        shutil.rmtree(d, ignore_errors=True)  # missing, truncated or not this key's: rebuild
        return None


def rebuild(key: str, built, target: hl.Target, nargs: int | None = None) -> DiskCallable:
    """Removes an entry that does not work and compiles it again."""
    root = usable_dir()
    if root is not None:
        shutil.rmtree(root / key[:2] / key, ignore_errors=True)
    return store(key, built, target, nargs)


def store(key: str, built, target: hl.Target, nargs: int | None = None) -> DiskCallable:
    """Compiles the (already scheduled) pipeline into the cache and loads it.

    Raises:
        OSError: the cache cannot be written, or is not private (UntrustedCache).
    """
    from .aot import _link_shared, _sha

    root = usable_dir()
    if root is None:
        raise UntrustedCache(f"the compile cache {cache_dir()} is off or not trusted")
    dest = root / key[:2] / key
    try:
        private_dir(root)
        private_dir(dest.parent)
    except PermissionError as e:
        raise _refuse(str(e), "") from None
    tmp = Path(tempfile.mkdtemp(prefix=f".{key}.", dir=dest.parent))  # created 0700
    fn = function_name(key)
    try:
        aot = hl.Target(str(target).replace("-jit", ""))
        built.pipeline.compile_to({hl.OutputFileType.static_library: str(tmp / "k.a")},
                                  built.images, fn, aot)
        _link_shared(tmp / "k.a", tmp / LIBRARY)
        (tmp / "k.a").unlink()
        os.chmod(tmp / LIBRARY, 0o700)  # whatever the umask: loaded only if no one else can write
        meta = {"format": FORMAT, "function": fn, "library": LIBRARY,
                "sha256": _sha(tmp / LIBRARY), "op": built.op.name, "target": str(aot)}
        (tmp / "meta.json").write_text(json.dumps(meta, indent=1))
        os.chmod(tmp / "meta.json", 0o600)
        # Loaded from its private, never reused temporary path: the dynamic loader hands back an
        # already loaded library for a path it has seen, which after a rebuild is the broken one.
        try:
            found = DiskCallable(ctypes.CDLL(str(tmp / LIBRARY)), fn, dest / LIBRARY, nargs)
        except (OSError, ValueError, AttributeError) as e:
            raise OSError(f"the compiled kernel {tmp / LIBRARY} could not be loaded: {e}") from None
        with _lock:
            try:
                os.rename(tmp, dest)
            except OSError:
                pass  # another process got there first: its copy stays, ours is dropped
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    found.compiled_now = True
    return found


def info() -> dict:
    root = cache_dir()
    if root is None or not root.exists():
        return {"dir": str(root) if root else "off", "entries": 0, "bytes": 0}
    entries = [p for p in root.glob("??/*") if (p / "meta.json").exists()]
    size = sum(f.stat().st_size for p in entries for f in p.iterdir() if f.is_file())
    return {"dir": str(root), "entries": len(entries), "bytes": size}


#: What the cache itself writes: ``<k[:2]>/<k>`` (32 hex digits) and ``runtime/<24 hex>``, each
#: also as a build's temporary folder ``.<name>.<random>`` beside it.
_ENTRY = re.compile(r"\.?([0-9a-f]{32})(\.[A-Za-z0-9_]+)?\Z")
_RUNTIME = re.compile(r"\.?[0-9a-f]{24}(\.[A-Za-z0-9_]+)?\Z")
_PREFIX = re.compile(r"[0-9a-f]{2}\Z")


def clear() -> int:
    """Removes every cached kernel and the cached thread pool; returns how many kernels.

    Only what the cache wrote is touched: PYPTO_CACHE_DIR may name a folder that holds other
    things too (removing every two-letter folder and ``runtime`` in it deleted a user's ``go/``
    and ``js/`` folders), so anything else there, and any folder left not empty, stays.
    """
    root = cache_dir()
    if root is None or not root.is_dir():
        return 0
    n = 0
    for prefix in root.iterdir():
        if not (_PREFIX.match(prefix.name) and prefix.is_dir() and not prefix.is_symlink()):
            continue
        for d in prefix.iterdir():
            m = _ENTRY.match(d.name)
            if m and m.group(1).startswith(prefix.name) and d.is_dir() and not d.is_symlink():
                shutil.rmtree(d, ignore_errors=True)
                n += not d.name.startswith(".")
        _rmdir_if_empty(prefix)
    runtime = root / "runtime"      # the thread pool (parallel.py), rebuilt on first use
    if runtime.is_dir() and not runtime.is_symlink():
        for d in runtime.iterdir():
            if _RUNTIME.match(d.name) and d.is_dir() and not d.is_symlink():
                shutil.rmtree(d, ignore_errors=True)
        _rmdir_if_empty(runtime)
    return n


def _rmdir_if_empty(path: Path) -> None:
    try:
        path.rmdir()
    except OSError:
        pass                        # something else is in it: not the cache's to remove
