"""Finding the schedule for a call: exact key, else the nearest tuned shape, else the default.

Databases stack. They are searched in this order: directories added with :func:`add_path`, then
those in the ``PYPTO_SCHEDULES`` environment variable (``os.pathsep``-separated), then the user
database (:func:`user_root`: where ``pypto tune`` writes unless told otherwise), then the shipped
database (:data:`SHIPPED`). An exact match in any of them beats a near one; among near ones the
smallest distance wins, and on a tie the earlier database.

Distance between two shapes of the same op is the sum over named dims of ``|log2(a / b)|``: doubling
one dim costs 1; entries further than ``MAX_DISTANCE`` (4) are not used. Only entries with the same dtypes, parameters and target family are considered;
entries whose algorithm fingerprint differs from the op's are *stale*: reported, never applied.
A near entry is used only if it applies to the new shape: no ``bound`` directives (which pin a
shape), and no factor the new extents cannot take (a ``shift_inwards`` split longer than its loop,
a ``round_up`` split that no longer divides it: :mod:`pypto.schedule.fit`). An entry, exact or
near, is never used at a shape where it was measured slower than the default schedule (its
``slower_at`` records, written by ``pypto db revalidate`` and :func:`record_slower`). Each skip is
explained. If a chosen entry still fails to compile or run, the call falls back to the default.
"""

from __future__ import annotations

import dataclasses
import importlib.resources
import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..compiler import targets
from ..errors import PyptoError
from ..schedule.schedule import Schedule
from .entry import Entry, Key
from ..schedule.fit import unfit
from .store import Database, DirectoryDatabase


def key_mismatch(op, key: Key) -> str | None:
    """Why ``key`` cannot be a key of ``op`` (None: it can): its dtypes are not one of the op's
    signatures, its shape does not name the op's input dims, or its parameters are not the op's.
    Such an entry never serves a call; building the op from it raised TypeError (a traceback
    from ``pypto db validate --deep`` and ``prune``). It sits beside the lookup: ``pypto build
    --all-shapes`` (the compiler layer) checks stored keys through this plug-in point."""
    if tuple(key.dtypes) not in {tuple(d) for d in op.dtypes}:
        return (f"dtypes {'/'.join(key.dtypes)} are not a signature of {op.name} (it takes "
                + "; ".join("/".join(d) for d in op.dtypes) + ")")
    dims, want = set(key.shape_dict), set(op.input_dims)
    if dims != want:
        return (f"shape names {', '.join(sorted(dims)) or 'no dims'}; {op.name}'s input dims are "
                f"{', '.join(sorted(want))}")
    try:
        op.resolve_params(dict(key.params))
    except PyptoError as err:
        return f"parameters: {err}"
    return None


def _shipped_root() -> Path:
    """The schedules shipped with PyPTO: package data ``pypto/_schedules``.

    In the source tree ``pypto/_schedules`` is a link to the top-level ``schedules/`` folder, which
    stays the data's home; a wheel holds a copy. Resolving the link makes a checkout report the
    folder people edit. Installs from a zip (no real folder) are not supported: the database is
    read as files.
    """
    return Path(str(importlib.resources.files("pypto").joinpath("_schedules"))).resolve()


SHIPPED = _shipped_root()
#: Environment variable naming the user database folder; ``off`` turns the user database off.
USER_ENV = "PYPTO_USER_SCHEDULES"
_extra: list[Database] = []
_dirs: dict[str, DirectoryDatabase] = {}
SHAPE_PINNING = {"bound", "bound_extent"}
#: Shapes further apart than this (sum of |log2| ratios) are not "near": a schedule tuned for
#: 4096 x 1024 says little about 5 x 13, and its tiles may not even fit.
MAX_DISTANCE = 4.0


def add_path(path: str | os.PathLike | Database) -> None:
    """Searches ``path`` (a folder or a Database) before every other database."""
    db = path if isinstance(path, Database) else DirectoryDatabase(path)
    _extra.insert(0, db)
    _clear_selection()


def remove_path(path: str | os.PathLike | Database) -> None:
    for db in list(_extra):
        if db is path or (isinstance(db, DirectoryDatabase) and str(db.root) == str(path)):
            _extra.remove(db)
    _clear_selection()


def _clear_selection() -> None:
    from ..compiler import jit

    jit._selected.clear()


def _dir(p: str) -> DirectoryDatabase:
    if p not in _dirs:
        _dirs[p] = DirectoryDatabase(p)
    return _dirs[p]


