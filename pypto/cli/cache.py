"""``pypto cache``: the persistent compile cache."""

from __future__ import annotations

import click


@click.group()
def cache():
    """Inspect or clear the on-disk compile cache (PYPTO_CACHE_DIR)."""


@cache.command("info")
def info_():
    """Where the cache is, how many kernels it holds, their size, and the thread pool they use."""
    import warnings

    from ..compiler.diskcache import cache_dir, info, usable_dir
    from ..compiler.parallel import describe

    i = info()
    click.echo(f"dir: {i['dir']}\nentries: {i['entries']}\nsize: {i['bytes'] / 1e6:.1f} MB")
    if cache_dir() is not None:
        # Whether calls will use it: a folder others can write, or a file in its place, is
        # refused (calls warn once and JIT-compile); info alone said "entries: 0" and nothing.
        with warnings.catch_warnings(record=True) as said:
            warnings.simplefilter("always")
            used = usable_dir() is not None
        click.echo("in use: yes" if used else
                   f"in use: no ({str(said[0].message) if said else 'refused'})")
    click.echo(f"thread pool: {describe(cache_dir())}")


@cache.command("clear")
def clear_():
    """Remove every cached kernel."""
    from ..compiler.diskcache import clear

    click.echo(f"removed {clear()} entries")
