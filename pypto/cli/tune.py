"""``pypto tune``: search schedules for an op and shape with Optuna; store the winner.

The tuner lives in the ``autotune`` package; it is imported only when this command runs, so
``import pypto`` never loads Optuna.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import click

from ..errors import ParamError
from .common import dtype_option, nonempty, param_option, parse_params, target_option, writable_file


def parse_duration(text: str | None) -> float | None:
    """``"90"``, ``"90s"``, ``"15m"``, ``"1h"`` -> seconds."""
    if text is None:
        return None
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smh]?)\s*", text)
    if not m:
        raise ParamError(f"--timeout {text!r}: use a number of seconds or e.g. 90s, 15m, 1h")
    secs = float(m.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600}[m.group(2)]
    if secs <= 0:
        # A budget of nothing ran no search and stored the default schedule as if tuned.
        raise ParamError(f"--timeout {text!r}: a budget must be more than zero; give e.g. 90s, "
                         "15m or 1h, or leave --timeout out to be bounded by --trials only")
    return secs


def _positive_trials(ctx, param, value):
    if value is not None and value < 1:
        raise click.BadParameter(f"{value} trials is no search; give at least 1 (default 50)")
    return value


def read_suite(path: str) -> list[dict]:
    """A suite file: JSON list of {"op", "shape", "dtype"?, "params"?} (``shape`` as "M=1,N=2").

    A suite is data: its ``op`` must name a registered (built-in) op. Unlike OP on the command
    line, it cannot name ``file.py:NAME`` or ``package.module:NAME``, because loading those runs
    their code, and a suite file is easily shared, downloaded or left writable by others.
    """
    from ..infra.jsonio import strict_loads

    with open(path, "rb") as f:
        doc = strict_loads(f.read(), path)
    items = doc.get("ops") if isinstance(doc, dict) else doc
    if not isinstance(items, list):
        raise ParamError(f"{path}: a suite is a list of {{op, shape}} objects (or {{\"ops\": [...]}})")
    for i, it in enumerate(items):
        if not isinstance(it, dict) or "op" not in it or "shape" not in it:
            raise ParamError(f"{path}: item #{i} needs 'op' and 'shape'")
        _check_item_fields(it, f"{path}: item #{i}")
        _check_registered(it["op"], f"{path}: item #{i}")
    return items


def _check_item_fields(it: dict, where: str) -> None:
    """A suite item's fields have the types the command line would give them."""
    extra = sorted(set(it) - {"op", "shape", "dtype", "params"})
    if extra:
        raise ParamError(f"{where}: unknown field(s) {extra}; an item has op, shape, dtype and "
                         "params")
    if not isinstance(it["shape"], str):
        raise ParamError(f"{where}: 'shape' must be a string such as \"M=1024,N=1024\", "
                         f"got {it['shape']!r}")
    if it.get("dtype") is not None and not isinstance(it["dtype"], str):
        raise ParamError(f"{where}: 'dtype' must be a string such as \"float32\" (or "
                         f"\"float32,int32\", one per input), got {it['dtype']!r}")
    ps = it.get("params", {})
    if ps is not None and not isinstance(ps, dict):
        raise ParamError(f"{where}: 'params' must be an object of NAME: value, got {ps!r}")
    for k, v in (ps or {}).items():
        if not isinstance(v, (bool, int, float, str)):
            raise ParamError(f"{where}: parameter {k!r} must be a number, string or true/false, "
                             f"got {v!r}")


def _check_registered(name, where: str) -> None:
    """Refuses a suite op that is not a registered op name (without importing anything)."""
    from ..errors import UnknownOpError
    from ..ops import get_op

    why = "it names a file or module" if isinstance(name, str) and ":" in name else "unknown op"
    try:
        if isinstance(name, str) and ":" not in name:
            get_op(name)
            return
    except UnknownOpError:
        pass
    raise ParamError(f"{where}: op {name!r} is not a registered op ({why}). A suite lists "
                     "registered ops only, so that reading it never runs code; tune an op of your "
                     "own with `pypto tune FILE.py:NAME --shape ...` (`pypto ops` lists the "
                     "registered ones)")


@click.command()
@click.argument("op_name", required=False)
@click.option("--shape", "shapes", multiple=True, help="Named dims, e.g. M=1024,N=1024,K=1024 (repeatable).")
@dtype_option
@param_option
@target_option
@click.option("--trials", default=50, show_default=True, type=int, callback=_positive_trials,
              help="Search trials per shape (baselines extra).")
@click.option("--timeout", default=None, help="Wall-clock budget per shape: 90s, 15m, 1h.")
@click.option("--storage", default=None, callback=nonempty,
              help="Optuna storage URL (default: sqlite file pypto_tune.db here).")
