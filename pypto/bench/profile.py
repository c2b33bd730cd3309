"""Per-call profiles: Halide's sampling profiler report as data, plus the process's peak RSS.

Compiling with the target feature ``profile`` makes Halide run a sampling thread beside the
pipeline (one sample a millisecond) and count every heap allocation of its intermediates. The
report is text printed through ``halide_print``: JIT-compiled pipelines print it to standard
output after each call, and shared objects from the compile cache keep it until asked
(``halide_profiler_report``) and print through a handler we install. Either way it is captured,
parsed into :class:`ProfileReport`, and the counters are reset so each call reports only itself.

    >>> import numpy as np, pypto
    >>> with pypto.profile() as prof:
    ...     y = pypto.ops.softmax(np.ones((4, 8), np.float32))
    >>> prof.calls[0].op, sorted(prof.calls[0].dims.items())
    ('softmax', [('C', 8), ('R', 4)])

Percentages and per-Func times come from samples: a call shorter than the sampling period often
gets none (``samples == 0``; its time is then unattributed). :func:`profile_call` repeats the call
until enough samples arrive. Capturing the JIT report redirects file descriptor 1 for the length
of the call, so text another thread prints at that moment is captured with it (and echoed back).
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import os
import re
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from typing import Any

from ..infra.profiling import collecting

#: Rows Halide adds for its own work rather than for a Func of the algorithm.
INTERNAL_ROWS = frozenset({"overhead", "halide_malloc", "halide_free",
                           "waiting for parallel tasks to finish"})


@dataclasses.dataclass
class FuncProfile:
    """One row of the report: a Func (or stage, or one of Halide's own rows) and its share."""

    name: str
    ms: float                      # time per call, from samples
    percent: float                 # share of the sampled time
    threads: float | None = None   # average busy threads (None: the pipeline ran serially)
    heap_peak_bytes: int = 0       # peak heap bytes of this Func's allocations
    allocations: float = 0.0       # heap allocations per call
    avg_alloc_bytes: int = 0
    stack_bytes: int = 0           # peak stack bytes (small buffers Halide keeps on the stack)

    @property
    def internal(self) -> bool:
        return self.name in INTERNAL_ROWS


@dataclasses.dataclass
class ProfileReport:
    """What one profiled call (or a run of identical calls) cost, time and memory."""

    op: str
    dims: dict[str, int]
    dtypes: tuple[str, ...]
    target: str
    schedule_source: str
    runs: int
    total_ms: float                # wall time per call inside the pipeline
    samples: int                   # profiler samples behind the percentages (0: none attributed)
    threads: float | None          # average busy threads (None: serial)
    heap_allocations: float        # heap allocations of intermediates per call
    heap_peak_bytes: int           # peak bytes Halide had allocated for intermediates at once
    funcs: list[FuncProfile]
    peak_rss_bytes: int | None     # process peak resident memory during the call(s)
    rss_before_bytes: int | None   # resident memory just before
    rss_source: str                # "VmHWM" (reset before the call) or "getrusage" (process lifetime)
    text: str = ""                 # Halide's report as printed

    @property
    def rss_increase_bytes(self) -> int | None:
        if self.peak_rss_bytes is None or self.rss_before_bytes is None:
            return None
        return max(0, self.peak_rss_bytes - self.rss_before_bytes)

    @property
    def shape(self) -> str:
        return ",".join(f"{k}={v}" for k, v in self.dims.items())

    def func(self, name: str) -> FuncProfile:
        for f in self.funcs:
            if f.name == name:
                return f
        raise KeyError(f"no Func {name!r} in the profile of {self.op}; "
                       f"have {[f.name for f in self.funcs]}")

    def by_time(self) -> list[FuncProfile]:
        return sorted(self.funcs, key=lambda f: (-f.ms, -f.heap_peak_bytes, f.name))

    def to_json(self) -> dict:
        d = dataclasses.asdict(self)
        d["dtypes"] = list(self.dtypes)
        d["rss_increase_bytes"] = self.rss_increase_bytes
        return d

    def table(self) -> str:
        """A readable table: the Funcs by time with their heap use, then the totals."""
        head = (f"{self.op} [{self.shape}] {'/'.join(self.dtypes)} on {self.target} "
                f"({self.schedule_source} schedule), {self.runs} run(s)")
        lines = [head, f"  {'Func':<28}{'ms':>10}{'%':>7}{'threads':>9}{'heap peak':>12}"
                       f"{'allocs':>8}{'stack':>8}"]
        for f in self.by_time():
            if f.internal and f.ms == 0 and not f.heap_peak_bytes:
                continue
            thr = "-" if f.threads is None else f"{f.threads:.2f}"
            lines.append(f"  {f.name[:27]:<28}{f.ms:>10.4f}{f.percent:>7.1f}{thr:>9}"
                         f"{fmt_bytes(f.heap_peak_bytes):>12}{f.allocations:>8.4g}"
                         f"{fmt_bytes(f.stack_bytes):>8}")
        note = "" if self.samples else " (no samples: the call is shorter than the 1 ms sampling period)"
        lines.append(f"  total {self.total_ms:.4f} ms per call, {self.samples} samples{note}")
        lines.append(f"  Halide heap: peak {fmt_bytes(self.heap_peak_bytes)}, "
                     f"{self.heap_allocations:.4g} allocation(s) per call")
        if self.peak_rss_bytes is not None:
            inc = self.rss_increase_bytes
            lines.append(f"  process RSS: peak {fmt_bytes(self.peak_rss_bytes)} "
                         f"(+{fmt_bytes(inc or 0)} over {fmt_bytes(self.rss_before_bytes or 0)} "
                         f"before; {self.rss_source})")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.table()


def fmt_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


# -- parsing Halide's report ------------------------------------------------------------------

_TOTAL = re.compile(r"^\s+total time:\s*([\d.eE+-]+) ms\s+samples:\s*(\d+)\s+runs:\s*(\d+)")
_THREADS = re.compile(r"^\s+average threads used:\s*([\d.eE+-]+)")
_HEAP = re.compile(r"^\s+heap allocations:\s*(\d+)\s+peak heap usage:\s*(\d+) bytes")
_ROW = re.compile(r"^\s+(?P<name>\S.*?):\s+(?P<ms>[\d.eE+-]+)ms\s+\(\s*(?P<pct>[\d.]+)%\)(?P<rest>.*)$")
_UNIQUE = re.compile(r"\$\d+")   # the suffix Halide adds to keep Func names unique in a process
_FIELDS = {"threads": re.compile(r"threads:\s*([\d.]+)"), "peak": re.compile(r"peak:\s*(\d+)"),
           "num": re.compile(r"num:\s*(\d+)"), "avg": re.compile(r"avg:\s*(\d+)"),
           "stack": re.compile(r"stack:\s*(\d+)")}


@dataclasses.dataclass
class _Block:
    """One pipeline's part of a report, as printed (times total over ``runs``)."""

    name: str
    total_ms: float
    samples: int
    runs: int
    threads: float | None = None
    allocations: int = 0
    heap_peak: int = 0
    rows: list[dict] = dataclasses.field(default_factory=list)


def parse_report(text: str) -> tuple[list[_Block], str]:
    """Halide's report text -> (one block per pipeline, the lines that were not part of it)."""
    blocks: list[_Block] = []
    other: list[str] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        m = _TOTAL.match(lines[i + 1]) if i + 1 < len(lines) else None
        if m is None or not lines[i] or lines[i][0].isspace():
            other.append(lines[i])
            i += 1
            continue
        b = _Block(lines[i].strip(), float(m.group(1)), int(m.group(2)), int(m.group(3)))
        i += 2
        while i < len(lines) and lines[i][:1].isspace():
            line = lines[i]
            if (t := _THREADS.match(line)) is not None:
                b.threads = float(t.group(1))
            elif (h := _HEAP.match(line)) is not None:
                b.allocations, b.heap_peak = int(h.group(1)), int(h.group(2))
            elif (r := _ROW.match(line)) is not None:
                row = {"name": _UNIQUE.sub("", r.group("name").strip()), "ms": float(r.group("ms")),
                       "pct": float(r.group("pct"))}
                for key, rx in _FIELDS.items():
                    f = rx.search(r.group("rest"))
                    row[key] = float(f.group(1)) if f else None
                b.rows.append(row)
            else:
                break
            i += 1
        blocks.append(b)
    return blocks, "\n".join(other)


def combine(blocks: Sequence[_Block]) -> dict:
    """Merges the blocks of several runs: shares weighted by each run's time, peaks as maxima."""
    runs = sum(b.runs for b in blocks) or 1
    total = sum(b.total_ms for b in blocks)
    per_call = total / runs
    weight: dict[str, float] = {}
    threads: dict[str, list[tuple[float, float]]] = {}
    mem: dict[str, dict[str, float]] = {}
    for b in blocks:
        for r in b.rows:
            name = r["name"]
            w = r["pct"] / 100.0 * b.total_ms if b.samples else 0.0
            weight[name] = weight.get(name, 0.0) + w
            if r["threads"] is not None:
                threads.setdefault(name, []).append((r["threads"], w))
            m = mem.setdefault(name, {"peak": 0, "num": 0, "avg": 0, "stack": 0})
            m["peak"] = max(m["peak"], r["peak"] or 0)
            m["avg"] = max(m["avg"], r["avg"] or 0)
            m["stack"] = max(m["stack"], r["stack"] or 0)
            m["num"] += r["num"] or 0
    sampled = sum(weight.values())
    funcs = []
    for name, w in weight.items():
        pct = min(100.0, 100.0 * w / sampled) if sampled else 0.0
        thr = threads.get(name)
        avg_thr = None
        if thr:
            tw = sum(x for _, x in thr)
            avg_thr = sum(t * x for t, x in thr) / tw if tw else sum(t for t, _ in thr) / len(thr)
        m = mem[name]
        funcs.append(FuncProfile(name=name, ms=pct / 100.0 * per_call, percent=pct, threads=avg_thr,
                                 heap_peak_bytes=int(m["peak"]), allocations=m["num"] / runs,
                                 avg_alloc_bytes=int(m["avg"]), stack_bytes=int(m["stack"])))
    par = [(b.threads, b.total_ms) for b in blocks if b.threads is not None]
    return dict(runs=runs, total_ms=per_call, samples=sum(b.samples for b in blocks),
                threads=(sum(t * w for t, w in par) / (sum(w for _, w in par) or 1)) if par else None,
                heap_allocations=sum(b.allocations for b in blocks) / runs,
                heap_peak_bytes=max((b.heap_peak for b in blocks), default=0), funcs=funcs)


# -- resident memory --------------------------------------------------------------------------

def _status_kb(field: str) -> int | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def reset_peak_rss() -> bool:
    """Resets the kernel's high-water mark of this process's RSS (Linux); False if it cannot."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def rss_bytes() -> int | None:
    kb = _status_kb("VmRSS")
    return None if kb is None else kb * 1024


def peak_rss_bytes(reset_worked: bool = True) -> tuple[int | None, str]:
    """(peak RSS, its source): VmHWM when the reset worked, else getrusage's lifetime peak."""
    kb = _status_kb("VmHWM") if reset_worked else None
    if kb is not None:
        return kb * 1024, "VmHWM"
    try:
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, "getrusage (process lifetime)"
    except (ImportError, OSError):
        return None, "unavailable"


# -- capturing the report ---------------------------------------------------------------------

_libc = ctypes.CDLL(None)
_PRINT = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_char_p)


