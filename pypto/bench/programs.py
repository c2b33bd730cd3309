"""Programs against their peers, side by side, with the fair protocol (``pypto bench --programs``).

Each candidate is timed after a pause of ``--pause`` seconds and one untimed call of its own
(OpenBLAS and OpenMP threads spin ~0.1 s after a call and would slow whatever runs next), in a
rotating order; medians with the inter-quartile spread, for single calls and for blocks of 10
back-to-back calls (steady state). PyPTO is timed as users call it (fresh outputs).

    pypto bench --programs [--quick] [--memory] [--json FILE]
    python -m pypto.bench.programs [--quick] [--torch-compile] [--memory] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
import time

import numpy as np

from .. import ops as _ops
from ..frontend import fuse as _fuse
from ..frontend import jit as _jit
from ..infra.timing import compare


def _torch():
    try:
        import torch
        return torch
    except ImportError:
        return None


def _autoscheduled(jitted, x, name: str) -> dict:
    """Halide's autoscheduler ``name`` on the same fused algorithm (the traced graph op), as a
    peer called with preallocated-free fresh outputs like PyPTO's."""
    import sys as _sys

    from pypto.compiler import targets
    from pypto.runtime import run_kernel
    from pypto.schedule.autoschedule import import_schedule

    jit_mod = _sys.modules["pypto.frontend.jit"]
    jitted(x)
    seg = next(iter(jitted._cache.values())).segment
    op, target = seg.op, targets.current()
    try:
        sched = import_schedule(op, op.dtypes[0], {}, op.call_dims, name, target)
        kernel = jit_mod.compile_graph_op(op, target, schedule=sched)
    except Exception as e:   # an autoscheduler that fails is reported, not hidden
        print(f"  ({name} on the fused algorithm failed: {str(e)[:200]})")
        return {}
    arrays = [n.value for n, _ in seg.graph.sources]
    shapes = seg.shapes

    def call():
        ins = [a.reshape(s or (1,)) for a, s in zip(arrays, shapes)]
        return run_kernel(kernel, op, ins, op.call_dims)[0].reshape(seg.out_shapes[0])

    return {f"halide {name} (fused algorithm)": call}


def chain_case(n):
    x = np.random.default_rng(0).standard_normal(n).astype(np.float32)
    ops = _ops

    def per_op():
        return ops.add(ops.mul(ops.tanh(ops.add(ops.mul(x, 0.5), 0.1)), ops.sigmoid(x)), 1.0)

    fused = _jit(lambda x: ops.tanh(0.5 * x + 0.1) * ops.sigmoid(x) + 1)

    def numpy():
        t = np.multiply(x, np.float32(0.5))
        t += np.float32(0.1)
        np.tanh(t, out=t)
        s = np.negative(x)
        np.exp(s, out=s)
        s += np.float32(1)
        np.divide(t, s, out=t)
        t += np.float32(1)
        return t

    cands = {"pypto per-op": per_op, "pypto.jit (fused)": lambda: fused(x), "numpy": numpy}
    cands.update(_autoscheduled(fused, x, "adams2019"))
    torch = _torch()
    if torch is not None:
        xt = torch.from_numpy(x)
        cands["torch eager"] = lambda: torch.tanh(0.5 * xt + 0.1) * torch.sigmoid(xt) + 1
    ref = np.tanh(0.5 * x.astype(np.float64) + 0.1) / (1 + np.exp(-x.astype(np.float64))) + 1
    return f"elementwise chain, {n} float32", cands, ref, (x,)


def mlp_case(m, k, h):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((m, k)).astype(np.float32)
    w1 = (rng.standard_normal((k, h)) / math.sqrt(k)).astype(np.float32)
    b1 = rng.standard_normal(h).astype(np.float32) * 0.1
    w2 = (rng.standard_normal((h, k)) / math.sqrt(h)).astype(np.float32)
    ops = _ops

    def block(x, w1, b1, w2):
        return x + ops.gelu(x @ w1 + b1, approximate="tanh") @ w2

    fused = _jit(block)
    cands = {"pypto per-op": lambda: block(x, w1, b1, w2),
             "pypto.jit (fused)": lambda: fused(x, w1, b1, w2)}

    def numpy():
        t = x @ w1
        t += b1
        u = t * t
        u *= t
        u *= np.float32(0.044715)
        u += t
        u *= np.float32(math.sqrt(2 / math.pi))
        np.tanh(u, out=u)
        u += 1
        u *= t
        u *= np.float32(0.5)
        return x + u @ w2

    cands["numpy"] = numpy
    torch = _torch()
    if torch is not None:
        tx, tw1, tb1, tw2 = (torch.from_numpy(a) for a in (x, w1, b1, w2))
        gelu = torch.nn.functional.gelu
        cands["torch eager"] = lambda: tx + gelu(tx @ tw1 + tb1, approximate="tanh") @ tw2
    return f"MLP block x{m}x{k}, w1 {k}x{h}", cands, numpy(), ()


