"""The output check now lives in the shared low layer, :mod:`pypto.infra.verify`; re-exported here."""

from ..infra.verify import max_error, mismatch, poison

__all__ = ["max_error", "mismatch", "poison"]
