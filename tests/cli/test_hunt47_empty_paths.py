"""A path or storage option given as an empty string is refused before anything is read or
written: ``Path("")`` is the current folder, so ``db merge -o ""`` merged into it, ``db list --db
""`` listed it, and ``tune --storage ""`` fell back to the default storage without a word."""

import os

import pytest
from click.testing import CliRunner

from pypto.cli.main import cli

CASES = [
    (["db", "merge", "-o", "", "SRC"], "--output"),
    (["db", "list", "--db", ""], "--db"),
    (["db", "list", "--db", "SRC", "--db", " "], "--db"),
    (["db", "show", "add", "--db", ""], "--db"),
    (["db", "prune", "--db", ""], "--db"),
    (["db", "revalidate", "--db", ""], "--db"),
    (["db", "import-autoschedule", "add", "--shape", "R=4,C=4", "--db", ""], "--db"),
    (["tune", "add", "--shape", "R=4,C=4", "--trials", "1", "--db", ""], "--db"),
    (["tune", "add", "--shape", "R=4,C=4", "--trials", "1", "--storage", ""], "--storage"),
    (["study", "--storage", ""], "--storage"),
]


@pytest.mark.parametrize("args, named", CASES, ids=[" ".join(c[0][:2]) + " " + c[1] for c in CASES])
def test_an_empty_path_option_is_refused(tmp_path, monkeypatch, args, named):
    src = tmp_path / "src"
    src.mkdir()
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    r = CliRunner().invoke(cli, [str(src) if a == "SRC" else a for a in args])
    assert r.exit_code == 2, r.output
    assert named in r.stderr and "is empty" in r.stderr
    assert os.listdir(work) == []


def test_a_suite_that_is_a_folder_is_refused_by_name(tmp_path):
    r = CliRunner().invoke(cli, ["tune", "--suite", str(tmp_path)])
    assert r.exit_code == 2 and "--suite" in r.stderr and "directory" in r.stderr
