"""The roofline: microbenchmarks checked against NumPy, the cost model by hand, placement, chart.

Nothing here is timed for speed: measured roofs are only checked to be positive and finite.
"""

from __future__ import annotations

import dataclasses
import json
import math

import halide as hl
import numpy as np
import pytest

import pypto
from pypto.bench import roofline
from pypto.bench.cost import Cost, op_cost, place
from pypto.bench.roofline import MicrobenchmarkError, Roofs, plot_roofline
from pypto.compiler import targets
from pypto.errors import DtypeError, ParamError, TargetError


@pytest.fixture(scope="module")
def benches():
    return roofline.microbenchmarks(quick=True, stream_elems=5000 + 13, fma_rows=67, fma_iters=12)


def _chain(x, iters, rows):
    """The FMA kernel's math, written out again: a = a * b + c from x[n] + (r % 16) / 16."""
    x64 = x.astype(np.float64)
    b, c = 0.999 + x64[0] * 1e-4, x64[1] * 1e-3
    a = x64[None, :] + (np.arange(rows) % 16)[:, None] / 16.0
    for _ in range(iters):
        a = a * b + c
    return a


def test_microbenchmarks_match_numpy(benches):
    assert set(benches) == {"fma", "copy", "scale", "add", "triad"}
    b, c = benches["add"].arrays
    want = {"copy": b, "scale": 3.0 * b, "add": b + c, "triad": b + 3.0 * c}
    for name, expected in want.items():
        bench = benches[name]
        bench.out.fill(np.nan)
        got = bench.run()
        assert got.shape == (5013,)
        np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-6, err_msg=name)  # fused triad
    fma = benches["fma"]
    fma.out.fill(np.nan)
    got = fma.run()
    assert got.shape == (67, fma.arrays[0].size)
    np.testing.assert_allclose(got, _chain(fma.arrays[0], 12, 67), rtol=1e-5, atol=1e-6)


def test_work_counts(benches):
    n = 5013
    assert benches["copy"].work == 2 * 4 * n and benches["scale"].work == 2 * 4 * n
    assert benches["add"].work == 3 * 4 * n and benches["triad"].work == 3 * 4 * n
    width = benches["fma"].arrays[0].size
    assert benches["fma"].work == 2 * 12 * 67 * width
    assert benches["fma"].unit == "flop" and benches["copy"].unit == "byte"


def test_verify_passes_and_rejects_a_wrong_kernel(benches):
    for bench in benches.values():
        roofline.verify(bench)
    # The scale kernel was compiled with scale=3; a reference asking for 5 must not match.
    wrong = dataclasses.replace(benches["scale"], params={"scale": 5.0})
    with pytest.raises(MicrobenchmarkError, match="'scale' differs from NumPy"):
        roofline.verify(wrong)


def test_microbenchmark_ops_are_not_registered():
    names = {o.name for o in pypto.ops.builtin_ops()}
    assert not any(n.startswith("roofline") for n in names)
    assert roofline.roofline_fma.name == "roofline_fma"


def test_gpu_targets_and_unknown_kernels_are_refused():
    with pytest.raises(TargetError, match="CPU targets"):
        roofline.microbenchmarks("opencl", quick=True)
    with pytest.raises(ParamError, match="unknown kernel"):
        roofline.microbenchmarks(quick=True, only=["fma", "stream"])


def test_fma_kernel_emits_fused_multiply_adds():
    t = targets.host()
    if t.arch != hl.TargetArch.X86 or not t.has_feature(hl.TargetFeature.FMA):
        pytest.skip("the instruction count reads x86 FMA mnemonics")
    asm = roofline.fma_assembly(iters=8)
    assert asm["fused"] > 0 and asm["fused"] % asm["per_body"] == 0
    assert asm["mul"] == 0 and asm["add"] == 0  # no multiply-add left unfused


