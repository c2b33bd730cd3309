"""Charts of benchmark reports and tuning histories, written as PNG files (matplotlib, Agg).

matplotlib is imported only here and only when a chart is asked for; it comes with the ``bench``
and ``test`` extras. Every chart names the machine and date it was measured on.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import ParamError

SERIES = (("pypto", "PyPTO", "#1f77b4"), ("torch", "PyTorch eager", "#ff7f0e"),
          ("torch-compile", "torch.compile", "#d62728"), ("halide", "best Halide autoscheduler", "#2ca02c"))
AUTOS = ("adams2019", "mullapudi2016", "li2018")


def _plt():
    try:
        import matplotlib
    except ImportError:
        raise ParamError("charts need matplotlib: pip install 'pypto-halide[bench]'") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _subtitle(machine: Mapping[str, Any]) -> str:
    return f"{machine.get('cpu', '?')}, {machine.get('cores', '?')} cores; {str(machine.get('date', ''))[:10]}"


def _ms_of(item: Mapping[str, Any], series: str) -> float | None:
    res = item["results"]
    if series == "halide":
        vals = [res[a]["median_ms"] for a in AUTOS if a in res]
        return min(vals) if vals else None
    return res[series]["median_ms"] if series in res else None


def plot_speedups(report: Mapping[str, Any], path: str, *, groups: Sequence[str] = ("suite", "given")) -> str:
    """Bar chart: speedup over NumPy (NumPy time / time) of PyPTO and each peer, per suite item."""
    plt = _plt()
    items = [it for it in report["items"] if it["group"] in groups and "numpy" in it["results"]]
    if not items:
        raise ParamError("no measured item has a NumPy time to compare with (use --compare numpy)")
    series = [(k, name, col) for k, name, col in SERIES if any(_ms_of(it, k) for it in items)]
    fig, ax = plt.subplots(figsize=(max(8.0, 1.1 * len(items) + 3), 5.2))
    width = 0.8 / len(series)
    for s, (key, name, col) in enumerate(series):
        xs, ys = [], []
        for i, it in enumerate(items):
            ms = _ms_of(it, key)
            if ms:
                xs.append(i + (s - (len(series) - 1) / 2) * width)
                ys.append(it["results"]["numpy"]["median_ms"] / ms)
        bars = ax.bar(xs, ys, width, label=name, color=col)
        if key == "pypto":
            for b, y in zip(bars, ys):
                ax.annotate(f"{y:.1f}x", (b.get_x() + b.get_width() / 2, y), ha="center", va="bottom",
                            fontsize=7)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_yscale("log")
    ax.set_ylabel("speedup over NumPy (log scale; above 1 = faster)")
    ax.set_xticks(range(len(items)))
    ax.set_xticklabels([f"{it['op']}\n{_short(it['shape'])}" for it in items], fontsize=7, rotation=30,
                       ha="right")
    ax.set_title(f"Side by side, fair protocol (pause, warm call, rotating order)\n{_subtitle(report['machine'])}", fontsize=10)
    ax.legend(fontsize=8)
    ax.grid(axis="y", which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def _short(shape: str) -> str:
    parts = shape.split(",")
    return ",".join(parts[:4]) + ("..." if len(parts) > 4 else "")


def plot_convergence(histories: Sequence[Mapping[str, Any]], path: str, *, title: str = "") -> str:
    """Best time found (relative to the best baseline) against trial number and wall time."""
    plt = _plt()
    usable = [h for h in histories if h.get("best_baseline_ms") and h["curve"]]
    if not usable:
        raise ParamError("no study with a measured baseline to plot")
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(12, 4.8), sharey=True)
    for h in usable:
        base = h["best_baseline_ms"]
        pts = [(c["trial"], c["elapsed_s"], base / c["best_ms"]) for c in h["curve"] if c["best_ms"]]
        label = f"{h['op']} {_short(h['shape'])}"
        a1.step([p[0] for p in pts], [p[2] for p in pts], where="post", label=label)
        a2.step([max(p[1], 1.0) for p in pts], [p[2] for p in pts], where="post", label=label)
    a1.set_xlabel("trial (baselines first)")
    a2.set_xlabel("wall time since the first trial (seconds, log scale)")
    a2.set_xscale("log")
    a1.set_ylabel("speedup of best found over best baseline")
    for a in (a1, a2):
        a.grid(alpha=0.3)
        a.axhline(1.0, color="black", linewidth=0.8)
    a2.legend(fontsize=7, loc="lower right")
    fig.suptitle(title or "Tuner convergence (baselines: default schedule, Adams2019, Mullapudi2016, Li2018)",
                 fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
