"""The directive grammar: round trips, bounds, and rejection of bad data without Halide."""

import json

import pytest

from pypto.errors import DatabaseError, ScheduleError
from pypto.schedule.directives import GRAMMAR, LIMITS, Directive
from pypto.schedule.schedule import Schedule

D = Directive.make


def test_every_directive_round_trips_through_json():
    samples = [
        D("split", "out", var="x", outer="xo", inner="xi", factor=8, tail="guard_with_if"),
        D("fuse", "out", inner="x", outer="y", fused="xy"),
        D("tile", "out", x="x", y="y", xo="xo", yo="yo", xi="xi", yi="yi", xfactor=8, yfactor=4),
        D("reorder", "out", 1, vars=["x", "k$x", "y"]),
        D("vectorize", "out", var="x", factor=8), D("unroll", "out", var="y", factor=4),
        D("parallel", "out", var="y"), D("serial", "out", var="y"), D("compute_root", "acc"),
        D("compute_at", "acc", at="out", var="y"), D("compute_inline", "f"), D("store_root", "f"),
        D("store_at", "f", at="out", var="y"), D("reorder_storage", "f", vars=["y", "x"]),
        D("fold_storage", "f", var="y", extent=4), D("store_in", "f", memory="stack"),
        D("bound", "out", var="x", min=0, extent=64), D("bound_extent", "out", var="x", extent=64),
        D("align_bounds", "f", var="x", modulus=8), D("rfactor", "s", 1, pairs=[["ri", "u"]], intm="s_i"),
        D("atomic", "s", 1), D("allow_race_conditions", "out", 1), D("async", "f"),
        D("prefetch", "out", input="a", at="y", **{"from": "y"}, offset=2),
        D("wrap", "b", consumer="acc", **{"as": "b_tile"}),
        D("specialize", "out", 1, unit_stride=1),
        D("gpu_blocks", "out", vars=["y"]), D("gpu_threads", "out", vars=["x"]),
        D("gpu_lanes", "s", 1, var="x"), D("gpu_single_thread", "out"),
        D("gpu_tile", "out", x="x", y="y", bx="bx", by="by", tx="tx", ty="ty", xsize=16, ysize=16),
    ]
    assert {d.op for d in samples} == set(GRAMMAR)
    s = Schedule(op="toy", directives=tuple(samples), fingerprint="0123456789abcdef")
    text = s.dumps()
    again = Schedule.loads(text)
    assert again == s
    assert again.dumps() == text
    assert again.hash == s.hash


@pytest.mark.parametrize("bad, message", [
    ({"op": "eval", "func": "out"}, "unknown directive 'eval'"),
    ({"op": "split", "func": "out", "args": {"var": "x", "outer": "a", "inner": "b", "factor": 10**9}},
     "out of range"),
    ({"op": "vectorize", "func": "out", "args": {"var": "x", "factor": 4096}}, "out of range"),
    ({"op": "unroll", "func": "out", "args": {"var": "x", "factor": 0}}, "out of range"),
    ({"op": "split", "func": "out", "args": {"var": "x", "outer": "a", "inner": "b", "factor": 2.5}},
     "must be an integer"),
    ({"op": "split", "func": "out", "args": {"var": "x", "outer": "a", "factor": 2}}, "missing argument 'inner'"),
    ({"op": "split", "func": "../../x", "args": {}}, "must be a name"),
    ({"op": "reorder", "func": "out", "args": {"vars": ["x", "x"]}}, "twice"),
    ({"op": "parallel", "func": "out", "args": {"var": "__import__('os').system('x')"}}, "must be a name"),
    ({"op": "store_in", "func": "f", "args": {"memory": "disk"}}, "must be one of"),
    ({"op": "compute_root", "func": "f", "stage": 2}, "give no stage"),
    ({"op": "vectorize", "func": "out", "args": {"var": "x", "factor": True}}, "must be an integer"),
    ({"op": "split", "func": "out", "extra": 1}, "unknown field"),
    ({"op": "gpu_tile", "func": "out", "args": {"x": "x", "y": "y", "bx": "a", "by": "b", "tx": "c",
                                                 "ty": "d", "xsize": 64, "ysize": 64}}, "threads per block"),
])
def test_bad_directives_are_rejected_with_a_clear_message(bad, message):
    doc = {"format": 1, "op": "toy", "fingerprint": None, "directives": [bad]}
    with pytest.raises(ScheduleError, match=message) as info:
        Schedule.from_json(doc)
    assert "directive #0" in str(info.value)


def test_too_many_directives_are_rejected_before_parsing_them():
    d = {"op": "parallel", "func": "out", "args": {"var": "y"}}
    doc = {"format": 1, "op": "toy", "directives": [d] * (LIMITS["directives"] + 1)}
    with pytest.raises(ScheduleError, match="exceed the limit"):
        Schedule.from_json(doc)


def test_a_million_directives_fail_fast():
    text = json.dumps({"format": 1, "op": "toy", "directives": [{"op": "x", "func": "f"}] * 10**6})
    with pytest.raises(ScheduleError, match="exceed the limit"):
        Schedule.loads(text)


@pytest.mark.parametrize("text, message", [
    ('{"format": 1, "op": "toy", "directives": [], "fingerprint": NaN}', "NaN is not valid"),
    ('{"format": 1, "op": "toy", "op": "other", "directives": []}', "duplicate key"),
    ('{"format": 1e999, "op": "toy", "directives": []}', "out of range"),
    ("[" * 100000 + "]" * 100000, "nested deeper"),
    ('{"format": 1, "op": "toy", "directives": [', "invalid JSON"),
])
def test_strict_json_rejects_what_pythons_json_lets_through(text, message):
    with pytest.raises(DatabaseError, match=message):
        Schedule.loads(text)


def test_unknown_format_version_is_refused():
    with pytest.raises(ScheduleError, match="format 2 is not supported"):
        Schedule.from_json({"format": 2, "op": "toy", "directives": []})
