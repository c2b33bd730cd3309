"""``pypto build`` over a stale entry (the op changed since it was tuned) says so instead of
'no tuned schedule'; PyPTO's warnings reach a command's user as one 'warning:' line."""

import os
import subprocess
import sys

from click.testing import CliRunner

from pypto.cli.main import cli
from pypto.database import DirectoryDatabase

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "database"))
from dbhelpers import matmul_entry  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOY = os.path.join(ROOT, "tests", "toyops.py")


def _env(monkeypatch, db):
    monkeypatch.setenv("PYPTO_NO_SHIPPED_SCHEDULES", "1")
    monkeypatch.setenv("PYPTO_USER_SCHEDULES", "off")
    monkeypatch.setenv("PYPTO_SCHEDULES", str(db))


def test_a_stale_entry_is_named_where_the_build_falls_back(tmp_path, monkeypatch):
    db = tmp_path / "db"
    DirectoryDatabase(db).commit([matmul_entry(8, 8, 8, fprint="0123456789abcdef")])
    _env(monkeypatch, db)
    args = ["build", "--op", f"{TOY}:toy_matmul", "--shape", "M=8,K=8,N=8"]
    r = CliRunner().invoke(cli, args + ["-o", str(tmp_path / "a")])
    assert r.exit_code == 0, r.output
    assert "stale entry skipped" in r.stderr and "0123456789abcdef" in r.stderr
    r = CliRunner().invoke(cli, args + ["--require-tuned", "-o", str(tmp_path / "b")])
    assert r.exit_code == 2 and "stale entry skipped" in r.stderr


def test_a_warning_from_the_library_is_one_line_without_a_source_location(tmp_path):
    db = tmp_path / "db"
    d = DirectoryDatabase(db)
    d.commit([matmul_entry(8, 8, 8)])
    path = d.path("toy_matmul", matmul_entry(8, 8, 8).key.family)
    path.write_text("{oops")
    env = dict(os.environ, PYTHONPATH=ROOT, PYPTO_NO_SHIPPED_SCHEDULES="1",
               PYPTO_USER_SCHEDULES="off", PYPTO_SCHEDULES=str(db),
               PYPTO_CACHE_DIR=str(tmp_path / "cache"))
    r = subprocess.run([sys.executable, "-m", "pypto.cli.main", "build", "--op", f"{TOY}:toy_matmul",
                        "--shape", "M=8,K=8,N=8", "-o", str(tmp_path / "out")],
                       env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    line = next(x for x in r.stderr.splitlines() if str(path) in x)
    assert line.startswith("warning: schedule database:") and "invalid JSON" in line
    assert ".py:" not in r.stderr                      # no file:line of the library's source
