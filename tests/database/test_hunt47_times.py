"""A stored time of zero or less is no measurement: the schema refuses it, naming the file and the
entry, and a commit of such an entry writes nothing."""

import json

import pytest

from dbhelpers import matmul_entry
from pypto.database import DirectoryDatabase
from pypto.errors import DatabaseError


@pytest.mark.parametrize("field", ["time_ms", "baseline"])
@pytest.mark.parametrize("value", [0, 0.0, -1.0])
def test_a_time_of_zero_or_less_is_refused_on_read(tmp_path, field, value):
    db = DirectoryDatabase(tmp_path)
    db.commit([matmul_entry(8, 8, 8), matmul_entry(16, 16, 16)])
    path = db.path("toy_matmul", matmul_entry(8, 8, 8).key.family)
    doc = json.loads(path.read_text())
    if field == "time_ms":
        doc["entries"][1]["time_ms"] = value
    else:
        doc["entries"][1]["baselines"]["default"] = value
    path.write_text(json.dumps(doc))
    fresh = DirectoryDatabase(tmp_path)
    res = fresh.load_file(path)
    assert len(res.entries) == 1                      # the other entry still serves lookups
    assert any(str(path) in p and "entry #1" in p for p in res.problems), res.problems


def test_a_commit_of_a_zero_time_writes_nothing(tmp_path):
    db = DirectoryDatabase(tmp_path)
    db.commit([matmul_entry(8, 8, 8)])
    path = db.path("toy_matmul", matmul_entry(8, 8, 8).key.family)
    before = path.read_bytes()
    with pytest.raises(DatabaseError, match="time_ms"):
        db.commit([matmul_entry(16, 16, 16, time_ms=0.0)])
    assert path.read_bytes() == before


@pytest.mark.parametrize("field", ["time_ms", "baseline"])
def test_a_nan_time_is_refused_naming_the_file_and_entry(tmp_path, field):
    """NaN passes every schema bound; it reached ``json.dumps`` and raised a bare ValueError."""
    db = DirectoryDatabase(tmp_path)
    e = matmul_entry(16, 16, 16, time_ms=float("nan") if field == "time_ms" else 1.0)
    if field == "baseline":
        e.baselines["default"] = float("nan")
    with pytest.raises(DatabaseError, match=r"toy_matmul\.json: new entry .*not a finite number"):
        db.commit([e])
    assert not db.path("toy_matmul", e.key.family).exists()
