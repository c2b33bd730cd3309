"""A compile-cache entry whose meta.json is hostile JSON (nested 100000 deep) is damage like any
other: the entry is removed and rebuilt. Before, ``json.loads`` raised RecursionError out of a
plain op call (the kernel entry) and out of the thread-pool loader."""

import os

import pytest

from pypto.compiler import diskcache, parallel

DEEP = "[" * 100000


def _private_entry(folder, meta: str, lib: str):
    folder.mkdir(parents=True, mode=0o700)
    os.chmod(folder.parent, 0o700)
    (folder / "meta.json").write_text(meta)
    (folder / lib).write_bytes(b"\x7fELF not really")
    for f in folder.iterdir():
        os.chmod(f, 0o600)


@pytest.mark.parametrize("meta", [DEEP, '{"format": 1, "function": "pypto_', '{"a": NaN}'])
def test_a_kernel_entry_with_hostile_metadata_is_dropped(tmp_path, monkeypatch, meta):
    root = tmp_path / "cache"
    root.mkdir(mode=0o700)
    monkeypatch.setenv("PYPTO_CACHE_DIR", str(root))
    key = "ab" + "0" * 30
    entry = root / key[:2] / key
    _private_entry(entry, meta, diskcache.LIBRARY)
    assert diskcache.load(key, 2) is None       # not RecursionError
    assert not entry.exists()                   # removed, so the next call rebuilds it


def test_a_thread_pool_entry_with_hostile_metadata_is_rebuilt(tmp_path):
    root = tmp_path / "cache"
    root.mkdir(mode=0o700)
    dest = root / "runtime" / "k1"
    _private_entry(dest, DEEP, parallel.LIBRARY)
    # A compiler that fails shows the loader got past the metadata and went on to rebuild.
    with pytest.raises(OSError, match="compiling parallel.c failed"):
        parallel._build(["false"], root, "k1")
    assert not dest.exists()
