"""PyPTO's parallel runtime (pypto/compiler/parallel.c): the pool every cached kernel uses."""

import ast
import os
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
pytestmark = pytest.mark.skipif(not shutil.which("c++"), reason="needs a C++ compiler")

KERNEL = """
import os, numpy as np, pypto
from pypto.compiler import parallel
rng = np.random.default_rng(3)
a = rng.standard_normal((300, 200)).astype(np.float32)
b = rng.standard_normal((200, 130)).astype(np.float32)
want = a.astype(np.float64) @ b.astype(np.float64)  # reference: NumPy in float64
def check():
    y = pypto.ops.matmul(a, b)
    assert np.allclose(y, want, rtol=1e-4, atol=1e-3), abs(y - want).max()
check()
print("stats", parallel.stats())
"""

POOL = KERNEL + """
import ctypes, threading
lib = parallel.pool()
TASK = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p)
par_for = lib.pypto_do_par_for
par_for.argtypes = [ctypes.c_void_p, TASK, ctypes.c_int, ctypes.c_int, ctypes.c_void_p]
seen, lock = [], threading.Lock()

@TASK
def record(_uc, i, _closure):
    with lock:
        seen.append(i)
    return -7 if i == 20 else 0

# every index once, the first error code returned
assert par_for(None, record, 5, 64, None) == -7
assert sorted(seen) == list(range(5, 69)), sorted(seen)

# nested loops: each of 4 outer tasks runs an inner loop of 16
seen.clear()
@TASK
def inner(_uc, i, _closure):
    with lock:
        seen.append(i)
    return 0
@TASK
def outer(_uc, i, _closure):
    return par_for(None, inner, 100 * i, 16, None)
assert par_for(None, outer, 0, 4, None) == 0
assert sorted(seen) == sorted(100 * o + k for o in range(4) for k in range(16)), sorted(seen)

# several threads post loops at once
seen.clear()
rcs = []
def post(base):
    rcs.append(par_for(None, inner, base, 32, None))
threads = [threading.Thread(target=post, args=(1000 * t,)) for t in range(3)]
for t in threads: t.start()
for t in threads: t.join()
assert rcs == [0, 0, 0] and sorted(seen) == sorted(1000 * t + k for t in range(3) for k in range(32))

# a forked child starts a pool of its own
pid = os.fork()
if pid == 0:
    try:
        check()
        os._exit(0)
    except BaseException:
        os._exit(1)
_, status = os.waitpid(pid, 0)
assert os.waitstatus_to_exitcode(status) == 0
check()
print("ok", parallel.stats())
"""


HEAP = """
import ctypes, os, numpy as np, pypto
from pypto.compiler import parallel
rng = np.random.default_rng(5)
x = rng.standard_normal((1, 16, 64, 64)).astype(np.float32)  # padded: 16x66x66 floats, 279 KB
w = rng.standard_normal((8, 16, 3, 3)).astype(np.float32)
def ref():  # direct sum over taps in float64, independent of the kernel
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    out = np.zeros((1, 8, 64, 64))
    for a in range(3):
        for b in range(3):
            out += np.einsum("oc,nchw->nohw", w[:, :, a, b], xp[:, :, a:a + 64, b:b + 64])
    return out
want = ref()
for _ in range(4):
    assert np.allclose(pypto.ops.conv2d(x, w, padding=1), want, rtol=1e-4, atol=1e-3)
print("heap", parallel.memory_stats())
lib = parallel.pool()
lib.pypto_malloc.restype = ctypes.c_void_p
lib.pypto_malloc.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
lib.pypto_free.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
mb = 1 << 20
a = lib.pypto_malloc(None, mb)
b = lib.pypto_malloc(None, mb)
assert a != b and a % 128 == 0 and b % 128 == 0
ctypes.memset(a, 7, mb)
lib.pypto_free(None, a)
c = lib.pypto_malloc(None, mb - 1000)        # a freed block of (nearly) the size comes back
d = lib.pypto_malloc(None, mb)               # ... once only: b and c are held
small = lib.pypto_malloc(None, mb // 4)      # a quarter of the size never takes a big block
print("reuse", c == a, d not in (a, b), small not in (a, b, c, d))
for p in (b, c, d, small):
    lib.pypto_free(None, p)
print("trim", parallel.trim(), parallel.memory_stats())
kept = lib.pypto_malloc(None, mb)
lib.pypto_free(None, kept)                   # kept again ...
print("limit", parallel.set_memory_limit(0), parallel.memory_stats()["kept_bytes"])
again = lib.pypto_malloc(None, mb)           # ... released by the lower limit; none kept now
lib.pypto_free(None, again)
print("none", parallel.memory_stats()["kept_bytes"])
"""


def test_kernel_heap_blocks_are_reused_never_while_held_and_trimmed(tmp_path):
    out = _run(HEAP, tmp_path)
    heap = ast.literal_eval(out.split("heap ", 1)[1].split("\n", 1)[0])
    # four calls, one padded input each: the first allocates, the later ones reuse its block
    assert heap["reused"] >= 3 and heap["foreign"] == 0 and heap["limit_bytes"] == 256 << 20
    assert "reuse True True True" in out
    trimmed = int(out.split("trim ", 1)[1].split(" ", 1)[0])
    after = ast.literal_eval(out.split("trim ", 1)[1].split(" ", 1)[1].split("\n", 1)[0])
    assert trimmed >= 2 << 20 and after["kept_bytes"] == 0 and after["kept_blocks"] == 0
    assert "limit 256.0 0" in out and "none 0" in out


def test_kernel_heap_limit_zero_keeps_nothing(tmp_path):
    out = _run(HEAP.split("lib = parallel.pool()")[0], tmp_path, PYPTO_KERNEL_CACHE_MB="0")
    heap = ast.literal_eval(out.split("heap ", 1)[1].strip())
    assert heap["reused"] == 0 and heap["kept_bytes"] == 0 and heap["limit_bytes"] == 0


