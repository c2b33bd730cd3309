"""Halide's profiler report as data: real runs, the profile() context, and `pypto profile`."""

import json

import pytest
from click.testing import CliRunner
from helpers import assert_close, rand

import pypto
from pypto.bench.profile import parse_report, profile_call
from pypto.cli.main import cli

# Printed by this Halide for a parallel softmax (kept verbatim: the parser's contract).
REPORT = """out
 total time: 8.317126 ms  samples: 3  runs: 1  time per run: 8.317126 ms
 average threads used: 1.333333
 heap allocations: 256  peak heap usage: 16384 bytes
    waiting for parallel tasks to finish:      0.000ms ( 0.0%)   threads: 0.000 
    halide_malloc:                             0.000ms ( 0.0%)   threads: 0.000 
    out$3:                                     8.316ms (99.9%)   threads: 2.000 
    e:                                         0.000ms ( 0.0%)   threads: 0.000  peak: 16384    num: 256       avg: 8192
    rowmax_intm:                               0.000ms ( 0.0%)   threads: 0.000  stack: 64
"""


def test_parse_report_fields():
    blocks, other = parse_report("unrelated line\n" + REPORT)
    assert other == "unrelated line"
    (b,) = blocks
    assert (b.name, b.samples, b.runs, b.allocations, b.heap_peak) == ("out", 3, 1, 256, 16384)
    assert b.total_ms == pytest.approx(8.317126) and b.threads == pytest.approx(1.333333)
    rows = {r["name"]: r for r in b.rows}
    assert list(rows) == ["waiting for parallel tasks to finish", "halide_malloc", "out", "e",
                          "rowmax_intm"]
    assert rows["out"]["pct"] == 99.9 and rows["out"]["threads"] == 2.0
    assert (rows["e"]["peak"], rows["e"]["num"], rows["e"]["avg"]) == (16384, 256, 8192)
    assert rows["rowmax_intm"]["stack"] == 64 and rows["rowmax_intm"]["peak"] is None


def test_profile_call_on_a_tiny_softmax():
    x = rand((8, 16), seed=1)
    # Calls this short rarely meet a sample: keep calling until one lands.
    rep = profile_call("softmax", [x], schedule="default", min_samples=1, budget_s=60.0)
    names = {f.name for f in rep.funcs}
    assert {"rowmax", "rowsum", "out"} <= names
    assert rep.samples >= 1 and rep.runs >= 1
    assert sum(f.percent for f in rep.funcs) == pytest.approx(100.0, abs=1.5)
    assert all(f.ms >= 0 and 0 <= f.percent <= 100 for f in rep.funcs)
    assert rep.total_ms > 0
    # The default schedule keeps the row reductions at root: heap buffers of 8 rows.
    assert rep.heap_peak_bytes >= 8 * 4 and rep.heap_allocations >= 1
    assert rep.func("rowmax").heap_peak_bytes >= 8 * 4 and rep.func("rowmax").allocations >= 1
    assert rep.peak_rss_bytes and rep.peak_rss_bytes >= rep.rss_before_bytes
    assert "rowmax" in rep.table() and "Halide heap" in rep.table()


def test_profile_collects_calls_and_results_still_match_numpy():
    from pypto.ops.norm import _softmax_ref

    a, b = rand((8, 16), seed=2), rand((5, 33), seed=3)
    with pypto.profile() as prof:
        ya = pypto.ops.softmax(a)
        yb = pypto.ops.softmax(b)
    outside = pypto.ops.softmax(a)
    assert_close(ya, _softmax_ref(a))
    assert_close(yb, _softmax_ref(b))
    assert_close(outside, ya)
    assert len(prof.calls) == 2
    assert [c.dims for c in prof.calls] == [{"R": 8, "C": 16}, {"R": 5, "C": 33}]
    assert all(c.op == "softmax" and "profile" in c.target for c in prof.calls)
    assert all({"rowmax", "out"} <= {f.name for f in c.funcs} for c in prof.calls)
    text = str(prof)
    assert text.count("softmax [") == 2 and "heap peak" in text and "process RSS" in text


def test_profile_through_the_compile_cache(tmp_path, monkeypatch):
    """Kernels loaded from the on-disk cache report through their own runtime."""
    monkeypatch.setenv("PYPTO_CACHE_DIR", str(tmp_path))
    from pypto.compiler import diskcache

    if not diskcache.enabled(pypto.compiler.targets.host()):
        pytest.skip("no C++ compiler for the compile cache")
    from pypto.ops.norm import _softmax_ref

    x = rand((6, 10), seed=4)
    with pypto.profile() as prof:
        y = pypto.ops.softmax(x)
    assert_close(y, _softmax_ref(x))
    (c,) = prof.calls
    assert c.text.startswith("pypto_")  # the cached library's function, not the JIT's pipeline
    assert c.runs == 1 and c.total_ms > 0
    assert "rowmax" in {f.name for f in c.funcs} and c.heap_peak_bytes > 0


