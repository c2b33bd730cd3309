"""The timing protocol shared by the tuner and the benchmarks.

Candidates are measured side by side: after a warm-up, rounds run every candidate once in turn
(A B C A B C ...), in a rotating order so that none always follows the same neighbour, until the
spread of each candidate's samples is small or the round cap is hit. The median is reported with the
spread (relative inter-quartile range), so ratios between candidates come from the same minutes of
the same machine.

:func:`compare` is the older form (one batched figure per candidate); :func:`measure` is the fair
protocol of the project (DESIGN.md, "Measurement protocol"): a pause and an untimed call of the
same candidate before its turn, and two figures, a single call and the steady state of a block of
back-to-back calls.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
import time
from collections.abc import Callable, Mapping


@dataclasses.dataclass
class Timing:
    """Samples of one candidate, in milliseconds."""

    samples: list[float]

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    @property
    def spread(self) -> float:
        """Inter-quartile range over the median (0.05 = 5%)."""
        if len(self.samples) < 4:
            return (max(self.samples) - min(self.samples)) / self.median if self.median else 0.0
        q = statistics.quantiles(self.samples, n=4)
        return (q[2] - q[0]) / self.median if self.median else 0.0

    @property
    def min(self) -> float:
        return min(self.samples)

    def to_json(self) -> dict:
        return {"median_ms": self.median, "min_ms": self.min, "spread": self.spread,
                "n": len(self.samples)}


def _once(fn: Callable[[], object], inner: int) -> float:
    t0 = time.perf_counter()
    for _ in range(inner):
        fn()
    return (time.perf_counter() - t0) * 1000.0 / inner


def compare(fns: Mapping[str, Callable[[], object]], *, min_rounds: int = 5, max_rounds: int = 25,
            target_spread: float = 0.05, budget_s: float = 20.0, warmup: int = 2,
            min_sample_ms: float = 2.0, pause_s: float = 0.0) -> dict[str, Timing]:
    """Times every callable interleaved; returns name -> Timing (milliseconds per call).

    Calls faster than ``min_sample_ms`` are batched so that each sample lasts at least that long.
    With ``pause_s`` > 0 each sample follows a pause of that long and one untimed call of the same
    candidate: OpenBLAS and OpenMP threads spin about 0.1 s after a call and would slow whichever
    candidate ran next (the fair protocol; use 0.3 s or more for peers that use thread pools).
    """
    names = list(fns)
    inner: dict[str, int] = {}
    for n in names:
        for _ in range(warmup):
            fns[n]()
        t = _once(fns[n], 1)
        inner[n] = max(1, min(1000, int(min_sample_ms / max(t, 1e-6)) + 1)) if t < min_sample_ms else 1
    samples: dict[str, list[float]] = {n: [] for n in names}
    start = time.perf_counter()
    for r in range(max_rounds):
        order = names[r % len(names):] + names[:r % len(names)]
        for n in order:
            if pause_s > 0:
                time.sleep(pause_s)
                fns[n]()
            samples[n].append(_once(fns[n], inner[n]))
        if r + 1 >= min_rounds:
            done = all(Timing(samples[n]).spread <= target_spread for n in names)
            if done or time.perf_counter() - start > budget_s:
                break
    return {n: Timing(s) for n, s in samples.items()}


# -- the fair protocol: single calls and steady state ------------------------------------------

#: What the two figures of :func:`measure` are, in words (reports quote this).
PROTOCOL = ("before each candidate's turn: a pause of {pause_s:g} s (only where the library "
            "changes, when groups are given), then one untimed call of the same candidate; then "
            "'single' times the next call alone and 'steady' the mean of a block of back-to-back "
            "calls that follows it; the order rotates each round; medians over rounds, spread = "
            "IQR / median")


@dataclasses.dataclass
class Fair:
    """One candidate under the fair protocol, in milliseconds per call.

    ``single``: one call, timed right after an untimed call of the same candidate that itself
    followed a pause (what one call in a program meets). ``steady``: the mean call of a block of
    ``calls`` back-to-back calls right after it (what a loop of calls gets); one sample a round.
    """

    single: Timing
    steady: Timing
    calls: int

    def to_json(self) -> dict:
        return {"single": self.single.to_json(), "steady": {**self.steady.to_json(), "calls": self.calls}}


def _block_calls(first_ms: float, block_calls: int, min_block_ms: float, max_block_ms: float) -> int:
    """Calls per steady block: at least ``block_calls`` and enough to last ``min_block_ms``, but
    no more than fit in ``max_block_ms`` (a 100 ms kernel is not called 15 times a round)."""
    t = max(first_ms, 1e-6)
    want = max(block_calls, math.ceil(min_block_ms / t))
    return max(1, min(want, int(max_block_ms / t), 10000))


def measure(fns: Mapping[str, Callable[[], object]], *, pause_s: float = 0.3, min_rounds: int = 5,
            max_rounds: int = 25, target_spread: float = 0.05, budget_s: float = 20.0,
            warmup: int = 1, block_calls: int = 5, min_block_ms: float = 2.0,
            max_block_ms: float = 300.0, groups: Mapping[str, str] | None = None,
            clock: Callable[[], float] = time.perf_counter,
            sleep: Callable[[float], None] = time.sleep) -> dict[str, Fair]:
    """Times every callable with the fair protocol; returns name -> :class:`Fair`.

    Each round visits the candidates in a rotated order (round r starts at the r-th). Before a
    candidate's turn comes a pause of ``pause_s`` (OpenBLAS and OpenMP threads spin about 0.1 s
    after a call and would slow whoever runs next) and one untimed call of the same candidate, so
    that its own pools and caches are as a repeated call finds them. Then one call is timed alone
    (``single``) and a block of back-to-back calls (``steady``). With ``groups`` (name -> library)
    the pause is taken only where the library changes from the candidate run just before: one
    library's candidates share its thread pool and cannot slow each other that way. Rounds go on
    until both figures of every candidate have a spread of at most ``target_spread`` (after
    ``min_rounds``), ``max_rounds``, or ``budget_s`` seconds. ``clock`` and ``sleep`` are there
    for tests.
    """
    names = list(fns)
    calls: dict[str, int] = {}
    for n in names:
        for _ in range(warmup):
            fns[n]()
        t0 = clock()
        fns[n]()
        calls[n] = _block_calls((clock() - t0) * 1000.0, block_calls, min_block_ms, max_block_ms)
    single: dict[str, list[float]] = {n: [] for n in names}
    steady: dict[str, list[float]] = {n: [] for n in names}
    last: object = object()  # no library ran before the first turn as far as we know
    start = clock()
    for r in range(max_rounds):
        k = r % len(names) if names else 0
        for n in names[k:] + names[:k]:
            group = groups.get(n, n) if groups is not None else None
            if pause_s > 0 and (groups is None or group != last):
                sleep(pause_s)
            fns[n]()                      # untimed: the same candidate, just before
            t0 = clock()
            fns[n]()
            t1 = clock()
            for _ in range(calls[n]):
                fns[n]()
            t2 = clock()
            single[n].append((t1 - t0) * 1000.0)
            steady[n].append((t2 - t1) * 1000.0 / calls[n])
            last = group
        if r + 1 >= min_rounds:
            done = all(Timing(single[n]).spread <= target_spread and Timing(steady[n]).spread <= target_spread
                       for n in names)
            if done or clock() - start > budget_s:
                break
    return {n: Fair(Timing(single[n]), Timing(steady[n]), calls[n]) for n in names}
