"""The timing protocol now lives in the shared low layer, :mod:`pypto.infra.timing`; re-exported here."""

from ..infra.timing import Timing, compare

__all__ = ["Timing", "compare"]
