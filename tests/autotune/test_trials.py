"""Trial accounting: --trials counts finished trials; killed or interrupted ones are run again."""

import socket
import subprocess
import sys

import optuna
import pytest
from click.testing import CliRunner

from autotune.tuner import Tuner, finished_trials
from test_tuner import TOY, FakeEvaluator, cfg


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def _study(tmp_path, tuner):
    return optuna.load_study(study_name=tuner.name, storage=f"sqlite:///{tmp_path}/study.db")


def _plant_killed_trial(tmp_path, tuner) -> dict:
    """A trial left RUNNING by a tuner process that was SIGKILLed mid-measurement."""
    trial = _study(tmp_path, tuner).ask()
    tuner._space().sample(trial)  # knob values, drawn the way the tuner draws them
    trial.set_user_attr("owner", f"{socket.gethostname()}:{_dead_pid()}")
    return trial.params


def _states(study):
    return [t.state for t in study.trials]


def test_a_killed_trial_does_not_count_and_its_copy_is_run_on_resume(tmp_path):
    Tuner(cfg(tmp_path, trials=4), say=lambda s: None).run()
    tuner = Tuner(cfg(tmp_path, trials=6))
    params = _plant_killed_trial(tmp_path, tuner)
    msgs = []
    res = Tuner(cfg(tmp_path, trials=6), say=msgs.append).run()
    assert "resuming study with 4 trials done; 2 to go" in msgs
    study = _study(tmp_path, tuner)
    assert len(finished_trials(study)) == 6 and res.trials == 6
    rerun = [t for t in study.trials if t.params == params and t.state == optuna.trial.TrialState.COMPLETE]
    assert rerun, "the killed trial's knob values were never measured"
    assert optuna.trial.TrialState.WAITING not in _states(study)
    assert optuna.trial.TrialState.RUNNING not in _states(study)


def test_a_copy_queued_after_the_budget_is_met_is_dropped_not_left_waiting(tmp_path):
    Tuner(cfg(tmp_path, trials=4), say=lambda s: None).run()
    tuner = Tuner(cfg(tmp_path, trials=4))
    _plant_killed_trial(tmp_path, tuner)
    msgs = []
    res = Tuner(cfg(tmp_path, trials=4), say=msgs.append).run()
    assert "resuming study with 4 trials done; 0 to go" in msgs
    study = _study(tmp_path, tuner)
    assert res.trials == 4
    assert optuna.trial.TrialState.WAITING not in _states(study)
    dropped = [t for t in study.trials if "not run" in t.user_attrs.get("error", "")]
    assert len(dropped) == 1


class _InterruptedEvaluator(FakeEvaluator):
    """Ctrl-C arrives while the fourth evaluation runs."""

    n = 0

    def evaluate(self, sched, **kw):
        _InterruptedEvaluator.n += 1
        if _InterruptedEvaluator.n == 4:
            raise KeyboardInterrupt
        return super().evaluate(sched, **kw)


def test_a_trial_cut_short_by_ctrl_c_is_queued_again_and_not_counted(tmp_path):
    _InterruptedEvaluator.n = 0
    c = cfg(tmp_path, trials=5, baselines=("default",), evaluator=_InterruptedEvaluator)
    with pytest.raises(KeyboardInterrupt):
        Tuner(c, say=lambda s: None).run()
    tuner = Tuner(c)
    study = _study(tmp_path, tuner)
    cut = [t for t in study.trials if t.state == optuna.trial.TrialState.FAIL and "baseline" not in t.user_attrs]
    assert len(cut) == 1 and "status" not in cut[0].user_attrs
    waiting = [t for t in study.trials if t.state == optuna.trial.TrialState.WAITING]
    assert [t.system_attrs.get("fixed_params") for t in waiting] == [cut[0].params]
    done = len(finished_trials(study))
    msgs = []
    Tuner(cfg(tmp_path, trials=5, baselines=("default",)), say=msgs.append).run()
    assert f"resuming study with {done} trials done; {5 - done} to go" in msgs
    study = _study(tmp_path, tuner)
    assert len(finished_trials(study)) == 5
    assert any(t.params == cut[0].params and t.state == optuna.trial.TrialState.COMPLETE
               for t in study.trials)


def test_ctrl_c_in_pypto_tune_says_progress_is_saved_and_how_to_resume(tmp_path, monkeypatch):
    from pypto.cli.main import cli

    def interrupted(self, final=True):
        raise KeyboardInterrupt

    monkeypatch.setattr(Tuner, "run", interrupted)
    storage = f"sqlite:///{tmp_path}/s.db"
    r = CliRunner().invoke(cli, ["tune", f"{TOY}:toy_scale", "--shape", "R=8,C=8", "--storage",
                                 storage, "--db", str(tmp_path / "db"), "--no-progress"])
    assert r.exit_code == 130
    assert "Aborted" not in r.output
    assert "every finished trial is saved in study 'toy_scale|" in r.output
    assert storage in r.output and "run the same command again to resume" in r.output
