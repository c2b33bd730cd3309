"""The tuner's baselines are what users would run, timed fairly; a nearest entry that loses is recorded.

- the NumPy baseline is the fast form ``pypto bench`` times, never the float64 reference;
- PyTorch is measured under both OpenMP wait policies (the other one in a child process, faked
  here) and the better kept, saying which;
- the side-by-side timing pauses where the library changes;
- a nearest-shape entry timed slower than the default gets a ``slower_at`` record, only in the
  database the run writes.
"""

import pytest

from autotune import evaluate, worker
from autotune.tuner import Tuner
from pypto.bench import peers, torch_policy
from pypto.database import DirectoryDatabase, Entry, Key, provenance
from pypto.database.lookup import add_path, remove_path
from pypto.infra import timing
from pypto.infra.timing import Fair, Timing
from pypto.schedule.schedule import Schedule
from test_tuner import FakeEvaluator, cfg


class Sink:
    def write(self, s):
        pass

    def flush(self):
        pass


@pytest.fixture(scope="module")
def matmul_worker():
    w = worker.Worker(Sink())
    w.setup({"op": "matmul", "dtypes": ["float32", "float32"], "params": {},
             "dims": {"M": 16, "K": 12, "N": 8}, "target": "host", "seed": 0, "memory_mb": None})
    return w


def spy_measure(monkeypatch, ms):
    """Replaces ``measure``: records its arguments, calls every candidate once, returns ``ms``."""
    seen = {}

    def fake(fns, **kw):
        seen.update(kw, names=sorted(fns))
        for fn in fns.values():
            fn()
        return {n: Fair(Timing([ms.get(n, 1.0)] * 3), Timing([ms.get(n, 1.0)] * 3), 4) for n in fns}

    monkeypatch.setattr(timing, "measure", fake)
    return seen


def test_the_numpy_baseline_is_the_fast_form_never_the_reference(matmul_worker, monkeypatch):
    op = matmul_worker.ctx["op"]

    def reference(*a, **k):
        raise AssertionError("the float64 reference was used as the NumPy baseline")

    monkeypatch.setattr(op, "kernel_ref", reference)
    seen = spy_measure(monkeypatch, {"default": 2.0, "numpy": 1.0})
    got = matmul_worker.compare({"schedules": {"default": Schedule("matmul", ()).to_json()},
                                 "numpy": True, "torch": False})
    assert not got["errors"], got["errors"]
    assert got["results"]["numpy"]["label"] == "numpy"  # peers.numpy_peer's fast form
    assert got["results"]["numpy"]["form"] == peers.PREALLOCATED
    assert seen["names"] == ["default", "numpy"]
    # the fair protocol: a pause where the library changes, Halide's candidates one library
    assert seen["pause_s"] >= 0.3 and seen["groups"] == {"default": "halide", "numpy": "numpy"}


def test_a_wrong_numpy_peer_is_reported_not_timed(matmul_worker, monkeypatch):
    spy_measure(monkeypatch, {})
    monkeypatch.setattr(peers, "numpy_peer", lambda name, arrays, params, op=None: (
        lambda: arrays[0][:, :8] * 0, "numpy"))
    got = matmul_worker.compare({"schedules": {}, "numpy": True, "torch": False})
    assert "numpy" not in got["results"] and "differ" in got["errors"]["numpy"]


@pytest.mark.skipif(not peers.torch_available(), reason="needs PyTorch")
@pytest.mark.parametrize("other_ms, kept", [(0.5, "PASSIVE"), (9.0, "default"), (None, "default")])
def test_torch_is_timed_under_both_wait_policies_and_the_better_kept(matmul_worker, monkeypatch,
                                                                      other_ms, kept):
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    spy_measure(monkeypatch, {"torch": 3.0})
    asked = []

    def other(op, dtypes, params, dims, *, names, seed, timing, policy=None, timeout=600.0):
        asked.append((op, tuple(names), seed, timing["pause_s"]))
        if other_ms is None:
            return {n: {"policy": "PASSIVE", "error": "child died"} for n in names}
        fig = {"median_ms": other_ms, "min_ms": other_ms, "spread": 0.0, "n": 3}
        return {n: {"policy": "PASSIVE", "single": fig, "steady": {**fig, "calls": 2}} for n in names}

    monkeypatch.setattr(torch_policy, "measure_other", other)
    got = matmul_worker.compare({"schedules": {}, "numpy": False, "torch": True})
    t = got["results"]["torch"]
    assert asked == [("matmul", ("torch",), 0, 0.3)]
    assert t["omp_wait_policy"] == kept and f"OMP_WAIT_POLICY={kept}" in t["label"]
    assert t["median_ms"] == (other_ms if kept == "PASSIVE" else 3.0)
    assert t["policies"]["default"]["median_ms"] == 3.0
    assert ("error" in t["policies"]["PASSIVE"]) == (other_ms is None)


