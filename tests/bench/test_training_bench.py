"""``pypto bench --grad`` plumbing on the quick shapes: every candidate verified before it is
timed, a wrong gradient caught, the table and the JSON report made (no speed is asserted)."""

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from pypto.bench import training  # noqa: E402

QUICK = {c.key: c for c in training.cases(True)}


def test_quick_run_verifies_times_and_reports(tmp_path, capsys):
    out = tmp_path / "grad.json"
    training.main(["--quick", "--pause", "0", "--rounds", "1", "--case", "matmul",
                   "--case", "softmax", "--json", str(out)])
    text = capsys.readouterr().out
    rep = json.loads(out.read_text())
    assert set(rep) == {"meta", "cases", "memory"}
    for key in ("cpu", "cpus", "torch", "torch_threads", "load_average_start",
                "load_average_end", "pause_s", "rounds", "quick"):
        assert key in rep["meta"], key
    assert [r["case"] for r in rep["cases"]] == ["matmul", "softmax"]
    for r in rep["cases"]:
        for key in ("label", "pypto_form", "forms", "candidates", "best_peer", "ratio_single",
                    "ratio_steady"):
            assert key in r, key
        # Every op form agrees with torch's float64 values and gradients; the fastest is timed.
        assert set(r["forms"]) == set(training.FORMS)
        assert all(f["verified"] and f["reason"] is None for f in r["forms"].values()), r
        assert r["pypto_form"] in training.FORMS and r["best_peer"] == "torch eager"
        for name in ("pypto", "torch eager"):
            c = r["candidates"][name]
            assert c["verified"] and c["rounds"] == 1 and c["single_ms"] > 0
            assert c["steady_ms"] > 0 and 2 <= c["block"] <= 10
        assert r["ratio_single"] > 0 and r["ratio_steady"] > 0
    assert "CAVEAT" in text and "load average" in text and "cores" in text
    assert "pypto ms" in text and "torch eager ms" in text and "torch.compile ms" in text
    assert "matmul 128x128x128" in text and "softmax 256x128" in text


def _result(case):
    ref = training.reference(case, torch)
    return ref, ("loss", [ref["loss"].astype(np.float32)],
                 [g.astype(np.float32) for g in ref["grads"]])


def test_check_catches_a_wrong_gradient_value_or_count():
    case = QUICK["lstm_cell"]
    ref, (kind, values, grads) = _result(case)
    assert training.check((kind, values, grads), ref) is None
    wrong = [g.copy() for g in grads]
    wrong[4][3, 5] += 0.05 * np.abs(wrong[4]).max()       # one element of w_hh's gradient
    assert training.check((kind, values, wrong), ref).startswith(
        "the gradient of input #4: 1 of ")
    assert "the loss" in training.check((kind, [values[0] * 1.01], grads), ref)
    assert "7 inputs" in training.check((kind, values, grads[:6]), ref)
    outs = [o.astype(np.float32) for o in ref["outputs"]]
    assert training.check(("outputs", outs, grads), ref) is None
    assert "output #1" in training.check(("outputs", [outs[0], outs[1] + 1], grads), ref)


def test_torch_step_agrees_and_a_failing_form_is_reported_not_timed(monkeypatch):
    case = QUICK["softmax"]
    _, as_numpy = training.torch_step(case, torch, torch.float32)
    assert training.check(as_numpy(), training.reference(case, torch)) is None
    # A form whose gradient is wrong (here: the cotangent doubled) is marked, with its reason.
    real = training.pypto_forms

    def forms(c):
        good = real(c)
        name = training.FORMS[0]

        def doubled():
            kind, v, g = good[name]()
            return kind, v, [2 * x for x in g]
        return {name: doubled}

    monkeypatch.setattr(training, "pypto_forms", forms)
    logged = []
    rec, cands = training.prepare(case, torch, torch_compile=False, log=logged.append)
    assert list(cands) == ["torch eager"] and rec["pypto_form"] is None
    f = rec["forms"][training.FORMS[0]]
    assert not f["verified"] and f["reason"].startswith("the gradient of input #0") and logged
    assert not rec["candidates"]["pypto"]["verified"]
    training._merge_passive(rec, training.measure(cands, pause=0, rounds=1), {})
    training._ratios(rec)
    assert rec["ratio_single"] is None and rec["best_peer"] == "torch eager"
    row = training.table([rec], []).splitlines()[1]
    assert " x " in row and "none agrees" in row


def test_passive_figures_replace_the_default_only_when_faster():
    rec = {"candidates": {"pypto": {"verified": True}, "torch eager": {"verified": True}}}
    figs = {"single_ms": 2.0, "single_spread": 0.0, "steady_ms": 2.0, "steady_spread": 0.0,
            "rounds": 1, "block": 2}
    timed = {"pypto": dict(figs, single_ms=1.0, steady_ms=1.0), "torch eager": figs}
    training._merge_passive(rec, timed, {"torch eager": dict(figs, single_ms=1.5)})
    training._ratios(rec)
    eager = rec["candidates"]["torch eager"]
    assert eager["omp_wait_policy"] == "PASSIVE" and eager["single_ms"] == 1.5
    assert eager["default_policy"]["single_ms"] == 2.0 and rec["ratio_single"] == 1.5
    training._merge_passive(rec, timed, {"torch eager": dict(figs, single_ms=3.0)})
    assert rec["candidates"]["torch eager"]["omp_wait_policy"] == "default"


def test_cli_grad_flag_dispatches(monkeypatch, tmp_path):
    from click.testing import CliRunner

    from pypto.cli.bench import bench

    seen = []
    monkeypatch.setattr(training, "main", lambda argv: seen.append(argv))
    out = str(tmp_path / "r.json")
    res = CliRunner().invoke(bench, ["--grad", "--quick", "--memory", "--json", out,
                                     "--compare", "torch,torch-compile"])
    assert res.exit_code == 0, res.output
    assert seen == [["--quick", "--memory", "--json", out, "--torch-compile"]]


def test_lstm_layer_case_reports_every_form():
    """pypto.nn.lstm's forms are tried as a user writes them; each either agrees with
    torch.nn.LSTM or carries its reason; the user's lstm_cell loop agrees."""
    case = training.lstm_layer_case(2, 4, 2)
    # The compiles are the cost here: leave out the whole-loop forms (what quick runs time).
    case.forms = {k: v for k, v in case.forms.items() if "pypto.nn.lstm" in k}
    rec, cands = training.prepare(case, torch, torch_compile=False, log=lambda s: None)
    assert set(rec["forms"]) == set(case.forms) | set(case.custom)
    for name, f in rec["forms"].items():
        assert f["verified"] or f["reason"], name
    assert rec["forms"]["manual BPTT (value_and_grad per lstm_cell step)"]["verified"]
    assert "pypto" in cands and rec["candidates"]["torch eager"]["verified"]
    # nn.LSTM's states carry a layer axis; their gradients come back in PyPTO's shapes.
    ref = training.reference(case, torch)
    assert [g.shape for g in ref["grads"]] == [a.shape for a in case.arrays]