def resnet_case(c, hw):
    rng = np.random.default_rng(2)
    x = rng.standard_normal((1, c, hw, hw)).astype(np.float32)
    w1 = (rng.standard_normal((c, c, 3, 3)) * 0.05).astype(np.float32)
    w2 = (rng.standard_normal((c, c, 3, 3)) * 0.05).astype(np.float32)
    bn = [(rng.standard_normal(c).astype(np.float32) * 0.1, np.abs(rng.standard_normal(c)).astype(
        np.float32) + 0.5, np.ones(c, np.float32), np.zeros(c, np.float32)) for _ in range(2)]
    ops = _ops

    def block(x, w1, w2):
        h = ops.relu(ops.batch_norm(ops.conv2d(x, w1, padding=1), *bn[0]))
        h = ops.batch_norm(ops.conv2d(h, w2, padding=1), *bn[1])
        return ops.relu(h + x)

    fused = _fuse(block)
    cands = {"pypto per-op": lambda: block(x, w1, w2), "pypto.fuse": lambda: fused(x, w1, w2)}
    torch = _torch()
    ref = block(x, w1, w2)
    if torch is not None:
        F = torch.nn.functional
        tx, tw1, tw2 = (torch.from_numpy(a) for a in (x, w1, w2))
        tbn = [[torch.from_numpy(a) for a in p] for p in bn]

        def tblock():
            h = F.relu(F.batch_norm(F.conv2d(tx, tw1, padding=1), *tbn[0][:2], *tbn[0][2:]))
            h = F.batch_norm(F.conv2d(h, tw2, padding=1), *tbn[1][:2], *tbn[1][2:])
            return F.relu(h + tx)

        cands["torch eager"] = tblock
    return f"ResNet basic block 1x{c}x{hw}x{hw}", cands, ref, ()


def control_flow_case(n, layers):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((n, n)).astype(np.float32)
    ws = [(rng.standard_normal((n, n)) / math.sqrt(n)).astype(np.float32) for _ in range(layers)]
    ops = _ops

    def model(x, *ws):
        for w in ws:
            if (x * x).mean() < 0.5:      # data-dependent: skip the layer's work
                x = x * 2.0
            else:
                x = ops.tanh(x @ w)
        return x

    jitted = _jit(model)
    cands = {"pypto per-op": lambda: model(x, *ws), "pypto.jit": lambda: jitted(x, *ws)}
    torch = _torch()
    if torch is not None:
        tx, tws = torch.from_numpy(x), [torch.from_numpy(w) for w in ws]

        def tmodel():
            h = tx
            for w in tws:
                h = h * 2.0 if (h * h).mean() < 0.5 else torch.tanh(h @ w)
            return h

        cands["torch eager"] = tmodel
    return f"early-exit model {layers} layers {n}x{n}", cands, model(x, *ws), ()


def tiny_case():
    x = np.ones(16, np.float32)
    fused = _jit(lambda x: _ops.exp(x) + 1)
    cands = {"pypto per-op exp+1": lambda: _ops.add(_ops.exp(x), 1.0),
             "pypto.jit exp+1": lambda: fused(x), "numpy exp+1": lambda: np.exp(x) + 1}
    torch = _torch()
    if torch is not None:
        xt = torch.from_numpy(x)
        cands["torch eager exp+1"] = lambda: torch.exp(xt) + 1
    return "warm call on 16 floats", cands, np.exp(x) + 1, ()


