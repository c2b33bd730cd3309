"""The timing protocol shared by the tuner and the benchmarks.

Candidates are measured side by side: after a warm-up, rounds run every candidate once in turn
(A B C A B C ...), in a rotating order so that none always follows the same neighbour, until the
spread of each candidate's samples is small or the round cap is hit. The median is reported with the
spread (relative inter-quartile range), so ratios between candidates come from the same minutes of
the same machine.
"""

from __future__ import annotations

import dataclasses
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
