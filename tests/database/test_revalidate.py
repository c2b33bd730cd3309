"""``revalidate``: stored entries re-timed beside the default; losers and broken ones leave.

One test runs the real side-by-side timer on a schedule planted to be far slower (scalar exp
against the default's 8-wide vectors); the others use a fake timer so that each verdict is
decided by the figures the test gives, not by the machine's load.
"""

import pytest

from dbhelpers import D, F32, family, fp
from pypto.bench.revalidate import Outcome, revalidate, table
from pypto.compiler import targets
from pypto.compiler.lower import build, fingerprint
from pypto.database import DirectoryDatabase, Entry, Key
from pypto.infra.timing import Timing
from pypto.ops import get_op
from pypto.schedule.schedule import Schedule
from toyops import toy_matmul, toy_scale

#: Few rounds for speed; the pause and the untimed call before each block stay as in production.
QUICK = {"min_rounds": 2, "max_rounds": 2, "budget_s": 5.0, "pause_s": 0.3}


def scale_entry(r=8, c=32, *, directives=None, fprint=None):
    directives = directives if directives is not None else (
        D("vectorize", "out", var="c", factor=4),)
    f = fprint or fingerprint(build(toy_scale, ("float32",), {}))
    key = Key.make("toy_scale", ("float32",), {"R": r, "C": c}, {}, family(), f)
    return Entry(key=key, schedule=Schedule("toy_scale", tuple(directives), f), time_ms=0.01,
                 baselines={"default": 0.02}, provenance={"method": "test"})


class FakeTimer:
    """Gives (entry ms, default ms) per call, in turn; calls each candidate once, as a timer would."""

    def __init__(self, *figures, during=None):
        self.figures, self.calls, self.during = list(figures), [], during

    def __call__(self, fns, **timing):
        self.calls.append(timing)
        for fn in fns.values():
            fn()
        if self.during is not None:
            self.during()
        e, d = self.figures[min(len(self.calls), len(self.figures)) - 1]
        return {"entry": Timing([e]), "default": Timing([d])}


def test_a_planted_slow_schedule_is_dropped_by_the_real_timer(tmp_path):
    op = get_op("exp")
    f = fingerprint(build(op, ("float32",), {}))
    # Scalar exp in a loop split in pairs: the default vectorizes 8 lanes, several times faster.
    slow = Schedule("exp", (D("split", "out", var="n", outer="no", inner="ni", factor=2),), f)
    key = Key.make("exp", ("float32",), {"N": 16384}, {}, family(), f)
    db = DirectoryDatabase(tmp_path)
    db.commit([Entry(key=key, schedule=slow, time_ms=0.001)])
    lines = []
    (o,) = revalidate([db], timing=QUICK, progress=lines.append)
    assert o.verdict == "slower" and o.action == "drop" and o.written, table([o])
    assert o.entry_ms > o.default_ms > 0 and o.ratio < 0.97
    assert DirectoryDatabase(tmp_path).entries("exp", family()) == []
    assert lines == [f"[1/1] exp N=16384 [float32] in {tmp_path}"]


def test_a_slower_entry_is_dropped_only_when_a_second_measurement_agrees(tmp_path):
    db = DirectoryDatabase(tmp_path)
    db.commit([scale_entry()])
    timer = FakeTimer((2.0, 1.0), (1.0, 1.0))  # first says 0.5x, the longer second 1.0x
    (o,) = revalidate([db], timer=timer, timing=QUICK)
    assert o.verdict == "kept" and "the longer second one did not" in o.reason
    assert timer.calls[1]["min_rounds"] == 2 * QUICK["min_rounds"]   # the second is longer
    (kept,) = db.entries("toy_scale", family())
    assert kept.provenance["revalidated"]["time_ms"] == 1.0
    timer = FakeTimer((2.0, 1.0), (2.0, 1.0))
    (o,) = revalidate([db], timer=timer, timing=QUICK)
    assert (o.verdict, o.action, o.written, o.ratio) == ("slower", "drop", True, 0.5)
    assert db.entries("toy_scale", family()) == []


def test_within_the_margin_an_entry_stays(tmp_path):
    db = DirectoryDatabase(tmp_path)
    db.commit([scale_entry()])
    (o,) = revalidate([db], timer=FakeTimer((1.02, 1.0)), timing=QUICK)   # 0.98x: noise
    assert o.verdict == "kept" and len(db.entries("toy_scale", family())) == 1
    (o,) = revalidate([db], timer=FakeTimer((1.02, 1.0)), timing=QUICK, margin=0.01)
    assert o.verdict == "slower" and db.entries("toy_scale", family()) == []


def test_mark_keeps_a_loser_and_records_its_loss_then_a_win_clears_it(tmp_path):
    db = DirectoryDatabase(tmp_path)
    e = scale_entry()
    db.commit([e])
    (o,) = revalidate([db], timer=FakeTimer((3.0, 1.0)), timing=QUICK, mark=True)
    assert o.shown == "marked (slower)"
    (marked,) = DirectoryDatabase(tmp_path).entries("toy_scale", family())
    rec = marked.slower_record({"R": 8, "C": 32})
    assert rec["time_ms"] == 3.0 and rec["default_ms"] == 1.0 and rec["method"] == "revalidate"
    (o,) = revalidate([db], timer=FakeTimer((1.0, 1.5)), timing=QUICK)
    assert o.verdict == "kept"
    (won,) = DirectoryDatabase(tmp_path).entries("toy_scale", family())
    assert won.slower_at == ()


