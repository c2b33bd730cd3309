"""Directory and memory databases: the same contract, corrupt files, concurrent writers."""

import json
import multiprocessing as mp

import pytest

from dbhelpers import F32, family, fp, matmul_entry
from pypto.database import DirectoryDatabase, Entry, Key, MemoryDatabase
from pypto.database.tools import diff, merge, prune, validate_paths
from pypto.errors import DatabaseError


@pytest.fixture(params=["directory", "memory"])
def db(request, tmp_path):
    return DirectoryDatabase(tmp_path / "d") if request.param == "directory" else MemoryDatabase()


def test_commit_keeps_the_faster_entry_per_key(db):
    slow, fast = matmul_entry(8, 8, 8, time_ms=5.0, tag="slow"), matmul_entry(8, 8, 8, time_ms=1.0, tag="fast")
    other = matmul_entry(16, 8, 8, time_ms=9.0)
    assert db.commit([slow, other]) == 2
    assert db.commit([fast]) == 1
    assert db.commit([matmul_entry(8, 8, 8, time_ms=7.0, tag="slower")]) == 0
    got = {e.key.shape: e for e in db.entries("toy_matmul", family())}
    assert len(got) == 2
    assert got[slow.key.shape].provenance["method"] == "fast"
    assert db.best(slow.key).time_ms == 1.0


def test_directory_files_are_sorted_stable_and_round_trip(tmp_path):
    d = DirectoryDatabase(tmp_path)
    d.commit([matmul_entry(16, 8, 8), matmul_entry(8, 8, 8)])
    path = d.path("toy_matmul", family())
    text = path.read_text()
    doc = json.loads(text)
    assert [e["key"]["shape"]["M"] for e in doc["entries"]] == [8, 16]
    assert list(doc) == sorted(doc)
    d2 = DirectoryDatabase(tmp_path)
    d2.commit([])  # nothing to write
    e = d2.entries("toy_matmul", family())
    assert {x.key for x in e} == {matmul_entry(16, 8, 8).key, matmul_entry(8, 8, 8).key}
    DirectoryDatabase(tmp_path).commit([matmul_entry(8, 8, 8, time_ms=1.0)])
    assert path.read_text() == text  # an equal entry changes nothing


def _good_file(root):
    d = DirectoryDatabase(root)
    d.commit([matmul_entry(8, 8, 8)])
    return d.path("toy_matmul", family())


CORRUPT = {
    "bad_json": "{not json",
    "wrong_types": json.dumps({"format": 1, "op": "toy_scale", "family": "F", "entries": "x"}),
    "nan": '{"format": 1, "op": "toy_scale", "family": "F", "entries": [], "x": NaN}',
    "deep": "[" * 5000 + "]" * 5000,
    "duplicate_keys": '{"format": 1, "format": 1, "op": "toy_scale", "family": "F", "entries": []}',
    "empty": "",
    "binary": b"\xff\xfe\x00garbage",
}


@pytest.mark.parametrize("kind", sorted(CORRUPT))
def test_a_corrupt_file_is_reported_by_name_and_others_still_load(tmp_path, kind):
    good = _good_file(tmp_path)
    bad = good.parent / "toy_scale.json"
    content = CORRUPT[kind].replace('"F"', json.dumps(family())) if isinstance(CORRUPT[kind], str) else CORRUPT[kind]
    bad.write_bytes(content if isinstance(content, bytes) else content.encode())
    d = DirectoryDatabase(tmp_path)
    problems = d.problems()
    assert problems and all(str(bad) in p for p in problems)
    assert len(d.entries("toy_matmul", family())) == 1
    assert d.entries("toy_scale", family()) == []
    assert validate_paths([tmp_path]) == problems


def _entry_doc(directive):
    e = matmul_entry(8, 8, 8).to_json()
    e["schedule"]["directives"] = [directive]
    return e


