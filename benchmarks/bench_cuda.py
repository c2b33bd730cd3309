"""GPU benchmark in one command: tune a few suite ops briefly, then time them side by side.

For each op: a short, time-boxed tuning run (the tuner's GPU space, measured in its worker), then
in this process the default GPU schedule, the tuned one and PyTorch on the device (cuBLAS/cuDNN,
when torch has CUDA) are checked against the NumPy reference and timed interleaved (medians).
Inputs are copied to the device once; each PyPTO call ends when Halide has copied the output back
to the host (its JIT does so before returning), so PyTorch is timed both to a device sync and with
the same copy back, and the table says which is which.

    python benchmarks/bench_cuda.py                      # CUDA, the full shapes (under 10 minutes)
    python benchmarks/bench_cuda.py --target opencl --quick   # a smoke test on OpenCL (PoCL)

Without a device for the target it exits with status 2 and one line on stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

SUITE = [
    ("matmul", {"M": 2048, "K": 2048, "N": 2048}),
    ("softmax", {"R": 4096, "C": 1024}),
    ("layer_norm", {"R": 4096, "C": 1024}),
    ("sum", {"O": 1, "R": 1 << 26}),
    ("conv2d", {"N": 1, "C": 64, "H": 56, "W": 56, "O": 64, "CG": 64, "KH": 3, "KW": 3}),
]
QUICK = [
    ("matmul", {"M": 64, "K": 32, "N": 48}),
    ("softmax", {"R": 32, "C": 64}),
    ("sum", {"O": 1, "R": 1 << 14}),
]


def _fail(msg: str) -> None:
    print(f"bench_cuda: {msg}", file=sys.stderr)
    sys.exit(2)


def _torch_peer(name, arrays, params, device):
    """(device-synced call, call with the output copied to the host) or None."""
    try:
        import torch
        import torch.nn.functional as F
    except ImportError:
        return None
    if device != "cuda" or not torch.cuda.is_available():
        return None
    t = [torch.from_numpy(a).cuda() for a in arrays]
    fns = {
        "matmul": lambda: t[0] @ t[1],
        "softmax": lambda: torch.softmax(t[0], dim=-1),
        "layer_norm": lambda: F.layer_norm(t[0], (t[0].shape[-1],), t[1], t[2], eps=params.get("eps", 1e-5)),
        "sum": lambda: t[0].sum(dim=-1),
        "conv2d": lambda: F.conv2d(t[0], t[1], t[2]),
    }
    fn = fns.get(name)
    if fn is None:
        return None
    torch.backends.cuda.matmul.allow_tf32 = False  # the same float32 math as the reference
    torch.backends.cudnn.allow_tf32 = False

    def synced():
        fn()
        torch.cuda.synchronize()

    return synced, (lambda: fn().cpu()), (lambda: fn().cpu().numpy())


def bench_one(name, shape, target_name, trials, time_box, workdir):
    import halide as hl
    import numpy as np

    from autotune.tuner import TuneConfig, Tuner
    from pypto.bench.inputs import complete_dims, make_inputs
    from pypto.bench.timing import compare
    from pypto.compiler import targets
    from pypto.compiler.jit import compile_built
    from pypto.compiler.lower import build
    from pypto.dtypes import tolerance
    from pypto.runtime import dense
    from pypto.schedule.defaults import default_schedule

    op = pypto_get(name)
    params = op.resolve_params({})
    dtypes = op.dtypes[0]
    dims = complete_dims(op, shape, params)
    t0 = time.perf_counter()
    cfg = TuneConfig(op=name, shape=shape, target=target_name, trials=trials, timeout_s=time_box,
                     storage=f"sqlite:///{workdir}/study.db", db=os.path.join(workdir, "db"),
                     baselines=("default",), progress=False, compile_timeout=120, run_timeout=60)
    res = Tuner(cfg, say=lambda s: None).run()
    tune_s = time.perf_counter() - t0
    target = targets.target
    with target(target_name) as tgt:
        kernels = {"pypto default": compile_built(build(op, dtypes, params), default_schedule(
            build(op, dtypes, params), dims, tgt), tgt, source="default"),
            "pypto tuned": compile_built(build(op, dtypes, params), res.winner_schedule, tgt,
                                         source="tuned")}
    arrays = make_inputs(op, dtypes, dims, params, seed=0)
    want = op.kernel_ref(*arrays, **params)
    want = want[0] if isinstance(want, tuple) else want
    rtol, atol = tolerance(want.dtype.name)
    scale = max(1.0, float(np.abs(want).max()))
    ins = [hl.Buffer(dense(a)) for a in arrays]
    fns, errors = {}, {}
    for label, k in kernels.items():
        out = np.full(want.shape, np.nan, dtype=want.dtype)
        buf = hl.Buffer(out)

        def run(k=k, buf=buf):
            k.callable(*ins, buf)

        run()
        err = float(np.nanmax(np.abs(out.astype(np.float64) - want))) if not np.isnan(out).any() else np.inf
        if err > 10 * max(atol * scale, rtol * scale):
            errors[label] = f"max error {err:.3g}"
            continue
        fns[label] = run
    peer = _torch_peer(name, arrays, params, "cuda" if "cuda" in target_name else target_name)
    if peer is not None:
        synced, to_host, value = peer
        got = value().reshape(want.shape)
        if float(np.abs(got.astype(np.float64) - want).max()) <= 10 * max(atol * scale, rtol * scale):
            fns["torch (device sync)"] = synced
            fns["torch (+ copy to host)"] = to_host
        else:
            errors["torch"] = "does not match the reference"
    timing = compare(fns, min_rounds=5, max_rounds=25, target_spread=0.03, budget_s=20.0)
    return {"op": name, "shape": shape, "tune_s": round(tune_s, 1), "winner": res.winner,
            "times_ms": {n: t.to_json() for n, t in timing.items()}, "errors": errors,
            "tuned_schedule": res.winner_schedule.to_json()}


def pypto_get(name):
    import pypto

    return pypto.get_op(name)


def table(rows) -> str:
    cols = ["pypto default", "pypto tuned", "torch (device sync)", "torch (+ copy to host)"]
    lines = ["| op | shape | " + " | ".join(f"{c} ms" for c in cols) + " | tuned vs default |",
             "|---|---|" + "---:|" * (len(cols) + 1)]
    for r in rows:
        t = r["times_ms"]
        cells = [f"{t[c]['median_ms']:.3f}" if c in t else "-" for c in cols]
        sp = (f"{t['pypto default']['median_ms'] / t['pypto tuned']['median_ms']:.2f}x"
              if "pypto default" in t and "pypto tuned" in t else "-")
        shape = ",".join(f"{k}={v}" for k, v in r["shape"].items())
        lines.append(f"| {r['op']} | {shape} | " + " | ".join(cells) + f" | {sp} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--target", default="cuda", help="cuda (default) or opencl")
    ap.add_argument("--quick", action="store_true", help="tiny shapes and budget (a smoke test)")
    ap.add_argument("--trials", type=int, default=None, help="tuning trials per op (default 16; quick 3)")
    ap.add_argument("--time-box", type=float, default=None,
                    help="seconds of tuning per op (default 75; quick 40)")
    ap.add_argument("--json", default=os.path.join(ROOT, "benchmarks", "bench_cuda.json"))
    args = ap.parse_args(argv)
    import halide as hl

    from pypto.compiler import targets
    from pypto.errors import PyptoError

    try:
        t = targets.parse(args.target)
    except PyptoError as e:
        _fail(str(e))
    if not t.has_gpu_feature():
        _fail(f"--target {args.target} is not a GPU target; use cuda or opencl")
    try:
        ok = bool(hl.host_supports_target_device(t))
    except Exception:
        ok = False
    if not ok:
        api = "CUDA" if "cuda" in str(t) else args.target
        _fail(f"no {api} device on this machine (target {args.target}); run it where one is, "
              "or smoke-test with --target opencl --quick")
    suite = QUICK if args.quick else SUITE
    trials = args.trials or (3 if args.quick else 16)
    box = args.time_box or (40.0 if args.quick else 75.0)
    rows = []
    with tempfile.TemporaryDirectory(prefix="pypto-bench-gpu-") as work:
        for name, shape in suite:
            print(f"{name} {shape}: tuning up to {trials} trials / {box:.0f} s ...", flush=True)
            rows.append(bench_one(name, shape, args.target, trials, box, work))
            for n, e in rows[-1]["errors"].items():
                print(f"  {n}: excluded ({e})")
    print()
    print(table(rows))
    with open(args.json, "w") as f:
        json.dump({"target": str(t), "quick": args.quick, "results": rows}, f, indent=1)
    print(f"\nwrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
