"""The op registry: name -> Op."""

from __future__ import annotations

import difflib

from ..errors import OpDefinitionError, UnknownOpError

_OPS: dict = {}


def register(op, *, replace: bool = False):
    """Adds an op to the registry; a second op of the same name is an error unless ``replace``."""
    if op.name in _OPS and not replace and _OPS[op.name] is not op:
        raise OpDefinitionError(f"an op named {op.name!r} is already registered")
    _OPS[op.name] = op
    return op


def get_op(name: str):
    """The op registered under ``name``; raises UnknownOpError with close matches."""
    from . import _load_builtin

    _load_builtin()
    if not isinstance(name, str) or name not in _OPS:
        close = difflib.get_close_matches(str(name), _OPS, n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else "; `pypto ops` lists them"
        raise UnknownOpError(f"no op named {name!r}{hint}")
    return _OPS[name]


def list_ops(category: str | None = None) -> list:
    """All registered ops (optionally of one category), sorted by category then name."""
    from . import _load_builtin

    _load_builtin()
    ops = [o for o in _OPS.values() if category is None or o.category == category]
    return sorted(ops, key=lambda o: (o.category, o.name))
