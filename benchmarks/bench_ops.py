"""Every op's default schedule against its NumPy reference, side by side.

    python benchmarks/bench_ops.py [OP ...] [--json FILE] [--quick]

For each op: build inputs at the benchmark shape, check that PyPTO's output equals NumPy's, then
time both interleaved (rotating order, median of rounds; see pypto.bench.timing). The speedup is
NumPy's median over PyPTO's. NumPy runs with OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE unset (the
script re-executes itself without them); the BLAS it ran is printed when threadpoolctl is there.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys

if os.environ.get("OPENBLAS_CORETYPE") or os.environ.get("OPENBLAS_L2_SIZE"):
    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")}
    os.execve(sys.executable, [sys.executable, *sys.argv], env)

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

import pypto  # noqa: E402
from pypto.bench.inputs import complete_dims, make_inputs  # noqa: E402
from pypto.bench.timing import compare  # noqa: E402
from pypto.dtypes import tolerance  # noqa: E402

# Canonical named dims and params per op; elementwise ops default to 4M elements.
SHAPES: dict[str, tuple[dict, dict]] = {
    "matmul": ({"M": 1024, "K": 1024, "N": 1024}, {}),
    "batch_matmul": ({"B": 8, "M": 256, "K": 256, "N": 256}, {}),
    "linear": ({"R": 1024, "I": 1024, "O": 1024}, {}),
    "transpose": ({"R": 2048, "C": 2048}, {}),
    "batch_transpose": ({"B": 8, "R": 256, "C": 256, "E": 8}, {}),
    "quantized_matmul": ({"M": 512, "K": 512, "N": 512}, {}),
    "conv2d": ({"N": 1, "C": 64, "H": 56, "W": 56, "O": 64, "CG": 64, "KH": 3, "KW": 3},
               {"pad_h": 1, "pad_w": 1}),
    "depthwise_conv2d": ({"N": 1, "C": 256, "H": 56, "W": 56, "M": 1, "KH": 3, "KW": 3},
                         {"pad_h": 1, "pad_w": 1}),
    "max_pool2d": ({"N": 8, "C": 64, "H": 56, "W": 56}, {"kernel_h": 3, "kernel_w": 3, "stride_h": 2, "stride_w": 2, "pad_h": 1, "pad_w": 1}),
    "avg_pool2d": ({"N": 8, "C": 64, "H": 56, "W": 56}, {"kernel_h": 3, "kernel_w": 3, "stride_h": 2, "stride_w": 2, "pad_h": 1, "pad_w": 1}),
    "softmax": ({"R": 4096, "C": 1024}, {}),
    "log_softmax": ({"R": 4096, "C": 1024}, {}),
    "layer_norm": ({"R": 4096, "C": 1024}, {}),
    "rms_norm": ({"R": 4096, "C": 1024}, {}),
    "batch_norm": ({"N": 32, "C": 64, "S": 3136}, {}),
    "scaled_dot_product_attention": ({"B": 1, "H": 8, "S": 512, "L": 512, "D": 64, "E": 64}, {}),
    "lstm_cell": ({"B": 64, "IN": 512, "HID": 512, "G": 2048}, {}),
    "box_blur": ({"B": 1, "H": 4096, "W": 4096}, {}),
    "gaussian_blur": ({"B": 1, "H": 2048, "W": 2048}, {}),
    "sobel": ({"B": 1, "H": 2048, "W": 2048}, {}),
    "resize_bilinear": ({"B": 3, "H": 1024, "W": 1024}, {"height": 1536, "width": 1536}),
    "roi_align": ({"N": 2, "C": 64, "H": 64, "W": 64, "K": 128, "F": 5},
                  {"pooled_height": 7, "pooled_width": 7}),
    "anchor_boxes": ({"A": 9, "E": 4}, {"feat_h": 128, "feat_w": 128, "stride_h": 8.0, "stride_w": 8.0}),
    "sum": ({"O": 1, "R": 1 << 24}, {}),
    "quantize": ({"N": 1 << 22}, {"scale": 0.02, "zero_point": 3}),
    "dequantize": ({"N": 1 << 22}, {"scale": 0.02, "zero_point": 3}),
    "requantize": ({"N": 1 << 22}, {"scale": 0.001, "zero_point": 3}),
    "mean": ({"O": 2048, "R": 2048}, {}),
    "max": ({"O": 2048, "R": 2048}, {}),
    "min": ({"O": 2048, "R": 2048}, {}),
    "prod": ({"O": 2048, "R": 2048}, {}),
    "argmax": ({"O": 2048, "R": 2048}, {}),
    "argmin": ({"O": 2048, "R": 2048}, {}),
    "var": ({"O": 2048, "R": 2048}, {}),
    "std": ({"O": 2048, "R": 2048}, {}),
    "logsumexp": ({"O": 2048, "R": 2048}, {}),
}
ELEMENTS = 1 << 22


def bench_dims(op) -> tuple[dict, dict]:
    if op.name in SHAPES:
        return SHAPES[op.name]
    ex = dict(op.example or {d: 8 for d in op.input_dims})
    dims = list(op.input_dims)
    if len(dims) == 1:
        return {dims[0]: ELEMENTS}, {}
    if len(dims) == 2:
        return {dims[0]: ELEMENTS // 2048, dims[1]: 2048}, {}
    return ex, {}


def fmt(ms: float) -> str:
    return f"{ms:9.3f}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("ops", nargs="*")
    ap.add_argument("--json", default=None)
    ap.add_argument("--quick", action="store_true", help="fewer rounds")
    args = ap.parse_args()
    try:
        from threadpoolctl import threadpool_info

        blas = "; ".join(f"{i.get('internal_api')} {i.get('version')} ({i.get('architecture')}, "
                         f"{i.get('num_threads')} threads)" for i in threadpool_info())
    except ImportError:
        blas = "unknown (pip install threadpoolctl to see)"
    print(f"# {platform.processor() or platform.machine()}, numpy {np.__version__}, BLAS: {blas}")
    ops = [pypto.get_op(n) for n in args.ops] if args.ops else pypto.list_ops()
    rows = []
    print(f"{'op':<30}{'shape':<44}{'pypto ms':>10}{'numpy ms':>10}{'speedup':>9}")
    for op in ops:
        if op.category == "test":
            continue
        shape, params = bench_dims(op)
        try:
            params = op.resolve_params(params)
            dims = complete_dims(op, shape, params)
            dtypes = op.dtypes[0]
            arrays = make_inputs(op, dtypes, dims, params, seed=0)
            got = op.kernel(*arrays, **params)
            want = op.kernel_ref(*arrays, **params)
            got = got if isinstance(got, tuple) else (got,)
            want = want if isinstance(want, tuple) else (want,)
            for g, w in zip(got, want):
                rtol, atol = tolerance(np.asarray(w).dtype.name)
                scale = float(np.nanmax(np.abs(w))) if np.asarray(w).size else 1.0
                if not np.allclose(g, w, rtol=rtol * 10, atol=max(atol * 10, rtol * 10 * scale),
                                   equal_nan=True):
                    raise AssertionError("output differs from NumPy")
            res = compare({"pypto": lambda: op.kernel(*arrays, **params),
                           "numpy": lambda: op.kernel_ref(*arrays, **params)},
                          min_rounds=3 if args.quick else 7, max_rounds=9 if args.quick else 21,
                          budget_s=5 if args.quick else 20)
        except Exception as e:  # report and go on: one broken op must not hide the others
            print(f"{op.name:<30}FAILED: {type(e).__name__}: {str(e)[:120]}")
            rows.append({"op": op.name, "error": str(e)})
            continue
        p, n = res["pypto"].median, res["numpy"].median
        shape_text = ",".join(f"{k}={v}" for k, v in shape.items())
        print(f"{op.name:<30}{shape_text[:43]:<44}{fmt(p):>10}{fmt(n):>10}{n / p:>8.2f}x", flush=True)
        rows.append({"op": op.name, "category": op.category, "shape": shape, "params": params,
                     "pypto_ms": p, "numpy_ms": n, "speedup": n / p,
                     "pypto_spread": res["pypto"].spread, "numpy_spread": res["numpy"].spread})
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"blas": blas, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
