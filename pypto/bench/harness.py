"""``pypto bench``: every suite op side by side with its peers, verified before it is timed.

For one suite item (op, shape, params) the harness builds candidates:

- ``pypto``: the op called as a user calls it (``pypto.ops.X(arrays)``, ``peers.pypto_call``), a
  fresh output per call; it runs the kernel a plain call picks (database entry, nearest shape, or
  the default), which the label names;
- ``pypto-out``: the same call with ``out=`` (a preallocated output), timed when a peer writes
  into a preallocated output too, so that each peer meets PyPTO in its own form;
- ``pypto-default``: the default schedule's kernel (into a preallocated output), when the call
  picks something else;
- ``numpy``: the op's fast NumPy form (``peers.numpy_peer``), else its reference;
- ``torch`` and ``torch-compile``: PyTorch eager and ``torch.compile`` on the CPU, when installed,
  each measured with this process's OpenMP wait policy and, in a child process, with the other
  (``torch_policy``); the better is kept and the report says which;
- ``adams2019``, ``mullapudi2016``, ``li2018``: Halide's autoschedulers on the same algorithm,
  read from an autoschedule database, computed (in a worker with a deadline) when missing.

Every candidate's output is compared with the op's reference first; one that differs is reported
and not timed. The rest are timed in this process with the fair protocol
(:func:`pypto.infra.timing.measure`): before each candidate's turn a pause (0.3 s: no other
library's threads still spin) and an untimed call of the same candidate; then one call timed alone
(the single-call figure, ``median_ms``) and a block of back-to-back calls (``steady``); the order
rotates each round. Each result says how its output is made (``form``: fresh or preallocated), and
ratios compare PyPTO in the best peer's form. Results are plain JSON (``report_schema.json``).
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
import platform
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from ..errors import ParamError, PyptoError
from ..infra.verify import mismatch

AUTOS = ("adams2019", "mullapudi2016", "li2018")
ITEM_KEYS = frozenset({"op", "shape", "params", "dtype", "compare"})  # of a suite file's item
PEERS = ("numpy", "torch", "torch-compile", "halide")
FORMAT = 2
#: The fair protocol's defaults for one item (``run_item``'s ``timing`` overrides them).
TIMING = {"pause_s": 0.3, "min_rounds": 7, "max_rounds": 25, "target_spread": 0.05, "budget_s": 30.0}
_MEASURE_KEYS = ("pause_s", "min_rounds", "max_rounds", "target_spread", "budget_s", "warmup",
                 "block_calls", "min_block_ms", "max_block_ms")


@dataclasses.dataclass
class Item:
    """One measurement: an op at one shape. ``group`` is "suite" or "size" (the size sweep)."""

    op: str
    shape: str
    params: dict[str, Any] = dataclasses.field(default_factory=dict)
    dtype: str | None = None
    group: str = "suite"
    compare: list[str] | None = None   # peers this item is limited to (None: all asked for)

    @property
    def label(self) -> str:
        extra = ",".join(f"{k}={v}" for k, v in sorted(self.params.items()))
        return f"{self.op} {self.shape}" + (f" [{extra}]" if extra else "")


def default_suite_path() -> str | None:
    """``benchmarks/suite.json`` of the source tree this package runs from, if there is one."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    path = os.path.join(root, "benchmarks", "suite.json")
    return path if os.path.isfile(path) else None


