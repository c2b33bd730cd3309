"""Entries of traced programs (a backward pass, a composite op at one shape) are checked through
the graph file the tuner writes beside them (pypto.database.programs)."""

import json

import pytest

import pypto
from dbhelpers import family
from pypto.autodiff.api import backward_program
from pypto.compiler.lower import build, fingerprint
from pypto.database import DirectoryDatabase, Entry, Key
from pypto.database.programs import graph_path
from pypto.database.tools import validate_paths
from pypto.frontend.graph import fused_schedule
from pypto.frontend.serial import write_program
from pypto.schedule.schedule import Schedule


def _program_entry(op_name, dims, directives=None):
    op = pypto.get_op(op_name)
    g = backward_program(op, dims, op.dtypes[0])
    built = build(g, g.dtypes[0], {})
    fp = fingerprint(built)
    sched = Schedule(g.name, tuple(directives if directives is not None
                                   else fused_schedule(built, g.call_dims, 8)), fp)
    key = Key.make(g.name, g.dtypes[0], {d: g.call_dims[d] for d in g.input_dims}, {}, family(), fp)
    return g, Entry(key=key, schedule=sched, time_ms=1.0, baselines={"default": 1.0},
                    provenance={"method": "test"})


def test_a_program_entry_is_checked_through_its_graph_file(tmp_path):
    g, entry = _program_entry("softmax", {"R": 4, "C": 8})
    DirectoryDatabase(tmp_path).commit([entry])
    (problem,) = validate_paths([tmp_path], deep=True)
    assert "needs its graph file" in problem and g.name in problem
    assert validate_paths([tmp_path]) == []          # the shallow check does not need it
    path = write_program(tmp_path, g.graph, g.name)
    assert path == graph_path(tmp_path, g.name)
    assert validate_paths([tmp_path], deep=True) == []


def test_a_program_entry_whose_schedule_names_no_func_of_the_program_is_reported(tmp_path):
    from pypto.schedule.directives import Directive

    g, entry = _program_entry("softmax", {"R": 4, "C": 8},
                              [Directive.make("compute_root", "no_such_func")])
    DirectoryDatabase(tmp_path).commit([entry])
    write_program(tmp_path, g.graph, g.name)
    (problem,) = validate_paths([tmp_path], deep=True)
    assert "no_such_func" in problem


def test_a_graph_file_of_another_program_or_a_malformed_one_is_reported(tmp_path):
    g, entry = _program_entry("softmax", {"R": 4, "C": 8})
    other, _ = _program_entry("layer_norm", {"R": 4, "C": 8})
    DirectoryDatabase(tmp_path).commit([entry])
    path = graph_path(tmp_path, g.name)
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"format": 1, "name": other.name, "nodes": [], "sources": [],
                                "outputs": []}))
    (problem,) = validate_paths([tmp_path], deep=True)
    assert "no outputs" in problem
    write_program(tmp_path, other.graph, other.name)
    path.write_text(graph_path(tmp_path, other.name).read_text())
    (problem,) = validate_paths([tmp_path], deep=True)
    assert f"describes program {other.name}, not {g.name}" in problem


def test_a_graph_file_names_registered_ops_only():
    """The file is data: an op name that is not registered is refused, nothing is imported."""
    from pypto.frontend import serial

    g, _ = _program_entry("softmax", {"R": 4, "C": 8})
    doc = serial.to_json(g.graph, name=g.name)
    doc["nodes"][0]["op"] = "os.system"
    with pytest.raises(pypto.errors.PyptoError, match="os.system"):
        serial.from_json(doc)