@contextlib.contextmanager
def _stdout_captured():
    """Points file descriptor 1 at a temporary file for the block; yields a list for the text."""
    sys.stdout.flush()
    _libc.fflush(None)
    saved = os.dup(1)
    box: list[str] = []
    with tempfile.TemporaryFile() as tmp:
        os.dup2(tmp.fileno(), 1)
        try:
            yield box
        finally:
            _libc.fflush(None)
            os.dup2(saved, 1)
            os.close(saved)
            tmp.seek(0)
            box.append(tmp.read().decode("utf-8", "replace"))


def _call_disk(fn, args) -> str:
    """Runs a cached shared object's kernel and asks its own runtime for the report."""
    lib = fn.lib
    chunks: list[str] = []

    @_PRINT
    def collect(_ctx, msg):
        chunks.append(msg.decode("utf-8", "replace") if msg else "")

    lib.halide_set_custom_print.restype = ctypes.c_void_p
    lib.halide_set_custom_print.argtypes = [ctypes.c_void_p]
    old = lib.halide_set_custom_print(ctypes.cast(collect, ctypes.c_void_p))
    try:
        fn(*args)
        lib.halide_profiler_report(None)
        # Only after a call that finished: Halide's runtime aborts the process when asked to
        # reset its profiler while a failed call's pipeline still counts as running.
        lib.halide_profiler_reset()
    finally:
        lib.halide_set_custom_print(old)
    return "".join(chunks)


