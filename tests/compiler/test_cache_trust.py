"""The compile cache loads only its own libraries, and rebuilds an entry that does not work.

A planted shared object whose constructor writes a marker file stands for foreign code: the marker
must never appear, whichever way the library was planted. Each case runs the call in a fresh
process, as a user's next session would.
"""

import hashlib
import json
import os
import shutil
import subprocess
import sys

import pytest
from helpers import CACHE_PROBE

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
pytestmark = pytest.mark.skipif(not (shutil.which("c++") and shutil.which("cc")),
                                reason="needs a C and a C++ compiler")

CODE = CACHE_PROBE

PLANTED = r"""
#include <stdio.h>
__attribute__((constructor)) static void planted(void) {
    FILE *f = fopen(MARKER, "w");
    if (f) { fputs("foreign code ran", f); fclose(f); }
}
int %(fn)s(void *a, void *b) { return 0; }
void halide_set_error_handler(void *h) { (void)h; }
"""

# A library that passes every check made at load time (entry point, metadata) but fails its
# first call, as a kernel built against another runtime might.
FAILS_FIRST_CALL = r"""
#include <stdint.h>
typedef struct { const char *name; int32_t kind, dimensions; uint8_t code, bits; uint16_t lanes;
                 const void *p[5]; } arg_t;
typedef struct { int32_t version, num_arguments; const arg_t *arguments; const char *target,
                 *name; } meta_t;
static const arg_t args[2] = {{"x", 1, 2, 2, 32, 1}, {"out", 2, 2, 2, 32, 1}};
static const meta_t meta = {1, 2, args, "x86-64-linux", "%(fn)s"};
const meta_t *%(fn)s_metadata(void) { return &meta; }
int %(fn)s(void *a, void *b) { return -1; }
void halide_set_error_handler(void *h) { (void)h; }
"""


def _run(cache, check=True):
    env = dict(os.environ, PYPTO_CACHE_DIR=str(cache), PYTHONPATH=ROOT)
    r = subprocess.run([sys.executable, "-c", CODE], env=env, capture_output=True, text=True)
    if check:
        assert r.returncode == 0, r.stderr[-3000:]
    return r