def test_measure_roofs_quick():
    roofs = roofline.measure_roofs(quick=True)
    values = [roofs.peak_gflops, *roofs.bandwidth_gbs.values()]
    assert set(roofs.bandwidth_gbs) == {"copy", "scale", "add", "triad"}
    assert all(v > 0 and math.isfinite(v) for v in values)
    assert roofs.best_bandwidth_gbs == max(roofs.bandwidth_gbs.values())
    assert roofs.threads >= 1 and roofs.cpu and roofs.quick
    width = min(64, 8 * roofline.vector_lanes(targets.host(), "float32"))
    assert roofs.sizes == {"stream_elems": 3 * 65536 + 37, "fma_rows": 70, "fma_iters": 16,
                           "fma_width": width}
    assert roofs.target.startswith(str(targets.host()).split("-")[0])
    assert Roofs.from_json(json.loads(json.dumps(roofs.to_json()))) == roofs
    assert "GFLOP/s" in str(roofs)


def test_main_prints_and_writes_json(tmp_path, monkeypatch, capsys):
    fixed = _roofs()
    monkeypatch.setattr(roofline, "measure_roofs", lambda target=None, quick=False: fixed)
    monkeypatch.setattr(roofline, "fma_assembly", lambda target=None: {
        "fused": 24, "mul": 0, "add": 0, "register": "ymm", "per_body": 8})
    path = tmp_path / "roofs.json"
    assert roofline.main(["--quick", "--json", str(path)]) == 0
    out = capsys.readouterr().out
    assert "24 packed FMA" in out and "100.0 GFLOP/s" in out
    assert Roofs.from_json(json.loads(path.read_text())) == fixed


# -- the cost model, hand-computed ---------------------------------------------------------------

def test_cost_matmul():
    c = op_cost("matmul", {"M": 2, "K": 3, "N": 4})
    assert (c.flops, c.bytes) == (2 * 2 * 3 * 4, (6 + 12 + 8) * 4)
    assert op_cost("matmul", "M=2,K=3,N=4") == c
    assert op_cost("matmul", "M=2,K=3,N=4", dtypes="float64").bytes == 26 * 8
    assert op_cost("batch_matmul", "B=3,M=2,K=3,N=4").flops == 3 * 48
    lin = op_cost("linear", "R=2,I=3,O=4")
    assert lin.flops == 2 * 2 * 4 * 3 + 2 * 4 and lin.bytes == (6 + 12 + 4 + 8) * 4


def test_cost_conv2d_groups_stride_padding():
    # 4 channels in 2 groups, 6 filters of 2 channels, 3x3, stride 2, padding 1 on a 5x5 image:
    # OH = OW = (5 + 2 - 3) // 2 + 1 = 3.
    c = op_cost("conv2d", "N=1,C=4,H=5,W=5,O=6,CG=2,KH=3,KW=3",
                {"groups": 2, "stride_h": 2, "stride_w": 2, "pad_h": 1, "pad_w": 1})
    outs = 6 * 3 * 3
    assert c.flops == 2 * outs * 2 * 9 + outs
    assert c.bytes == (4 * 25 + 6 * 2 * 9 + 6 + outs) * 4
    # derived dims given by the caller are recomputed, not trusted
    assert op_cost("conv2d", "N=1,C=4,H=5,W=5,O=6,CG=2,KH=3,KW=3,OH=99,OW=99",
                   {"groups": 2, "stride_h": 2, "stride_w": 2, "pad_h": 1, "pad_w": 1}) == c
    dw = op_cost("depthwise_conv2d", "N=1,C=3,H=4,W=4,M=1,KH=3,KW=3")  # OH = OW = 2
    assert dw.flops == 2 * 3 * 2 * 2 * 9 and dw.bytes == (48 + 27 + 3 * 4) * 4


def test_cost_normalizations_and_transcendentals():
    s = op_cost("softmax", "R=2,C=5")
    assert s.flops == 5 * 10 + 2 and s.bytes == 2 * 10 * 4
    assert op_cost("softmax", "R=2,C=5", transcendental=10).flops == 14 * 10 + 2
    assert op_cost("log_softmax", "R=2,C=5").flops == 5 * 10 + 2
    assert op_cost("layer_norm", "R=3,C=4").flops == 8 * 12 + 4 * 3
    assert op_cost("layer_norm", "R=3,C=4").bytes == (12 + 4 + 4 + 12) * 4
    assert op_cost("rms_norm", "R=3,C=4").flops == 4 * 12 + 3 * 3
    assert op_cost("box_blur", "B=1,H=4,W=5", {"size": 5}).flops == (2 * 4 + 1) * 20
    assert op_cost("swiglu", "R=2,C=3").flops == 6 * 5 and op_cost("swiglu", "R=2,C=3").bytes == 72
    sdpa = op_cost("scaled_dot_product_attention", "B=1,H=2,S=3,L=4,D=5,E=6")
    assert sdpa.flops == 2 * (2 * 12 * 5 + 2 * 12 * 6 + 6 * 12 + 3 * 6)
    assert sdpa.bytes == (30 + 40 + 48 + 36) * 4  # q, k, v, out (H = 2 included)


