"""Stored baselines measured with forms users would not run: re-measured, or removed.

An entry carries the times of its rivals measured beside it (``baselines``), so that every claim
of speed can be checked. Tuning runs before the fair protocol stored two kinds of figures that
make PyPTO look better than it is:

- ``numpy``: the op's reference (``op.kernel_ref``), written for exactness (float64 accumulation,
  plain loops) and for most ops several times slower than the NumPy form ``pypto bench`` times
  (``pypto.bench.peers.numpy_peer``: float32, BLAS, im2col, a preallocated output where NumPy
  allows one). For an op whose reference *is* its NumPy peer (no faster form) the figure stands.
- ``torch``: PyTorch with ``OMP_WAIT_POLICY=PASSIVE`` forced, timed back to back with other
  libraries; the rule now is both wait policies, the better kept, with pauses between libraries.

The tuner now records the form of each baseline it stores (provenance ``baseline_forms``); entries
without that record are the old ones. :func:`fix` either re-measures their suspect baselines with
the current tuner's worker (the entry's own schedule beside NumPy's fast form and PyTorch under
both policies; the entry's time then is recorded too, since its stored ``time_ms`` is from another
sitting), or removes them and says in the provenance which were removed and why. Re-measuring on
a loaded machine would store distorted numbers: remove instead, and re-measure on an idle one.

Every write goes through :meth:`Database.update` (the locked read-modify-write) and touches an
entry only if it still holds the schedule that was examined. Run as::

    python -m autotune.baselines schedules            # remove (the default), with a report
    python -m autotune.baselines schedules --remeasure
    python -m autotune.baselines schedules --dry-run
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import sys
from collections.abc import Callable, Iterable

from pypto.database import Entry
from pypto.database.store import Database, DirectoryDatabase, LoadResult

#: Why each kind of old baseline cannot stand, as the provenance records it.
WHY = {
    "numpy": "measured with the op's reference (kernel_ref, written for exactness: float64 "
             "accumulation for most ops), not the NumPy form pypto bench times "
             "(pypto.bench.peers.numpy_peer), and back to back with other libraries",
    "torch": "measured with OMP_WAIT_POLICY=PASSIVE forced and without pauses between libraries, "
             "not the better of both wait policies under the fair protocol",
}


@dataclasses.dataclass
class Outcome:
    key: str
    names: list[str]          # baselines found suspect
    action: str               # remove | remeasure | none | failed
    detail: str = ""
    written: bool = False


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def suspect(entry: Entry, names: Iterable[str] = ("numpy", "torch"),
            has_fast_numpy: Callable[[Entry], bool] | None = None) -> list[str]:
    """The baselines of ``entry`` stored in a slow or one-sided form (see the module docstring)."""
    forms = entry.provenance.get("baseline_forms") or {}
    done = entry.provenance.get("baselines_removed") or {}
    out = []
    for n in names:
        if n not in entry.baselines or n in forms or n in done:
            continue
        if n == "numpy" and not (has_fast_numpy or fast_numpy_exists)(entry):
            continue  # the reference is the op's NumPy peer: the figure stands
        out.append(n)
    return out


def fast_numpy_exists(entry: Entry) -> bool:
    """Whether ``pypto bench`` times a faster NumPy form than the reference for this entry's call.

    The form depends on the op, its parameters and dtypes (a grouped convolution, an integer
    image fall back to the reference), so the peer is built on inputs of the entry's own key.
    """
    from pypto.bench.peers import numpy_peer
    from pypto.errors import PyptoError
    from pypto.infra.inputs import complete_dims, make_inputs
    from pypto.ops import get_op

    try:
        op = get_op(entry.key.op)
        params = op.resolve_params(dict(entry.key.params))
        dims = complete_dims(op, entry.key.shape_dict, params)
        arrays = make_inputs(op, entry.key.dtypes, dims, params, seed=0)
    except PyptoError:
        return True  # an op not registered here: its old figure cannot be shown to stand
    return numpy_peer(op.name, arrays, params)[1] == "numpy"


def _remeasure(entry: Entry, evaluator) -> dict:
    """The entry's schedule beside the peers, in the tuner's worker: the compare reply."""
    from pypto.compiler import targets
    from pypto.infra.inputs import complete_dims
    from pypto.ops import get_op

    op = get_op(entry.key.op)
    params = op.resolve_params(dict(entry.key.params))
    dims = complete_dims(op, entry.key.shape_dict, params)
    if targets.family(targets.host()) != entry.key.family:
        return {"results": {}, "errors": {"*": f"this machine is {targets.family(targets.host())}, "
                                                f"the entry is for {entry.key.family}"}}
    with evaluator(op.name, entry.key.dtypes, params, dims, str(targets.host())) as ev:
        return ev.compare({"stored": entry.schedule.to_json()}, numpy=True)


def _rewrite(entry: Entry, names: list[str], remeasured: dict | None) -> Entry:
    base = {n: v for n, v in entry.baselines.items() if n not in names}
    prov = dict(entry.provenance)
    if remeasured is None:
        removed = dict(prov.get("baselines_removed") or {})
        for n in names:
            removed[n] = (f"{entry.baselines[n]:.4g} ms {WHY[n]}; removed {_now()[:10]}: this machine "
                          "was too loaded to re-measure honestly (python -m autotune.baselines "
                          "--remeasure on an idle one)")
        prov["baselines_removed"] = removed
    else:
        res = remeasured["results"]
        forms = dict(prov.get("baseline_forms") or {})
        for n in names:
            base[n] = res[n]["median_ms"]
            forms[n] = res[n].get("label", n)
        prov["baseline_forms"] = forms
        prov["baselines_remeasured"] = {
            "date": _now(), "names": list(names), "stored_ms": res["stored"]["median_ms"],
            "note": "time_ms is from the tuning run; stored_ms is this schedule measured beside the "
                    "re-measured baselines (fair protocol, steady state)"}
    return dataclasses.replace(entry, baselines=base, provenance=prov)


def fix(db: Database, *, remeasure: bool = False, names: Iterable[str] = ("numpy", "torch"),
        dry_run: bool = False, evaluator=None, has_fast_numpy=None,
        say: Callable[[str], None] = print) -> list[Outcome]:
    """Finds every entry of ``db`` with suspect baselines and removes or re-measures them."""
    if evaluator is None:
        from .evaluate import Evaluator as evaluator
    names = tuple(names)
    out: list[Outcome] = []
    for entry in sorted(db.iter_all(), key=lambda e: str(e.key)):
        bad = suspect(entry, names, has_fast_numpy)
        if not bad:
            continue
        oc = Outcome(str(entry.key), bad, "remeasure" if remeasure else "remove")
        got = None
        if remeasure and not dry_run:
            got = _remeasure(entry, evaluator)
            missing = [n for n in (*bad, "stored") if n not in got.get("results", {})]
            if missing:
                oc.action, oc.detail = "failed", (f"not measured: {', '.join(missing)} "
                                                  f"({'; '.join(f'{k}: {v[:120]}' for k, v in got.get('errors', {}).items())})")
                out.append(oc)
                say(f"{oc.key}: {oc.detail}; left as it is")
                continue
        if not dry_run:
            new = _rewrite(entry, bad, got)
            oc.written = _replace(db, entry, new)
        oc.detail = ", ".join(f"{n} {entry.baselines[n]:.4g} ms" + (
            f" -> {new.baselines[n]:.4g} ms" if got is not None else "") for n in bad)
        verb = {"remove": "removed", "remeasure": "re-measured"}[oc.action]
        say(f"{oc.key}: {oc.detail} " + (f"{verb}" if oc.written else
                                          "(dry run)" if dry_run else "(entry changed meanwhile; left)"))
        out.append(oc)
    return out


def _replace(db: Database, old: Entry, new: Entry) -> bool:
    """Puts ``new`` in place of ``old`` if the file still holds ``old``'s schedule for its key."""
    done = [False]

    def swap(current: LoadResult):
        entries = []
        for e in current.entries:
            if e.key == old.key and e.schedule.hash == old.schedule.hash:
                e = new
                done[0] = True
            entries.append(e)
        return entries if done[0] else None

    db.update(old.key.op, old.key.family, swap)
    return done[0]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m autotune.baselines", description=__doc__.split("\n\n")[0])
    p.add_argument("db", help="a schedule database folder (e.g. schedules)")
    p.add_argument("--remeasure", action="store_true",
                   help="re-measure the suspect baselines (on an idle machine) instead of removing them")
    p.add_argument("--names", default="numpy,torch", help="which baselines to examine (default numpy,torch)")
    p.add_argument("--dry-run", action="store_true", help="report, write nothing")
    a = p.parse_args(argv)
    names = [n.strip() for n in a.names.split(",") if n.strip()]
    unknown = set(names) - set(WHY)
    if unknown:
        p.error(f"--names: unknown baseline(s) {', '.join(sorted(unknown))}; choose from {', '.join(WHY)}")
    res = fix(DirectoryDatabase(a.db), remeasure=a.remeasure, names=names, dry_run=a.dry_run)
    print(f"{len(res)} entr{'y' if len(res) == 1 else 'ies'} with old-form baselines; "
          f"{sum(o.written for o in res)} written")
    return 1 if any(o.action == "failed" for o in res) else 0


if __name__ == "__main__":
    sys.exit(main())
