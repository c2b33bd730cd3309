"""Lookup: exact, nearest, stale, stacking, and the explanation of each choice."""

import pytest

from dbhelpers import D, matmul_entry
from helpers import assert_close, rand
from pypto import explain
from pypto.compiler.jit import clear_memory_cache
from pypto.database import DirectoryDatabase, distance
from toyops import toy_matmul


def call(m, k, n):
    a, b = rand((m, k)), rand((k, n), seed=1)
    got = toy_matmul(a, b)
    assert_close(got, a @ b)
    return explain(toy_matmul, a, b)


def test_without_entries_the_default_is_used(userdb):
    e = call(8, 8, 8)
    assert e.chosen == "default"
    assert "no usable stored entry" in e.notes[0]


def test_exact_entry_is_used_and_explained(userdb):
    DirectoryDatabase(userdb).commit([matmul_entry(8, 8, 8)])
    clear_memory_cache()
    e = call(8, 8, 8)
    assert e.chosen.endswith("(exact)") and str(userdb) in e.chosen
    assert e.distance == 0 and "toy_matmul" in e.entry_key


def test_nearest_shape_by_log_distance(userdb):
    DirectoryDatabase(userdb).commit([matmul_entry(8, 8, 8, tag="small"),
                                      matmul_entry(64, 64, 64, tag="big")])
    clear_memory_cache()
    e = call(48, 64, 64)
    assert "nearest" in e.chosen
    assert "M=64" in e.entry_key
    assert e.distance == pytest.approx(distance({"M": 48, "K": 64, "N": 64}, {"M": 64, "K": 64, "N": 64}))


def test_an_entry_that_kept_the_default_serves_only_its_own_shape(userdb):
    # A tuning run whose winner was the default stores that default's schedule (factors of its
    # shape, an older template's choices); at another shape the default fitted to that shape is
    # used instead, while another method's entry, even a farther one, is picked.
    DirectoryDatabase(userdb).commit([matmul_entry(64, 64, 64, tag="baseline:default")])
    clear_memory_cache()
    assert call(64, 64, 64).chosen.endswith("(exact)")
    e = call(48, 64, 64)
    assert e.chosen == "default"
    assert any("stores the default of its own shape" in n for n in e.notes)
    DirectoryDatabase(userdb).commit([matmul_entry(32, 64, 64, tag="tune")])
    clear_memory_cache()
    e = call(48, 64, 64)
    assert "nearest" in e.chosen and "M=32" in e.entry_key


def test_stale_entries_are_reported_and_never_applied(userdb):
    bad = (D("parallel", "ghost", var="q"),)
    DirectoryDatabase(userdb).commit([matmul_entry(8, 8, 8, fprint="f" * 16, directives=bad)])
    clear_memory_cache()
    e = call(8, 8, 8)
    assert e.chosen == "default"
    assert any("stale entry skipped" in n for n in e.notes)


def test_shape_pinning_entries_serve_only_their_shape(userdb):
    pinned = (D("bound", "out", var="n", min=0, extent=8),)
    DirectoryDatabase(userdb).commit([matmul_entry(8, 8, 8, directives=pinned)])
    clear_memory_cache()
    assert call(8, 8, 8).chosen.endswith("(exact)")
    e = call(9, 8, 8)
    assert e.chosen == "default" and any("pins its shape" in n for n in e.notes)


def test_a_near_entry_that_still_fails_on_the_new_shape_falls_back(userdb, monkeypatch):
    # The factor check is necessary, not sufficient: a failure it cannot foresee (simulated by
    # turning it off) must still end in the default schedule, not in an error.
    import importlib

    lookup_mod = importlib.import_module("pypto.database.lookup")  # the package re-exports lookup()
    monkeypatch.setattr(lookup_mod, "unfit", lambda *a, **k: None)
    wide = (D("vectorize", "out", var="n", factor=16),)
    DirectoryDatabase(userdb).commit([matmul_entry(16, 16, 16, directives=wide)])
    clear_memory_cache()
    e = call(16, 16, 3)
    assert e.chosen.startswith("default (after database")