def test_cost_reductions_and_elementwise():
    assert op_cost("sum", "O=2,R=5").flops == 10 and op_cost("mean", "O=2,R=5").flops == 12
    assert op_cost("max", "O=2,R=5").bytes == (10 + 2) * 4
    assert op_cost("argmax", "O=2,R=5").bytes == 10 * 4 + 2 * 8  # int64 indices
    assert op_cost("sum", "O=2,R=5", dtypes="int32").bytes == 10 * 4 + 2 * 8  # int64 sums
    assert op_cost("var", "O=2,R=5").flops == 4 * 10 + 4
    assert op_cost("std", "O=2,R=5").flops == 4 * 10 + 4 + 2
    assert op_cost("relu", "N=10") == Cost(10.0, 80.0, op_cost("relu", "N=10").note)
    assert op_cost("exp", "N=10", transcendental=20).flops == 200
    assert op_cost("add", "R=2,C=3").bytes == 3 * 6 * 4
    assert op_cost("gelu", "N=10", {"approximate": "tanh"}).flops == 90
    assert op_cost("transpose", "R=2,C=3").flops == 0


def test_cost_fallback_and_errors():
    c = op_cost("sobel", "B=1,H=4,W=5")
    assert c.flops == 20 and c.bytes == 2 * 20 * 4 and c.note.startswith("estimate")
    with pytest.raises(DtypeError, match="not a signature"):
        op_cost("matmul", "M=2,K=3,N=4", dtypes="int8")
    with pytest.raises(pypto.errors.ShapeError, match="missing K"):
        op_cost("matmul", "M=2,N=4")


# -- placement -----------------------------------------------------------------------------------

def _roofs(peak=100.0, bw=10.0) -> Roofs:
    return Roofs(peak_gflops=peak, bandwidth_gbs={"copy": bw / 2, "triad": bw}, threads=2,
                 cpu="Test CPU", target="x86-64-linux", date="2024-01-02T03:04:05+00:00")


def test_place_memory_and_compute_bound():
    roofs = _roofs()  # ridge at 10 flop/byte
    assert roofs.ridge == 10.0 and roofs.attainable_gflops(2.0) == 20.0
    m = place(Cost(1e9, 1e9, ""), 100.0, roofs)  # 10 GFLOP/s, 10 GB/s, intensity 1
    assert m["bound"] == "memory" and m["intensity"] == 1.0
    assert m["gflops"] == pytest.approx(10.0) and m["gbs"] == pytest.approx(10.0)
    assert m["roof_gflops"] == pytest.approx(10.0) and m["fraction"] == pytest.approx(1.0)
    c = place(Cost(1e9, 1e6, ""), 20.0, roofs)  # 50 GFLOP/s at intensity 1000
    assert c["bound"] == "compute" and c["roof_gflops"] == 100.0
    assert c["fraction"] == pytest.approx(0.5)
    t = place(Cost(0.0, 1e9, ""), 200.0, roofs)  # a transpose: 5 GB/s, no flops
    assert t["bound"] == "memory" and t["fraction"] == pytest.approx(0.5)
    with pytest.raises(ParamError, match="time_ms"):
        place(Cost(1.0, 1.0, ""), 0.0, roofs)


# -- the chart -----------------------------------------------------------------------------------

def test_plot_roofline_writes_a_png(tmp_path):
    pytest.importorskip("matplotlib")
    roofs = _roofs()
    points = [{**place(op_cost("matmul", "M=64,K=64,N=64"), 0.05, roofs), "label": "matmul",
               "series": "PyPTO"},
              {**place(op_cost("softmax", "R=64,C=64"), 0.01, roofs), "label": "softmax",
               "series": "NumPy"},
              {**place(op_cost("transpose", "R=64,C=64"), 0.01, roofs), "label": "transpose"}]
    path = tmp_path / "roof.png"
    assert plot_roofline(points, roofs, str(path), title="unit test") == str(path)
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(data) > 20_000
