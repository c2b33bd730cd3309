"""The tuned suite, side by side: database schedule vs default vs Halide's autoschedulers vs NumPy.

    python benchmarks/bench_suite.py [--suite benchmarks/suite.json] [--only OP] [--json FILE]

Every schedule of one suite item runs in the same worker process, outputs checked against NumPy
first, then timed interleaved (rotating order, medians of rounds). Autoscheduler schedules are
computed once and kept in ``benchmarks/autoschedules/<name>/`` (schedule databases, data only) so that
reruns do not spend minutes in Adams2019. NumPy runs with OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE unset.
The "bar" column repeats the best peer measured on an idle machine of this kind (from the suite
file), for orientation only: it was not measured by this script.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

if os.environ.get("OPENBLAS_CORETYPE") or os.environ.get("OPENBLAS_L2_SIZE"):
    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")}
    os.execve(sys.executable, [sys.executable, *sys.argv], env)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from autotune.evaluate import Evaluator  # noqa: E402
from pypto.bench.inputs import complete_dims, parse_shape  # noqa: E402
from pypto.compiler import targets  # noqa: E402
from pypto.compiler.lower import build, fingerprint  # noqa: E402
from pypto.database import DirectoryDatabase, Entry, Key, provenance  # noqa: E402
from pypto.ops import get_op  # noqa: E402
from pypto.schedule.defaults import default_schedule  # noqa: E402
from pypto.schedule.schedule import Schedule  # noqa: E402

AUTOS = ("adams2019", "mullapudi2016", "li2018")
CACHE = os.path.join(ROOT, "benchmarks", "autoschedules")


def schedules_for(op, dtypes, params, dims, key_dims, target, ev, tuned_db):
    fam = targets.family(target)
    fp = fingerprint(build(op, dtypes, params))
    out: dict[str, dict] = {}
    key = Key.make(op.name, dtypes, key_dims, params, fam, fp)
    tuned = tuned_db.best(key)
    if tuned is not None:
        out["tuned"] = tuned.schedule.to_json()
    out["default"] = default_schedule(build(op, dtypes, params), dims, target).to_json()
    for name in AUTOS:
        cache = DirectoryDatabase(os.path.join(CACHE, name))  # one database per autoscheduler
        akey = key
        hit = cache.best(akey)
        if hit is not None:
            out[name] = hit.schedule.to_json()
            continue
        sched, why = ev.autoschedule(name, timeout=900)
        if sched is None:
            print(f"  {name}: {why[:150]}", flush=True)
            continue
        cache.commit([Entry(key=akey, schedule=Schedule.from_json(sched),
                            provenance=provenance(method=f"autoscheduler:{name}", target=str(target)))])
        out[name] = sched
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--suite", default=os.path.join(ROOT, "benchmarks", "suite.json"))
    ap.add_argument("--only", action="append", default=[])
    ap.add_argument("--db", default=os.path.join(ROOT, "schedules"))
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    items = json.load(open(args.suite))["ops"]
    target = targets.host()
    tuned_db = DirectoryDatabase(args.db)
    rows = []
    cols = ("tuned", "default") + AUTOS + ("numpy",)
    print("| op | shape | " + " | ".join(cols) + " | tuned vs best of default+auto | numpy/tuned | bar (idle) |")
    print("|---" * (len(cols) + 5) + "|")
    for it in items:
        if args.only and it["op"] not in args.only:
            continue
        op = get_op(it["op"])
        params = op.resolve_params(it.get("params", {}))
        shape = parse_shape(it["shape"])
        dims = complete_dims(op, shape, params)
        dtypes = op.dtypes[0]
        key_dims = {d: dims[d] for d in op.input_dims}
        with Evaluator(op.name, dtypes, params, dims, "host", compile_timeout=300, run_timeout=300) as ev:
            scheds = schedules_for(op, dtypes, params, dims, key_dims, target, ev, tuned_db)
            res = ev.compare(scheds, numpy=True, timing={"min_rounds": 7, "max_rounds": 21,
                                                         "budget_s": 60})
        t = {n: r["median_ms"] for n, r in res.get("results", {}).items()}
        base = [t[n] for n in ("default",) + AUTOS if n in t]
        ratio = f"{min(base) / t['tuned']:.2f}x" if "tuned" in t and base else "-"
        np_ratio = f"{t['numpy'] / t['tuned']:.2f}x" if "tuned" in t and "numpy" in t else "-"
        bar = it.get("peer", {})
        bar_text = f"{bar['ms']} ({bar['name']})" if bar else "-"
        cells = " | ".join(f"{t[c]:.3f}" if c in t else "-" for c in cols)
        print(f"| {op.name} | {it['shape']} | {cells} | {ratio} | {np_ratio} | {bar_text} |", flush=True)
        for n, err in res.get("errors", {}).items():
            print(f"  ({n} excluded: {err[:150]})")
        rows.append({"op": op.name, "shape": it["shape"], "params": params, "ms": t,
                     "errors": res.get("errors", {})})
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
