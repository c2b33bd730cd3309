"""`pypto bench` and `pypto study`: verification before timing, the report's schema, charts.

Tiny shapes and few rounds: these tests check the harness, never a speed.
"""

import json
import os
import subprocess
import sys

import jsonschema
import numpy as np
import pytest
from click.testing import CliRunner

from pypto.bench import harness, peers
from pypto.bench.harness import Candidate, Context, Item
from pypto.cli.main import cli
from pypto.errors import ParamError

QUICK = {"min_rounds": 3, "max_rounds": 3, "budget_s": 2.0, "pause_s": 0.05, "torch_policies": False}
PNG = b"\x89PNG\r\n\x1a\n"


def run(*args):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


@pytest.fixture(scope="module")
def report():
    rep = harness.new_report({"numpy"}, timing=QUICK)
    for item in (Item("softmax", "R=8,C=33", group="given"), Item("matmul", "M=9,K=7,N=5", group="suite"),
                 Item("sum", "O=3,R=100", group="size")):
        rep["items"].append(harness.run_item(item, compare={"numpy"}, timing=QUICK))
    return rep


def test_items_are_verified_then_timed(report):
    for it in report["items"]:
        res = it["results"]
        # NumPy's matmul and row sum write into a preallocated output, softmax's makes a new one:
        # PyPTO is timed with out= exactly where the peer is.
        prealloc = it["op"] in ("matmul", "sum")
        assert set(res) == ({"pypto", "pypto-out", "numpy"} if prealloc else {"pypto", "numpy"}), it
        assert res["numpy"]["form"] == ("preallocated output" if prealloc else "fresh output")
        assert res["pypto"]["form"] == "fresh output" and "pypto.ops." in res["pypto"]["label"]
        for r in res.values():
            assert r["median_ms"] > 0 and r["n"] >= 3
            assert r["steady"]["median_ms"] > 0 and r["steady"]["n"] == r["n"] and r["steady"]["calls"] >= 1
            assert r["max_rel_error"] < 1e-3
        mine = "pypto-out" if prealloc else "pypto"
        assert it["vs_best_peer_pypto"] == mine
        assert it["vs_numpy"] == pytest.approx(res["numpy"]["median_ms"] / res[mine]["median_ms"])
        assert it["vs_best_peer_steady"] == pytest.approx(
            res["numpy"]["steady"]["median_ms"] / res[mine]["steady"]["median_ms"])


def test_report_follows_the_schema(report):
    harness.validate_report(report)
    assert report["format"] == 2 and report["protocol"]["pause_s"] == QUICK["pause_s"]
    for field in ("form", "steady"):  # a fair report says which form each figure is, and both figures
        bad = json.loads(json.dumps(report))
        del bad["items"][1]["results"]["numpy"][field]
        with pytest.raises(jsonschema.ValidationError):
            harness.validate_report(bad)
    bad = json.loads(json.dumps(report))
    bad["items"][0]["results"]["pypto"]["median_ms"] = -1.0
    with pytest.raises(jsonschema.ValidationError):
        harness.validate_report(bad)
    del bad["machine"]
    with pytest.raises(jsonschema.ValidationError):
        harness.validate_report(bad)


def test_a_wrong_candidate_is_reported_and_never_timed():
    ctx = Context(Item("softmax", "R=4,C=16"))
    right = ctx.want[0]
    cands = {
        "good": Candidate(fn=lambda: None, label="good", outputs=lambda: [right.copy()]),
        "wrong": Candidate(fn=lambda: None, label="wrong", outputs=lambda: [right + 0.01]),
        "shape": Candidate(fn=lambda: None, label="shape", outputs=lambda: [right[:2]]),
        "nan": Candidate(fn=lambda: None, label="nan", outputs=lambda: [np.full_like(right, np.nan)]),
        "raises": Candidate(fn=lambda: None, label="raises", outputs=lambda: 1 / 0),
    }
    good, bad, errs = harness.verify(ctx, cands)
    assert list(good) == ["good"] and errs["good"] == 0.0
    assert "elements differ beyond" in bad["wrong"]
    assert "shape" in bad["shape"]
    assert "NaN" in bad["nan"]
    assert "ZeroDivisionError" in bad["raises"]


