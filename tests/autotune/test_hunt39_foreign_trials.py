"""A study is shared storage: a completed trial without a recorded schedule (added by another tool
or damaged) made a resumed run fail with KeyError: 'schedule' in the incumbent and final steps.
Such trials are now left out with a note, and the run finishes from the others."""

import optuna

from autotune.tuner import Tuner, trial_schedule
from test_tuner import cfg


def test_a_resumed_study_with_foreign_trials_still_finishes(tmp_path):
    c = cfg(tmp_path, trials=3, baselines=("default",))
    said = []
    tuner = Tuner(c, say=said.append)
    study = optuna.create_study(study_name=tuner.name, storage=c.storage, direction="minimize")
    for attrs in ({}, {"schedule": "{not json"}, {"schedule": "[1, 2]"}):
        t = study.ask()
        for k, v in attrs.items():
            t.set_user_attr(k, v)
        study.tell(t, 1e-6)  # better than anything real: it would be the incumbent
    res = tuner.run()
    assert res.winner in res.table and res.table[res.winner]["median_ms"] > 1e-3
    assert any("left out trial(s) [0, 1, 2]" in s for s in said)


def test_trial_schedule_reads_only_a_json_object():
    class T:
        number = 7

        def __init__(self, attrs):
            self.user_attrs = attrs

    assert trial_schedule(T({"schedule": '{"format": 1}'})) == {"format": 1}
    for attrs in ({}, {"schedule": 3}, {"schedule": "[" * 5000}, {"schedule": "NaN"}):
        assert trial_schedule(T(attrs)) is None