def user_root() -> Path | None:
    """The per-user database folder, or None when there is none.

    ``$PYPTO_USER_SCHEDULES`` if set (``off`` turns the user database off), else
    ``$XDG_DATA_HOME/pypto/schedules``, else ``~/.local/share/pypto/schedules`` (the XDG base
    directory default; a relative ``XDG_DATA_HOME`` is ignored, as that spec says). The folder
    need not exist: a missing database is empty, and ``pypto tune`` creates it on its first write.
    It lies outside any source tree, so tuning never rewrites the shipped database by default.
    """
    env = os.environ.get(USER_ENV, "").strip()
    if env.lower() == "off":
        return None
    if env:
        return Path(env).expanduser().absolute()
    xdg = os.environ.get("XDG_DATA_HOME", "").strip()
    if xdg and os.path.isabs(xdg):
        return Path(xdg) / "pypto" / "schedules"
    try:
        home = Path.home()
    except RuntimeError:  # no HOME and no password-file entry: there is no per-user place
        return None
    return home / ".local" / "share" / "pypto" / "schedules"


def write_root() -> Path:
    """Where tuning writes when no folder is given: the user database, never the shipped one."""
    from ..errors import DatabaseError

    root = user_root()
    if root is None:
        raise DatabaseError(f"there is no user schedule database ({USER_ENV} is 'off' or there is "
                            "no home folder): give --db FOLDER (a database folder to write)")
    if root.resolve() == SHIPPED:
        raise DatabaseError(f"{USER_ENV} points at the shipped schedules ({SHIPPED}); tuning "
                            "writes there only when asked: give the folder explicitly (--db)")
    return root


def search_path() -> list[Database]:
    """The databases a lookup reads, first to last."""
    out: list[Database] = list(_extra)
    env = os.environ.get("PYPTO_SCHEDULES", "")
    out += [_dir(p) for p in env.split(os.pathsep) if p.strip()]
    user = user_root()
    if user is not None:
        out.append(_dir(str(user)))
    if os.environ.get("PYPTO_NO_SHIPPED_SCHEDULES") != "1":
        out.append(_dir(str(SHIPPED)))
    return out


#: The provenance method of an entry whose tuning run kept the default schedule (autotune's
#: tuner): used at its exact shape only.
FORMER_DEFAULT = "baseline:default"


def distance(a: Mapping[str, int], b: Mapping[str, int]) -> float:
    """``sum |log2(a_d / b_d)|`` over named dims; inf when the dim names differ."""
    if set(a) != set(b):
        return math.inf
    return sum(abs(math.log2(a[d] / b[d])) for d in a)


@dataclasses.dataclass
class Found:
    schedule: Schedule
    source: str
    entry: Entry
    database: str
    distance: float


@dataclasses.dataclass
class Explanation:
    """Why a call got the schedule it got."""

    op: str
    key: dict[str, Any]
    chosen: str
    database: str | None = None
    entry_key: str | None = None
    distance: float | None = None
    notes: list[str] = dataclasses.field(default_factory=list)

    def __str__(self) -> str:
        lines = [f"op {self.op} {self.key}", f"chosen: {self.chosen}"]
        if self.database:
            lines.append(f"database: {self.database}")
        if self.entry_key:
            lines.append(f"entry: {self.entry_key} (distance {self.distance:g})")
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines)


def _search(op, fp, dtypes, params, dims, target, notes: list[str] | None = None):
    family = targets.family(target)
    pkey = tuple(sorted(params.items()))
    want = {d: int(dims[d]) for d in op.input_dims}
    exact, near = None, []

    def skip(why: str) -> None:
        if notes is not None:
            notes.append(why)

    for rank, db in enumerate(search_path()):
        for problem in db.problems_of(op.name, family):
            _warn_unread(problem)
            skip(f"not read: {problem}")
        for e in db.entries(op.name, family):
            k = e.key
            if k.dtypes != tuple(dtypes) or k.params != pkey:
                continue
            if k.fingerprint != fp:
                skip(f"stale entry skipped in {db.name}: {k} (op fingerprint is now {fp})")
                continue
            dist = distance(want, k.shape_dict)
            if math.isinf(dist) or dist > MAX_DISTANCE:
                continue
            lost = e.slower_record(want)
            if lost is not None:
                skip(f"{k} skipped in {db.name}: measured slower than the default at this shape "
                     f"({_ms(lost.get('time_ms'))} against {_ms(lost.get('default_ms'))}"
                     f"{', ' + lost['method'] if lost.get('method') else ''}"
                     f"{', ' + lost['date'] if lost.get('date') else ''})")
                continue
            if dist == 0:
                if exact is None:
                    exact = Found(e.schedule, f"database {db.name} (exact)", e, db.name, 0.0)
                continue
            if any(d.op in SHAPE_PINNING for d in e.schedule.directives):
                skip(f"{k} pins its shape (bound); usable only for that shape")
                continue
            if e.provenance.get("method") == FORMER_DEFAULT:
                # Tuning found nothing better than the default at the entry's shape: the entry
                # is that default's schedule with its shape's factors (and an older template's
                # choices); the default itself, fitted to this shape, is the better guess here.
                skip(f"{k} skipped in {db.name}: it stores the default of its own shape "
                     f"({FORMER_DEFAULT}); the default is fitted to this shape instead")
                continue
            why = unfit(e.schedule, _full_dims(op, k, params), dims,
                        {spec.name: tuple(spec.dims) for spec in op.inputs})
            if why is not None:
                skip(f"{k} skipped in {db.name}: its factors do not fit this shape ({why})")
                continue
            near.append((dist, rank, e, db.name))
    if exact is not None:
        return exact, family
    if near:
        dist, _, e, name = min(near, key=lambda t: (t[0], t[1]))
        return Found(e.schedule, f"database {name} (nearest, distance {dist:.2f})", e, name,
                     dist), family
    return None, family