@pytest.mark.parametrize("directive, message", [
    ({"op": "exec", "func": "out"}, "unknown directive"),
    ({"op": "unroll", "func": "out", "args": {"var": "m", "factor": 10**12}}, "out of range"),
    ({"op": "split", "func": "out", "args": {"var": "m", "outer": "a", "inner": "b", "factor": "8"}},
     "must be an integer"),
])
def test_a_bad_entry_is_skipped_and_the_rest_of_the_file_serves(tmp_path, directive, message):
    path = _good_file(tmp_path)
    doc = json.loads(path.read_text())
    doc["entries"].append(_entry_doc(directive))
    doc["entries"][-1]["key"]["shape"]["M"] = 99
    path.write_text(json.dumps(doc))
    d = DirectoryDatabase(tmp_path)
    assert len(d.entries("toy_matmul", family())) == 1
    assert any(message in p and "entry #1" in p for p in d.problems())


def test_a_million_directives_in_a_file_are_refused_quickly(tmp_path):
    path = _good_file(tmp_path)
    doc = json.loads(path.read_text())
    doc["entries"][0]["schedule"]["directives"] = [{"op": "parallel", "func": "out"}] * 10**6
    path.write_text(json.dumps(doc))
    problems = DirectoryDatabase(tmp_path).problems()
    # Refused by the file-size limit (about 30 MB of directives) before a line of it is decoded.
    assert any("over the limit of" in p and "MiB" in p for p in problems)


def test_too_many_directives_in_one_entry_are_refused(tmp_path):
    path = _good_file(tmp_path)
    doc = json.loads(path.read_text())
    from pypto.schedule.directives import LIMITS

    n = LIMITS["directives"] + 88
    doc["entries"][0]["schedule"]["directives"] = [{"op": "parallel", "func": "out"}] * n
    path.write_text(json.dumps(doc))
    problems = DirectoryDatabase(tmp_path).problems()
    assert any(f"{n} directives exceed the limit" in p for p in problems)


def test_unknown_func_is_found_by_deep_validation(tmp_path):
    path = _good_file(tmp_path)
    doc = json.loads(path.read_text())
    doc["entries"][0]["schedule"]["directives"] = [{"op": "parallel", "func": "ghost", "args": {"var": "m"}}]
    path.write_text(json.dumps(doc))
    assert validate_paths([tmp_path]) == []
    deep = validate_paths([tmp_path], deep=True)
    assert len(deep) == 1 and "no Func named 'ghost'" in deep[0]


@pytest.mark.parametrize("name", ["../../x", "a/b", "X", "", ".hidden"])
def test_op_names_never_escape_the_database_folder(tmp_path, name):
    d = DirectoryDatabase(tmp_path)
    with pytest.raises(DatabaseError, match="invalid op name"):
        d.path(name, family())
    assert d.entries(name, family()) == []


def test_a_file_in_the_wrong_place_is_reported(tmp_path):
    path = _good_file(tmp_path)
    path.rename(path.with_name("toy_scale.json"))
    assert any("lies at" in p for p in DirectoryDatabase(tmp_path).problems())


def test_commit_never_overwrites_an_unreadable_file(tmp_path):
    """It is moved aside first (test_hunt47_quarantine.py has the details)."""
    path = _good_file(tmp_path)
    path.write_text("{broken")
    with pytest.warns(UserWarning, match="moved it aside"):
        DirectoryDatabase(tmp_path).commit([matmul_entry(4, 4, 4)])
    (aside,) = path.parent.glob(path.name + ".corrupt-*")
    assert aside.read_text() == "{broken"


def _writer(root, start, count):
    d = DirectoryDatabase(root)
    for i in range(start, start + count):
        d.commit([matmul_entry(i + 1, 8, 8, time_ms=float(i + 1))])


def test_two_processes_writing_one_file_lose_no_entry(tmp_path):
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(tmp_path, s, 25)) for s in (0, 25)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    got = DirectoryDatabase(tmp_path).entries("toy_matmul", family())
    assert sorted(e.key.shape_dict["M"] for e in got) == list(range(1, 51))
    assert not list(tmp_path.rglob("*.tmp"))


