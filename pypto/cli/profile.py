"""``pypto profile OP``: where a call's time and memory go, Func by Func (Halide's profiler)."""

from __future__ import annotations

import json
from pathlib import Path

import click

from .common import (dtype_option, param_option, parse_params, shape_option, target_option,
                     writable_file)


def _schedule(op, spec: str):
    """``default``, ``database`` or a schedule JSON file -> what ``profile_call`` accepts."""
    if spec in ("default", "database"):
        return spec
    from ..errors import ScheduleError
    from ..schedule.schedule import Schedule

    path = Path(spec)
    if not path.is_file():
        raise ScheduleError(f"--schedule {spec!r} is neither 'default', 'database' nor a schedule "
                            "JSON file")
    s = Schedule.loads(path.read_bytes(), str(path))
    if s.op != op.name:
        raise ScheduleError(f"{path}: schedule is for op {s.op!r}, not {op.name!r}")
    return s


@click.command()
@click.argument("op_name", metavar="OP")
@shape_option
@dtype_option
@param_option
@click.option("--schedule", "schedule_spec", default="database", show_default=True,
              help="default, database (what a normal call picks), or a schedule JSON file.")
@target_option
@click.option("--runs", default=10, show_default=True, type=click.IntRange(1, 100000),
              help="Calls to profile at least; figures are per call.")
@click.option("--min-samples", default=20, show_default=True, type=click.IntRange(0),
              help="Keep calling (up to --budget seconds) until the profiler has this many samples.")
@click.option("--budget", default=5.0, show_default=True, type=click.FloatRange(0),
              help="Seconds spent at most on extra calls for --min-samples.")
@click.option("--stmt-html", "stmt_html_path", default=None, type=click.Path(dir_okay=False),
              callback=writable_file,
              help="Also write Halide's lowered loop nest as HTML to this file.")
@click.option("--json", "json_path", default=None, type=click.Path(dir_okay=False),
              callback=writable_file,
              help="Also write the report as JSON to this file ('-' for standard output).")
@click.option("--no-check", is_flag=True, help="Skip comparing the output with the NumPy reference.")
def profile(op_name, shape, dtype, params, schedule_spec, target, runs, min_samples, budget,
            stmt_html_path, json_path, no_check):
    """Profile OP at a shape: time, threads and heap per Func, and the process's peak memory."""
    from ..infra.inputs import complete_dims, make_inputs, parse_shape
    from ..bench.profile import profile_call, stmt_html
    from ..compiler import targets
    from ..errors import PyptoError
    from ..ops._load import resolve_op
    from .common import dtype_signature

    op = resolve_op(op_name)
    p = op.resolve_params(parse_params(params))
    given = parse_shape(shape) if shape else (op.example or {d: 64 for d in op.input_dims})
    dims = complete_dims(op, given, p)
    dtypes = dtype_signature(op, dtype)
    t = targets.parse(target)
    from ..database.tools import cannot_run_here

    why = cannot_run_here(t)     # another architecture, or an instruction set it lacks (SIGILL)
    if why:
        raise PyptoError(f"profile runs the kernel here, and this machine ({targets.host()}) "
                         f"{why}; profile on the target, or build for it "
                         f"(`pypto build --target {target} --format static`)")
    sched = _schedule(op, schedule_spec)
    arrays = make_inputs(op, dtypes, dims, p)
    rep = profile_call(op, arrays, p, schedule=sched, target=t, runs=runs,
                       min_samples=min_samples, budget_s=budget, check=not no_check)
    if json_path != "-":
        click.echo(rep.table())
    if stmt_html_path:
        stmt_html(op, dtypes, p, dims, stmt_html_path, schedule=sched, target=t)
        if not Path(stmt_html_path).is_file():   # Halide reports no failure to write it
            raise PyptoError(f"--stmt-html {stmt_html_path} was not written (Halide could not "
                             "create it); give a file in a folder you can write")
        if json_path != "-":
            click.echo(f"loop nest: {stmt_html_path}")
    if json_path:
        text = json.dumps(rep.to_json(), indent=1)
        if json_path == "-":
            click.echo(text)
        else:
            Path(json_path).write_text(text + "\n")
            click.echo(f"report: {json_path}")
