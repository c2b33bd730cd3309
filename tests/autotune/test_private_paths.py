"""The tuner's worker log and measurement lock live in a private folder of the user, not at fixed
names in the shared temporary folder where another user could plant them first."""

import os
import stat
import tempfile

import pytest

from autotune.evaluate import Evaluator
from autotune.worker import _measure_lock

UID = os.getuid() if hasattr(os, "getuid") else None
pytestmark = pytest.mark.skipif(UID is None, reason="file owners and modes are POSIX")


@pytest.fixture
def tmp(tmp_path, monkeypatch):
    """The shared temporary folder, redirected; returns the private folder expected in it."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.delenv("PYPTO_MEASURE_LOCK", raising=False)
    return tmp_path / f"pypto-{UID}"


def _evaluator():
    return Evaluator("softmax", ["float32"], {}, {"R": 4, "C": 8}, "host")


def test_the_worker_log_and_the_lock_are_in_a_private_folder(tmp):
    ev = _evaluator()
    with _measure_lock() as held:
        lock = held.lock.lock_file
    assert os.path.dirname(ev.log_path) == str(tmp) and os.path.dirname(lock) == str(tmp)
    assert stat.S_IMODE(tmp.stat().st_mode) == 0o700


@pytest.mark.parametrize("plant", ["open", "link"])
def test_a_folder_planted_in_its_place_is_refused(tmp, tmp_path, plant):
    if plant == "open":
        tmp.mkdir()
        tmp.chmod(0o777)  # anyone could swap the files inside
    else:
        (tmp_path / "theirs").mkdir(mode=0o700)
        tmp.symlink_to(tmp_path / "theirs")
    with pytest.raises(PermissionError, match=f"{tmp}.*(writable by group or others|symbolic link)"):
        _evaluator()
    with pytest.raises(PermissionError, match="chmod 700"):
        with _measure_lock():
            pass
