"""The parent side of measurement: a worker process per tuner, killed and replaced when it fails.

Halide's compiler holds the GIL and JIT code ignores Python signals, so a candidate's time limit is
enforced from here: on a deadline the worker's whole process group gets SIGKILL. A worker that dies
(segfault, abort, out of memory) costs only the candidate it was running.

The worker compiles candidates through the compile cache, as users' calls run (ahead of time, on
PyPTO's thread pool), into a scratch cache folder of this evaluator: candidates never fill the
user's cache, and the folder is removed when the evaluator is shut down. With the cache turned
off (``PYPTO_CACHE_DIR=off``) users' kernels are JIT-compiled, and so are the candidates.
"""

from __future__ import annotations

import dataclasses
import json
import os
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from typing import Any


@dataclasses.dataclass
class Result:
    """What became of one candidate. ``status`` is ok, pruned, wrong, compile_error,
    runtime_error, timeout, crash, oom or error; ``time_ms`` is set for ok and pruned."""

    status: str
    time_ms: float | None = None
    error: str = ""
    compile_s: float | None = None
    incumbent_ms: float | None = None
    spread: float | None = None

    @property
    def ok(self) -> bool:
        return self.status == "ok"


class WorkerDied(Exception):
    pass


class Evaluator:
    """Runs candidates of one (op, dtypes, params, dims, target) in a worker process."""

    def __init__(self, op_spec: str, dtypes, params, dims, target: str, *, seed: int = 0,
                 compile_timeout: float = 60.0, run_timeout: float = 60.0,
                 memory_mb: int | None = 8192, log_path: str | None = None):
        self.setup_req = {"cmd": "setup", "op": op_spec, "dtypes": list(dtypes),
                          "params": dict(params), "dims": dict(dims), "target": target,
                          "seed": seed, "memory_mb": memory_mb}
        self.compile_timeout = compile_timeout
        self.run_timeout = run_timeout
        self.proc: subprocess.Popen | None = None
        if log_path is None:  # in the user's private folder: a fixed name in /tmp can be planted
            from pypto.compiler.trust import user_temp_dir

            log_path = str(user_temp_dir() / f"worker-{os.getpid()}.log")
        self.log_path = log_path
        self.restarts = 0
        self.scratch: str | None = None   # the workers' compile cache (see the module's doc)

    # -- process management -------------------------------------------------------------------
    def _start(self) -> None:
        env = dict(os.environ)
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        if env.get("PYPTO_CACHE_DIR", "").strip().lower() != "off":
            if self.scratch is None:   # kept across worker restarts, removed by shutdown()
                from pypto.compiler.trust import user_temp_dir

                self.scratch = tempfile.mkdtemp(prefix="tune-cache-", dir=user_temp_dir())
            env["PYPTO_CACHE_DIR"] = self.scratch
        env["PYPTO_WORKER_PARENT"] = str(os.getpid())   # the worker exits when this process is gone
        # The worker runs with the user's OpenMP wait policy (the default unless they set one):
        # its PyTorch baseline is measured with that policy and, in a child process, with the
        # other (pypto.bench.torch_policy), the better kept. Spinning threads cannot slow the
        # next candidate: the side-by-side timing pauses where the library changes.
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen([sys.executable, "-m", "autotune.worker"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=log, env=env,
                                     start_new_session=True, cwd=os.getcwd())
        log.close()
        self.sel = selectors.DefaultSelector()
        self.sel.register(self.proc.stdout, selectors.EVENT_READ)
        self._buf = b""
        reply = self._request(self.setup_req, self.compile_timeout + 120)
        if not reply.get("ok"):
            err = reply.get("error", reply)
            self.close()
            raise RuntimeError(f"the measuring worker could not set up: {err}")

    def close(self) -> None:
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.proc.wait()
        try:
            self.sel.close()
            self.proc.stdin.close()
            self.proc.stdout.close()
        except OSError:
            pass
        self.proc = None

    def _send(self, obj) -> None:
        try:
            self.proc.stdin.write((json.dumps(obj) + "\n").encode())
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            raise WorkerDied(self._death()) from None

    def _read(self, timeout: float) -> dict | None:
        """One reply line, or None when ``timeout`` passes first."""
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            if not self.sel.select(left):
                continue
            chunk = os.read(self.proc.stdout.fileno(), 65536)
            if not chunk:
                raise WorkerDied(self._death())
            self._buf += chunk
        line, _, self._buf = self._buf.partition(b"\n")
        return json.loads(line)

    def _death(self) -> str:
        rc = self.proc.wait() if self.proc else None
        if rc is not None and rc < 0:
            try:
                return f"worker killed by {signal.Signals(-rc).name}"
            except ValueError:
                return f"worker killed by signal {-rc}"
        return f"worker exited with status {rc}"

    def _request(self, obj, timeout: float) -> dict:
        self._send(obj)
        reply = self._read(timeout)
        if reply is None:
            self.close()
            raise TimeoutError(f"no reply within {timeout:.0f} s")
        return reply

    # -- candidates ---------------------------------------------------------------------------
    def evaluate(self, schedule: dict, *, incumbent: dict | None = None, prune_ms: float | None = None,
                 timing: dict | None = None, inject: str | None = None,
                 run_timeout: float | None = None) -> Result:
        """Compiles, checks and times one schedule (JSON object). Never raises for a bad candidate."""
        if self.proc is None:
            self._start()
        req = {"cmd": "eval", "schedule": schedule, "incumbent": incumbent, "prune_ms": prune_ms,
               "timing": timing or {}, "inject": inject}
        try:
            self._send(req)
            first = self._read(self.compile_timeout)
            if first is None:
                self._restart()
                return Result("timeout", error=f"compile took longer than {self.compile_timeout:.0f} s; killed")
            if first.get("phase") != "compiled":
                return _result(first)
            compile_s = first.get("compile_s")
            limit = min(self.run_timeout, run_timeout or self.run_timeout)
            reply = self._read(limit)
            if reply is None:
                self._restart()
                return Result("timeout", error=f"run took longer than {limit:.0f} s; killed",
                              compile_s=compile_s)
            return _result(reply)
        except WorkerDied as e:
            self._restart()
            status = "oom" if "SIGKILL" in str(e) and self.setup_req.get("memory_mb") is None else "crash"
            return Result(status, error=str(e))

    def compare(self, schedules: dict[str, dict], *, numpy: bool = True,
                timing: dict | None = None, timeout: float = 900.0) -> dict[str, Any]:
        """Side-by-side timing of several schedules in one process, with the fair protocol; with
        ``numpy``, also the peers users would run instead: NumPy's fast form (the one ``pypto
        bench`` times) and PyTorch eager under both OpenMP wait policies (see the worker)."""
        if self.proc is None:
            self._start()
        try:
            reply = self._request({"cmd": "compare", "schedules": schedules, "numpy": numpy,
                                   "timing": timing or {}}, timeout)
        except (WorkerDied, TimeoutError) as e:
            self._restart()
            return {"results": {}, "errors": {"*": str(e)}}
        return reply

    def autoschedule(self, name: str, timeout: float = 600.0) -> tuple[dict | None, str]:
        """(schedule JSON, "") from Halide's autoscheduler ``name``, or (None, why not)."""
        if self.proc is None:
            self._start()
        try:
            reply = self._request({"cmd": "autoschedule", "name": name}, timeout)
        except (WorkerDied, TimeoutError) as e:
            self._restart()
            return None, f"{name}: {e}"
        if reply.get("status") != "ok":
            return None, f"{name}: {reply.get('error')}"
        return reply["schedule"], ""

    def _restart(self) -> None:
        self.close()
        self.restarts += 1

    def shutdown(self) -> None:
        """Stops the worker and removes the scratch compile cache."""
        self.close()
        if self.scratch is not None:
            shutil.rmtree(self.scratch, ignore_errors=True)
            self.scratch = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.shutdown()


def _result(reply: dict) -> Result:
    return Result(status=reply.get("status", "error"), time_ms=reply.get("time_ms"),
                  error=reply.get("error", ""), compile_s=reply.get("compile_s"),
                  incumbent_ms=reply.get("incumbent_ms"), spread=reply.get("spread"))
