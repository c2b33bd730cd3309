"""Cost of a schedule database file against the number of entries it holds.

    python benchmarks/bench_database.py [--sizes 100,300,1000,2000] [--repeats 3]

For each size, one op file is written with that many entries (the shipped matmul entry, with the
shape varied so that every key differs), then timed:

* ``first lookup``: a fresh ``DirectoryDatabase`` reads the op's entries, as the first call of the
  op in a new process does (strict JSON decode, schema and grammar checks of every entry);
* ``cached lookup``: the same database again (the parsed file is kept while its stat is unchanged);
* ``commit (new process)``: a fresh database commits one entry, faster than the one stored for its
  key (what one ``pypto db`` command or one tuner run does);
* ``commit (same process)``: the same database commits one such entry, five times (a long-running
  writer).

Medians of the repeats are printed as a Markdown table. A size over the file limits is reported as
refused, with the error's first words.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pypto.database import DirectoryDatabase, Entry  # noqa: E402
from pypto.database.jsonio import dumps  # noqa: E402
from pypto.errors import DatabaseError  # noqa: E402

FAMILY = "x86-64-avx2"


def template() -> dict:
    """One realistic entry (21 directives, about 4 KB of JSON): the shipped matmul winner."""
    doc = json.loads((ROOT / "schedules" / FAMILY / "matmul.json").read_text())
    return doc["entries"][0]


def entry_json(tpl: dict, i: int) -> dict:
    e = copy.deepcopy(tpl)
    e["key"]["shape"]["M"] = 1 + i
    return e


def write_file(root: Path, n: int, tpl: dict) -> Path:
    path = root / FAMILY / "matmul.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = {"format": 1, "op": "matmul", "family": FAMILY,
           "entries": [entry_json(tpl, i) for i in range(n)]}
    path.write_text(dumps(doc))
    return path


def timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1000.0


def measure(n: int, repeats: int, tpl: dict) -> dict:
    rows: dict[str, list[float]] = {"first": [], "cached": [], "commit_new": [], "commit_same": []}
    extra = 0
    for _ in range(repeats):
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            path = write_file(root, n, tpl)
            size_mib = path.stat().st_size / 2**20
            db = DirectoryDatabase(root)
            try:
                rows["first"].append(timed(lambda: db.entries("matmul", FAMILY)))
            except DatabaseError as e:
                return {"n": n, "mib": size_mib, "refused": str(e)}
            problems = db.load_file(path).problems
            if problems:
                return {"n": n, "mib": size_mib, "refused": problems[0]}
            rows["cached"].append(timed(lambda: db.entries("matmul", FAMILY)))

            def one(d):
                # A faster entry for an existing key: the file changes but does not grow, so a
                # file at the entry limit can still be timed.
                nonlocal extra
                extra += 1
                e = entry_json(tpl, extra % n)
                e["time_ms"] = tpl["time_ms"] / (1 + extra)
                d.commit([Entry.from_json(e, "bench")])

            rows["commit_new"].append(timed(lambda: one(DirectoryDatabase(root))))
            same = [timed(lambda: one(db)) for _ in range(5)]
            rows["commit_same"].append(statistics.median(same))
    return {"n": n, "mib": size_mib, **{k: statistics.median(v) for k, v in rows.items()}}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="100,300,1000,2000")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    tpl = template()
    print(f"| entries | file MiB | first lookup ms | cached lookup ms | commit, new process ms "
          f"| commit, same process ms |")
    print("|---:|---:|---:|---:|---:|---:|")
    for n in (int(s) for s in args.sizes.split(",")):
        r = measure(n, args.repeats, tpl)
        if "refused" in r:
            why = r["refused"].split(": ", 1)[-1].split(";")[0]
            print(f"| {n} | {r['mib']:.1f} | refused ({why}) | | | |")
            continue
        print(f"| {n} | {r['mib']:.1f} | {r['first']:.0f} | {r['cached']:.2f} | {r['commit_new']:.0f} "
              f"| {r['commit_same']:.0f} |")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYPTO_NO_SHIPPED_SCHEDULES", "1")
    sys.exit(main())