def test_nearest_shape_refuses_an_entry_whose_factors_do_not_fit(userdb):
    # A 16-wide vector with Halide's default tail (shift_inwards) needs N >= 16.
    wide = (D("vectorize", "out", var="n", factor=16),)
    DirectoryDatabase(userdb).commit([matmul_entry(16, 16, 16, directives=wide)])
    clear_memory_cache()
    assert "nearest" in call(16, 16, 32).chosen          # fits: used
    e = call(16, 16, 3)
    assert e.chosen == "default"                         # refused before compiling, no fallback
    assert any("do not fit" in n and "at least 16 long; it is 3" in n for n in e.notes), e.notes


@pytest.mark.parametrize("directives, bad_shape", [
    # a tile factor larger than the new extent of M
    ((D("tile", "out", x="n", y="m", xo="no", yo="mo", xi="ni", yi="mi", xfactor=4, yfactor=16),),
     (8, 16, 16)),
    # a split's inner loop, vectorized by more than it is long once the split shrinks it
    ((D("split", "out", var="n", outer="no", inner="ni", factor=16, tail="guard_with_if"),
      D("vectorize", "out", var="ni", factor=16)), None),
    # the reduction's RVar k$x split shift_inwards by more than the new K
    ((D("split", "acc", 1, var="k$x", outer="ko", inner="ki", factor=16, tail="shift_inwards"),),
     (16, 8, 16)),
    # a staging copy of input b: its loop _1 is b's dim K
    ((D("wrap", "b", consumer="acc", **{"as": "bp"}), D("compute_root", "bp"),
      D("vectorize", "bp", var="_1", factor=16)), (16, 8, 16)),
])
def test_factor_check_follows_the_directives(userdb, directives, bad_shape):
    DirectoryDatabase(userdb).commit([matmul_entry(16, 16, 16, directives=directives)])
    clear_memory_cache()
    if bad_shape is None:   # the inner loop is 16 long at every N: it always fits
        assert "nearest" in call(16, 16, 5).chosen
        return
    e = call(*bad_shape)
    assert e.chosen == "default" and any("do not fit" in n for n in e.notes), e.notes


def test_a_guarded_factor_larger_than_the_extent_still_serves(userdb):
    # guard_with_if runs at any extent (the tail is masked), so it is no reason to refuse.
    guarded = (D("vectorize", "out", var="n", factor=16, tail="guard_with_if"),)
    DirectoryDatabase(userdb).commit([matmul_entry(16, 16, 16, directives=guarded)])
    clear_memory_cache()
    assert "nearest" in call(16, 16, 3).chosen


def test_a_recorded_loss_makes_lookup_skip_the_entry_at_that_shape(userdb):
    from pypto.database.lookup import record_slower

    db = DirectoryDatabase(userdb)
    e8 = matmul_entry(8, 8, 8)
    db.commit([e8])
    assert record_slower(db, e8.key, e8.schedule.hash, {"M": 8, "K": 8, "N": 16}, time_ms=2.0,
                         default_ms=1.0, method="test")
    clear_memory_cache()
    e = call(8, 8, 16)
    assert e.chosen == "default"
    assert any("measured slower than the default at this shape (2.000 ms against 1.000 ms, test"
               in n for n in e.notes), e.notes
    assert "nearest" in call(8, 8, 12).chosen           # no loss recorded there: still used
    assert call(8, 8, 8).chosen.endswith("(exact)")


def test_a_loss_at_its_own_shape_lets_another_entry_serve(userdb):
    from pypto.database.lookup import record_slower

    db = DirectoryDatabase(userdb)
    e8 = matmul_entry(8, 8, 8, tag="own")
    db.commit([e8, matmul_entry(8, 8, 16, tag="neighbour")])
    record_slower(db, e8.key, e8.schedule.hash, {"M": 8, "K": 8, "N": 8}, time_ms=3.0,
                  default_ms=1.0, method="revalidate")
    clear_memory_cache()
    e = call(8, 8, 8)
    assert "nearest" in e.chosen and "N=16" in e.entry_key


def test_a_loss_is_recorded_only_for_the_schedule_that_was_measured(userdb):
    from pypto.database.lookup import record_slower

    db = DirectoryDatabase(userdb)
    e8 = matmul_entry(8, 8, 8)
    db.commit([e8])
    assert not record_slower(db, e8.key, "0" * 16, {"M": 8, "K": 8, "N": 8}, time_ms=2.0,
                             default_ms=1.0, method="test")
    assert db.best(e8.key).slower_at == ()


