"""Names in schedules and database keys are matched whole. The patterns ended in ``$``, which
Python's ``re`` also matches before a final newline, so ``"co\\n"`` passed as a loop variable (and
printed a line break into the schedule's Halide Python), and ``"R\\n"`` as a key's dim."""

import json

import pytest

from pypto.database import DirectoryDatabase
from pypto.database.programs import is_program
from pypto.errors import DatabaseError, ScheduleError
from pypto.schedule.directives import Directive

SPLIT = {"op": "split", "func": "out", "args": {"var": "c", "outer": "co", "inner": "ci",
                                                 "factor": 4}}


@pytest.mark.parametrize("field, value", [("func", "out\n"), ("outer", "co\n"), ("var", "c\n")])
def test_a_name_with_a_trailing_newline_is_refused(field, value):
    d = json.loads(json.dumps(SPLIT))
    if field == "func":
        d["func"] = value
    else:
        d["args"][field] = value
    with pytest.raises(ScheduleError, match="must be a name"):
        Directive.from_json(d)
    assert Directive.from_json(SPLIT).get("outer") == "co"  # the plain name still reads


def _entry(shape, family="x86-64-avx2"):
    return {"key": {"op": "softmax", "dtypes": ["float32"], "shape": shape, "params": {},
                    "family": family, "fingerprint": "0" * 16},
            "schedule": {"format": 1, "op": "softmax", "directives": []}}


def test_a_key_dim_with_a_trailing_newline_is_a_reported_problem(tmp_path):
    path = tmp_path / "x86-64-avx2" / "softmax.json"
    path.parent.mkdir()
    good, bad = _entry({"R": 4, "C": 8}), _entry({"R\n": 4, "C": 8})
    path.write_text(json.dumps({"format": 1, "op": "softmax", "family": "x86-64-avx2",
                                "entries": [good, bad]}))
    res = DirectoryDatabase(tmp_path).load_file(path)
    assert [e.key.shape_dict for e in res.entries] == [{"C": 8, "R": 4}]
    assert len(res.problems) == 1 and "entry #1" in res.problems[0]
    assert "shape dim 'R\\n' is not allowed" in res.problems[0]


def test_database_paths_and_program_names_refuse_a_trailing_newline(tmp_path):
    db = DirectoryDatabase(tmp_path)
    with pytest.raises(DatabaseError, match="invalid op name"):
        db.path("softmax\n", "x86-64-avx2")
    with pytest.raises(DatabaseError, match="invalid target family"):
        db.path("softmax", "x86-64-avx2\n")
    assert is_program("g_0123456789abcdef") and not is_program("g_0123456789abcdef\n")
