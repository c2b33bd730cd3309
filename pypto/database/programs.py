"""Entries of traced programs (graph ops named ``g_<16 hex>``, and composite ops at one shape)
and the graph files beside them.

A program has no registered op to check its entries against: a backward pass, a jitted function
or a composite op at one shape is a graph traced from Python. The tuner therefore writes the
program's graph, as data naming registered ops only (``pypto.frontend.serial``), into the
database folder that receives the winner: ``programs/NAME.graph``. ``pypto db validate --deep``
rebuilds the program from it (nothing in the file is imported or evaluated) and checks the entry
like an op's: fingerprint, names, compilation. A call never needs the file: its lookup compares
the fingerprint of the program it is running.

The loader lives in the frontend, above this layer; it registers itself here on import
(:func:`set_loader`), so the database never imports upward.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from ..errors import PyptoError

FOLDER = "programs"
SUFFIX = ".graph"
_NAME = re.compile(r"^g_[0-9a-f]{16}\Z")
_OP_NAME = re.compile(r"^[a-z][a-z0-9_]{0,63}\Z")     # the database's op names (schema.json)
_loader: Callable[[str], object] | None = None


def set_loader(fn: Callable[[str], object]) -> None:
    """Registers the function that rebuilds a graph op from a graph file's path."""
    global _loader
    _loader = fn


def is_program(name: str) -> bool:
    return bool(_NAME.match(name))


def graph_path(root: str | Path, name: str) -> Path:
    return Path(root) / FOLDER / f"{name}{SUFFIX}"


def write_graph(root: str | Path, name: str, text: str) -> Path:
    """Writes a program's graph file into database folder ``root`` (atomically). ``name`` is
    the entry's op name: ``g_<hash>`` for a traced program, the composite op's name for one."""
    if not _OP_NAME.match(name):
        raise PyptoError(f"{name!r} cannot name a program's graph file (lower-case letters, "
                         "digits and _)")
    from .store import DirectoryDatabase

    path = graph_path(root, name)
    path.parent.mkdir(parents=True, exist_ok=True)
    # A fresh temporary name per write (the pid alone was shared by a process's threads and by
    # same-pid processes on other hosts), synced, renamed over, and removed if anything fails.
    DirectoryDatabase._atomic_write(path, text)
    return path


def op_for_entry(root: str | Path, name: str):
    """The op an entry named ``name`` in database ``root`` belongs to: a registered op, else the
    program rebuilt from its graph file. Raises PyptoError saying what is missing."""
    from ..ops import get_op

    path = graph_path(root, name) if _OP_NAME.match(name) else None
    try:
        op = get_op(name)
    except PyptoError:
        if not is_program(name) and (path is None or not path.is_file()):
            raise
    else:
        # A composite op is registered but never built itself: its entries are of its graph
        # op at one shape, which the graph file gives.
        if hasattr(op, "build") or path is None:
            return op
    if not path.is_file():
        raise PyptoError(f"a program's entry needs its graph file {path} to be checked; "
                         "`pypto tune` writes it beside the entry (re-tune, or drop the entry)")
    if _loader is None:
        raise PyptoError(f"cannot rebuild program {name}: import pypto first (its frontend "
                         "reads graph files)")
    op = _loader(str(path))
    if getattr(op, "name", None) != name:
        raise PyptoError(f"{path} describes program {getattr(op, 'name', '?')}, not {name}: "
                         "the file does not belong to this entry")
    return op
