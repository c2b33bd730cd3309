"""An output file option naming an existing folder is refused before the run: ``pypto tune
--json DIR`` tuned for minutes, then died with IsADirectoryError (a traceback, the JSON lost)."""

import pytest
from click.testing import CliRunner

from pypto.cli.main import cli


@pytest.mark.parametrize("args", [
    ["tune", "add", "--shape", "R=4,C=4", "--trials", "1", "--json"],
    ["profile", "add", "--shape", "R=4,C=4", "--json"],
    ["profile", "add", "--shape", "R=4,C=4", "--stmt-html"],
    ["study", "--from-json", __file__, "--json"],
    ["bench", "add", "--shape", "R=4,C=4", "--plot"],
])
def test_an_output_that_is_a_folder_is_refused_up_front(tmp_path, args, monkeypatch):
    from autotune import tuner

    monkeypatch.setattr(tuner.Tuner, "run", lambda self: pytest.fail("the run started"))
    r = CliRunner().invoke(cli, args + [str(tmp_path)])
    assert r.exit_code == 2, r.output
    assert "is a folder" in r.output or "is a directory" in r.output, r.output
    assert r.exception is None or isinstance(r.exception, SystemExit)
