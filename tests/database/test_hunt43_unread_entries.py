"""A write to a file holding entries this PyPTO cannot read keeps them: commit (the tuner, merge,
import-autoschedule) wrote back only the entries that loaded, deleting the others (say, one with
a directive of a newer PyPTO) without a word."""

import json

from dbhelpers import matmul_entry
from pypto.database import DirectoryDatabase


def _file_with_an_unreadable_entry(root):
    db = DirectoryDatabase(root)
    db.commit([matmul_entry(8, 8, 8), matmul_entry(16, 16, 16)])
    (path,) = db.files()
    doc = json.loads(path.read_text())
    future = doc["entries"][1]
    future["schedule"]["directives"][0]["op"] = "directive_of_a_newer_pypto"
    path.write_text(json.dumps(doc))
    return path, future


def test_commit_keeps_entries_it_cannot_read(tmp_path):
    path, future = _file_with_an_unreadable_entry(tmp_path)
    db = DirectoryDatabase(tmp_path)
    assert len(db.load_file(path).entries) == 1
    db.commit([matmul_entry(32, 32, 32)])
    db.commit([matmul_entry(32, 32, 32, time_ms=0.5)])      # a second write keeps it once
    entries = json.loads(path.read_text())["entries"]
    assert entries.count(future) == 1 and len(entries) == 3
    fresh = DirectoryDatabase(tmp_path)
    assert sorted(e.key.shape_dict["M"] for e in fresh.load_file(path).entries) == [8, 32]
    assert len(fresh.problems()) == 1 and "directive_of_a_newer_pypto" in fresh.problems()[0]


def test_merge_into_such_a_file_keeps_them_too(tmp_path):
    from pypto.database.tools import merge

    path, future = _file_with_an_unreadable_entry(tmp_path / "dest")
    DirectoryDatabase(tmp_path / "src").commit([matmul_entry(64, 64, 64)])
    merge([tmp_path / "src"], tmp_path / "dest")
    assert future in json.loads(path.read_text())["entries"]