def test_the_worker_runs_with_the_users_wait_policy(monkeypatch, tmp_path):
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    envs = []

    def popen(*a, env=None, **k):
        envs.append(env)
        raise OSError("not started in this test")

    monkeypatch.setattr(evaluate.subprocess, "Popen", popen)
    ev = evaluate.Evaluator("matmul", ("float32", "float32"), {}, {"M": 4, "K": 4, "N": 4}, "host",
                            log_path=str(tmp_path / "w.log"))
    with pytest.raises(OSError):
        ev._start()
    assert "OMP_WAIT_POLICY" not in envs[0]  # not forced to PASSIVE: both are measured


# -- a nearest entry slower than the default --------------------------------------------------------

class NearestSlower(FakeEvaluator):
    """The nearest entry measures ``NEAREST_MS``; everything else as FakeEvaluator says."""

    NEAREST_MS = 50.0
    seen = []

    def compare(self, schedules, numpy=True, timing=None, timeout=0):
        NearestSlower.seen.append(sorted(schedules))
        res = super().compare(schedules, numpy, timing, timeout)
        if "nearest" in res["results"]:
            ms = NearestSlower.NEAREST_MS
            res["results"]["nearest"] = {"median_ms": ms, "min_ms": ms, "spread": 0.0, "n": 5}
        return res


def _plant_near_entry(tmp_path, folder):
    """An entry for toy_scale at R=64, C=128 (the tuned shape is R=64, C=256: distance 1)."""
    near = Tuner(cfg(tmp_path, shape={"R": 64, "C": 128}), say=lambda s: None)
    key = Key.make(near.op.name, near.dtypes, near.key_dims, near.params, near.family, near.fp)
    entry = Entry(key=key, schedule=Schedule("toy_scale", ()).with_fingerprint(near.fp), time_ms=1.0,
                  provenance=provenance(method="test", target="host"))
    DirectoryDatabase(folder).commit([entry])
    return key


@pytest.fixture
def searched():
    added = []
    yield added.append
    for p in added:
        remove_path(p)


@pytest.mark.parametrize("nearest_ms", [50.0, 1.0])
def test_a_nearest_entry_slower_than_the_default_is_recorded_in_the_tuners_database(
        tmp_path, searched, nearest_ms):
    root = tmp_path / "db"
    key = _plant_near_entry(tmp_path, root)
    add_path(root)
    searched(root)
    NearestSlower.NEAREST_MS, NearestSlower.seen = nearest_ms, []
    said = []
    Tuner(cfg(tmp_path, trials=4, evaluator=NearestSlower), say=said.append).run()
    assert "nearest" in NearestSlower.seen[0] and "default" in NearestSlower.seen[0]
    (planted,) = [e for e in DirectoryDatabase(root).iter_all() if e.key == key]
    if nearest_ms > 10.0:  # slower than the default (FakeEvaluator's cost at most 10 ms)
        (rec,) = planted.slower_at
        assert rec["shape"] == {"C": 256, "R": 64} and rec["time_ms"] == 50.0 and rec["method"] == "tune"
        assert rec["default_ms"] < 50.0
        assert any("recorded, lookup skips it" in s for s in said)
    else:
        assert planted.slower_at == ()
        assert any("not slower than the default" in s for s in said)


def test_a_slower_nearest_entry_in_a_database_the_run_does_not_write_is_left_alone(tmp_path, searched):
    other = tmp_path / "other"
    key = _plant_near_entry(tmp_path, other)
    add_path(other)
    searched(other)
    NearestSlower.NEAREST_MS, NearestSlower.seen = 50.0, []
    said = []
    Tuner(cfg(tmp_path, trials=4, evaluator=NearestSlower), say=said.append).run()  # writes tmp/db
    assert "nearest" in NearestSlower.seen[0]
    (planted,) = DirectoryDatabase(other).iter_all()
    assert planted.key == key and planted.slower_at == ()
    assert any("does not write, so nothing is recorded" in s for s in said)


# -- old-form baselines in a database: removed or re-measured ----------------------------------------

