"""``pypto db show`` of a program's entries (g_<hash>, as ``pypto db list`` names them) and of an
entry that does not apply: shown, not 'no op named ...' or a stop at the first bad entry."""

import os
import sys

from click.testing import CliRunner

from pypto.cli.main import cli
from pypto.database import DirectoryDatabase

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "database"))
from dbhelpers import D, family, matmul_entry, program_db  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOY = os.path.join(ROOT, "tests", "toyops.py")


def _program_db(root):
    return program_db(root)


def test_a_program_entry_is_shown_and_printed_as_python(tmp_path):
    name = _program_db(tmp_path)
    r = CliRunner().invoke(cli, ["db", "show", name, "--db", str(tmp_path)])
    assert r.exit_code == 0, r.output
    assert f"# {name}[" in r.stdout and '"directives"' in r.stdout
    r = CliRunner().invoke(cli, ["db", "show", name, "--db", str(tmp_path), "--as-python"])
    assert r.exit_code == 0, r.output
    assert "compute_root()" in r.stdout or ".split(" in r.stdout


def test_an_entry_that_does_not_apply_is_named_and_the_others_still_print(tmp_path):
    db = DirectoryDatabase(tmp_path)
    db.commit([matmul_entry(8, 8, 8, directives=(D("compute_root", "no_such_func"),)),
               matmul_entry(16, 16, 16)])
    r = CliRunner().invoke(cli, ["db", "show", f"{TOY}:toy_matmul", "--db", str(tmp_path),
                                 "--as-python"])
    assert r.exit_code == 1
    assert "cannot print" in r.stderr and "no_such_func" in r.stderr and "M=8" in r.stderr
    assert "M=16" in r.stdout and "out.parallel(mo)" in r.stdout


def test_show_takes_dtype_as_the_other_commands_do(tmp_path):
    DirectoryDatabase(tmp_path).commit([matmul_entry(8, 8, 8)])
    for given, shown in (("float32", True), ("float32,float32", True), ("float64", False),
                         ("float32,float64", False)):
        r = CliRunner().invoke(cli, ["db", "show", f"{TOY}:toy_matmul", "--db", str(tmp_path),
                                     "--dtype", given])
        assert (r.exit_code == 0 and "M=8" in r.stdout) == shown, (given, r.output)
