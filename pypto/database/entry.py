"""Database entries and their keys.

An entry records one schedule for one (op, dtypes, shape, params, target family, fingerprint) with
the time it measured, the baselines measured beside it, and where it came from. See
``schedules/README.md`` for the file format.
"""

from __future__ import annotations

import dataclasses
import datetime
import re
from collections.abc import Mapping
from typing import Any

from ..errors import DatabaseError, ScheduleError
from ..infra.version import __version__, cpu_model, halide_version
from ..schedule.schedule import Schedule

FORMAT = 1
OP_RE = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
FAMILY_RE = re.compile(r"^[a-z0-9][a-z0-9_\-]{0,63}$")
DIM_RE = re.compile(r"^[A-Z][A-Z0-9_]{0,31}$")


@dataclasses.dataclass(frozen=True)
class Key:
    """What a stored schedule was made for. Two entries with equal keys compete; the faster wins."""

    op: str
    dtypes: tuple[str, ...]
    shape: tuple[tuple[str, int], ...]
    params: tuple[tuple[str, Any], ...]
    family: str
    fingerprint: str

    @staticmethod
    def make(op: str, dtypes, shape: Mapping[str, int], params: Mapping[str, Any], family: str,
             fingerprint: str) -> "Key":
        return Key(op, tuple(dtypes), tuple(sorted((k, int(v)) for k, v in shape.items())),
                   tuple(sorted(params.items())), family, fingerprint)

    @property
    def shape_dict(self) -> dict[str, int]:
        return dict(self.shape)

    def shape_text(self) -> str:
        return ",".join(f"{k}={v}" for k, v in self.shape)

    def to_json(self) -> dict:
        return {"op": self.op, "dtypes": list(self.dtypes), "shape": dict(self.shape),
                "params": dict(self.params), "family": self.family,
                "fingerprint": self.fingerprint}

    def __str__(self) -> str:
        ps = "".join(f",{k}={v}" for k, v in self.params)
        return f"{self.op}[{'/'.join(self.dtypes)}]({self.shape_text()}{ps})@{self.family}#{self.fingerprint}"


@dataclasses.dataclass
class Entry:
    """One stored schedule with its measurement and provenance."""

    key: Key
    schedule: Schedule
    time_ms: float | None = None
    baselines: dict[str, float] = dataclasses.field(default_factory=dict)
    provenance: dict[str, Any] = dataclasses.field(default_factory=dict)

    def to_json(self) -> dict:
        return {"key": self.key.to_json(), "schedule": self.schedule.to_json(),
                "time_ms": self.time_ms, "baselines": dict(sorted(self.baselines.items())),
                "provenance": dict(self.provenance)}  # a copy: the store keeps what it wrote

    @staticmethod
    def from_json(obj: Any, where: str) -> "Entry":
        """Parses one entry; the JSON Schema has already checked types and bounds."""
        k = obj["key"]
        try:
            schedule = Schedule.from_json(obj["schedule"], f"{where} schedule")
        except ScheduleError as e:
            raise DatabaseError(str(e)) from None
        key = Key.make(k["op"], k["dtypes"], k["shape"], k["params"], k["family"], k["fingerprint"])
        if schedule.op != key.op:
            raise DatabaseError(f"{where}: schedule is for op {schedule.op!r} but the key says {key.op!r}")
        return Entry(key=key, schedule=schedule, time_ms=obj.get("time_ms"),
                     baselines=dict(obj.get("baselines") or {}),
                     provenance=dict(obj.get("provenance") or {}))


def provenance(*, method: str, target: str, **extra) -> dict[str, Any]:
    """Where a result came from: versions, target, CPU, date, and how it was found."""
    import halide

    return {"pypto": __version__, "halide": getattr(halide, "__version__", None) or halide_version(),
            "target": target, "cpu": cpu_model(), "date": datetime.datetime.now(
                datetime.timezone.utc).isoformat(timespec="seconds"),
            "method": method, **extra}
