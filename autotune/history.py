"""How a tuning run converged: best time found against trials and against wall time.

Read from the Optuna study the tuner wrote (any storage URL the tuner accepts). Baselines (the
default schedule and Halide's autoschedulers) are trials of the study as well: they are measured
first, so the curve starts at the best of them and every later point is what the search added.
Values are the tuner's objective: milliseconds, corrected for drift seen on the incumbent.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable
from typing import Any


def _when(t) -> datetime.datetime | None:
    return t.datetime_complete or t.datetime_start


def study_history(study) -> dict[str, Any]:
    """One study as plain data: its trials in order and the best-so-far curve."""
    import optuna

    trials = sorted(study.get_trials(deepcopy=False), key=lambda t: t.number)
    times = [w for w in (_when(t) for t in trials) if w is not None]
    start = min(times) if times else None
    rows, curve = [], []
    best = None
    for t in trials:
        when = _when(t)
        elapsed = (when - start).total_seconds() if when is not None and start is not None else None
        if elapsed is None:  # a trial added without timestamps: place it with the one before
            elapsed = curve[-1]["elapsed_s"] if curve else 0.0
        kind = t.user_attrs.get("baseline") or "search"
        state = t.state.name.lower()
        value = t.value if t.state == optuna.trial.TrialState.COMPLETE else None
        if value is not None and (best is None or value < best):
            best = value
        rows.append({"number": t.number, "kind": kind, "state": state, "value_ms": value,
                     "status": t.user_attrs.get("status"), "elapsed_s": elapsed})
        curve.append({"trial": t.number, "elapsed_s": elapsed, "best_ms": best})
    parts = study.study_name.split("|")
    baseline_best = min((r["value_ms"] for r in rows if r["kind"] != "search" and r["value_ms"] is not None),
                        default=None)
    search_best = min((r["value_ms"] for r in rows if r["kind"] == "search" and r["value_ms"] is not None),
                      default=None)
    outcome = study.user_attrs.get("outcome")
    return {"study": study.study_name, "op": parts[0], "shape": parts[2] if len(parts) > 2 else "",
            "trials": rows, "curve": curve, "best_ms": best, "best_baseline_ms": baseline_best,
            "best_search_ms": search_best,
            "outcome": outcome if isinstance(outcome, dict) else None,
            "n_trials": len(rows),
            "n_failed": sum(1 for r in rows if r["state"] == "fail"),
            "wall_s": curve[-1]["elapsed_s"] if curve else None}


def histories(storage: str, match: Iterable[str] = ()) -> list[dict[str, Any]]:
    """Histories of the studies in ``storage`` whose name contains any of ``match`` (all if none)."""
    import os

    import optuna

    from pypto.errors import ParamError

    from .storage import opening, storage_url

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    url = storage_url(storage)
    if url.startswith("sqlite:///") and not os.path.isfile(url[len("sqlite:///"):]):
        raise ParamError(f"no tuning study database at {url[len('sqlite:///'):]}; `pypto tune` writes "
                         "pypto_tune.db in the folder it runs in (or where --storage says)")
    match = [m for m in match if m]

    def read():
        out = []
        for s in optuna.get_all_study_summaries(url, include_best_trial=False):
            if match and not any(m in s.study_name for m in match):
                continue
            if list(s.directions) != [optuna.study.StudyDirection.MINIMIZE]:
                continue   # not a tuner's study (another tool's, in the same storage): no times
            out.append(study_history(optuna.load_study(study_name=s.study_name, storage=url)))
        return out

    return opening(url, read)
