"""Strict JSON now lives in the shared low layer, :mod:`pypto.infra.jsonio`; re-exported here."""

from ..infra.jsonio import MAX_BYTES, MAX_DEPTH, dumps, strict_loads

__all__ = ["MAX_BYTES", "MAX_DEPTH", "dumps", "strict_loads"]
