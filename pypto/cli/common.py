"""Options and parsing shared by several subcommands."""

from __future__ import annotations

import click

from ..errors import ParamError


def nonempty(ctx, param, value):
    """A click callback: a path or URL option given as an empty string is refused (``Path("")``
    is the current folder: ``-o ""`` wrote there, ``--db ""`` read it, ``--storage ""`` fell back
    to the default storage without a word). Takes a single value or a repeated option's tuple."""
    for v in value if isinstance(value, tuple) else (value,):
        if v is not None and not v.strip():
            raise click.BadParameter("is empty; give a path" + (
                "" if param.required else " (or leave the option out for its default)"))
    return value


def writable_file(ctx, param, value):
    """A click callback: ``value`` (a file to write at the end of a long run) must lie in a
    folder that exists and can be written, checked before the run rather than after it."""
    import os
    from pathlib import Path

    if value is None or value == "-":
        return value
    if Path(value).is_dir():
        raise click.BadParameter(f"{value!r} is a folder; give a file name")
    folder = Path(value).parent
    if not folder.is_dir():
        raise click.BadParameter(f"the folder {str(folder)!r} does not exist; create it first")
    if not os.access(folder, os.W_OK):
        raise click.BadParameter(f"the folder {str(folder)!r} cannot be written")
    return value


def parse_params(items: tuple[str, ...]) -> dict:
    """``("eps=1e-5", "axis=1")`` -> ``{"eps": 1e-05, "axis": 1}`` (ints, floats, bools, strings)."""
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ParamError(f"--param {item!r} must look like NAME=VALUE")
        v: object = value
        low = value.lower()
        if low in ("true", "false"):
            v = low == "true"
        else:
            for conv in (int, float):
                try:
                    v = conv(value)
                    break
                except ValueError:
                    pass
        out[key.strip()] = v
    return out


def dtype_signature(op, dtype: str | None) -> tuple[str, ...]:
    """The op's dtype signature for ``--dtype`` (a name, or comma-separated one per input)."""
    if dtype is None:
        return op.dtypes[0]
    parts = tuple(p.strip() for p in dtype.split(","))
    sig = parts * len(op.inputs) if len(parts) == 1 else parts
    if sig not in op.dtypes:
        raise ParamError(f"{op.name}: --dtype {dtype} is not supported; choose one of "
                         + "; ".join(",".join(s) for s in op.dtypes))
    return sig


shape_option = click.option("--shape", "shape", help="Named dims, e.g. M=1024,N=1024,K=1024.")
dtype_option = click.option("--dtype", default=None, help="Input dtype (default: the op's first).")
param_option = click.option("--param", "params", multiple=True, metavar="NAME=VALUE",
                            help="Op parameter (repeatable).")
target_option = click.option("--target", default="host", show_default=True,
                             help="Short name (host, x86-64-avx2, cuda, opencl, ...) or Halide target string.")
