"""``revalidate`` on program entries (a traced program named ``g_<hash>``, a composite op at one
shape): the program is rebuilt from the graph file beside the entry and judged like an op; a
missing, unusable or stale graph file is reported with what to do, and the entry left alone.

Verdicts come from a fake timer (the figures each test gives), so the machine's load decides
nothing; every case compiles and runs the real kernels once, checked against NumPy.
"""

import pytest
from click.testing import CliRunner

import pypto
from dbhelpers import family
from pypto.autodiff.api import backward_program
from pypto.bench import revalidate as rv
from pypto.bench.revalidate import revalidate, table
from pypto.compiler.lower import build, fingerprint
from pypto.database import DirectoryDatabase, Entry, Key
from pypto.database.programs import graph_path
from pypto.frontend.graph import fused_schedule
from pypto.frontend.serial import write_program
from pypto.infra.timing import Timing
from pypto.schedule.directives import Directive
from pypto.schedule.schedule import Schedule

QUICK = {"min_rounds": 2, "max_rounds": 2, "budget_s": 5.0, "pause_s": 0.3}


class FakeTimer:
    """(entry ms, default ms) per call, in turn; runs each candidate once, as a timer would."""

    def __init__(self, *figures):
        self.figures, self.calls = list(figures), []

    def __call__(self, fns, **timing):
        self.calls.append(timing)
        for fn in fns.values():
            fn()
        e, d = self.figures[min(len(self.calls), len(self.figures)) - 1]
        return {"entry": Timing([e]), "default": Timing([d])}


def _program(op_name="softmax", dims=None):
    op = pypto.get_op(op_name)
    return backward_program(op, dims or {"R": 4, "C": 8}, op.dtypes[0])


def _entry(g, *, directives=None, fprint=None):
    """An entry of program ``g`` at its shape; by default its schedule is the unfused one (a
    correct schedule that is not the fused default, so it is timed)."""
    built = build(g, g.dtypes[0], {})
    fp = fingerprint(built)
    if directives is None:
        directives = fused_schedule(built, g.call_dims, 8, unfused=True)
    f = fprint or fp
    key = Key.make(g.name, g.dtypes[0], {d: g.call_dims[d] for d in g.input_dims}, {},
                   family(), f)
    return Entry(key=key, schedule=Schedule(g.name, tuple(directives), f), time_ms=1.0,
                 baselines={"default": 1.0}, provenance={"method": "test"})


def _db(tmp_path, g, entry, *, graph=True):
    db = DirectoryDatabase(tmp_path)
    db.commit([entry])
    if graph:
        write_program(tmp_path, g.graph, g.name)
    return db


def test_a_program_entry_is_rebuilt_from_its_graph_file_and_kept_when_it_wins(tmp_path):
    g = _program()
    db = _db(tmp_path, g, _entry(g))
    timer = FakeTimer((1.0, 1.5))
    (o,) = revalidate([db], timer=timer, timing=QUICK)
    assert (o.verdict, o.action, o.written) == ("kept", "stamp", True), table([o])
    assert len(timer.calls) == 1
    (kept,) = db.entries(g.name, family())
    assert kept.provenance["revalidated"]["default_ms"] == 1.5


def test_a_slower_program_entry_is_dropped_or_marked_like_an_op_entry(tmp_path):
    g = _program()
    db = _db(tmp_path, g, _entry(g))
    (o,) = revalidate([db], timer=FakeTimer((3.0, 1.0)), timing=QUICK, mark=True)
    assert o.shown == "marked (slower)"
    (marked,) = db.entries(g.name, family())
    assert marked.slower_record(dict(marked.key.shape_dict))["time_ms"] == 3.0
    (o,) = revalidate([db], timer=FakeTimer((3.0, 1.0)), timing=QUICK)
    assert o.shown == "dropped (slower)" and o.ratio == pytest.approx(1 / 3)
    assert db.entries(g.name, family()) == []


def test_a_program_entry_whose_schedule_does_not_apply_is_dropped_untimed(tmp_path):
    g = _program()
    db = _db(tmp_path, g, _entry(g, directives=[Directive.make("compute_root", "ghost")]))
    timer = FakeTimer((1.0, 1.0))
    (o,) = revalidate([db], timer=timer, timing=QUICK)
    assert (o.verdict, o.action, o.written) == ("failed", "drop", True)
    assert "ghost" in o.reason and timer.calls == []
    assert db.entries(g.name, family()) == []


def test_an_entry_equal_to_the_programs_fused_default_is_kept_untimed(tmp_path):
    g = _program()
    built = build(g, g.dtypes[0], {})
    db = _db(tmp_path, g, _entry(g, directives=fused_schedule(built, g.call_dims, 8)))
    timer = FakeTimer((9.0, 1.0))
    (o,) = revalidate([db], timer=timer, timing=QUICK)
    assert o.verdict == "kept" and o.reason == "same schedule as the default"
    assert timer.calls == []


def test_when_the_fused_default_cannot_compile_the_default_is_its_first_fallback(
        tmp_path, monkeypatch):
    """What a call of the program gets without the entry: compile_graph_op's next attempt."""
    import pypto.schedule.defaults as defaults

    g = _program()
    db = _db(tmp_path, g, _entry(g))
    real = defaults.default_schedule

    def broken(built, dims, target):
        s = real(built, dims, target)
        if built.op.name != g.name:
            return s
        return Schedule(s.op, s.directives + (Directive.make("compute_root", "ghost"),))

    monkeypatch.setattr(defaults, "default_schedule", broken)
    timer = FakeTimer((1.0, 1.0))
    (o,) = revalidate([db], timer=timer, timing=QUICK, dry_run=True)
    assert o.verdict == "kept" and len(timer.calls) == 1, table([o])


