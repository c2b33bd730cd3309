"""A stored schedule that Halide refuses to compile falls back to the default, like one that fails
at run time; an explicit schedule still raises its own error after such a fallback."""

import shutil

import numpy as np
import pytest

import pypto
from helpers import assert_close
from pypto.compiler import targets
from pypto.compiler.jit import clear_memory_cache, get_kernel
from pypto.compiler.lower import build, fingerprint
from pypto.database import DirectoryDatabase, Entry, Key, add_path, remove_path
from pypto.errors import CompileError, ScheduleError
from pypto.runtime import observe
from pypto.schedule.defaults import default_schedule
from pypto.schedule.schedule import Schedule

STORED = {"R": 64, "C": 256}
OP = pypto.get_op("softmax")


def _stored_schedule(extra: dict | None) -> Schedule:
    """Softmax's default schedule at STORED (plus ``extra``), tagged with the fingerprint."""
    built = build(OP, ("float32",), {})
    s = default_schedule(built, STORED, targets.host()).to_json()
    if extra is not None:
        s["directives"].append(extra)
    return Schedule.from_json(s, "test").with_fingerprint(fingerprint(built))


# Halide refuses this at compile time: rowsum would be stored outside the parallel loop over rows
# but computed inside it, a race.
REFUSED = {"op": "store_root", "func": "rowsum", "args": {}}
# This one names a variable rowsum does not have: a ScheduleError when applied.
UNKNOWN_VAR = {"op": "vectorize", "func": "rowsum", "args": {"var": "nope"}}


@pytest.fixture
def stored(tmp_path, monkeypatch):
    """Stores a schedule for softmax at STORED in a database searched alone; returns it."""
    monkeypatch.setenv("PYPTO_NO_SHIPPED_SCHEDULES", "1")
    monkeypatch.setenv("PYPTO_USER_SCHEDULES", "off")
    root = tmp_path / "db"

    def put(extra: dict | None) -> Schedule:
        s = _stored_schedule(extra)
        key = Key.make("softmax", ("float32",), STORED, {}, targets.family(targets.host()),
                       s.fingerprint)
        DirectoryDatabase(root).commit([Entry(key=key, schedule=s, time_ms=1.0)])
        return s

    add_path(root)
    clear_memory_cache()
    yield put
    remove_path(root)
    clear_memory_cache()


def _softmax_ref(x):
    e = np.exp(x - x.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


def _call(dims):
    x = np.random.default_rng(0).standard_normal((dims["R"], dims["C"])).astype(np.float32)
    with observe() as calls:
        y = pypto.ops.softmax(x)
    assert_close(y, _softmax_ref(x))
    return calls[-1][-1]


@pytest.mark.parametrize("cache", ["off", pytest.param("disk", marks=pytest.mark.skipif(
    not shutil.which("c++"), reason="needs a C++ compiler"))])
def test_a_stored_schedule_halide_refuses_falls_back_at_its_exact_shape(stored, cache, tmp_path,
                                                                         monkeypatch):
    monkeypatch.setenv("PYPTO_CACHE_DIR", "off" if cache == "off" else str(tmp_path / "cache"))
    s = stored(REFUSED)
    with pytest.raises(CompileError, match="stored outside"):  # the entry really is refused
        get_kernel(OP, ("float32",), {}, STORED, schedule=s)
    k = _call(STORED)
    assert k.source.startswith("default") and "database" in k.source and "exact" in k.source
    assert k.schedule.hash != s.hash


def test_a_fallback_warns_once_naming_the_op_shape_and_what_to_do(stored):
    """The fallback was silent (only explain() and observe() showed it): the user of a shipped
    or tuned database did not learn that a stored entry no longer serves their call."""
    stored(REFUSED)
    with pytest.warns(pypto.PerformanceWarning, match=r"softmax at C=256,R=64: the schedule from "
                      r"database .* could not be compiled \(.*stored outside.*\); the default "
                      r"schedule runs instead. `pypto db revalidate`"):
        _call(STORED)
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _call(STORED)                          # once per call key


def test_a_stored_schedule_halide_refuses_falls_back_at_a_nearest_shape(stored):
    stored(REFUSED)
    # R = 32 would not do: the stored row split by 64 does not fit it, so lookup skips the entry.
    k = _call({"R": 64, "C": 512})
    assert k.source.startswith("default") and "nearest" in k.source


@pytest.mark.parametrize("extra, error", [(REFUSED, CompileError), (UNKNOWN_VAR, ScheduleError)])
def test_an_explicit_bad_schedule_raises_even_after_a_fallback(stored, extra, error):
    s = stored(extra)
    assert _call(STORED).source.startswith("default")  # the call fell back
    for _ in range(2):  # and asking for the stored schedule itself still fails, every time
        with pytest.raises(error):
            get_kernel(OP, ("float32",), {}, STORED, schedule=s)
    assert _call(STORED).source.startswith("default")  # while the call keeps working


def _validate(*args):
    from click.testing import CliRunner

    from pypto.cli.main import cli

    return CliRunner().invoke(cli, ["db", "validate", *args])


def test_deep_validation_compiles_each_entry(stored, tmp_path):
    stored(REFUSED)
    db = str(tmp_path / "db")
    assert _validate(db).exit_code == 0  # well-formed: only compiling finds the problem
    r = _validate(db, "--deep")
    assert r.exit_code == 1
    assert "softmax[float32](C=256,R=64)" in r.output and "stored outside" in r.output


def test_deep_validation_passes_a_schedule_that_compiles(stored, tmp_path):
    stored(None)
    r = _validate(str(tmp_path / "db"), "--deep")
    assert r.exit_code == 0, r.output


@pytest.mark.parametrize("family", ["x86-64-avx2", "x86-64-sse41", "arm-64", "arm-64-cuda",
                                    "x86-64-avx2-opencl", "webassembly-32"])
def test_a_family_maps_back_to_a_target_of_that_family(family):
    assert targets.family(targets.for_family(family)) == family


def test_an_unknown_family_is_a_target_error():
    from pypto.errors import TargetError

    with pytest.raises(TargetError, match="unknown target family 'x86-64-foo'"):
        targets.for_family("x86-64-foo")


def test_a_float16_kernel_rounding_a_float64_links_under_the_in_memory_jit():
    # softmin accumulates in float64 and rounds to float16: LLVM calls __truncdfhf2, which the
    # in-memory JIT must find (the disk cache is off here, so nothing else compiles it).
    import os
    import subprocess
    import sys

    code = ("import numpy as np, pypto\n"
            "x = np.linspace(-2, 2, 24, dtype=np.float16).reshape(3, 8)\n"
            "y = pypto.ops.softmin(x).astype(np.float64)\n"
            "z = np.exp(-x.astype(np.float64)); z /= z.sum(1, keepdims=True)\n"
            "assert np.abs(y - z).max() < 2e-3, np.abs(y - z).max()\n")
    env = dict(os.environ, PYPTO_CACHE_DIR="off")
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
