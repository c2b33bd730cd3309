"""``pypto tune`` with a budget of nothing (``--timeout 0s``, ``--trials 0``) ran no search and
stored the default schedule as a tuned result; the budget is refused before anything runs."""

import os

import pytest
from click.testing import CliRunner

from pypto.cli.main import cli
from pypto.cli.tune import parse_duration
from pypto.errors import ParamError


@pytest.mark.parametrize("text", ["0", "0s", "0.0m", "0h", " 0 ", "-1", "-5s", "1e3", "abc", ""])
def test_a_zero_negative_or_malformed_timeout_is_refused(text):
    with pytest.raises(ParamError, match="--timeout"):
        parse_duration(text)


@pytest.mark.parametrize("text, secs", [("90", 90.0), ("90s", 90.0), ("1.5m", 90.0), ("1h", 3600.0)])
def test_a_positive_timeout_is_read(text, secs):
    assert parse_duration(text) == secs


@pytest.mark.parametrize("budget", [["--timeout", "0s"], ["--timeout", "0"], ["--trials", "0"],
                                    ["--trials", "-3"]])
def test_tune_refuses_an_empty_budget_before_anything_runs(tmp_path, monkeypatch, budget):
    monkeypatch.chdir(tmp_path)
    db = tmp_path / "db"
    r = CliRunner().invoke(cli, ["tune", "add", "--shape", "R=8,C=8", "--db", str(db),
                                 "--storage", f"sqlite:///{tmp_path}/s.db", "--no-progress",
                                 *budget])
    assert r.exit_code == 2, r.output
    assert budget[0] in r.stderr
    assert not db.exists() and not (tmp_path / "s.db").exists()
    assert os.listdir(tmp_path) == []
