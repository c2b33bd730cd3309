"""Forward+backward against PyTorch, side by side (``pypto bench --grad``).

Each case is a training step's differentiation of one op or layer: the value and the gradients
with respect to every float input of ``loss = sum(op(x) * g)`` for a fixed random cotangent
``g``. PyPTO is called as a user would write it; several forms are tried (``value_and_grad``,
``jit(value_and_grad)``, ``vjp`` of a jitted forward), each is checked against PyTorch's values
and gradients computed in float64 (:func:`pypto.infra.verify.mismatch`), and the fastest of the
forms that agree (a short pre-timing) is timed against torch eager autograd and, with
``--torch-compile``, ``torch.compile`` of the same loss function (AOTAutograd compiles its
backward). A candidate that disagrees is marked and not timed.

Timing is the fair protocol of :mod:`pypto.bench.programs`: a pause and one untimed call of the
same candidate before every timed call or block, rotating order, medians with the
inter-quartile spread for single calls and for back-to-back blocks (steady state). torch runs
with its default threads; unless ``--no-passive``, torch is timed again in a fresh process with
``OMP_WAIT_POLICY=PASSIVE`` and the better of the two is kept (both are in the JSON).
``--memory`` measures the peak resident-memory increase of one attention forward+backward, each
implementation in a fresh process (as :mod:`pypto.bench.memory` does for single ops).

    pypto bench --grad [--quick] [--memory] [--json FILE] [--compare torch,torch-compile]
    python -m pypto.bench.training [--quick] [--torch-compile] [--memory] [--json FILE]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import platform
import subprocess
import sys
import time
from collections.abc import Callable

import numpy as np

from .. import nn as _nn
from .. import ops
from ..autodiff import value_and_grad, vjp
from ..frontend import jit
from ..infra.timing import compare
from ..infra.version import cpu_model
from ..infra.verify import mismatch

#: The PyPTO forms tried on every op case, in the order they are tried.
FORMS = ("value_and_grad", "jit(value_and_grad)", "vjp(jit(f))")


@dataclasses.dataclass
class Case:
    """One forward+backward comparison.

    ``forward`` maps the float inputs (PyPTO order) to the outputs with PyPTO ops; ``torch_build``
    maps torch tensors in the same order to ``(fwd, args, params)``: ``fwd(*args)`` gives the
    outputs, and the gradients are taken with respect to ``args + params`` (a torch module's
    parameters are its own leaves). ``torch_states``: nn.LSTM takes its states with a leading
    layer axis.
    """

    key: str
    label: str
    arrays: list
    cots: list
    forward: Callable
    torch_build: Callable
    forms: dict = dataclasses.field(default_factory=dict)   # name -> forward for that form
    custom: dict = dataclasses.field(default_factory=dict)  # name -> (case -> call), own forms
    torch_states: bool = False    # inputs #1, #2 are nn.LSTM's states: [B, H] here, [1, B, H] there

    def torch_array(self, i: int) -> np.ndarray:
        a = self.arrays[i]
        return a[None] if self.torch_states and i in (1, 2) else a


def _rng(seed):
    return np.random.default_rng(seed)


def _f32(rng, shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def _as_tuple(x):
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


# -- the cases ----------------------------------------------------------------------------------

def matmul_case(n):
    r = _rng(10)
    return Case("matmul", f"matmul {n}x{n}x{n}", [_f32(r, (n, n)), _f32(r, (n, n))],
                [_f32(r, (n, n))], lambda a, b: ops.matmul(a, b),
                lambda torch, a, b: (lambda a, b: (a @ b,), [a, b], []))


def conv2d_case(c, hw):
    r = _rng(11)
    x, w, b = _f32(r, (1, c, hw, hw)), _f32(r, (c, c, 3, 3), 1 / math.sqrt(9 * c)), _f32(r, c)

    def tb(torch, x, w, b):
        return (lambda x, w, b: (torch.nn.functional.conv2d(x, w, b, padding=1),), [x, w, b], [])

    return Case("conv2d", f"conv2d 3x3 1x{c}x{hw}x{hw} -> {c}, pad 1", [x, w, b],
                [_f32(r, (1, c, hw, hw))], lambda x, w, b: ops.conv2d(x, w, b, padding=1), tb)


def softmax_case(rows, cols):
    r = _rng(12)
    return Case("softmax", f"softmax {rows}x{cols}", [_f32(r, (rows, cols))],
                [_f32(r, (rows, cols))], lambda x: ops.softmax(x),
                lambda torch, x: (lambda x: (torch.softmax(x, dim=-1),), [x], []))


def layer_norm_case(rows, cols):
    r = _rng(13)
    x, g, b = _f32(r, (rows, cols)), 1 + _f32(r, cols, 0.1), _f32(r, cols, 0.1)

    def tb(torch, x, g, b):
        return (lambda x, g, b: (torch.nn.functional.layer_norm(x, (cols,), g, b, eps=1e-5),),
                [x, g, b], [])

    return Case("layer_norm", f"layer_norm {rows}x{cols}", [x, g, b], [_f32(r, (rows, cols))],
                lambda x, g, b: ops.layer_norm(x, g, b, eps=1e-5), tb)


def attention_case(b, h, s, d):
    r = _rng(14)
    q, k, v = (_f32(r, (b, h, s, d)) for _ in range(3))

    def tb(torch, q, k, v):
        sdpa = torch.nn.functional.scaled_dot_product_attention
        return (lambda q, k, v: (sdpa(q, k, v),), [q, k, v], [])

    return Case("attention", f"scaled_dot_product_attention {b}x{h}x{s}x{d}", [q, k, v],
                [_f32(r, (b, h, s, d))], lambda q, k, v: ops.scaled_dot_product_attention(q, k, v),
                tb)


def _lstm_weights(r, inp, hid):
    s = 1 / math.sqrt(hid)
    return [_f32(r, (4 * hid, inp), s), _f32(r, (4 * hid, hid), s), _f32(r, 4 * hid, s),
            _f32(r, 4 * hid, s)]


def _load(module, names, tensors, torch):
    with torch.no_grad():
        for n, t in zip(names, tensors):
            getattr(module, n).copy_(t)
    return [getattr(module, n) for n in names]


def lstm_cell_case(batch, hid):
    r = _rng(15)
    x, h, c = _f32(r, (batch, hid)), _f32(r, (batch, hid)), _f32(r, (batch, hid))
    w = _lstm_weights(r, hid, hid)

    def tb(torch, x, h, c, *w):
        cell = torch.nn.LSTMCell(hid, hid, dtype=x.dtype)
        params = _load(cell, ("weight_ih", "weight_hh", "bias_ih", "bias_hh"), w, torch)
        return (lambda x, h, c: cell(x, (h, c)), [x, h, c], params)

    return Case("lstm_cell", f"lstm_cell batch {batch}, hidden {hid} (torch.nn.LSTMCell)",
                [x, h, c, *w], [_f32(r, (batch, hid)), _f32(r, (batch, hid))],
                lambda *a: ops.lstm_cell(*a), tb)


def lstm_layer_case(batch, hid, steps):
    """pypto.nn.lstm against torch.nn.LSTM; also a loop of lstm_cell written by the user, the
    form to fall back on where pypto.nn.lstm cannot be differentiated."""
    r = _rng(16)
    xs, h0, c0 = _f32(r, (steps, batch, hid)), _f32(r, (batch, hid)), _f32(r, (batch, hid))
    w = _lstm_weights(r, hid, hid)

    def tb(torch, xs, h0, c0, *w):
        mod = torch.nn.LSTM(hid, hid, dtype=xs.dtype)
        params = _load(mod, ("weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0"), w,
                       torch)
        return (lambda xs, h0, c0: (mod(xs, (h0, c0))[0],), [xs, h0, c0], params)

    def nn_lstm(*a):
        return _nn.lstm(*a)[0]

    def cell_loop(xs, h, c, w_ih, w_hh, b_ih, b_hh):
        hs = []
        for t in range(xs.shape[0]):
            h, c = ops.lstm_cell(xs[t], h, c, w_ih, w_hh, b_ih, b_hh)
            hs.append(h)
        return ops.stack(hs)

    forms = {"value_and_grad(pypto.nn.lstm)": nn_lstm, "vjp(pypto.nn.lstm)": nn_lstm,
             "value_and_grad(lstm_cell loop)": cell_loop,
             "jit(value_and_grad(lstm_cell loop))": cell_loop}
    return Case("lstm", f"LSTM layer batch {batch}, hidden {hid}, {steps} steps "
                        f"(pypto.nn.lstm / torch.nn.LSTM)",
                [xs, h0, c0, *w], [_f32(r, (steps, batch, hid))], cell_loop, tb, forms,
                {"manual BPTT (value_and_grad per lstm_cell step)": _bptt}, True)


def _bptt(case: Case):
    """Backpropagation through time written by the user, for when the whole layer cannot be
    differentiated as one program: the forward steps with ``ops.lstm_cell``, then per step,
    newest first, ``value_and_grad`` of ``sum(h' * dh) + sum(c' * dc)`` (the step's forward
    recomputed inside its fused backward); the weights' gradients summed with NumPy."""
    xs, h0, c0, *w = case.arrays
    (g,) = case.cots
    step = value_and_grad(_loss_of(ops.lstm_cell, 7, "lstm_step_loss"), argnums=tuple(range(7)))

    def call():
        hs, cs = [h0], [c0]
        for t in range(xs.shape[0]):
            h, c = ops.lstm_cell(xs[t], hs[-1], cs[-1], *w)
            hs.append(h)
            cs.append(c)
        dxs, dw = np.empty_like(xs), [np.zeros_like(a) for a in w]
        dh, dc = np.zeros_like(h0), np.zeros_like(c0)
        for t in reversed(range(xs.shape[0])):
            _, grads = step(xs[t], hs[t], cs[t], *w, g[t] + dh, dc)
            dxs[t], dh, dc = grads[:3]
            for acc, d in zip(dw, grads[3:]):
                acc += d
        return "outputs", [np.stack(hs[1:])], [dxs, dh, dc, *dw]

    return call