def test_numpy_peers_match_the_references():
    for name, shape, params in [("conv2d", "N=1,C=4,H=7,W=9,O=3,CG=4,KH=3,KW=3", {"pad_h": 1, "stride_w": 2}),
                                ("depthwise_conv2d", "N=1,C=5,H=8,W=8,M=1,KH=3,KW=3", {"pad_h": 1, "pad_w": 1}),
                                ("box_blur", "B=2,H=9,W=7", {"size": 5}),
                                ("layer_norm", "R=3,C=17", {}),
                                ("scaled_dot_product_attention", "B=1,H=2,S=5,L=6,D=4,E=3", {})]:
        ctx = Context(Item(name, shape, params))
        fn, label = peers.numpy_peer(name, ctx.arrays, ctx.params)
        assert label == "numpy"
        good, bad, _ = harness.verify(ctx, {"numpy": Candidate(fn, label, lambda fn=fn: [np.asarray(fn())])})
        assert "numpy" in good, bad


def test_ops_without_a_fast_numpy_form_use_the_reference():
    ctx = Context(Item("sobel", "B=1,H=8,W=8"))
    fn, label = peers.numpy_peer("sobel", ctx.arrays, ctx.params)
    assert label == "numpy (reference)"
    np.testing.assert_array_equal(fn(), ctx.want[0])


def test_a_reference_that_returns_a_view_is_timed_with_its_result_copied():
    # split's kernel form makes a new array; NumPy's slicing makes a view in microseconds.
    ctx = Context(Item("split", "O=6,A=9,I=4", {"start": 2, "length": 5}))
    fn, label = peers.numpy_peer("split", ctx.arrays, ctx.params)
    assert label == "numpy (reference, view copied)"
    got = fn()
    assert not np.shares_memory(got, ctx.arrays[0])
    np.testing.assert_array_equal(got, ctx.want[0])


def test_markdown_and_text_tables(report):
    md = harness.markdown(report)
    lines = md.splitlines()
    assert lines[0].startswith("| op | shape | pypto | pypto-out | numpy |")
    assert lines[2 + len(report["items"]):] == ["", harness.NOTE]
    assert lines[2].startswith("| softmax | R=8,C=33 | ")
    assert lines[2].rstrip(" |").endswith("x")  # the vs-NumPy ratio
    assert " / " in lines[2].split("|")[3] and lines[3].split("|")[5].strip().endswith("†")
    text = harness.text_table(report)
    assert "PyPTO [pypto] vs best peer (numpy)" in text and "PyPTO [pypto-out] vs best peer" in text


def test_speedup_chart_is_a_png(report, tmp_path):
    from pypto.bench.plots import plot_speedups

    path = plot_speedups(report, str(tmp_path / "s.png"), groups=("suite", "given", "size"))
    data = open(path, "rb").read()
    assert data.startswith(PNG) and len(data) > 5000


def test_cli_measures_writes_json_and_plots(tmp_path):
    out, png = tmp_path / "r.json", tmp_path / "r.png"
    r = run("bench", "swiglu", "--shape", "R=4,C=16", "--compare", "numpy", "--quick", "--no-progress",
            "--json", str(out), "--plot", str(png), "--markdown")
    assert r.exit_code == 0, r.output
    rep = json.loads(out.read_text())
    harness.validate_report(rep)
    assert rep["items"][0]["op"] == "swiglu" and rep["items"][0]["group"] == "given"
    assert "| swiglu | R=4,C=16 |" in r.output
    assert png.read_bytes().startswith(PNG)
    again = run("bench", "--from-json", str(out), "--markdown")
    assert again.exit_code == 0 and "| swiglu | R=4,C=16 |" in again.output


def test_cli_fills_a_readme_block(tmp_path):
    out, readme = tmp_path / "r.json", tmp_path / "README.md"
    readme.write_text("intro\n<!-- bench:start -->\nold\n<!-- bench:end -->\nrest\n")
    assert run("bench", "exp", "--shape", "N=64", "--compare", "numpy", "--quick", "--no-progress",
               "--json", str(out)).exit_code == 0
    r = run("bench", "--from-json", str(out), "--readme", str(readme))
    assert r.exit_code == 0, r.output
    text = readme.read_text()
    assert "old" not in text and "| exp | N=64 |" in text and text.endswith("<!-- bench:end -->\nrest\n")
    assert "Measured by `pypto bench`" in text


