"""A schedule: an ordered list of directives for one op, versioned and bound to a fingerprint.

JSON form (format 1)::

    {"format": 1, "op": "softmax", "fingerprint": "3f2a...",
     "directives": [{"op": "split", "func": "out", "args": {"var": "c", ...}}, ...]}

``fingerprint`` is the algorithm fingerprint the schedule was made for (see
:func:`pypto.compiler.lower.fingerprint`); it may be null for hand-written, shape-generic schedules.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Iterable, Mapping
from typing import Any

from ..errors import ScheduleError
from .directives import LIMITS, Directive

FORMAT = 1


@dataclasses.dataclass(frozen=True)
class Schedule:
    """An op's schedule as data. Immutable; build new ones with :meth:`extend`."""

    op: str
    directives: tuple[Directive, ...] = ()
    fingerprint: str | None = None
    format: int = FORMAT

    def extend(self, more: Iterable[Directive]) -> "Schedule":
        return dataclasses.replace(self, directives=self.directives + tuple(more))

    def with_fingerprint(self, fp: str | None) -> "Schedule":
        return dataclasses.replace(self, fingerprint=fp)

    def to_json(self) -> dict:
        return {"format": self.format, "op": self.op, "fingerprint": self.fingerprint,
                "directives": [d.to_json() for d in self.directives]}

    def dumps(self) -> str:
        return json.dumps(self.to_json(), sort_keys=True, indent=1)

    @property
    def hash(self) -> str:
        """A short content hash of the directives (not of the fingerprint or op name)."""
        text = json.dumps([d.to_json() for d in self.directives], sort_keys=True,
                          separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    @staticmethod
    def from_json(obj: Any, where: str = "schedule") -> "Schedule":
        """Parses and checks a schedule object (already decoded from JSON)."""
        if not isinstance(obj, Mapping):
            raise ScheduleError(f"{where}: a schedule must be a JSON object")
        extra = set(obj) - {"format", "op", "fingerprint", "directives"}
        if extra:
            raise ScheduleError(f"{where}: unknown field(s) {sorted(extra)}")
        fmt = obj.get("format")
        if fmt != FORMAT:
            raise ScheduleError(f"{where}: schedule format {fmt!r} is not supported "
                                f"(this PyPTO reads format {FORMAT})")
        op = obj.get("op")
        if not isinstance(op, str) or not op.isidentifier():
            raise ScheduleError(f"{where}: 'op' must be an op name, got {op!r}")
        fp = obj.get("fingerprint")
        if fp is not None and (not isinstance(fp, str) or len(fp) > 64 or not fp.isalnum()):
            raise ScheduleError(f"{where}: 'fingerprint' must be a hex string or null")
        ds = obj.get("directives")
        if not isinstance(ds, list):
            raise ScheduleError(f"{where}: 'directives' must be a list")
        if len(ds) > LIMITS["directives"]:
            raise ScheduleError(f"{where}: {len(ds)} directives exceed the limit of "
                                f"{LIMITS['directives']}")
        parsed = tuple(Directive.from_json(d, f"{where}, directive #{i}") for i, d in enumerate(ds))
        return Schedule(op=op, directives=parsed, fingerprint=fp)

    @staticmethod
    def loads(text: str, where: str = "schedule") -> "Schedule":
        from ..infra.jsonio import strict_loads

        return Schedule.from_json(strict_loads(text, where), where)

    def __len__(self) -> int:
        return len(self.directives)

    def __str__(self) -> str:
        return "\n".join(str(d) for d in self.directives) or "(no directives: Halide's defaults)"
