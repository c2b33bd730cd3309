"""``pypto db``: inspect and maintain schedule databases."""

from __future__ import annotations

import sys

import click

from .common import dtype_option, nonempty, param_option, parse_params, shape_option, target_option


def _dbs(paths):
    from ..database.lookup import search_path
    from ..database.store import DirectoryDatabase

    return [DirectoryDatabase(p) for p in _folders(paths)] if paths else search_path()


def _folders(paths):
    """Database folders named with --db: each must exist (a typo read as an empty database
    listed nothing, and prune or revalidate said "done" having looked at nothing)."""
    from pathlib import Path

    from ..errors import DatabaseError

    for p in paths:
        if not Path(p).is_dir():
            what = "is not a folder" if Path(p).exists() else "does not exist"
            raise DatabaseError(f"--db {p} {what}; give a database folder, or leave --db out "
                                "to read the search path")
    return paths


def _family_of(given: str) -> str:
    """A family name as the files are named, or the family of a target such as --target takes
    everywhere else (`--target host` listed nothing: no folder is named host)."""
    from ..compiler import targets
    from ..database.entry import FAMILY_RE
    from ..errors import TargetError

    try:
        return targets.family(targets.parse(given))
    except TargetError:
        if FAMILY_RE.match(given):
            return given      # a family with no target of that name (arm-64, x86-64-avx2-cuda)
        raise


def _unread(problems) -> None:
    """Says on stderr which stored files or entries were skipped because they do not load."""
    for p in problems:
        click.echo(f"warning: skipped {p}", err=True)
    if problems:
        click.echo("warning: entries that do not load are left out; `pypto db validate` lists "
                   "every problem", err=True)


db_option = click.option("--db", "dbs", multiple=True, type=click.Path(), callback=nonempty,
                         help="Database folder (repeatable; default: the search path).")


@click.group()
def db():
    """Inspect and maintain schedule databases (folders of <family>/<op>.json)."""


@db.command("list")
@click.option("--op", "op_name", default=None, help="Only this op.")
@click.option("--target", "family", default=None,
              help="Only this target family (e.g. x86-64-avx2, arm-64), or the family of a target "
                   "(host, arm-64-linux, cuda, a Halide target string).")
@db_option
def list_(op_name, family, dbs):
    """List stored entries."""
    family = _family_of(family) if family else None
    n, problems = 0, []
    for d in _dbs(dbs):
        problems += d.problems()
        for e in d.iter_all():
            k = e.key
            if (op_name and k.op != op_name) or (family and k.family != family):
                continue
            t = "-" if e.time_ms is None else f"{e.time_ms:.3f} ms"
            how = e.provenance.get("method", "?")
            click.echo(f"{k.family:<18} {k.op:<22} {'/'.join(sorted(set(k.dtypes))):<9} "
                       f"{k.shape_text():<28} {t:>12}  {how}  [{d.name}]")
            n += 1
    click.echo(f"{n} entries")
    _unread(problems)


