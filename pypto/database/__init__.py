"""The schedule database: entries keyed by op, dtypes, shape, params, target family and fingerprint."""

from .entry import Entry, Key, provenance
from .lookup import add_path, distance, explain, lookup, remove_path, search_path, user_root
from .store import Database, DirectoryDatabase, MemoryDatabase

__all__ = ["Database", "DirectoryDatabase", "Entry", "Key", "MemoryDatabase", "add_path",
           "distance", "explain", "lookup", "provenance", "remove_path", "search_path",
           "user_root"]