def test_cli_errors_are_clear(tmp_path):
    r = CliRunner().invoke(cli, ["bench", "softmax", "--shape", "R=4,C=4", "--compare", "numpy,tensorflow"])
    assert r.exit_code == 2 and "unknown peer(s) tensorflow" in r.output
    r = CliRunner().invoke(cli, ["bench", "softmax", "matmul", "--shape", "R=4,C=4"])
    assert r.exit_code == 2 and "exactly one OP" in r.output
    suite = tmp_path / "s.json"
    suite.write_text('{"ops": [{"op": "softmax", "shape": "R=4,C=4"}]}')
    r = CliRunner().invoke(cli, ["bench", "--suite", str(suite), "matmul"])
    assert r.exit_code == 2 and "not in the suite" in r.output
    suite.write_text('{"ops": [{"op": "softmax"}]}')
    r = CliRunner().invoke(cli, ["bench", "--suite", str(suite)])
    assert r.exit_code == 2 and "ops[0] needs a string 'op' and a string 'shape'" in r.output
    r = CliRunner().invoke(cli, ["bench", "--from-json", str(suite)])
    assert r.exit_code != 0


def test_shipped_suite_loads_with_its_size_sweep():
    items = harness.load_suite(harness.default_suite_path())
    groups = {i.group for i in items}
    assert groups == {"suite", "size"}
    ops = {i.op for i in items if i.group == "suite"}
    for op in ops:  # every suite op has at least one smaller or larger shape
        assert any(i.op == op and i.group == "size" for i in items), op


