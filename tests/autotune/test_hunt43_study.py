"""``pypto study`` over a storage that also holds another tool's studies (multi-objective or
maximizing): those are passed over; a multi-objective one crashed the command with a traceback
('This attribute is not available during multi-objective optimization')."""

import optuna
from click.testing import CliRunner

from pypto.cli.main import cli


def test_studies_that_are_not_a_tuners_are_passed_over(tmp_path):
    url = f"sqlite:///{tmp_path / 'pypto_tune.db'}"
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    mine = optuna.create_study(study_name="add|float32/float32|C=4,R=4||x86-64|0", storage=url)
    mine.optimize(lambda t: t.suggest_float("x", 1, 2), n_trials=2)
    optuna.create_study(study_name="multi", storage=url, directions=["minimize", "minimize"]
                        ).optimize(lambda t: (t.suggest_float("x", 0, 1), 1.0), n_trials=2)
    optuna.create_study(study_name="score", storage=url, direction="maximize"
                        ).optimize(lambda t: t.suggest_float("x", 0, 1), n_trials=2)
    r = CliRunner().invoke(cli, ["study", "--storage", str(tmp_path / "pypto_tune.db")])
    assert r.exit_code == 0, r.output
    assert "add C=4,R=4" in r.stdout and "multi" not in r.stdout and "score" not in r.stdout
    r = CliRunner().invoke(cli, ["study", "--storage", str(tmp_path / "pypto_tune.db"), "multi"])
    assert r.exit_code == 1 and "no study matched" in r.output and r.exception is not None
    assert isinstance(r.exception, SystemExit)