def cases(quick: bool) -> list[Case]:
    if quick:
        return [matmul_case(128), conv2d_case(8, 16), softmax_case(256, 128),
                layer_norm_case(256, 128), attention_case(1, 2, 64, 16), lstm_cell_case(8, 32),
                lstm_layer_case(8, 32, 4)]
    return [matmul_case(1024), conv2d_case(64, 56), softmax_case(4096, 1024),
            layer_norm_case(4096, 1024), attention_case(1, 8, 512, 64), lstm_cell_case(64, 512),
            lstm_layer_case(64, 512, 32)]


# -- PyPTO candidates ---------------------------------------------------------------------------

def _loss_of(forward, n: int, name: str):
    def loss(*a):
        total = None
        for o, g in zip(_as_tuple(forward(*a[:n])), a[n:]):
            term = (o * g).sum()
            total = term if total is None else total + term
        return total

    loss.__name__ = name
    return loss


def pypto_forms(case: Case) -> dict[str, Callable[[], tuple[str, list, list]]]:
    """name -> a call returning ``(kind, values, grads)``; kind "loss" (values: the scalar
    loss) or "outputs" (values: the forward's outputs, as vjp gives them)."""
    n = len(case.arrays)
    args = (*case.arrays, *case.cots)
    forms = case.forms or {name: case.forward for name in FORMS}
    out = {}
    for name, fwd in forms.items():
        if name.startswith("vjp"):
            f = jit(fwd) if "jit" in name else fwd

            def call(f=f):
                outs, back = vjp(f, *case.arrays)
                return "outputs", list(_as_tuple(outs)), list(back(*case.cots))
        else:
            vg = value_and_grad(_loss_of(fwd, n, f"{case.key}_loss"), argnums=tuple(range(n)))
            vg = jit(vg) if name.startswith("jit(") else vg

            def call(vg=vg):
                v, g = vg(*args)
                return "loss", [v], list(g)
        out[name] = call
    for name, build in case.custom.items():
        out[name] = build(case)
    return out


