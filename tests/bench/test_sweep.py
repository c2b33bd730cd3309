"""`pypto bench --all-ops`: the sweep over every op, its torch peers, and roi_align's workload.

Tiny shapes and one timing round: these tests check what the sweep reports, never a speed.
"""

import numpy as np
import pytest
from click.testing import CliRunner

from pypto.bench import harness, peers, sweep
from pypto.bench.harness import Item
from pypto.cli.main import cli
from pypto.ops import get_op, list_ops

torch = pytest.importorskip("torch")


@pytest.fixture(scope="module")
def report():
    """exp with a wrong torch mapping (sin), an item that cannot be made, and add as it is."""
    table = peers._builders()
    right = table["exp"]
    table["exp"] = lambda x, p: (lambda t: (lambda: torch.sin(t)))(torch.from_numpy(x))
    try:
        items = [Item("exp", "N=1000"), Item("exp", "Q=5"), Item("add", "R=8,C=50")]
        lines = []
        rep = sweep.run(items, compare={"numpy", "torch"}, timing=sweep.CHECK, log=lines.append)
    finally:
        table["exp"] = right
    rep["log"] = lines
    return rep


def test_a_failing_op_does_not_stop_the_sweep(report):
    assert [r["op"] for r in report["items"]] == ["exp", "add"]
    (failed,) = report["sweep"]["failed"]
    assert failed["op"] == "exp" and failed["shape"] == "Q=5"
    assert "ShapeError" in failed["error"] and "N" in failed["error"]
    assert "FAILED" in report["log"][1] and report["log"][2].startswith("[3/3] add")
    assert "Failed ops (1)" in sweep.summary(report)


def test_a_wrong_torch_mapping_is_a_mismatch_not_a_figure(report):
    exp = report["items"][0]
    assert "torch" not in exp["results"] and set(exp["results"]) >= {"pypto", "numpy"}
    assert "differs from the reference" in exp["errors"]["torch"]
    assert report["sweep"]["mismatches"] == [{"op": "exp", "candidate": "torch", "why": exp["errors"]["torch"]}]
    assert "exp" in sweep.summary(report).split("Not timed (1)")[1]
    add = report["items"][1]
    assert {"pypto", "numpy", "torch"} <= set(add["results"]) and not add["errors"]


def test_the_trailing_list_is_every_ratio_under_the_margin(report):
    harness.validate_report(report)
    want = set()
    for rec in report["items"]:
        for peer in ("numpy", "torch"):
            if peer in rec["results"]:
                mine = "pypto-out" if rec["results"][peer]["form"] == "preallocated output" else "pypto"
                r = rec["results"][peer]["median_ms"] / rec["results"][mine]["median_ms"]
                assert sweep.ratio(rec, peer) == pytest.approx(r)
                if r < sweep.TRAILING:
                    want.add((rec["op"], peer))
    got = report["sweep"]["trailing"]
    assert {(t["op"], t["peer"]) for t in got} == want
    text = sweep.summary(report)
    for t in got:
        assert f"vs {t['peer']:<8} {t['ratio']:.2f}x" in text


def _rec(op, pypto, numpy, torch_ms, numpy_form="fresh output", pypto_out=None):
    res = {"pypto": {"median_ms": pypto, "form": "fresh output", "label": "PyPTO"},
           "numpy": {"median_ms": numpy, "form": numpy_form, "label": "numpy"},
           "torch": {"median_ms": torch_ms, "form": "fresh output", "label": "PyTorch eager"}}
    if pypto_out is not None:
        res["pypto-out"] = {"median_ms": pypto_out, "form": "preallocated output", "label": "PyPTO out="}
    return {"op": op, "shape": "N=1", "results": res, "errors": {}}


