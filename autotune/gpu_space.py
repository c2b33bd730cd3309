"""The search space for GPU targets, derived from the pipeline's structure like the CPU one.

Nothing is written per op. A sample decides:

* the first output's **tile**: threads per block in x and y (``tx * ty <= limits.max_threads``,
  a multiple of the warp where the extents allow), a per-thread **register tile** (``rx`` by
  ``ry`` elements, unrolled) laid out either contiguously (each thread owns neighbouring
  elements, what register blocking of a reduction needs) or strided (threads interleaved, so
  neighbouring threads touch neighbouring addresses), and the order of the register loops; dims
  past the second are fused into a third block dimension;
* every other Func's **placement**: inlined (pure Funcs), per thread (``compute_at`` the output's
  innermost thread loop; its loops may be unrolled), per block (``compute_at`` the
  innermost block loop, stored in ``gpu_shared``, its loops spread over the block's threads), or
  its own kernels at root; a producer is never placed inside a consumer's placement;
* every reduction's **strategy**: serial per thread, ``rfactor`` of its reduction loop over the
  block's threads with the partial results in ``gpu_shared``, the same over one warp mapped with
  ``gpu_lanes``, or, for a reduction whose output is a handful of values (a full sum), two levels:
  chunks over blocks and lanes over threads; and an unroll factor of its reduction loop;
* **input staging**: a copy (``wrap``) of an input made per block in shared memory by all of the
  block's threads together, for a consumer that runs inside the block.

Every staged buffer's size is estimated as its region per block times its element size, from the
op's named dims and the index expressions of the algorithm (an index that is not a plain variable
counts as the whole dim, so the estimate errs high), and the space never lets the total exceed
``limits.shared_bytes``. Thread counts of every stage computed inside a block are kept within the
output's ``tx`` and ``ty``, so the block never holds more than ``limits.max_threads`` threads.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import Any

import numpy as np

from pypto.compiler.lower import base_name
from pypto.schedule.directives import Directive
from pypto.schedule.gpu import GpuLimits, gpu_limits
from pypto.schedule.schedule import Schedule

from .space import choose, lift_to_consumers, splittable

D = Directive.make
GUARD = "guard_with_if"
THREADS = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024]
REGS = [1, 2, 4, 8]
MAX_REG_BODY = 64        # elements of one thread's unrolled register tile
MAX_GRID_YZ = 65535      # CUDA's limit on blocks in y and z
RANK = {"root": 0, "block": 1, "thread": 2}
_CALL = re.compile(r"([A-Za-z_][\w$.]*)\(")


def _p2ceil(n: int) -> int:
    p = 1
    while p < n:
        p *= 2
    return p


def _bytes(type_text: str) -> int:
    """Bytes of one element of a Func of type ``"float32"`` (a tuple: ``"float32,int32"``)."""
    return sum(np.dtype(t).itemsize if t != "bool" else 1 for t in type_text.split(",") if t) or 4


def _split_args(text: str, start: int) -> tuple[list[str], int]:
    """The comma-separated arguments of a call whose '(' is at ``start - 1``."""
    args, depth, cur, i = [], 0, "", start
    while i < len(text):
        ch = text[i]
        if ch == "(" or ch == "[":
            depth += 1
        elif ch in ")]":
            if depth == 0:
                args.append(cur.strip())
                return args, i
            depth -= 1
        elif ch == "," and depth == 0:
            args.append(cur.strip())
            cur = ""
            i += 1
            continue
        cur += ch
        i += 1
    return args, i


def call_sites(info) -> dict[str, list[list[str]]]:
    """Callee base name -> the argument texts of each of its calls in ``info``'s definitions."""
    from pypto.compiler.lower import _update_values

    f = info.func
    texts = [str(v) for v in f.values()]
    for u in range(len(info.updates)):
        texts += [str(v) for v in _update_values(f, u)]
    out: dict[str, list[list[str]]] = {}
    for text in texts:
        for m in _CALL.finditer(text):
            args, _ = _split_args(text, m.end())
            out.setdefault(base_name(m.group(1)), []).append(args)
    return out