def test_profile_call_inside_profile_is_not_counted_twice():
    x = rand((4, 8), seed=5)
    with pypto.profile() as prof:
        rep = profile_call("softmax", [x], runs=3)
    assert rep.runs == 3 and prof.calls == []


def _cli(*args):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def test_cli_profile_writes_html_and_json(tmp_path):
    html, js = tmp_path / "nest.html", tmp_path / "r.json"
    r = _cli("profile", "softmax", "--shape", "R=8,C=16", "--runs", "2", "--min-samples", "0",
             "--schedule", "default", "--stmt-html", str(html), "--json", str(js))
    assert r.exit_code == 0, r.output
    assert "softmax [R=8,C=16]" in r.output and "Halide heap" in r.output
    text = html.read_text()
    assert "<html" in text.lower() and "rowmax" in text
    data = json.loads(js.read_text())
    assert data["op"] == "softmax" and data["dims"] == {"R": 8, "C": 16} and data["runs"] >= 2
    assert {"rowmax", "out"} <= {f["name"] for f in data["funcs"]}


def test_cli_profile_json_to_stdout():
    r = _cli("profile", "exp", "--shape", "N=32", "--runs", "1", "--min-samples", "0",
             "--json", "-")
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["op"] == "exp"


def test_cli_profile_errors_are_one_line():
    r = _cli("profile", "no_such_op", "--shape", "R=4")
    assert r.exit_code == 2 and r.output.startswith("error: no op named 'no_such_op'")
    r = _cli("profile", "softmax", "--shape", "R=4,C=x")
    assert r.exit_code == 2 and r.output.startswith("error: shape item")
    r = _cli("profile", "softmax", "--shape", "R=4,C=4", "--schedule", "nope.json")
    assert r.exit_code == 2 and "--schedule" in r.output


_FALLBACK = r"""
import sys
import numpy as np, pypto
from pypto.compiler import targets
from pypto.compiler.lower import build, fingerprint
from pypto.database import DirectoryDatabase, Entry, Key, provenance
from pypto.schedule.directives import Directive
from pypto.schedule.schedule import Schedule

op = pypto.get_op("softmax")
fp = fingerprint(build(op, ("float32",), {}))
key = Key.make("softmax", ("float32",), {"R": 8, "C": 33}, {}, targets.family(targets.host()), fp)
broken = Schedule("softmax", (Directive.make("split", "out", var="c", outer="co", inner="ci", factor=64,
                                             tail="shift_inwards"),))
DirectoryDatabase(sys.argv[1]).commit([Entry(key=key, schedule=broken,
                                             provenance=provenance(method="test", target="host"))])
pypto.add_schedule_path(sys.argv[1])
x = np.random.default_rng(0).random((8, 33)).astype(np.float32)
want = np.exp(x - x.max(1, keepdims=True)); want /= want.sum(1, keepdims=True)
for first_plain in (True, False):
    if first_plain:
        np.testing.assert_allclose(pypto.ops.softmax(x), want, rtol=1e-5)
    with pypto.profile() as prof:
        np.testing.assert_allclose(pypto.ops.softmax(x), want, rtol=1e-5)
    assert len(prof.calls) == 1 and "failed" in prof.calls[0].schedule_source, prof.calls
    pypto.compiler.jit.clear_memory_cache()
from pypto.bench.profile import profile_call
rep = profile_call("softmax", [x])
assert "failed" in rep.schedule_source, rep.schedule_source
print("ok")
"""


@pytest.mark.parametrize("cache", ["disk", "off"])
def test_profiling_a_call_whose_stored_schedule_fails_falls_back_and_reports(tmp_path, cache):
    # Halide's profiled runtime crashes the process when a call fails, so the stored schedule is
    # tried unprofiled first; the call then falls back to the default like any other call.
    import os
    import subprocess
    import sys

    env = dict(os.environ, PYPTO_CACHE_DIR=str(tmp_path / "cache") if cache == "disk" else "off")
    p = subprocess.run([sys.executable, "-c", _FALLBACK, str(tmp_path / "db")], env=env,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0 and p.stdout.strip().endswith("ok"), (p.returncode, p.stderr[-2000:])
