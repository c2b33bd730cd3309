"""Peak memory of one op call, PyPTO against NumPy and PyTorch, each in a fresh process.

A measurement runs in its own Python process so that nothing another measurement allocated (or
the allocator kept) counts: the child makes the inputs, compiles and warms the call up, then
resets the kernel's high-water mark of its resident memory (``/proc/self/clear_refs``), makes ONE
call and reads ``VmHWM``. The result is the increase over the resident memory just before the
call: ``peak_rss_bytes = VmHWM_after - VmRSS_before``. It counts the output, every temporary and
every buffer the implementation allocates, as pages the process actually touched.

glibc keeps freed memory for reuse, so a temporary freed by the warm-up call could be reused by
the measured call without raising the resident size; the child therefore runs with a fixed mmap
threshold (128 KiB), which makes every large block its own mapping, returned on free, for all
three implementations alike. NumPy runs with ``OPENBLAS_CORETYPE``/``OPENBLAS_L2_SIZE`` unset.

    python -m pypto.bench.memory study attention      # the two studies, as tables
    python -m pypto.bench.memory study elementwise
"""

from __future__ import annotations

import dataclasses
import gc
import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import ExecutionError

IMPLS = ("pypto", "numpy", "torch")
_MALLOC_ENV = {"MALLOC_MMAP_THRESHOLD_": "131072", "MALLOC_TRIM_THRESHOLD_": "131072"}

#: The two studies: how peak memory grows with size, for attention and an elementwise chain.
STUDIES: dict[str, dict[str, Any]] = {
    # NumPy's naive attention materializes the [S, L] scores (and temporaries of that size).
    "attention": {"op": "scaled_dot_product_attention", "dtypes": ("float32",) * 3,
                  "sizes": [{"B": 1, "H": 8, "S": n, "L": n, "D": 64, "E": 64}
                            for n in (512, 2048, 8192)]},
    # swiglu = silu(x) * y: NumPy makes one full-size temporary per step (-x, exp, 1+, /, *).
    "elementwise": {"op": "swiglu", "dtypes": ("float32", "float32"),
                    "sizes": [{"R": n, "C": n} for n in (1024, 2048, 4096)]},  # 1M, 4M, 16M
}


@dataclasses.dataclass
class MemoryResult:
    """Peak resident-memory increase of one call of one implementation (None: not measured)."""

    impl: str
    op: str
    dims: dict[str, int]
    dtypes: tuple[str, ...]
    peak_rss_bytes: int | None            # VmHWM after the call - VmRSS before it
    input_bytes: int = 0
    output_bytes: int = 0
    output_dtype: str | None = None
    halide_heap_peak_bytes: int | None = None   # pypto: Halide's intermediates at their peak
    schedule_source: str | None = None
    rss_source: str = ""                  # VmHWM (reset before the call) or a weaker fallback
    checked: bool | None = None           # output compared with the NumPy reference
    note: str = ""
    reason: str | None = None             # why there is no figure

    def to_json(self) -> dict:
        d = dataclasses.asdict(self)
        d["dtypes"] = list(self.dtypes)
        return d

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> MemoryResult:
        fields = {f.name for f in dataclasses.fields(cls)}
        d = {k: v for k, v in d.items() if k in fields}
        d["dtypes"] = tuple(d.get("dtypes", ()))
        return cls(**d)


