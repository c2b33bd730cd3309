"""Strict JSON for untrusted files: schedules, database files and bench suites.

Python's ``json`` accepts ``NaN`` and ``Infinity``, turns ``1e999`` into ``inf``, keeps the last of
duplicate keys and raises ``RecursionError`` on deep nesting. A database file is untrusted data, so
all four are rejected here with a message naming the file.
"""

from __future__ import annotations

import json
import math
from typing import Any

from ..errors import DatabaseError

MAX_DEPTH = 32
MAX_BYTES = 64 << 20


def _no_constant(name: str):
    raise ValueError(f"{name} is not valid JSON")


def _pairs(pairs):
    out = {}
    for k, v in pairs:
        if k in out:
            raise ValueError(f"duplicate key {k!r}")
        out[k] = v
    return out


def _float(text: str) -> float:
    v = float(text)
    if math.isinf(v):
        raise ValueError(f"number {text} is out of range")
    return v


def _depth_ok(text: str) -> bool:
    depth = 0
    in_str = esc = False
    for ch in text:
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
        elif ch in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                return False
        elif ch in "]}":
            depth -= 1
    return True


def strict_loads(text: str | bytes, where: str) -> Any:
    """Decodes JSON strictly; raises DatabaseError naming ``where`` and the problem."""
    if isinstance(text, bytes):
        if len(text) > MAX_BYTES:
            raise DatabaseError(f"{where}: file is larger than {MAX_BYTES >> 20} MiB")
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as e:
            raise DatabaseError(f"{where}: not UTF-8 text ({e})") from None
    if len(text) > MAX_BYTES:
        raise DatabaseError(f"{where}: file is larger than {MAX_BYTES >> 20} MiB")
    if not _depth_ok(text):
        raise DatabaseError(f"{where}: JSON is nested deeper than {MAX_DEPTH} levels")
    try:
        return json.loads(text, parse_constant=_no_constant, object_pairs_hook=_pairs,
                          parse_float=_float)
    except (ValueError, RecursionError) as e:
        raise DatabaseError(f"{where}: invalid JSON: {e}") from None


def dumps(obj: Any) -> str:
    """Stable, human-diffable JSON: sorted keys, one-space indent, no NaN."""
    return json.dumps(obj, sort_keys=True, indent=1, allow_nan=False) + "\n"
