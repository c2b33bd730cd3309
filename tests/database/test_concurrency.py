"""Concurrent writers lose no entry, whichever write path they take.

Four spawned processes write into one op's file at once: the public ``commit``, the tuner's store
(which replaces an entry, also re-storing keys it wrote before), ``merge`` from a folder of its
own, and ``prune`` (which rewrites the file after removing a stale entry it planted). Every entry
written must be there at the end.
"""

import multiprocessing as mp

from dbhelpers import family, matmul_entry
from pypto.database import DirectoryDatabase
from pypto.database.tools import merge, prune

N = 12
PATHS = ("commit", "tuner", "merge", "prune")
BASE = {"commit": 1, "tuner": 101, "merge": 201, "prune": 301}


def _write(path, root, scratch, barrier):
    from autotune.verdict import store_winner

    db = DirectoryDatabase(root)
    start = BASE[path]
    barrier.wait(60)
    for i in range(N):
        m = start + i
        if path == "commit":
            db.commit([matmul_entry(m, 8, 8, time_ms=1.0, tag="commit")])
        elif path == "tuner":
            # A new key, then a re-tune of a key stored earlier (slower, but measured side by side
            # in the same run, so the tuner replaces it): both must survive the other writers.
            e = matmul_entry(m, 8, 8, time_ms=1.0, tag="tuned")
            assert store_winner(db, e, db.best(e.key)) is None
            again = matmul_entry(start + i // 2, 8, 8, time_ms=3.0, tag="retuned")
            assert store_winner(db, again, db.best(again.key)) is None
        elif path == "merge":
            src = f"{scratch}/src{i}"
            DirectoryDatabase(src).commit([matmul_entry(m, 8, 8, time_ms=1.0, tag="merge")])
            merge([src], root)
        else:
            db.commit([matmul_entry(m, 8, 8, time_ms=1.0, fprint="0" * 16, tag="stale")])
            report = prune(db)
            assert any("stale" in r for r in report), report


def test_every_write_path_keeps_every_other_writers_entries(tmp_path):
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(len(PATHS))
    root = tmp_path / "db"
    procs = [ctx.Process(target=_write, args=(p, str(root), str(tmp_path), barrier)) for p in PATHS]
    for p in procs:
        p.start()
    for p in procs:
        p.join(180)
    assert [p.exitcode for p in procs] == [0] * len(PATHS)
    got = {e.key.shape_dict["M"]: e for e in DirectoryDatabase(root).entries("toy_matmul", family())}
    want = {BASE[p] + i for p in ("commit", "tuner", "merge") for i in range(N)}
    assert set(got) == want, f"lost: {sorted(want - set(got))}, extra: {sorted(set(got) - want)}"
    retuned = {BASE["tuner"] + i // 2 for i in range(N)}
    for m in range(BASE["tuner"], BASE["tuner"] + N):
        assert got[m].provenance["method"] == ("retuned" if m in retuned else "tuned"), m
    assert not list(root.rglob("*.tmp"))
