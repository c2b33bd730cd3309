"""Op files named on the command line (FILE.py:NAME) that do not load: one line, not a traceback."""

import os
import subprocess
import sys

import pytest
from click.testing import CliRunner

from pypto.cli.main import cli

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _pypto(*args, cwd):
    return subprocess.run([sys.executable, "-m", "pypto.cli.main", *args], cwd=cwd,
                          env=dict(os.environ, PYTHONPATH=ROOT), capture_output=True, text=True)


def test_an_op_file_calling_sys_exit_with_a_message_exits_1_saying_it(tmp_path):
    (tmp_path / "bye.py").write_text("import sys\nsys.exit('this file is not for pypto')\n")
    r = _pypto("ops", "show", "bye.py:f", cwd=tmp_path)
    assert r.returncode == 1 and r.stderr.strip() == "this file is not for pypto", r.stderr


def test_a_file_that_is_not_python_is_one_line(tmp_path):
    (tmp_path / "notes.txt").write_text("hello\n")
    r = CliRunner().invoke(cli, ["ops", "show", f"{tmp_path / 'notes.txt'}:foo"])
    assert not isinstance(r.exception, AttributeError)
    assert r.exit_code == 2 and "notes.txt" in r.output


def test_an_op_file_with_a_syntax_error_is_one_line(tmp_path):
    (tmp_path / "broken.py").write_text("def f(:\n    pass\n")
    r = CliRunner().invoke(cli, ["ops", "show", f"{tmp_path / 'broken.py'}:f"])
    assert r.exit_code == 2 and "broken.py" in r.output and not isinstance(r.exception, SyntaxError)
