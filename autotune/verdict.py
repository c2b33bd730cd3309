"""The end of a tuning run: does the fastest schedule earn its place in the database, and the write.

The rule. A winner is stored only when it beats each rival, the entry already stored for the key
and the default schedule, by more than the measured spread. Each timing gives an interval, its
median plus or minus half its inter-quartile range (never narrower than ``NOISE_FLOOR`` either
side); the winner's interval must end below each rival's. When they overlap, the winner and its
rivals are measured again side by side with more rounds, up to ``REMEASURES`` times. Intervals
that still overlap keep the incumbent: the stored entry stays, or, with none, nothing is stored and
calls keep what they get today. A 1.01x "win" at a 12% spread is noise, not a result.

The write goes through the database's locked read-modify-write, so a concurrent writer's entries
are never lost (see ``pypto.database.store``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping

from pypto.database import Entry
from pypto.database.store import Database, LoadResult, better

#: Each interval is at least this wide either side of its median (1%), so that a spread measured
#: as zero (few samples, a coarse clock) cannot make a 0.1% difference look certain.
NOISE_FLOOR = 0.01
#: Extra side-by-side measurements, each with twice the rounds of the one before.
REMEASURES = 2


@dataclasses.dataclass
class Verdict:
    """Whether to store the winner, and one line saying which rule decided."""

    store: bool
    rule: str
    remeasured: int = 0


def interval(t: Mapping) -> tuple[float, float]:
    """(low, high) of a timing (``median_ms``, ``spread`` as the IQR over the median)."""
    half = max(float(t.get("spread") or 0.0) / 2, NOISE_FLOOR) * t["median_ms"]
    return t["median_ms"] - half, t["median_ms"] + half


def separated(fast: Mapping, slow: Mapping) -> bool:
    """Whether ``fast`` is faster than ``slow`` by more than their spreads."""
    return interval(fast)[1] < interval(slow)[0]


def _show(name: str, t: Mapping) -> str:
    return f"{name} {t['median_ms']:.3f} ms ±{float(t.get('spread') or 0.0) * 100:.1f}%"


def timing_for(attempt: int) -> dict:
    """The side-by-side protocol of re-measurement ``attempt`` (1, 2, ...): more rounds each time."""
    k = 2 ** attempt
    return {"min_rounds": 7 * k, "max_rounds": 31 * k, "target_spread": 0.02, "budget_s": 60.0 * k}


def decide(table: Mapping[str, Mapping], winner: str, rivals: list[str],
           remeasure: Callable[[list[str], int], Mapping | None]) -> Verdict:
    """Applies the rule of this module to ``winner`` against ``rivals`` (names in ``table``).

    ``remeasure(names, attempt)`` times ``names`` side by side again and returns their timings
    (None or missing names when it could not). ``table`` itself is left as measured.
    """
    rivals = [r for r in rivals if r in table and r != winner]
    if not rivals:
        return Verdict(True, f"{winner}: no stored entry and no default timing to beat; stored")
    now = {n: table[n] for n in (winner, *rivals)}
    attempt = 0
    while True:
        close = [r for r in rivals if not separated(now[winner], now[r])]
        if not close:
            after = f" (after {attempt} re-measurement{'s' * (attempt > 1)})" if attempt else ""
            beaten = ", ".join(_show(r, now[r]) for r in rivals)
            return Verdict(True, f"{_show(winner, now[winner])} beats {beaten} by more than the "
                                 f"measured spread{after}", attempt)
        if attempt == REMEASURES or any(now[r]["median_ms"] <= now[winner]["median_ms"] for r in close):
            break
        attempt += 1
        new = remeasure([winner, *rivals], attempt) or {}
        if any(n not in new for n in now):
            break
        now = {n: new[n] for n in now}
    kept = "the stored entry is kept" if "stored" in rivals else "nothing stored"
    others = ", ".join(_show(r, now[r]) for r in close)
    return Verdict(False, f"{_show(winner, now[winner])} is within the measured spread of {others} "
                          f"after {attempt} re-measurement{'s' * (attempt != 1)}; {kept}", attempt)


def store_winner(db: Database, entry: Entry, measured: Entry | None) -> Entry | None:
    """Writes ``entry`` over its key's entry inside the database's locked read-modify-write.

    ``measured`` is the stored entry the winner was measured against (None: there was none). If
    another writer stored a different, faster-recorded entry for the key while this run measured,
    that one is kept and returned; otherwise returns None. Other keys' entries are never touched.
    """
    other: list[Entry] = []

    def replace(current: LoadResult):
        now = next((e for e in current.entries if e.key == entry.key), None)
        changed = now is not None and (measured is None or now.schedule.hash != measured.schedule.hash)
        if changed and better(now, entry) is now:
            other.append(now)
            return None
        return [e for e in current.entries if e.key != entry.key] + [entry]

    db.update(entry.key.op, entry.key.family, replace)
    return other[0] if other else None
