"""A tuner killed with SIGKILL leaves no measuring worker behind (fault matrix A13).

The worker is the leader of its own session, so killing the tuner does not reach it; it used to
run its current request to the end (a hung candidate: for ever; a final side-by-side measurement:
minutes, holding the measurement lock every other tuner of the user waits for).
"""

import os
import signal
import subprocess
import sys
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOY = os.path.join(ROOT, "tests", "toyops.py")

# The tuner's side: starts a worker, makes it hang in a candidate's run, says the worker's pid.
_PARENT = f"""
import sys
from autotune.evaluate import Evaluator
from pypto.schedule.schedule import Schedule

ev = Evaluator({TOY + ':toy_scale'!r}, ("float32",), {{}}, {{"R": 8, "C": 8}}, "host",
               compile_timeout=300, run_timeout=600, log_path=sys.argv[1])
ev._start()
ev._send({{"cmd": "eval", "schedule": Schedule("toy_scale").to_json(), "incumbent": None,
          "prune_ms": None, "timing": {{}}, "inject": "hang"}})
assert ev._read(300)["phase"] == "compiled"
print(ev.proc.pid, flush=True)
ev._read(600)
"""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads /proc")
def test_a_worker_whose_tuner_was_killed_exits(tmp_path):
    env = dict(os.environ, PYTHONPATH=ROOT, PYPTO_CACHE_DIR=str(tmp_path / "cache"),
               PYPTO_MEASURE_LOCK=str(tmp_path / "measure.lock"))
    parent = subprocess.Popen([sys.executable, "-c", _PARENT, str(tmp_path / "w.log")],
                              stdout=subprocess.PIPE, text=True, env=env)
    worker = None
    try:
        worker = int(parent.stdout.readline())
        assert _alive(worker)
        parent.kill()
        parent.wait()
        for _ in range(600):            # polled, not timed: it must go, however slowly
            if not _alive(worker):
                break
            time.sleep(0.1)
        assert not _alive(worker), "the worker outlived the tuner that started it"
    finally:
        parent.kill()
        if worker is not None and _alive(worker):
            os.killpg(worker, signal.SIGKILL)
