"""A database folder that is not one: a search-path entry naming a file made every op call raise
NotADirectoryError (load_file caught only FileNotFoundError), and writing below a file (``pypto db
merge -o``, the tuner's --db) raised raw OSErrors, the tuner's only after the whole run."""

import numpy as np
import pytest
from click.testing import CliRunner

import pypto
from pypto.cli.main import cli
from pypto.compiler import targets
from pypto.database import DirectoryDatabase, add_path, remove_path
from pypto.database.store import check_writable
from pypto.errors import DatabaseError


def test_a_search_path_entry_that_is_a_file_is_an_empty_database(tmp_path):
    afile = tmp_path / "not_a_folder"
    afile.write_text("x")
    fam = targets.family(targets.current())
    assert DirectoryDatabase(afile).entries("softmax", fam) == []
    add_path(afile)
    try:
        x = np.arange(12, dtype=np.float32).reshape(3, 4)
        got = pypto.ops.softmax(x)
    finally:
        remove_path(afile)
    want = np.exp(x - x.max(1, keepdims=True))
    np.testing.assert_allclose(got, want / want.sum(1, keepdims=True), rtol=1e-5)


def test_writing_below_a_file_is_a_database_error_naming_the_path(tmp_path):
    afile = tmp_path / "afile"
    afile.write_text("keep")
    db = DirectoryDatabase(afile / "db")
    with pytest.raises(DatabaseError, match="cannot write the database file .*softmax.json"):
        db.update("softmax", "x86-64-avx2", lambda cur: [])
    with pytest.raises(DatabaseError, match="cannot create the database folder"):
        check_writable(afile / "db")
    assert afile.read_text() == "keep"
    assert check_writable(tmp_path / "new" / "db").is_dir()


def test_merge_into_a_file_is_one_error_line(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    afile = tmp_path / "afile"
    afile.write_text("")
    db = DirectoryDatabase(src)
    from dbhelpers import matmul_entry
    db.commit([matmul_entry(8, 8, 8)])
    r = CliRunner().invoke(cli, ["db", "merge", str(src), "-o", str(afile)])
    assert r.exit_code == 2 and "cannot write the database file" in r.output
    assert r.exception is None or isinstance(r.exception, SystemExit)


def test_tune_refuses_an_unwritable_db_before_tuning(tmp_path):
    afile = tmp_path / "afile"
    afile.write_text("")
    storage = tmp_path / "s.db"
    r = CliRunner().invoke(cli, ["tune", "softmax", "--shape", "R=4,C=8", "--trials", "1",
                                 "--db", str(afile / "db"), "--storage", str(storage),
                                 "--baselines", "none", "--no-progress"])
    assert r.exit_code == 2 and "cannot create the database folder" in r.output
    assert not storage.exists()  # nothing was tuned
