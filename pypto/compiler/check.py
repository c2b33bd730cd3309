"""Compiling a stored schedule as a check: does Halide accept it for its target family?

A schedule can name only Funcs and Vars that exist, and pass every bound, yet be refused by
Halide when it lowers the pipeline (a Func stored outside a parallel loop but computed inside it
is a race, for one). Calls fall back to the default schedule then; ``pypto db validate --deep``
uses :func:`compile_problem` to find such entries first.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import halide as hl

from ..errors import CompileError, PyptoError
from ..schedule.apply import apply_schedule
from ..schedule.schedule import Schedule
from . import targets
from .lower import build, fingerprint


def compile_problem(op, dtypes: Sequence[str], params: Mapping[str, Any], schedule: Schedule,
                    family: str) -> str | None:
    """Why Halide refuses to compile ``schedule`` for ``family``, or None when it compiles.

    On the host's own family the pipeline is JIT-compiled as a call would compile it; for other
    families (another CPU, a GPU) it is lowered and its device code generated, which is where
    Halide refuses a schedule. Problems found before compiling (an unknown name, a stale
    fingerprint) are not repeated here: they are the deep check's own.
    """
    try:
        target = targets.for_family(family)
        built = build(op, dtypes, params)
        if schedule.fingerprint is not None and schedule.fingerprint != fingerprint(built):
            return None
        apply_schedule(built, schedule)
    except PyptoError:
        return None
    try:
        if target is targets.host():
            built.pipeline.compile_to_callable(built.images, target)
        else:
            built.pipeline.compile_to_module(built.images, f"check_{op.name}", target)
    except hl.HalideError as e:
        msg = str(e).strip().replace("\n", " ")
        return str(CompileError(f"Halide refuses to compile it for {target}: {msg}"))
    return None
