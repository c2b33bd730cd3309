"""The user schedule database: where it is, where it sits in the search path, and the quick start.

``pypto tune`` writes winners there by default and every call reads it, so the README's first
command changes what later calls do; tuning never writes into the shipped database unless asked.
"""

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from dbhelpers import matmul_entry
from helpers import rand
from pypto.cli.main import cli
from pypto.compiler.jit import clear_memory_cache
from pypto.database import DirectoryDatabase, explain, search_path, user_root
from pypto.database.lookup import SHIPPED
from toyops import toy_matmul

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"


@pytest.fixture
def no_user_env(monkeypatch):
    """No variable that names a database: user_root() falls back to the XDG/HOME rules."""
    for var in ("PYPTO_USER_SCHEDULES", "PYPTO_SCHEDULES", "XDG_DATA_HOME"):
        monkeypatch.delenv(var, raising=False)
    return monkeypatch


def test_user_root_follows_the_environment(no_user_env, tmp_path):
    mp = no_user_env
    mp.setenv("HOME", str(tmp_path / "home"))
    assert user_root() == tmp_path / "home" / ".local" / "share" / "pypto" / "schedules"
    mp.setenv("XDG_DATA_HOME", "relative/data")  # the XDG spec says: ignore a relative path
    assert user_root() == tmp_path / "home" / ".local" / "share" / "pypto" / "schedules"
    mp.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    assert user_root() == tmp_path / "data" / "pypto" / "schedules"
    mp.setenv("PYPTO_USER_SCHEDULES", str(tmp_path / "mine"))
    assert user_root() == tmp_path / "mine"
    mp.setenv("PYPTO_USER_SCHEDULES", "off")
    assert user_root() is None
    assert str(tmp_path) not in " ".join(db.name for db in search_path())


def test_search_order_is_env_then_user_then_shipped(no_user_env, tmp_path):
    no_user_env.setenv("PYPTO_SCHEDULES", str(tmp_path / "env"))
    no_user_env.setenv("PYPTO_USER_SCHEDULES", str(tmp_path / "user"))
    names = [db.name for db in search_path()]
    assert names[-3:] == [str(tmp_path / "env"), str(tmp_path / "user"), str(SHIPPED)]


def test_a_user_entry_is_used_by_calls(no_user_env, tmp_path):
    user = tmp_path / "user"
    no_user_env.setenv("PYPTO_USER_SCHEDULES", str(user))
    DirectoryDatabase(user).commit([matmul_entry(8, 8, 8)])
    clear_memory_cache()
    try:
        e = explain(toy_matmul, rand((8, 8)), rand((8, 8), seed=1))
    finally:
        clear_memory_cache()
    assert e.chosen.endswith("(exact)") and e.database == str(user)


def test_the_shipped_database_is_package_data_in_this_tree():
    # pypto/_schedules links to the top-level folder, which stays the data's home in the repo.
    assert SHIPPED == (ROOT / "schedules").resolve()
    assert (ROOT / "pypto" / "_schedules").resolve() == SHIPPED
    assert any(SHIPPED.glob("*/*.json"))


@pytest.mark.parametrize("value, says", [("off", "give --db FOLDER"),
                                         (str(SHIPPED), "points at the shipped schedules")])
def test_tune_without_a_user_database_refuses_rather_than_write_elsewhere(no_user_env, value, says):
    no_user_env.setenv("PYPTO_USER_SCHEDULES", value)
    before = sorted((p.name, p.stat().st_mtime_ns) for p in SHIPPED.rglob("*.json"))
    r = CliRunner().invoke(cli, ["tune", "softmax", "--shape", "R=8,C=8", "--trials", "1",
                                 "--baselines", "none", "--no-progress"])
    assert r.exit_code == 2 and says in r.output, r.output
    assert sorted((p.name, p.stat().st_mtime_ns) for p in SHIPPED.rglob("*.json")) == before


def _quick_start_command() -> list[str]:
    """The README's first command, less its ``pip install``: what a new user runs to tune."""
    text = README.read_text()
    block = re.search(r"## Two commands.*?```bash\n(.*?)```", text, re.S).group(1)
    line = next(ln for ln in block.splitlines() if "pypto tune" in ln)
    return shlex.split(line.split("&&", 1)[1])


@pytest.mark.slow
def test_the_quick_start_result_reaches_a_call_in_a_fresh_process(tmp_path):
    cmd = _quick_start_command()
    assert cmd[:2] == ["pypto", "tune"] and "--db" not in cmd  # it must not need --db
    # The same command, made fast: a small shape, two trials, no autoschedulers.
    small = {"--shape": "R=16,C=64", "--trials": "2"}
    assert set(small) <= set(cmd), cmd
    cmd = [small.get(prev, a) for prev, a in zip([None] + cmd, cmd)]
    cmd = [sys.executable, "-m", "pypto.cli.main", *cmd[1:], "--baselines", "none", "--no-progress"]
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYPTO_USER_SCHEDULES", "PYPTO_SCHEDULES", "XDG_DATA_HOME")}
    env.update(HOME=str(home), PYTHONPATH=str(ROOT))
    p = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    user = home / ".local" / "share" / "pypto" / "schedules"
    assert f"stored in {user}" in p.stdout, p.stdout[-3000:]
    assert not (work / "schedules").exists()  # nothing written into the folder it ran in

    probe = ("import json, numpy as np, pypto\n"
             "e = pypto.explain('softmax', np.ones((16, 64), np.float32))\n"
             "print(json.dumps({'database': e.database, 'distance': e.distance, "
             "'chosen': e.chosen}))\n")
    q = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, env=env, capture_output=True,
                       text=True, timeout=300)
    assert q.returncode == 0, q.stderr[-3000:]
    got = json.loads(q.stdout.strip().splitlines()[-1])
    assert got["database"] == str(user) and got["distance"] == 0, got


def test_library_tuning_and_autoschedule_imports_default_to_the_user_database(tmp_path,
                                                                             monkeypatch):
    from autotune.tuner import TuneConfig

    import pypto
    from pypto.database.lookup import write_root

    monkeypatch.setenv("PYPTO_USER_SCHEDULES", str(tmp_path / "mine"))
    assert TuneConfig(op="softmax", shape={"R": 4, "C": 8}).db is None   # resolved when storing
    assert write_root() == tmp_path / "mine"
    monkeypatch.setenv("PYPTO_USER_SCHEDULES", "off")
    with pytest.raises(pypto.DatabaseError, match="give --db FOLDER"):
        write_root()


def test_explain_of_a_call_that_returns_a_view_says_no_kernel_ran():
    import numpy as np

    from pypto.errors import PyptoError

    x = np.ones((4, 6), np.float32)
    with pytest.raises(PyptoError, match=r"explain\(split\): this call ran no kernel.*out="):
        explain("split", x, 2, axis=1)
    outs = (np.empty((4, 3), np.float32), np.empty((4, 3), np.float32))
    assert explain("split", x, 2, axis=1, out=outs).chosen.split()[0] in ("default", "database")
