"""Tuning for a CPU this machine cannot run is refused before any worker starts: every candidate
used to fail in the worker (pages of linker errors for arm, SIGILL for a missing instruction set)
and the run ended with 'no schedule could be measured'."""

import halide as hl
import pytest
from click.testing import CliRunner

from autotune import tuner as tuner_mod
from autotune.tuner import TuneConfig, Tuner
from pypto.cli.main import cli
from pypto.compiler import targets
from pypto.errors import TargetError


def _cfg(tmp_path, target):
    return TuneConfig(op="add", shape={"R": 4, "C": 4}, dtypes=None, params={}, target=target,
                      trials=1, db=str(tmp_path / "db"), storage=f"sqlite:///{tmp_path / 's.db'}")


@pytest.mark.parametrize("target", ["arm-64-linux", "x86-32-linux", "wasm"])
def test_another_architecture_is_refused(tmp_path, target):
    with pytest.raises(TargetError, match=f"cannot measure on {target}.*pypto build --target {target}"):
        Tuner(_cfg(tmp_path, target))


def test_an_instruction_set_the_cpu_lacks_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(targets, "host", lambda: hl.Target("x86-64-linux-avx-avx2-f16c-fma-sse41"))
    with pytest.raises(TargetError, match="lacks avx512"):
        Tuner(_cfg(tmp_path, "x86-64-linux-avx-avx2-avx512-f16c-fma-sse41"))
    Tuner(_cfg(tmp_path, "x86-64-linux-avx-avx2-f16c-fma-sse41"))      # what it has is fine


def test_the_command_says_so_in_one_line_and_starts_no_worker(tmp_path, monkeypatch):
    started = []
    monkeypatch.setattr(tuner_mod.Tuner, "run", lambda self: started.append(1))
    r = CliRunner().invoke(cli, ["tune", "add", "--shape", "R=4,C=4", "--target", "arm-64-linux",
                                 "--trials", "1", "--db", str(tmp_path / "db"),
                                 "--storage", f"sqlite:///{tmp_path / 's.db'}"])
    assert r.exit_code == 2 and "cannot measure on arm-64-linux" in r.stderr
    assert started == [] and "Traceback" not in r.output
