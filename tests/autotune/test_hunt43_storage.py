"""--storage naming a folder says so (it said the folder 'is not an Optuna SQLite database')."""

import pytest

from autotune.storage import opening, storage_url
from pypto.errors import ParamError


def test_a_folder_as_storage_is_named_a_folder(tmp_path):
    import optuna

    url = storage_url(str(tmp_path))
    with pytest.raises(ParamError, match=f"{tmp_path} is a folder; give a file in it, e.g. "
                                         f"--storage {tmp_path}/pypto_tune.db"):
        opening(url, lambda: optuna.storages.RDBStorage(url))
