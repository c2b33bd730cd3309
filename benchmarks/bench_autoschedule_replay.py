"""Halide's autoschedulers applied directly vs imported as PyPTO data and replayed, side by side.

    python benchmarks/bench_autoschedule_replay.py [--only OP] [--autoscheduler NAME]

For each op and autoscheduler: (a) run the autoscheduler on a pipeline, which schedules it in
place, and JIT-compile that pipeline; (b) parse the autoscheduler's output into PyPTO directives
(never compiling its C++ text), store them in ``benchmarks/autoschedules/<name>/``, re-load them
from disk and apply them to a fresh pipeline. Both are checked against NumPy, then timed
interleaved. A ratio near 1.00 means the replay loses nothing.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import numpy as np  # noqa: E402

from pypto.bench.inputs import complete_dims, make_inputs, parse_shape  # noqa: E402
from pypto.bench.timing import compare  # noqa: E402
from pypto.compiler import targets  # noqa: E402
from pypto.compiler.jit import Kernel, compile_built  # noqa: E402
from pypto.compiler.lower import build, fingerprint  # noqa: E402
from pypto.database import DirectoryDatabase, Entry, Key, provenance  # noqa: E402
from pypto.ops import get_op  # noqa: E402
from pypto.runtime import run_kernel  # noqa: E402
from pypto.schedule.autoschedule import autoschedule  # noqa: E402
from pypto.schedule.schedule import Schedule  # noqa: E402

CASES = [
    ("matmul", "M=1024,K=1024,N=1024", {}),
    ("conv2d", "N=1,C=64,H=56,W=56,O=64,CG=64,KH=3,KW=3", {"pad_h": 1, "pad_w": 1}),
    ("softmax", "R=4096,C=1024", {}),
    ("box_blur", "B=1,H=4096,W=4096", {}),
]
NAMES = ("adams2019", "mullapudi2016", "li2018")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", action="append", default=[])
    ap.add_argument("--autoscheduler", action="append", default=[])
    args = ap.parse_args()
    target = targets.host()
    fam = targets.family(target)
    print(f"{'op':<10}{'autoscheduler':<15}{'schedule s':>11}{'direct ms':>11}{'replay ms':>11}"
          f"{'replay/direct':>15}{'directives':>12}")
    for name, shape, params in CASES:
        if args.only and name not in args.only:
            continue
        op = get_op(name)
        params = op.resolve_params(params)
        dims = complete_dims(op, parse_shape(shape), params)
        dtypes = op.dtypes[0]
        arrays = make_inputs(op, dtypes, dims, params)
        want = op.kernel_ref(*arrays, **params)
        for auto in args.autoscheduler or NAMES:
            direct_built = build(op, dtypes, params)
            fp = fingerprint(direct_built)
            t0 = time.perf_counter()
            directives, _ = autoschedule(direct_built, dims, auto, target)
            sched_s = time.perf_counter() - t0
            fn = direct_built.pipeline.compile_to_callable(direct_built.images, target)
            direct = Kernel(op=op, callable=fn, out_dtypes=direct_built.out_dtypes,
                            schedule=Schedule(op.name), fingerprint=fp, target=str(target),
                            source=f"{auto} (applied directly)", python=[])
            db = DirectoryDatabase(os.path.join(ROOT, "benchmarks", "autoschedules", auto))
            key = Key.make(op.name, dtypes, {d: dims[d] for d in op.input_dims}, params, fam, fp)
            db.commit([Entry(key=key, schedule=Schedule(op.name, tuple(directives), fp),
                             provenance=provenance(method=f"autoscheduler:{auto}", target=str(target)))])
            stored = DirectoryDatabase(db.root).best(key)  # read back from disk
            replay = compile_built(build(op, dtypes, params), stored.schedule, target,
                                   source=f"{auto} (replayed)")
            for k in (direct, replay):
                got = run_kernel(k, op, arrays, dims)[0]
                np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-3 * float(np.abs(want).max()))
            res = compare({"direct": lambda: run_kernel(direct, op, arrays, dims),
                           "replay": lambda: run_kernel(replay, op, arrays, dims)},
                          min_rounds=9, max_rounds=31, budget_s=30)
            d, r = res["direct"].median, res["replay"].median
            print(f"{name:<10}{auto:<15}{sched_s:>11.2f}{d:>11.3f}{r:>11.3f}{r / d:>15.2f}"
                  f"{len(directives):>12}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
