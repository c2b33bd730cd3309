"""The command line: thin over the library, clear errors, non-zero exits on problems."""

import json
import os

import pytest
from click.testing import CliRunner

from pypto.cli.main import cli

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOY = os.path.join(ROOT, "tests", "toyops.py")


def run(*args):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def test_ops_lists_by_category():
    r = run("ops")
    assert r.exit_code == 0
    assert "linalg" in r.output and "matmul" in r.output
    n = int(r.output.strip().splitlines()[-1].split()[0])
    assert n >= 50


def test_ops_show_prints_signature_reference_and_loop_nest():
    r = run("ops", "show", f"{TOY}:toy_matmul", "--shape", "M=16,K=8,N=24")
    assert r.exit_code == 0, r.output
    assert "toy_matmul" in r.output and "np.matmul" in r.output
    assert "Default schedule" in r.output and "Loop nest" in r.output
    assert "produce out" in r.output or "for" in r.output


def test_unknown_op_is_one_line_and_exit_2():
    r = run("ops", "show", "no_such_op")
    assert r.exit_code == 2
    assert r.output.startswith("error: no op named 'no_such_op'")


def test_db_validate_reports_each_problem_and_exits_nonzero(tmp_path):
    fam = tmp_path / "x86-64-avx2"
    fam.mkdir()
    (fam / "toy_scale.json").write_text("{bad json")
    r = run("db", "validate", str(tmp_path))
    assert r.exit_code == 1
    assert "toy_scale.json" in r.output and "invalid JSON" in r.output
    (fam / "toy_scale.json").unlink()
    r = run("db", "validate", str(tmp_path))
    assert r.exit_code == 0 and r.output.startswith("ok")


def test_db_import_autoschedule_show_diff_merge(tmp_path):
    db = tmp_path / "db"
    r = run("db", "import-autoschedule", f"{TOY}:toy_matmul", "--shape", "M=32,K=16,N=32",
            "--autoscheduler", "mullapudi2016", "--db", str(db), "--no-measure")
    assert r.exit_code == 0, r.output
    assert "mullapudi2016: stored" in r.output
    r = run("db", "list", "--db", str(db))
    assert "toy_matmul" in r.output and "autoscheduler:mullapudi2016" in r.output
    r = run("db", "show", f"{TOY}:toy_matmul", "--db", str(db), "--as-python")
    assert r.exit_code == 0 and "acc" in r.output and ".vectorize(" in r.output
    r = run("db", "merge", str(db), "-o", str(tmp_path / "merged"))
    assert r.exit_code == 0
    r = run("db", "diff", str(db), str(tmp_path / "merged"))
    assert "no differences" in r.output
    r = run("db", "show", f"{TOY}:toy_matmul", "--db", str(db))
    body = r.output[r.output.index("\n{") + 1:]
    assert json.loads(body)["op"] == "toy_matmul"


def test_tune_usage_errors_are_clear():
    r = run("tune")
    assert r.exit_code != 0 and "give OP" in r.output
    r = run("tune", "matmul", "--shape", "M=4")
    assert r.exit_code == 2 and "missing" in r.output


@pytest.mark.parametrize("text, secs", [("90", 90), ("90s", 90), ("15m", 900), ("1h", 3600)])
def test_durations(text, secs):
    from pypto.cli.tune import parse_duration

    assert parse_duration(text) == secs
