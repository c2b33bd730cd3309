"""The measuring worker: a separate process that compiles, checks and times candidates.

It speaks JSON lines: one request on stdin, one or two replies on its protocol channel (the
original stdout; anything native code prints to stdout is sent to stderr instead). Requests carry
schedules as data; the worker parses them with the same strict loader as the database.

Requests:
  {"cmd": "setup", "op": SPEC, "dtypes": [...], "params": {...}, "dims": {...}, "target": STR,
   "seed": INT, "memory_mb": INT|null}
  {"cmd": "eval", "schedule": {...}, "incumbent": {...}|null, "prune_ms": FLOAT|null,
   "timing": {...}, "inject": null}
  {"cmd": "compare", "schedules": {NAME: {...}}, "numpy": BOOL, "torch": BOOL, "timing": {...}}
Replies to eval: {"phase": "compiled", "compile_s": F} then the result object.

``inject`` ("segfault", "abort", "hang", "hang_compile", "oom", "wrong") makes the worker misbehave
on purpose; the tuner's tests use it to prove that a bad candidate costs only its own trial.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
import traceback


def _protocol_channel():
    """Keeps the real stdout for replies and points file descriptor 1 at stderr."""
    fd = os.dup(1)
    os.dup2(2, 1)
    return os.fdopen(fd, "w", buffering=1)


class Worker:
    def __init__(self, out):
        self.out = out
        self.ctx = None
        self.compiled = {}

    def send(self, obj) -> None:
        self.out.write(json.dumps(obj) + "\n")
        self.out.flush()

    # -- requests -----------------------------------------------------------------------------
    def setup(self, req):
        import numpy as np

        from pypto.compiler import targets
        from pypto.infra.inputs import make_inputs
        from pypto.ops._load import resolve_op

        if req.get("memory_mb"):
            import resource

            limit = int(req["memory_mb"]) << 20
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        t0 = time.perf_counter()
        op = resolve_op(req["op"])
        dtypes = tuple(req["dtypes"])
        params = op.resolve_params(req["params"])
        dims = {k: int(v) for k, v in req["dims"].items()}
        target = targets.parse(req["target"])
        arrays = make_inputs(op, dtypes, dims, params, seed=req.get("seed", 0))
        want = op.kernel_ref(*arrays, **params)
        want = list(want) if isinstance(want, tuple) else [want]
        want = [np.asarray(w) for w in want]
        self.ctx = dict(op=op, dtypes=dtypes, params=params, dims=dims, target=target,
                        arrays=arrays, want=want, spec=req["op"], seed=req.get("seed", 0))
        self.compiled.clear()
        return {"ok": True, "setup_s": time.perf_counter() - t0}

    def _kernel(self, sched_obj):
        from pypto.compiler.jit import compile_built
        from pypto.compiler.lower import build
        from pypto.schedule.schedule import Schedule

        c = self.ctx
        schedule = Schedule.from_json(sched_obj, "candidate")
        if schedule.hash in self.compiled:
            return self.compiled[schedule.hash], 0.0
        t0 = time.perf_counter()
        built = build(c["op"], c["dtypes"], c["params"])
        # Through the compile cache, as users' calls run: ahead of time, on PyPTO's thread pool.
        # A JIT-compiled kernel keeps Halide's own pool, whose workers sleep after each call:
        # the same default schedule ran 1.9x slower that way for batch_matmul 8x256^3 and 1.7x
        # for softmax 4096x1024, and a candidate's rank could change with it. The evaluator
        # points the cache at a scratch folder of this tuning run (see ``Evaluator``).
        k = compile_built(built, schedule, c["target"], source="candidate", persist=True)
        dt = time.perf_counter() - t0
        if len(self.compiled) > 8:
            self.compiled.pop(next(iter(self.compiled)))
        self.compiled[schedule.hash] = k
        return k, dt

    def _outputs(self):
        import numpy as np

        c = self.ctx
        outs = []
        for spec, w in zip(c["op"].outputs, c["want"]):
            o = np.empty(tuple(c["dims"][d] for d in spec.dims), dtype=w.dtype)
            _poison(o)
            outs.append(o)
        return outs

    def _runner(self, kernel):
        from pypto.runtime import run_kernel

        c = self.ctx
        outs = self._outputs()
        if c["target"].has_gpu_feature():
            return self._device_runner(kernel, outs), outs
        return (lambda: run_kernel(kernel, c["op"], c["arrays"], c["dims"], out=outs)), outs

    def _device_runner(self, kernel, outs):
        """A GPU call on inputs wrapped once, so they are copied to the device once, not per call.

        Halide's JIT copies each output back to the host before the call returns, which waits for
        the device: a timed call covers the kernels and the output's transfer, and every candidate
        pays that transfer alike.
        """
        import halide as hl

        from pypto.errors import ExecutionError
        from pypto.runtime import dense

        c = self.ctx
        if "device_inputs" not in c:
            c["device_inputs"] = [hl.Buffer(dense(a)) for a in c["arrays"]]
        ins, bufs = c["device_inputs"], [hl.Buffer(o) for o in outs]

        def run():
            try:
                kernel.callable(*ins, *bufs)
            except hl.HalideError as e:
                raise ExecutionError(f"op {c['op'].name!r} failed on the device: {e}") from None

        return run

    def check(self, kernel, inject=None) -> str | None:
        """None when the kernel's output matches the reference, else why not."""
        run, outs = self._runner(kernel)
        run()
        if inject == "wrong":
            outs[0].flat[0] = outs[0].flat[0] + 1
        for got, want in zip(outs, self.ctx["want"]):
            err = _mismatch(got, want)
            if err:
                return err
        return None

    def evaluate(self, req):
        from pypto.infra.timing import compare

        inject = req.get("inject")
        if inject == "hang_compile":
            _spin()
        kernel, compile_s = self._kernel(req["schedule"])
        if req.get("incumbent") is not None:
            self._kernel(req["incumbent"])  # compiled now, so the run deadline covers runs only
        self.send({"phase": "compiled", "compile_s": compile_s})
        if inject == "segfault":
            os.kill(os.getpid(), signal.SIGSEGV)
        if inject == "abort":
            os.abort()
        if inject == "hang":
            _spin()
        if inject == "oom":
            hog = []
            while True:
                hog.append(bytearray(1 << 28))
        problem = self.check(kernel, inject)
        if problem:
            return {"status": "wrong", "error": problem, "compile_s": compile_s}
        run, _ = self._runner(kernel)
        t = req.get("timing") or {}
        with _measure_lock():
            t0 = time.perf_counter()
            run()
            first_ms = (time.perf_counter() - t0) * 1000
            prune = req.get("prune_ms")
            if prune is not None and first_ms > prune:
                return {"status": "pruned", "time_ms": first_ms, "compile_s": compile_s}
            fns = {"candidate": run}
            if req.get("incumbent") is not None:
                inc, _ = self._kernel(req["incumbent"])
                fns["incumbent"] = self._runner(inc)[0]
            res = compare(fns, min_rounds=t.get("min_rounds", 3), max_rounds=t.get("max_rounds", 15),
                          target_spread=t.get("target_spread", 0.05), budget_s=t.get("budget_s", 5.0))
        out = {"status": "ok", "time_ms": res["candidate"].median, "spread": res["candidate"].spread,
               "compile_s": compile_s, "first_ms": first_ms}
        if "incumbent" in res:
            out["incumbent_ms"] = res["incumbent"].median
        return out

    def autoschedule(self, req):
        """Runs one of Halide's autoschedulers for the set-up call; returns its schedule (data)."""
        from pypto.schedule.autoschedule import import_schedule

        c = self.ctx
        t0 = time.perf_counter()
        s = import_schedule(c["op"], c["dtypes"], c["params"], c["dims"], req["name"], c["target"])
        return {"status": "ok", "schedule": s.to_json(), "seconds": time.perf_counter() - t0}

    def compare(self, req):
        """Schedules side by side, with the peers users would run instead (see ``_peers``).

        The fair protocol (:func:`pypto.infra.timing.measure`): a pause where the library changes
        and an untimed call of the same candidate before each turn, the order rotating. The
        tuner decides on the steady state (``median_ms``: the mean call of a block of
        back-to-back calls, median over rounds); the single-call figures come along
        (``single_ms``).
        """
        from pypto.infra.timing import measure

        fns, errors, groups = {}, {}, {}
        for name, sched in req["schedules"].items():
            try:
                kernel, _ = self._kernel(sched)
                problem = self.check(kernel)
            except Exception as e:  # a baseline that fails is reported, not fatal
                problem = f"{type(e).__name__}: {e}"
            if problem:
                errors[name] = problem
                continue
            fns[name] = self._runner(kernel)[0]
            groups[name] = "halide"
        labels = self._peers(req, fns, groups, errors)
        t = {**COMPARE_TIMING, **(req.get("timing") or {})}
        kw = {k: t[k] for k in _MEASURE_KEYS if k in t}
        with _measure_lock():
            res = measure(fns, groups=groups, **kw)
            other = self._torch_other(kw) if "torch" in res else {}
        results = {}
        for n, r in res.items():
            results[n] = _row(r.to_json())
            if n in labels:
                results[n].update(labels[n])
        if "torch" in results:
            _keep_better_policy(results, other.get("torch"))
        return {"results": results, "errors": errors}

    def _peers(self, req, fns, groups, errors) -> dict[str, dict]:
        """Adds the peers to ``fns``: NumPy's fast form (``pypto.bench.peers.numpy_peer``, the one
        ``pypto bench`` times, not the float64 reference) and PyTorch eager, each checked against
        the reference first. Returns their labels and forms."""
        import numpy as np

        from pypto.bench import peers

        c = self.ctx
        labels = {}
        if req.get("numpy"):
            try:
                fn, label = peers.numpy_peer(c["op"].name, c["arrays"], c["params"],
                                             op=c["op"])
                got = fn()
                got = [np.asarray(g) for g in (got if isinstance(got, (tuple, list)) else (got,))]
                problem = _peer_mismatch(got, c["want"])
            except Exception as e:  # a peer that cannot run is reported, not fatal
                problem = f"{type(e).__name__}: {e}"
            if problem:
                errors["numpy"] = problem
            else:
                fns["numpy"], groups["numpy"] = fn, "numpy"
                labels["numpy"] = {"label": label, "form": peers.form(fn)}
        if req.get("torch", req.get("numpy")):
            from pypto.bench.torch_policy import current_policy

            peer = peers.torch_peer(c["op"].name, c["arrays"], c["params"])
            if peer is not None:
                problem = _peer_mismatch(peers.torch_output(peer), c["want"])
                if problem:
                    errors["torch"] = problem
                else:
                    fns["torch"], groups["torch"] = peer, "torch"
                    labels["torch"] = {"label": "torch eager", "form": peers.FRESH,
                                       "omp_wait_policy": current_policy()}
        return labels

    def _torch_other(self, timing) -> dict[str, dict]:
        """PyTorch eager under the other OpenMP wait policy, in a child process (the policy is read
        once, when torch starts): ``pypto.bench.torch_policy``."""
        from pypto.bench import torch_policy

        c = self.ctx
        return torch_policy.measure_other(c["spec"], c["dtypes"], c["params"], c["dims"],
                                          names=["torch"], seed=c["seed"], timing=timing)


