"""``pypto build``: an empty output folder is refused before anything is written; a target that
cannot build the any-shape library is an error naming op, shape, target and what to do."""

import os

import pytest
from click.testing import CliRunner

from pypto.cli.main import cli


@pytest.mark.parametrize("out", ["", " ", "\t"])
@pytest.mark.parametrize("all_shapes", [False, True])
def test_an_empty_output_folder_is_refused(tmp_path, monkeypatch, out, all_shapes):
    monkeypatch.chdir(tmp_path)
    args = ["build", "--op", "add", "-o", out] + (["--all-shapes"] if all_shapes else [])
    r = CliRunner().invoke(cli, args)
    assert r.exit_code == 2, r.output
    assert "-o" in r.stderr and "empty" in r.stderr
    assert os.listdir(tmp_path) == []     # nothing was built into the current folder


def test_cuda_all_shapes_for_matmul_names_op_shape_target_and_what_to_do(tmp_path, monkeypatch):
    monkeypatch.setenv("PYPTO_NO_SHIPPED_SCHEDULES", "1")
    monkeypatch.setenv("PYPTO_SCHEDULES", str(tmp_path / "empty_db"))
    monkeypatch.setenv("PYPTO_USER_SCHEDULES", "off")
    r = CliRunner().invoke(cli, ["build", "--op", "matmul", "--target", "cuda", "--all-shapes",
                                 "-o", str(tmp_path / "out")])
    assert r.exit_code == 2, r.output
    err = r.stderr
    assert "matmul" in err and "cuda" in err and "any shape" in err
    assert "--shape" in err                       # what to do: build for fixed shapes
    assert not err.lstrip("Error: ").startswith("Error")   # not Halide's raw "Error: ..." text
    assert "Error: Was unable" not in err
    assert not (tmp_path / "out").exists()


def _build(tmp_path, *args):
    return CliRunner().invoke(cli, ["build", "--op", "add", "--shape", "R=4,C=4",
                                    "-o", str(tmp_path / "out"), *args])


@pytest.mark.parametrize("args, says", [
    (["--format", ""], "no output format"),          # built a manifest and no library
    (["--format", " , "], "no output format"),
    (["--name", ""], "--name"),                       # fell back to pypto_add without a word
    (["--target", "cuda,x86-64-avx2"], "name the CPU target first"),   # Halide's raw text
    (["--target", "arm-64-linux,x86-64-avx2"], "architecture"),       # Halide's raw text
])
def test_a_build_that_cannot_give_what_was_asked_is_refused_first(tmp_path, args, says):
    r = _build(tmp_path, *args)
    assert r.exit_code == 2, r.output
    assert says in r.stderr and "Error: " not in r.stderr.replace("Error: Invalid value", "")
    assert not (tmp_path / "out").exists()


def test_a_cpu_target_first_then_a_gpu_one_still_builds(tmp_path):
    r = _build(tmp_path, "--target", "x86-64-avx2,cuda")
    assert r.exit_code == 0, r.output