def peak_memory(impl: str, op_name: str, dims: Mapping[str, int],
                params: Mapping[str, Any] | None = None, dtypes: Sequence[str] | None = None, *,
                check: bool = True, timeout_s: float = 900.0) -> MemoryResult:
    """Measures one call of ``impl`` ("pypto", "numpy" or "torch") in a fresh subprocess.

    Args:
        dims: the op's named input dims (its canonical form), e.g. ``{"R": 1024, "C": 1024}``.
        dtypes: one per input (default: the op's first signature).
        check: after measuring, compare the output with the NumPy reference (pypto, torch).
        timeout_s: the child is killed after this long and the result carries the reason.
    """
    if impl not in IMPLS:
        raise ValueError(f"impl must be one of {IMPLS}, got {impl!r}")
    req = {"impl": impl, "op": op_name, "dims": dict(dims), "params": dict(params or {}),
           "dtypes": list(dtypes) if dtypes else None, "check": check}
    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")}
    env.update(_MALLOC_ENV)
    base = MemoryResult(impl=impl, op=op_name, dims=dict(dims), dtypes=tuple(dtypes or ()),
                        peak_rss_bytes=None)
    try:
        r = subprocess.run([sys.executable, "-m", "pypto.bench.memory", "child", json.dumps(req)],
                           capture_output=True, text=True, timeout=timeout_s, env=env)
    except subprocess.TimeoutExpired:
        return dataclasses.replace(base, reason=f"timed out after {timeout_s:.0f} s")
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
    if r.returncode != 0 or not lines:
        tail = (r.stderr.strip().splitlines() or ["no output"])[-1]
        return dataclasses.replace(base, reason=f"the measuring process failed (exit {r.returncode}): "
                                                f"{tail[:300]}")
    return MemoryResult.from_json(json.loads(lines[-1]))


def memory_growth(op_name: str, sizes: Sequence[Mapping[str, int]], *,
                  impls: Sequence[str] = IMPLS, dtypes: Sequence[str] | None = None,
                  params: Mapping[str, Any] | None = None, check: bool = True,
                  timeout_s: float = 900.0) -> list[MemoryResult]:
    """Peak memory of every implementation at every size, one fresh process each, in turn."""
    return [peak_memory(impl, op_name, dims, params, dtypes, check=check, timeout_s=timeout_s)
            for dims in sizes for impl in impls]


def growth_table(results: Sequence[MemoryResult]) -> str:
    """Rows by size, a column per implementation: peak RSS increase (and Halide heap for pypto)."""
    from .profile import fmt_bytes

    impls = list(dict.fromkeys(r.impl for r in results))
    sizes: dict[str, dict[str, MemoryResult]] = {}
    for r in results:
        key = ",".join(f"{k}={v}" for k, v in r.dims.items())
        sizes.setdefault(key, {})[r.impl] = r
    lines = [f"{'shape':<34}{'output':>11}" + "".join(f"{i:>14}" for i in impls)
             + f"{'halide heap':>14}"]
    for key, row in sizes.items():
        first = next(iter(row.values()))
        cells = []
        for i in impls:
            r = row.get(i)
            cells.append("-" if r is None or r.peak_rss_bytes is None else fmt_bytes(r.peak_rss_bytes))
        heap = row.get("pypto")
        hh = "-" if heap is None or heap.halide_heap_peak_bytes is None else fmt_bytes(
            heap.halide_heap_peak_bytes)
        lines.append(f"{key[:33]:<34}{fmt_bytes(first.output_bytes):>11}"
                     + "".join(f"{c:>14}" for c in cells) + f"{hh:>14}")
    for r in results:
        if r.reason:
            lines.append(f"  {r.impl} [{','.join(f'{k}={v}' for k, v in r.dims.items())}]: {r.reason}")
    return "\n".join(lines)


# -- the measuring child ----------------------------------------------------------------------

def _nbytes(out) -> tuple[int, str | None]:
    outs = out if isinstance(out, (tuple, list)) else (out,)
    total, dt = 0, None
    for o in outs:
        if hasattr(o, "element_size"):  # a torch tensor
            total += int(o.numel() * o.element_size())
        else:
            total += int(o.nbytes)
        dt = str(o.dtype).replace("torch.", "")
    return total, dt


