"""The persistent compile cache: compiled kernels on disk, shared by every process of a user.

A kernel is compiled ahead of time into a shared object (Halide static library linked with the
system C++ compiler) and kept under ``<cache>/<k[:2]>/<k>/``, where ``k`` hashes everything that
can change the machine code: op, algorithm fingerprint, dtypes, parameters, schedule hash, target,
Halide and PyPTO versions. A second process loads it with ``ctypes`` instead of compiling.

Writers build in a private temporary folder and rename it into place, so concurrent processes
never see half an entry (the loser of a race drops its copy). Each entry records the SHA-256 of
its library; an entry that is truncated or altered fails the check, is removed and rebuilt.

The cache folder is ``$PYPTO_CACHE_DIR``, else ``$XDG_CACHE_HOME/pypto``, else ``~/.cache/pypto``;
``PYPTO_CACHE_DIR=off`` turns it off (kernels are then JIT-compiled in memory only).
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
import shutil
import tempfile
import threading
from pathlib import Path

import halide as hl
import numpy as np

FORMAT = 1
_TYPE_CODE = {"i": 0, "u": 1, "f": 2, "b": 1}
_lock = threading.Lock()
_errors = threading.local()


def cache_dir() -> Path | None:
    env = os.environ.get("PYPTO_CACHE_DIR")
    if env == "off":
        return None
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "pypto"


def enabled(target: hl.Target) -> bool:
    return cache_dir() is not None and not target.has_gpu_feature() and shutil.which("c++") is not None


def entry_key(op_name: str, fp: str, dtypes, params, schedule_hash: str, target: str) -> str:
    from ..infra.version import __version__
    from ..infra.version import halide_version as _halide_version

    text = json.dumps([FORMAT, op_name, fp, list(dtypes), sorted(params.items()), schedule_hash,
                       target.replace("-jit", ""), _halide_version(), __version__], default=str)
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


class DiskCallable:
    """Calls a kernel in a cached shared object with NumPy arrays."""

    def __init__(self, lib: ctypes.CDLL, function: str, path: Path):
        self.lib = lib
        self.fn = getattr(lib, function)
        self.fn.restype = ctypes.c_int
        self.path = path
        self.compiled_now = False  # True when this process compiled it (a cache miss)
        lib.halide_set_error_handler(_on_error)

    def __call__(self, *arrays: np.ndarray) -> None:
        keep: list = []
        bufs = [_buffer(a, keep) for a in arrays]
        _errors.last = None
        rc = self.fn(*[ctypes.byref(b) for b in bufs])
        if rc != 0:
            raise hl.HalideError(getattr(_errors, "last", None) or f"Halide error code {rc}")




def load(key: str) -> DiskCallable | None:
    """The cached kernel, or None (missing, corrupt, or unloadable: then it is removed)."""
    root = cache_dir()
    if root is None:
        return None
    d = root / key[:2] / key
    meta_path = d / "meta.json"
    if not meta_path.exists():
        return None
    try:
        meta = json.loads(meta_path.read_text())
        lib_path = d / meta["library"]
        from .aot import _sha

        if meta.get("format") != FORMAT or _sha(lib_path) != meta["sha256"]:
            raise ValueError("checksum mismatch")
        return DiskCallable(ctypes.CDLL(str(lib_path)), meta["function"], lib_path)
    except (OSError, ValueError, KeyError, AttributeError):
        shutil.rmtree(d, ignore_errors=True)  # corrupt or truncated: rebuild
        return None


def store(key: str, built, target: hl.Target) -> DiskCallable:
    """Compiles the (already scheduled) pipeline into the cache and loads it."""
    from .aot import _link_shared, _sha

    root = cache_dir()
    dest = root / key[:2] / key
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{key}.", dir=dest.parent))
    fn = f"pypto_{key[:12]}"
    try:
        aot = hl.Target(str(target).replace("-jit", ""))
        built.pipeline.compile_to({hl.OutputFileType.static_library: str(tmp / "k.a")},
                                  built.images, fn, aot)
        _link_shared(tmp / "k.a", tmp / "kernel.so")
        (tmp / "k.a").unlink()
        meta = {"format": FORMAT, "function": fn, "library": "kernel.so",
                "sha256": _sha(tmp / "kernel.so"), "op": built.op.name, "target": str(aot)}
        (tmp / "meta.json").write_text(json.dumps(meta, indent=1))
        with _lock:
            try:
                os.rename(tmp, dest)
            except OSError:
                shutil.rmtree(tmp, ignore_errors=True)  # another process got there first
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    found = load(key)
    if found is None:
        raise OSError(f"the compile cache entry {dest} could not be loaded")
    found.compiled_now = True
    return found


def info() -> dict:
    root = cache_dir()
    if root is None or not root.exists():
        return {"dir": str(root) if root else "off", "entries": 0, "bytes": 0}
    entries = [p for p in root.glob("??/*") if (p / "meta.json").exists()]
    size = sum(f.stat().st_size for p in entries for f in p.iterdir() if f.is_file())
    return {"dir": str(root), "entries": len(entries), "bytes": size}


def clear() -> int:
    root = cache_dir()
    if root is None or not root.exists():
        return 0
    n = 0
    for p in root.glob("??"):
        n += sum(1 for _ in p.glob("*"))
        shutil.rmtree(p, ignore_errors=True)
    return n