@db.command("show")
@click.argument("op_name")
@shape_option
@dtype_option
@param_option
@target_option
@click.option("--as-python", is_flag=True, help="Print the schedule as Halide Python.")
@db_option
def show(op_name, shape, dtype, params, target, as_python, dbs):
    """Show the entries of one op (optionally the one for a shape)."""
    from ..infra.inputs import parse_shape
    from ..compiler import targets
    from ..compiler.lower import build
    from ..infra.jsonio import dumps
    from ..database.programs import is_program, op_for_entry
    from ..errors import PyptoError
    from ..ops._load import resolve_op
    from ..schedule.apply import apply_schedule

    # A program's entries are named g_<hash> (`pypto db list` shows them): no op to resolve;
    # its graph file beside the entry rebuilds it for --as-python.
    op = None if is_program(op_name) else resolve_op(op_name)
    name = op_name if op is None else op.name
    fam = targets.family(targets.parse(target))
    want = parse_shape(shape) if shape else None
    unknown = [d for d in want or () if op is not None and d not in op.input_dims]
    if unknown:     # said "no entries", as if the shape had been looked for
        from ..errors import ShapeError

        raise ShapeError(f"{op.name}: --shape names {', '.join(unknown)}, not a dim of this op; "
                         f"its dims are {', '.join(op.input_dims)}")
    found, problems, unprintable = 0, [], 0
    for d in _dbs(dbs):
        problems += d.problems_of(name, fam)
        for e in d.entries(name, fam):
            if want and e.key.shape_dict != want:
                continue
            if dtype and not _dtypes_match(dtype, e.key.dtypes):
                continue
            if params and dict(e.key.params) != (op.resolve_params(parse_params(params)) if op
                                                 else parse_params(params)):
                continue
            found += 1
            click.echo(click.style(f"# {e.key}  [{d.name}]", bold=True))
            click.echo(f"# time {e.time_ms} ms; baselines {e.baselines}")
            click.echo(f"# provenance {e.provenance}")
            if as_python:
                try:
                    eop = op if op is not None and not hasattr(op, "specialize") else \
                        op_for_entry(getattr(d, "root", "."), e.key.op)
                    built = build(eop, e.key.dtypes, dict(e.key.params))
                    click.echo("\n".join(apply_schedule(built, e.schedule)))
                except PyptoError as err:   # one entry that does not apply: say so, show the rest
                    unprintable += 1
                    click.echo(f"error: cannot print {e.key} as Python: {err}", err=True)
            else:
                click.echo(dumps(e.schedule.to_json()).rstrip())
    _unread(problems)
    if not found:
        click.echo(f"no entries for {name} on {fam}", err=True)
        sys.exit(1)
    if unprintable:
        sys.exit(1)


def _dtypes_match(given: str, dtypes: tuple[str, ...]) -> bool:
    """--dtype as the other commands take it: one name (any input of that dtype), or one per
    input, comma-separated ('float32,float32' matched nothing: it was looked up as one name)."""
    parts = tuple(p.strip() for p in given.split(","))
    return parts == dtypes if len(parts) > 1 else parts[0] in dtypes


@db.command("validate")
@click.argument("paths", nargs=-1, type=click.Path())
@click.option("--deep", is_flag=True,
              help="Also apply every schedule to its op (names, fingerprint) and compile it.")
def validate(paths, deep):
    """Check database folders or files; one line per problem, non-zero exit if any."""
    from ..database.lookup import search_path
    from ..database.tools import validate_paths

    if not paths:
        paths = [d.name for d in search_path()]
    problems = validate_paths(paths, deep=deep)
    if deep:
        problems += _compile_problems(paths)
    for p in problems:
        click.echo(p)
    if problems:
        sys.exit(1)
    click.echo(f"ok: {', '.join(map(str, paths))}")


def _compile_problems(paths) -> list[str]:
    """One line per stored schedule that Halide refuses to compile for its target family."""
    from pathlib import Path

    from ..compiler.check import compile_problem
    from ..database.programs import op_for_entry
    from ..database.store import DirectoryDatabase
    from ..database.tools import key_mismatch
    from ..errors import PyptoError

    out = []
    for p in map(Path, paths):
        if p.is_file():
            db = DirectoryDatabase(p.parent.parent)
            entries = db.load_file(p).entries
        elif p.is_dir():
            db = DirectoryDatabase(p)
            entries = list(db.iter_all())
        else:
            continue  # reported by validate_paths
        for e in entries:
            try:
                op = op_for_entry(db.root, e.key.op)
            except PyptoError:
                continue  # reported by the deep check
            if key_mismatch(op, e.key):
                continue  # reported by the deep check (building the op from it would fail)
            why = compile_problem(op, e.key.dtypes, dict(e.key.params), e.schedule, e.key.family)
            if why is not None:
                out.append(f"{p}: {e.key}: {why}")
    return out


