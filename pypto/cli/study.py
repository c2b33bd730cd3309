"""``pypto study``: how tuning runs converged, from the Optuna studies the tuner wrote."""

from __future__ import annotations

import json

import click

from ..errors import PyptoError
from .common import nonempty, writable_file


@click.command()
@click.argument("match", nargs=-1)
@click.option("--storage", default="pypto_tune.db", show_default=True, callback=nonempty,
              help="Optuna storage the tuner wrote (sqlite file or database URL).")
@click.option("--plot", default=None, type=click.Path(dir_okay=False), callback=writable_file,
              help="Convergence chart (PNG): best found against trials and wall time.")
@click.option("--json", "json_out", default=None, type=click.Path(dir_okay=False),
              callback=writable_file, help="Write the histories as JSON.")
@click.option("--from-json", "from_json", default=None, type=click.Path(exists=True, dir_okay=False),
              help="Read histories written by --json instead of a study database.")
def study(match, storage, plot, json_out, from_json):
    """Best time found against trials and wall time, for studies whose name contains MATCH."""
    if from_json:
        hist = [h for h in read_histories(from_json)
                if not match or any(m in h["study"] for m in match)]
    else:
        try:
            from autotune.history import histories
        except ImportError as e:
            raise click.ClickException(f"reading studies needs the tuner's dependencies ({e})") from None
        hist = histories(storage, match)
    if not hist:
        raise click.ClickException("no study matched" + (f" {' '.join(match)!r}" if match else ""))
    click.echo(f"{'study':<48} {'trials':>6} {'failed':>6} {'best baseline ms':>16} {'best ms':>9} "
               f"{'gain':>6} {'wall':>8}  {'reach 95%':>9}  outcome")
    for h in hist:
        base, best = h["best_baseline_ms"], h["best_ms"]
        gain = _gain(h)
        reach = _reach(h, 0.95) if gain else None
        wall = f"{h['wall_s'] / 60:.1f} min" if h.get("wall_s") is not None else "-"
        name = f"{h['op']} {h['shape']}"[:48]
        shown = f"{gain:.2f}x" if gain else ("none" if base and best else "-")
        click.echo(f"{name:<48} {h['n_trials']:>6} {h['n_failed']:>6} {_f(base):>16} {_f(best):>9} "
                   f"{shown:>6} {wall:>8}  {reach if reach is not None else '-':>9}  {_outcome(h)}")
    if json_out:
        with open(json_out, "w") as f:
            json.dump(hist, f, indent=1, sort_keys=True)
        click.echo(f"wrote {json_out}", err=True)
    if plot:
        from ..bench.plots import plot_convergence

        click.echo(f"wrote {plot_convergence(hist, plot)}", err=True)


#: What ``--from-json`` needs of each history (as ``--json`` writes them), by type.
_FIELDS = {"study": str, "op": str, "shape": str, "n_trials": int, "n_failed": int,
           "best_ms": (int, float, type(None)), "best_baseline_ms": (int, float, type(None)),
           "wall_s": (int, float, type(None)), "curve": list}


def read_histories(path: str) -> list[dict]:
    """Histories written by ``pypto study --json``, checked: a file that is not one is a
    ParamError naming the file, the history and the field (never a KeyError or TypeError)."""
    from ..errors import ParamError
    from ..infra.jsonio import strict_loads

    try:
        with open(path, "rb") as f:
            doc = strict_loads(f.read(), path)
    except OSError as e:
        raise ParamError(f"{path}: cannot be read ({e.strerror})") from None
    except PyptoError as e:
        raise ParamError(f"{e}; --from-json reads a file written by `pypto study --json`") from None
    if not isinstance(doc, list):
        raise ParamError(f"{path}: expected a list of study histories (as `pypto study --json` "
                         f"writes), got a JSON {type(doc).__name__}")
    for i, h in enumerate(doc):
        if not isinstance(h, dict):
            raise ParamError(f"{path}: history #{i} is not an object")
        for name, kind in _FIELDS.items():
            v = h.get(name)
            if name not in h or isinstance(v, bool) or not isinstance(v, kind):
                raise ParamError(f"{path}: history #{i} has no valid {name!r} (got {v!r}); "
                                 "--from-json reads a file written by `pypto study --json`")
        for j, c in enumerate(h["curve"]):
            if (not isinstance(c, dict) or not isinstance(c.get("trial"), int)
                    or not isinstance(c.get("elapsed_s"), (int, float))
                    or not isinstance(c.get("best_ms"), (int, float, type(None)))):
                raise ParamError(f"{path}: history #{i}, curve point #{j} needs 'trial' (int), "
                                 "'elapsed_s' (number) and 'best_ms' (number or null)")
    return doc


def _f(v) -> str:
    return "-" if v is None else f"{v:.3f}"


def _gain(h) -> float | None:
    """The search's gain over the best baseline, or None when it found none. A study whose final
    side-by-side run kept a baseline (the default, an autoscheduler) or stored nothing gained
    nothing, whatever the single-shot search timings said."""
    base = h["best_baseline_ms"]
    search = h.get("best_search_ms", h["best_ms"])
    if not base or not search or search >= base:
        return None
    out = h.get("outcome")
    if isinstance(out, dict) and not (str(out.get("winner", "")).startswith("tuned")
                                      and out.get("stored")):
        return None
    return base / search


def _outcome(h) -> str:
    """What the tuner's final side-by-side run did (recorded by the tuner; '-' for an older or an
    unfinished study)."""
    out = h.get("outcome")
    if not isinstance(out, dict):
        return "-"
    winner = str(out.get("winner", "?"))
    if out.get("stored"):
        return f"{winner} stored"
    if winner == "default":
        return "default kept (no gain)"
    if winner == "stored":
        return "stored entry kept"
    return f"{winner} fastest, not stored"


def _reach(h, frac: float):
    """The first trial whose best-so-far holds ``frac`` of the run's total improvement."""
    base, best = h["best_baseline_ms"], h.get("best_search_ms", h["best_ms"])
    if not base or not best or best >= base:
        return None
    goal = base - frac * (base - best)
    for c in h["curve"]:
        if c["best_ms"] is not None and c["best_ms"] <= goal:
            return c["trial"]
    return None
