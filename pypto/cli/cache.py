"""``pypto cache``: the persistent compile cache."""

from __future__ import annotations

import click


@click.group()
def cache():
    """Inspect or clear the on-disk compile cache (PYPTO_CACHE_DIR)."""


@cache.command("info")
def info_():
    """Where the cache is, how many kernels it holds, their size, and the thread pool they use."""
    from ..compiler.diskcache import cache_dir, info
    from ..compiler.parallel import describe

    i = info()
    click.echo(f"dir: {i['dir']}\nentries: {i['entries']}\nsize: {i['bytes'] / 1e6:.1f} MB")
    click.echo(f"thread pool: {describe(cache_dir())}")


@cache.command("clear")
def clear_():
    """Remove every cached kernel."""
    from ..compiler.diskcache import clear

    click.echo(f"removed {clear()} entries")
