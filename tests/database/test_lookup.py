"""Lookup: exact, nearest, stale, stacking, and the explanation of each choice."""

import pytest

from dbhelpers import D, matmul_entry
from helpers import assert_close, rand
from pypto import explain
from pypto.compiler.jit import clear_memory_cache
from pypto.database import DirectoryDatabase, distance
from toyops import toy_matmul


def call(m, k, n):
    a, b = rand((m, k)), rand((k, n), seed=1)
    got = toy_matmul(a, b)
    assert_close(got, a @ b)
    return explain(toy_matmul, a, b)


def test_without_entries_the_default_is_used(userdb):
    e = call(8, 8, 8)
    assert e.chosen == "default"
    assert "no usable stored entry" in e.notes[0]


def test_exact_entry_is_used_and_explained(userdb):
    DirectoryDatabase(userdb).commit([matmul_entry(8, 8, 8)])
    clear_memory_cache()
    e = call(8, 8, 8)
    assert e.chosen.endswith("(exact)") and str(userdb) in e.chosen
    assert e.distance == 0 and "toy_matmul" in e.entry_key


def test_nearest_shape_by_log_distance(userdb):
    DirectoryDatabase(userdb).commit([matmul_entry(8, 8, 8, tag="small"),
                                      matmul_entry(64, 64, 64, tag="big")])
    clear_memory_cache()
    e = call(48, 64, 64)
    assert "nearest" in e.chosen
    assert "M=64" in e.entry_key
    assert e.distance == pytest.approx(distance({"M": 48, "K": 64, "N": 64}, {"M": 64, "K": 64, "N": 64}))


def test_stale_entries_are_reported_and_never_applied(userdb):
    bad = (D("parallel", "ghost", var="q"),)
    DirectoryDatabase(userdb).commit([matmul_entry(8, 8, 8, fprint="f" * 16, directives=bad)])
    clear_memory_cache()
    e = call(8, 8, 8)
    assert e.chosen == "default"
    assert any("stale entry skipped" in n for n in e.notes)


def test_shape_pinning_entries_serve_only_their_shape(userdb):
    pinned = (D("bound", "out", var="n", min=0, extent=8),)
    DirectoryDatabase(userdb).commit([matmul_entry(8, 8, 8, directives=pinned)])
    clear_memory_cache()
    assert call(8, 8, 8).chosen.endswith("(exact)")
    e = call(9, 8, 8)
    assert e.chosen == "default" and any("pins its shape" in n for n in e.notes)


def test_a_near_entry_that_fails_on_the_new_shape_falls_back(userdb):
    # A 16-wide unguarded vector needs N >= 16; the call has N = 3.
    wide = (D("vectorize", "out", var="n", factor=16),)
    DirectoryDatabase(userdb).commit([matmul_entry(16, 16, 16, directives=wide)])
    clear_memory_cache()
    e = call(16, 16, 3)
    assert e.chosen.startswith("default (after database")


def test_user_databases_stack_before_others(userdb, tmp_path, monkeypatch):
    env_db = tmp_path / "env"
    DirectoryDatabase(env_db).commit([matmul_entry(8, 8, 8, tag="env")])
    monkeypatch.setenv("PYPTO_SCHEDULES", str(env_db))
    clear_memory_cache()
    assert str(env_db) in call(8, 8, 8).chosen
    DirectoryDatabase(userdb).commit([matmul_entry(8, 8, 8, tag="api")])
    clear_memory_cache()
    assert str(userdb) in call(8, 8, 8).chosen


def test_a_corrupt_file_does_not_break_calls(userdb):
    DirectoryDatabase(userdb).commit([matmul_entry(8, 8, 8)])
    path = DirectoryDatabase(userdb).path("toy_matmul", matmul_entry(8, 8, 8).key.family)
    path.write_text("{oops")
    clear_memory_cache()
    assert call(8, 8, 8).chosen == "default"
    assert any("invalid JSON" in p for p in DirectoryDatabase(userdb).problems())
