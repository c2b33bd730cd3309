"""``pypto study``: how tuning runs converged, from the Optuna studies the tuner wrote."""

from __future__ import annotations

import json

import click


@click.command()
@click.argument("match", nargs=-1)
@click.option("--storage", default="pypto_tune.db", show_default=True,
              help="Optuna storage the tuner wrote (sqlite file or database URL).")
@click.option("--plot", default=None, type=click.Path(dir_okay=False),
              help="Convergence chart (PNG): best found against trials and wall time.")
@click.option("--json", "json_out", default=None, type=click.Path(dir_okay=False),
              help="Write the histories as JSON.")
@click.option("--from-json", "from_json", default=None, type=click.Path(exists=True, dir_okay=False),
              help="Read histories written by --json instead of a study database.")
def study(match, storage, plot, json_out, from_json):
    """Best time found against trials and wall time, for studies whose name contains MATCH."""
    if from_json:
        with open(from_json) as f:
            hist = json.load(f)
        hist = [h for h in hist if not match or any(m in h["study"] for m in match)]
    else:
        try:
            from autotune.history import histories
        except ImportError as e:
            raise click.ClickException(f"reading studies needs the tuner's dependencies ({e})") from None
        hist = histories(storage, match)
    if not hist:
        raise click.ClickException("no study matched" + (f" {' '.join(match)!r}" if match else ""))
    click.echo(f"{'study':<48} {'trials':>6} {'failed':>6} {'best baseline ms':>16} {'best ms':>9} "
               f"{'gain':>6} {'wall':>8}  trials to reach 95% of the gain")
    for h in hist:
        base, best = h["best_baseline_ms"], h["best_ms"]
        gain = base / best if base and best else None
        reach = _reach(h, 0.95)
        wall = f"{h['wall_s'] / 60:.1f} min" if h.get("wall_s") is not None else "-"
        name = f"{h['op']} {h['shape']}"[:48]
        click.echo(f"{name:<48} {h['n_trials']:>6} {h['n_failed']:>6} {_f(base):>16} {_f(best):>9} "
                   f"{(f'{gain:.2f}x' if gain else '-'):>6} {wall:>8}  {reach if reach is not None else '-'}")
    if json_out:
        with open(json_out, "w") as f:
            json.dump(hist, f, indent=1, sort_keys=True)
        click.echo(f"wrote {json_out}", err=True)
    if plot:
        from ..bench.plots import plot_convergence

        click.echo(f"wrote {plot_convergence(hist, plot)}", err=True)


def _f(v) -> str:
    return "-" if v is None else f"{v:.3f}"


def _reach(h, frac: float):
    """The first trial whose best-so-far holds ``frac`` of the run's total improvement."""
    base, best = h["best_baseline_ms"], h["best_ms"]
    if not base or not best or best >= base:
        return None
    goal = base - frac * (base - best)
    for c in h["curve"]:
        if c["best_ms"] is not None and c["best_ms"] <= goal:
            return c["trial"]
    return None
