"""The tuner loop with a fake measurement (deterministic) and with the real worker (faults)."""

import json
import os
import signal
import subprocess
import sys
import time

import optuna
import pytest

from autotune.evaluate import Evaluator, Result
from autotune.tuner import TuneConfig, Tuner
from pypto.database import DirectoryDatabase
from pypto.schedule.schedule import Schedule

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOY = os.path.join(ROOT, "tests", "toyops.py")


class FakeEvaluator:
    """Time = a fixed function of the schedule, so the best point is known in advance."""

    calls = []

    def __init__(self, *a, **k):
        pass

    @staticmethod
    def cost(sched) -> float:
        ds = sched["directives"]
        t = 10.0
        t -= 3.0 * any(d["op"] == "vectorize" for d in ds)
        t -= 2.0 * any(d["op"] == "parallel" for d in ds)
        t -= 0.1 * sum(d["op"] == "unroll" for d in ds)
        return t

    def evaluate(self, sched, *, incumbent=None, prune_ms=None, timing=None, inject=None,
                 run_timeout=None):
        FakeEvaluator.calls.append(sched)
        return Result("ok", time_ms=self.cost(sched), incumbent_ms=self.cost(incumbent) if incumbent else None)

    def autoschedule(self, name, timeout=0):
        return ({"format": 1, "op": "toy_scale", "fingerprint": None, "directives": []}, "")

    def compare(self, schedules, numpy=True, timing=None, timeout=0):
        res = {n: {"median_ms": self.cost(s), "min_ms": self.cost(s), "spread": 0.0, "n": 5}
               for n, s in schedules.items()}
        res["numpy"] = {"median_ms": 20.0, "min_ms": 20.0, "spread": 0.0, "n": 5}
        return {"results": res, "errors": {}}

    def __enter__(self):
        return self

    def __exit__(self, *e):
        pass


def cfg(tmp_path, **kw):
    base = dict(op=f"{TOY}:toy_scale", shape={"R": 64, "C": 256}, trials=12,
                storage=f"sqlite:///{tmp_path}/study.db", db=str(tmp_path / "db"), progress=False,
                baselines=("default", "adams2019"), evaluator=FakeEvaluator, seed=3)
    base.update(kw)
    return TuneConfig(**base)


def test_fake_tuning_finds_the_best_and_stores_it(tmp_path):
    res = Tuner(cfg(tmp_path), say=lambda s: None).run()
    assert res.winner.startswith("tuned") or res.winner == "default"
    best = res.table[res.winner]["median_ms"]
    assert best <= res.table["default"]["median_ms"] and best <= res.table["adams2019"]["median_ms"]
    assert best <= 5.0  # vectorized and parallel
    entries = list(DirectoryDatabase(tmp_path / "db").iter_all())
    assert len(entries) == 1 and entries[0].time_ms == best
    assert entries[0].baselines["numpy"] == 20.0
    assert entries[0].provenance["trials"] >= 12 and entries[0].provenance["sampler"] == "tpe"


def test_a_rerun_resumes_and_keeps_a_better_stored_entry(tmp_path):
    Tuner(cfg(tmp_path, trials=6), say=lambda s: None).run()
    study_trials = len(optuna.load_study(study_name=Tuner(cfg(tmp_path)).name,
                                         storage=f"sqlite:///{tmp_path}/study.db").trials)
    msgs = []
    res = Tuner(cfg(tmp_path, trials=6), say=msgs.append).run()
    assert "resuming study with 6 trials done; 0 to go" in msgs
    assert res.trials == 6  # search trials with a verdict; the baselines do not count
    assert len(optuna.load_study(study_name=res.study_name, storage=f"sqlite:///{tmp_path}/study.db")
               .trials) == study_trials  # nothing new to do, nothing lost
    assert res.winner == "stored" and not res.written