# -- torch candidates and the reference ---------------------------------------------------------

def _torch():
    try:
        import torch
        return torch
    except ImportError:
        return None


def torch_step(case: Case, torch, dtype, *, compiled: bool = False):
    """``(call, as_numpy)``: ``call()`` runs torch's forward+backward (what is timed);
    ``as_numpy()`` runs it and gives ``("loss", [loss], grads)`` as arrays in PyPTO's shapes."""
    ts = [torch.tensor(case.torch_array(i), dtype=dtype) for i in range(len(case.arrays))]
    fwd, targs, params = case.torch_build(torch, *ts)
    for t in targs:
        t.requires_grad_(True)
    gs = [torch.tensor(g, dtype=dtype) for g in case.cots]
    leaves = [*targs, *params]

    def loss(*a):
        return sum((o * g).sum() for o, g in zip(fwd(*a), gs))

    lf = torch.compile(loss) if compiled else loss

    def call():
        val = lf(*targs)
        grads = torch.autograd.grad(val, leaves)
        return val, grads

    def to_numpy():
        val, grads = call()
        shapes = [a.shape for a in case.arrays]
        return "loss", [val.detach().numpy()], [g.detach().numpy().reshape(s)
                                                 for g, s in zip(grads, shapes)]

    return call, to_numpy


