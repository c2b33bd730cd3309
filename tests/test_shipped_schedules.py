"""The shipped schedule database loads, matches the ops' fingerprints, and applies cleanly."""

from pypto.database.lookup import SHIPPED
from pypto.database.tools import validate_paths


def test_shipped_database_is_valid_and_current():
    assert SHIPPED.is_dir()
    assert validate_paths([SHIPPED], deep=True) == []
