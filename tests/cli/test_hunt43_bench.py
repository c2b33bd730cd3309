"""``pypto bench``: a chart that cannot be written is refused before anything is measured, and the
options that render the suite's report are refused by the modes that make reports of their own."""

import pytest
from click.testing import CliRunner

from pypto.cli import bench as bench_cli
from pypto.cli.main import cli


@pytest.fixture
def measured(monkeypatch):
    """Records whether any measuring started (it must not, for a refused command)."""
    calls = []
    monkeypatch.setattr(bench_cli, "_measure", lambda *a, **k: calls.append("suite"))
    monkeypatch.setattr(bench_cli, "_overhead", lambda *a, **k: calls.append("overhead"))
    monkeypatch.setattr(bench_cli, "_all_ops", lambda *a, **k: calls.append("all-ops"))
    return calls


@pytest.mark.parametrize("flag", ["--plot", "--roofline-plot"])
def test_a_chart_in_a_missing_folder_is_refused_before_measuring(tmp_path, measured, flag):
    r = CliRunner().invoke(cli, ["bench", "add", "--shape", "R=4,C=8", flag,
                                 str(tmp_path / "nope" / "c.png")])
    assert r.exit_code == 2 and "does not exist" in r.output and flag in r.output
    assert measured == []


@pytest.mark.parametrize("mode", ["--overhead", "--all-ops"])
@pytest.mark.parametrize("flag", ["--plot", "--roofline-plot", "--readme", "--from-json"])
def test_report_options_are_refused_by_modes_that_ignore_them(tmp_path, measured, mode, flag):
    given = tmp_path / "f.md"
    given.write_text("x")
    r = CliRunner().invoke(cli, ["bench", mode, flag, str(given)])
    assert r.exit_code == 2, r.output
    assert mode in r.output and flag in r.output
    assert measured == []