@click.option("--db", "db_dir", default=None, type=click.Path(), callback=nonempty,
              help="Schedule database folder that receives winners [default: the user database, "
                   "$PYPTO_USER_SCHEDULES or ${XDG_DATA_HOME:-~/.local/share}/pypto/schedules, "
                   "which every later call reads].")
@click.option("--sampler", default="tpe", show_default=True, type=click.Choice(["tpe", "cmaes", "gp", "random"]))
@click.option("--seed", default=0, show_default=True, type=int)
@click.option("--n-jobs", default=1, show_default=True, type=click.IntRange(min=1),
              help="Tuner processes on this study (they compile in parallel, measure one at a time).")
@click.option("--suite", default=None, type=click.Path(exists=True, dir_okay=False),
              help="JSON list of registered ops and shapes (no op files: a suite runs no code).")
@click.option("--baselines", default="default,adams2019,mullapudi2016,li2018", show_default=True,
              help="Schedules measured first (comma list; 'none' for no autoschedulers).")
@click.option("--no-write", is_flag=True, help="Do not write the database.")
@click.option("--no-progress", is_flag=True, help="No progress bar.")
@click.option("--json", "json_out", default=None, type=click.Path(), callback=writable_file,
              help="Write results as JSON.")
@click.option("--grad", is_flag=True,
              help="Tune OP's backward: the program pypto.torch.op(OP) runs in backward (the op's "
                   "public call on arrays of --shape, then the gradients of its float inputs).")
@click.option("--worker-only", is_flag=True, hidden=True)
def tune(op_name, shapes, dtype, params, target, trials, timeout, storage, db_dir, sampler, seed,
         n_jobs, suite, baselines, no_write, no_progress, json_out, grad, worker_only):
    """Tune OP (a built-in op, path/file.py:NAME or package.module:NAME) for one or more shapes."""
    from ..infra.inputs import parse_shape

    secs = parse_duration(timeout)      # before anything runs or is written
    try:
        from autotune.tuner import TuneConfig, Tuner, format_table
    except ImportError as e:
        raise click.ClickException(f"the tuner needs its dependencies ({e}); reinstall PyPTO") from None

    if suite:
        jobs = [(it["op"], parse_shape(it["shape"]), it.get("dtype"), it.get("params") or {})
                for it in read_suite(suite)]
    elif op_name and shapes:
        jobs = [(op_name, parse_shape(s), dtype, parse_params(params)) for s in shapes]
    elif op_name:
        from ..ops._load import resolve_op

        op = resolve_op(op_name)
        if not op.example:
            raise click.UsageError(f"give --shape with {', '.join(op.input_dims)}")
        click.echo(f"no --shape given: tuning {op.name} at its example shape "
                   f"{','.join(f'{k}={v}' for k, v in op.example.items())}")
        jobs = [(op_name, dict(op.example), dtype, parse_params(params))]
    else:
        raise click.UsageError("give OP (with --shape) or --suite FILE")
    base = tuple(b.strip() for b in baselines.split(",") if b.strip() and b.strip() != "none")
    from autotune.tuner import AUTOSCHEDULERS

    known = ("default", "unfused") + tuple(AUTOSCHEDULERS)
    unknown = [b for b in base if b not in known]
    if unknown:
        raise click.BadParameter(f"unknown baseline(s) {', '.join(map(repr, unknown))}; choose "
                                 f"from {', '.join(known)}, or 'none'", param_hint="--baselines")
    if grad:
        jobs = [_grad_job(*job) for job in jobs]
        base = tuple(b for b in base if b in ("default", "unfused")) + (
            ("unfused",) if "unfused" not in base else ())
    db_dir = db_dir or default_db()
    if not no_write and not worker_only:
        from ..database.store import check_writable

        check_writable(db_dir)  # before the run, not after it: the winner is written at the end
    results = []
    for spec, shape, dt, ps in jobs:
        dts = dt if isinstance(dt, tuple) else _dtypes(spec, dt)
        cfg = TuneConfig(op=spec, shape=shape, dtypes=dts, params=ps, target=target,
                         trials=trials, timeout_s=secs, storage=storage, db=db_dir, sampler=sampler,
                         seed=seed, baselines=base, write_db=not no_write,
                         progress=not no_progress and not worker_only)
        tuner = Tuner(cfg, say=(lambda s: None) if worker_only else click.echo)
        if worker_only:
            tuner.run_search_only()
            continue
        if not no_write:
            _check_file_takes_a_winner(db_dir, tuner.op.name, tuner.family)
        click.echo(click.style(f"\n== {tuner.name.split('|')[0]} {tuner.name.split('|')[2]} "
                               f"({'/'.join(tuner.dtypes)}, {tuner.family})", bold=True))
        helpers = _spawn_helpers(n_jobs, spec, shape, dt, ps, cfg)
        try:
            res = tuner.run()
        except KeyboardInterrupt:
            click.echo(f"\ninterrupted: every finished trial is saved in study {tuner.name!r} "
                       f"({tuner.storage_url}); run the same command again to resume",
                       err=True)
            sys.exit(130)
        finally:
            for p in helpers:
                p.wait()
        click.echo(format_table(res))
        t = res.table
        if "default" in t:
            sp = t["default"]["median_ms"] / t[res.winner]["median_ms"]
            autos = [t[a]["median_ms"] for a in ("adams2019", "mullapudi2016", "li2018") if a in t]
            line = f"speedup over the default schedule: {sp:.2f}x"
            if autos:
                line += f"; over the best autoscheduler: {min(autos) / t[res.winner]['median_ms']:.2f}x"
            click.echo(line)
        click.echo(f"{res.trials} trials ({res.failures} failed) in study {res.study_name!r}; {res.message}")
        results.append({"study": res.study_name, "table": res.table, "winner": res.winner,
                        "written": res.written, "schedule": res.winner_schedule.to_json()})
    if json_out:
        with open(json_out, "w") as f:
            json.dump(results, f, indent=1, sort_keys=True)


