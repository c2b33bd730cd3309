"""``pypto tune --suite``: a suite file is data; its items name registered ops and run no code."""

import json

import pytest
from click.testing import CliRunner

from pypto.cli.main import cli
from pypto.cli.tune import read_suite
from pypto.errors import ParamError

PLANTED = """
import pathlib
pathlib.Path({marker!r}).write_text("ran")
import pypto
"""


@pytest.mark.parametrize("form", ["file", "module"])
def test_a_suite_naming_an_op_file_or_module_is_refused_and_runs_nothing(tmp_path, monkeypatch, form):
    marker = tmp_path / "marker"
    (tmp_path / "planted.py").write_text(PLANTED.format(marker=str(marker)))
    monkeypatch.syspath_prepend(str(tmp_path))
    op = f"{tmp_path}/planted.py:row_scale" if form == "file" else "planted:row_scale"
    suite = tmp_path / "suite.json"
    suite.write_text(json.dumps([{"op": "softmax", "shape": "R=4,C=8"}, {"op": op, "shape": "R=4"}]))
    r = CliRunner().invoke(cli, ["tune", "--suite", str(suite), "--db", str(tmp_path / "db"),
                                 "--storage", f"sqlite:///{tmp_path}/s.db", "--no-progress"])
    assert r.exit_code != 0
    assert "item #1: op" in r.output and "is not a registered op" in r.output
    assert "pypto tune FILE.py:NAME" in r.output  # says what to do instead
    assert not marker.exists(), "the suite ran code from the file it named"


def test_a_suite_of_registered_ops_is_read(tmp_path):
    suite = tmp_path / "suite.json"
    suite.write_text(json.dumps({"ops": [{"op": "softmax", "shape": "R=4,C=8"}]}))
    assert read_suite(str(suite))[0]["op"] == "softmax"
    suite.write_text(json.dumps([{"op": "no_such_op", "shape": "R=4"}]))
    with pytest.raises(ParamError, match="'no_such_op' is not a registered op"):
        read_suite(str(suite))