def reference(case: Case, torch) -> dict:
    """torch in float64: the loss, the outputs and the gradients, and the loss's absolute terms
    (for a tolerance on the sum)."""
    ts = [torch.tensor(case.torch_array(i), dtype=torch.float64)
          for i in range(len(case.arrays))]
    fwd, targs, params = case.torch_build(torch, *ts)
    for t in targs:
        t.requires_grad_(True)
    gs = [torch.tensor(g, dtype=torch.float64) for g in case.cots]
    outs = fwd(*targs)
    terms = [o * g for o, g in zip(outs, gs)]
    loss = sum(t.sum() for t in terms)
    grads = torch.autograd.grad(loss, [*targs, *params])
    abs_terms = float(sum(t.detach().abs().sum() for t in terms))
    return {"loss": loss.detach().numpy(), "abs_terms": abs_terms,
            "outputs": [o.detach().numpy() for o in outs],
            "grads": [g.numpy().reshape(a.shape) for g, a in zip(grads, case.arrays)]}


def check(result, ref: dict) -> str | None:
    """None when ``(kind, values, grads)`` agrees with the float64 reference, else what differs.

    Per element ``|got - want| <= atol + rtol*|want|`` with rtol 1e-3 and atol 1e-3 x the RMS
    of the reference array (float32 sums over a thousand terms stay well inside it; a wrong
    gradient does not); the scalar loss, a sum of N terms, gets atol 1e-5 x the sum of |terms|.
    """
    kind, values, grads = result
    if kind == "loss":
        tol = (1e-3, 1e-5 * ref["abs_terms"] + 1e-30)
        wants = [(np.asarray(values[0]).reshape(()), ref["loss"].reshape(()), tol, "the loss")]
    else:
        wants = [(v, w, None, f"output #{i}")
                 for i, (v, w) in enumerate(zip(values, ref["outputs"]))]
        if len(values) != len(ref["outputs"]):
            return f"{len(values)} outputs, torch has {len(ref['outputs'])}"
    if len(grads) != len(ref["grads"]):
        return f"{len(grads)} gradients for {len(ref['grads'])} inputs"
    wants += [(g, w, None, f"the gradient of input #{i}")
              for i, (g, w) in enumerate(zip(grads, ref["grads"]))]
    for got, want, tol, what in wants:
        if tol is None:
            rms = float(np.sqrt(np.mean(np.square(want)))) if np.size(want) else 0.0
            tol = (1e-3, 1e-3 * rms + 1e-30)
        bad = mismatch(np.asarray(got, np.float64), np.asarray(want, np.float64), tol)
        if bad:
            return f"{what}: {bad}"
    return None