@pytest.mark.slow
def test_bench_restarts_itself_without_the_openblas_variables(tmp_path):
    out = tmp_path / "r.json"
    env = dict(os.environ, OPENBLAS_CORETYPE="Haswell", OPENBLAS_L2_SIZE="262144")
    p = subprocess.run([sys.executable, "-m", "pypto.cli.main", "bench", "add", "--shape", "R=4,C=8",
                        "--compare", "numpy", "--quick", "--no-progress", "--json", str(out)],
                       env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert json.loads(out.read_text())["machine"]["openblas_env_unset"] is True


def test_compile_cost_cold_then_warm():
    cc = harness.compile_cost(Item("exp", "N=1000"))
    assert cc["cold"]["compile_s"] > 0 and cc["cold"]["first_result_s"] >= cc["cold"]["compile_s"]
    assert cc["warm"]["source"] == "default"


def test_study_history_and_convergence_chart(tmp_path):
    import optuna

    from autotune.history import histories

    url = f"sqlite:///{tmp_path / 't.db'}"
    s = optuna.create_study(study_name="toy|float32|N=8||x86|ff", storage=url)
    s.add_trial(optuna.trial.create_trial(value=4.0, user_attrs={"baseline": "default"}))
    s.add_trial(optuna.trial.create_trial(value=5.0, user_attrs={"baseline": "adams2019"}))
    for v in (6.0, 3.0, 3.5, 2.0):
        s.add_trial(optuna.trial.create_trial(value=v))
    s.add_trial(optuna.trial.create_trial(state=optuna.trial.TrialState.FAIL))
    (h,) = histories(url)
    assert h["best_baseline_ms"] == 4.0 and h["best_ms"] == 2.0 and h["n_failed"] == 1
    assert [c["best_ms"] for c in h["curve"]] == [4.0, 4.0, 4.0, 3.0, 3.0, 2.0, 2.0]
    png, js = tmp_path / "c.png", tmp_path / "h.json"
    r = run("study", "--storage", url, "--plot", str(png), "--json", str(js))
    assert r.exit_code == 0, r.output
    assert "2.00x" in r.output and png.read_bytes().startswith(PNG)
    assert json.loads(js.read_text())[0]["study"] == "toy|float32|N=8||x86|ff"
    r = CliRunner().invoke(cli, ["study", "--storage", str(tmp_path / "missing.db")])
    assert r.exit_code == 2 and "no tuning study database" in r.output


def test_an_autoschedule_that_fails_to_apply_is_reported_not_fatal(tmp_path):
    from pypto.compiler import targets
    from pypto.compiler.lower import build, fingerprint
    from pypto.database import DirectoryDatabase, Entry, Key, provenance
    from pypto.schedule.directives import Directive
    from pypto.schedule.schedule import Schedule

    ctx = Context(Item("softmax", "R=8,C=33"))
    fp = fingerprint(build(ctx.op, ctx.dtypes, ctx.params))
    key = Key.make("softmax", ctx.dtypes, ctx.key_dims(), ctx.params, targets.family(ctx.target), fp)
    bad = Schedule("softmax", (Directive.make("vectorize", "out", var="no_such_var", factor=8),))
    for name in harness.AUTOS:
        DirectoryDatabase(str(tmp_path / name)).commit(
            [Entry(key=key, schedule=bad, provenance=provenance(method="test", target="host"))])
    rec = harness.run_item(Item("softmax", "R=8,C=33"), compare={"halide"}, autoschedule_db=str(tmp_path),
                           compute_missing=False, timing=QUICK)
    assert "pypto" in rec["results"]
    for name in harness.AUTOS:
        assert name not in rec["results"]
        assert "no_such_var" in rec["errors"][name]


def test_a_stored_schedule_that_fails_at_this_shape_is_replaced_like_a_call_does(tmp_path):
    import pypto
    from pypto.compiler import targets
    from pypto.compiler.jit import clear_memory_cache
    from pypto.compiler.lower import build, fingerprint
    from pypto.database import DirectoryDatabase, Entry, Key, provenance, remove_path
    from pypto.schedule.directives import Directive
    from pypto.schedule.schedule import Schedule

    ctx = Context(Item("softmax", "R=8,C=33"))
    fp = fingerprint(build(ctx.op, ctx.dtypes, ctx.params))
    key = Key.make("softmax", ctx.dtypes, ctx.key_dims(), ctx.params, targets.family(ctx.target), fp)
    # Valid data, but the split needs at least 64 columns: it fails when run on 33.
    broken = Schedule("softmax", (Directive.make("split", "out", var="c", outer="co", inner="ci", factor=64,
                                                 tail="shift_inwards"),))
    DirectoryDatabase(str(tmp_path)).commit([Entry(key=key, schedule=broken,
                                                   provenance=provenance(method="test", target="host"))])
    clear_memory_cache()
    pypto.add_schedule_path(str(tmp_path))
    try:
        rec = harness.run_item(Item("softmax", "R=8,C=33"), compare={"numpy"}, timing=QUICK)
    finally:
        remove_path(str(tmp_path))
        clear_memory_cache()
    assert "pypto" in rec["results"] and not rec["errors"], rec["errors"]
    assert "after" in rec["results"]["pypto"]["label"] and "failed" in rec["results"]["pypto"]["label"]


def test_reports_name_paths_relative_to_the_folder_they_ran_in(tmp_path):
    root = str(tmp_path)
    rep = {"label": f"PyPTO (database {root}/schedules (exact))", "n": 3,
           "items": [{"source": f"database {root}/schedules"}, f"{root}x/other"]}
    got = harness.relative_paths(rep, root)
    assert got == {"label": "PyPTO (database schedules (exact))", "n": 3,
                   "items": [{"source": "database schedules"}, f"{root}x/other"]}


def test_suite_items_hold_only_what_the_bench_reads(tmp_path):
    shipped = harness.default_suite_path()
    assert shipped and harness.load_suite(shipped)  # the shipped suite loads as it is
    path = tmp_path / "suite.json"
    path.write_text(json.dumps({"ops": [{"op": "matmul", "shape": "M=8,K=8,N=8",
                                         "peer": {"name": "somebody", "ms": 1.0}}]}))
    with pytest.raises(ParamError, match="'peer'"):
        harness.load_suite(str(path))


# -- the fair protocol ----------------------------------------------------------------------------

class Script:
    """A fake clock and sleep, and candidates that log each call: the order of events is checked."""

    def __init__(self):
        self.now = 0.0
        self.log = []

    def clock(self):
        self.log.append("clock")
        return self.now

    def sleep(self, s):
        self.log.append(("pause", s))
        self.now += s

    def candidate(self, name, ms):
        def call():
            self.log.append(name)
            self.now += ms / 1000.0
        return call


def test_measure_pauses_then_calls_the_same_candidate_untimed_then_times_it_rotating():
    from pypto.infra.timing import measure

    sc = Script()
    fns = {"a": sc.candidate("a", 5.0), "b": sc.candidate("b", 10.0), "c": sc.candidate("c", 1.0)}
    res = measure(fns, pause_s=0.3, min_rounds=3, max_rounds=3, warmup=1, block_calls=2,
                  min_block_ms=0.0, max_block_ms=1e9, clock=sc.clock, sleep=sc.sleep)
    # Warm-up: each candidate once, then once timed to size its steady block (2 calls here).
    warm = ["a", "clock", "a", "clock", "b", "clock", "b", "clock", "c", "clock", "c", "clock"]
    assert sc.log[:len(warm)] == warm
    rest = sc.log[len(warm) + 1:]          # (+1: the clock read that starts the budget)
    turn = len([("pause", 0.3), "x", "clock", "x", "clock", "x", "x", "clock"])
    assert len(rest) == 9 * turn
    order = []
    for i in range(9):
        t = rest[i * turn:(i + 1) * turn]
        n = t[1]
        # pause, the untimed call, then the timed single call, then the block of back-to-back calls
        assert t == [("pause", 0.3), n, "clock", n, "clock", n, n, "clock"], t
        order.append(n)
    assert order == ["a", "b", "c", "b", "c", "a", "c", "a", "b"]  # each round starts one further
    assert res["b"].single.median == pytest.approx(10.0) and res["b"].steady.median == pytest.approx(10.0)
    assert res["a"].calls == 2 and len(res["c"].single.samples) == 3


def test_measure_pauses_only_where_the_library_changes_when_told_the_libraries():
    from pypto.infra.timing import measure

    sc = Script()
    fns = {n: sc.candidate(n, 1.0) for n in ("k1", "k2", "np")}
    measure(fns, pause_s=0.3, min_rounds=2, max_rounds=2, block_calls=1, min_block_ms=0.0,
            groups={"k1": "halide", "k2": "halide", "np": "numpy"}, clock=sc.clock, sleep=sc.sleep)
    timed = sc.log[sc.log.index("clock", 12) + 1:]
    seq = [ev for ev in timed if ev != "clock"]
    # Round 0 runs k1 k2 np: pauses before k1 (the first) and np, not k2 (k1's library). Round 1
    # runs k2 np k1: every turn changes library (np ran last in round 0), so each pauses.
    pauses_before = [seq[i + 1] for i, ev in enumerate(seq) if isinstance(ev, tuple)]
    assert pauses_before == ["k1", "np", "k2", "np", "k1"]


def test_the_bench_times_every_candidate_with_pauses_and_both_figures(monkeypatch):
    import pypto.infra.timing as timing

    seen = {}
    real = timing.measure

    def spy(fns, **kw):
        seen.update(kw, names=sorted(fns))
        return real(fns, **kw)

    monkeypatch.setattr(timing, "measure", spy)
    rec = harness.run_item(Item("matmul", "M=9,K=7,N=5"), compare={"numpy"},
                           timing={"min_rounds": 2, "max_rounds": 2, "torch_policies": False})
    assert seen["pause_s"] >= 0.3 and "groups" not in seen  # a pause before every candidate
    assert seen["names"] == ["numpy", "pypto", "pypto-out"]
    assert rec["results"]["numpy"]["n"] == 2


def test_ratios_set_pypto_beside_each_peer_in_the_peers_form():
    def r(ms, steady, form):
        return {"median_ms": ms, "steady": {"median_ms": steady}, "form": form}
    res = {"pypto": r(4.0, 3.0, "fresh output"), "pypto-out": r(2.0, 1.5, "preallocated output"),
           "numpy": r(3.0, 3.0, "preallocated output"), "torch": r(5.0, 1.0, "fresh output")}
    s = harness.summarize(res)
    assert s["best_peer"] == "numpy" and s["vs_best_peer_pypto"] == "pypto-out"
    assert s["vs_best_peer"] == pytest.approx(3.0 / 2.0) and s["vs_numpy"] == pytest.approx(1.5)
    assert s["best_peer_steady"] == "torch" and s["vs_best_peer_steady"] == pytest.approx(1.0 / 3.0)
    assert s["pypto_ms"] == 4.0 and s["pypto_steady_ms"] == 3.0


def _fake_other(single_ms=None, error=None):
    calls = []

    def measure_other(op, dtypes, params, dims, *, names=("torch",), seed=0, timing=None,
                      policy=None, timeout=600.0):
        calls.append({"op": op, "dims": dict(dims), "names": list(names), "timing": dict(timing or {})})
        if error:
            return {n: {"policy": "PASSIVE", "error": error} for n in names}
        fig = {"median_ms": single_ms, "min_ms": single_ms, "spread": 0.0, "n": 3}
        return {n: {"policy": "PASSIVE", "single": fig, "steady": {**fig, "calls": 5},
                    "max_rel_error": 0.0} for n in names}
    return measure_other, calls


@pytest.mark.skipif(not peers.torch_available(), reason="needs PyTorch")
@pytest.mark.parametrize("case", ["passive faster", "default faster", "child failed"])
def test_torch_is_measured_under_both_wait_policies_and_the_better_kept(monkeypatch, case):
    from pypto.bench import torch_policy

    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    fake, calls = _fake_other(single_ms={"passive faster": 1e-6, "default faster": 1e6}.get(case),
                              error="boom" if case == "child failed" else None)
    monkeypatch.setattr(torch_policy, "measure_other", fake)
    rec = harness.run_item(Item("softmax", "R=8,C=33"), compare={"torch"},
                           timing={"min_rounds": 2, "max_rounds": 2, "pause_s": 0.05})
    assert calls and calls[0]["names"] == ["torch"] and calls[0]["dims"] == {"R": 8, "C": 33}
    assert calls[0]["timing"]["pause_s"] == 0.05  # the child follows the same protocol
    t = rec["results"]["torch"]
    assert set(t["policies"]) == {"default", "PASSIVE"}
    if case == "passive faster":
        assert t["omp_wait_policy"] == "PASSIVE" and t["median_ms"] == 1e-6
        assert "OMP_WAIT_POLICY=PASSIVE" in t["label"] and t["steady"]["calls"] == 5
    else:
        assert t["omp_wait_policy"] == "default" and t["median_ms"] < 1e6
        assert "default OpenMP wait policy" in t["label"]
    if case == "child failed":
        assert t["policies"]["PASSIVE"] == {"error": "boom"}
    harness.validate_report({**harness.new_report({"torch"}), "items": [rec]})


def test_the_other_wait_policy_is_the_passive_one_unless_this_process_runs_passive(monkeypatch):
    from pypto.bench import torch_policy

    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    assert torch_policy.other_policy() == "PASSIVE"
    assert torch_policy.child_env("PASSIVE")["OMP_WAIT_POLICY"] == "PASSIVE"
    monkeypatch.setenv("OMP_WAIT_POLICY", "passive")
    assert torch_policy.other_policy() == "default"
    assert "OMP_WAIT_POLICY" not in torch_policy.child_env("default")


@pytest.mark.skipif(not peers.torch_available(), reason="needs PyTorch")
def test_the_child_process_measures_torch_with_the_policy_it_was_given():
    from pypto.bench import torch_policy

    ctx = Context(Item("softmax", "R=8,C=33"))
    got = torch_policy.measure_other("softmax", ctx.dtypes, ctx.params, ctx.dims, names=["torch"],
                                     policy="PASSIVE", timeout=300,
                                     timing={"min_rounds": 2, "max_rounds": 2, "pause_s": 0.01})
    t = got["torch"]
    assert "error" not in t, t
    assert t["policy"] == "PASSIVE" and t["seen_policy"] == "PASSIVE"
    assert t["single"]["n"] == 2 and t["steady"]["median_ms"] > 0 and t["max_rel_error"] < 1e-5