#: The final table's protocol (``measure``'s arguments); a request's ``timing`` overrides them.
COMPARE_TIMING = {"pause_s": 0.3, "min_rounds": 7, "max_rounds": 31, "target_spread": 0.03,
                  "budget_s": 60.0}
_MEASURE_KEYS = ("pause_s", "min_rounds", "max_rounds", "target_spread", "budget_s", "warmup",
                 "block_calls", "min_block_ms", "max_block_ms")


def _row(fair: dict) -> dict:
    """One table row from ``Fair.to_json()``: the steady state decides, the single call comes along."""
    st, si = fair["steady"], fair["single"]
    return {"median_ms": st["median_ms"], "min_ms": st["min_ms"], "spread": st["spread"], "n": st["n"],
            "calls": st["calls"], "single_ms": si["median_ms"], "single_spread": si["spread"]}


def _keep_better_policy(results: dict, other: dict | None) -> None:
    """Keeps, for the torch row, the OpenMP wait policy with the better steady state; records both."""
    mine = results["torch"]
    here = mine.get("omp_wait_policy", "default")
    policies = {here: {"median_ms": mine["median_ms"], "single_ms": mine["single_ms"]}}
    if other is None:
        other = {"policy": "other", "error": "not measured"}
    if "error" in other:
        policies[other.get("policy", "other")] = {"error": str(other["error"])[:300]}
    else:
        policies[other["policy"]] = {"median_ms": other["steady"]["median_ms"],
                                     "single_ms": other["single"]["median_ms"]}
        if other["steady"]["median_ms"] < mine["median_ms"]:
            results["torch"] = mine = {**mine, **_row(other), "omp_wait_policy": other["policy"]}
    mine["policies"] = policies
    mine["label"] = f"torch eager (OMP_WAIT_POLICY={mine['omp_wait_policy']})"


