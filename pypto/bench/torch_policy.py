"""PyTorch peers under the other OpenMP wait policy, measured in a child process.

PyTorch's OpenMP threads spin while they wait for work (the default), or sleep at once with
``OMP_WAIT_POLICY=PASSIVE``. Which is faster depends on the op and on what else runs: spinning
answers the next call sooner, but steals a core from everything else. A fair comparison times
torch both ways and keeps the better. The variable is read once, when torch's OpenMP runtime
starts, so the policy the measuring process does not run with is measured in a child process
started with it: :func:`measure_other` runs ``python -m pypto.bench.torch_policy`` on the same
inputs (same op, dims, dtypes, parameters and seed, so the same arrays), checks the outputs
against the op's reference there too, and times them with the same protocol
(:func:`pypto.infra.timing.measure`). Its figures come from a few seconds later than the others,
not from the same rounds: reports say which policy a kept figure was measured with.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from typing import Any

ENV = "OMP_WAIT_POLICY"
PASSIVE = "PASSIVE"
DEFAULT = "default"
_MEASURE_KEYS = ("pause_s", "min_rounds", "max_rounds", "target_spread", "budget_s", "warmup",
                 "block_calls", "min_block_ms", "max_block_ms")


def current_policy(env: Mapping[str, str] | None = None) -> str:
    """The policy torch runs with in a process with environment ``env`` (default: this one's)."""
    value = (os.environ if env is None else env).get(ENV, "").strip().upper()
    return value if value in ("PASSIVE", "ACTIVE") else DEFAULT


def other_policy(policy: str | None = None) -> str:
    """The policy to measure in the child: PASSIVE when this process runs the default, and the
    default (the variable removed) when it runs PASSIVE or ACTIVE."""
    return PASSIVE if (policy or current_policy()) == DEFAULT else DEFAULT


def child_env(policy: str) -> dict[str, str]:
    env = dict(os.environ)
    env.pop(ENV, None)
    if policy != DEFAULT:
        env[ENV] = policy
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def measure_other(op: str, dtypes: Sequence[str], params: Mapping[str, Any], dims: Mapping[str, int], *,
                  names: Sequence[str] = ("torch",), seed: int = 0, timing: Mapping[str, Any] | None = None,
                  policy: str | None = None, timeout: float = 600.0) -> dict[str, dict]:
    """Times the torch peers ``names`` ("torch", "torch-compile") of one call under ``policy``
    (default: :func:`other_policy`) in a child process.

    Returns name -> ``{"policy", "single": Timing JSON, "steady": ..., "max_rel_error"}``, or
    name -> ``{"policy", "error": why}`` (also for every name when the child fails).
    """
    policy = policy or other_policy()
    req = {"op": op, "dtypes": list(dtypes), "params": dict(params), "dims": dict(dims),
           "names": list(names), "seed": seed, "timing": dict(timing or {})}
    try:
        p = subprocess.run([sys.executable, "-m", "pypto.bench.torch_policy", json.dumps(req)],
                           env=child_env(policy), capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {n: {"policy": policy, "error": f"no result within {timeout:.0f} s"} for n in names}
    if p.returncode != 0:
        last = (p.stderr.strip().splitlines() or [f"exit status {p.returncode}"])[-1]
        return {n: {"policy": policy, "error": f"the child process failed: {last[:300]}"} for n in names}
    try:
        got = json.loads(p.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {n: {"policy": policy, "error": "the child process printed no result"} for n in names}
    return {n: {"policy": policy, **got.get(n, {"error": "not measured"})} for n in names}


def _child(req: dict) -> dict[str, dict]:
    """The child's side: builds the inputs and peers, verifies, times (see the module docstring)."""
    import numpy as np

    from ..infra.inputs import make_inputs
    from ..infra.timing import measure
    from ..infra.verify import max_error, mismatch
    from ..ops._load import resolve_op
    from . import peers

    op = resolve_op(req["op"])
    dtypes = tuple(req["dtypes"])
    params = op.resolve_params(req["params"])
    dims = {k: int(v) for k, v in req["dims"].items()}
    arrays = make_inputs(op, dtypes, dims, params, seed=req.get("seed", 0))
    want = op.kernel_ref(*arrays, **params)
    want = [np.asarray(w) for w in (want if isinstance(want, (tuple, list)) else (want,))]
    eager = peers.torch_peer(op.name, arrays, params)
    out: dict[str, dict] = {}
    fns = {}
    for name in req["names"]:
        if eager is None:
            out[name] = {"error": f"no PyTorch form of {op.name!r} here"}
            continue
        fn = eager if name == "torch" else peers.torch_compiled(eager)
        try:
            got = peers.torch_output(fn)
        except Exception as e:  # torch.compile needs a C++ compiler; a failure is reported
            out[name] = {"error": f"{type(e).__name__}: {str(e)[:200]}"}
            continue
        got = [g.reshape(w.shape) if g.size == w.size else g for g, w in zip(got, want)]
        problem = next((m for m in (mismatch(g, w) for g, w in zip(got, want)) if m), None)
        if problem or len(got) != len(want):
            out[name] = {"error": f"output differs from the reference: {problem or 'output count'}"}
            continue
        out[name] = {"max_rel_error": max(max_error(g, w) for g, w in zip(got, want))}
        fns[name] = fn
    if fns:
        t = {k: v for k, v in (req.get("timing") or {}).items() if k in _MEASURE_KEYS}
        res = measure(fns, **t)
        for name, r in res.items():
            out[name].update(r.to_json())
    for v in out.values():
        v["seen_policy"] = current_policy()  # what this process ran with, for the record
    return out


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    res = _child(json.loads(argv[0]))
    sys.stdout.write(json.dumps(res) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
