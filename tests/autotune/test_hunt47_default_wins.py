"""When the default schedule measures fastest in the final side-by-side run, nothing is stored
(calls already get the default) and the run says so; ``pypto study`` reports no gain."""

import optuna
from click.testing import CliRunner

from autotune.evaluate import Result
from autotune.history import study_history
from autotune.tuner import Tuner
from pypto.cli.main import cli
from pypto.database import DirectoryDatabase
from test_tuner import FakeEvaluator, cfg


class DefaultWins(FakeEvaluator):
    """Every search candidate times 5 ms in the search; in the final run the default is fastest."""

    def evaluate(self, sched, **kw):
        return Result("ok", time_ms=0.9)      # the search believed it beat the default (1.0)

    def compare(self, schedules, numpy=True, timing=None, timeout=0):
        res = {n: {"median_ms": 1.0 if n == "default" else 5.0, "min_ms": 1.0, "spread": 0.0,
                   "n": 5} for n in schedules}
        res["numpy"] = {"median_ms": 20.0, "min_ms": 20.0, "spread": 0.0, "n": 5}
        return {"results": res, "errors": {}}


def test_a_default_winner_is_not_stored_as_a_tuned_entry(tmp_path):
    res = Tuner(cfg(tmp_path, trials=3, baselines=("default",), evaluator=DefaultWins),
                say=lambda s: None).run()
    assert res.winner == "default"
    assert not res.written and "default" in res.message
    assert list(DirectoryDatabase(tmp_path / "db").iter_all()) == []


def test_study_reports_no_gain_when_the_default_won(tmp_path):
    c = cfg(tmp_path, trials=3, baselines=("default",), evaluator=DefaultWins)
    res = Tuner(c, say=lambda s: None).run()
    h = study_history(optuna.load_study(study_name=res.study_name, storage=c.storage))
    assert h["outcome"]["winner"] == "default" and h["outcome"]["stored"] is False
    r = CliRunner().invoke(cli, ["study", "--storage", c.storage])
    assert r.exit_code == 0, r.output
    row = [line for line in r.output.splitlines() if line.startswith("toy_scale")][0]
    assert "1.11x" not in row and "none" in row and "default kept" in row, r.output


def test_study_reports_no_gain_when_search_never_beat_the_baselines(tmp_path):
    """A study with no recorded outcome (an older run, or one interrupted): the gain is the
    search's best over the best baseline, and no search result better than it is no gain."""
    storage = f"sqlite:///{tmp_path}/s.db"
    study = optuna.create_study(study_name="toy|x|R=4|t", storage=storage)
    for value, baseline in ((1.0, "default"), (1.5, None), (2.0, None)):
        t = study.ask()
        if baseline:
            t.set_user_attr("baseline", baseline)
        study.tell(t, value)
    h = study_history(study)
    assert h["best_search_ms"] == 1.5 and h["best_baseline_ms"] == 1.0
    r = CliRunner().invoke(cli, ["study", "--storage", storage])
    row = [line for line in r.output.splitlines() if line.startswith("toy")][0]
    assert "none" in row and "1.00x" not in row, r.output
