"""The persistent compile cache: reuse across processes, corruption, concurrent fillers."""

import os
import shutil
import subprocess
import sys

import pytest
from helpers import CACHE_PROBE
from click.testing import CliRunner

from pypto.cli.main import cli

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CODE = CACHE_PROBE


def _run(cache):
    env = dict(os.environ, PYPTO_CACHE_DIR=str(cache), PYTHONPATH=ROOT)
    return subprocess.run([sys.executable, "-c", CODE], env=env, capture_output=True, text=True,
                          check=True).stdout.strip()


@pytest.mark.skipif(not shutil.which("c++"), reason="needs a C++ compiler")
def test_second_process_loads_instead_of_compiling_and_corruption_is_rebuilt(tmp_path):
    assert _run(tmp_path) == "disk"
    libs = list(tmp_path.glob("*/*/kernel.so"))
    assert len(libs) == 1
    mtime = libs[0].stat().st_mtime_ns
    assert _run(tmp_path) == "disk"
    assert libs[0].stat().st_mtime_ns == mtime  # reused, not rebuilt
    libs[0].write_bytes(libs[0].read_bytes()[:1000])  # truncate it
    assert _run(tmp_path) == "disk"
    again = list(tmp_path.glob("*/*/kernel.so"))
    assert len(again) == 1 and again[0].stat().st_size > 1000


@pytest.mark.skipif(not shutil.which("c++"), reason="needs a C++ compiler")
def test_concurrent_processes_fill_the_cache_without_corrupting_it(tmp_path):
    env = dict(os.environ, PYPTO_CACHE_DIR=str(tmp_path), PYTHONPATH=ROOT)
    procs = [subprocess.Popen([sys.executable, "-c", CODE], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(3)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    assert len(list(tmp_path.glob("*/*/kernel.so"))) == 1
    assert not list(tmp_path.glob("*/.*"))  # no temporary folders left
    assert _run(tmp_path) == "disk"


@pytest.mark.skipif(not shutil.which("c++"), reason="needs a C++ compiler")
def test_cache_info_and_clear(tmp_path, monkeypatch):
    monkeypatch.setenv("PYPTO_CACHE_DIR", str(tmp_path))
    _run(tmp_path)
    r = CliRunner().invoke(cli, ["cache", "info"])
    assert "entries: 1" in r.output
    r = CliRunner().invoke(cli, ["cache", "clear"])
    assert "removed 1" in r.output
    assert "entries: 0" in CliRunner().invoke(cli, ["cache", "info"]).output


def test_cache_off_uses_the_jit(tmp_path):
    env = dict(os.environ, PYPTO_CACHE_DIR="off", PYTHONPATH=ROOT, HOME=str(tmp_path),
               XDG_CACHE_HOME=str(tmp_path))
    out = subprocess.run([sys.executable, "-c", CODE], env=env, capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "jit"
    assert list(tmp_path.iterdir()) == []  # nothing was written anywhere near a cache


DTYPE_CODE = """
import numpy as np, pypto
from pypto.runtime import observe
rng = np.random.default_rng(0)
checks = []
with observe() as calls:
    x16 = rng.random((7, 9)).astype(np.float16)
    checks.append(np.allclose(pypto.ops.exp(x16), np.exp(x16.astype(np.float32)).astype(np.float16), rtol=1e-2))
    c = rng.random((5, 6)) > 0.5
    a, b = rng.random((5, 6)).astype(np.float32), rng.random((5, 6)).astype(np.float32)
    checks.append(np.array_equal(pypto.ops.where(c, a, b), np.where(c, a, b)))
    q = pypto.ops.quantize(rng.random(50).astype(np.float32), scale=0.01, zero_point=3)
    checks.append(q.dtype == np.int8 and np.array_equal(q, np.clip(np.round(pypto.ops.dequantize(q, scale=0.01, zero_point=3) / 0.01) + 3, -128, 127)))
    xs = rng.random((4, 6)).astype(np.float32); h = rng.random((4, 5)).astype(np.float32)
    cs = rng.random((4, 5)).astype(np.float32)
    wi, wh = rng.random((20, 6)).astype(np.float32), rng.random((20, 5)).astype(np.float32)
    h2, c2 = pypto.ops.lstm_cell(xs, h, cs, wi, wh)
    rh, rc = pypto.get_op("lstm_cell").reference(xs, h, cs, wi, wh)
    checks.append(np.allclose(h2, rh, rtol=1e-4, atol=1e-5) and np.allclose(c2, rc, rtol=1e-4, atol=1e-5))
    checks.append(int(pypto.ops.argmax(np.array([1.0, 5.0, 2.0], np.float32))) == 1)
print(all(checks), all(k.disk for *_, k in calls), checks)
"""


@pytest.mark.skipif(not shutil.which("c++"), reason="needs a C++ compiler")
def test_disk_kernels_handle_every_kind_of_buffer(tmp_path):
    env = dict(os.environ, PYPTO_CACHE_DIR=str(tmp_path), PYTHONPATH=ROOT)
    out = subprocess.run([sys.executable, "-c", DTYPE_CODE], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.startswith("True True"), out.stdout


EDITED_OP = """
import sys, numpy as np, halide as hl, pypto

n = int(sys.argv[1])


@pypto.op(name="window_sum_edited", category="user", inputs={"x": "N"}, output="N",
          dtypes=["float32"], reference=lambda x: x)
def window_sum_edited(x, *, dims):
    i, r = hl.Var("n"), hl.RDom([hl.Range(0, n)], "r")     # the edit: only this extent
    out = hl.Func("out")
    out[i] = 0.0
    out[i] += x[hl.min(i + r.x, dims.N - 1)]
    return out


print(float(window_sum_edited(np.ones(8, np.float32))[0]))
"""


def test_an_op_edited_only_in_a_reduction_extent_is_compiled_again(tmp_path):
    # The algorithm fingerprint cannot see an RDom's bounds (Halide's Python API does not give
    # them from a Func): the compile cache keys kernels by a digest of them too. Before, the
    # second process was served the first one's kernel and summed 3 values instead of 5.
    env = dict(os.environ, PYPTO_CACHE_DIR=str(tmp_path), PYTHONPATH=ROOT)
    for n in (3, 5, 3):
        out = subprocess.run([sys.executable, "-c", EDITED_OP, str(n)], env=env,
                             capture_output=True, text=True)
        assert out.returncode == 0, out.stderr[-3000:]
        assert float(out.stdout.split()[-1]) == n, (n, out.stdout)
