"""Database entries and their keys.

An entry records one schedule for one (op, dtypes, shape, params, target family, fingerprint) with
the time it measured, the baselines measured beside it, and where it came from. See
``schedules/README.md`` for the file format.
"""

from __future__ import annotations

import dataclasses
import datetime
import math
import re
from collections.abc import Mapping
from typing import Any

from ..errors import DatabaseError, ScheduleError
from ..infra.version import __version__, cpu_model, halide_version
from ..schedule.schedule import Schedule

FORMAT = 1
#: Records of "measured slower than the default at this shape" kept on one entry; the oldest go.
MAX_SLOWER = 32
OP_RE = re.compile(r"^[a-z][a-z0-9_]{0,63}\Z")
FAMILY_RE = re.compile(r"^[a-z0-9][a-z0-9_\-]{0,63}\Z")
DIM_RE = re.compile(r"^[A-Z][A-Z0-9_]{0,31}\Z")


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
                "params": {k: _param_to_json(v) for k, v in self.params}, "family": self.family,
                "fingerprint": self.fingerprint}

    def __str__(self) -> str:
        ps = "".join(f",{k}={v}" for k, v in self.params)
        return f"{self.op}[{'/'.join(self.dtypes)}]({self.shape_text()}{ps})@{self.family}#{self.fingerprint}"


@dataclasses.dataclass
class Entry:
    """One stored schedule with its measurement and provenance.

    ``slower_at`` lists the shapes where this schedule was measured slower than the default
    schedule (by ``pypto db revalidate`` or a tuning run), each as ``{"shape": {DIM: n},
    "time_ms", "default_ms", "date", "method"}``: lookup never picks the entry for those shapes.
    The field is optional in files (absent means none), so files written before it load as before.
    """

    key: Key
    schedule: Schedule
    time_ms: float | None = None
    baselines: dict[str, float] = dataclasses.field(default_factory=dict)
    provenance: dict[str, Any] = dataclasses.field(default_factory=dict)
    slower_at: tuple[dict[str, Any], ...] = ()

    def to_json(self) -> dict:
        out = {"key": self.key.to_json(), "schedule": self.schedule.to_json(),
               "time_ms": self.time_ms, "baselines": dict(sorted(self.baselines.items())),
               "provenance": dict(self.provenance)}  # a copy: the store keeps what it wrote
        if self.slower_at:  # written only when there is one, so older files stay byte-identical
            out["slower_at"] = [dict(r, shape=dict(r["shape"])) for r in self.slower_at]
        return out

    def slower_record(self, shape: Mapping[str, int]) -> dict[str, Any] | None:
        """The record saying this entry lost to the default at ``shape`` (input dims), if any."""
        want = {k: int(v) for k, v in shape.items()}
        for r in reversed(self.slower_at):
            if r["shape"] == want:
                return r
        return None

    def with_slower(self, shape: Mapping[str, int], *, time_ms: float, default_ms: float,
                    method: str) -> "Entry":
        """A copy that also records a loss to the default at ``shape`` (replacing an older record
        for the same shape; at most :data:`MAX_SLOWER` records, the oldest dropped)."""
        want = {k: int(v) for k, v in sorted(shape.items())}
        rec = {"shape": want, "time_ms": float(time_ms), "default_ms": float(default_ms),
               "date": _now(), "method": method}
        kept = [r for r in self.slower_at if r["shape"] != want]
        return dataclasses.replace(self, slower_at=tuple([*kept, rec][-MAX_SLOWER:]),
                                   baselines=dict(self.baselines),
                                   provenance=dict(self.provenance))

    @staticmethod
    def from_json(obj: Any, where: str) -> "Entry":
        """Parses one entry; the JSON Schema has already checked types and bounds."""
        k = obj["key"]
        _check_key_names(k, where)
        try:
            schedule = Schedule.from_json(obj["schedule"], f"{where} schedule")
        except ScheduleError as e:
            raise DatabaseError(str(e)) from None
        params = {n: _param_from_json(v) for n, v in k["params"].items()}
        key = Key.make(k["op"], k["dtypes"], k["shape"], params, k["family"], k["fingerprint"])
        if schedule.op != key.op:
            raise DatabaseError(f"{where}: schedule is for op {schedule.op!r} but the key says {key.op!r}")
        slower = tuple(dict(r, shape={d: int(n) for d, n in r["shape"].items()})
                       for r in obj.get("slower_at") or ())
        return Entry(key=key, schedule=schedule, time_ms=obj.get("time_ms"),
                     baselines=dict(obj.get("baselines") or {}),
                     provenance=dict(obj.get("provenance") or {}), slower_at=slower)


_FP_RE = re.compile(r"^[0-9a-f]{8,64}\Z")
_PARAM_RE = re.compile(r"^[a-z][a-z0-9_]{0,63}\Z")


def _check_key_names(k: Mapping, where: str) -> None:
    """The key's names, matched whole. The JSON Schema's patterns end in ``$``, which Python's
    ``re`` (what ``jsonschema`` uses) also matches before a final newline: ``"M\\n"`` passed."""
    names = [("op", k["op"], OP_RE), ("family", k["family"], FAMILY_RE),
             ("fingerprint", k["fingerprint"], _FP_RE)]
    names += [("shape dim", d, DIM_RE) for d in k["shape"]]
    names += [("parameter", p, _PARAM_RE) for p in k["params"]]
    for what, value, pattern in names:
        if not pattern.match(value):
            raise DatabaseError(f"{where}: key {what} {value!r} is not allowed "
                                f"(allowed: {pattern.pattern})")


#: How a non-finite float parameter (a fill such as masked_fill's -inf) is written in a key:
#: strict JSON has no infinities, and a plain "inf" is already a string parameter's value
#: (the norms' ``ord``).
_NONFINITE = "float:"


def _param_to_json(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return _NONFINITE + repr(v)
    return v


def _param_from_json(v: Any) -> Any:
    if isinstance(v, str) and v.startswith(_NONFINITE) and \
            v[len(_NONFINITE):] in ("inf", "-inf", "nan"):
        return float(v[len(_NONFINITE):])
    return v


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def provenance(*, method: str, target: str, **extra) -> dict[str, Any]:
    """Where a result came from: versions, target, CPU, date, and how it was found."""
    import halide

    return {"pypto": __version__, "halide": getattr(halide, "__version__", None) or halide_version(),
            "target": target, "cpu": cpu_model(), "date": _now(),
            "method": method, **extra}