def test_kernel_heap_stays_within_its_limit(tmp_path):
    code = HEAP.split("lib = parallel.pool()")[0] + """
lib = parallel.pool()
lib.pypto_malloc.restype = ctypes.c_void_p
lib.pypto_malloc.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
lib.pypto_free.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
ps = [lib.pypto_malloc(None, 600 << 10) for _ in range(3)]
for p in ps:
    lib.pypto_free(None, p)
print("after", parallel.memory_stats())
"""
    out = _run(code, tmp_path, PYPTO_KERNEL_CACHE_MB="1")
    after = ast.literal_eval(out.split("after ", 1)[1].strip())
    assert after["kept_bytes"] <= 1 << 20 and after["released"] >= 1 and after["kept_blocks"] >= 1


def _run(code, cache, **env):
    full = dict(os.environ, PYPTO_CACHE_DIR=str(cache), PYTHONPATH=ROOT)
    full.pop("HL_NUM_THREADS", None)
    full.update(env)
    r = subprocess.run([sys.executable, "-c", code], env=full, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    return r.stdout


def test_cached_kernels_share_the_pool_and_it_runs_every_index_once(tmp_path):
    out = _run(POOL, tmp_path)
    stats = ast.literal_eval(out.split("ok ", 1)[1].strip())
    assert stats["threads"] == len(os.sched_getaffinity(0))
    assert stats["loops"] >= 6 and stats["spin_us"] == 1000
    assert len(list(tmp_path.glob("runtime/*/libpypto_parallel.so"))) == 1


def test_settings_halide_pool_thread_count_and_spin(tmp_path):
    assert "stats None" in _run(KERNEL, tmp_path, PYPTO_PARALLEL_RUNTIME="halide")
    out = _run(KERNEL, tmp_path, HL_NUM_THREADS="1", PYPTO_SPIN_US="0")
    assert "'threads': 1," in out and "'spin_us': 0," in out


def test_a_damaged_pool_library_is_rebuilt(tmp_path):
    _run(KERNEL, tmp_path)
    (lib,) = tmp_path.glob("runtime/*/libpypto_parallel.so")
    lib.write_bytes(lib.read_bytes()[:500])
    assert "'threads': " in _run(KERNEL, tmp_path)
    assert lib.stat().st_size > 500


def test_an_unknown_setting_warns_and_uses_the_pool(tmp_path):
    code = "import warnings; warnings.simplefilter('always')\n" + KERNEL
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, PYPTO_CACHE_DIR=str(tmp_path), PYTHONPATH=ROOT,
                                PYPTO_PARALLEL_RUNTIME="openmp"))
    assert r.returncode == 0, r.stderr[-3000:]
    assert "PYPTO_PARALLEL_RUNTIME='openmp' is not 'pypto' or 'halide'" in r.stderr
    assert "'threads': " in r.stdout


def test_cache_info_names_the_pool(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from pypto.cli.main import cli

    monkeypatch.setenv("PYPTO_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("PYPTO_SPIN_US", "250")
    out = CliRunner().invoke(cli, ["cache", "info"]).output
    assert "thread pool: PyPTO's, shared by all cached kernels" in out
    assert "spin 250 us" in out and "built on first use" in out
    assert "freed kernel buffers kept up to 256 MiB" in out
    monkeypatch.setenv("PYPTO_PARALLEL_RUNTIME", "halide")
    assert "thread pool: Halide's own" in CliRunner().invoke(cli, ["cache", "info"]).output


def test_a_pool_library_others_could_write_is_never_loaded(tmp_path):
    _run(KERNEL, tmp_path)
    (lib,) = tmp_path.glob("runtime/*/libpypto_parallel.so")
    lib.chmod(0o777)
    code = "import warnings; warnings.simplefilter('always')\n" + KERNEL
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, PYPTO_CACHE_DIR=str(tmp_path), PYTHONPATH=ROOT))
    assert r.returncode == 0, r.stderr[-3000:]
    assert "stats None" in r.stdout  # Halide's own pools ran the kernel (and it was right)
    assert "parallel runtime is unavailable" in r.stderr and "writable" in r.stderr, r.stderr


AIM = KERNEL + """
import time
assert parallel.stats()["threads"] == 2
for _ in range(4):
    time.sleep(0.05)          # with PYPTO_SPIN_US=0 the worker is asleep: the next loop wakes it
    check()
st = parallel.stats()
# (how many of the four a loaded machine lets fall asleep in time varies)
assert st["wakeups"] >= 1 and st["aimed"] >= 1, st
# every thread, the woken worker included, is back to the process's cores (a worker restores
# its own once it runs: a loaded machine may take a while to run it)
want = sorted(os.sched_getaffinity(0))
for _ in range(100):
    got = {tid: sorted(os.sched_getaffinity(int(tid))) for tid in os.listdir("/proc/self/task")}
    if all(v == want for v in got.values()):
        break
    time.sleep(0.05)
assert all(v == want for v in got.values()), (want, got)
print("aim ok", st)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux") or len(os.sched_getaffinity(0)) < 2,
                    reason="needs Linux and two allowed cores")
def test_a_sleeping_worker_is_woken_off_the_callers_core_and_restored(tmp_path):
    env = dict(os.environ, PYPTO_CACHE_DIR=str(tmp_path), PYPTO_SPIN_US="0", HL_NUM_THREADS="2")
    env.pop("PYPTO_PARALLEL_RUNTIME", None)
    r = subprocess.run([sys.executable, "-c", AIM], env=env, cwd=ROOT, capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "aim ok" in r.stdout