@dataclasses.dataclass
class _Seen:
    """What one captured call left: its report blocks and text, and resident memory around it."""

    blocks: list[_Block]
    text: str
    rss_before: int | None
    rss_peak: int | None
    rss_source: str


class _Profiled:
    """Stands in for a kernel's callable: runs it, captures and parses the report, passes it on."""

    def __init__(self, inner, disk: bool, sink, probe=None):
        self.inner, self.disk, self.sink, self.probe = inner, disk, sink, probe

    def __call__(self, *args):
        if self.probe is not None:
            # A stored schedule may not fit this shape. Unprofiled, that is a clean error (and
            # the caller falls back to the default); profiled, Halide's runtime crashes the process
            # when a call fails, so the plain kernel runs first and raises in its place.
            self.probe(*args)
        before = rss_bytes()
        ok = reset_peak_rss()
        if self.disk:
            text = _call_disk(self.inner, args)
            peak, src = peak_rss_bytes(ok)
            blocks, _ = parse_report(text)
        else:
            with _stdout_captured() as box:
                self.inner(*args)
            peak, src = peak_rss_bytes(ok)
            text = box[0]
            blocks, other = parse_report(text)
            if other.strip():
                os.write(1, (other + "\n").encode())   # not the report: give it back
        self.sink(_Seen(blocks, text, before, peak, src))


