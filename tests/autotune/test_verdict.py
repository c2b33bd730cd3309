"""Winners inside the noise are not stored: the interval rule, re-measurement, and the final table."""

import pytest

from autotune.tuner import Tuner, format_table
from autotune.verdict import NOISE_FLOOR, REMEASURES, decide, separated
from pypto.database import DirectoryDatabase
from test_tuner import FakeEvaluator, cfg


def t(ms, spread):
    return {"median_ms": ms, "spread": spread, "min_ms": ms, "n": 7}


class Remeasure:
    """A fake side-by-side timer: returns the next prepared table, records what it was asked."""

    def __init__(self, *tables):
        self.tables = list(tables)
        self.calls = []

    def __call__(self, names, attempt):
        self.calls.append((tuple(names), attempt))
        return self.tables.pop(0) if self.tables else None


def test_a_win_inside_the_spread_is_remeasured_then_refused():
    # The quick start's case: tuned 1.715 ms ±12.2% over default 1.726 ms ±30.5%.
    table = {"tuned#7": t(1.715, 0.122), "default": t(1.726, 0.305)}
    again = Remeasure(table, table, table)
    v = decide(table, "tuned#7", ["stored", "default"], again)
    assert not v.store
    assert again.calls == [(("tuned#7", "default"), k) for k in range(1, REMEASURES + 1)]
    assert "within the measured spread of default" in v.rule and "nothing stored" in v.rule


def test_a_win_that_separates_when_measured_longer_is_stored():
    first = {"tuned#2": t(1.0, 0.30), "stored": t(1.3, 0.30), "default": t(2.0, 0.05)}
    longer = {"tuned#2": t(1.0, 0.04), "stored": t(1.3, 0.05), "default": t(2.0, 0.03)}
    v = decide(first, "tuned#2", ["stored", "default"], Remeasure(longer))
    assert v.store and v.remeasured == 1
    assert "beats stored 1.300 ms ±5.0%, default 2.000 ms ±3.0%" in v.rule
    assert "after 1 re-measurement" in v.rule
    assert first["tuned#2"]["spread"] == 0.30  # the table stays as first measured


def test_the_incumbent_stays_when_intervals_keep_overlapping():
    table = {"tuned#2": t(1.0, 0.2), "stored": t(1.1, 0.2), "default": t(3.0, 0.01)}
    v = decide(table, "tuned#2", ["stored", "default"], Remeasure(table, table))
    assert not v.store and "within the measured spread of stored" in v.rule
    assert "the stored entry is kept" in v.rule


def test_a_zero_spread_does_not_make_a_tiny_difference_certain():
    assert not separated(t(1.000, 0.0), t(1.005, 0.0))
    assert separated(t(1.0, 0.0), t(1.0 + 3 * NOISE_FLOOR, 0.0))


def test_nothing_to_beat_is_said_so():
    v = decide({"default": t(1.0, 0.5)}, "default", ["stored", "default"], Remeasure())
    assert v.store and "no stored entry" in v.rule


class NoisyEvaluator(FakeEvaluator):
    """Tuned schedules measure 1.715 ms ±12.2%, the default 1.726 ms ±30.5%, whatever the rounds."""

    compares = []

    def compare(self, schedules, numpy=True, timing=None, timeout=0):
        NoisyEvaluator.compares.append((sorted(schedules), timing))
        res = {}
        for n in schedules:
            res[n] = t(1.715, 0.122) if n.startswith("tuned") else (
                t(1.726, 0.305) if n in ("default", "stored") else t(9.0, 0.01))
        if numpy:
            res["numpy"] = t(20.0, 0.0)
        return {"results": res, "errors": {}}


def test_a_noisy_tuned_winner_is_not_stored_and_the_table_says_why(tmp_path):
    NoisyEvaluator.compares = []
    res = Tuner(cfg(tmp_path, trials=4, evaluator=NoisyEvaluator), say=lambda s: None).run()
    assert res.winner.startswith("tuned") and not res.written
    assert list(DirectoryDatabase(tmp_path / "db").iter_all()) == []
    assert len(NoisyEvaluator.compares) == 1 + REMEASURES
    assert all(timing and timing["min_rounds"] > 7 for _, timing in NoisyEvaluator.compares[1:])
    text = format_table(res)
    assert text.splitlines()[-1].startswith("decided: ")
    assert "within the measured spread of default" in text and "nothing stored" in text


def test_a_noisy_win_over_the_stored_entry_keeps_the_stored_entry(tmp_path):
    Tuner(cfg(tmp_path, trials=4), say=lambda s: None).run()
    (before,) = DirectoryDatabase(tmp_path / "db").iter_all()
    res = Tuner(cfg(tmp_path, trials=8, evaluator=NoisyEvaluator), say=lambda s: None).run()
    assert res.winner.startswith("tuned") and not res.written
    assert "the stored entry is kept" in res.rule and "database unchanged" in res.message
    (after,) = DirectoryDatabase(tmp_path / "db").iter_all()
    assert after.to_json() == before.to_json()


def test_a_clear_win_is_stored_and_the_table_says_which_rule(tmp_path):
    res = Tuner(cfg(tmp_path, trials=8), say=lambda s: None).run()
    assert res.written
    assert "by more than the measured spread" in format_table(res).splitlines()[-1]


def test_the_table_names_a_numpy_reference_as_such():
    """A program (or op) without a fast NumPy form is compared with its reference: say so."""
    from types import SimpleNamespace

    row = {"median_ms": 2.0, "spread": 0.01}
    res = SimpleNamespace(table={"default": dict(row), "numpy": dict(row, median_ms=9.0,
                                                                     label="numpy (reference)")},
                          winner="default", rule="")
    lines = format_table(res).splitlines()
    assert lines[2].startswith("numpy (reference)") and "4.50x" in lines[2]
    res.table["numpy"]["label"] = "numpy"
    assert format_table(res).splitlines()[2].split()[0] == "numpy"