@db.command("diff")
@click.argument("a", type=click.Path(exists=True))
@click.argument("b", type=click.Path(exists=True))
def diff_(a, b):
    """What changed from database (or file) A to B."""
    from ..database.tools import diff

    lines = diff(a, b).lines()
    click.echo("\n".join(lines) if lines else "no differences")


@db.command("merge")
@click.argument("sources", nargs=-1, required=True, type=click.Path(exists=True))
@click.option("-o", "--output", "dest", required=True, type=click.Path(), callback=nonempty,
              help="Destination folder.")
def merge_(sources, dest):
    """Merge databases into DEST, keeping the faster entry per key."""
    from ..database.tools import merge

    kept = merge(sources, dest)
    click.echo(f"merged {len(sources)} source(s) into {dest}: {kept} entries taken")


@db.command("prune")
@click.option("--dry-run", is_flag=True, help="Only report.")
@click.option("--db", "dbs", multiple=True, type=click.Path(), callback=nonempty,
              help="Database folder (repeatable; default: the search path without the shipped "
                   "schedules, which are pruned only when named here).")
def prune_(dry_run, dbs):
    """Remove stale (fingerprint changed) and duplicate entries."""
    from ..database.lookup import SHIPPED
    from ..database.store import DirectoryDatabase
    from ..database.tools import prune

    for d in _dbs(dbs):
        if not isinstance(d, DirectoryDatabase):
            continue
        if not dbs and d.root.resolve() == SHIPPED:
            # the installed package's data, as revalidate: a stale shipped entry is a bug to
            # report, not a file to rewrite (and its folder may not be the user's to write)
            continue
        for line in prune(d, dry_run=dry_run):
            click.echo(line)
    click.echo("dry run: nothing written" if dry_run else "done")


@db.command("revalidate")
@click.option("--op", "op_names", multiple=True,
              help="Only this op (repeatable; a name, FILE.py:NAME for an op of your own, or a "
                   "program's g_<hash>).")
@click.option("--db", "dbs", multiple=True, type=click.Path(), callback=nonempty,
              help="Database folder (repeatable; default: the search path without the shipped "
                   "schedules, which are checked only when named here).")
@target_option
@click.option("--margin", default=0.03, show_default=True, type=click.FloatRange(0.0, 0.5),
              help="An entry below (1 - margin) of the default's speed loses.")
@click.option("--mark", is_flag=True,
              help="Keep losers, recording that they are slower at their shape (lookup skips "
                   "them there), instead of dropping them.")