@dataclasses.dataclass
class Plan:
    """What a sample decided that the device limits constrain (read by tests and reports).

    ``threads``: kernel -> (x, y) threads per block; ``shared``: staged buffer -> bytes estimate.
    """

    threads: dict[str, tuple[int, int]] = dataclasses.field(default_factory=dict)
    shared: dict[str, int] = dataclasses.field(default_factory=dict)

    @property
    def shared_bytes(self) -> int:
        return sum(self.shared.values())


class GpuSpace:
    """The tunable structure of one op at one shape on one GPU API (see the module docstring)."""

    def __init__(self, built, dims: Mapping[str, int], limits: GpuLimits,
                 hints: Mapping[str, Any] | None = None):
        self.built = built
        self.dims = dict(dims)
        self.limits = limits
        self.hints = dict(hints or {})
        funcs = built.funcs
        self.outputs = [i for i in funcs.values() if i.is_output]
        self.anchor = self.outputs[0]
        self.others = [i for i in funcs.values() if not i.is_input and not i.is_output]
        self.calls = {i.name: call_sites(i) for i in funcs.values() if not i.is_input}
        self.consumers: dict[str, set[str]] = {n: set() for n in funcs}
        for info in funcs.values():
            for c in info.calls:
                self.consumers.setdefault(c, set()).add(info.name)
        self.plan = Plan()

    # -- helpers ------------------------------------------------------------------------------
    def extent(self, var: str) -> int | None:
        return self.dims.get(var.upper())

    def _choose(self, t, name: str, choices: list, valid: list | None = None):
        return choose(t, self.hints, name, choices, valid)

    def _input_extent(self, src: str, i: int) -> int | None:
        """Extent of Halide dim ``i`` of input ``src`` (its ``_im`` Func)."""
        for spec in self.built.op.inputs:
            if f"{spec.name}_im" == src:
                return self.dims.get(spec.dims[spec.rank - 1 - i])
        return None

    # -- regions ------------------------------------------------------------------------------
    def region(self, name: str, level: dict[str, str], per: str) -> list[int | None]:
        """Extent of each dim of Func ``name`` needed by one block (``per="block"``) or one thread.

        An index that is a plain variable of a consumer takes the consumer's extent there; any
        other index counts as the whole dim. None means unknown (the Func is then not staged).
        """
        memo: dict[str, list[int | None]] = {}

        def reg(n: str, seen: tuple) -> list[int | None]:
            if n in memo:
                return memo[n]
            info = self.built.funcs[n]
            args = info.args if not info.is_input else tuple(
                f"_{i}" for i in range(self._input_rank(n)))
            if n == self.anchor.name:
                memo[n] = [self.tile[per].get(a, 1) for a in args]
                return memo[n]
            full = [self._input_extent(n, i) if info.is_input else self.extent(a)
                    for i, a in enumerate(args)]
            out: list[int | None] = [0] * len(args)
            readers = [c for c in self.consumers.get(n, ()) if c not in seen]
            if not readers or any(level.get(c) == "root" or c in self.out_names
                                  and c != self.anchor.name for c in readers):
                memo[n] = full
                return full
            for c in readers:
                creg = reg(c, seen + (n,))
                cargs = self.built.funcs[c].args
                for site in self.calls[c].get(n, []):
                    for i in range(len(args)):
                        a = site[i] if i < len(site) else ""
                        e = creg[cargs.index(a)] if a in cargs else full[i]
                        if e is None or out[i] is None:
                            out[i] = None
                        else:
                            out[i] = max(out[i], min(e, full[i]) if full[i] else e)
            memo[n] = [o if o else None for o in out]
            return memo[n]

        return reg(name, ())

    def _input_rank(self, src: str) -> int:
        for spec in self.built.op.inputs:
            if f"{spec.name}_im" == src:
                return spec.rank
        return 0

    def _footprint(self, name: str, level, type_text: str, extra: int = 1) -> int | None:
        r = self.region(name, level, "block")
        if any(e is None for e in r):
            return None
        n = extra
        for e in r:
            n *= e
        return n * _bytes(type_text)

    # -- sampling -----------------------------------------------------------------------------
    def sample(self, t) -> Schedule:
        """Draws one point and returns its schedule (legal by construction, within the limits)."""
        lim = self.limits
        self.plan = Plan()
        self.out_names = {o.name for o in self.outputs}
        a = self.anchor
        x = a.args[0]
        y = a.args[1] if len(a.args) > 1 else None
        ex = self.extent(x) or 1
        ey = (self.extent(y) or 1) if y else 1
        cap_x = min(lim.max_threads, _p2ceil(ex))
        tx = self._choose(t, "tx", THREADS, [v for v in THREADS if v <= cap_x])
        ty = 1
        if y:
            fit = [v for v in THREADS if tx * v <= lim.max_threads and v <= _p2ceil(ey)]
            warpy = [v for v in fit if (tx * v) % lim.warp == 0]
            ty = self._choose(t, "ty", THREADS[:8], warpy or fit)
        rx = self._choose(t, "rx", REGS, [r for r in REGS if tx * r <= max(_p2ceil(ex), tx)])
        ry = 1
        if y:
            valid = [r for r in REGS if ty * r <= max(_p2ceil(ey), ty) and rx * r <= MAX_REG_BODY]
            valid = [r for r in valid if -(-ey // (ty * r)) <= MAX_GRID_YZ] or [max(REGS)]
            ry = self._choose(t, "ry", REGS, valid)
        layout = self._choose(t, "reg_layout", ["contiguous", "strided"])
        order = self._choose(t, "reg_order", ["xy", "yx"])
        self.tx, self.ty = tx, ty
        self.tile = {
            "block": {x: min(ex, tx * rx), **({y: min(ey, ty * ry)} if y else {})},
            # Strided, a thread's elements are spread over the tile: no constant per-thread box.
            "thread": {x: rx if layout == "contiguous" else None,
                       **({y: ry if layout == "contiguous" else None} if y else {})},
        }
        self.at_thread, self.at_block = f"{x}_t", f"{x}_b"
        directives: list[Directive] = []
        for o in self.outputs:
            directives += self._tile_output(o.name, 0, list(o.args), tx, ty, rx, ry, layout, order)
            self.plan.threads[o.name] = (tx, ty)
            for u in range(len(o.updates)):
                directives += self._map_root_stage(o, u + 1)
        # Placement, lifted so that no producer sits inside a consumer.
        level: dict[str, str] = {}
        for info in self.others:
            valid = ["root", "block", "thread"] + ([] if info.updates else ["inline"])
            if any(c in self.out_names - {a.name} for c in self.consumers[info.name]):
                valid = ["root"] if info.updates else ["root", "inline"]
            level[info.name] = self._choose(t, f"{info.name}.at", ["inline", "root", "block", "thread"],
                                            valid)
        level = self._repair(level)
        # Shared memory: every block-level Func, then the staged inputs, while they fit.
        budget = lim.shared_bytes
        for info in self.others:
            if level[info.name] != "block":
                continue
            need = self._footprint(info.name, level, info.type)
            if need is None or need > budget:
                level[info.name] = "root"
                level = self._repair(level)
                continue
            budget -= need
            self.plan.shared[info.name] = need
        # A Func lifted to root can push a block-level consumer's producers out too: recheck.
        for n in list(self.plan.shared):
            if level[n] != "block":
                budget += self.plan.shared.pop(n)
        strategies: dict[str, list[tuple[str, dict]]] = {}
        for info in self.others:
            if info.updates:
                strategies[info.name], budget = self._strategies(info, level, budget, t)
        staged: dict[str, tuple[str, str, int]] = {}
        for c in [a.name] + [i.name for i in self.others if level[i.name] in ("block", "thread")]:
            if any(st in ("rfactor", "lanes") for st, _ in strategies.get(c, [])):
                continue  # rfactor rewrites the consumer; a staging copy would lose its reader
            for src in sorted(self.built.funcs[c].calls):
                info = self.built.funcs.get(src)
                if info is None or not info.is_input:
                    continue
                at = self._choose(t, f"stage.{src[:-3]}.{c}", ["none", "block"])
                if at == "none":
                    continue
                name = f"{src[:-3]}_{c}_stage"
                level[name] = "block"
                self.consumers.setdefault(name, set()).add(c)
                self.calls[c][name] = self.calls[c].get(src, [])
                need = self._footprint_input(src, c, level)
                del self.calls[c][name]
                self.consumers.pop(name, None)
                if need is None or need > budget:
                    level.pop(name)
                    continue
                budget -= need
                staged[name] = (src[:-3], c, need)
                self.plan.shared[name] = need
        for name, (src, consumer, _) in staged.items():
            directives.append(D("wrap", src, consumer=consumer, **{"as": name}))
            directives += [D("compute_at", name, at=a.name, var=self.at_block),
                           D("store_in", name, memory="gpu_shared")]
            rank = self._input_rank(f"{src}_im")
            directives += self._spread(name, 0, [f"_{i}" for i in range(rank)], [])
        for info in self.others:
            directives += self._place(info, level[info.name], strategies.get(info.name, []), t)
        assert self.plan.shared_bytes <= lim.shared_bytes
        return Schedule(op=self.built.op.name, directives=tuple(directives))

    def _footprint_input(self, src: str, consumer: str, level) -> int | None:
        """Bytes of a per-block copy of input ``src`` as read by ``consumer``."""
        creg = self.region(consumer, level, "block")
        cargs = self.built.funcs[consumer].args
        rank = self._input_rank(src)
        ext = [0] * rank
        for site in self.calls[consumer].get(src, []):
            for i in range(rank):
                a = site[i] if i < len(site) else ""
                full = self._input_extent(src, i)
                e = creg[cargs.index(a)] if a in cargs else full
                if e is None or full is None:
                    return None
                ext[i] = max(ext[i], min(e, full))
        n = 1
        for e in ext:
            n *= e
        return n * _bytes(self.built.funcs[src].type or "float32") if n else None

    def _repair(self, level: dict[str, str]) -> dict[str, str]:
        return lift_to_consumers(level, self.consumers, self.anchor.name, set(self.out_names),
                                 tuple(RANK))

    # -- mapping loops onto blocks and threads ------------------------------------------------
    def _tile_output(self, name, stage, args, tx, ty, rx, ry, layout, order) -> list[Directive]:
        out: list[Directive] = []
        regs, threads, blocks = [], [], []
        for v, th, r in zip(args[:2], (tx, ty), (rx, ry)):
            if r > 1:
                out.append(D("split", name, stage, var=v, outer=f"{v}_b", inner=f"{v}_i",
                             factor=th * r, tail=GUARD))
                if layout == "contiguous":
                    out.append(D("split", name, stage, var=f"{v}_i", outer=f"{v}_t", inner=f"{v}_r",
                                 factor=r))
                else:
                    out.append(D("split", name, stage, var=f"{v}_i", outer=f"{v}_r", inner=f"{v}_t",
                                 factor=th))
                regs.append(f"{v}_r")
            else:
                out.append(D("split", name, stage, var=v, outer=f"{v}_b", inner=f"{v}_t",
                             factor=th, tail=GUARD))
            threads.append(f"{v}_t")
            blocks.append(f"{v}_b")
        if order == "yx":
            regs.reverse()
        rest = list(args[2:])
        out.append(D("reorder", name, stage, vars=regs + threads + blocks + rest))
        if rest:
            fused = rest[0]
            for k, v in enumerate(rest[1:]):
                out.append(D("fuse", name, stage, inner=fused, outer=v, fused=f"z{k}_b"))
                fused = f"z{k}_b"
            blocks.append(fused)
        out.append(D("gpu_threads", name, stage, vars=threads))
        out.append(D("gpu_blocks", name, stage, vars=blocks))
        for v in regs:
            out.append(D("unroll", name, stage, var=v))
        return out

    def _spread(self, name: str, stage: int, pure: list[str], inner: list[str]) -> list[Directive]:
        """Spreads a block-level stage's first two pure loops over the block's threads (at most
        ``tx`` by ``ty``; the rest loop inside each thread, strided so that neighbours coalesce);
        ``inner`` loops (reductions) run innermost."""
        out: list[Directive] = []
        threads, serial = [], []
        for v, th in zip(pure[:2], (self.tx, self.ty)):
            e = self.extent(v)
            th = min(th, _p2ceil(e)) if e else th
            if th <= 1:
                continue
            out.append(D("split", name, stage, var=v, outer=f"{v}_s", inner=f"{v}_p", factor=th,
                         tail=GUARD))
            threads.append(f"{v}_p")
            serial.append(f"{v}_s")
        if not threads:
            return out
        rest = list(pure[2:])
        out.append(D("reorder", name, stage, vars=inner + serial + rest + threads))
        out.append(D("gpu_threads", name, stage, vars=threads))
        return out

    def _map_root_stage(self, info, stage: int, rvars: list[str] | None = None) -> list[Directive]:
        """A root-level stage as its own kernel: pure loops over blocks and threads (``rvars``:
        the stage's reduction loops when an rfactor renamed them)."""
        pure = list(info.args) if stage == 0 else [a for a in info.args
                                                   if a in info.update_args[stage - 1]]
        if not pure:
            return [D("gpu_single_thread", info.name, stage)]
        out: list[Directive] = []
        threads, blocks = [], []
        ths = []
        for v, th in zip(pure[:2], (self.tx, self.ty)):
            e = self.extent(v) or th
            th = max(1, min(th, _p2ceil(e)))
            ths.append(th)
            out.append(D("split", info.name, stage, var=v, outer=f"{v}_b", inner=f"{v}_t",
                         factor=th, tail=GUARD))
            threads.append(f"{v}_t")
            blocks.append(f"{v}_b")
        if rvars is None:
            rvars = list(info.updates[stage - 1]) if stage else []
        rest = pure[2:]
        out.append(D("reorder", info.name, stage, vars=rvars + threads + blocks + rest))
        if rest:
            fused = rest[0]
            for k, v in enumerate(rest[1:]):
                out.append(D("fuse", info.name, stage, inner=fused, outer=v, fused=f"z{k}_b"))
                fused = f"z{k}_b"
            blocks.append(fused)
        out.append(D("gpu_threads", info.name, stage, vars=threads))
        out.append(D("gpu_blocks", info.name, stage, vars=blocks))
        prev = self.plan.threads.get(info.name, (1, 1))
        t = (ths + [1, 1])[:2]
        self.plan.threads[f"{info.name}.s{stage}"] = (max(prev[0], t[0]), max(prev[1], t[1]))
        return out

    # -- reductions ---------------------------------------------------------------------------
    def _strategies(self, info, level, budget: int, t) -> tuple[list[tuple[str, dict]], int]:
        out = []
        lv = level[info.name]
        lim = self.limits
        tiny = all((self.extent(a) or 1) <= 1 for a in info.args) or (
            int(np.prod([self.extent(a) or 1 for a in info.args])) <= 4)
        for u, rvars in enumerate(info.updates):
            valid = ["serial"]
            splits = rvars and splittable(info, u)
            if splits and lv == "block" and self.tx >= 2:
                valid.append("rfactor")
                if self.tx >= lim.warp and lim.api == "cuda":  # only CUDA lowers gpu_lanes
                    valid.append("lanes")
            if splits and lv == "root" and tiny:
                valid.append("chunks")
            strat = self._choose(t, f"{info.name}.u{u}.strategy",
                                 ["serial", "rfactor", "lanes", "chunks"], valid)
            knobs: dict[str, Any] = {"unroll": self._choose(t, f"{info.name}.u{u}.unroll", [1, 2, 4])}
            elem = _bytes(info.type)
            if strat in ("rfactor", "lanes"):
                lanes = lim.warp if strat == "lanes" else self.tx
                need = self._footprint(info.name, level, info.type, extra=lanes)
                if need is None or need > budget:
                    strat, knobs = "serial", {"unroll": knobs["unroll"]}
                else:
                    budget -= need
                    knobs["lanes"] = lanes
                    self.plan.shared[f"{info.name}_u{u}_lanes"] = need
            elif strat == "chunks":
                chunk = self._choose(t, f"{info.name}.u{u}.chunk", [1 << 12, 1 << 14, 1 << 16, 1 << 18])
                pure = int(np.prod([self.extent(a) or 1 for a in info.args]))
                fits = [v for v in THREADS if lim.warp <= v <= lim.max_threads
                        and v * pure * elem <= min(budget, lim.shared_bytes) and v <= chunk]
                if not fits:
                    strat = "serial"
                else:
                    lanes = self._choose(t, f"{info.name}.u{u}.lanes", THREADS[5:], fits)
                    knobs.update(chunk=chunk, lanes=lanes)
                    need = lanes * pure * elem
                    budget -= need
                    self.plan.shared[f"{info.name}_u{u}_lanes"] = need
                    self.plan.threads[f"{info.name}_u{u}_chunks"] = (lanes, 1)
            out.append((strat, knobs))
        return out, budget

    def _place(self, info, lv: str, strategies, t) -> list[Directive]:
        name = info.name
        a = self.anchor.name
        if lv == "inline":
            return [D("compute_inline", name)]
        out: list[Directive] = []
        if lv == "root":
            out.append(D("compute_root", name))
            out += self._map_root_stage(info, 0)
            self.plan.threads[name] = self.plan.threads.pop(f"{name}.s0")
        elif lv == "block":
            out += [D("compute_at", name, at=a, var=self.at_block),
                    D("store_in", name, memory="gpu_shared")]
            out += self._spread(name, 0, list(info.args), [])
        else:
            out.append(D("compute_at", name, at=a, var=self.at_thread))
            region = self.region(name, {}, "thread")
            small = all(e is not None for e in region) and int(np.prod(region or [1])) <= MAX_REG_BODY
            if small and self._choose(t, f"{name}.unroll_pure", [True, False]):
                out += [D("unroll", name, var=v) for v, e in zip(info.args, region) if e > 1]
        for u, rvars in enumerate(info.updates):
            strat, knobs = strategies[u] if u < len(strategies) else ("serial", {"unroll": 1})
            out += self._reduce(info, u, lv, strat, knobs, t)
        return out

    def _reduce(self, info, u: int, lv: str, strat: str, knobs: dict, t) -> list[Directive]:
        name, stage = info.name, u + 1
        rvars = list(info.updates[u])
        pure = [a for a in info.args if a in info.update_args[u]]
        out: list[Directive] = []
        k = knobs.get("unroll", 1)
        if not rvars:
            if lv == "root":
                out += self._map_root_stage(info, stage)
            elif lv == "block":
                out += self._spread(name, stage, pure, [])
            return out
        if strat == "serial":
            if lv == "root":
                out += self._map_root_stage(info, stage)
            elif lv == "block":
                out += self._spread(name, stage, pure, rvars)
            else:
                region = self.region(name, {}, "thread")
                if all(e is not None for e in region) and int(np.prod(region or [1])) <= MAX_REG_BODY \
                        and pure:
                    # Register blocking: the reduction outside, the thread's elements inside.
                    out.append(D("reorder", name, stage, vars=pure + rvars))
                    out += [D("unroll", name, stage, var=v) for v, e in zip(info.args, region)
                            if e > 1 and v in pure]
            if k > 1:
                out.append(D("unroll", name, stage, var=rvars[0], factor=k))
            return out
        if strat in ("rfactor", "lanes"):
            lanes = knobs["lanes"]
            intm = f"{name}_u{u}_lanes"
            out += [D("split", name, stage, var=rvars[0], outer="r_o", inner="r_l", factor=lanes),
                    D("rfactor", name, stage, pairs=[["r_l", "lane"]], intm=intm),
                    D("compute_at", intm, at=self.anchor.name, var=self.at_block),
                    D("store_in", intm, memory="gpu_shared")]
            lane_dir = "gpu_lanes" if strat == "lanes" else "gpu_threads"
            for st, inner in ((0, []), (1, ["r_o", *rvars[1:]])):
                ys = []
                if pure and self.ty > 1:
                    p = pure[0]
                    th = min(self.ty, _p2ceil(self.extent(p) or self.ty))
                    out.append(D("split", intm, st, var=p, outer=f"{p}_s", inner=f"{p}_p", factor=th,
                                 tail=GUARD))
                    ys = [f"{p}_p"]
                    inner = inner + [f"{p}_s"]
                out.append(D("reorder", intm, st, vars=inner + ["lane"] + ys))
                if strat == "lanes":
                    out.append(D("gpu_lanes", intm, st, var="lane"))
                    if ys:
                        out.append(D("gpu_threads", intm, st, vars=ys))
                else:
                    out.append(D(lane_dir, intm, st, vars=["lane"] + ys))
            if k > 1:
                out.append(D("unroll", intm, 1, var="r_o", factor=k))
            out += self._spread(name, stage, pure, [])
            return out
        if strat == "chunks":
            chunk, lanes = knobs["chunk"], knobs["lanes"]
            c1, c2 = f"{name}_u{u}_chunks", f"{name}_u{u}_lanes"
            out += [D("split", name, stage, var=rvars[0], outer="r_c", inner="r_i", factor=chunk),
                    D("rfactor", name, stage, pairs=[["r_c", "chunk"]], intm=c1),
                    D("compute_root", c1),
                    D("split", c1, 0, var="chunk", outer="chunk_b", inner="chunk_t", factor=lanes,
                      tail=GUARD),
                    D("gpu_threads", c1, 0, vars=["chunk_t"]),
                    D("gpu_blocks", c1, 0, vars=["chunk_b"]),
                    D("split", c1, 1, var="r_i", outer="r_io", inner="r_l", factor=lanes),
                    D("rfactor", c1, 1, pairs=[["r_l", "lane"]], intm=c2),
                    D("gpu_blocks", c1, 1, vars=["chunk"]),
                    D("compute_at", c2, at=c1, var="chunk"),
                    D("store_in", c2, memory="gpu_shared"),
                    D("gpu_threads", c2, 0, vars=["lane"]),
                    D("reorder", c2, 1, vars=["r_io", *rvars[1:], "lane"]),
                    D("gpu_threads", c2, 1, vars=["lane"])]
            if k > 1:
                out.append(D("unroll", c2, 1, var="r_io", factor=k))
            out += self._map_root_stage(info, stage, rvars=["r_c"])
            return out
        raise AssertionError(strat)


def gpu_space_for(built, dims: Mapping[str, int], target, limits: GpuLimits | None = None) -> GpuSpace:
    """The GPU space of ``built`` at ``dims`` for ``target`` (limits from the target's API)."""
    hints = getattr(built.op, "gpu_tune_hints", None) or {}
    return GpuSpace(built, dims, limits or gpu_limits(target), hints)