#: Problems already warned about in this process (each once, however many calls meet it).
_warned: set[str] = set()


def _warn_unread(problem: str) -> None:
    """A PerformanceWarning, once per problem, for a stored file or entry that cannot be read:
    the call still runs (the default, or another entry), but without the schedule stored there,
    and nothing else would tell the user why it is slower."""
    if problem in _warned:
        return
    _warned.add(problem)
    import warnings

    from ..errors import PerformanceWarning

    warnings.warn(f"schedule database: {problem}; its schedules are not used until it is fixed "
                  "(`pypto db validate` lists every problem)", PerformanceWarning, stacklevel=2)


def _ms(t) -> str:
    return "?" if t is None else f"{t:.3f} ms"


def _full_dims(op, key: Key, params: Mapping[str, Any]) -> dict[str, int]:
    """The entry's shape with the dims derived from it (an output's extents), as a call has them."""
    from ..infra.inputs import complete_dims

    try:
        return complete_dims(op, key.shape_dict, params)
    except PyptoError:
        return key.shape_dict


def record_slower(db: Database, key: Key, schedule_hash: str, shape: Mapping[str, int], *,
                  time_ms: float, default_ms: float, method: str) -> bool:
    """Records in ``db`` that the entry ``key`` (with the schedule of ``schedule_hash``) measured
    ``time_ms`` against the default's ``default_ms`` at ``shape`` (input dims), so that lookup
    skips it there. Goes through the locked read-modify-write; returns False (and writes nothing)
    when the entry is gone or now holds another schedule, whose speed this measurement says
    nothing about.

    This is the hook for whoever measures a stored entry beside the default at a shape: ``pypto db
    revalidate``, and a tuning run whose nearest-shape pick lost to the default.
    """
    done = [False]

    def mark(current):
        out = []
        for e in current.entries:
            if e.key == key and e.schedule.hash == schedule_hash:
                e = e.with_slower(shape, time_ms=time_ms, default_ms=default_ms, method=method)
                done[0] = True
            out.append(e)
        return out if done[0] else None

    db.update(key.op, key.family, mark)
    return done[0]


def lookup(op, fp: str, dtypes, params, dims, target) -> Found | None:
    """The stored schedule for a call, or None for the default."""
    found, _ = _search(op, fp, dtypes, params, dims, target)
    return found


def explain(op_or_name, *args, **kwargs) -> Explanation:
    """Tells which schedule ``op(*args, **kwargs)`` uses, and why (it runs the call once).

    Example:
        >>> import numpy as np, pypto
        >>> e = pypto.explain("softmax", np.ones((4, 8), np.float32))
        >>> e.chosen.split()[0] in ("default", "database")
        True
    """
    from ..ops import get_op
    from ..runtime import observe

    op = get_op(op_or_name) if isinstance(op_or_name, str) else op_or_name
    with observe() as calls:
        op(*args, **kwargs)
    if not calls:
        from ..errors import PyptoError

        raise PyptoError(f"explain({op.name}): this call ran no kernel (it returns a view of its "
                         f"input, as NumPy's does, or an input unchanged), so no schedule is "
                         f"used; pass out= to see the kernel's schedule")
    kop, dtypes, params, dims, kernel = calls[-1]
    notes: list[str] = []
    target = targets.current()
    found, family = _search(kop, kernel.fingerprint, dtypes, params, dims, target, notes)
    key = {"op": kop.name, "dtypes": list(dtypes), "shape": dict(dims), "params": dict(params),
           "family": family, "fingerprint": kernel.fingerprint}
    if found is None:
        return Explanation(kop.name, key, kernel.source, notes=notes + [
            "no usable stored entry for this op, dtypes, parameters and target family"])
    return Explanation(kop.name, key, kernel.source, found.database, str(found.entry.key),
                       found.distance, notes)
