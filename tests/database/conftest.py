import pytest

from pypto.compiler.jit import clear_memory_cache
from pypto.database import add_path, remove_path


@pytest.fixture
def userdb(tmp_path):
    """A fresh database folder searched first, removed afterwards."""
    root = tmp_path / "db"
    add_path(root)
    clear_memory_cache()
    yield root
    remove_path(root)
    clear_memory_cache()