def _entry(op="matmul", shape=None, params=None, forms=None, baselines=None, dtypes=("float32",) * 2):
    key = Key.make(op, dtypes, shape or {"M": 8, "K": 8, "N": 8}, params or {},
                   "x86-64-avx2", "0123456789abcdef")
    prov = provenance(method="tune", target="host")
    if forms is not None:
        prov["baseline_forms"] = forms
    return Entry(key=key, schedule=Schedule(op, ()), time_ms=1.0,
                 baselines=baselines or {"numpy": 90.0, "torch": 4.0, "default": 2.0}, provenance=prov)


def test_old_form_baselines_are_removed_and_the_provenance_says_why(tmp_path):
    from autotune.baselines import fix

    db = DirectoryDatabase(tmp_path / "db")
    old = _entry()
    new = _entry(shape={"M": 16, "K": 8, "N": 8}, forms={"numpy": "numpy", "torch": "torch eager"})
    db.commit([old, new])
    said = []
    res = fix(db, say=said.append, has_fast_numpy=lambda e: True)
    assert [(o.names, o.action, o.written) for o in res] == [(["numpy", "torch"], "remove", True)]
    got = {str(e.key): e for e in db.iter_all()}
    fixed = got[str(old.key)]
    assert fixed.baselines == {"default": 2.0}
    removed = fixed.provenance["baselines_removed"]
    assert "kernel_ref" in removed["numpy"] and "90 ms" in removed["numpy"]
    assert "PASSIVE" in removed["torch"] and "too loaded" in removed["torch"]
    assert got[str(new.key)].to_json() == new.to_json()  # already in the new forms: untouched
    assert fix(db, say=said.append, has_fast_numpy=lambda e: True) == []  # done once


def test_a_numpy_figure_that_is_the_ops_only_numpy_form_stands(tmp_path):
    from autotune.baselines import fast_numpy_exists, fix

    db = DirectoryDatabase(tmp_path / "db")
    db.commit([_entry()])
    res = fix(db, say=lambda s: None, has_fast_numpy=lambda e: False)
    assert [o.names for o in res] == [["torch"]]
    (e,) = db.iter_all()
    assert e.baselines["numpy"] == 90.0 and "torch" not in e.baselines
    # the real check: matmul has a fast form; a grouped convolution falls back to the reference
    assert fast_numpy_exists(_entry())
    conv = {"stride_h": 1, "stride_w": 1, "pad_h": 0, "pad_w": 0, "dil_h": 1, "dil_w": 1, "groups": 2}
    grouped = _entry("conv2d", {"N": 1, "C": 4, "H": 6, "W": 6, "O": 4, "CG": 2, "KH": 3, "KW": 3}, conv,
                     dtypes=("float32",) * 3)
    assert not fast_numpy_exists(grouped)


class FakeRemeasure:
    """An evaluator whose compare answers with fixed peer figures."""

    asked = []

    def __init__(self, op, dtypes, params, dims, target):
        FakeRemeasure.asked.append((op, dict(dims)))

    def compare(self, schedules, numpy=True, timing=None, timeout=0):
        assert numpy and list(schedules) == ["stored"]
        row = lambda ms, label: {"median_ms": ms, "min_ms": ms, "spread": 0.0, "n": 7, "label": label}
        return {"results": {"stored": row(1.1, None), "numpy": row(3.0, "numpy"),
                            "torch": row(2.5, "torch eager (OMP_WAIT_POLICY=default)")}, "errors": {}}

    def __enter__(self):
        return self

    def __exit__(self, *e):
        pass


def test_old_form_baselines_can_be_remeasured_with_the_fast_forms(tmp_path):
    from pypto.compiler import targets

    from autotune.baselines import fix

    db = DirectoryDatabase(tmp_path / "db")
    e = _entry()
    e = Entry(key=Key.make(e.key.op, e.key.dtypes, e.key.shape_dict, {}, targets.family(targets.host()),
                           e.key.fingerprint), schedule=e.schedule, time_ms=1.0, baselines=e.baselines,
              provenance=e.provenance)
    db.commit([e])
    FakeRemeasure.asked = []
    res = fix(db, remeasure=True, evaluator=FakeRemeasure, has_fast_numpy=lambda e: True, say=lambda s: None)
    assert [(o.action, o.written) for o in res] == [("remeasure", True)]
    assert FakeRemeasure.asked == [("matmul", {"M": 8, "K": 8, "N": 8})]
    (got,) = db.iter_all()
    assert got.baselines == {"numpy": 3.0, "torch": 2.5, "default": 2.0}
    assert got.provenance["baseline_forms"]["torch"] == "torch eager (OMP_WAIT_POLICY=default)"
    assert got.provenance["baselines_remeasured"]["stored_ms"] == 1.1