# -- the profiling context --------------------------------------------------------------------

# The on/off switch is :mod:`pypto.infra.profiling` (the JIT reads it there); this module only
# supplies the profiler that the switch holds.

class Profiler:
    """Collects a :class:`ProfileReport` for every op call made while it is active."""

    def __init__(self):
        self.calls: list[ProfileReport] = []

    @staticmethod
    def target_for(target):
        """``target`` with Halide's profiler on (a different compile cache entry)."""
        import halide as hl

        return target if target.has_feature(hl.TargetFeature.Profile) else target.with_feature(
            hl.TargetFeature.Profile)

    def observe(self, kernel, op, dtypes, dims: Mapping[str, int], probe=None):
        """A copy of ``kernel`` whose every call adds a report to :attr:`calls`.

        ``probe``: the same kernel without the profiler, run first on each call when the
        schedule might fail at this shape (a stored one).
        """
        meta = dict(op=op.name, dims={k: int(v) for k, v in dims.items()}, dtypes=tuple(dtypes),
                    target=kernel.target, schedule_source=kernel.source)

        def sink(seen: _Seen) -> None:
            self.calls.append(report([seen], meta))

        return dataclasses.replace(kernel, callable=_Profiled(kernel.callable, kernel.disk, sink, probe))

    def __str__(self) -> str:
        if not self.calls:
            return "no op calls were profiled"
        return "\n\n".join(c.table() for c in self.calls)

    def __len__(self) -> int:
        return len(self.calls)


def report(seen: Sequence[_Seen], meta: Mapping[str, Any]) -> ProfileReport:
    """One report over one or more captured calls of the same kernel."""
    peaks = [s.rss_peak for s in seen if s.rss_peak is not None]
    return ProfileReport(**meta, **combine([b for s in seen for b in s.blocks]),
                         peak_rss_bytes=max(peaks) if peaks else None,
                         rss_before_bytes=seen[0].rss_before if seen else None,
                         rss_source=seen[0].rss_source if seen else "unavailable",
                         text=seen[0].text if seen else "")


@contextlib.contextmanager
def profile():
    """``with pypto.profile() as prof:`` profiles every op call inside; ``print(prof)`` shows them.

    Calls inside compile with Halide's profiler (once per op and shape, cached apart from the
    unprofiled kernels); each call's report lands in ``prof.calls``.
    """
    with collecting(Profiler()) as prof:
        yield prof


# -- one op, one shape ------------------------------------------------------------------------

def _resolve_schedule(op, dtypes, params, dims, schedule, target):
    """None (database, then default) or a Schedule to compile with."""
    from ..schedule.schedule import Schedule

    if schedule is None or schedule == "database":
        return None
    if isinstance(schedule, Schedule):
        return schedule
    if schedule == "default":
        from ..compiler.lower import build
        from ..schedule.defaults import default_schedule

        return default_schedule(build(op, dtypes, params), dims, target)
    from ..errors import ScheduleError

    raise ScheduleError(f"schedule must be None, 'default', 'database' or a Schedule, got {schedule!r}")


