"""Schedule databases: an interface with a directory implementation and an in-memory one.

A directory database holds one JSON file per (target family, op): ``<root>/<family>/<op>.json``.
Reading never runs code: files are decoded with a strict JSON reader, checked against the JSON Schema
in ``schema.json``, and every schedule is parsed and bounded by the directive grammar. A bad file is
reported (``problems``) and skipped; every other file keeps serving lookups.

Writes take an exclusive lock on ``<file>.lock`` (the ``filelock`` package: ``fcntl.flock`` on
POSIX), re-read the file under the lock, merge, write a temporary file in the same folder, ``fsync``
it and ``os.replace`` it over the old one. Concurrent writers therefore never lose an entry, and a
reader sees either the old or the new file, never half of one.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path

from ..errors import DatabaseError
from ..infra.jsonio import dumps, strict_loads
from ..schedule.directives import LIMITS
from .entry import FAMILY_RE, FORMAT, OP_RE, Entry, Key


@functools.lru_cache(maxsize=2)
def _validator(part: str):
    """The file's schema (``part="file"``, entries unchecked) or one entry's (``"entry"``)."""
    import jsonschema

    schema = json.loads((Path(__file__).with_name("schema.json")).read_text())
    if part == "file":
        schema["properties"]["entries"] = {"type": "array", "maxItems": 10000}
    else:
        schema = {"$defs": schema["$defs"], "$ref": "#/$defs/entry"}
    return jsonschema.Draft202012Validator(schema)


def _short(msg: str) -> str:
    return msg if len(msg) <= 200 else f"{msg[:80]} ... {msg[-100:]}"


def validate_document(doc, where: str, part: str = "file") -> list[str]:
    """JSON-Schema problems of a decoded database file (or one entry), one line each."""
    if part == "entry" and isinstance(doc, dict):
        sched = doc.get("schedule")
        ds = sched.get("directives") if isinstance(sched, dict) else None
        if isinstance(ds, list) and len(ds) > LIMITS["directives"]:
            # Checked first: validating a million directives one by one would take minutes.
            return [f"{where}: {len(ds)} directives exceed the limit of {LIMITS['directives']}"]
    problems = []
    for err in sorted(_validator(part).iter_errors(doc), key=lambda e: list(e.absolute_path))[:20]:
        path = "/".join(str(p) for p in err.absolute_path) or "(top)"
        problems.append(f"{where}: at {path}: {_short(err.message)}")
    return problems


def better(a: Entry, b: Entry) -> Entry:
    """The entry to keep of two with the same key: the faster measured one (a on ties)."""
    ta = a.time_ms if a.time_ms is not None else float("inf")
    tb = b.time_ms if b.time_ms is not None else float("inf")
    return b if tb < ta else a


@dataclasses.dataclass
class LoadResult:
    entries: list[Entry]
    problems: list[str]


class Database:
    """The interface every database implements."""

    name = "database"

    def entries(self, op: str, family: str) -> list[Entry]:
        raise NotImplementedError

    def commit(self, entries: Iterable[Entry], *, source: str | None = None) -> int:
        """Adds entries, keeping the better one per key; returns how many were kept."""
        raise NotImplementedError

    def iter_all(self) -> Iterator[Entry]:
        raise NotImplementedError

    def problems(self) -> list[str]:
        return []

    def best(self, key: Key) -> Entry | None:
        found = [e for e in self.entries(key.op, key.family) if e.key == key]
        return min(found, key=lambda e: e.time_ms if e.time_ms is not None else float("inf"),
                   default=None)


class MemoryDatabase(Database):
    """A database held in a dict; for tests and for tuning without touching disk."""

    def __init__(self, entries: Iterable[Entry] = ()):
        self.name = "memory"
        self._by_key: dict[Key, Entry] = {}
        self.commit(entries)

    def entries(self, op, family):
        return [e for k, e in self._by_key.items() if k.op == op and k.family == family]

    def commit(self, entries, *, source=None):
        n = 0
        for e in entries:
            old = self._by_key.get(e.key)
            self._by_key[e.key] = e if old is None else better(old, e)
            n += self._by_key[e.key] is e
        return n

    def iter_all(self):
        return iter(list(self._by_key.values()))


def _safe_component(value: str, pattern, what: str) -> str:
    if not isinstance(value, str) or not pattern.match(value):
        raise DatabaseError(f"invalid {what} {value!r} for a database path "
                            f"(allowed: {pattern.pattern})")
    return value


class DirectoryDatabase(Database):
    """A database in a folder: ``<root>/<family>/<op>.json``."""

    def __init__(self, root: str | os.PathLike):
        self.root = Path(root)
        self.name = str(self.root)
        self._cache: dict[Path, tuple[tuple[int, int], LoadResult]] = {}

    def path(self, op: str, family: str) -> Path:
        """The file for (family, op); both are checked so that no name can escape the root."""
        return (self.root / _safe_component(family, FAMILY_RE, "target family")
                / f"{_safe_component(op, OP_RE, 'op name')}.json")

    # -- reading -------------------------------------------------------------------------------
    def load_file(self, path: Path) -> LoadResult:
        """Entries of one file and its problems; a missing file is empty, a corrupt one is reported."""
        try:
            st = path.stat()
        except FileNotFoundError:
            return LoadResult([], [])
        sig = (st.st_mtime_ns, st.st_size)
        cached = self._cache.get(path)
        if cached and cached[0] == sig:
            return cached[1]
        result = self._parse(path)
        self._cache[path] = (sig, result)
        return result

    def _parse(self, path: Path) -> LoadResult:
        where = str(path)
        try:
            raw = path.read_bytes()
            doc = strict_loads(raw, where)
        except (OSError, DatabaseError) as e:
            return LoadResult([], [str(e) if isinstance(e, DatabaseError) else f"{where}: {e}"])
        problems = validate_document(doc, where)
        if problems:
            return LoadResult([], problems)
        if doc["op"] != path.stem or doc["family"] != path.parent.name:
            return LoadResult([], [f"{where}: file says op {doc['op']!r}, family {doc['family']!r} "
                                   f"but lies at {path.parent.name}/{path.name}"])
        entries, problems = [], []
        for i, obj in enumerate(doc["entries"]):
            bad = validate_document(obj, f"{where} entry #{i}", "entry")
            if bad:
                problems += bad
                continue
            try:
                e = Entry.from_json(obj, f"{where} entry #{i}")
            except DatabaseError as err:
                problems.append(str(err))
                continue
            if e.key.op != doc["op"] or e.key.family != doc["family"]:
                problems.append(f"{where} entry #{i}: key {e.key} does not belong in this file")
                continue
            entries.append(e)
        return LoadResult(entries, problems)

    def entries(self, op, family):
        try:
            path = self.path(op, family)
        except DatabaseError:
            return []
        return self.load_file(path).entries

    def files(self) -> list[Path]:
        if not self.root.is_dir():
            return []
        return sorted(p for p in self.root.glob("*/*.json") if p.is_file())

    def iter_all(self):
        for p in self.files():
            yield from self.load_file(p).entries

    def problems(self) -> list[str]:
        out = []
        for p in self.files():
            out += self.load_file(p).problems
        return out

    # -- writing -------------------------------------------------------------------------------
    def commit(self, entries, *, source=None):
        by_file: dict[Path, list[Entry]] = {}
        for e in entries:
            by_file.setdefault(self.path(e.key.op, e.key.family), []).append(e)
        kept = 0
        for path, new in by_file.items():
            kept += self._commit_file(path, new, source)
        return kept

    def _commit_file(self, path: Path, new: list[Entry], source: str | None) -> int:
        from filelock import FileLock

        path.parent.mkdir(parents=True, exist_ok=True)
        with FileLock(str(path) + ".lock", timeout=120):
            current = self._parse(path) if path.exists() else LoadResult([], [])
            if current.problems and path.exists() and not current.entries:
                raise DatabaseError(
                    f"{path}: refusing to overwrite a file that does not load "
                    f"({current.problems[0]}); fix or move it, then commit again")
            by_key = {e.key: e for e in current.entries}
            kept = 0
            for e in new:
                if source:
                    e.provenance.setdefault("merged_from", source)
                old = by_key.get(e.key)
                winner = e if old is None else better(old, e)
                by_key[e.key] = winner
                kept += winner is e
            doc = {"format": FORMAT, "op": path.stem, "family": path.parent.name,
                   "entries": [e.to_json() for e in sorted(by_key.values(), key=_order)]}
            self._atomic_write(path, dumps(doc))
        return kept

    def replace_file(self, op: str, family: str, entries: list[Entry]) -> None:
        """Rewrites one file with exactly ``entries`` (used by prune)."""
        from filelock import FileLock

        path = self.path(op, family)
        with FileLock(str(path) + ".lock", timeout=120):
            doc = {"format": FORMAT, "op": op, "family": family,
                   "entries": [e.to_json() for e in sorted(entries, key=_order)]}
            self._atomic_write(path, dumps(doc))

    @staticmethod
    def _atomic_write(path: Path, text: str) -> None:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise


def _order(e: Entry):
    return (e.key.dtypes, e.key.shape, str(e.key.params), e.key.fingerprint)
