"""A corrupt database file (torn JSON, wrong types, bad UTF-8): readers report it, naming the file
and what to do, and every other file keeps serving; a writer moves it aside as
``<name>.corrupt-<time>`` (bytes kept) and writes a fresh file, warning; a file that is sound but
not readable by this PyPTO (a newer format) is never moved, and the write is refused."""

import json

import pytest

from dbhelpers import matmul_entry
from pypto.database import DirectoryDatabase
from pypto import DatabaseWarning
from pypto.errors import DatabaseError

CORRUPT = {
    "torn": b'{"entries": [{"key": ',
    "bad utf-8": b'{"entries": [], "op": "\xff\xfe"}',
    "wrong types": json.dumps({"entries": {}, "family": 3, "format": "1", "op": []}).encode(),
    "not an object": b"[1, 2, 3]",
    "empty": b"",
}


def _two_files(tmp_path):
    db = DirectoryDatabase(tmp_path)
    db.commit([matmul_entry(8, 8, 8)])
    good = db.path("toy_matmul", matmul_entry(8, 8, 8).key.family)
    other = good.with_name("toy_scale.json")       # an op file beside it, to be damaged
    return db, good, other


@pytest.mark.parametrize("kind", sorted(CORRUPT))
def test_a_reader_reports_a_corrupt_file_and_keeps_the_others(tmp_path, kind):
    db, good, _ = _two_files(tmp_path)
    bad = good.with_name("toy_scale.json")
    bad.write_bytes(CORRUPT[kind])
    fresh = DirectoryDatabase(tmp_path)
    assert len(fresh.entries("toy_matmul", good.parent.name)) == 1
    problems = fresh.problems()
    assert problems and all(str(bad) in p for p in problems)
    assert "remove it" in problems[-1] and ".corrupt-" in problems[-1]
    assert bad.read_bytes() == CORRUPT[kind]       # a reader never moves or changes anything


@pytest.mark.parametrize("kind", sorted(CORRUPT))
def test_a_writer_moves_a_corrupt_file_aside_and_writes(tmp_path, kind):
    db = DirectoryDatabase(tmp_path)
    path = db.path("toy_matmul", matmul_entry(8, 8, 8).key.family)
    path.parent.mkdir(parents=True)
    path.write_bytes(CORRUPT[kind])
    with pytest.warns(DatabaseWarning, match="moved it aside") as seen:
        assert db.commit([matmul_entry(4, 4, 4)]) == 1
    (aside,) = path.parent.glob("toy_matmul.json.corrupt-*")
    assert aside.read_bytes() == CORRUPT[kind]     # nothing lost
    msg = str(seen[0].message)
    assert str(path) in msg and aside.name in msg and "pypto db merge" in msg
    assert [e.key for e in DirectoryDatabase(tmp_path).entries("toy_matmul", path.parent.name)] \
        == [matmul_entry(4, 4, 4).key]
    assert DirectoryDatabase(tmp_path).problems() == []    # the aside file is not read


def test_two_quarantines_in_one_second_keep_both_files(tmp_path):
    db = DirectoryDatabase(tmp_path)
    path = db.path("toy_matmul", matmul_entry(8, 8, 8).key.family)
    path.parent.mkdir(parents=True)
    for i in range(2):
        path.write_text(f"{{torn {i}")
        with pytest.warns(DatabaseWarning):
            db.commit([matmul_entry(4, 4, 4 + i)])
    asides = sorted(p.read_text() for p in path.parent.glob("toy_matmul.json.corrupt-*"))
    assert asides == ["{torn 0", "{torn 1"]


def test_a_newer_format_file_is_not_moved_and_the_write_is_refused(tmp_path):
    db = DirectoryDatabase(tmp_path)
    db.commit([matmul_entry(8, 8, 8)])
    path = db.path("toy_matmul", matmul_entry(8, 8, 8).key.family)
    doc = json.loads(path.read_text())
    doc["format"] = 999
    path.write_text(json.dumps(doc))
    before = path.read_bytes()
    with pytest.raises(DatabaseError, match="refusing to overwrite"):
        DirectoryDatabase(tmp_path).commit([matmul_entry(4, 4, 4)])
    assert path.read_bytes() == before
    assert list(path.parent.glob("*.corrupt-*")) == []


def test_an_update_that_writes_nothing_leaves_a_corrupt_file_in_place(tmp_path):
    db = DirectoryDatabase(tmp_path)
    path = db.path("toy_matmul", matmul_entry(8, 8, 8).key.family)
    path.parent.mkdir(parents=True)
    path.write_text("{torn")
    assert db.update("toy_matmul", path.parent.name, lambda current: None) == []
    assert path.read_text() == "{torn" and list(path.parent.glob("*.corrupt-*")) == []