def profile_call(op, arrays: Sequence[Any], params: Mapping[str, Any] | None = None,
                 schedule=None, target=None, *, runs: int = 1, min_samples: int = 0,
                 budget_s: float = 2.0, check: bool = True) -> ProfileReport:
    """Profiles ``op`` (a name or an Op) on canonical-form ``arrays``: one report over the runs.

    Args:
        schedule: None or ``"database"`` (what a normal call picks), ``"default"``, or a Schedule.
        target: a target name or ``hl.Target`` (default: the current one).
        runs: calls to make at least; the report gives per-call figures.
        min_samples: keep calling (within ``budget_s`` seconds) until the profiler has taken this
            many samples, so that short calls still get percentages.
        check: compare the first call's output with the op's NumPy reference (ExecutionError if
            it differs), so a wrong kernel is never profiled.
    """
    from ..compiler import targets
    from ..compiler.jit import get_kernel
    from ..errors import ExecutionError
    from ..ops import get_op
    from ..runtime import check_inputs, run_kernel

    op = get_op(op) if isinstance(op, str) else op
    arrays = list(arrays)
    dtypes, dims = check_inputs(op, arrays)
    params = op.resolve_params(dict(params or {}))
    if op.derive is not None:
        dims.update({d: int(n) for d, n in op.derive(dict(dims), params).items()})
    t = targets.parse(target) if target is not None else targets.current()
    if t.has_gpu_feature() and "jit" not in str(t):
        import halide as hl

        t = t.with_feature(hl.TargetFeature.JIT)
    sched = _resolve_schedule(op, dtypes, params, dims, schedule, t)
    with collecting(None):  # this call reports here, not also to an enclosing profile()
        source = None
        if sched is None:
            # What a call runs: the stored schedule, or the default where that one fails at this
            # shape; tried unprofiled, since Halide's profiled runtime cannot survive a failure.
            from .harness import call_kernel

            plain = call_kernel(op, dtypes, params, dims, arrays, t)
            sched, source = plain.schedule, plain.source
        kernel = get_kernel(op, dtypes, params, dims, schedule=sched, target=Profiler.target_for(t))
        if source is not None:
            kernel = dataclasses.replace(kernel, source=source)
    seen: list[_Seen] = []
    pk = dataclasses.replace(kernel, callable=_Profiled(kernel.callable, kernel.disk, seen.append))
    outs = run_kernel(pk, op, arrays, dims)
    if check:
        why = _mismatch(op, arrays, params, outs)
        if why:
            raise ExecutionError(f"op {op.name!r}: the profiled kernel ({kernel.source} schedule) "
                                 f"disagrees with the NumPy reference: {why}")
    del outs
    start = time.perf_counter()
    while len(seen) < runs or (sum(b.samples for s in seen for b in s.blocks) < min_samples
                               and time.perf_counter() - start < budget_s):
        run_kernel(pk, op, arrays, dims)
    meta = dict(op=op.name, dims=dict(dims), dtypes=tuple(dtypes), target=kernel.target,
                schedule_source=kernel.source)
    return report(seen, meta)


def _mismatch(op, arrays, params, outs) -> str | None:
    import numpy as np

    from ..infra.verify import mismatch

    want = op.kernel_ref(*arrays, **params)
    want = list(want) if isinstance(want, tuple) else [want]
    return next((why for got, w in zip(outs, want) if (why := mismatch(got, np.asarray(w)))), None)


def stmt_html(op, dtypes: Sequence[str], params: Mapping[str, Any], dims: Mapping[str, int],
              path: str, *, schedule=None, target=None) -> str:
    """Writes Halide's lowered loop nest of the scheduled op as HTML to ``path``; returns the source."""
    import halide as hl

    from ..compiler import targets
    from ..compiler.jit import _choose
    from ..compiler.lower import build, fingerprint
    from ..schedule.apply import apply_schedule

    t = targets.parse(target) if target is not None else targets.current()
    built = build(op, tuple(dtypes), dict(params))
    sched = _resolve_schedule(op, tuple(dtypes), dict(params), dims, schedule, t)
    source = "given" if sched is not None else ""
    if sched is None:
        sched, source = _choose(op, built, fingerprint(built), tuple(dtypes), dict(params), dims, t)
    apply_schedule(built, sched)
    aot = hl.Target(str(t).replace("-jit", ""))
    built.pipeline.compile_to_lowered_stmt(str(path), built.images, hl.StmtOutputFormat.HTML, aot)
    return source
