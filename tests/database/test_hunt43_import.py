"""``pypto db import-autoschedule`` for a CPU this machine cannot run is refused: it ran the
arm-64-linux kernel here to check it and died of SIGSEGV (exit 139)."""

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _import(tmp_path, *extra):
    env = dict(os.environ, PYTHONPATH=ROOT, PYPTO_CACHE_DIR=str(tmp_path / "cache"),
               PYPTO_NO_SHIPPED_SCHEDULES="1", PYPTO_USER_SCHEDULES="off")
    return subprocess.run([sys.executable, "-m", "pypto.cli.main", "db", "import-autoschedule",
                           "add", "--shape", "R=4,C=8", "--autoscheduler", "li2018",
                           "--db", str(tmp_path / "db"), *extra],
                          env=env, capture_output=True, text=True, timeout=600)


def test_another_architecture_is_refused_not_run(tmp_path):
    r = _import(tmp_path, "--target", "arm-64-linux")
    assert r.returncode == 2, (r.returncode, r.stderr[-2000:])
    assert "cannot check or time li2018's schedule for arm-64-linux" in r.stderr
    assert "Traceback" not in r.stderr and not (tmp_path / "db").exists()


def test_an_import_without_timing_says_so(tmp_path):
    r = _import(tmp_path, "--no-measure")
    assert r.returncode == 0, r.stderr[-2000:]
    assert "not timed (--no-measure)" in r.stdout and ": None" not in r.stdout
