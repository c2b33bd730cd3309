"""A stored file that cannot be read is said, not silently skipped (fault matrix D1): the call
runs with the default, warns once naming the file, and explain() shows why."""

import warnings

import pytest

from dbhelpers import matmul_entry
from helpers import rand
from pypto import PerformanceWarning, explain
from pypto.compiler.jit import clear_memory_cache
from pypto.database import DirectoryDatabase
from toyops import toy_matmul


def _corrupt(userdb):
    db = DirectoryDatabase(userdb)
    db.commit([matmul_entry(8, 8, 8)])
    path = db.path("toy_matmul", matmul_entry(8, 8, 8).key.family)
    path.write_text(path.read_text()[:300])     # torn, as by a copy cut short
    clear_memory_cache()
    return path


def test_a_call_meeting_an_unreadable_file_warns_once_naming_it(userdb):
    path = _corrupt(userdb)
    a, b = rand((8, 8)), rand((8, 8), seed=1)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        toy_matmul(a, b)
        clear_memory_cache()
        toy_matmul(a, b)
    said = [w for w in seen if issubclass(w.category, PerformanceWarning)]
    assert len(said) == 1, [str(w.message) for w in seen]
    assert str(path) in str(said[0].message) and "invalid JSON" in str(said[0].message)
    assert "pypto db validate" in str(said[0].message)


def test_explain_names_the_unreadable_file(userdb):
    path = _corrupt(userdb)
    a, b = rand((8, 8)), rand((8, 8), seed=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PerformanceWarning)
        e = explain(toy_matmul, a, b)
    assert e.chosen == "default"
    assert any(str(path) in n and "invalid JSON" in n for n in e.notes), e.notes