def _run_cli(tmp_path, *extra):
    env = dict(os.environ, PYTHONPATH=ROOT)
    return subprocess.Popen([sys.executable, "-m", "pypto.cli.main", "tune", f"{TOY}:toy_scale",
                             "--shape", "R=32,C=64", "--storage", f"sqlite:///{tmp_path}/s.db",
                             "--db", str(tmp_path / "db"), "--baselines", "default", "--no-progress",
                             *extra], env=env, cwd=tmp_path, start_new_session=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def _completed(tmp_path):
    try:
        s = optuna.load_study(study_name=None, storage=f"sqlite:///{tmp_path}/s.db")
    except Exception:
        return [], None
    return [t for t in s.trials if t.state == optuna.trial.TrialState.COMPLETE
            and "baseline" not in t.user_attrs], s


@pytest.mark.slow
def test_sigkill_mid_study_loses_no_completed_trial_and_resumes(tmp_path):
    p = _run_cli(tmp_path, "--trials", "40")
    deadline = time.time() + 240
    while time.time() < deadline:
        done, _ = _completed(tmp_path)
        if len(done) >= 3:
            break
        time.sleep(0.5)
    os.killpg(p.pid, signal.SIGKILL)
    p.wait()
    before, _ = _completed(tmp_path)
    assert len(before) >= 3
    numbers = {t.number for t in before}
    p2 = _run_cli(tmp_path, "--trials", str(len(before) + 3))
    out, _ = p2.communicate(timeout=600)
    assert p2.returncode == 0, out.decode()[-2000:]
    after, study = _completed(tmp_path)
    assert numbers <= {t.number for t in after}
    running = [(t.number, t.user_attrs.get("owner"), t.datetime_start) for t in study.trials
               if t.state == optuna.trial.TrialState.RUNNING]
    assert not running, (running, out.decode()[-1500:])
    assert b"resuming study" in out


def test_crashing_and_wrong_candidates_cost_only_their_trial(tmp_path):
    faults = {1: "segfault", 2: "wrong", 3: "abort"}
    c = cfg(tmp_path, evaluator=Evaluator, trials=5, baselines=("default",),
            inject=lambda n: faults.get(n), shape={"R": 16, "C": 64}, run_timeout=60)
    res = Tuner(c, say=lambda s: None).run()
    study = optuna.load_study(study_name=Tuner(c).name, storage=c.storage)
    by_num = {t.number: t for t in study.trials}
    assert by_num[1].state == optuna.trial.TrialState.FAIL and "SIGSEGV" in by_num[1].user_attrs["error"]
    assert by_num[2].state == optuna.trial.TrialState.FAIL and by_num[2].user_attrs["status"] == "wrong"
    assert by_num[3].state == optuna.trial.TrialState.FAIL and "SIGABRT" in by_num[3].user_attrs["error"]
    assert by_num[4].state in (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED)
    stored = list(DirectoryDatabase(tmp_path / "db").iter_all())
    bad = {json.dumps(json.loads(by_num[n].user_attrs["schedule"]), sort_keys=True) for n in (1, 2, 3)}
    for e in stored:
        assert json.dumps(e.schedule.to_json(), sort_keys=True) not in bad
    assert res.table


def test_a_hanging_candidate_is_killed_at_its_deadline(tmp_path):
    with Evaluator(f"{TOY}:toy_scale", ("float32",), {}, {"R": 8, "C": 8}, "host",
                   compile_timeout=60, run_timeout=3) as ev:
        s = Schedule("toy_scale").to_json()
        t0 = time.monotonic()
        r = ev.evaluate(s, inject="hang")
        assert r.status == "timeout" and time.monotonic() - t0 < 60
        assert ev.evaluate(s).ok  # a fresh worker carries on


def test_tuning_a_gpu_target_without_a_device_is_a_clear_error(tmp_path):
    from pypto.errors import TargetError

    with pytest.raises(TargetError, match="no such device"):
        Tuner(cfg(tmp_path, target="cuda"))


def test_a_new_shape_starts_from_the_nearest_tuned_shape(tmp_path):
    Tuner(cfg(tmp_path, shape={"R": 64, "C": 256}, trials=8), say=lambda s: None).run()
    first = optuna.load_study(study_name=Tuner(cfg(tmp_path, shape={"R": 64, "C": 256})).name,
                              storage=f"sqlite:///{tmp_path}/study.db")
    best = min((t for t in first.trials if t.params and t.value is not None), key=lambda t: t.value)
    msgs = []
    Tuner(cfg(tmp_path, shape={"R": 128, "C": 256}, trials=4), say=msgs.append).run()
    assert any("seeded from the nearest tuned shape (C=256,R=64)" in m for m in msgs)
    # A brand-new study is not "resumed": its queued seeds are not trials done.
    assert not any("resuming" in m for m in msgs), msgs
    second = optuna.load_study(study_name=Tuner(cfg(tmp_path, shape={"R": 128, "C": 256})).name,
                               storage=f"sqlite:///{tmp_path}/study.db")
    searched = [t for t in second.trials if "baseline" not in t.user_attrs]
    assert searched[0].params == best.params


def test_candidates_compile_ahead_of_time_into_a_scratch_cache(tmp_path, monkeypatch):
    # Candidates run as users' calls do (ahead of time, on PyPTO's thread pool), compiled into a
    # folder of the evaluator's own that shutdown removes: the user's cache gets none of them.
    from pathlib import Path

    user_cache = tmp_path / "cache"
    monkeypatch.setenv("PYPTO_CACHE_DIR", str(user_cache))
    s = Schedule("toy_scale").to_json()
    with Evaluator(f"{TOY}:toy_scale", ("float32",), {}, {"R": 8, "C": 8}, "host") as ev:
        assert ev.evaluate(s).ok
        scratch = Path(ev.scratch)
        assert list(scratch.rglob("kernel.so")), "the candidate was not compiled ahead of time"
        assert (scratch.stat().st_mode & 0o077) == 0      # private, as the cache's trust rules ask
    assert not scratch.exists()
    assert not list(user_cache.rglob("kernel.so"))
    # With the cache off, users' calls are JIT-compiled, and so are the candidates.
    monkeypatch.setenv("PYPTO_CACHE_DIR", "off")
    with Evaluator(f"{TOY}:toy_scale", ("float32",), {}, {"R": 8, "C": 8}, "host") as ev:
        assert ev.evaluate(s).ok and ev.scratch is None


def test_a_seed_from_a_larger_shape_is_projected_onto_the_new_space(tmp_path):
    # At C=256 a split or vector factor of 32 is a choice; at C=16 it is not, and enqueuing it
    # as it was made Optuna refuse the trial ("'32' not in (16,)") and the run die.
    Tuner(cfg(tmp_path, shape={"R": 64, "C": 256}, trials=8), say=lambda s: None).run()
    msgs = []
    res = Tuner(cfg(tmp_path, shape={"R": 8, "C": 16}, trials=3), say=msgs.append).run()
    assert any("seeded from the nearest tuned shape" in m for m in msgs), msgs
    assert res.winner
    second = optuna.load_study(study_name=Tuner(cfg(tmp_path, shape={"R": 8, "C": 16})).name,
                               storage=f"sqlite:///{tmp_path}/study.db")
    assert [t for t in second.trials if t.params and t.value is not None]