def _peer_mismatch(got, want) -> str | None:
    """Why a peer's outputs differ from the reference (same-sized shapes are compared reshaped)."""
    if len(got) != len(want):
        return f"returned {len(got)} outputs, the reference {len(want)}"
    for g, w in zip(got, want):
        problem = _mismatch(g.reshape(w.shape) if g.size == w.size else g, w)
        if problem:
            return problem
    return None


def _poison(a) -> None:
    from pypto.infra.verify import poison

    poison(a)


def _mismatch(got, want) -> str | None:
    from pypto.infra.verify import mismatch

    return mismatch(got, want)


def _spin():
    while True:
        pass


class _measure_lock:
    """One measurement at a time across every tuner process of this user on this machine.

    ``PYPTO_MEASURE_LOCK`` names another lock file, e.g. one shared by several users on purpose.
    """

    def __enter__(self):
        from filelock import FileLock

        from pypto.compiler.trust import user_temp_dir

        # In the user's private folder: a fixed name in /tmp could be pre-created or linked by
        # another user (to block every tuner, or to make this one truncate a file of theirs).
        path = os.environ.get("PYPTO_MEASURE_LOCK") or str(user_temp_dir() / "measure.lock")
        self.lock = FileLock(path)
        self.lock.acquire()
        return self

    def __exit__(self, *exc):
        self.lock.release()


