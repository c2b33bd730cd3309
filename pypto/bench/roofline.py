"""Machine roofs measured by kernels PyPTO builds itself: peak float32 FLOP/s and memory bandwidth.

The roofline of a machine has two roofs: the arithmetic peak and the memory bandwidth. Vendor
figures say what the silicon could do; what matters for PyPTO's kernels is what a Halide pipeline
compiled by PyPTO reaches here. So both roofs are measured with PyPTO's own machinery: each
microbenchmark is an :class:`~pypto.ops._op.Op` (built without registering it, so it never shows in
``pypto.list_ops()``), scheduled with explicit :class:`~pypto.schedule.schedule.Schedule` data,
compiled by :func:`~pypto.compiler.jit.compile_built`, run by :func:`~pypto.runtime.run_kernel`,
checked against NumPy and then timed with :func:`~pypto.infra.timing.compare`.

- ``fma``: every output element runs a chain of ``iters`` dependent multiply-adds
  ``a = a * b + c``. Independence comes from the vector: the output's innermost dim is vectorized
  by ``lanes x 8`` (64 float32 on AVX2, the grammar's cap), which LLVM splits into eight
  independent native FMAs per step, enough to cover the FMA latency of two pipes. ``b`` and ``c``
  are read from the input at run time so that LLVM cannot fold the chain into fewer operations
  (with constants it did, and a sum of two chains was reassociated into one: both reported
  impossible peaks). Each FMA counts 2 flops; :func:`fma_assembly` counts the fused instructions
  the compiler emitted, so the flop count can be checked.
- ``copy``, ``scale``, ``add``, ``triad``: STREAM's four kernels over arrays far larger than the
  last-level cache, vectorized and parallel. Bandwidth counts the bytes each kernel names (reads +
  writes), the STREAM convention: the write-allocate read of the destination that a CPU without
  streaming stores also does is *not* counted, so the DRAM traffic is 1.5x (copy, scale) or 1.33x
  (add, triad) of what is reported.

Run ``python -m pypto.bench.roofline`` to print this machine's roofs.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import math
import os
import re
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import halide as hl
import numpy as np

from ..compiler import targets
from ..compiler.jit import Kernel, compile_built
from ..compiler.lower import build
from ..errors import ParamError, PyptoError, ShapeError, TargetError
from ..infra.timing import compare
from ..infra.verify import mismatch
from ..infra.version import cpu_model
from ..ops._op import Op, Param, op
from ..runtime import run_kernel
from ..schedule.defaults import vector_lanes
from ..schedule.directives import LIMITS, Directive
from ..schedule.schedule import Schedule

__all__ = ["Roofs", "Microbench", "MicrobenchmarkError", "microbenchmarks", "verify",
           "measure_roofs", "fma_assembly", "plot_roofline"]

D = Directive.make

# The chain a = a * B + C with B = _B0 + x[0] * _B1 and C = x[1] * _C1: B stays just under 1, so the
# chain converges and the float32 rounding of NumPy's separate multiply and add stays close to the
# fused result.
_B0, _B1, _C1 = 0.999, 1e-4, 1e-3
_ACCUMULATORS = 8          # independent native vectors per step (FMA latency x FMA pipes)
_STREAM_UNROLL = 4         # native vectors per step in the STREAM kernels
_TASK_ELEMS = 1 << 16      # elements of one parallel task in the STREAM kernels
_FMA_TASK_ROWS = 64        # output rows of one parallel task in the FMA kernel


class MicrobenchmarkError(PyptoError, RuntimeError):
    """A roofline microbenchmark computed a wrong result, or cannot run on the chosen target."""


# -- the microbenchmark ops (algorithms only; never registered) -----------------------------------

def _fma_ref(x, *, iters: int, rows: int):
    x = np.asarray(x, dtype=np.float32)
    b = np.float32(_B0) + x[0] * np.float32(_B1)
    c = x[1] * np.float32(_C1)
    a = x[None, :] + (np.arange(rows) % 16).astype(np.float32)[:, None] * np.float32(1 / 16)
    for _ in range(iters):
        np.multiply(a, b, out=a)
        np.add(a, c, out=a)
    return a


def _fma_validate(dims, params):
    if dims["N"] < 2:
        raise ShapeError("roofline_fma: x needs at least 2 elements (x[0] and x[1] set the chain)")


@op(category="roofline", inputs={"x": "N"}, output="R N", dtypes=["float32"], register=False,
    params=[Param("iters", int, 256, low=1, high=1024, doc="multiply-adds per output element"),
            Param("rows", int, 1024, low=1, high=1 << 24, doc="output rows")],
    derive=lambda dims, p: {"R": p["rows"]}, validate=_fma_validate, reference=_fma_ref)
def roofline_fma(x, *, iters, dims):
    """out[r, n] = the chain a = a * b + c run ``iters`` times from x[n] + (r % 16) / 16."""
    n, r = hl.Var("n"), hl.Var("r")
    f32 = hl.Float(32)
    b = hl.f32(_B0) + x[0] * hl.f32(_B1)  # read at run time: LLVM may not fold the chain
    c = x[1] * hl.f32(_C1)
    a = x[n] + hl.cast(f32, r % 16) * hl.f32(1 / 16)
    for _ in range(iters):  # unrolled in the expression: no loop, no loads, only FMAs
        a = a * b + c
    out = hl.Func("out")
    out[n, r] = a
    return out


_SCALE = Param("scale", float, 3.0, doc="the scalar of scale and triad")


def _stream(inputs: str, ref: Callable, params: Sequence[Param] = ()):
    """Declares one STREAM kernel: an unregistered op over 1-D float32 arrays of N elements."""
    return op(category="roofline", inputs={k: "N" for k in inputs.split()}, output="N",
              dtypes=["float32"], params=params, reference=ref, register=False)


@_stream("b", lambda b: np.array(b, dtype=np.float32))
def roofline_copy(b):
    """out = b"""
    n = hl.Var("n")
    out = hl.Func("out")
    out[n] = b[n]
    return out


@_stream("b", lambda b, scale: b * np.float32(scale), [_SCALE])
def roofline_scale(b, *, scale):
    """out = scale * b"""
    n = hl.Var("n")
    out = hl.Func("out")
    out[n] = hl.f32(scale) * b[n]
    return out


@_stream("b c", lambda b, c: b + c)
def roofline_add(b, c):
    """out = b + c"""
    n = hl.Var("n")
    out = hl.Func("out")
    out[n] = b[n] + c[n]
    return out


@_stream("b c", lambda b, c, scale: b + np.float32(scale) * c, [_SCALE])
def roofline_triad(b, c, *, scale):
    """out = b + scale * c"""
    n = hl.Var("n")
    out = hl.Func("out")
    out[n] = b[n] + hl.f32(scale) * c[n]
    return out


#: name -> (op, arrays the kernel names: reads + writes, for the STREAM byte count)
_STREAM: dict[str, tuple[Op, int]] = {"copy": (roofline_copy, 2), "scale": (roofline_scale, 2),
                                      "add": (roofline_add, 3), "triad": (roofline_triad, 3)}


# -- schedules (data) ----------------------------------------------------------------------------

def _fma_schedule(lanes: int) -> Schedule:
    vec = min(LIMITS["vector"], lanes * _ACCUMULATORS)
    return Schedule(op=roofline_fma.name, directives=(
        D("vectorize", "out", var="n", factor=vec),
        D("parallel", "out", var="r", factor=_FMA_TASK_ROWS, tail="guard_with_if"),
    ))


def _stream_schedule(op_name: str, lanes: int) -> Schedule:
    vec = min(LIMITS["vector"], lanes * _STREAM_UNROLL)
    return Schedule(op=op_name, directives=(
        D("split", "out", var="n", outer="task", inner="ni", factor=_TASK_ELEMS,
          tail="guard_with_if"),
        D("vectorize", "out", var="ni", factor=vec),
        D("parallel", "out", var="task"),
    ))


# -- building, running, checking -----------------------------------------------------------------

@dataclasses.dataclass
class Microbench:
    """One compiled microbenchmark with its inputs, ready to run.

    Attributes:
        name: ``fma``, ``copy``, ``scale``, ``add`` or ``triad``.
        work: flops (``fma``) or bytes named by the kernel (the others) of one call.
        unit: ``"flop"`` or ``"byte"``.
    """

    name: str
    op: Op
    kernel: Kernel
    arrays: list[np.ndarray]
    params: dict[str, Any]
    dims: dict[str, int]
    work: float
    unit: str
    out: np.ndarray = dataclasses.field(repr=False, default=None)

    def __post_init__(self):
        if self.out is None:
            self.out = np.empty(tuple(self.dims[d] for d in self.op.outputs[0].dims), np.float32)

    def run(self) -> np.ndarray:
        """Runs the kernel once into the preallocated output and returns it."""
        run_kernel(self.kernel, self.op, self.arrays, self.dims, out=[self.out])
        return self.out

    def reference(self) -> np.ndarray:
        return np.asarray(self.op.kernel_ref(*self.arrays, **self.params))


def _host_target(target) -> hl.Target:
    t = targets.parse(target) if target is not None else targets.current()
    if t.has_gpu_feature():
        raise TargetError(f"the roofline microbenchmarks measure CPU targets; {t} has a GPU "
                          "feature (its arrays would be copied to the device on every call)")
    return t


def _make(name: str, the_op: Op, arrays: list[np.ndarray], params: Mapping[str, Any],
          schedule: Schedule, target: hl.Target, work: float, unit: str) -> Microbench:
    params = the_op.resolve_params(params)
    dims = {d: n for spec, a in zip(the_op.inputs, arrays) for d, n in zip(spec.dims, a.shape)}
    if the_op.derive is not None:
        dims.update(the_op.derive(dims, params))
    built = build(the_op, ("float32",) * len(the_op.inputs), params)
    kernel = compile_built(built, schedule, target, source="roofline")
    return Microbench(name=name, op=the_op, kernel=kernel, arrays=arrays, params=params,
                      dims=dims, work=float(work), unit=unit)


def microbenchmarks(target=None, *, quick: bool = False, stream_elems: int | None = None,
                    fma_rows: int | None = None, fma_iters: int | None = None,
                    only: Sequence[str] | None = None) -> dict[str, Microbench]:
    """Builds and compiles the microbenchmarks for ``target`` (default: the current one).

    Full sizes: 32M float32 per STREAM array (128 MiB, four times a 32 MiB L3), an FMA kernel of
    32768 x 64 chains of 256 multiply-adds (1.07 GFLOP a call). ``quick`` uses sizes a test can
    afford, with a ragged tail so that the guarded task split is exercised.
    """
    t = _host_target(target)
    lanes = vector_lanes(t, "float32")
    n_stream = stream_elems or ((1 << 16) * 3 + 37 if quick else 1 << 25)
    rows = fma_rows or (70 if quick else 1 << 15)
    iters = fma_iters or (16 if quick else 256)
    rng = np.random.default_rng(0)
    out: dict[str, Microbench] = {}
    wanted = set(only) if only is not None else {"fma", *_STREAM}
    if wanted - {"fma", *_STREAM}:
        raise ParamError(f"microbenchmarks: unknown kernel(s) {sorted(wanted - {'fma', *_STREAM})};"
                         f" known: fma, {', '.join(_STREAM)}")
    if "fma" in wanted:
        width = min(LIMITS["vector"], lanes * _ACCUMULATORS)
        x = rng.uniform(-1.0, 1.0, width).astype(np.float32)
        out["fma"] = _make("fma", roofline_fma, [x], {"iters": iters, "rows": rows},
                           _fma_schedule(lanes), t, work=2.0 * iters * rows * width, unit="flop")
    b = c = None
    for name, (the_op, arrays_named) in _STREAM.items():
        if name not in wanted:
            continue
        if b is None:
            b = rng.uniform(-1.0, 1.0, n_stream).astype(np.float32)
            c = rng.uniform(-1.0, 1.0, n_stream).astype(np.float32)
        arrays = [b, c][:len(the_op.inputs)]
        out[name] = _make(name, the_op, arrays, {}, _stream_schedule(the_op.name, lanes), t,
                          work=4.0 * arrays_named * n_stream, unit="byte")
    return out


def verify(bench: Microbench) -> None:
    """Runs ``bench`` once over a poisoned output and compares it with NumPy.

    Raises MicrobenchmarkError naming the kernel when an element differs beyond float32 rounding:
    the STREAM kernels may differ only by the fused multiply-add of triad, the FMA chain by the
    rounding NumPy's separate multiply and add accumulate over the chain.
    """
    rtol, atol = (1e-4, 1e-5) if bench.unit == "flop" else (1e-6, 1e-6)
    bench.out.fill(np.nan)
    got = bench.run()
    why = mismatch(got, bench.reference(), (rtol, atol))
    if why:
        raise MicrobenchmarkError(f"roofline microbenchmark {bench.name!r} differs from NumPy: "
                                  f"{why}; its timing would be meaningless")


# -- the roofs -----------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Roofs:
    """The measured roofs of one machine and target.

    Attributes:
        peak_gflops: float32 FMA throughput, 2 flops per FMA, all threads.
        bandwidth_gbs: GB/s (1e9 bytes) per STREAM kernel, reads + writes named by the kernel.
        threads: Halide worker threads (``HL_NUM_THREADS`` or the CPU count).
        cpu: the CPU model from /proc/cpuinfo.
        target: the Halide target string the kernels were compiled for.
        date: when it was measured (UTC, ISO 8601).
        spread: relative inter-quartile range of each kernel's samples.
        quick: measured at test sizes (in cache, not a real roof).
        sizes: the problem sizes measured (STREAM elements, FMA rows, width and chain length).
    """

    peak_gflops: float
    bandwidth_gbs: dict[str, float]
    threads: int
    cpu: str
    target: str
    date: str
    spread: dict[str, float] = dataclasses.field(default_factory=dict)
    quick: bool = False
    sizes: dict[str, int] = dataclasses.field(default_factory=dict)

    @property
    def best_bandwidth_gbs(self) -> float:
        """The highest STREAM bandwidth: the memory roof of the chart."""
        return max(self.bandwidth_gbs.values())

    @property
    def ridge(self) -> float:
        """Arithmetic intensity (flop/byte) where the two roofs meet."""
        return self.peak_gflops / self.best_bandwidth_gbs

    def attainable_gflops(self, intensity: float) -> float:
        """The roofline at ``intensity`` flop/byte: min(peak, intensity x bandwidth)."""
        return min(self.peak_gflops, intensity * self.best_bandwidth_gbs)

    def to_json(self) -> dict:
        return dataclasses.asdict(self)

    @staticmethod
    def from_json(obj: Mapping[str, Any]) -> "Roofs":
        return Roofs(**{f.name: obj[f.name] for f in dataclasses.fields(Roofs) if f.name in obj})

    def __str__(self) -> str:
        lines = [f"machine: {self.cpu}, {self.threads} threads",
                 f"target:  {self.target}",
                 f"date:    {self.date}{'  (quick sizes: not real roofs)' if self.quick else ''}",
                 f"peak float32: {self.peak_gflops:8.1f} GFLOP/s  (FMA = 2 flops, spread "
                 f"{self.spread.get('fma', 0):.0%})"]
        for k, v in self.bandwidth_gbs.items():
            lines.append(f"{k:>12}: {v:8.1f} GB/s     (spread {self.spread.get(k, 0):.0%})")
        lines.append(f"memory roof: {self.best_bandwidth_gbs:.1f} GB/s (best STREAM kernel; "
                     "write-allocate traffic not counted)")
        lines.append(f"ridge point: {self.ridge:.2f} flop/byte")
        return "\n".join(lines)


def thread_count() -> int:
    env = os.environ.get("HL_NUM_THREADS", "")
    return int(env) if env.isdigit() and int(env) > 0 else (os.cpu_count() or 1)


def measure_roofs(target=None, quick: bool = False) -> Roofs:
    """Builds, checks and times the microbenchmarks; returns the roofs.

    Every kernel is verified against NumPy first (:func:`verify`), then all are timed interleaved
    with :func:`~pypto.infra.timing.compare`; the roofs are work / median time.
    """
    benches = microbenchmarks(target, quick=quick)
    for b in benches.values():
        verify(b)
    opts = dict(min_rounds=2, max_rounds=3, budget_s=2.0, warmup=1) if quick else \
        dict(min_rounds=7, max_rounds=25, budget_s=40.0, warmup=2)
    times = compare({n: b.run for n, b in benches.items()}, **opts)
    rate = {n: benches[n].work / (times[n].median * 1e-3) / 1e9 for n in benches}
    t = benches["fma"].kernel.target
    return Roofs(peak_gflops=rate["fma"],
                 bandwidth_gbs={n: rate[n] for n in _STREAM},
                 threads=thread_count(), cpu=cpu_model(), target=t,
                 date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                 spread={n: times[n].spread for n in benches}, quick=quick,
                 sizes={"stream_elems": benches["copy"].dims["N"],
                        "fma_rows": benches["fma"].dims["R"], "fma_width": benches["fma"].dims["N"],
                        "fma_iters": benches["fma"].params["iters"]})


def fma_assembly(target=None, *, iters: int = 32) -> dict[str, Any]:
    """Compiles the FMA kernel to assembly and counts its arithmetic instructions.

    Returns ``{"fused": n, "mul": n, "add": n, "register": "ymm", "per_body": n, "text": ...}``
    where ``fused`` counts packed vfmadd/vfmsub/vfnmadd instructions in the whole file and
    ``per_body`` the fused instructions one pass of the chain needs. The flop count of the
    benchmark assumes every multiply-add is fused: ``mul == add == 0`` with ``fused`` a multiple of
    ``per_body`` shows it (the body appears more than once: Halide's vector loop, its tail, and
    copies LLVM makes). x86 mnemonics only; other ISAs report 0.
    """
    t = _host_target(target)
    lanes = vector_lanes(t, "float32")
    width = min(LIMITS["vector"], lanes * _ACCUMULATORS)
    params = roofline_fma.resolve_params({"iters": iters, "rows": 64})
    built = build(roofline_fma, ("float32",), params)
    from ..schedule.apply import apply_schedule

    apply_schedule(built, _fma_schedule(lanes))
    aot = t.without_feature(hl.TargetFeature.JIT)
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "fma.s")
        built.pipeline.compile_to_assembly(path, built.images, "roofline_fma", aot)
        with open(path) as f:
            text = f.read()
    packed = r"ps\s+%([xyz]mm)"
    fused = re.findall(r"\bvf(?:n?madd|n?msub)\w*" + packed, text)
    return {"fused": len(fused), "mul": len(re.findall(r"\bvmul" + packed, text)),
            "add": len(re.findall(r"\bvadd" + packed, text)),
            "register": max(set(fused), key=fused.count) if fused else "",
            "per_body": iters * width // max(lanes, 1), "text": text}


# -- the chart -----------------------------------------------------------------------------------

_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")


def plot_roofline(points: Sequence[Mapping[str, Any]], roofs: Roofs, path: str, *,
                  title: str = "Roofline") -> str:
    """Writes a log-log roofline chart of ``points`` under ``roofs`` to the PNG file ``path``.

    Args:
        points: mappings with ``label``, ``intensity`` (flop/byte) and ``gflops``, such as
            :func:`pypto.bench.cost.place` results with a label added; an optional ``series``
            (``"PyPTO"``, ``"NumPy"``...) gives each series its own marker and legend entry.
            Points with zero flops cannot sit on a log axis and are left out.
        roofs: the measured roofs (:func:`measure_roofs`).
        path: the PNG file to write.
        title: the first title line; the machine, threads, target and date form the second.

    Returns:
        ``path``.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg  # optional dependency: lazy
    from matplotlib.figure import Figure

    shown = [p for p in points if p.get("intensity", 0) > 0 and p.get("gflops", 0) > 0
             and math.isfinite(p["intensity"])]
    xs = [p["intensity"] for p in shown] + [roofs.ridge]
    lo, hi = min(xs) / 4, max(xs) * 4
    fig = Figure(figsize=(10, 6.5))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    grid = np.geomspace(lo, hi, 256)
    bw = roofs.best_bandwidth_gbs
    kernel = max(roofs.bandwidth_gbs, key=roofs.bandwidth_gbs.get)
    ax.plot(grid, np.minimum(roofs.peak_gflops, grid * bw), color="black", lw=2,
            label="attainable: min(peak, intensity x bandwidth)")
    ax.axhline(roofs.peak_gflops, color="tab:red", ls="--", lw=1,
               label=f"compute roof {roofs.peak_gflops:.0f} GFLOP/s (float32 FMA kernel)")
    ax.plot(grid, grid * bw, color="tab:blue", ls="--", lw=1,
            label=f"memory roof {bw:.1f} GB/s (STREAM {kernel})")
    ax.axvline(roofs.ridge, color="grey", ls=":", lw=1,
               label=f"ridge point {roofs.ridge:.2f} flop/byte")
    series: dict[str, list] = {}
    for p in shown:
        series.setdefault(str(p.get("series", "measured")), []).append(p)
    for i, (name, pts) in enumerate(series.items()):
        ax.scatter([p["intensity"] for p in pts], [p["gflops"] for p in pts],
                   marker=_MARKERS[i % len(_MARKERS)], s=40, zorder=3, label=name)
        for p in pts:
            ax.annotate(str(p.get("label", "")), (p["intensity"], p["gflops"]),
                        textcoords="offset points", xytext=(5, 4), fontsize=7)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ys = [p["gflops"] for p in shown] + [roofs.peak_gflops, lo * bw]
    ax.set_ylim(min(ys) / 3, max(roofs.peak_gflops, *ys) * 3)
    ax.set_xlabel("arithmetic intensity (flop / byte of compulsory traffic)")
    ax.set_ylabel("attained performance (GFLOP/s)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="lower right", fontsize=8)
    quick = " (quick sizes: not real roofs)" if roofs.quick else ""
    ax.set_title(f"{title}\n{roofs.cpu}, {roofs.threads} threads, {roofs.target}, "
                 f"{roofs.date[:10]}{quick}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120, format="png")
    return path


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m pypto.bench.roofline",
                                 description="Measure this machine's roofs with PyPTO kernels.")
    ap.add_argument("--target", default=None, help="a CPU target (default: host)")
    ap.add_argument("--quick", action="store_true", help="test sizes (seconds, not real roofs)")
    ap.add_argument("--json", default=None, help="also write the roofs to this JSON file")
    args = ap.parse_args(argv)
    try:
        asm = fma_assembly(args.target)
        print(f"FMA kernel assembly (iters=32): {asm['fused']} packed FMA instructions on "
              f"{asm['register'] or '-'} ({asm['per_body']} per copy of the chain), "
              f"{asm['mul']} vmulps, {asm['add']} vaddps")
        roofs = measure_roofs(args.target, quick=args.quick)
    except PyptoError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(roofs)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(roofs.to_json(), f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
