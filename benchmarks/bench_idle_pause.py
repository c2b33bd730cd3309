"""Calls after an idle pause: PyPTO's thread pool, Halide's own pools, and NumPy's OpenBLAS.

Each candidate runs in a process of its own (so no other library's threads spin beside it): a few
warm-up calls, then ``--rounds`` rounds of a 0.3 s sleep followed by ``--calls`` back-to-back calls.
It prints the median time of each call position over the rounds, and the process CPU time per
call over wall time (about 2 when both cores of a 2-core machine work, 1 when one does).

    python benchmarks/bench_idle_pause.py                 # matmul 512^3 with out=
    python benchmarks/bench_idle_pause.py --op matmul256  # matmul 256^3 with out=
    python benchmarks/bench_idle_pause.py --op sum_rows   # row sums of [4096, 1024]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

CHILD = r"""
import json, sys, time
import numpy as np
op, lib, rounds, calls = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
rng = np.random.default_rng(0)
if op.startswith("matmul"):
    n = int(op[6:] or 512)
    a = rng.random((n, n), dtype=np.float32); b = rng.random((n, n), dtype=np.float32)
    out = np.empty((n, n), np.float32)
    if lib == "numpy":
        f = lambda: np.matmul(a, b, out=out)
    else:
        import pypto
        f = lambda: pypto.ops.matmul(a, b, out=out)
else:
    x = rng.random((4096, 1024), dtype=np.float32); out = np.empty(4096, np.float32)
    if lib == "numpy":
        f = lambda: np.sum(x, axis=1, out=out)
    else:
        import pypto
        f = lambda: pypto.ops.sum(x, axis=1, out=out)
for _ in range(5):
    f()
wall, cpu = [], []
for _ in range(rounds):
    time.sleep(0.3)
    w, c = [], []
    for _ in range(calls):
        t0, c0 = time.perf_counter(), time.process_time()
        f()
        w.append(time.perf_counter() - t0); c.append(time.process_time() - c0)
    wall.append(w); cpu.append(c)
pool = None
if lib != "numpy":
    from pypto.compiler import parallel
    pool = parallel.stats()
print(json.dumps({"wall": wall, "cpu": cpu, "pool": pool}))
"""

CANDIDATES = [("pypto (PyPTO's pool)", "pypto", {}),
              ("pypto (Halide's pools)", "pypto", {"PYPTO_PARALLEL_RUNTIME": "halide"}),
              ("numpy", "numpy", {})]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--op", choices=("matmul", "matmul256", "sum_rows"), default="matmul")
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--calls", type=int, default=8)
    args = ap.parse_args()
    import numpy as np

    print(f"{args.op}: median ms of each call after a 0.3 s pause ({args.rounds} rounds); "
          f"cpu/wall over calls 2-{args.calls}")
    for label, lib, env in CANDIDATES:
        full = dict(os.environ, **env)
        r = subprocess.run([sys.executable, "-c", CHILD, args.op, lib, str(args.rounds),
                            str(args.calls)], env=full, capture_output=True, text=True, check=True)
        got = json.loads(r.stdout.strip().splitlines()[-1])
        wall = np.median(np.array(got["wall"]), axis=0) * 1e3
        ratio = np.median(np.array(got["cpu"])[:, 1:] / np.array(got["wall"])[:, 1:])
        cells = " ".join(f"{v:6.2f}" for v in wall)
        print(f"  {label:24} {cells}   cpu/wall {ratio:.2f}"
              + (f"   pool {got['pool']}" if got["pool"] else ""))


if __name__ == "__main__":
    main()
