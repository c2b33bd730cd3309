"""The one exception hierarchy of PyPTO.

Every error PyPTO raises on purpose derives from :class:`PyptoError`. Errors about a caller's
input also derive from the built-in class a Python user would expect (``TypeError`` for a wrong
dtype or argument type, ``ValueError`` for a wrong shape or value), so ``except ValueError`` keeps
working around PyPTO calls.
"""

from __future__ import annotations


class PyptoError(Exception):
    """Base class of every error raised by PyPTO."""


class InputError(PyptoError):
    """A call received arguments it cannot accept."""


class DtypeError(InputError, TypeError):
    """An array has a dtype the op does not support."""


class ShapeError(InputError, ValueError):
    """An array has the wrong rank, a zero-size dimension, or dims that disagree with another input."""


class ZeroSizeError(ShapeError):
    """A value of a traced program would have no elements: no kernel is made for one, and
    ``pypto.jit`` runs such a call op by op instead (the eager ops give NumPy's empty results)."""


class ParamError(InputError, ValueError):
    """A scalar parameter has an unsupported value."""


class ArgumentError(ParamError, TypeError):
    """A call's arguments do not fit the op's signature (an unknown keyword, a missing or extra
    argument): a ParamError, and the TypeError Python raises for such a call."""


class UnknownOpError(PyptoError, KeyError):
    """No op of that name is registered."""

    def __str__(self) -> str:  # KeyError would print the message quoted
        return str(self.args[0]) if self.args else ""


class OpDefinitionError(PyptoError):
    """An op's declaration or algorithm is malformed (a bug in the op, not in the call)."""


class ScheduleError(PyptoError, ValueError):
    """A schedule is invalid for an op: an unknown name, a bad factor, or a directive Halide refused."""


class ScheduleTooLongError(ScheduleError):
    """A schedule has more directives than one schedule may hold (``LIMITS["directives"]``).
    A traced program's default meets it by being cut into smaller pipelines."""


class StaleScheduleError(ScheduleError):
    """A schedule was recorded for another version of an op's algorithm (fingerprint mismatch)."""


class DatabaseError(PyptoError):
    """A schedule database file is unreadable, corrupt, or cannot be written."""


class CompileError(PyptoError):
    """Halide failed to compile a pipeline; the message names the op and the stage."""


class ExecutionError(PyptoError, RuntimeError):
    """A compiled pipeline failed while running; the message names the op."""


class TargetError(PyptoError, ValueError):
    """A target name or Halide target string is unknown or cannot be used here."""


class TraceError(PyptoError, TypeError):
    """A traced function did something capture cannot follow (a NumPy function on a Tensor,
    in-place assignment, a break under ``fullgraph=True``); the message names the line."""


class GraphBreakError(TraceError):
    """A traced value was needed as a Python value (``if t:``, ``float(t)``) under ``fullgraph=True``."""


class FusionError(PyptoError):
    """``@pypto.fuse`` could not give one pipeline; the message names the op and the reason."""


class RecompileLimitError(PyptoError):
    """A jitted function was traced more often than its ``recompile_limit`` allows."""


class NotDifferentiableError(PyptoError, TypeError):
    """A gradient was asked through an op or argument that has none."""


class DatabaseWarning(UserWarning):
    """A database file was changed to keep a write from losing data (a corrupt file moved
    aside). The message names both files and how to merge a repaired one back."""


class PerformanceWarning(UserWarning):
    """Something ran, correctly, but slower than it should: a traced program fell back to its
    safe default schedule. The message names why and what to do."""
