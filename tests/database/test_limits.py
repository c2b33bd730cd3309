"""A database file's cost is bounded: size limits, and commits that check only what changed."""

import json

import pytest

from dbhelpers import family, matmul_entry
from pypto.database import DirectoryDatabase, Entry
from pypto.database import store
from pypto.database.jsonio import dumps
from pypto.errors import DatabaseError


@pytest.fixture
def parses(monkeypatch):
    """Counts entries parsed from JSON (every load or commit check goes through Entry.from_json)."""
    count = {"n": 0}
    real = Entry.from_json

    def counting(obj, where):
        count["n"] += 1
        return real(obj, where)

    monkeypatch.setattr(Entry, "from_json", staticmethod(counting))
    return count


def test_a_commit_checks_only_the_entries_that_changed(tmp_path, parses):
    DirectoryDatabase(tmp_path).commit([matmul_entry(m, 8, 8) for m in range(1, 31)])
    db = DirectoryDatabase(tmp_path)
    assert len(db.entries("toy_matmul", family())) == 30
    parses["n"] = 0
    db.commit([matmul_entry(100, 8, 8)])
    assert parses["n"] == 1  # the new entry; the 30 untouched ones are not parsed again
    # Another writer changes the file: this database re-reads it under the lock, checks that
    # writer's new entry and its own, and nothing else.
    DirectoryDatabase(tmp_path).commit([matmul_entry(200, 8, 8)])
    parses["n"] = 0
    db.commit([matmul_entry(300, 8, 8)])
    assert parses["n"] == 2
    assert len(DirectoryDatabase(tmp_path).entries("toy_matmul", family())) == 33


def test_a_file_rewritten_with_new_content_of_the_same_size_is_read_again(tmp_path):
    db = DirectoryDatabase(tmp_path)
    db.commit([matmul_entry(8, 8, 8, time_ms=1.0)])
    path = db.path("toy_matmul", family())
    text = path.read_text()
    path.write_text(text.replace('"time_ms": 1.0', '"time_ms": 2.0'))  # same size, same inode
    db.commit([matmul_entry(16, 8, 8)])  # read under the lock by content, not by timestamps
    got = {e.key.shape_dict["M"]: e.time_ms for e in DirectoryDatabase(tmp_path).iter_all()}
    assert got == {8: 2.0, 16: 1.0}


def test_the_file_text_is_what_dumps_gives(tmp_path):
    db = DirectoryDatabase(tmp_path)
    db.commit([matmul_entry(m, 8, 8) for m in (4, 2, 3)])
    db.commit([matmul_entry(1, 8, 8)])  # assembled from kept entry texts
    path = db.path("toy_matmul", family())
    assert path.read_text() == dumps(json.loads(path.read_text()))


def test_a_file_with_more_entries_than_the_limit_is_refused(tmp_path):
    root = tmp_path / "db"
    good = DirectoryDatabase(root)
    good.commit([matmul_entry(1, 8, 8)])
    path = good.path("toy_matmul", family())
    doc = json.loads(path.read_text())
    one = doc["entries"][0]
    doc["entries"] = [dict(one, key=dict(one["key"], shape={"M": m, "K": 8, "N": 8}))
                      for m in range(1, store.MAX_ENTRIES + 2)]
    path.write_text(json.dumps(doc))
    db = DirectoryDatabase(root)
    assert db.entries("toy_matmul", family()) == []
    (problem,) = db.problems()
    assert f"{store.MAX_ENTRIES + 1} entries, over the limit of {store.MAX_ENTRIES}" in problem
    assert "pypto db prune" in problem
    with pytest.raises(DatabaseError, match="refusing to overwrite"):
        db.commit([matmul_entry(99999, 8, 8)])


def test_a_file_over_the_size_limit_is_refused_before_it_is_read(tmp_path):
    good = DirectoryDatabase(tmp_path)
    good.commit([matmul_entry(1, 8, 8)])
    path = good.path("toy_matmul", family())
    with open(path, "r+b") as f:
        f.truncate(store.MAX_FILE_BYTES + 1)  # sparse: nothing to read if the size is checked first
    (problem,) = DirectoryDatabase(tmp_path).problems()
    assert f"over the limit of {store.MAX_FILE_BYTES >> 20} MiB" in problem


def test_a_commit_that_would_pass_the_limit_is_refused_and_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.setattr(store, "MAX_ENTRIES", 3)
    db = DirectoryDatabase(tmp_path)
    db.commit([matmul_entry(m, 8, 8) for m in (1, 2, 3)])
    path = db.path("toy_matmul", family())
    before = path.read_text()
    with pytest.raises(DatabaseError, match="4 entries would exceed the limit of 3"):
        db.commit([matmul_entry(4, 8, 8)])
    assert path.read_text() == before


def test_a_bad_new_entry_is_refused_before_anything_is_written(tmp_path):
    db = DirectoryDatabase(tmp_path)
    db.commit([matmul_entry(1, 8, 8)])
    bad = matmul_entry(2, 8, 8)
    bad.baselines["not a name!"] = 1.0
    with pytest.raises(DatabaseError, match="not written"):
        db.commit([bad])
    assert [e.key.shape_dict["M"] for e in DirectoryDatabase(tmp_path).iter_all()] == [1]


def test_a_program_key_with_many_input_dims_is_stored_and_a_huge_one_refused(tmp_path):
    """A program's key names every input dimension (I0_0, I0_1, ...) and every input's dtype: an
    attention backward has 18 dims, an LSTM cell's 33 dims of 22 inputs. They are stored; a
    shape of more than 256 dims is refused."""
    from dbhelpers import F32, fp
    from pypto.database import Key
    from pypto.schedule.schedule import Schedule

    def entry(n):
        shape = {f"I{i}_0": 2 + i for i in range(n)}
        dtypes = ("bool", "float32") * (n // 4) + ("float32",) * (n % 4 > 0)  # 2 dims per input
        key = Key.make("g_0123456789abcdef", dtypes, shape, {}, family(), fp())
        return Entry(key=key, schedule=Schedule("g_0123456789abcdef", (), fp()), time_ms=1.0)

    db = DirectoryDatabase(tmp_path)
    db.commit([entry(40)])
    (got,) = DirectoryDatabase(tmp_path).iter_all()
    assert len(got.key.shape_dict) == 40
    with pytest.raises(DatabaseError, match="too many properties"):
        db.commit([entry(257)])