def _sha(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _library(tmp_path, source: str, fn: str, marker=None):
    """Builds ``source`` (with ``%(fn)s`` filled in) into a shared object with the C compiler."""
    src = tmp_path / f"lib_{abs(hash(source))}.c"
    src.write_text(source % {"fn": fn})
    so = src.with_suffix(".so")
    cmd = [shutil.which("cc"), "-shared", "-fPIC", "-o", str(so), str(src)]
    if marker is not None:
        cmd.append(f'-DMARKER="{marker}"')
    subprocess.run(cmd, check=True, capture_output=True)
    return so


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    """A cache holding the softmax entry, made once by a first call."""
    cache = tmp_path_factory.mktemp("template") / "cache"
    assert _run(cache).stdout.strip() == "disk"
    return cache


@pytest.fixture
def filled(tmp_path, template):
    """A copy of the template cache for one test: (cache, entry folder, meta)."""
    cache = tmp_path / "cache"
    shutil.copytree(template, cache)  # copies the modes too
    (entry,) = [p for p in cache.glob("??/*") if (p / "meta.json").exists()]
    return cache, entry, json.loads((entry / "meta.json").read_text())


def _write_meta(entry, meta):
    (entry / "meta.json").write_text(json.dumps(meta))


def test_a_library_path_in_the_metadata_is_never_followed(tmp_path, filled):
    cache, entry, meta = filled
    marker = tmp_path / "marker"
    evil = _library(tmp_path, PLANTED, meta["function"], marker)
    meta.update(library=str(evil), sha256=_sha(evil))  # an absolute path out of the folder
    _write_meta(entry, meta)
    r = _run(cache)
    assert not marker.exists()
    assert r.stdout.strip() == "disk"  # the real kernel was rebuilt and used


def test_a_replaced_library_in_a_folder_others_can_write_is_refused(tmp_path, filled):
    cache, entry, meta = filled
    marker = tmp_path / "marker"
    evil = _library(tmp_path, PLANTED, meta["function"], marker)
    shutil.copyfile(evil, entry / "kernel.so")
    meta["sha256"] = _sha(entry / "kernel.so")  # the hash recomputed: it proves nothing
    _write_meta(entry, meta)
    entry.chmod(0o777)
    r = _run(cache)
    assert not marker.exists()
    assert r.stdout.strip() == "jit"
    assert "writable by group or others" in r.stderr and str(entry) in r.stderr


def test_a_world_writable_cache_folder_is_not_used(tmp_path, filled):
    cache, entry, meta = filled
    marker = tmp_path / "marker"
    evil = _library(tmp_path, PLANTED, meta["function"], marker)
    shutil.copyfile(evil, entry / "kernel.so")
    meta["sha256"] = _sha(entry / "kernel.so")
    _write_meta(entry, meta)
    cache.chmod(0o777)
    r = _run(cache)
    assert not marker.exists()
    assert r.stdout.strip() == "jit"
    assert "compile cache" in r.stderr and "chmod go-w" in r.stderr


@pytest.mark.skipif(not hasattr(os, "getuid") or os.getuid() != 0,
                    reason="giving a folder to another user needs root")
def test_an_entry_owned_by_another_user_is_refused(tmp_path, filled):
    cache, entry, meta = filled
    marker = tmp_path / "marker"
    evil = _library(tmp_path, PLANTED, meta["function"], marker)
    shutil.copyfile(evil, entry / "kernel.so")
    meta["sha256"] = _sha(entry / "kernel.so")
    _write_meta(entry, meta)
    os.chown(entry, 65534, 65534)
    r = _run(cache)
    assert not marker.exists()
    assert r.stdout.strip() == "jit" and "owned by uid 65534" in r.stderr


def test_new_cache_folders_are_private(tmp_path, filled):
    cache, entry, _ = filled
    for p in (cache, entry.parent, entry):
        assert p.stat().st_mode & 0o777 == 0o700, p
    for f in entry.iterdir():
        assert not f.stat().st_mode & 0o022, f


def test_an_entry_naming_another_function_is_rebuilt(filled):
    cache, entry, meta = filled
    meta["function"] = "halide_set_error_handler"  # exported by every kernel library
    _write_meta(entry, meta)
    assert _run(cache).stdout.strip() == "disk"
    assert json.loads((entry / "meta.json").read_text())["function"].startswith("pypto_")
    assert _run(cache).stdout.strip() == "disk"


def test_an_entry_that_fails_its_first_call_is_rebuilt(tmp_path, filled):
    cache, entry, meta = filled
    bad = _library(tmp_path, FAILS_FIRST_CALL, meta["function"])
    shutil.copyfile(bad, entry / "kernel.so")
    meta["sha256"] = _sha(entry / "kernel.so")
    _write_meta(entry, meta)
    assert _run(cache).stdout.strip() == "disk"  # the answer is right: checked in CODE
    assert _sha(entry / "kernel.so") != meta["sha256"]  # and the entry was replaced


def test_a_folder_above_the_cache_that_others_can_write_is_refused(tmp_path, monkeypatch):
    from pypto.compiler import diskcache

    above = tmp_path / "shared"
    above.mkdir()
    monkeypatch.setenv("PYPTO_CACHE_DIR", str(above / "cache"))
    above.chmod(0o777)  # others could rename the cache folder away and put theirs in its place
    with pytest.warns(RuntimeWarning, match="writable by others without the sticky bit"):
        assert diskcache.usable_dir() is None
    above.chmod(0o1777)  # as /tmp: the sticky bit stops them renaming what is not theirs
    assert diskcache.usable_dir() == above / "cache"
