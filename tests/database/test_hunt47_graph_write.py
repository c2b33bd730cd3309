"""``write_graph``'s temporary file: unique per write (it was ``.NAME.graph.tmp<pid>``, shared by
every thread of a process and by same-pid processes on other hosts of a shared folder) and removed
when the write fails (it was left behind)."""

import os
import threading

import pytest

from pypto.database import programs
from pypto.database.programs import graph_path, write_graph

NAME = "g_0123456789abcdef"


def test_concurrent_writers_in_one_process_never_collide(tmp_path):
    errors = []

    def writer(i):
        try:
            for j in range(25):
                write_graph(tmp_path, NAME, f'{{"writer": {i}, "n": {j}}}' + " " * 4096)
        except Exception as e:     # noqa: BLE001 - any failure is the defect
            errors.append(repr(e))

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert graph_path(tmp_path, NAME).read_text().startswith('{"writer"')
    assert os.listdir(graph_path(tmp_path, NAME).parent) == [f"{NAME}.graph"]


def test_each_write_uses_its_own_temporary_name(tmp_path, monkeypatch):
    used = []
    real = os.replace

    def spy(src, dst):
        used.append(str(src))
        return real(src, dst)

    monkeypatch.setattr(os, "replace", spy)
    write_graph(tmp_path, NAME, "{}")
    write_graph(tmp_path, NAME, "{}")
    assert len(used) == 2 and used[0] != used[1]


def test_a_failed_write_leaves_no_temporary_file(tmp_path, monkeypatch):
    write_graph(tmp_path, NAME, '{"old": 1}')

    def fail(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", fail)
    with pytest.raises(OSError):
        write_graph(tmp_path, NAME, '{"new": 1}')
    folder = graph_path(tmp_path, NAME).parent
    assert os.listdir(folder) == [f"{NAME}.graph"]
    assert graph_path(tmp_path, NAME).read_text() == '{"old": 1}'
