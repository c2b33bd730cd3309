"""Entry point of the ``pypto`` command."""

from __future__ import annotations

import importlib
import os
import sys

import click

from ..errors import PyptoError


class _Group(click.Group):
    """Turns PyptoError into one clear line and exit status 2 (``--debug`` shows the traceback).

    So does an OSError the command did not foresee (a disk that fills up, a file another
    process removes or locks): it says what the system refused and where, not a traceback.
    Ctrl-C ends with status 130 and one line.
    """

    def invoke(self, ctx):
        def debug() -> bool:      # set by the group's callback, inside super().invoke
            return bool(ctx.obj and ctx.obj.get("debug"))

        try:
            return super().invoke(ctx)
        except PyptoError as e:
            if debug():
                raise
            click.echo(f"error: {e}", err=True)
            sys.exit(2)
        except OSError as e:
            if debug():
                raise
            where = f": {e.filename}" if e.filename else ""
            click.echo(f"error: {e.strerror or e}{where} (run with --debug for the traceback)",
                       err=True)
            sys.exit(2)
        except KeyboardInterrupt:
            if debug():
                raise
            click.echo("\ninterrupted", err=True)
            sys.exit(130)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--debug", is_flag=True, help="Show tracebacks instead of one-line errors.")
@click.version_option(package_name="pypto-halide", prog_name="pypto")
@click.pass_context
def cli(ctx, debug):
    """PyPTO: tensor ops as Halide algorithms, schedules as data, tuned with Optuna."""
    ctx.ensure_object(dict)
    ctx.obj["debug"] = debug


def _register() -> None:
    from . import db, ops

    cli.add_command(ops.ops)
    cli.add_command(db.db)
    for name in ("tune", "build", "bench", "profile", "study", "cache"):
        try:
            mod = importlib.import_module(f"pypto.cli.{name}")
        except ModuleNotFoundError as e:
            if e.name != f"pypto.cli.{name}":
                raise
            continue
        cli.add_command(getattr(mod, name))


_register()


#: Variables some machines set that slow NumPy's BLAS; benchmarks run without them.
_BLAS_ENV = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")


def _clean_blas_env(args: list[str]) -> None:
    """Restarts ``pypto bench`` without the BLAS variables (they act when NumPy loads, so the
    process must start without them); every other command keeps its environment."""
    command = next((a for a in args if not a.startswith("-")), None)
    if command != "bench" or not any(os.environ.get(k) for k in _BLAS_ENV):
        return
    env = {k: v for k, v in os.environ.items() if k not in _BLAS_ENV}
    os.execve(sys.executable, [sys.executable, "-m", "pypto.cli.main", *args], env)


def _format_warning(message, category, filename, lineno, line=None) -> str:
    """PyPTO's own warnings as the CLI's other warnings read: one line, no source location."""
    return f"warning: {message}\n"


def main(argv=None) -> int:
    import warnings

    args = list(sys.argv[1:] if argv is None else argv)
    _clean_blas_env(args)
    if "--debug" not in args:
        warnings.formatwarning = _format_warning
    try:
        cli.main(args=args, prog_name="pypto", standalone_mode=True)
    except SystemExit as e:
        if e.code is None or isinstance(e.code, int):
            return e.code or 0
        # sys.exit("message") from an op file the command loaded: Python's own meaning
        # (the message on stderr, status 1); int() of it was a ValueError traceback.
        print(e.code, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