def _exit_with_parent() -> None:
    """Ends this worker, and anything it started, once the tuner that started it is gone.

    The worker leads its own session (so that a deadline can kill its whole group), which also
    keeps a SIGKILL of the tuner from reaching it: without this it ran its current request to the
    end, a hung candidate for ever, a final comparison for minutes while holding the measurement
    lock that a resumed tuner waits on. A thread polls the parent's pid; it runs whenever the GIL
    is free (Halide's compiler holds it, so the check may wait for one compile to end).
    """
    import threading

    parent = int(os.environ.get("PYPTO_WORKER_PARENT") or os.getppid())

    def watch():
        while os.getppid() == parent:
            time.sleep(0.2)
        if os.getpgrp() == os.getpid():   # its own group: take its children with it
            os.killpg(os.getpid(), signal.SIGKILL)
        os.kill(os.getpid(), signal.SIGKILL)

    threading.Thread(target=watch, name="pypto-parent-watch", daemon=True).start()


def main() -> int:
    _exit_with_parent()
    out = _protocol_channel()
    w = Worker(out)
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            req = json.loads(line)
            cmd = req.get("cmd")
            if cmd == "setup":
                reply = w.setup(req)
            elif cmd == "eval":
                reply = w.evaluate(req)
            elif cmd == "compare":
                reply = w.compare(req)
            elif cmd == "autoschedule":
                reply = w.autoschedule(req)
            elif cmd == "quit":
                return 0
            else:
                reply = {"status": "error", "error": f"unknown command {cmd!r}"}
        except MemoryError:
            reply = {"status": "oom", "error": "out of memory"}
        except Exception as e:
            from pypto.errors import CompileError, ExecutionError, ScheduleError

            kind = ("compile_error" if isinstance(e, (CompileError, ScheduleError)) else
                    "runtime_error" if isinstance(e, ExecutionError) else "error")
            reply = {"status": kind, "error": f"{type(e).__name__}: {e}"[:2000],
                     "trace": traceback.format_exc()[-2000:]}
        w.send(reply)
    return 0


if __name__ == "__main__":
    sys.exit(main())