def _trim() -> None:
    gc.collect()
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def _measure(req: Mapping[str, Any]) -> dict:
    import numpy as np

    from ..infra.inputs import complete_dims, make_inputs
    from ..ops import get_op
    from .profile import peak_rss_bytes, profile_call, reset_peak_rss, rss_bytes

    impl = req["impl"]
    op = get_op(req["op"])
    params = op.resolve_params(req["params"])
    dims = complete_dims(op, req["dims"], params)
    dtypes = tuple(req["dtypes"]) if req["dtypes"] else op.dtypes[0]
    arrays = make_inputs(op, dtypes, dims, params)
    res = MemoryResult(impl=impl, op=op.name, dims={d: dims[d] for d in op.input_dims},
                       dtypes=dtypes, peak_rss_bytes=None,
                       input_bytes=int(sum(a.nbytes for a in arrays)))
    if impl == "pypto":
        from ..runtime import run_kernel
        from .harness import call_kernel

        kernel = call_kernel(op, dtypes, params, dims, arrays)
        res.schedule_source = kernel.source

        def fn():
            outs = run_kernel(kernel, op, arrays, dims)
            return outs[0] if len(outs) == 1 else tuple(outs)
    elif impl == "numpy":
        from .peers import numpy_peer

        fn, numpy_label = numpy_peer(op.name, arrays, params)  # the form that is timed
    else:
        from .peers import torch_available, torch_peer

        fn = torch_peer(op.name, arrays, params)
        if fn is None:
            res.reason = ("PyTorch is not installed" if not torch_available()
                          else f"no PyTorch peer for {op.name}")
            return res.to_json()
    out = fn()  # warm-up: compiled, caches and thread pools made
    res.output_bytes, res.output_dtype = _nbytes(out)
    del out
    _trim()
    before = rss_bytes()
    ok = reset_peak_rss()
    out = fn()
    peak, res.rss_source = peak_rss_bytes(ok)
    if peak is not None and before is not None:
        res.peak_rss_bytes = max(0, peak - before)
    if not ok:
        res.note = "the peak could not be reset: it is the process's lifetime peak minus the RSS before"
    if impl == "numpy":
        in_dt = {np.dtype(d).name for d in dtypes}
        res.note = (("the NumPy reference as written" if numpy_label != "numpy" else "the NumPy form that is timed")
                    + ", temporaries included"
                    + ("" if res.output_dtype in in_dt else
                       f"; it computes in {res.output_dtype}, not {'/'.join(sorted(in_dt))}"))
    if req.get("check") and impl != "numpy":
        got = np.asarray(out if impl == "pypto" else out.detach().numpy())
        del out
        _trim()
        res.checked = _agrees(op, arrays, params, got)
        if not res.checked:
            res.reason = "the output disagrees with the NumPy reference"
    if impl == "pypto":
        rep = profile_call(op, arrays, params, check=False)
        res.halide_heap_peak_bytes = rep.heap_peak_bytes
    return res.to_json()


def _agrees(op, arrays, params, got) -> bool:
    import numpy as np

    from ..infra.verify import mismatch

    want = op.kernel_ref(*arrays, **params)
    return mismatch(got, np.asarray(want[0] if isinstance(want, tuple) else want)) is None


def _child(arg: str) -> int:
    # Anything native code prints goes to stderr; the JSON reply alone goes to stdout.
    reply = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    try:
        out = _measure(json.loads(arg))
    except (ExecutionError, ValueError, KeyError, TypeError, MemoryError) as e:
        req = json.loads(arg)
        out = MemoryResult(impl=req["impl"], op=req["op"], dims=req["dims"],
                           dtypes=tuple(req["dtypes"] or ()), peak_rss_bytes=None,
                           reason=f"{type(e).__name__}: {e}").to_json()
    reply.write(json.dumps(out) + "\n")
    reply.flush()
    return 0


def main(argv: Sequence[str]) -> int:
    if len(argv) == 2 and argv[0] == "child":
        return _child(argv[1])
    if len(argv) >= 2 and argv[0] == "study" and argv[1] in STUDIES:
        from .harness import relative_paths

        s = STUDIES[argv[1]]
        results = memory_growth(s["op"], s["sizes"], dtypes=s["dtypes"])
        print(f"{s['op']}: peak RSS increase of one call (fresh process each)")
        print(growth_table(results))
        if len(argv) == 3:
            with open(argv[2], "w") as f:
                json.dump(relative_paths([r.to_json() for r in results]), f, indent=1)
        return 0
    print("usage: python -m pypto.bench.memory study {attention|elementwise} [OUT.json]",
          file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
