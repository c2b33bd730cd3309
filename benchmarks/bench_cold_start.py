"""Time to first result of ``pypto.ops.matmul`` in a fresh process: empty vs warm compile cache.

    python benchmarks/bench_cold_start.py [--repeats 3] [--size 1024]

Each run is a new interpreter (import, checks, schedule lookup, compile or load, one product).
"Cold" runs start from an empty cache folder; "warm" runs reuse the folder the cold run filled,
so they load the kernel instead of compiling it. Medians of the repeats are printed.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CODE = """
import time
t0 = time.perf_counter()
import numpy as np, pypto
from pypto.runtime import observe
n = {n}
a = np.ones((n, n), np.float32); b = np.ones((n, n), np.float32)
t1 = time.perf_counter()
with observe() as calls:
    c = pypto.ops.matmul(a, b)
t2 = time.perf_counter()
assert float(c[0, 0]) == n
print(f"{{t2 - t0:.4f}} {{t2 - t1:.4f}} {{'compiled' if getattr(calls[-1][-1].callable, 'compiled_now', True) else 'loaded'}}")
"""


def run(cache: str, n: int) -> tuple[float, float, str]:
    env = dict(os.environ, PYPTO_CACHE_DIR=cache, PYTHONPATH=ROOT)
    out = subprocess.run([sys.executable, "-c", CODE.format(n=n)], env=env, capture_output=True,
                         text=True, check=True).stdout.split()
    return float(out[0]), float(out[1]), out[2]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--size", type=int, default=1024)
    args = ap.parse_args()
    cold, warm = [], []
    for _ in range(args.repeats):
        with tempfile.TemporaryDirectory() as d:
            cold.append(run(d, args.size))
            warm.append(run(d, args.size))
    for name, rows in (("cold (empty cache)", cold), ("warm (cache filled)", warm)):
        total = statistics.median(r[0] for r in rows)
        call = statistics.median(r[1] for r in rows)
        how = ",".join(sorted({r[2] for r in rows}))
        print(f"{name:<22} process start to first result {total:7.3f} s; first call {call:7.3f} s ({how})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