# -- verifying and timing -----------------------------------------------------------------------

def _short(e: BaseException) -> str:
    text = " ".join(str(e).split())
    return f"{type(e).__name__}: {text[:400]}"


def prepare(case: Case, torch, *, torch_compile: bool, pypto: bool = True,
            log=print) -> tuple[dict, dict]:
    """Checks every candidate against the float64 reference; returns the case's record and the
    verified candidates to time (PyPTO's fastest form under the key "pypto")."""
    rec = {"case": case.key, "label": case.label, "pypto_form": None, "forms": {},
           "candidates": {}}
    ref = reference(case, torch)
    calls = {}
    for name, fn in (pypto_forms(case).items() if pypto else ()):
        try:
            bad = check(fn(), ref)
        except Exception as e:   # a form that fails to build or run is a result, with its reason
            bad = f"failed: {_short(e)}"
        rec["forms"][name] = {"verified": bad is None, "reason": bad}
        if bad is None:
            calls[name] = fn
        else:
            log(f"  {case.key}: PyPTO {name} not timed: {bad}")
    cands = {}
    if calls:   # the fastest verified form, by a short pre-timing, is the one timed fairly
        pre = compare(calls, min_rounds=3, max_rounds=3, warmup=1, min_sample_ms=0.0, budget_s=60)
        for name, t in pre.items():
            rec["forms"][name]["pretime_ms"] = t.median
        rec["pypto_form"] = min(calls, key=lambda n: pre[n].median)
        cands["pypto"] = calls[rec["pypto_form"]]
    peers = [("torch eager", False)] + ([("torch.compile", True)] if torch_compile else [])
    for name, compiled in peers:
        try:
            call, as_numpy = torch_step(case, torch, torch.float32, compiled=compiled)
            bad = check(as_numpy(), ref)
        except Exception as e:
            bad = f"failed: {_short(e)}"
        rec["candidates"][name] = {"verified": bad is None, "reason": bad}
        if bad is None:
            cands[name] = call
        else:
            log(f"  {case.key}: {name} not timed: {bad}")
    if not pypto:
        return rec, cands
    rec["candidates"]["pypto"] = {"verified": bool(calls), "reason": None if calls else
                                  "no PyPTO form agrees with torch (see forms)"}
    return rec, cands