def _grad_job(spec, shape, dt, ps):
    """(graph spec, its shape, dtypes, params) of the backward program of op ``spec``."""
    from ..autodiff.api import backward_program
    from ..frontend import serial
    from ..ops._load import resolve_op

    op = resolve_op(spec)
    dtypes = _dtypes(spec, dt) or op.dtypes[0]
    missing = [d for d in op.input_dims if d not in shape]
    if missing:
        raise click.UsageError(f"--grad: give every input dim of {op.name} in --shape "
                               f"(missing {', '.join(missing)})")
    g = backward_program(op, shape, dtypes, ps)
    click.echo(f"{op.name} backward at {','.join(f'{k}={v}' for k, v in shape.items())}: "
               f"program {g.name} ({len(g.graph.nodes)} nodes)")
    return (serial.save(g.graph, name=g.name), {d: g.call_dims[d] for d in g.input_dims},
            g.dtypes[0], {})


def _check_file_takes_a_winner(db_dir, op_name: str, family: str) -> None:
    """The file the winner goes to must load: a write refuses to replace one that does not (it
    would lose what is in it), and that refusal used to come after the whole run. A corrupt file
    is moved aside by the write (``pypto.database.store``): said now, not refused."""
    from ..database.store import DirectoryDatabase
    from ..errors import DatabaseError

    db = DirectoryDatabase(db_dir)
    try:
        path = db.path(op_name, family)
    except DatabaseError:
        return   # a program's name: written as its own file, checked by the write itself
    res = db.load_file(path)
    if res.corrupt and path.exists():
        click.echo(f"warning: {path} is corrupt ({res.problems[0]}); the winner's write will move it "
                   "aside, keeping its bytes", err=True)
        return
    if res.problems and not res.entries and path.exists():
        raise DatabaseError(f"{path} does not load ({res.problems[0]}), so the winner could not "
                            "be written there: fix or move it, or give another --db, before tuning")


def default_db() -> str:
    """Where winners go without ``--db``: the user database, never the shipped one."""
    from ..database.lookup import write_root
    from ..errors import DatabaseError

    try:
        return str(write_root())
    except DatabaseError as e:
        raise ParamError(str(e)) from None


def _dtypes(spec, dt):
    if dt is None:
        return None
    from ..ops._load import resolve_op
    from .common import dtype_signature

    op = resolve_op(spec)
    if hasattr(op, "specialize"):     # a composite op: its dtypes are those of its arguments
        return tuple(p.strip() for p in dt.split(","))
    return dtype_signature(op, dt)


def _spawn_helpers(n_jobs, spec, shape, dt, ps, cfg):
    if n_jobs <= 1:
        return []
    if cfg.storage is None:
        from autotune.tuner import default_storage

        cfg.storage = default_storage()
    cmd = [sys.executable, "-m", "pypto.cli.main", "tune", spec, "--worker-only", "--no-progress",
           "--shape", ",".join(f"{k}={v}" for k, v in shape.items()), "--trials", str(cfg.trials),
           "--storage", cfg.storage, "--target", cfg.target, "--sampler", cfg.sampler,
           "--baselines", ",".join(cfg.baselines) or "none"]
    if dt:
        cmd += ["--dtype", dt]
    for k, v in ps.items():
        cmd += ["--param", f"{k}={v}"]
    if cfg.timeout_s:
        cmd += ["--timeout", str(cfg.timeout_s)]
    procs = []
    for i in range(n_jobs - 1):
        procs.append(subprocess.Popen(cmd + ["--seed", str((cfg.seed or 0) + 1 + i)], env=os.environ.copy()))
    return procs