@click.option("--dry-run", is_flag=True, help="Measure and report; write nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def revalidate_(op_names, dbs, target, margin, mark, dry_run, as_json):
    """Re-time every stored entry beside the op's current default at the entry's shape.

    Outputs are checked against NumPy first; the two are then timed side by side (a 0.3 s pause
    and an untimed call before each timed block, rotating order). An entry that fails or gives
    wrong results is dropped; one slower than the default (confirmed by a second, longer
    measurement) is dropped, or marked with --mark. Progress goes to stderr. A program's entry
    (g_<hash>, or a composite op at one shape) is rebuilt from its graph file beside it
    (programs/NAME.graph); when that file is missing, unreadable or stale, the report says so
    and the entry is left as it is.
    """
    import json

    from ..bench.revalidate import revalidate, table
    from ..database.lookup import SHIPPED, search_path
    from ..database.programs import is_program
    from ..database.store import DirectoryDatabase
    from ..ops._load import resolve_op

    _check_runs_here(target)
    # A program's entries are named g_<hash> (pypto db list shows them): no op to resolve.
    names = [n if is_program(n) else resolve_op(n).name for n in op_names] or None
    if dbs:
        chosen = [DirectoryDatabase(p) for p in _folders(dbs)]
    else:
        chosen = [d for d in search_path()
                  if not (isinstance(d, DirectoryDatabase) and d.root.resolve() == SHIPPED)]
    outcomes = revalidate(chosen, ops=names, target=target, margin=margin, mark=mark,
                          dry_run=dry_run, progress=lambda line: click.echo(line, err=True))
    if as_json:
        click.echo(json.dumps({"dry_run": dry_run, "margin": margin,
                               "databases": [d.name for d in chosen],
                               "entries": [o.to_json() for o in outcomes]}, indent=1))
        return
    if not outcomes:
        click.echo(f"no entries to revalidate in {', '.join(d.name for d in chosen) or '(none)'}")
        return
    click.echo(table(outcomes))
    lost = sum(o.action in ("drop", "mark") for o in outcomes)
    click.echo(f"{len(outcomes)} entries, {lost} lost"
               + ("; dry run: nothing written" if dry_run else ""))


def _check_runs_here(target: str) -> None:
    """revalidate re-times entries here: for a target this machine cannot run, every candidate
    failed and every entry was dropped as if it had lost (`--target arm-64-linux` emptied the
    arm-64 files)."""
    import halide as hl

    from ..compiler import targets
    from ..database.tools import cannot_run_here
    from ..errors import TargetError

    t = targets.parse(target)
    why = cannot_run_here(t)
    if why is None and t.has_gpu_feature() and not hl.host_supports_target_device(t):
        why = "has no such device"
    if why:
        raise TargetError(f"cannot revalidate for {target} here: entries are re-timed on this "
                          f"machine ({targets.host()}), which {why}; run it on a machine of "
                          "that kind (nothing was changed)")


@db.command("import-autoschedule")
@click.argument("op_name")
@shape_option
@dtype_option
@param_option
@target_option
@click.option("--autoscheduler", "names", multiple=True,
              type=click.Choice(["adams2019", "mullapudi2016", "li2018"]),
              help="Which (repeatable; default all three).")
@click.option("--db", "dest", default=None, type=click.Path(), callback=nonempty,
              help="Database folder to write (default: the user database, as for pypto tune).")
@click.option("--no-measure", is_flag=True, help="Store without timing.")
def import_autoschedule_(op_name, shape, dtype, params, target, names, dest, no_measure):
    """Run Halide's autoschedulers for a shape and store each result (checked against NumPy)."""
    from ..infra.inputs import complete_dims, parse_shape
    from ..compiler import targets
    from ..database.store import DirectoryDatabase
    from ..database.tools import import_autoschedule
    from ..errors import ShapeError
    from ..ops._load import resolve_op
    from .common import dtype_signature

    op = resolve_op(op_name)
    if not shape:
        raise ShapeError(f"give --shape with {', '.join(op.input_dims)}")
    p = op.resolve_params(parse_params(params))
    dims = complete_dims(op, parse_shape(shape), p)
    t = targets.parse(target)
    from ..database.lookup import write_root

    from ..errors import PyptoError

    out = DirectoryDatabase(dest or write_root())
    chosen = names or ("adams2019", "mullapudi2016", "li2018")
    failed = []
    for name in chosen:
        try:
            e = import_autoschedule(op, dtype_signature(op, dtype), p, dims, name, t, out,
                                    measure=not no_measure)
        except PyptoError as err:
            # One autoscheduler's unusable output stopped the others, and the message did not
            # say whose output it was.
            click.echo(f"{name}: not stored: {err}", err=True)
            failed.append(name)
            continue
        base = e.baselines.get("default")
        vs = f" (default {base:.3f} ms)" if base else ""
        click.echo(f"{name}: stored {e.key} in {out.path(op.name, e.key.family)}: "
                   f"{'not timed (--no-measure)' if e.time_ms is None else f'{e.time_ms:.3f} ms'}{vs}")
    if failed:
        raise PyptoError(f"{len(failed)} of {len(chosen)} autoschedulers gave no schedule to store "
                         f"({', '.join(failed)}; reasons above){'; the others were stored' if len(failed) < len(chosen) else ''}; "
                         "choose others with --autoscheduler, or tune instead (`pypto tune`)")