def measure(cands: dict, *, pause: float, rounds: int) -> dict:
    """Single calls and back-to-back blocks (about 0.2 s of the slowest candidate, 2 to 10
    calls), fair protocol; name -> figures in milliseconds per call."""
    if not cands:
        return {}
    opts = {"pause_s": pause, "min_sample_ms": 0.0, "warmup": 1, "budget_s": 900}
    single = compare(cands, min_rounds=rounds, max_rounds=rounds, **opts)
    slowest = max(t.median for t in single.values())
    n = max(2, min(10, int(200.0 / max(slowest, 1e-3))))
    br = max(1, rounds // 2)
    block = compare({k: (lambda f=f: [f() for _ in range(n)]) for k, f in cands.items()},
                    min_rounds=br, max_rounds=br, **opts)
    return {k: {"single_ms": single[k].median, "single_spread": single[k].spread,
                "rounds": len(single[k].samples), "steady_ms": block[k].median / n,
                "steady_spread": block[k].spread, "block": n} for k in cands}


def _passive(names: list[str], quick: bool, torch_compile: bool, pause: float,
             rounds: int) -> dict:
    """torch's figures from a fresh process with OMP_WAIT_POLICY=PASSIVE (case -> name -> figs)."""
    req = json.dumps({"cases": names, "quick": quick, "torch_compile": torch_compile,
                      "pause": pause, "rounds": rounds})
    env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE")
    r = subprocess.run([sys.executable, "-m", "pypto.bench.training", "--torch-child", req],
                       capture_output=True, text=True, env=env, timeout=3600)
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
    if r.returncode or not lines:
        tail = (r.stderr.strip().splitlines() or ["no output"])[-1]
        print(f"  (torch with OMP_WAIT_POLICY=PASSIVE failed: {tail[:300]})")
        return {}
    return json.loads(lines[-1])


def _torch_child(req: dict) -> None:
    torch = _torch()
    out = {}
    for case in _select(cases(req["quick"]), req["cases"]):
        _, cands = prepare(case, torch, torch_compile=req["torch_compile"], pypto=False,
                           log=lambda s: print(s, file=sys.stderr))
        out[case.key] = measure(cands, pause=req["pause"], rounds=req["rounds"])
    print(json.dumps(out))


def _merge_passive(rec: dict, timed: dict, passive: dict) -> None:
    """Keeps the better of torch's default and PASSIVE figures (by single-call median)."""
    for name, figs in timed.items():
        cand = rec["candidates"][name]
        cand.update(figs)
        if name == "pypto":
            continue
        cand["omp_wait_policy"] = "default"
        other = passive.get(name)
        if other:
            cand["default_policy"], cand["passive_policy"] = dict(figs), other
            if other["single_ms"] < figs["single_ms"]:
                cand.update(other)
                cand["omp_wait_policy"] = "PASSIVE"


def _ratios(rec: dict) -> None:
    c = rec["candidates"]
    peers = {k: v for k, v in c.items() if k != "pypto" and "single_ms" in v}
    rec["best_peer"] = min(peers, key=lambda k: peers[k]["single_ms"]) if peers else None
    rec["ratio_single"] = rec["ratio_steady"] = None
    if peers and "single_ms" in c.get("pypto", {}):
        best = min(v["single_ms"] for v in peers.values())
        best_steady = min(v["steady_ms"] for v in peers.values())
        rec["ratio_single"] = best / c["pypto"]["single_ms"]
        rec["ratio_steady"] = best_steady / c["pypto"]["steady_ms"]


# -- memory -------------------------------------------------------------------------------------

_MALLOC_ENV = {"MALLOC_MMAP_THRESHOLD_": "131072", "MALLOC_TRIM_THRESHOLD_": "131072"}


def _memory_child(impl: str, form: str | None, quick: bool) -> None:
    """Peak RSS increase of ONE attention forward+backward of ``impl``, in this fresh process."""
    import gc

    from .profile import peak_rss_bytes, reset_peak_rss, rss_bytes

    case = _select(cases(quick), ["attention"])[0]
    torch = _torch()
    if impl == "pypto":
        call = pypto_forms(case)[form]
        as_numpy = call
    else:
        call, as_numpy = torch_step(case, torch, torch.float32, compiled=impl == "torch.compile")
    call()
    call()
    gc.collect()
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass
    before = rss_bytes()
    ok = reset_peak_rss()
    result = call()
    peak, source = peak_rss_bytes(ok)
    del result
    bad = check(as_numpy(), reference(case, torch))   # after the measurement: it allocates
    print(json.dumps({"impl": impl, "form": form, "peak_rss_bytes": max(0, peak - before),
                      "rss_source": source, "input_bytes": int(sum(a.nbytes for a in case.arrays)),
                      "verified": bad is None, "reason": bad}))


def memory(form: str | None, quick: bool, torch_compile: bool) -> list[dict]:
    """Each implementation's attention forward+backward in a fresh process."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")}
    env.update(_MALLOC_ENV)
    impls = (["pypto"] if form else []) + ["torch eager"] + (["torch.compile"] if torch_compile
                                                             else [])
    rows = []
    for impl in impls:
        cmd = [sys.executable, "-m", "pypto.bench.training", "--memory-child", impl] + (
            ["--form", form] if impl == "pypto" else []) + (["--quick"] if quick else [])
        r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1800)
        lines = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
        if r.returncode or not lines:
            tail = (r.stderr.strip().splitlines() or ["no output"])[-1]
            rows.append({"impl": impl, "form": form if impl == "pypto" else None,
                         "peak_rss_bytes": None, "verified": False,
                         "reason": f"the measuring process failed: {tail[:300]}"})
        else:
            rows.append(json.loads(lines[-1]))
    return rows


# -- the report ---------------------------------------------------------------------------------

def header(meta: dict) -> str:
    la = ", ".join(f"{x:.2f}" for x in meta["load_average_start"])
    return "\n".join([
        "PyPTO forward+backward against PyTorch: value and gradients w.r.t. every float input of "
        "sum(op(x) * g), float32, CPU",
        f"machine: {meta['cpu']}, {meta['cpus']} cores; torch {meta['torch']} with "
        f"{meta['torch_threads']} threads; load average at the start {la}",
        "CAVEAT: other processes share this machine unless the load average above is near 0; "
        "a loaded machine slows candidates unevenly, so treat the figures as indicative.",
        f"single call: median of {meta['rounds']} rounds; steady: per call in back-to-back "
        f"blocks; each timed call/block after a {meta['pause_s']} s pause and one untimed call "
        "of the same candidate, rotating order.",
        "ratio = best peer's time / PyPTO's time (> 1: PyPTO faster); x = failed verification, "
        "not timed; - = not measured."])


def _ms(c: dict | None) -> str:
    if not c:
        return "-"
    if not c.get("verified"):
        return "x"
    if "single_ms" not in c:
        return "-"
    s = f"{c['single_ms']:.3f}"
    return s + (f" ±{c['single_spread']:.0%}" if c["single_spread"] > 0.1 else "")


def table(records: list[dict], mem: list[dict]) -> str:
    lines = [f"{'case':<52}{'pypto ms':>16}{'torch eager ms':>17}{'torch.compile ms':>19}"
             f"{'ratio':>8}{'steady':>8}  pypto form"]
    notes = []
    for r in records:
        c = r["candidates"]
        ratio = "-" if r["ratio_single"] is None else f"{r['ratio_single']:.2f}"
        steady = "-" if r["ratio_steady"] is None else f"{r['ratio_steady']:.2f}"
        eager = c.get("torch eager")
        lines.append(f"{r['label'][:51]:<52}{_ms(c.get('pypto')):>16}{_ms(eager):>17}"
                     f"{_ms(c.get('torch.compile')):>19}{ratio:>8}{steady:>8}  "
                     f"{r['pypto_form'] or 'none agrees'}")
        for name, f in r["forms"].items():
            if not f["verified"]:
                notes.append(f"{r['case']}: PyPTO {name}: {f['reason']}")
        for name, f in c.items():
            if name != "pypto" and not f["verified"]:
                notes.append(f"{r['case']}: {name}: {f['reason']}")
            if f.get("omp_wait_policy") == "PASSIVE":
                notes.append(f"{r['case']}: {name} figure is from OMP_WAIT_POLICY=PASSIVE "
                             f"(faster than the default here)")
    if mem:
        lines.append("")
        lines.append("peak RSS increase of one attention forward+backward (fresh process each):")
        for m in mem:
            fig = ("-" if m["peak_rss_bytes"] is None else
                   f"{m['peak_rss_bytes'] / 2**20:.1f} MiB")
            tag = f" [{m['form']}]" if m.get("form") else ""
            ok = "" if m.get("verified") else f"  (not verified: {m.get('reason')})"
            lines.append(f"  {m['impl'] + tag:<36}{fig:>14}{ok}")
    if notes:
        lines.append("")
        lines += ["notes:"] + [f"  {n}" for n in notes]
    return "\n".join(lines)


def _select(all_cases: list[Case], keys) -> list[Case]:
    if not keys:
        return all_cases
    known = {c.key: c for c in all_cases}
    unknown = [k for k in keys if k not in known]
    if unknown:
        raise SystemExit(f"unknown case(s) {', '.join(unknown)}; choose from "
                         f"{', '.join(known)}")
    return [known[k] for k in keys]


def run(*, quick: bool = False, torch_compile: bool = False, with_memory: bool = False,
        passive: bool | None = None, pause: float = 0.3, rounds: int | None = None,
        only=None, log=print) -> dict:
    """Measures the selected cases; returns the report (``meta``, ``cases``, ``memory``)."""
    torch = _torch()
    if torch is None:
        raise SystemExit("pypto bench --grad compares with PyTorch: install it "
                         "(pip install 'pypto[torch]')")
    rounds = rounds or (3 if quick else 9)
    passive = (not quick) if passive is None else passive
    meta = {"cpu": cpu_model(), "machine": platform.machine(), "cpus": os.cpu_count(),
            "python": platform.python_version(), "torch": torch.__version__,
            "torch_threads": torch.get_num_threads(), "load_average_start": os.getloadavg(),
            "when": time.strftime("%Y-%m-%d %H:%M:%S"), "quick": quick, "pause_s": pause,
            "rounds": rounds, "torch_compile": torch_compile, "passive_checked": passive}
    selected = _select(cases(quick), only)
    records = []
    for case in selected:
        log(f"{case.label}: verifying ...")
        rec, cands = prepare(case, torch, torch_compile=torch_compile, log=log)
        rec["timed"] = measure(cands, pause=pause, rounds=rounds)
        records.append(rec)
    theirs = _passive([c.key for c in selected], quick, torch_compile, pause,
                      rounds) if passive else {}
    for rec in records:
        _merge_passive(rec, rec.pop("timed"), theirs.get(rec["case"], {}))
        _ratios(rec)
    mem = []
    if with_memory:
        att = next((r for r in records if r["case"] == "attention"), None)
        mem = memory(att["pypto_form"] if att else FORMS[0], quick, torch_compile)
    meta["load_average_end"] = os.getloadavg()
    return {"meta": meta, "cases": records, "memory": mem}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small shapes, 3 rounds, no PASSIVE run")
    ap.add_argument("--torch-compile", action="store_true", help="also time torch.compile")
    ap.add_argument("--memory", action="store_true",
                    help="peak memory of attention's forward+backward, fresh process each")
    ap.add_argument("--json", default=None, help="write the report here")
    ap.add_argument("--case", action="append", default=None,
                    help="only this case (repeatable): matmul, conv2d, softmax, layer_norm, "
                         "attention, lstm_cell, lstm")
    ap.add_argument("--passive", action=argparse.BooleanOptionalAction, default=None,
                    help="also time torch with OMP_WAIT_POLICY=PASSIVE in a fresh process, "
                         "keeping the better (default: on, off with --quick)")
    ap.add_argument("--pause", type=float, default=0.3, help="seconds before each timed call")
    ap.add_argument("--rounds", type=int, default=None, help="single-call rounds (9; 3 quick)")
    ap.add_argument("--torch-child", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--memory-child", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--form", default=None, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.torch_child:
        return _torch_child(json.loads(a.torch_child))
    if a.memory_child:
        return _memory_child(a.memory_child, a.form, a.quick)
    report = run(quick=a.quick, torch_compile=a.torch_compile, with_memory=a.memory,
                 passive=a.passive, pause=a.pause, rounds=a.rounds, only=a.case)
    print()
    print(header(report["meta"]))
    print()
    print(table(report["cases"], report["memory"]))
    la = ", ".join(f"{x:.2f}" for x in report["meta"]["load_average_end"])
    print(f"\nload average at the end: {la}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(report, f, indent=1, default=_json_default)
    return report


def _json_default(x):
    if isinstance(x, np.generic):
        return x.item()
    raise TypeError(f"{type(x).__name__} is not JSON serializable")


if __name__ == "__main__":
    main()