@pytest.mark.parametrize("case", ["missing", "not json", "another program", "unknown op"])
def test_an_unusable_graph_file_is_reported_and_the_entry_left_alone(tmp_path, case):
    g = _program()
    db = _db(tmp_path, g, _entry(g), graph=case != "missing")
    path = graph_path(tmp_path, g.name)
    if case == "not json":
        path.write_text("{not json")
    elif case == "another program":
        other = _program("layer_norm")
        write_program(tmp_path, other.graph, other.name)
        path.write_text(graph_path(tmp_path, other.name).read_text())
    elif case == "unknown op":
        path.write_text(path.read_text().replace('"op": "', '"op": "no_such_'))
    entries = db.path(g.name, family())
    before = entries.read_bytes()
    timer = FakeTimer((9.0, 1.0))
    (o,) = revalidate([db], timer=timer, timing=QUICK)           # not a dry run
    assert (o.verdict, o.action, o.written) == ("skipped", None, False)
    assert str(path) in o.reason and "left as it is" in o.reason
    assert "re-tune the program" in o.reason
    want = {"missing": "is missing", "not json": "not JSON",
            "another program": "not " + g.name, "unknown op": "no_such_"}[case]
    assert want in o.reason, o.reason
    assert timer.calls == [] and entries.read_bytes() == before
    assert f"{o.key}: program {g.name}: its graph file" in table([o])


def test_a_stale_program_entry_is_reported_with_what_to_do_and_left_alone(tmp_path):
    g = _program()
    db = _db(tmp_path, g, _entry(g, fprint="f" * 16))
    entries = db.path(g.name, family())
    before = entries.read_bytes()
    (o,) = revalidate([db], timer=FakeTimer((9.0, 1.0)), timing=QUICK)
    assert (o.verdict, o.action, o.written) == ("stale", None, False)
    assert "f" * 16 in o.reason and "re-tune the program" in o.reason
    assert "pypto db prune" in o.reason
    assert entries.read_bytes() == before


def test_prune_removes_a_stale_program_entry_and_keeps_a_current_one(tmp_path):
    """prune rebuilds a program from its graph file, as ``validate --deep`` does."""
    from pypto.database.tools import prune

    g = _program()
    db = _db(tmp_path, g, _entry(g, fprint="f" * 16))
    current = _entry(g)
    db.commit([current])
    assert len(list(db.iter_all())) == 2
    report = prune(db)
    assert any("stale" in line and "f" * 16 in line and "removed" in line for line in report)
    assert [e.key for e in db.iter_all()] == [current.key]
    assert prune(db) == []


def test_a_program_entry_of_a_database_without_a_folder_is_skipped():
    from pypto.database.store import MemoryDatabase

    g = _program()
    db = MemoryDatabase()
    db.commit([_entry(g)])
    (o,) = revalidate([db], timer=FakeTimer((9.0, 1.0)), timing=QUICK)
    assert o.verdict == "skipped" and "no folder" in o.reason


def test_a_registered_composite_ops_entry_is_rebuilt_from_its_graph_file(tmp_path):
    """A composite op is registered, but its entries are its graph op at one shape."""
    from pypto.database.tools import validate_paths
    from pypto.ops._registry import _OPS

    @pypto.register_op(inputs={"x": "R C"})
    def reval_twice_exp(x):
        return pypto.ops.exp(x) * 2.0

    try:
        g = reval_twice_exp.specialize({"R": 4, "C": 8})
        db = _db(tmp_path, g, _entry(g))
        assert validate_paths([tmp_path], deep=True) == []
        timer = FakeTimer((1.0, 1.0))
        (o,) = revalidate([db], timer=timer, timing=QUICK, dry_run=True)
        assert o.verdict == "kept", table([o])
        graph_path(tmp_path, g.name).unlink()
        (o,) = revalidate([db], timer=timer, timing=QUICK, dry_run=True)
        assert o.verdict == "skipped" and "is missing" in o.reason
    finally:
        _OPS.pop("reval_twice_exp", None)


def test_the_cli_takes_a_programs_name_and_dry_runs_it(tmp_path, monkeypatch):
    from pypto.cli.main import cli

    monkeypatch.setattr(rv, "TIMING", QUICK)
    g = _program()
    db = _db(tmp_path, g, _entry(g))
    other = _program("layer_norm")
    DirectoryDatabase(tmp_path).commit([_entry(other)])      # no graph file: skipped
    before = {p: p.read_bytes() for p in tmp_path.rglob("*.json")}
    r = CliRunner().invoke(cli, ["db", "revalidate", "--db", str(tmp_path), "--dry-run",
                                 "--op", g.name, "--op", other.name], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    rows = {line.split()[0]: line for line in r.stdout.splitlines()[1:3]}
    assert rows[other.name].split()[-1] == "skipped"
    assert rows[g.name].split()[-1] in ("kept", "(slower)"), r.stdout   # measured: either
    assert f"its graph file {graph_path(tmp_path, other.name)} is missing" in r.stdout
    assert r.stdout.splitlines()[-1].endswith("dry run: nothing written")
    assert {p: p.read_bytes() for p in tmp_path.rglob("*.json")} == before
    assert db.entries(g.name, family())
