"""A wheel carries the shipped schedules, and a call in a fresh environment finds them.

The wheel is built from a copy of the project files (so nothing is written into this tree) and
installed with ``--no-deps`` into a new virtual environment that sees the test environment's
packages for the dependencies. The call runs outside any source tree, so only the wheel can supply pypto.
"""

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PROJECT = ("pyproject.toml", "README.md", "pypto", "autotune", "schedules")

PROBE = r"""
import json, sys
import numpy as np
import pypto
from pypto.compiler import targets
from pypto.database.lookup import SHIPPED

fam = targets.family(targets.host())
# (A family may ship program entries only, as x86-64-avx512 does: then there is no softmax.json.)
probe = SHIPPED / fam / "softmax.json"
doc = json.loads(probe.read_text()) if probe.is_file() else None
out = {"pypto": pypto.__file__, "shipped": str(SHIPPED), "family": fam, "explained": None}
if doc is not None:
    shape = min((e["key"]["shape"] for e in doc["entries"]), key=lambda s: s["R"] * s["C"])
    e = pypto.explain("softmax", np.ones((shape["R"], shape["C"]), np.float32))
    out["explained"] = {"database": e.database, "distance": e.distance, "chosen": e.chosen}
print(json.dumps(out))
"""


def _run(cmd, **kw):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300, **kw)
    assert p.returncode == 0, f"{cmd}\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}"
    return p


@pytest.mark.slow
def test_a_wheel_installed_elsewhere_finds_the_shipped_schedules(tmp_path):
    src = tmp_path / "src"
    for name in PROJECT:
        s, d = ROOT / name, src / name
        if s.is_dir():
            shutil.copytree(s, d, symlinks=True,
                            ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", "build"))
        else:
            d.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(s, d)
    # No build isolation: the build uses the setuptools installed here, with no index needed.
    _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
          "-w", str(tmp_path / "dist"), str(src)], cwd=tmp_path)
    (wheel,) = (tmp_path / "dist").glob("*.whl")
    # (*.lock: the lock files Database.update leaves beside a file it rewrote; not data.)
    shipped = sorted(str(p.relative_to(ROOT / "schedules")) for p in (ROOT / "schedules").rglob("*")
                     if p.is_file() and p.suffix != ".lock")
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
    missing = [f for f in shipped if f"pypto/_schedules/{f}" not in names]
    assert not missing, f"the wheel lacks shipped schedules: {missing}"
    assert "pypto/compiler/parallel.c" in names  # the thread pool's source, compiled on first use

    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)])
    py = str(venv / "bin" / "python")
    # The dependencies (and pip) come from the environment running this test, which may itself be
    # a virtual environment: a .pth line puts its packages after the venv's own. pip installs
    # into the venv and leaves that environment's pypto (an editable install) alone, shadowed.
    site = _run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout
    here = {sysconfig.get_paths()[k] for k in ("purelib", "platlib")}
    Path(site.strip(), "outer-environment.pth").write_text("".join(f"{p}\n" for p in sorted(here)))
    _run([py, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--force-reinstall",
          str(wheel)], cwd=tmp_path)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYPTO_SCHEDULES")}
    env["PYPTO_USER_SCHEDULES"] = "off"
    away = tmp_path / "elsewhere"
    away.mkdir()
    got = json.loads(_run([py, "-c", PROBE], cwd=away, env=env).stdout.strip().splitlines()[-1])

    assert Path(got["pypto"]).is_relative_to(venv), got  # the wheel's pypto, not this tree's
    shipped_dir = Path(got["shipped"])
    assert shipped_dir.is_relative_to(venv) and shipped_dir.name == "_schedules", got
    if got["explained"] is None:
        pytest.skip(f"no shipped softmax schedule for this machine's target family {got['family']}")
    assert got["explained"]["database"] == got["shipped"], got
    assert got["explained"]["distance"] == 0, got
