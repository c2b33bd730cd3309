"""``pypto db`` with damaged or mistyped databases: what it skips it says, and a folder that is not
there is an error, not an empty database."""

import os
import sys

import pytest
from click.testing import CliRunner

from pypto.cli.main import cli
from pypto.database import DirectoryDatabase

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "database"))
from dbhelpers import matmul_entry  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOY = os.path.join(ROOT, "tests", "toyops.py")


def _db(tmp_path, *, torn: bool):
    """A database with one readable toy_matmul entry, or with its file torn."""
    root = tmp_path / "db"
    db = DirectoryDatabase(root)
    db.commit([matmul_entry(8, 8, 8)])
    path = db.path("toy_matmul", matmul_entry(8, 8, 8).key.family)
    if torn:
        path.write_text(path.read_text()[:300])
    return root, path


def test_list_says_which_file_it_skipped(tmp_path):
    root, path = _db(tmp_path, torn=True)
    r = CliRunner().invoke(cli, ["db", "list", "--db", str(root)])
    assert r.exit_code == 0 and "0 entries" in r.stdout
    assert str(path) in r.stderr and "invalid JSON" in r.stderr
    assert "pypto db validate" in r.stderr


def test_show_says_why_an_op_has_no_entries(tmp_path):
    root, path = _db(tmp_path, torn=True)
    r = CliRunner().invoke(cli, ["db", "show", f"{TOY}:toy_matmul", "--db", str(root)])
    assert r.exit_code == 1
    assert str(path) in r.stderr and "invalid JSON" in r.stderr


def test_a_readable_database_lists_without_warnings(tmp_path):
    root, _ = _db(tmp_path, torn=False)
    r = CliRunner().invoke(cli, ["db", "list", "--db", str(root)])
    assert r.exit_code == 0 and "1 entries" in r.stdout and r.stderr == ""


@pytest.mark.parametrize("cmd", [["list"], ["show", "matmul"], ["prune"], ["prune", "--dry-run"],
                                 ["revalidate", "--dry-run"]])
@pytest.mark.parametrize("kind", ["missing", "file"])
def test_a_db_folder_that_is_not_there_is_an_error(tmp_path, cmd, kind):
    where = tmp_path / "no_such_db"
    if kind == "file":
        where.write_text("{}")
    r = CliRunner().invoke(cli, ["db", *cmd, "--db", str(where)])
    assert r.exit_code == 2, r.output
    assert str(where) in r.stderr and ("does not exist" if kind == "missing" else "not a folder") in r.stderr
    assert r.exception is None or isinstance(r.exception, SystemExit)


def test_list_takes_a_target_as_the_other_commands_do(tmp_path):
    from pypto.compiler import targets

    root, _ = _db(tmp_path, torn=False)
    fam = targets.family(targets.host())
    for given in ("host", fam):
        r = CliRunner().invoke(cli, ["db", "list", "--db", str(root), "--target", given])
        assert r.exit_code == 0 and "1 entries" in r.stdout, (given, r.output)
    r = CliRunner().invoke(cli, ["db", "list", "--db", str(root), "--target", "arm-64-linux"])
    assert r.exit_code == 0 and "0 entries" in r.stdout
