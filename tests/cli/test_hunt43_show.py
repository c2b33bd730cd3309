"""``pypto db show`` of a program's entries (g_<hash>, as ``pypto db list`` names them) and of an
entry that does not apply: shown, not 'no op named ...' or a stop at the first bad entry."""

import os
import sys

from click.testing import CliRunner

import pypto
from pypto.autodiff.api import backward_program
from pypto.cli.main import cli
from pypto.compiler.lower import build, fingerprint
from pypto.database import DirectoryDatabase, Entry, Key
from pypto.frontend.graph import fused_schedule
from pypto.frontend.serial import write_program
from pypto.schedule.schedule import Schedule

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "database"))
from dbhelpers import D, family, matmul_entry  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOY = os.path.join(ROOT, "tests", "toyops.py")


def _program_db(root):
    op = pypto.get_op("softmax")
    g = backward_program(op, {"R": 4, "C": 8}, op.dtypes[0])
    built = build(g, g.dtypes[0], {})
    fp = fingerprint(built)
    key = Key.make(g.name, g.dtypes[0], {d: g.call_dims[d] for d in g.input_dims}, {}, family(), fp)
    DirectoryDatabase(root).commit([Entry(key=key, time_ms=1.0, provenance={"method": "test"},
                                          schedule=Schedule(g.name, tuple(fused_schedule(built, g.call_dims, 8)), fp))])
    write_program(root, g.graph, g.name)
    return g.name


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