def test_an_entry_that_fails_or_is_wrong_at_its_shape_is_dropped(tmp_path):
    db = DirectoryDatabase(tmp_path)
    # A 16-wide unguarded vector on C = 8: out of bounds at run time.
    db.commit([scale_entry(8, 8, directives=(D("vectorize", "out", var="c", factor=16),))])
    timer = FakeTimer((1.0, 1.0))
    (o,) = revalidate([db], timer=timer, timing=QUICK)
    assert (o.verdict, o.action, o.written) == ("failed", "drop", True)
    assert "failed at run time" in o.reason and timer.calls == []   # never timed
    assert db.entries("toy_scale", family()) == []


def test_dry_run_writes_nothing(tmp_path):
    db = DirectoryDatabase(tmp_path)
    db.commit([scale_entry()])
    path = db.path("toy_scale", family())
    before = path.read_bytes()
    (o,) = revalidate([db], timer=FakeTimer((2.0, 1.0)), timing=QUICK, dry_run=True)
    assert o.shown == "would drop (slower)" and not o.written
    assert path.read_bytes() == before


def test_stale_other_family_and_filtered_entries_are_left_alone(tmp_path):
    db = DirectoryDatabase(tmp_path)
    stale = scale_entry(8, 64, fprint="f" * 16)
    other = scale_entry(16, 32)
    other = Entry(key=Key.make("toy_scale", ("float32",), {"R": 16, "C": 32}, {}, "arm-64",
                               other.key.fingerprint), schedule=other.schedule)
    mm_key = Key.make("toy_matmul", F32, {"M": 8, "K": 8, "N": 8}, {}, family(), fp())
    db.commit([stale, other, Entry(key=mm_key, schedule=Schedule("toy_matmul", (), fp()))])
    path = db.path("toy_scale", family())
    before = path.read_bytes()
    timer = FakeTimer((9.0, 1.0))
    got = {o.key.family + o.key.shape_text(): o
           for o in revalidate([db], ops=["toy_scale"], timer=timer, timing=QUICK)}
    assert got[family() + "C=64,R=8"].verdict == "stale"
    assert got["arm-64C=32,R=16"].verdict == "skipped"
    assert "arm-64" in got["arm-64C=32,R=16"].reason
    assert len(got) == 2 and timer.calls == []   # toy_matmul filtered out; nothing timed
    assert path.read_bytes() == before
    assert len(db.entries("toy_matmul", family())) == 1


def test_an_entry_retuned_while_it_was_measured_is_not_touched(tmp_path):
    db = DirectoryDatabase(tmp_path)
    db.commit([scale_entry()])
    newer = scale_entry(directives=(D("vectorize", "out", var="c", factor=8),))
    newer.time_ms = 0.001   # faster: replaces the measured entry under the same key

    def retune():
        DirectoryDatabase(tmp_path).commit([newer])

    (o,) = revalidate([db], timer=FakeTimer((2.0, 1.0), during=retune), timing=QUICK)
    assert o.verdict == "slower" and not o.written
    (e,) = DirectoryDatabase(tmp_path).entries("toy_scale", family())
    assert e.schedule.hash == newer.schedule.hash and e.slower_at == ()


def test_an_entry_identical_to_the_default_is_kept_untimed(tmp_path):
    from pypto.schedule.defaults import default_schedule

    built = build(toy_matmul, F32, {})
    dims = {"M": 8, "K": 8, "N": 8}
    sched = default_schedule(built, dims, targets.current()).with_fingerprint(fp())
    db = DirectoryDatabase(tmp_path)
    db.commit([Entry(key=Key.make("toy_matmul", F32, dims, {}, family(), fp()), schedule=sched)])
    timer = FakeTimer((9.0, 1.0))
    (o,) = revalidate([db], timer=timer, timing=QUICK)
    assert o.verdict == "kept" and o.reason == "same schedule as the default"
    assert timer.calls == []


def test_the_report_table_has_one_row_per_entry():
    k = scale_entry().key
    text = table([Outcome("db", k, "h", "slower", "0.50x", 2.0, 1.0, "drop", True),
                  Outcome("db", k, "h", "kept", "", 1.0, 1.0, "stamp", True)])
    header, row1, row2 = text.splitlines()[:3]
    assert header.split() == ["op", "shape", "dtype", "entry", "ms", "default", "ms", "ratio",
                              "verdict"]
    assert row1.split() == ["toy_scale", "C=32,R=8", "float32", "2.0000", "1.0000", "0.50x",
                            "dropped", "(slower)"]
    assert row2.split()[-2:] == ["1.00x", "kept"]
    assert f"{k}: 0.50x" in text
