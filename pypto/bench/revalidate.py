"""Re-timing stored schedules against the default they must beat (``pypto db revalidate``).

A stored entry earns its place by beating the default schedule at its shape. Both change: the
default improves, Halide changes, the machine is another. Revalidation takes every entry of a
database (that this machine can run: its target family), builds the entry's schedule and the op's
current default at the entry's shape, checks both outputs against the op's NumPy reference (the
one routine, :func:`pypto.infra.verify.mismatch`), and times them side by side with the fair
protocol (:func:`pypto.infra.timing.compare` with a 0.3 s pause and an untimed call of the same
candidate before each timed block, the order rotating each round).

Verdicts:

- ``failed``: the entry's schedule does not compile, does not run, or gives a wrong result at its
  own shape. It is dropped.
- ``slower``: the entry's speed is below ``1 - margin`` of the default's (``default_ms /
  entry_ms``), in a first measurement and again in a second, longer one (a single measurement on a
  shared machine is not enough to throw a result away). It is dropped, or with ``mark`` kept with
  a ``slower_at`` record for its shape, which lookup honours.
- ``kept``: otherwise. Its provenance gets ``revalidated`` (date and both times), and a ``slower_at``
  record for its own shape, if an earlier run left one, is cleared.
- ``stale`` (the op's algorithm changed: ``pypto db prune`` removes it) and ``skipped`` (another
  target family, an op not registered here, a default or reference that cannot run): left alone.

Programs (a traced function, a backward pass, a composite op at one shape: ops named ``g_<hash>``
or after the composite) are not registered ops: their entries are checked through the graph file
the tuner wrote beside them (``programs/NAME.graph``, :mod:`pypto.database.programs`), which is
read as data and rebuilt into the program's graph op. Their default is what a call of the program
gets without the entry: the fused default, or the first of its fallbacks that compiles. A missing
or unreadable graph file, or one of another program, makes the entry ``skipped``, and a program
whose graph now lowers to another fingerprint ``stale``; the report line says what is wrong and
what to do, and the entry is left as it is.

Writes go through :meth:`Database.update`, the locked read-modify-write, and touch an entry only if
it still holds the schedule that was measured: an entry re-tuned meanwhile is left as it is.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np

from ..compiler import targets
from ..database.entry import Entry, Key
from ..database.store import Database, LoadResult
from ..database.tools import cannot_run_here, key_mismatch
from ..errors import PyptoError
from ..infra.timing import Timing, compare

#: An entry is slower when its speed is below ``1 - MARGIN`` of the default's: the timing noise of
#: an interleaved measurement here is a few percent.
MARGIN = 0.03
#: The first measurement (``compare``'s arguments); a loss is confirmed by one with twice the rounds.
TIMING = {"min_rounds": 5, "max_rounds": 15, "target_spread": 0.03, "budget_s": 10.0,
          "pause_s": 0.3}

Timer = Callable[..., Mapping[str, Timing]]


@dataclasses.dataclass
class Outcome:
    """What revalidation found for one entry, and what it did (or would do) about it."""

    database: str
    key: Key
    schedule_hash: str
    verdict: str                    # kept | slower | failed | stale | skipped
    reason: str = ""
    entry_ms: float | None = None
    default_ms: float | None = None
    action: str | None = None       # drop | mark | stamp (keep, with the new times) | None
    written: bool = False

    @property
    def ratio(self) -> float | None:
        """The entry's speed over the default's (above 1: the entry is faster)."""
        if not self.entry_ms or self.default_ms is None:
            return None
        return self.default_ms / self.entry_ms

    @property
    def shown(self) -> str:
        """The verdict with what was done: ``dropped (slower)``, ``would mark (slower)``, ..."""
        if self.action in ("drop", "mark"):
            verb = {"drop": "dropped", "mark": "marked"}[self.action] if self.written else \
                f"would {self.action}"
            return f"{verb} ({self.verdict})"
        return self.verdict

    def to_json(self) -> dict[str, Any]:
        return {"database": self.database, "op": self.key.op, "shape": self.key.shape_dict,
                "dtypes": list(self.key.dtypes), "params": dict(self.key.params),
                "family": self.key.family, "entry_ms": self.entry_ms,
                "default_ms": self.default_ms, "ratio": self.ratio, "verdict": self.verdict,
                "action": self.action, "written": self.written, "reason": self.reason}


def revalidate(databases: Iterable[Database], *, ops: Iterable[str] | None = None,
               target=None, margin: float = MARGIN, mark: bool = False, dry_run: bool = False,
               timer: Timer = compare, timing: Mapping[str, Any] | None = None,
               progress: Callable[[str], None] | None = None) -> list[Outcome]:
    """Re-times every entry of ``databases`` (of the ops ``ops``, default all) beside the default.

    Args:
        databases: the databases to check and write.
        ops: only entries of these op names.
        target: the target to compile and run for (default: the current one); entries of another
            target family are skipped.
        margin: an entry slower than ``1 - margin`` of the default's speed loses.
        mark: keep losers, with a ``slower_at`` record for their shape, instead of dropping them.
        dry_run: measure and report, write nothing.
        timer: the side-by-side timer (``compare``'s signature); tests pass a fake.
        timing: arguments for ``timer`` instead of :data:`TIMING`.
        progress: called with one line before each entry is measured.

    Returns:
        One :class:`Outcome` per entry looked at, in database order.
    """
    target = targets.current() if target is None else targets.parse(target)
    wanted = set(ops) if ops is not None else None
    work = [(db, e) for db in databases for e in db.iter_all()
            if wanted is None or e.key.op in wanted]
    out: list[Outcome] = []
    by_db: dict[int, tuple[Database, list[Outcome]]] = {}
    for i, (db, e) in enumerate(work):
        if progress is not None:
            progress(f"[{i + 1}/{len(work)}] {e.key.op} {e.key.shape_text()} "
                     f"[{'/'.join(e.key.dtypes)}] in {db.name}")
        o = judge(e, db.name, target, margin=margin, mark=mark, timer=timer,
                  timing=dict(TIMING if timing is None else timing),
                  root=getattr(db, "root", None))
        out.append(o)
        by_db.setdefault(id(db), (db, []))[1].append(o)
    if not dry_run:
        for db, done in by_db.values():
            _apply(db, [o for o in done if o.action])
    return out


def _cannot_run(target) -> str | None:
    """Why this machine cannot run ``target``'s code (None: it can)."""
    import halide as hl

    why = cannot_run_here(target)
    if why is None and target.has_gpu_feature() and not hl.host_supports_target_device(target):
        why = "no such device here"
    return why


def judge(e: Entry, where: str, target, *, margin: float, mark: bool, timer: Timer,
          timing: Mapping[str, Any], root=None) -> Outcome:
    """The verdict on one entry (nothing written). ``root``: the database's folder, where the
    graph files of program entries are."""
    from ..compiler.jit import compile_built
    from ..compiler.lower import build, fingerprint
    from ..infra.inputs import complete_dims, make_inputs

    k = e.key
    res = Outcome(where, k, e.schedule.hash, "skipped")
    if k.family != targets.family(target):
        res.reason = f"target family {k.family}; this run compiles for {targets.family(target)}"
        return res
    # An entry is timed by running it: for a target this machine cannot run it is left alone
    # (arm-64 entries were run here, died or failed to link, and were dropped as "failed").
    why = _cannot_run(target)
    if why:
        res.reason = f"{target} cannot run here ({why}); re-time it on a machine that can"
        return res
    try:
        op, program = _entry_op(k.op, root)
    except _NoProgram as err:
        res.reason = str(err)
        return res
    except PyptoError as err:
        res.reason = f"cannot set up the op here: {err}"
        return res
    if not program:
        # A key its op cannot have (dtypes not among its signatures, other dims) never serves a
        # call; building the op from it raised TypeError.
        bad = key_mismatch(op, k)
        if bad:
            res.reason = f"the entry's key does not fit {k.op}: {bad}; `pypto db prune` removes it"
            return res
    try:
        params = dict(k.params)
        built = build(op, k.dtypes, params)
        fp = fingerprint(built)
        dims = complete_dims(op, k.shape_dict, params)
        arrays = make_inputs(op, k.dtypes, dims, params)
        want = op.kernel_ref(*arrays, **params)
        want = [np.asarray(w) for w in (want if isinstance(want, tuple) else (want,))]
    except PyptoError as err:
        res.reason = f"cannot set up the op here: {err}"
        return res
    if fp != k.fingerprint:
        res.verdict = "stale"
        res.reason = (f"the op's fingerprint is now {fp}; `pypto db prune` removes it"
                      if not program else
                      f"program {k.op} rebuilt from {program} now lowers to fingerprint {fp}, not "
                      f"the entry's {k.fingerprint} (PyPTO's lowering or one of the program's ops "
                      "changed): no call uses this entry any more; re-tune the program at this "
                      "shape (pypto.tune) to replace it, or `pypto db prune` removes it; left "
                      "as it is")
        return res
    try:
        entry_fn = _checked(compile_built(build(op, k.dtypes, params), e.schedule, target,
                                          source=f"database {where}", fp=fp, persist=True),
                            op, arrays, dims, want)
    except PyptoError as err:
        res.verdict, res.action, res.reason = "failed", "drop", str(err)
        return res
    try:
        default, default_kernel = _default_kernel(op, built, dims, target, fp, program)
        default_fn = _checked(default_kernel, op, arrays, dims, want)
    except PyptoError as err:
        res.reason = f"the default schedule cannot be measured here: {err}"
        return res
    if default.hash == e.schedule.hash:
        res.verdict, res.action, res.reason = "kept", "stamp", "same schedule as the default"
        return res
    fns = {"entry": entry_fn, "default": default_fn}
    t = timer(fns, **timing)
    res.entry_ms, res.default_ms = t["entry"].median, t["default"].median
    if res.ratio is not None and res.ratio < 1 - margin:
        longer = dict(timing, min_rounds=2 * int(timing.get("min_rounds", 5)),
                      max_rounds=2 * int(timing.get("max_rounds", 15)))
        first = res.ratio
        t = timer(fns, **longer)
        res.entry_ms, res.default_ms = t["entry"].median, t["default"].median
        if res.ratio is not None and res.ratio < 1 - margin:
            res.verdict, res.action = "slower", "mark" if mark else "drop"
            res.reason = (f"{res.ratio:.2f}x the default's speed, confirmed (first "
                          f"measurement {first:.2f}x); margin {margin:.0%}")
            return res
        res.reason = (f"a first measurement said {first:.2f}x the default's speed, the longer "
                      "second one did not")
    res.verdict, res.action = "kept", "stamp"
    return res


class _NoProgram(PyptoError):
    """A program entry whose graph file cannot give the program back (the message says why and
    what to do)."""


def _entry_op(name: str, root) -> tuple[Any, str | None]:
    """(op, None) for a registered op; (graph op, graph file) for a program's entry, rebuilt
    from the graph file in database folder ``root``. Raises :class:`_NoProgram` when the
    entry is a program's and its file is missing or unusable, PyptoError for an unknown op."""
    from ..database.programs import graph_path, is_program, op_for_entry
    from ..errors import UnknownOpError
    from ..ops import get_op

    try:
        op = get_op(name)
    except UnknownOpError:
        op = None
    if op is not None and hasattr(op, "build"):
        return op, None     # a registered op (a composite op is not built itself: a program)
    path = graph_path(root, name) if root is not None else None
    if op is None and not is_program(name) and (path is None or not path.is_file()):
        get_op(name)        # neither registered nor a program: its UnknownOpError
    left = "the entry is left as it is"
    if path is None:
        raise _NoProgram(f"program {name}: this database has no folder to hold its graph file, "
                         f"so it cannot be rebuilt here; {left}")
    if not path.is_file():
        raise _NoProgram(f"program {name}: its graph file {path} is missing, and revalidation "
                         "rebuilds the program from it: restore the file (for the shipped "
                         "database, from version control) or re-tune the program (pypto.tune "
                         f"writes it beside the entry); {left}")
    try:
        return op_for_entry(root, name), str(path)
    except PyptoError as err:
        why = str(err)    # the file's problem; it names the file or not
        where = "" if str(path) in why else f" {path}"
        raise _NoProgram(f"program {name}: its graph file{where} cannot be used: {why}; restore "
                         f"it (for the shipped database, from version control) or re-tune the "
                         f"program, which writes it again; {left}") from None


def _default_kernel(op, built, dims, target, fp, program):
    """(schedule, kernel) of what a call gets without the entry: the op's default schedule; for
    a program, the fused default or, when it does not compile, the first of the fallbacks a
    call takes (``pypto.frontend.jit.compile_graph_op`` itself, without the database)."""
    from ..compiler.jit import compile_built
    from ..schedule.defaults import default_schedule

    if not program or target.has_gpu_feature():
        first = default_schedule(built, dims, target)
        return first, compile_built(built, first, target, source="default", fp=fp, persist=True)
    from ..frontend.jit import compile_graph_op

    kernel = compile_graph_op(op, target, source="default", database=False)
    return kernel.schedule, kernel


def _checked(kernel, op, arrays, dims, want) -> Callable[[], object]:
    """A timed call of ``kernel`` into preallocated outputs, after one verified run.

    Raises PyptoError when the kernel fails at run time or its output differs from ``want``.
    """
    from ..infra.verify import mismatch, poison
    from ..runtime import run_kernel

    outs = [np.empty(tuple(dims[d] for d in spec.dims), dtype=dt)
            for spec, dt in zip(op.outputs, kernel.out_dtypes)]
    for o in outs:
        poison(o)   # an element the kernel never writes stays NaN (or near-max) and is caught
    got = run_kernel(kernel, op, arrays, dims, out=outs)
    for i, (g, w) in enumerate(zip(got, want)):
        why = mismatch(g, w)
        if why:
            raise PyptoError(f"op {op.name!r} output {i} with the {kernel.source} schedule "
                             f"differs from the NumPy reference: {why}")
    return lambda: run_kernel(kernel, op, arrays, dims, out=outs)


def _apply(db: Database, outcomes: list[Outcome]) -> None:
    """Writes the verdicts of one database, one read-modify-write per op file."""
    by_file: dict[tuple[str, str], dict[Key, Outcome]] = {}
    for o in outcomes:
        by_file.setdefault((o.key.op, o.key.family), {})[o.key] = o
    for (op, family), todo in by_file.items():
        def change(current: LoadResult, todo=todo) -> list[Entry] | None:
            if current.problems:   # writing back only what loads would delete the rest
                for o in todo.values():
                    o.reason = (o.reason + "; " if o.reason else "") + (
                        "not written: the file has entries that do not load (`pypto db validate`)")
                return None
            out, changed = [], False
            for e in current.entries:
                o = todo.get(e.key)
                if o is None or o.schedule_hash != e.schedule.hash:
                    out.append(e)    # not measured, or re-tuned since: left as it is
                    continue
                changed = o.written = True
                if o.action == "mark":
                    out.append(e.with_slower(e.key.shape_dict, time_ms=o.entry_ms,
                                             default_ms=o.default_ms, method="revalidate"))
                elif o.action == "stamp":
                    out.append(_stamped(e, o))
            return out if changed else None

        db.update(op, family, change)


def _stamped(e: Entry, o: Outcome) -> Entry:
    """A kept entry with the date and times of this check, and no loss recorded at its shape."""
    prov = dict(e.provenance)
    prov["revalidated"] = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(
        timespec="seconds"), "time_ms": o.entry_ms, "default_ms": o.default_ms}
    own = e.key.shape_dict
    return dataclasses.replace(e, provenance=prov, baselines=dict(e.baselines),
                               slower_at=tuple(r for r in e.slower_at if r["shape"] != own))


def table(outcomes: Iterable[Outcome]) -> str:
    """The report: one row per entry (op, shape, dtype, entry ms, default ms, ratio, verdict)."""
    rows = [("op", "shape", "dtype", "entry ms", "default ms", "ratio", "verdict")]
    notes = []
    for o in outcomes:
        rows.append((o.key.op, o.key.shape_text(), "/".join(sorted(set(o.key.dtypes))),
                     _ms(o.entry_ms), _ms(o.default_ms),
                     "-" if o.ratio is None else f"{o.ratio:.2f}x", o.shown))
        if o.reason:
            notes.append(f"{o.key}: {o.reason}")
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.rjust(w) if 3 <= i <= 5 else c.ljust(w)
                       for i, (c, w) in enumerate(zip(r, widths))).rstrip() for r in rows]
    return "\n".join(lines + [""] + notes if notes else lines)


def _ms(t: float | None) -> str:
    return "-" if t is None else f"{t:.4f}"
