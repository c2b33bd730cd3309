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


def test_db_revalidate_dry_run_reports_and_writes_nothing(tmp_path):
    from pypto.compiler import targets
    from pypto.compiler.lower import build, fingerprint
    from pypto.database import DirectoryDatabase, Entry, Key
    from pypto.schedule.directives import Directive
    from pypto.schedule.schedule import Schedule
    from toyops import toy_scale

    fam = targets.family(targets.host())
    fp = fingerprint(build(toy_scale, ("float32",), {}))
    # A 16-wide unguarded vector cannot run at its own C = 8 (judged without timing), and an
    # entry for an older algorithm (stale: left for `db prune`).
    wide = (Directive.make("vectorize", "out", var="c", factor=16),)
    entries = [Entry(key=Key.make("toy_scale", ("float32",), {"R": 4, "C": c}, {}, fam, f),
                     schedule=Schedule("toy_scale", wide, f), time_ms=0.01)
               for c, f in ((8, fp), (64, "e" * 16))]
    db = DirectoryDatabase(tmp_path)
    db.commit(entries)
    path = db.path("toy_scale", fam)
    before = path.read_bytes()
    r = run("db", "revalidate", "--op", f"{TOY}:toy_scale", "--db", str(tmp_path), "--dry-run")
    assert r.exit_code == 0, r.output
    out = r.stdout.splitlines()
    assert out[0].split() == ["op", "shape", "dtype", "entry", "ms", "default", "ms", "ratio",
                              "verdict"]
    assert out[1].split() == ["toy_scale", "C=8,R=4", "float32", "-", "-", "-", "would", "drop",
                              "(failed)"]
    assert out[2].split() == ["toy_scale", "C=64,R=4", "float32", "-", "-", "-", "stale"]
    assert any("failed at run time" in line for line in out)
    assert out[-1] == "2 entries, 1 lost; dry run: nothing written"
    assert "[1/2] toy_scale C=8,R=4 [float32]" in r.stderr     # progress goes to stderr
    assert path.read_bytes() == before
    r = run("db", "revalidate", "--op", f"{TOY}:toy_scale", "--db", str(tmp_path), "--json")
    assert r.exit_code == 0, r.output
    rep = json.loads(r.stdout)
    assert [(e["shape"], e["verdict"], e["action"], e["written"]) for e in rep["entries"]] == [
        ({"C": 8, "R": 4}, "failed", "drop", True), ({"C": 64, "R": 4}, "stale", None, False)]
    left = DirectoryDatabase(tmp_path).entries("toy_scale", fam)
    assert [e.key.shape_dict["C"] for e in left] == [64]


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


@pytest.mark.parametrize("args, message", [
    (("profile", "softmax", "--shape", "R=200000,C=100000"),
     r"softmax: inputs of .* would take 74.5 GiB"),
    (("bench", "softmax", "--shape", "R=2000000000,C=2000000000"), r"softmax: inputs of .* GiB"),
    (("bench", "softmax", "--shape", "R=99999999999,C=8"),
     r"R=99999999999: extents must be at most 2147483647"),
    (("tune", "softmax", "--shape", "R=200000,C=100000", "--trials", "1"),
     r"softmax: inputs of .* would take 74.5 GiB"),
    (("profile", "softmax", "--shape", "R=8,C=8", "--target", "x86-64-linux-avx512-sve2"),
     r"target 'x86-64-linux-avx512-sve2' is not one Halide can build for: .*sve2 is "
     r"incompatible"),
])
def test_an_impossible_shape_or_target_is_one_line_not_a_traceback(args, message, tmp_path,
                                                                   monkeypatch):
    import re

    monkeypatch.setenv("PYPTO_USER_SCHEDULES", str(tmp_path / "db"))
    r = CliRunner().invoke(cli, list(args) + (["--storage", f"sqlite:///{tmp_path}/s.db"]
                                              if args[0] == "tune" else []))
    assert r.exit_code == 2, (r.output, r.exception)
    assert re.search(message, r.output.splitlines()[-1]), r.output


@pytest.mark.parametrize("cmd", ["bench", "profile", "tune"])
def test_a_json_path_that_cannot_be_written_is_refused_before_the_run(cmd, tmp_path):
    r = CliRunner().invoke(cli, [cmd, "softmax", "--shape", "R=8,C=8", "--json",
                                 str(tmp_path / "missing" / "x.json")])
    assert r.exit_code == 2 and "does not exist; create it first" in r.output, r.output


def test_bench_from_a_file_that_is_not_a_report_is_one_line(tmp_path):
    for text in ("[]", '{"a": '):
        (tmp_path / "r.json").write_text(text)
        r = CliRunner().invoke(cli, ["bench", "--from-json", str(tmp_path / "r.json")])
        assert r.exit_code == 1 and "is not a pypto bench report" in r.output, r.output


def test_another_architecture_is_refused_where_this_machine_must_link_or_run(tmp_path):
    r = CliRunner().invoke(cli, ["profile", "softmax", "--shape", "R=8,C=8", "--target",
                                 "arm-64-linux"])
    assert r.exit_code == 2 and "cannot run arm-64-linux" in r.output, r.output
    r = CliRunner().invoke(cli, ["build", "--op", "softmax", "--target", "arm-64-linux",
                                 "--format", "shared", "-o", str(tmp_path / "out")])
    assert r.exit_code == 2, r.output
    assert "cannot link for arm-64-linux" in r.output and "--format static" in r.output
    assert len(r.output) < 600                             # not pages of linker errors


@pytest.mark.parametrize("args, message", [
    (("ops", "--category", "nosuch"), r"no category 'nosuch'; the categories are .*linalg"),
    (("tune", "softmax", "--trials", "-1"), r"-1 trials is no search; give at least 1"),
    (("tune", "softmax", "--n-jobs", "0"), r"0 is not in the range x>=1"),
    (("profile", "softmax", "--shape", "R=8,R=9,C=8"), r"shape names R twice"),
    (("build", "--op", "softmax", "--target", "host,host"), r"are the same target"),
])
def test_arguments_that_mean_nothing_are_refused(args, message, tmp_path):
    import re

    extra = ["-o", str(tmp_path / "out")] if args[0] == "build" else []
    r = CliRunner().invoke(cli, list(args) + extra)
    assert r.exit_code == 2, (r.output, r.exception)
    assert re.search(message, r.output), r.output
