"""``pypto cache clear`` removes what the compile cache wrote, and nothing else in its folder.

PYPTO_CACHE_DIR may name a folder that holds other things: clear used to remove every two-letter
folder in it and any folder named ``runtime`` (a project's ``go/`` and ``js/`` were deleted).
"""

import os
import subprocess
import sys

from click.testing import CliRunner

from pypto.cli.main import cli

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
KEY = ("ab" + "0123456789abcdef" * 2)[:32]     # a cache key: 32 hex digits


def _mine(root):
    """Folders a user keeps in the same place."""
    for rel, text in (("go/main.go", "package main"), ("js/app.js", "1"), ("runtime/notes.txt", "n"),
                      ("ab/README", "not a cache entry"), ("src/x.c", "int x;")):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)


def _cache_like(root):
    """What the cache writes: an entry, a build's temporary folder, the thread pool."""
    for rel in (f"ab/{KEY}/meta.json", f"ab/.{KEY}.x1y2z3/k.a", "runtime/" + "c" * 24 + "/meta.json",
                "runtime/." + "d" * 24 + ".tmp_1/kernel.so"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        (root / rel).write_text("{}")


def test_clear_leaves_everything_the_cache_did_not_write(tmp_path, monkeypatch):
    monkeypatch.setenv("PYPTO_CACHE_DIR", str(tmp_path))
    _mine(tmp_path)
    _cache_like(tmp_path)
    r = CliRunner().invoke(cli, ["cache", "clear"])
    assert r.exit_code == 0 and "removed 1 entries" in r.output
    left = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file())
    assert left == ["ab/README", "go/main.go", "js/app.js", "runtime/notes.txt", "src/x.c"]


def test_clear_removes_a_real_kernel_and_its_folders(tmp_path):
    env = dict(os.environ, PYPTO_CACHE_DIR=str(tmp_path / "c"), PYTHONPATH=ROOT)
    subprocess.run([sys.executable, "-c", "import numpy as np, pypto; "
                    "pypto.ops.add(np.ones((3, 5), np.float32), np.ones((3, 5), np.float32))"],
                   env=env, check=True)
    clear = [sys.executable, "-m", "pypto.cli.main", "cache", "clear"]
    r = subprocess.run(clear, env=env, capture_output=True, text=True)
    assert r.returncode == 0 and "removed 1 entries" in r.stdout, r.stdout + r.stderr
    assert list((tmp_path / "c").iterdir()) == []


def test_info_says_whether_calls_use_the_cache(tmp_path, monkeypatch):
    (tmp_path / "afile").write_text("")
    monkeypatch.setenv("PYPTO_CACHE_DIR", str(tmp_path / "afile"))
    r = CliRunner().invoke(cli, ["cache", "info"])
    assert r.exit_code == 0 and "in use: no" in r.stdout and "is not a folder" in r.stdout
    monkeypatch.setenv("PYPTO_CACHE_DIR", str(tmp_path / "fresh"))
    r = CliRunner().invoke(cli, ["cache", "info"])
    assert r.exit_code == 0 and "in use: yes" in r.stdout
