"""Schedule databases: an interface with a directory implementation and an in-memory one.

A directory database holds one JSON file per (target family, op): ``<root>/<family>/<op>.json``.
Reading never runs code: files are decoded with a strict JSON reader, checked against the JSON Schema
in ``schema.json``, and every schedule is parsed and bounded by the directive grammar. A bad file is
reported (``problems``) and skipped; every other file keeps serving lookups. A bad entry in a good
file is reported and skipped, and kept byte for byte by every write (``LoadResult.unread``).

A corrupt file (not UTF-8, not JSON, or JSON of the wrong shape, as after a torn copy or a merge
conflict) is never overwritten: the next write to it first renames it aside, under the lock, to
``<op>.json.corrupt-<UTC time>`` in the same folder, warns naming both files, and then writes the
new entries. Readers never move anything. A file that is sound but unreadable here (a newer
database format, over the size or entry limits, in the wrong folder) is not corrupt: a write to it
is refused with a message saying what to do, and the file is left as it is.

Every change to a file goes through one read-modify-write primitive, :meth:`Database.update`: it
takes an exclusive lock on ``<file>.lock`` (the ``filelock`` package: ``fcntl.flock`` on POSIX),
reads the file afresh under that lock, lets the caller compute the new entries, writes a temporary
file in the same folder, ``fsync``\\ s it and ``os.replace``\\ s it over the old one. ``commit``,
the tuner, ``prune`` and ``merge`` all use it, so concurrent writers never lose an entry, and a
reader sees either the old or the new file, never half of one.

Cost is bounded. One op file holds at most :data:`MAX_ENTRIES` entries and :data:`MAX_FILE_BYTES`
bytes; a larger file is refused, with a message saying what to do. A parsed file is kept in memory;
a re-read under the lock reuses it when the bytes are unchanged, and otherwise re-checks only the
entries whose JSON changed. ``benchmarks/bench_database.py`` measures lookup and commit time against
the number of entries (the table is in the README).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import math
import os
import tempfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from ..errors import DatabaseError, DatabaseWarning
from ..infra.jsonio import dumps, strict_loads
from ..schedule.directives import LIMITS
from .entry import FAMILY_RE, FORMAT, OP_RE, Entry, Key

#: Entries in one op file. Loading checks every entry (1-3 ms each on this 2-core machine), so
#: this bounds the first lookup of an op to a few seconds; the README has the measured curve.
#: More shapes fit in more folders: databases stack on the search path.
MAX_ENTRIES = 1024
#: Bytes of one op file, checked before the file is read. A typical entry is 2-10 KB.
MAX_FILE_BYTES = 8 << 20
#: Seconds a writer waits for another writer's lock on the same file.
LOCK_TIMEOUT_S = 120.0
#: What to do about a corrupt file, appended to the problem a reader reports.
CORRUPT_HINT = ("; restore it (from version control or a backup) or remove it: the next write "
                "to it moves it aside as <name>.corrupt-<time> and starts a fresh file")




@functools.lru_cache(maxsize=2)
def _validator(part: str):
    """The file's schema (``part="file"``, entries unchecked) or one entry's (``"entry"``).

    In the entry schema the directives are only required to be objects: each one is then checked by
    the directive grammar (``Schedule.from_json``), which is stricter than the schema's directive
    rule (known directive names, each one's argument names and bounds) and far faster than
    ``jsonschema`` on the 10-50 directives of a typical schedule. References are inlined once, as
    resolving ``$ref`` on every entry took about a third of the validation time.
    """
    import jsonschema

    schema = json.loads((Path(__file__).with_name("schema.json")).read_text())
    defs = schema.pop("$defs")
    if part == "file":
        schema["properties"]["entries"] = {"type": "array"}
        return jsonschema.Draft202012Validator(schema)
    defs["directive"] = {"type": "object"}

    def inline(node):
        if isinstance(node, dict):
            if "$ref" in node:
                return inline(defs[node["$ref"].rsplit("/", 1)[1]])
            return {k: inline(v) for k, v in node.items()}
        return [inline(x) for x in node] if isinstance(node, list) else node

    return jsonschema.Draft202012Validator(inline(defs["entry"]))


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
    problems = [f"{where}: at {at}: {v} is not a finite number" for at, v in _non_finite(doc)][:20]
    if problems:    # NaN passes every schema bound (all comparisons with it are false)
        return problems
    for err in sorted(_validator(part).iter_errors(doc), key=lambda e: list(e.absolute_path))[:20]:
        path = "/".join(str(p) for p in err.absolute_path) or "(top)"
        problems.append(f"{where}: at {path}: {_short(err.message)}")
    return problems


def _non_finite(node, at: str = "(top)"):
    """(path, value) of each NaN or infinite float in a decoded document (an Entry made in
    Python can hold them; a file cannot, as the strict reader refuses them)."""
    if isinstance(node, float) and not math.isfinite(node):
        yield at, node
    elif isinstance(node, dict):
        for k, v in node.items():
            yield from _non_finite(v, k if at == "(top)" else f"{at}/{k}")
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _non_finite(v, str(i) if at == "(top)" else f"{at}/{i}")


def better(a: Entry, b: Entry) -> Entry:
    """The entry to keep of two with the same key: the faster measured one (a on ties)."""
    ta = a.time_ms if a.time_ms is not None else float("inf")
    tb = b.time_ms if b.time_ms is not None else float("inf")
    return b if tb < ta else a


def _copy(e: Entry) -> Entry:
    """An entry whose dicts a caller may change without touching the parsed-file cache."""
    return dataclasses.replace(e, baselines=dict(e.baselines), provenance=dict(e.provenance))


@dataclasses.dataclass
class LoadResult:
    entries: list[Entry]
    problems: list[str]
    #: The JSON of entries of a readable file that did not load (a directive of a newer PyPTO,
    #: a bad factor): a write keeps them as they are, so no writer deletes what it cannot read.
    unread: list[dict] = dataclasses.field(default_factory=list)
    #: The file as a whole is damaged (not UTF-8, not JSON, JSON of the wrong shape): a write
    #: moves it aside (``<name>.corrupt-<time>``) instead of refusing.
    corrupt: bool = False


#: ``update``'s callback: the file's current content (read under the lock) -> the entries the file
#: should hold, or None to leave it as it is.
UpdateFn = Callable[[LoadResult], "list[Entry] | None"]


class Database:
    """The interface every database implements."""

    name = "database"

    def entries(self, op: str, family: str) -> list[Entry]:
        raise NotImplementedError

    def update(self, op: str, family: str, fn: UpdateFn) -> list[Entry]:
        """The one read-modify-write: ``fn`` sees the current entries of (op, family), read
        atomically with the write, and returns what to store (None: no change). Returns the
        entries the file holds afterwards."""
        raise NotImplementedError

    def commit(self, entries: Iterable[Entry], *, source: str | None = None) -> int:
        """Adds entries, keeping the better one per key; returns how many were kept."""
        by_file: dict[tuple[str, str], list[Entry]] = {}
        for e in entries:
            by_file.setdefault((e.key.op, e.key.family), []).append(e)
        kept = 0
        for (op, family), new in by_file.items():
            count = [0]
            self.update(op, family, functools.partial(_merge, new=new, source=source, count=count))
            kept += count[0]
        return kept

    def iter_all(self) -> Iterator[Entry]:
        raise NotImplementedError

    def problems(self) -> list[str]:
        return []

    def problems_of(self, op: str, family: str) -> list[str]:
        """Why some or all of (op, family)'s stored entries could not be read (empty: none)."""
        return []

    def best(self, key: Key) -> Entry | None:
        found = [e for e in self.entries(key.op, key.family) if e.key == key]
        return min(found, key=lambda e: e.time_ms if e.time_ms is not None else float("inf"),
                   default=None)


def _merge(current: LoadResult, *, new: list[Entry], source: str | None, count: list[int]):
    """``commit``'s update: the better entry per key; counts the new entries kept."""
    by_key = {e.key: e for e in current.entries}
    for e in new:
        if source:
            e.provenance.setdefault("merged_from", source)
        old = by_key.get(e.key)
        winner = e if old is None else better(old, e)
        by_key[e.key] = winner
        count[0] += winner is e
    return list(by_key.values())


class MemoryDatabase(Database):
    """A database held in a dict; for tests and for tuning without touching disk."""

    def __init__(self, entries: Iterable[Entry] = ()):
        self.name = "memory"
        self._by_key: dict[Key, Entry] = {}
        self.commit(entries)

    def entries(self, op, family):
        return [e for k, e in self._by_key.items() if k.op == op and k.family == family]

    def update(self, op, family, fn):
        current = self.entries(op, family)
        new = fn(LoadResult(list(current), []))
        if new is None:
            return current
        for e in current:
            del self._by_key[e.key]
        for e in new:
            self._by_key[e.key] = e
        return self.entries(op, family)

    def iter_all(self):
        return iter(list(self._by_key.values()))


def check_writable(root: str | os.PathLike) -> Path:
    """``root`` as a database folder that can be written: created if missing. Checked before a
    long run (tuning) that writes its result at the end.

    Raises:
        DatabaseError: it cannot be created (a file in the way) or written.
    """
    root = Path(root)
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise DatabaseError(f"cannot create the database folder {root}: {e.strerror}"
                            f"{f' ({e.filename})' if e.filename else ''}; give another --db") from None
    if not os.access(root, os.W_OK | os.X_OK):
        raise DatabaseError(f"the database folder {root} cannot be written; give another --db")
    return root


def _safe_component(value: str, pattern, what: str) -> str:
    if not isinstance(value, str) or not pattern.match(value):
        raise DatabaseError(f"invalid {what} {value!r} for a database path "
                            f"(allowed: {pattern.pattern})")
    return value


@dataclasses.dataclass
class _Seen:
    """One entry as last read or written: its JSON, the checked Entry, its text in the file."""

    obj: dict
    entry: Entry
    text: str | None = None  # filled in when the file is next written


@dataclasses.dataclass
class _Parsed:
    """One file as last read or written: its stat, its bytes' digest, its entries, and each
    entry's JSON (by key) so that a re-read or a write can tell which entries changed."""

    stat: tuple
    digest: str
    result: LoadResult
    known: dict[str, _Seen]


def _stat_sig(st: os.stat_result) -> tuple:
    return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _key_text(obj) -> str | None:
    k = obj.get("key") if isinstance(obj, dict) else None
    return json.dumps(k, sort_keys=True) if isinstance(k, dict) else None


class DirectoryDatabase(Database):
    """A database in a folder: ``<root>/<family>/<op>.json``."""

    def __init__(self, root: str | os.PathLike):
        self.root = Path(root)
        self.name = str(self.root)
        self._cache: dict[Path, _Parsed] = {}
        #: Entries checked against the schema and the grammar so far (untouched entries of a file
        #: already read are not checked again). A counter for tests and benchmarks.
        self.checked_entries = 0

    def path(self, op: str, family: str) -> Path:
        """The file for (family, op); both are checked so that no name can escape the root."""
        return (self.root / _safe_component(family, FAMILY_RE, "target family")
                / f"{_safe_component(op, OP_RE, 'op name')}.json")

    # -- reading -------------------------------------------------------------------------------
    def load_file(self, path: Path) -> LoadResult:
        """Entries of one file and its problems; a missing file is empty, a corrupt one is reported.

        The parsed file is reused while the file's stat (inode, size, times) is unchanged; writers
        replace the file (a new inode), so a reader sees their change.
        """
        try:
            st = path.stat()
        except (FileNotFoundError, NotADirectoryError):
            return LoadResult([], [])  # no such file (a folder on the path may be a file)
        except OSError as e:
            return LoadResult([], [f"{path}: cannot be read ({e.strerror})"])
        cached = self._cache.get(path)
        if cached and cached.stat == _stat_sig(st):
            return cached.result
        return self._read(path).result

    def _read(self, path: Path) -> _Parsed:
        """Reads ``path`` now. Unchanged bytes reuse the last parse; changed ones re-check only
        the entries whose JSON differs from what was last seen. Never trusts timestamps alone,
        so it is what a read-modify-write uses under the lock."""
        where = str(path)
        try:
            st = path.stat()
        except (FileNotFoundError, NotADirectoryError):
            self._cache.pop(path, None)
            return _Parsed((), "", LoadResult([], []), {})
        except OSError as e:
            return _Parsed((), "", LoadResult([], [f"{where}: {e}"]), {})
        if st.st_size > MAX_FILE_BYTES:
            return self._remember(path, st, "", LoadResult([], [
                f"{where}: file is {st.st_size / 2**20:.1f} MiB, over the limit of "
                f"{MAX_FILE_BYTES >> 20} MiB for one op file; prune it (`pypto db prune`) or move "
                "some entries to another database folder"]), {})
        try:
            raw = path.read_bytes()
        except OSError as e:
            return _Parsed((), "", LoadResult([], [f"{where}: {e}"]), {})
        digest = hashlib.sha256(raw).hexdigest()
        cached = self._cache.get(path)
        if cached and cached.digest == digest:
            return self._remember(path, st, digest, cached.result, cached.known)
        result, known = self._parse(raw, path, cached.known if cached else {})
        return self._remember(path, st, digest, result, known)

    def _remember(self, path, st, digest, result, known) -> _Parsed:
        parsed = _Parsed(_stat_sig(st), digest, result, known)
        self._cache[path] = parsed
        return parsed

    def _parse(self, raw: bytes, path: Path, known: dict) -> tuple[LoadResult, dict]:
        where = str(path)
        try:
            doc = strict_loads(raw, where)
        except DatabaseError as e:
            return LoadResult([], [f"{e}{CORRUPT_HINT}"], corrupt=True), {}
        version = doc.get("format") if isinstance(doc, dict) else None
        if type(version) is int and version > FORMAT:
            return LoadResult([], [
                f"{where}: written in database format {version}, newer than this PyPTO reads "
                f"({FORMAT}); upgrade PyPTO to use it (nothing in it was changed)"]), {}
        problems = validate_document(doc, where)
        if problems:
            problems[-1] += CORRUPT_HINT
            return LoadResult([], problems, corrupt=True), {}
        if len(doc["entries"]) > MAX_ENTRIES:
            return LoadResult([], [
                f"{where}: {len(doc['entries'])} entries, over the limit of {MAX_ENTRIES} for one "
                "op file; prune it (`pypto db prune`) or move some entries to another database "
                "folder"]), {}
        if doc["op"] != path.stem or doc["family"] != path.parent.name:
            return LoadResult([], [f"{where}: file says op {doc['op']!r}, family {doc['family']!r} "
                                   f"but lies at {path.parent.name}/{path.name}"]), {}
        entries, problems, seen, unread = [], [], {}, []
        for i, obj in enumerate(doc["entries"]):
            kt = _key_text(obj)
            old = known.get(kt) if kt is not None else None
            if old is not None and old.obj == obj:
                e = old.entry  # this entry's JSON is unchanged since it was last checked
            else:
                e = self._check_entry(obj, f"{where} entry #{i}", problems)
                if e is None:
                    unread.append(obj)
                    continue
            if e.key.op != doc["op"] or e.key.family != doc["family"]:
                problems.append(f"{where} entry #{i}: key {e.key} does not belong in this file")
                unread.append(obj)
                continue
            entries.append(e)
            seen[kt] = old if old is not None and old.entry is e else _Seen(obj, e)
        return LoadResult(entries, problems, unread), seen

    def _check_entry(self, obj, where: str, problems: list[str]) -> Entry | None:
        """One entry checked against the schema and the directive grammar; None if it fails."""
        self.checked_entries += 1
        bad = validate_document(obj, where, "entry")
        if bad:
            problems += bad
            return None
        try:
            return Entry.from_json(obj, where)
        except DatabaseError as err:
            problems.append(str(err))
            return None

    def entries(self, op, family):
        try:
            path = self.path(op, family)
        except DatabaseError:
            return []
        return self.load_file(path).entries

    def problems_of(self, op, family):
        try:
            path = self.path(op, family)
        except DatabaseError:
            return []
        return list(self.load_file(path).problems)

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
    def update(self, op, family, fn):
        """See :meth:`Database.update`. Entries ``fn`` returns that are not, as JSON, already in
        the file are checked (schema and grammar) before anything is written; a bad one raises
        DatabaseError and leaves the file as it was."""
        from filelock import FileLock, Timeout

        path = self.path(op, family)

        def unwritable(e: OSError) -> DatabaseError:
            # A folder that cannot be made or written (a file in the way, read-only, disk full):
            # the file, if any, is as it was (writes are atomic).
            return DatabaseError(f"cannot write the database file {path}: {e.strerror or e}"
                                 f"{f' ({e.filename})' if e.filename else ''}; write to a "
                                 "database folder you can write, or fix this one")

        lock = FileLock(str(path) + ".lock", timeout=LOCK_TIMEOUT_S)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            lock.acquire()
        except Timeout:
            raise DatabaseError(f"{path}: another writer held the lock {path}.lock for "
                                f"{LOCK_TIMEOUT_S:.0f} s; try again, or remove the lock file if "
                                "no PyPTO process is writing") from None
        except OSError as e:
            raise unwritable(e) from None
        try:
            current = self._read(path)
            res = current.result
            corrupt = res.corrupt and path.exists()
            if not corrupt and res.problems and not res.entries and path.exists():
                raise DatabaseError(
                    f"{path}: refusing to overwrite a file that does not load "
                    f"({res.problems[0]}); fix or move it, then write again")
            new = fn(LoadResult([_copy(e) for e in res.entries], list(res.problems),
                                list(res.unread)))
            if new is None:
                return res.entries      # nothing to write: a corrupt file stays where it is
            try:
                if corrupt:
                    self._quarantine(path, res.problems[0])
                return self._write(path, op, family, new, {} if corrupt else current.known,
                                   res.unread)
            except OSError as e:
                raise unwritable(e) from None
        finally:
            lock.release()

    def _write(self, path: Path, op: str, family: str, new: list[Entry], known: dict,
               unread: list[dict] = ()) -> list[Entry]:
        by_key: dict[Key, Entry] = {}
        for e in new:
            if e.key.op != op or e.key.family != family:
                raise DatabaseError(f"{path}: entry {e.key} does not belong in this file")
            by_key[e.key] = e if e.key not in by_key else better(by_key[e.key], e)
        if len(by_key) + len(unread) > MAX_ENTRIES:
            raise DatabaseError(
                f"{path}: {len(by_key)} entries would exceed the limit of {MAX_ENTRIES} for one op "
                "file; prune it (`pypto db prune`) or write to another database folder (--db)")
        seen: dict[str, _Seen] = {}
        for e in sorted(by_key.values(), key=_order):
            obj = e.to_json()
            kt = _key_text(obj)
            old = known.get(kt)
            if old is None or old.obj != obj:
                problems: list[str] = []
                checked = self._check_entry(obj, f"{path}: new entry {e.key}", problems)
                if checked is None:
                    raise DatabaseError(f"not written: {problems[0]}")
                old = _Seen(obj, checked)
            if old.text is None:
                old.text = _entry_text(obj)
            seen[kt] = old
        # Entries this PyPTO could not read stay, byte for byte as JSON, after the others.
        kept = [_entry_text(obj) for obj in unread]
        text = _file_text(op, family, [x.text for x in seen.values()] + kept)
        if len(text.encode()) > MAX_FILE_BYTES:
            raise DatabaseError(
                f"{path}: the file would be over the limit of {MAX_FILE_BYTES >> 20} MiB; prune "
                "it (`pypto db prune`) or write to another database folder (--db)")
        self._atomic_write(path, text)
        entries = [x.entry for x in seen.values()]
        if kept:     # their problems are reported again by the next read
            self._cache.pop(path, None)
        else:
            self._remember(path, path.stat(), hashlib.sha256(text.encode()).hexdigest(),
                           LoadResult(entries, []), seen)
        return entries

    def _quarantine(self, path: Path, why: str) -> Path:
        """Renames a corrupt ``path`` aside (under the writer's lock), warns, and returns the new
        name. Nothing is deleted: the bytes stay, for a person to repair or remove."""
        import time
        import warnings

        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        aside = path.with_name(f"{path.name}.corrupt-{stamp}")
        n = 1
        while aside.exists():
            n += 1
            aside = path.with_name(f"{path.name}.corrupt-{stamp}-{n}")
        os.replace(path, aside)
        self._cache.pop(path, None)
        warnings.warn(DatabaseWarning(
            f"{path} was corrupt ({why.removesuffix(CORRUPT_HINT)}); moved it aside to {aside.name} "
            "and wrote the new entries in a fresh file. Repair the old one and merge it back "
            f"(`pypto db merge -o {path.parent.parent} <folder holding the repaired file>`), or "
            "delete it"), stacklevel=3)
        return aside

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


def _entry_text(obj: dict) -> str:
    """One entry as it appears inside a file written by ``dumps`` (two levels deep)."""
    return "\n".join("  " + line for line in dumps(obj).rstrip("\n").split("\n"))


def _file_text(op: str, family: str, entry_texts: list[str]) -> str:
    """The whole file, byte for byte what ``dumps`` gives for the document, from entry texts that
    are kept between writes: re-encoding thousands of unchanged entries (``json`` encodes with
    indentation in pure Python) was most of a commit's time."""
    body = "[\n" + ",\n".join(entry_texts) + "\n ]" if entry_texts else "[]"
    return (f'{{\n "entries": {body},\n "family": {json.dumps(family)},\n "format": {FORMAT},\n'
            f' "op": {json.dumps(op)}\n}}\n')


def _order(e: Entry):
    return (e.key.dtypes, e.key.shape, str(e.key.params), e.key.fingerprint)