def load_suite(path: str, *, sizes: bool = True) -> list[Item]:
    """Items of a suite file: its ``ops`` (group "suite") and, with ``sizes``, its ``sizes``."""
    from ..infra.jsonio import strict_loads

    try:
        with open(path, "rb") as f:
            doc = strict_loads(f.read(), path)
    except OSError as e:
        raise ParamError(f"cannot read the suite file {path}: {e.strerror}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("ops"), list):
        raise ParamError(f"{path}: a suite file is an object with a list 'ops' (and optionally 'sizes') "
                         "of {\"op\", \"shape\", \"params\"?, \"dtype\"?} items")
    items = []
    for group, key in (("suite", "ops"), ("size", "sizes")):
        if key == "sizes" and not sizes:
            continue
        for i, it in enumerate(doc.get(key) or []):
            if not isinstance(it, dict) or not isinstance(it.get("op"), str) or not isinstance(it.get("shape"), str):
                raise ParamError(f"{path}: {key}[{i}] needs a string 'op' and a string 'shape'")
            unknown = sorted(set(it) - ITEM_KEYS)
            if unknown:  # a figure or a misspelt key nobody reads would pass for part of the suite
                raise ParamError(f"{path}: {key}[{i}] has key(s) {', '.join(map(repr, unknown))} that "
                                 f"the bench does not read; an item holds {', '.join(sorted(ITEM_KEYS))}")
            params = it.get("params") or {}
            if not isinstance(params, dict):
                raise ParamError(f"{path}: {key}[{i}].params must be an object")
            limit = it.get("compare")
            if limit is not None and (not isinstance(limit, list) or set(limit) - set(PEERS)):
                raise ParamError(f"{path}: {key}[{i}].compare must be a list of {', '.join(PEERS)}")
            items.append(Item(op=it["op"], shape=it["shape"], params=dict(params),
                              dtype=it.get("dtype"), group=group, compare=limit))
    return items


# -- machine ------------------------------------------------------------------------------------

def machine_info() -> dict[str, Any]:
    """What the figures were measured on, stated with every report."""
    from ..compiler import targets
    from ..infra.version import __version__, cpu_model, halide_version
    from .peers import blas_info, torch_available

    info = {
        "cpu": cpu_model(), "cores": os.cpu_count(), "target": str(targets.host()),
        "python": platform.python_version(), "numpy": np.__version__, "halide": halide_version(),
        "blas": blas_info(), "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
        "openblas_env_unset": not (os.environ.get("OPENBLAS_CORETYPE") or os.environ.get("OPENBLAS_L2_SIZE")),
    }
    info["pypto"] = __version__
    if torch_available():
        import torch

        info["torch"] = f"{torch.__version__}, {torch.get_num_threads()} threads"
    return info


# -- candidates ---------------------------------------------------------------------------------

@dataclasses.dataclass
class Candidate:
    fn: Callable[[], Any]
    label: str
    outputs: Callable[[], list[np.ndarray]]   # runs once and returns outputs (for verification)
    compile_s: float | None = None
    form: str = "fresh output"                # how its output is made (peers.FRESH / PREALLOCATED)


def _as_list(out) -> list[np.ndarray]:
    return [np.asarray(o) for o in (out if isinstance(out, (tuple, list)) else (out,))]


def _kernel_candidate(kernel, op, arrays, dims, label: str, compile_s: float) -> Candidate:
    from ..runtime import run_kernel
    from ..infra.verify import poison

    outs = [np.empty(tuple(dims[d] for d in spec.dims), dtype=dt)
            for spec, dt in zip(op.outputs, kernel.out_dtypes)]

    def fresh():
        for o in outs:
            poison(o)
        return [o.copy() for o in run_kernel(kernel, op, arrays, dims, out=outs)]

    return Candidate(fn=lambda: run_kernel(kernel, op, arrays, dims, out=outs), label=label,
                     outputs=fresh, compile_s=compile_s, form="preallocated output")


def call_kernel(op, dtypes, params, dims, arrays, target=None):
    """The kernel a plain call ends up running (``runtime.run_as_call``): the stored or default
    schedule, and the default where a stored one fails at this shape."""
    from ..compiler import targets
    from ..runtime import run_as_call

    with targets.target(target or targets.current()):
        return run_as_call(op, dtypes, params, dims, arrays)[1]


def _failed(label: str, err: Exception) -> Candidate:
    """A candidate that could not be built: verification reports why, and it is never timed."""
    def outputs():
        raise err
    return Candidate(fn=lambda: None, label=label, outputs=outputs)


class Context:
    """One item's op, inputs and reference output, made once."""

    def __init__(self, item: Item, target=None):
        from ..compiler import targets
        from ..ops import get_op
        from ..infra.inputs import complete_dims, make_inputs, parse_shape

        self.item = item
        self.op = get_op(item.op)
        self.params = self.op.resolve_params(item.params)
        self.dims = complete_dims(self.op, parse_shape(item.shape), self.params)
        self.dtypes = self._dtypes(item.dtype)
        self.target = targets.parse(target) if target is not None else targets.host()
        self.arrays = make_inputs(self.op, self.dtypes, self.dims, self.params, seed=0)
        self.want = _as_list(self.op.kernel_ref(*self.arrays, **self.params))

    def _dtypes(self, dtype: str | None) -> tuple[str, ...]:
        if dtype is None:
            return tuple(self.op.dtypes[0])
        for sig in self.op.dtypes:
            if sig[0] == dtype:
                return tuple(sig)
        raise ParamError(f"{self.item.label}: op {self.op.name!r} has no signature with first dtype "
                         f"{dtype!r}; it has {', '.join('/'.join(s) for s in self.op.dtypes)}")

    def key_dims(self) -> dict[str, int]:
        return {d: self.dims[d] for d in self.op.input_dims}


def _user_candidates(ctx: Context, label: str, dt: float) -> dict[str, Candidate]:
    """``pypto`` (a fresh output per call) and ``pypto-out`` (``out=``), called as users call."""
    from ..compiler import targets
    from ..infra.verify import poison
    from . import peers

    call, how = peers.pypto_call(ctx.op.name, ctx.arrays, ctx.params)

    def in_target(fn):
        if ctx.target == targets.host():
            return fn
        return lambda: _with_target(ctx.target, fn)

    fresh = in_target(lambda: call())
    first = _as_list(fresh())
    outs = [np.empty_like(o) for o in first]
    arg = outs[0] if len(outs) == 1 else tuple(outs)
    into = in_target(lambda: call(out=arg))

    def outputs_into():
        for o in outs:
            poison(o)
        return [o.copy() for o in _as_list(into())]

    return {"pypto": Candidate(fn=fresh, label=f"{label}, {how}", compile_s=dt,
                               outputs=lambda: _as_list(fresh())),
            "pypto-out": Candidate(fn=into, label=f"{label}, {how} with out=", outputs=outputs_into,
                                   form="preallocated output")}


def _with_target(target, fn):
    from ..compiler import targets

    with targets.target(target):
        return fn()


def pypto_candidates(ctx: Context) -> tuple[dict[str, Candidate], dict[str, str]]:
    """``pypto`` (a user's call: what it picks, a fresh output), ``pypto-out`` (the same with
    ``out=``) and ``pypto-default`` when the pick is a stored schedule."""
    from ..compiler.jit import compile_built
    from ..compiler.lower import build, fingerprint
    from ..schedule.defaults import default_schedule

    out: dict[str, Candidate] = {}
    notes: dict[str, str] = {}
    t0 = time.perf_counter()
    try:
        chosen = call_kernel(ctx.op, ctx.dtypes, ctx.params, ctx.dims, ctx.arrays, ctx.target)
    except PyptoError as e:
        return {"pypto": _failed("PyPTO", e)}, notes
    dt = time.perf_counter() - t0
    try:
        out.update(_user_candidates(ctx, f"PyPTO ({chosen.source})", dt))
    except Exception as e:  # a public call that fails here is reported (and never timed), not fatal
        out["pypto"] = _failed("PyPTO", e)
    if chosen.source != "default":
        built = build(ctx.op, ctx.dtypes, ctx.params)
        sched = default_schedule(built, ctx.dims, ctx.target)
        t0 = time.perf_counter()
        try:
            # As a call would run it: through the compile cache, on PyPTO's thread pool.
            k = compile_built(built, sched, ctx.target, source="default", fp=fingerprint(built),
                              persist=True)
        except PyptoError as e:
            out["pypto-default"] = _failed("PyPTO (default)", e)
        else:
            out["pypto-default"] = _kernel_candidate(k, ctx.op, ctx.arrays, ctx.dims, "PyPTO (default)",
                                                     time.perf_counter() - t0)
    else:
        notes["pypto-default"] = "the call picks the default schedule (no database entry)"
    return out, notes


def autoschedule_candidates(ctx: Context, db_dir: str | None, *, compute_missing: bool,
                            timeout: float, log: Callable[[str], None]) -> tuple[dict[str, Candidate], dict[str, str]]:
    """Halide's autoschedulers on the op's algorithm, from ``db_dir/<name>/`` or computed now."""
    from ..compiler import targets
    from ..compiler.jit import compile_built
    from ..compiler.lower import build, fingerprint
    from ..database import DirectoryDatabase, Entry, Key, provenance
    from ..schedule.schedule import Schedule

    built = build(ctx.op, ctx.dtypes, ctx.params)
    fp = fingerprint(built)
    key = Key.make(ctx.op.name, ctx.dtypes, ctx.key_dims(), ctx.params, targets.family(ctx.target), fp)
    out: dict[str, Candidate] = {}
    skipped: dict[str, str] = {}
    evaluator = None
    try:
        for name in AUTOS:
            db = DirectoryDatabase(os.path.join(db_dir, name)) if db_dir else None
            hit = db.best(key) if db is not None else None
            sched = hit.schedule if hit is not None else None
            if sched is None and not compute_missing:
                skipped[name] = "not in the autoschedule database (run without --no-autoschedule-missing)"
                continue
            if sched is None:
                if evaluator is None:
                    from autotune.evaluate import Evaluator

                    evaluator = Evaluator(ctx.op.name, ctx.dtypes, ctx.params, ctx.dims, str(ctx.target),
                                          compile_timeout=timeout, run_timeout=timeout)
                log(f"{ctx.item.label}: running Halide's {name} (up to {timeout:.0f} s)")
                got, why = evaluator.autoschedule(name, timeout=timeout)
                if got is None:
                    skipped[name] = f"the autoscheduler gave no schedule: {why[:200]}"
                    continue
                sched = Schedule.from_json(got, name)
                if db is not None:
                    try:
                        db.commit([Entry(key=key, schedule=sched, provenance=provenance(
                            method=f"autoscheduler:{name}", target=str(ctx.target)))])
                    except OSError as e:
                        log(f"could not store the {name} schedule in {db_dir}: {e}")
            t0 = time.perf_counter()
            try:
                # Compiled as PyPTO's own kernels are (ahead of time, on PyPTO's thread pool), so
                # only the schedule differs: JIT-compiled on Halide's own pool, the same schedule
                # ran up to 1.9x slower here (batch_matmul 8x256^3, softmax 4096x1024).
                k = compile_built(build(ctx.op, ctx.dtypes, ctx.params), sched, ctx.target, source=name,
                                  fp=fp, persist=True)
            except PyptoError as e:
                out[name] = _failed(f"Halide {name}", e)
                continue
            out[name] = _kernel_candidate(k, ctx.op, ctx.arrays, ctx.dims, f"Halide {name}",
                                          time.perf_counter() - t0)
    finally:
        if evaluator is not None:
            evaluator.shutdown()
    return out, skipped


def peer_candidates(ctx: Context, compare: set[str]) -> tuple[dict[str, Candidate], dict[str, str]]:
    from . import peers

    out: dict[str, Candidate] = {}
    skipped: dict[str, str] = {}
    if "numpy" in compare:
        fn, label = peers.numpy_peer(ctx.op.name, ctx.arrays, ctx.params)
        form = peers.form(fn)
        out["numpy"] = Candidate(fn=fn, label=label + (", out=" if form == peers.PREALLOCATED else ""),
                                 outputs=lambda fn=fn: [o.copy() for o in _as_list(fn())], form=form)
    wants_torch = {"torch", "torch-compile"} & compare
    if wants_torch:
        peer = peers.torch_peer(ctx.op.name, ctx.arrays, ctx.params)
        if peer is None:
            why = ("PyTorch is not installed (pip install 'pypto-halide[torch]')" if not peers.torch_available()
                   else f"no PyTorch form of {ctx.op.name!r} with these parameters")
            for n in wants_torch:
                skipped[n] = why
        else:
            if "torch" in compare:
                out["torch"] = Candidate(fn=peer, label="PyTorch eager",
                                         outputs=lambda: peers.torch_output(peer))
            if "torch-compile" in compare:
                compiled = peers.torch_compiled(peer)
                t0 = time.perf_counter()
                try:
                    peers.torch_output(compiled)  # the first call compiles
                except Exception as e:  # inductor needs a C++ compiler; a failure is a skipped peer
                    skipped["torch-compile"] = f"torch.compile failed: {type(e).__name__}: {str(e)[:200]}"
                else:
                    dt = time.perf_counter() - t0
                    out["torch-compile"] = Candidate(fn=compiled, label="torch.compile",
                                                     outputs=lambda: peers.torch_output(compiled),
                                                     compile_s=dt)
    return out, skipped


# -- one item -----------------------------------------------------------------------------------

def verify(ctx: Context, cands: Mapping[str, Candidate]) -> tuple[dict[str, Candidate], dict[str, str], dict[str, float]]:
    """Candidates whose outputs match the reference; the others with the reason."""
    from ..infra.verify import max_error

    good: dict[str, Candidate] = {}
    bad: dict[str, str] = {}
    errs: dict[str, float] = {}
    for name, c in cands.items():
        try:
            got = c.outputs()
        except Exception as e:  # a candidate that cannot run is reported, never timed
            bad[name] = f"failed to run: {type(e).__name__}: {str(e)[:300]}"
            continue
        if len(got) != len(ctx.want):
            bad[name] = f"returned {len(got)} outputs, the reference {len(ctx.want)}"
            continue
        problem = None
        for g, w in zip(got, ctx.want):  # a peer may return a different but same-sized shape
            problem = mismatch(g.reshape(w.shape) if g.size == w.size else g, w)
            if problem:
                break
        if problem:
            bad[name] = f"output differs from the reference: {problem}"
            continue
        good[name] = c
        errs[name] = max(max_error(g.reshape(w.shape), w) for g, w in zip(got, ctx.want))
    return good, bad, errs


def run_item(item: Item, *, compare: set[str], autoschedule_db: str | None = None,
             compute_missing: bool = True, autoschedule_timeout: float = 300.0,
             timing: Mapping[str, Any] | None = None, target=None, roofs=None,
             log: Callable[[str], None] = lambda s: None) -> dict[str, Any]:
    """Measures one item; returns its JSON record (see ``report_schema.json``).

    ``timing`` overrides :data:`TIMING` (the arguments of :func:`pypto.infra.timing.measure`);
    ``"torch_policies": False`` in it skips the child process that measures torch under the other
    OpenMP wait policy.
    """
    from ..infra.timing import measure

    ctx = Context(item, target)
    if item.compare is not None:
        compare = compare & set(item.compare)
    cands, skipped = pypto_candidates(ctx)
    more, why = peer_candidates(ctx, compare)
    cands.update(more)
    skipped.update(why)
    if "halide" in compare:
        more, why = autoschedule_candidates(ctx, autoschedule_db, compute_missing=compute_missing,
                                            timeout=autoschedule_timeout, log=log)
        cands.update(more)
        skipped.update(why)
    good, bad, errs = verify(ctx, cands)
    if "pypto-out" in good and not any(c.form == "preallocated output" for n, c in good.items()
                                       if not n.startswith("pypto")):
        del good["pypto-out"]  # no peer writes into a preallocated output: nothing to match
        skipped["pypto-out"] = "no peer here writes into a preallocated output"
    t = {**TIMING, **(timing or {})}
    res = measure({n: c.fn for n, c in good.items()},
                  **{k: t[k] for k in _MEASURE_KEYS if k in t}) if good else {}
    results = {}
    for n, r in res.items():
        results[n] = {**_figures(r.to_json()), "label": good[n].label, "max_rel_error": errs[n],
                      "form": good[n].form}
        if good[n].compile_s is not None:
            results[n]["compile_s"] = good[n].compile_s
    torch_names = [n for n in ("torch", "torch-compile") if n in results]
    if torch_names and t.get("torch_policies", True):
        _torch_policies(ctx, results, torch_names, {k: t[k] for k in _MEASURE_KEYS if k in t})
    rec: dict[str, Any] = {
        "op": item.op, "shape": item.shape, "group": item.group, "dims": dict(ctx.dims),
        "params": dict(ctx.params), "dtypes": list(ctx.dtypes),
        "results": results, "errors": bad, "skipped": skipped,
    }
    rec.update(summarize(results))
    _add_cost(rec, ctx, roofs)
    return rec


def _figures(fair: Mapping[str, Any]) -> dict[str, Any]:
    """A result's figures from ``Fair.to_json()``: the single call on top, the steady state inside."""
    return {**fair["single"], "steady": dict(fair["steady"])}


def _torch_policies(ctx: Context, results: dict, names: list[str], timing: Mapping[str, Any]) -> None:
    """Measures the torch peers ``names`` under the other OpenMP wait policy (a child process)
    and keeps, per peer, the policy with the better single-call median; says which."""
    from . import torch_policy

    here = torch_policy.current_policy()
    other = torch_policy.measure_other(ctx.op.name, ctx.dtypes, ctx.params, ctx.dims, names=names,
                                       seed=0, timing=timing)
    for n in names:
        mine = results[n]
        got = other.get(n) or {"policy": torch_policy.other_policy(here), "error": "not measured"}
        policies = {here: {"median_ms": mine["median_ms"], "steady_ms": mine["steady"]["median_ms"]}}
        if "error" in got:
            policies[got["policy"]] = {"error": got["error"]}
        else:
            policies[got["policy"]] = {"median_ms": got["single"]["median_ms"],
                                       "steady_ms": got["steady"]["median_ms"]}
        kept = here
        if "error" not in got and got["single"]["median_ms"] < mine["median_ms"]:
            kept = got["policy"]
            results[n] = {**mine, **_figures(got), "max_rel_error": got.get("max_rel_error", mine["max_rel_error"])}
        results[n]["omp_wait_policy"] = kept
        results[n]["policies"] = policies
        results[n]["label"] = f"{mine['label']} (OMP_WAIT_POLICY={kept})" if kept != "default" else \
            f"{mine['label']} (default OpenMP wait policy)"


def _matching(results: Mapping[str, Mapping[str, Any]], peer: str) -> str | None:
    """The PyPTO figure to set beside ``peer``: ``pypto-out`` when the peer writes into a
    preallocated output and that was measured, else ``pypto`` (a fresh output, as users call)."""
    if results[peer].get("form") == "preallocated output" and "pypto-out" in results:
        return "pypto-out"
    return "pypto" if "pypto" in results else None


def summarize(results: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """Best PyPTO time, best peer, and the ratios (above 1: PyPTO is faster).

    Single calls decide (``median_ms``); the steady-state ratio is given beside. Each ratio sets
    the peer beside PyPTO in the peer's own form (``pypto-out`` for a peer with a preallocated
    output); ``vs_best_peer_pypto`` names the PyPTO figure used.
    """
    out: dict[str, Any] = {"pypto_ms": None, "best_peer": None, "vs_best_peer": None, "vs_numpy": None,
                           "vs_best_peer_pypto": None, "pypto_steady_ms": None,
                           "best_peer_steady": None, "vs_best_peer_steady": None}
    if "pypto" in results:
        out["pypto_ms"] = results["pypto"]["median_ms"]
        out["pypto_steady_ms"] = (results["pypto"].get("steady") or {}).get("median_ms")
    peers = [n for n in results if not n.startswith("pypto")]
    if not peers:
        return out

    def ratio(peer: str, steady: bool) -> tuple[float | None, str | None]:
        mine = _matching(results, peer)
        if mine is None:
            return None, None
        if steady:
            a, b = (results[peer].get("steady") or {}), (results[mine].get("steady") or {})
            if not a or not b:
                return None, mine
            return a["median_ms"] / b["median_ms"], mine
        return results[peer]["median_ms"] / results[mine]["median_ms"], mine

    best = min(peers, key=lambda n: results[n]["median_ms"])
    out["best_peer"] = best
    out["vs_best_peer"], out["vs_best_peer_pypto"] = ratio(best, False)
    steady = [n for n in peers if results[n].get("steady")]
    if steady:
        bs = min(steady, key=lambda n: results[n]["steady"]["median_ms"])
        out["best_peer_steady"] = bs
        out["vs_best_peer_steady"] = ratio(bs, True)[0]
    if "numpy" in results:
        out["vs_numpy"] = ratio("numpy", False)[0]
    return out


def _add_cost(rec: dict, ctx: Context, roofs) -> None:
    from .cost import op_cost, place

    try:
        cost = op_cost(ctx.op.name, ctx.dims, ctx.params, ctx.dtypes)
    except Exception as e:  # a cost the model cannot state is left out, not guessed
        rec["cost"] = {"error": str(e)[:200]}
        return
    rec["cost"] = {"flops": cost.flops, "bytes": cost.bytes, "note": cost.note}
    if roofs is None or rec.get("pypto_ms") is None:
        return
    rec["roofline"] = {n: place(cost, r["median_ms"], roofs) for n, r in rec["results"].items()}


# -- the whole run ------------------------------------------------------------------------------

def select(items: Sequence[Item], ops: Iterable[str], groups: Iterable[str]) -> list[Item]:
    ops, groups = set(ops), set(groups)
    known = {i.op for i in items}
    missing = ops - known
    if missing:
        from ..ops import get_op

        for name in missing:
            get_op(name)  # UnknownOpError with suggestions for a misspelt name
        raise ParamError(f"op(s) {', '.join(sorted(missing))} are not in the suite; the suite has "
                         f"{', '.join(sorted(known))} (or give --shape to measure any op)")
    return [i for i in items if (not ops or i.op in ops) and i.group in groups]


def parse_compare(text: str) -> set[str]:
    names = {p.strip() for p in text.split(",") if p.strip()}
    unknown = names - set(PEERS)
    if unknown:
        raise ParamError(f"--compare: unknown peer(s) {', '.join(sorted(unknown))}; choose from {', '.join(PEERS)}")
    return names


def relative_paths(obj: Any, root: str | None = None) -> Any:
    """``obj`` with every string's ``root/`` prefix (default: this folder) removed, so that a
    report names databases as ``schedules`` rather than by this machine's absolute path."""
    prefix = os.path.abspath(root or os.getcwd()) + os.sep
    if isinstance(obj, str):
        return obj.replace(prefix, "")
    if isinstance(obj, dict):
        return {k: relative_paths(v, prefix[:-1]) for k, v in obj.items()}
    if isinstance(obj, list):
        return [relative_paths(v, prefix[:-1]) for v in obj]
    return obj


def validate_report(report: Mapping[str, Any]) -> None:
    """Raises jsonschema.ValidationError when ``report`` does not follow ``report_schema.json``."""
    import jsonschema

    with open(os.path.join(os.path.dirname(__file__), "report_schema.json")) as f:
        schema = json.load(f)
    jsonschema.validate(report, schema)


def new_report(compare: set[str], roofs=None, timing: Mapping[str, Any] | None = None) -> dict[str, Any]:
    return {"format": FORMAT, "tool": "pypto bench", "compare": sorted(compare),
            "machine": machine_info(), "roofs": _roofs_json(roofs), "protocol": protocol(timing),
            "items": []}


def protocol(timing: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """How every figure of a report was measured, in words and numbers (the report's ``protocol``)."""
    from ..infra.timing import PROTOCOL

    t = {**TIMING, **(timing or {})}
    return {
        "pause_s": t["pause_s"],
        "timing": PROTOCOL.format(pause_s=t["pause_s"]) + " (no groups: a pause before every candidate)",
        "median_ms": "a single call (see 'timing'); 'steady' holds the steady state",
        "forms": {"pypto": "pypto.ops.X(arrays) as a user calls it, a fresh output per call",
                  "pypto-out": "the same call with out= (a preallocated output), timed when a peer "
                               "writes into a preallocated output",
                  "pypto-default": "the default schedule's kernel, into a preallocated output",
                  "peers": "each result's 'form' says whether it gets a fresh or a preallocated output"},
        "ratios": "peer time over PyPTO time (above 1: PyPTO is faster), PyPTO in the peer's form",
        "torch": "measured with this process's OpenMP wait policy and with the other in a child "
                 "process; the better single call is kept ('omp_wait_policy', 'policies')",
    }


def _roofs_json(roofs) -> dict | None:
    if roofs is None:
        return None
    return roofs.to_json() if hasattr(roofs, "to_json") else dataclasses.asdict(roofs)


# -- presentation -------------------------------------------------------------------------------

COLUMNS = ("pypto", "pypto-out", "pypto-default", "numpy", "torch", "torch-compile") + AUTOS


def _ms(v: float | None) -> str:
    if v is None:
        return "-"
    return f"{v:.3g}" if v < 100 else f"{v:.0f}"


def _cell(r: Mapping[str, Any]) -> str:
    """``single / steady`` milliseconds (± the single call's spread when over 10%), and ``†``
    for a peer's preallocated output."""
    text = _ms(r["median_ms"]) + (f" ±{r['spread'] * 100:.0f}%" if r["spread"] >= 0.1 else "")
    if r.get("steady"):
        text += " / " + _ms(r["steady"]["median_ms"])
    if r.get("form") == "preallocated output":
        text += " †"
    return text


def _ratio(v) -> str:
    return f"{v:.2f}x" if v else "-"


NOTE = ("Each cell: single call / steady state, ms (medians; the fair protocol: a 0.3 s pause and "
        "an untimed call of the same candidate before each turn, rotating order). † = writes into "
        "a preallocated output (`pypto-out` is `pypto.ops.X(..., out=)`); otherwise a fresh output "
        "per call (`pypto` is `pypto.ops.X(arrays)`). Ratios: peer over PyPTO, PyPTO in the "
        "peer's form, single call / steady state.")


def markdown(report: Mapping[str, Any]) -> str:
    """The results as a Markdown table: milliseconds (medians of single calls and of the steady
    state), spread, the form of each figure, and the ratios; a note under it says how."""
    items = report["items"]
    cols = [c for c in COLUMNS if any(c in it["results"] for it in items)]
    head = ["op", "shape"] + cols + ["best peer", "vs best peer", "vs NumPy"]
    extra = any("roofline" in it for it in items)
    if extra:
        head.append("PyPTO roofline")
    if any("memory" in it for it in items):
        head.append("peak MiB PyPTO / NumPy / torch")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for it in items:
        row = [it["op"], it["shape"] + (" " + ",".join(f"{k}={v}" for k, v in sorted(it["params"].items())
                                                       if k in _shown_params(it)) if _shown_params(it) else "")]
        for c in cols:
            r = it["results"].get(c)
            if r is None:
                row.append("x" if c in it["errors"] else "-")
            else:
                row.append(_cell(r))
        row.append(it["best_peer"] or "-")
        steady = it.get("vs_best_peer_steady")
        row.append(_ratio(it.get("vs_best_peer")) + (f" / {_ratio(steady)}" if steady else ""))
        row.append(_ratio(it.get("vs_numpy")))
        if extra:
            p = (it.get("roofline") or {}).get("pypto")
            row.append(f"{p['fraction'] * 100:.0f}% of {p['bound']}" if p else "-")
        if "memory" in it or any("memory" in i for i in items):
            row.append(_memory_cell(it.get("memory")))
        lines.append("| " + " | ".join(row) + " |")
    if any(r.get("steady") for it in items for r in it["results"].values()):
        lines += ["", NOTE]
    return "\n".join(lines)


def _shown_params(it) -> dict:
    """Params that differ from the op's defaults (to keep the table short)."""
    from ..ops import get_op

    try:
        defaults = get_op(it["op"]).resolve_params({})
    except Exception:
        return dict(it["params"])
    return {k: v for k, v in it["params"].items() if defaults.get(k) != v}


def _memory_cell(mem) -> str:
    if not mem:
        return "-"

    def mib(name):
        v = (mem.get(name) or {}).get("peak_rss_bytes")
        return "-" if v is None else f"{v / 2**20:.0f}"
    return " / ".join(mib(n) for n in ("pypto", "numpy", "torch"))


def compile_markdown(report: Mapping[str, Any]) -> str | None:
    """Cold compile and time to first result per item, when the report has them."""
    rows = [it for it in report["items"] if it.get("compile") and it["group"] != "size"]
    if not rows:
        return None
    lines = ["| op | shape | compile, empty cache (s) | first result, empty cache (s) | "
             "first result, filled cache (s) |", "|---|---|---|---|---|"]
    for it in rows:
        cold, warm = it["compile"].get("cold", {}), it["compile"].get("warm", {})

        def f(d, k):
            return f"{d[k]:.2f}" if k in d else "error"
        lines.append(f"| {it['op']} | {it['shape']} | {f(cold, 'compile_s')} | {f(cold, 'first_result_s')} | "
                     f"{f(warm, 'first_result_s')} |")
    return "\n".join(lines)


def text_table(report: Mapping[str, Any]) -> str:
    """A compact plain-text table for the terminal."""
    out = []
    for it in report["items"]:
        out.append(f"{it['op']} {it['shape']}")
        best = min((r["median_ms"] for r in it["results"].values()), default=None)
        for n, r in sorted(it["results"].items(), key=lambda kv: kv[1]["median_ms"]):
            mark = "*" if r["median_ms"] == best else " "
            comp = f"  compile {r['compile_s']:.2f} s" if r.get("compile_s") is not None else ""
            steady = (f"  steady {r['steady']['median_ms']:10.4f} ms ±{r['steady']['spread'] * 100:4.1f}%"
                      if r.get("steady") else "")
            form = f"; {r['form']}" if r.get("form") else ""
            out.append(f"  {mark} {n:<15} {r['median_ms']:10.4f} ms  ±{r['spread'] * 100:4.1f}%{steady}  "
                       f"({r['label']}{form}){comp}")
        for n, why in it["errors"].items():
            out.append(f"  x {n:<15} not timed: {why}")
        if it.get("vs_best_peer"):
            which = f" [{it['vs_best_peer_pypto']}]" if it.get("vs_best_peer_pypto") else ""
            out.append(f"    PyPTO{which} vs best peer ({it['best_peer']}): {it['vs_best_peer']:.2f}x single call"
                       + (f", {it['vs_best_peer_steady']:.2f}x steady vs {it['best_peer_steady']}"
                          if it.get("vs_best_peer_steady") else "")
                       + (f"; vs NumPy {it['vs_numpy']:.2f}x" if it.get("vs_numpy") else ""))
    return "\n".join(out)


# -- compile cost -------------------------------------------------------------------------------

_FIRST_RESULT = r"""
import json, sys, time
t0 = time.perf_counter()
import pypto
from pypto.bench.harness import Context, Item
from pypto.compiler.jit import get_kernel
from pypto.runtime import run_as_call
item = Item(**json.loads(sys.argv[1]))
t1 = time.perf_counter()
ctx = Context(item)
t2 = time.perf_counter()
get_kernel(ctx.op, ctx.dtypes, ctx.params, ctx.dims)
t3 = time.perf_counter()
_, k = run_as_call(ctx.op, ctx.dtypes, ctx.params, ctx.dims, ctx.arrays)  # the default if it fails
t4 = time.perf_counter()
print(json.dumps({"import_s": t1 - t0, "inputs_s": t2 - t1, "compile_s": t3 - t2, "first_call_s": t4 - t3,
                  "first_result_s": (t1 - t0) + (t4 - t2), "source": k.source, "loaded": bool(k.disk)}))
"""


def compile_cost(item: Item, *, timeout: float = 600.0) -> dict[str, Any]:
    """Cold and warm start of one item, each in a fresh process.

    Cold: an empty compile cache, so the kernel is compiled (the time a first call costs). Warm:
    the cache the cold run filled, so the kernel is loaded. ``first_result_s`` counts importing
    PyPTO, compiling or loading, and the first call; making the inputs is left out.
    """
    import subprocess
    import sys
    import tempfile

    arg = json.dumps(dataclasses.asdict(item))
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="pypto-cc-") as cache:
        env = dict(os.environ, PYPTO_CACHE_DIR=cache)
        for phase in ("cold", "warm"):
            try:
                p = subprocess.run([sys.executable, "-c", _FIRST_RESULT, arg], env=env, capture_output=True,
                                   text=True, timeout=timeout)
            except subprocess.TimeoutExpired:
                out[phase] = {"error": f"no result within {timeout:.0f} s"}
                continue
            if p.returncode != 0:
                out[phase] = {"error": (p.stderr.strip().splitlines() or ["exit %d" % p.returncode])[-1][:300]}
                continue
            out[phase] = json.loads(p.stdout.strip().splitlines()[-1])
    return out
