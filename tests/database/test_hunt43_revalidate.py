"""Revalidating for a target this machine cannot run must not drop the entries it cannot time:
``pypto db revalidate --target arm-64-linux`` deleted every arm-64 entry (each 'failed' here)."""

import dataclasses
import os

import pytest
from click.testing import CliRunner

from dbhelpers import matmul_entry
from pypto.cli.main import cli
from pypto.database import DirectoryDatabase, Key

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOY = os.path.join(ROOT, "tests", "toyops.py")


def _arm_db(root):
    e = matmul_entry(8, 8, 8)
    k = e.key
    arm = dataclasses.replace(e, key=Key(k.op, k.dtypes, k.shape, k.params, "arm-64", k.fingerprint))
    db = DirectoryDatabase(root)
    db.commit([arm])
    return db, db.path(k.op, "arm-64")


@pytest.mark.parametrize("target", ["arm-64-linux", "cuda"])
def test_the_command_refuses_a_target_it_cannot_run_and_changes_nothing(tmp_path, target):
    db, path = _arm_db(tmp_path / "db")
    before = path.read_bytes()
    r = CliRunner().invoke(cli, ["db", "revalidate", "--db", str(tmp_path / "db"), "--target", target])
    assert r.exit_code == 2, r.output
    assert f"cannot revalidate for {target} here" in r.stderr and "nothing was changed" in r.stderr
    assert path.read_bytes() == before


_LIBRARY = """
import sys
from pypto.bench.revalidate import revalidate
from pypto.database import DirectoryDatabase
sys.path.insert(0, {tests!r})
import toyops  # registers toy_matmul
outcomes = revalidate([DirectoryDatabase(sys.argv[1])], ops=["toy_matmul"], target="arm-64-linux",
                      dry_run=True)
print([o.action for o in outcomes])
"""


def test_the_library_does_not_run_or_drop_entries_it_cannot_time(tmp_path):
    import subprocess
    import sys

    _arm_db(tmp_path / "db")
    env = dict(os.environ, PYTHONPATH=ROOT, PYPTO_CACHE_DIR=str(tmp_path / "cache"))
    r = subprocess.run([sys.executable, "-c", _LIBRARY.format(tests=os.path.join(ROOT, "tests")),
                        str(tmp_path / "db")], env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, (r.returncode, r.stderr[-1500:])
    assert r.stdout.strip() == "[None]", r.stdout


def test_revalidate_skips_an_entry_whose_key_the_op_cannot_have(tmp_path):
    from pypto.bench.revalidate import revalidate

    e = matmul_entry(8, 8, 8)
    bad = dataclasses.replace(e, key=dataclasses.replace(e.key, dtypes=("float32",)))
    db = DirectoryDatabase(tmp_path / "db")
    db.commit([bad])
    (o,) = revalidate([db], dry_run=True)
    assert o.verdict == "skipped" and o.action is None