def test_trailing_sets_pypto_in_the_peers_form_and_sorts_by_ratio():
    rep = {"items": [_rec("a", 1.0, 0.5, 2.0), _rec("b", 1.0, 0.9, 0.96),
                     _rec("c", 2.0, 1.0, 4.0, numpy_form="preallocated output", pypto_out=1.0),
                     _rec("d", 1.0, 0.975, 1.0)]}
    got = [(t["op"], t["peer"], round(t["ratio"], 3)) for t in sweep.trailing(rep)]
    # c's NumPy writes into a preallocated output: it meets PyPTO's out= call (1.0 ms), a tie
    assert got == [("a", "numpy", 0.5), ("b", "numpy", 0.9), ("b", "torch", 0.96)]


def test_every_op_has_a_representative_shape_that_fits_it():
    from pypto.infra.inputs import complete_dims, parse_shape

    items = sweep.items()
    builtin = [o for o in list_ops() if o.category != "test" and not hasattr(o, "specialize")]
    assert len(items) == len(builtin) >= 244
    for it in items:
        op = get_op(it.op)
        params = op.resolve_params(it.params)
        dims = complete_dims(op, parse_shape(it.shape), params)
        if op.validate is not None:
            op.validate(dims, params)
    roi = {i.op: i for i in items}["roi_align"]
    assert roi.shape == "N=1,C=256,H=50,W=68,K=1000,F=5"
    assert roi.params == {"pooled_height": 7, "pooled_width": 7, "spatial_scale": 1 / 16, "sampling_ratio": 2}


def test_roi_align_inputs_look_like_proposals():
    from pypto.infra.inputs import make_inputs

    op = get_op("roi_align")
    params = op.resolve_params({"pooled_height": 7, "pooled_width": 7, "spatial_scale": 1 / 16})
    dims = {"N": 2, "C": 4, "H": 50, "W": 68, "K": 1000, "F": 5}
    x, boxes = make_inputs(op, ("float32", "float32"), dims, params, seed=3)
    assert x.shape == (2, 4, 50, 68) and boxes.shape == (1000, 5)
    assert set(np.unique(boxes[:, 0])) == {0.0, 1.0}
    w, h = boxes[:, 3] - boxes[:, 1], boxes[:, 4] - boxes[:, 2]
    assert (boxes[:, 1] >= 0).all() and (boxes[:, 3] <= 68 * 16 + 1e-3).all()
    assert (boxes[:, 2] >= 0).all() and (boxes[:, 4] <= 50 * 16 + 1e-3).all()
    assert w.min() < 3 * 16 and w.max() > 0.6 * 68 * 16 and h.min() < 3 * 16 and h.max() > 0.6 * 50 * 16


@pytest.mark.parametrize("aligned", [False, True])
def test_the_torch_roi_align_matches_the_reference(aligned):
    from pypto.bench.roi_torch import roi_align_torch

    op = get_op("roi_align")
    rng = np.random.default_rng(1)
    x = rng.uniform(-1, 1, (2, 3, 9, 11)).astype(np.float32)
    # inside, tiny, partly outside the map, beyond the one-pixel margin, on the last row/column
    boxes = np.array([[0, 1.0, 2.0, 7.5, 6.0], [1, 3.2, 3.1, 3.4, 3.3], [1, -4.0, -3.0, 5.0, 4.0],
                      [0, 9.0, 6.0, 30.0, 25.0], [1, 0.0, 0.0, 10.9, 8.9]], np.float32)
    p = {"pooled_height": 3, "pooled_width": 2, "spatial_scale": 1.2, "sampling_ratio": 3, "aligned": aligned}
    want = op.kernel_ref(x, boxes, **p)
    got = roi_align_torch(torch.from_numpy(x), torch.from_numpy(boxes), chunk=2, **p).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_the_cli_sweep_prints_the_table_and_the_summary():
    res = CliRunner().invoke(cli, ["bench", "--all-ops", "--check-only", "--small", "--compare", "numpy", "neg"],
                             catch_exceptions=False)
    assert res.exit_code == 0, res.output
    assert "neg" in res.output and "1 op(s) measured" in res.output
    res = CliRunner().invoke(cli, ["bench", "--check-only", "neg"])
    assert res.exit_code != 0 and "--all-ops" in res.output