def test_loss_records_round_trip_and_are_checked_on_load(userdb):
    import json

    from pypto.database.lookup import record_slower

    db = DirectoryDatabase(userdb)
    e8 = matmul_entry(8, 8, 8)
    db.commit([e8])
    path = db.path("toy_matmul", e8.key.family)
    before = path.read_text()
    assert "slower_at" not in before                     # absent unless there is a record
    record_slower(db, e8.key, e8.schedule.hash, {"M": 8, "K": 8, "N": 4}, time_ms=2.0,
                  default_ms=1.0, method="test")
    fresh = DirectoryDatabase(userdb)                    # read from disk, not from the cache
    (got,) = fresh.entries("toy_matmul", e8.key.family)
    assert got.slower_record({"M": 8, "K": 8, "N": 4})["default_ms"] == 1.0
    assert got.slower_record({"M": 8, "K": 8, "N": 8}) is None
    doc = json.loads(path.read_text())
    doc["entries"][0]["slower_at"][0]["shape"] = {"n": 4}  # dims are upper case
    path.write_text(json.dumps(doc))
    assert DirectoryDatabase(userdb).problems()


def test_user_databases_stack_before_others(userdb, tmp_path, monkeypatch):
    env_db = tmp_path / "env"
    DirectoryDatabase(env_db).commit([matmul_entry(8, 8, 8, tag="env")])
    monkeypatch.setenv("PYPTO_SCHEDULES", str(env_db))
    clear_memory_cache()
    assert str(env_db) in call(8, 8, 8).chosen
    DirectoryDatabase(userdb).commit([matmul_entry(8, 8, 8, tag="api")])
    clear_memory_cache()
    assert str(userdb) in call(8, 8, 8).chosen


def test_a_corrupt_file_does_not_break_calls(userdb):
    DirectoryDatabase(userdb).commit([matmul_entry(8, 8, 8)])
    path = DirectoryDatabase(userdb).path("toy_matmul", matmul_entry(8, 8, 8).key.family)
    path.write_text("{oops")
    clear_memory_cache()
    assert call(8, 8, 8).chosen == "default"
    assert any("invalid JSON" in p for p in DirectoryDatabase(userdb).problems())


def test_the_run_time_form_of_the_factor_check_agrees_with_it():
    # An any-shape AOT library checks the factors in C, from fit.requirements: on every shipped
    # op entry and on the default schedules of ops of each family (at the op sweep's shapes),
    # at shapes smaller, odd and larger than the schedule's own, the terms hold exactly when the
    # Python check (unfit, which nearest-shape lookup uses) lets the schedule serve.
    from pathlib import Path

    import pypto
    from pypto.bench.sweep import SHAPES
    from pypto.compiler import targets
    from pypto.compiler.lower import build
    from pypto.database.lookup import _full_dims
    from pypto.infra.inputs import complete_dims
    from pypto.schedule.defaults import default_schedule
    from pypto.schedule.fit import holds, requirements, unfit

    root = Path(pypto.__file__).parent / "_schedules"
    cases = []
    for fam in (p for p in root.iterdir() if p.is_dir() and p.name != "programs"):
        db = DirectoryDatabase(root)
        for f in fam.glob("*.json"):
            if not f.stem.startswith("g_"):
                for e in db.entries(f.stem, fam.name):
                    op = pypto.get_op(e.key.op)
                    cases.append((op, e.schedule, _full_dims(op, e.key, dict(e.key.params))))
    for name in ("matmul", "batch_matmul", "linear", "conv2d", "depthwise_conv2d", "softmax",
                 "layer_norm", "max_pool2d", "cumsum", "transpose"):
        op = pypto.get_op(name)
        dims, params = SHAPES.get(name, ({}, {}))
        if not dims:
            continue
        params = op.resolve_params(dict(params))
        dims = complete_dims(op, dims, params)
        built = build(op, op.dtypes[0], params)
        cases.append((op, default_schedule(built, dims, targets.host()), dict(dims)))
    checked = refused = 0
    for op, schedule, stored in cases:
        inputs = {spec.name: tuple(spec.dims) for spec in op.inputs}
        needs = requirements(schedule, stored, inputs)
        for scale in (0.01, 0.37, 1.0, 1.5, 3.0):
            new = {d: max(1, round(v * scale) + (scale != 1.0)) for d, v in stored.items()}
            ok = unfit(schedule, stored, new, inputs) is None
            assert ok == all(holds(n, new) for n in needs), (op.name, stored, new, needs)
            checked += 1
            refused += not ok
    assert checked >= 50 and refused > 0, (checked, refused)