def test_diff_merge_and_prune(tmp_path):
    a, b, out = DirectoryDatabase(tmp_path / "a"), DirectoryDatabase(tmp_path / "b"), tmp_path / "out"
    a.commit([matmul_entry(8, 8, 8, time_ms=3.0), matmul_entry(16, 8, 8)])
    b.commit([matmul_entry(8, 8, 8, time_ms=2.0), matmul_entry(32, 8, 8)])
    lines = diff(tmp_path / "a", tmp_path / "b").lines()
    assert sum(x.startswith("+") for x in lines) == 1
    assert sum(x.startswith("-") for x in lines) == 1
    assert any(x.startswith("~") and "3.000 ms -> 2.000 ms" in x for x in lines)
    merge([tmp_path / "a", tmp_path / "b"], out)
    merged = {e.key.shape_dict["M"]: e for e in DirectoryDatabase(out).iter_all()}
    assert sorted(merged) == [8, 16, 32]
    assert merged[8].time_ms == 2.0 and merged[8].provenance["merged_from"] == str(tmp_path / "b")
    stale = matmul_entry(64, 8, 8, fprint="0" * 16)
    DirectoryDatabase(out).commit([stale])
    report = prune(DirectoryDatabase(out))
    assert any("stale" in r for r in report)
    left = {e.key.shape_dict["M"] for e in DirectoryDatabase(out).iter_all()}
    assert left == {8, 16, 32}
    assert stale.key.fingerprint != fp() and stale.key.dtypes == F32


@pytest.mark.parametrize("value", [float("-inf"), float("inf")])
def test_a_key_with_an_infinite_param_is_written_as_strict_json_and_read_back(tmp_path, value):
    # masked_fill's -inf fill: strict JSON has no infinities, and the string "inf" alone is a
    # string parameter's value elsewhere (the norms' ord), so the key writes a tagged string.
    e = matmul_entry(8, 8, 8)
    e = Entry(key=Key.make("toy_matmul", F32, {"M": 8, "K": 8, "N": 8},
                           {"fill": value, "ord": "inf"}, family(), e.key.fingerprint),
              schedule=e.schedule, time_ms=1.0, baselines={"default": 2.0})
    d = DirectoryDatabase(tmp_path)
    d.commit([e])
    doc = json.loads(d.path("toy_matmul", family()).read_text())
    assert doc["entries"][0]["key"]["params"] == {"fill": f"float:{value!r}", "ord": "inf"}
    (back,) = DirectoryDatabase(tmp_path).entries("toy_matmul", family())
    assert back.key == e.key and dict(back.key.params) == {"fill": value, "ord": "inf"}


def test_merge_keeps_the_faster_of_duplicate_keys_in_a_source(tmp_path):
    src = DirectoryDatabase(tmp_path / "src")
    src.commit([matmul_entry(8, 8, 8, time_ms=0.5)])
    path = src.path("toy_matmul", family())
    doc = json.loads(path.read_text())
    slow = json.loads(json.dumps(doc["entries"][0]))
    slow["time_ms"] = 99.0
    doc["entries"].append(slow)                          # the same key again, slower, last
    path.write_text(json.dumps(doc))
    merge([tmp_path / "src"], tmp_path / "out")
    (got,) = DirectoryDatabase(tmp_path / "out").iter_all()
    assert got.time_ms == 0.5                             # the last one (99 ms) was kept


def test_merge_and_diff_refuse_a_source_that_does_not_load_and_prune_goes_on(tmp_path):
    good = _good_file(tmp_path / "bad")
    broken = good.parent / "toy_scale.json"
    broken.write_text(good.read_text()[:200])             # truncated: not JSON
    for call in (lambda: merge([tmp_path / "bad"], tmp_path / "out"),
                 lambda: diff(tmp_path / "bad", tmp_path / "bad")):
        with pytest.raises(DatabaseError, match=r"has entries that do not load .*pypto db "
                                                r"validate"):
            call()
    DirectoryDatabase(tmp_path / "bad").commit([matmul_entry(64, 8, 8, fprint="0" * 16)])
    report = prune(DirectoryDatabase(tmp_path / "bad"))
    assert any("toy_scale.json: left alone" in r for r in report), report
    assert any("stale" in r for r in report), report       # the loadable file was still pruned
    assert broken.read_text() == good.read_text()[:200]
