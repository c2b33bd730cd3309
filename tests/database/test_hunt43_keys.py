"""Entries whose key cannot belong to their op (dtypes that are not a signature, a shape that
does not name the op's dims) are reported by ``validate --deep`` and left alone by ``prune``:
both died with a TypeError traceback. A file of a newer format says to upgrade."""

import dataclasses
import json

import pytest
from click.testing import CliRunner

from dbhelpers import matmul_entry
from pypto.cli.main import cli
from pypto.database import DirectoryDatabase, Key
from pypto.database.tools import prune, validate_paths


def _with_key(tmp_path, **change):
    e = matmul_entry(8, 8, 8)
    k = dataclasses.replace(e.key, **change)
    db = DirectoryDatabase(tmp_path / "db")
    db.commit([dataclasses.replace(e, key=k)])
    return db


BAD = [
    ({"dtypes": ("float32",)}, "not a signature of toy_matmul"),
    ({"shape": (("K", 8), ("M", 8))}, "toy_matmul's input dims are K, M, N"),
    ({"shape": (("K", 8), ("M", 8), ("N", 8), ("Z", 2))}, "shape names K, M, N, Z"),
]


@pytest.mark.parametrize("change, says", BAD)
def test_validate_deep_reports_a_key_the_op_cannot_have(tmp_path, change, says):
    db = _with_key(tmp_path, **change)
    (problem,) = validate_paths([db.root], deep=True)
    assert says in problem
    r = CliRunner().invoke(cli, ["db", "validate", "--deep", str(db.root)])
    assert r.exit_code == 1 and says in r.output
    assert r.exception is None or isinstance(r.exception, SystemExit)


@pytest.mark.parametrize("change, says", BAD)
def test_prune_keeps_such_an_entry_and_says_why(tmp_path, change, says):
    db = _with_key(tmp_path, **change)
    (path,) = db.files()
    before = path.read_bytes()
    (line,) = prune(db)
    assert says in line and line.endswith("kept")
    assert path.read_bytes() == before


def test_a_file_of_a_newer_format_says_to_upgrade(tmp_path):
    db = DirectoryDatabase(tmp_path)
    db.commit([matmul_entry(8, 8, 8)])
    (path,) = db.files()
    doc = json.loads(path.read_text())
    doc["format"] = 7
    path.write_text(json.dumps(doc))
    (problem,) = DirectoryDatabase(tmp_path).problems()
    assert "database format 7, newer than this PyPTO reads (1); upgrade PyPTO" in problem
