"""Database maintenance: validate, diff, merge, prune, and storing autoscheduler results."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterable, Mapping
from pathlib import Path

import halide as hl
import numpy as np

from ..compiler import targets
from ..compiler.jit import compile_built
from ..compiler.lower import build, fingerprint
from ..errors import PyptoError, TargetError
from .entry import Entry, Key, provenance
from .lookup import key_mismatch
from .store import Database, DirectoryDatabase, better


def validate_paths(paths: Iterable[str | Path], *, deep: bool = False) -> list[str]:
    """Problems of database folders or single files, one line each (empty: all good).

    With ``deep``, every schedule is also applied to its op (which must be registered) to check
    Func and variable names and the fingerprint.
    """
    problems: list[str] = []
    for p in map(Path, paths):
        if p.is_file():
            db = DirectoryDatabase(p.parent.parent)
            res = db.load_file(p)
            problems += res.problems
            entries = res.entries
        elif p.is_dir():
            db = DirectoryDatabase(p)
            problems += db.problems()
            entries = list(db.iter_all())
        else:
            problems.append(f"{p}: no such file or folder")
            continue
        if deep:
            problems += _deep_check(entries, str(p), db.root)
    return problems


def _deep_check(entries: list[Entry], where: str, root) -> list[str]:
    from .programs import op_for_entry

    out = []
    for e in entries:
        try:
            op = op_for_entry(root, e.key.op)
            why = key_mismatch(op, e.key)
            if why:
                out.append(f"{where}: {e.key}: {why}")
                continue
            built = build(op, e.key.dtypes, dict(e.key.params))
            fp = fingerprint(built)
            if fp != e.key.fingerprint:
                out.append(f"{where}: {e.key}: stale (the op's fingerprint is now {fp})")
                continue
            from ..schedule.apply import apply_schedule

            apply_schedule(built, e.schedule)
        except PyptoError as err:
            out.append(f"{where}: {e.key}: {err}")
    return out


@dataclasses.dataclass
class Diff:
    added: list[Entry]
    removed: list[Entry]
    changed: list[tuple[Entry, Entry]]

    def lines(self) -> list[str]:
        out = [f"+ {e.key}  {_ms(e.time_ms)}" for e in self.added]
        out += [f"- {e.key}  {_ms(e.time_ms)}" for e in self.removed]
        for a, b in self.changed:
            what = "schedule" if a.schedule.hash != b.schedule.hash else "measurement"
            out.append(f"~ {a.key}  {_ms(a.time_ms)} -> {_ms(b.time_ms)} ({what} changed)")
        return out


def _ms(t) -> str:
    return "-" if t is None else f"{t:.3f} ms"


def _entries_of(path: str | Path, what: str) -> dict[Key, Entry]:
    """The entries of a database folder or file, the better one per key (as a commit keeps);
    a DatabaseError when some do not load: ``what`` (merge, diff) would take them as absent."""
    from ..errors import DatabaseError

    p = Path(path)
    if p.is_file():
        loaded = DirectoryDatabase(p.parent.parent).load_file(p)
        entries, problems = loaded.entries, loaded.problems
    else:
        db = DirectoryDatabase(p)
        entries, problems = list(db.iter_all()), db.problems()
    if problems:
        shown = "; ".join(problems[:3]) + (f"; and {len(problems) - 3} more"
                                           if len(problems) > 3 else "")
        raise DatabaseError(f"db {what}: {path} has entries that do not load ({shown}); "
                            f"`pypto db validate {path}` lists them: fix or remove them first")
    out: dict[Key, Entry] = {}
    for e in entries:
        out[e.key] = better(out[e.key], e) if e.key in out else e
    return out


def diff(a: str | Path, b: str | Path) -> Diff:
    """What changed from database (or file) ``a`` to ``b``, by key."""
    ea, eb = _entries_of(a, "diff"), _entries_of(b, "diff")
    return Diff(added=[eb[k] for k in eb if k not in ea], removed=[ea[k] for k in ea if k not in eb],
                changed=[(ea[k], eb[k]) for k in ea if k in eb and
                         (ea[k].schedule.hash != eb[k].schedule.hash or ea[k].time_ms != eb[k].time_ms)])


def merge(sources: Iterable[str | Path], dest: str | Path) -> int:
    """Adds every entry of ``sources`` to ``dest``, keeping the better per key; returns kept count.

    A program's entry travels with its graph file (``programs/NAME.graph``), copied first when
    ``dest`` has none: without it the entry cannot be checked or revalidated there.
    """
    out = DirectoryDatabase(dest)
    kept = 0
    for src in sources:
        entries = list(_entries_of(src, "merge").values())
        _copy_graphs(Path(src).parent.parent if Path(src).is_file() else Path(src), out.root,
                     {e.key.op for e in entries})
        kept += out.commit(entries, source=str(src))
    return kept


def _copy_graphs(src_root: Path, dest_root: Path, names: set[str]) -> None:
    from .programs import graph_path, write_graph

    from .store import MAX_FILE_BYTES

    folder = graph_path(src_root, "x").parent.resolve()
    for name in sorted(names):
        src, dst = graph_path(src_root, name), graph_path(dest_root, name)
        # Only a plain file inside the source's own folder: a link there could name any file
        # of the user's (a key), whose text would be copied into the destination.
        if (src.is_symlink() or not src.is_file() or src.resolve().parent != folder
                or src.stat().st_size > MAX_FILE_BYTES or dst.exists()):
            continue
        write_graph(dest_root, name, src.read_text())


def prune(db: DirectoryDatabase, *, dry_run: bool = False) -> list[str]:
    """Drops stale entries (fingerprint no longer the op's) and duplicate keys; returns what it did.

    Each file is pruned inside the database's read-modify-write (``update``): the entries judged
    are those read under the file's lock, so an entry another process adds meanwhile is kept.
    A file with problems (entries that do not load) is reported by ``validate`` and left alone.
    """
    report: list[str] = []
    fps: dict[tuple, str] = {}
    from ..errors import DatabaseError

    for path in db.files():
        judge = functools.partial(_prune_file, path=path, fps=fps, report=report, root=db.root)
        loaded = db.load_file(path)
        if loaded.problems:        # the other files are still pruned
            report.append(f"{path}: left alone: {len(loaded.problems)} problem(s), e.g. "
                          f"{loaded.problems[0]} (`pypto db validate` lists them)")
            continue
        if dry_run:
            judge(loaded)
        else:
            try:
                db.update(path.stem, path.parent.name, judge)
            except DatabaseError as e:
                report.append(f"{path}: left alone: {e}")
    return report


def _prune_file(current, *, path: Path, fps: dict, report: list[str],
                root: Path) -> list[Entry] | None:
    """The entries of one file to keep (None: nothing to change). A program's entry is judged
    against the program rebuilt from its graph file in the database (as ``validate --deep``)."""
    from .programs import op_for_entry

    keep: dict[Key, Entry] = {}
    changed = False
    for e in current.entries:
        k = e.key
        try:
            op = op_for_entry(root, k.op)
            why = key_mismatch(op, k)
            if why:
                raise PyptoError(why)
        except PyptoError as err:
            report.append(f"{path}: {k}: cannot be checked here ({err}); kept")
            keep[k] = e if k not in keep else better(keep[k], e)
            continue
        fk = (k.op, k.dtypes, k.params)
        if fk not in fps:
            fps[fk] = fingerprint(build(op, k.dtypes, dict(k.params)))
        if fps[fk] != k.fingerprint:
            report.append(f"{path}: {k}: stale (op fingerprint is now {fps[fk]}); removed")
            changed = True
            continue
        if k in keep:
            report.append(f"{path}: {k}: duplicate; kept the faster")
            keep[k] = better(keep[k], e)
            changed = True
            continue
        keep[k] = e
    return list(keep.values()) if changed and not current.problems else None


#: CPU instruction sets a target may ask for that the host may lack (Halide's names).
_ISA = ("SSE41", "AVX", "AVX2", "FMA", "FMA4", "F16C", "AVX512", "AVX512_KNL", "AVX512_Skylake",
        "AVX512_Cannonlake", "AVX512_SapphireRapids", "AVX512_Zen4", "AVX512_Zen5", "AVXVNNI",
        "AVX10_1")


def cannot_run_here(target: hl.Target) -> str | None:
    """Why this machine's CPU cannot run ``target``'s host code (None: it can), for whatever
    runs a kernel to check or time it. Run anyway, such code failed to link (pages of linker
    errors in the tuner), died of SIGSEGV (``pypto db import-autoschedule --target
    arm-64-linux``) or of SIGILL (an instruction set this CPU lacks)."""
    host = targets.host()
    if not targets.host_cpu(target):
        return f"cannot run {target.arch.name.lower()}-{target.bits}-{target.os.name.lower()} code"
    lacking = [n.lower() for n in _ISA if hasattr(hl.TargetFeature, n)
               and target.has_feature(getattr(hl.TargetFeature, n))
               and not host.has_feature(getattr(hl.TargetFeature, n))]
    return f"lacks {', '.join(lacking)}" if lacking else None


def import_autoschedule(op, dtypes, params: Mapping, dims: Mapping[str, int], name: str,
                        target: hl.Target, db: Database, *, check: bool = True,
                        measure: bool = True) -> Entry:
    """Runs an autoscheduler, checks its output against NumPy, times it beside the default, stores it."""
    why = cannot_run_here(target) if check or measure else None
    if why:
        raise TargetError(f"cannot check or time {name}'s schedule for {target} here: this "
                          f"machine ({targets.host()}) {why}; import on a machine of that kind")
    from ..infra.inputs import make_inputs
    from ..infra.timing import compare
    from ..infra.verify import mismatch
    from ..runtime import run_kernel
    from ..schedule.autoschedule import import_schedule
    from ..schedule.defaults import default_schedule

    schedule = import_schedule(op, dtypes, params, dims, name, target)
    kernel = compile_built(build(op, dtypes, params), schedule, target, source=name)
    arrays = make_inputs(op, dtypes, dims, params)
    baselines: dict[str, float] = {}
    if check:
        got = run_kernel(kernel, op, arrays, dims)
        want = op.kernel_ref(*arrays, **params)
        want = want if isinstance(want, tuple) else (want,)
        for g, w in zip(got, want):
            why = mismatch(g, np.asarray(w))
            if why:
                raise PyptoError(f"{name} schedule for {op.name} gives wrong results ({why}); "
                                 "not stored")
    time_ms = None
    if measure:
        dkernel = compile_built(build(op, dtypes, params),
                                default_schedule(build(op, dtypes, params), dims, target), target,
                                source="default")
        res = compare({name: lambda: run_kernel(kernel, op, arrays, dims),
                       "default": lambda: run_kernel(dkernel, op, arrays, dims)})
        time_ms = res[name].median
        baselines["default"] = res["default"].median
    key = Key.make(op.name, dtypes, {d: dims[d] for d in op.input_dims}, params,
                   targets.family(target), kernel.fingerprint)
    entry = Entry(key=key, schedule=schedule, time_ms=time_ms, baselines=baselines,
                  provenance=provenance(method=f"autoscheduler:{name}", target=str(target)))
    db.commit([entry])
    return entry
