"""``pypto build``: options are honoured or refused, never dropped; a function name that no C
program could call is refused before anything is compiled."""

import pytest
from click.testing import CliRunner

from pypto.cli.main import cli


def _build(tmp_path, *args):
    return CliRunner().invoke(cli, ["build", "--op", "add", "-o", str(tmp_path / "out"), *args])


@pytest.mark.parametrize("extra, named", [
    (["--format", "python"], "--format"),
    (["--format", "static,shared"], "--format"),
    (["--shape", "R=4,C=4"], "--shape"),
    (["--schedule", __file__], "--schedule"),
])
def test_all_shapes_refuses_the_options_it_cannot_honour(tmp_path, extra, named):
    r = _build(tmp_path, "--all-shapes", *extra)
    assert r.exit_code == 2 and named in r.output and "--all-shapes" in r.output
    assert not (tmp_path / "out").exists()


def test_all_shapes_with_require_tuned_fails_without_a_tuned_shape(tmp_path, monkeypatch):
    monkeypatch.setenv("PYPTO_NO_SHIPPED_SCHEDULES", "1")
    monkeypatch.setenv("PYPTO_SCHEDULES", str(tmp_path / "empty_db"))
    monkeypatch.setenv("PYPTO_USER_SCHEDULES", "off")
    r = _build(tmp_path, "--all-shapes", "--require-tuned")
    assert r.exit_code == 2 and "--require-tuned" in r.stderr and "pypto tune add" in r.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("all_shapes", [False, True])
@pytest.mark.parametrize("name, says", [
    ("bad name;", "not a C identifier"),
    ("\u00e9t\u00e9", "not a C identifier"),
    ("int", "keyword"),
    ("class", "keyword"),
    ("halide_malloc", "Halide's runtime"),
])
def test_a_function_name_no_c_program_could_call_is_refused(tmp_path, name, says, all_shapes):
    args = ["--all-shapes"] if all_shapes else ["--shape", "R=4,C=4"]
    r = _build(tmp_path, "--name", name, *args)
    assert r.exit_code == 2 and says in r.stderr and "--name" in r.stderr, r.output
    assert r.stderr.count("\n") == 1            # one line, not the C compiler's errors
    assert not (tmp_path / "out").exists()


def test_a_plain_name_still_builds(tmp_path):
    r = _build(tmp_path, "--name", "my_add2", "--shape", "R=4,C=4")
    assert r.exit_code == 0, r.output
    assert (tmp_path / "out" / "my_add2.a").is_file() and (tmp_path / "out" / "my_add2.h").is_file()


def test_all_shapes_passes_over_an_entry_whose_shape_is_not_the_ops(tmp_path, monkeypatch):
    import dataclasses
    import os
    import sys

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                    "database"))
    from dbhelpers import matmul_entry

    from pypto.database import DirectoryDatabase

    good = matmul_entry(8, 8, 8)
    odd = matmul_entry(16, 16, 16)
    odd = dataclasses.replace(odd, key=dataclasses.replace(odd.key, shape=odd.key.shape + (("Z", 2),)))
    DirectoryDatabase(tmp_path / "db").commit([good, odd])
    monkeypatch.setenv("PYPTO_NO_SHIPPED_SCHEDULES", "1")
    monkeypatch.setenv("PYPTO_USER_SCHEDULES", "off")
    monkeypatch.setenv("PYPTO_SCHEDULES", str(tmp_path / "db"))
    toy = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "toyops.py")
    r = CliRunner().invoke(cli, ["build", "--op", f"{toy}:toy_matmul", "--all-shapes",
                                 "-o", str(tmp_path / "out")])
    assert r.exit_code == 0, r.output
    assert "Z=2" in r.stderr and "passed over" in r.stderr
    assert "with 3 variant(s)" in r.stdout             # the good entry and the two defaults
