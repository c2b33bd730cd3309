"""Freed kernel buffers kept for reuse (``PYPTO_KERNEL_CACHE_MB``) against none kept, side by side.

``value_and_grad`` of an LSTM layer (``pypto.nn.lstm``) in one process, the limit switched
between candidates with ``pypto.compiler.parallel.set_memory_limit``; torch.nn.LSTM alongside
when torch is installed. Fair protocol: each timed call follows a 0.3 s pause and an untimed
call of the same candidate (which also refills the kept blocks), the order rotates each round;
medians of a single call and of the mean of a block of calls.

    python benchmarks/bench_kernel_heap.py [--steps 32] [--batch 64] [--hidden 512] [--rounds 9]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import pypto
import pypto.nn
from pypto.compiler import parallel


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=32)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--hidden", type=int, default=512)
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--block", type=int, default=2, help="calls per steady block")
    ap.add_argument("--keep-mb", type=float, default=256.0)
    a = ap.parse_args()
    T, B, H = a.steps, a.batch, a.hidden
    r = np.random.default_rng(0)

    def f32(*s):
        return (r.standard_normal(s) * 0.05).astype(np.float32)

    xs, h0, c0, g = f32(T, B, H), f32(B, H), f32(B, H), f32(T, B, H)
    w = [f32(4 * H, H), f32(4 * H, H), f32(4 * H), f32(4 * H)]

    def loss(xs, h0, c0, w_ih, w_hh, b_ih, b_hh, g):
        return (pypto.nn.lstm(xs, h0, c0, w_ih, w_hh, b_ih, b_hh)[0] * g).sum()

    vg = pypto.value_and_grad(loss, argnums=tuple(range(7)))

    def run():
        return vg(xs, h0, c0, *w, g)

    run()                                   # compiles; loads PyPTO's runtime
    if parallel.memory_stats() is None:
        raise SystemExit("PyPTO's parallel runtime is not in use (PYPTO_PARALLEL_RUNTIME=halide, "
                         "no C compiler, or the compile cache is off): nothing to compare")
    cands = {"pypto, none kept": (0.0, run), f"pypto, {a.keep_mb:g} MiB kept": (a.keep_mb, run)}
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None:
        mod = torch.nn.LSTM(H, H)
        with torch.no_grad():
            for name, arr in zip(("weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0"), w):
                getattr(mod, name).copy_(torch.from_numpy(arr))
        tx, th, tc, tg = (torch.from_numpy(v) for v in (xs, h0, c0, g))

        def torch_fb():
            x = tx.clone().requires_grad_()
            h = th.clone().requires_grad_()
            c = tc.clone().requires_grad_()
            mod.zero_grad()
            (mod(x, (h[None], c[None]))[0] * tg).sum().backward()

        torch_fb()
        cands["torch.nn.LSTM"] = (None, torch_fb)
    names = list(cands)
    single: dict[str, list] = {n: [] for n in names}
    steady: dict[str, list] = {n: [] for n in names}
    for rnd in range(a.rounds):
        k = rnd % len(names)
        for n in names[k:] + names[:k]:
            limit, fn = cands[n]
            if limit is not None:
                parallel.set_memory_limit(limit)
            time.sleep(0.3)
            fn()
            t0 = time.perf_counter()
            fn()
            t1 = time.perf_counter()
            for _ in range(a.block):
                fn()
            t2 = time.perf_counter()
            single[n].append((t1 - t0) * 1e3)
            steady[n].append((t2 - t1) * 1e3 / a.block)
    print(f"value_and_grad of an LSTM layer: {T} steps, batch {B}, hidden {H}; "
          f"{a.rounds} rounds; ms, median (min)")
    for n in names:
        print(f"  {n:24s} single {np.median(single[n]):8.1f} ({min(single[n]):.1f})   "
              f"steady {np.median(steady[n]):8.1f} ({min(steady[n]):.1f})")
    print("kernel heap:", parallel.memory_stats())


if __name__ == "__main__":
    main()