def run(cases, *, pause, rounds, torch_compile):
    out = []
    for label, cands, ref, _ in cases:
        for name, fn in cands.items():   # verify before timing
            got = np.asarray(fn() if "torch" not in name else fn().numpy())
            err = float(np.max(np.abs(got.astype(np.float64) - ref)) / (1 + np.abs(ref).max()))
            if err > 1e-3:
                raise SystemExit(f"{label}: {name} is wrong (relative error {err:.2e})")
        if torch_compile and _torch() is not None and "torch eager" in cands:
            torch = _torch()
            eager = cands["torch eager"]
            compiled = torch.compile(eager)
            compiled()
            cands["torch.compile"] = compiled
        single = compare(cands, min_rounds=rounds, max_rounds=rounds, pause_s=pause,
                         min_sample_ms=0.0, warmup=1, budget_s=120)
        block = compare({k: (lambda f=f: [f() for _ in range(10)]) for k, f in cands.items()},
                        min_rounds=max(3, rounds // 2), max_rounds=max(3, rounds // 2),
                        pause_s=pause, min_sample_ms=0.0, warmup=1, budget_s=120)
        best_peer = min((t.median, k) for k, t in single.items() if not k.startswith("pypto"))
        rows = []
        for k in cands:
            rows.append({"candidate": k, "single_ms": single[k].median,
                         "single_spread": single[k].spread,
                         "steady_ms": block[k].median / 10, "steady_spread": block[k].spread})
        out.append({"case": label, "rows": rows, "best_peer": best_peer[1]})
        print(f"\n{label}  (ratios: best peer time / candidate time; > 1 = faster)")
        for r in rows:
            ratio = best_peer[0] / r["single_ms"]
            print(f"  {r['candidate']:<24} single {r['single_ms']:9.3f} ms ±{r['single_spread']:.0%}"
                  f"   steady {r['steady_ms']:9.3f} ms ±{r['steady_spread']:.0%}   {ratio:5.2f}x")
        sys.stdout.flush()
    return out


def _status(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    return 0


def _memory_child(case: str, cand: str, quick: bool) -> None:
    """Peak resident memory of ONE call of one candidate, in this (fresh) process."""
    import gc

    cases = _cases(quick)
    label, cands, _, _ = cases[{"chain": 0, "mlp": 1}[case]]
    fn = cands[cand]
    fn()
    fn()
    gc.collect()
    before = _status("VmRSS")
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    out = fn()
    print(json.dumps({"peak_bytes": _status("VmHWM") - before,
                      "output_bytes": int(np.asarray(out).nbytes)}))


def memory(quick: bool) -> list[dict]:
    """Peak memory, fused against op by op (and NumPy), each call in a fresh process."""
    import subprocess

    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="131072", MALLOC_TRIM_THRESHOLD_="131072")
    rows = []
    for case in ("chain", "mlp"):
        for cand in ("pypto per-op", "pypto.jit (fused)", "numpy"):
            cmd = [sys.executable, "-m", "pypto.bench.programs", "--memory-child", case, cand] + (
                ["--quick"] if quick else [])
            r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)
            if r.returncode:
                raise SystemExit(f"memory child failed: {r.stderr[-2000:]}")
            got = json.loads(r.stdout.strip().splitlines()[-1])
            rows.append({"case": case, "candidate": cand, **got})
            print(f"  memory {case:<6} {cand:<20} peak {got['peak_bytes'] / 2**20:8.1f} MiB "
                  f"(output {got['output_bytes'] / 2**20:.1f} MiB)")
    return rows


def _cases(q: bool):
    return [chain_case(1 << 20 if q else 1 << 24),
            mlp_case(64 if q else 256, 256 if q else 1024, 1024 if q else 4096),
            resnet_case(16 if q else 64, 28 if q else 56),
            control_flow_case(128 if q else 512, 8), tiny_case()]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--memory", action="store_true", help="also measure peak memory per call")
    ap.add_argument("--memory-child", nargs=2, metavar=("CASE", "CANDIDATE"),
                    help=argparse.SUPPRESS)
    ap.add_argument("--quick", action="store_true", help="smaller shapes, fewer rounds")
    ap.add_argument("--torch-compile", action="store_true", help="also time torch.compile")
    ap.add_argument("--pause", type=float, default=0.3)
    ap.add_argument("--json", default=None)
    a = ap.parse_args(argv)
    q = a.quick
    if a.memory_child:
        return _memory_child(*a.memory_child, q)
    cases = _cases(q)
    for _, cands, _, _ in cases:        # compile and trace everything first
        for f in cands.values():
            f()
    res = run(cases, pause=a.pause, rounds=5 if q else 9, torch_compile=a.torch_compile)
    mem = memory(q) if a.memory else []
    meta = {"machine": platform.machine(), "cpus": os.cpu_count(), "python": platform.python_version(),
            "load_average": os.getloadavg(), "when": time.strftime("%Y-%m-%d %H:%M:%S")}
    print(f"\nload average at the end: {meta['load_average']}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"meta": meta, "cases": res, "memory": mem}, f, indent=1)


if __name__ == "__main__":
    main()
