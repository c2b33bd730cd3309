"""Peak memory of one call, each measured in a fresh process (behaviour only, no speed)."""

import pytest

from pypto.bench.memory import STUDIES, MemoryResult, growth_table, memory_growth, peak_memory
from pypto.bench.peers import torch_available

# 512 x 512 float32: a 1 MiB output, above the allocator's mmap threshold the child sets, so the
# output's pages are new to the process and must show in its peak.
DIMS = {"R": 512, "C": 512}
OUT_BYTES = 512 * 512 * 4


def test_pypto_and_numpy_peaks_cover_the_output():
    results = memory_growth("swiglu", [DIMS], impls=("pypto", "numpy", "torch"))
    by = {r.impl: r for r in results}
    for impl in ("pypto", "numpy"):
        r = by[impl]
        assert r.reason is None, r
        assert r.output_bytes == OUT_BYTES and r.input_bytes == 2 * OUT_BYTES
        assert r.rss_source == "VmHWM"
        # The call allocates its output: at least that much new resident memory (minus a page
        # or two the allocator may already hold).
        assert r.peak_rss_bytes >= OUT_BYTES - 8192, r
    assert by["pypto"].checked is True
    assert by["pypto"].halide_heap_peak_bytes is not None and by["pypto"].schedule_source
    # NumPy's swiglu makes full-size temporaries besides its output.
    assert by["numpy"].peak_rss_bytes > by["pypto"].peak_rss_bytes
    assert "temporaries" in by["numpy"].note
    t = by["torch"]
    assert (t.peak_rss_bytes is not None and t.checked) or t.reason
    table = growth_table(results)
    assert "R=512,C=512" in table and "pypto" in table and "numpy" in table


def test_an_intermediate_shows_in_the_halide_heap():
    """softmax's default schedule keeps a buffer of the exponentials: Halide's heap sees it."""
    r = peak_memory("pypto", "softmax", {"R": 64, "C": 4096}, check=True)
    assert r.reason is None, r
    assert r.checked is True and r.output_bytes == 64 * 4096 * 4
    assert r.halide_heap_peak_bytes > 0
    assert r.peak_rss_bytes >= r.output_bytes - 8192


def test_a_missing_peer_and_a_timeout_are_results_with_reasons():
    # The child runs this interpreter, so it sees PyTorch exactly when this process does; the
    # README's test command must pass with and without it installed.
    r = peak_memory("torch", "nms", {"N": 8, "E": 4})     # torchvision's op: no torch peer
    why = "no PyTorch peer for nms" if torch_available() else "PyTorch is not installed"
    assert r.peak_rss_bytes is None and why in r.reason
    r = peak_memory("numpy", "swiglu", DIMS, timeout_s=0.01)
    assert r.peak_rss_bytes is None and "timed out" in r.reason
    r = peak_memory("numpy", "swiglu", {"R": 4})
    assert r.peak_rss_bytes is None and "shape must name" in r.reason
    with pytest.raises(ValueError, match="impl must be one of"):
        peak_memory("cupy", "swiglu", DIMS)


def test_result_round_trips_and_studies_are_defined():
    r = MemoryResult(impl="numpy", op="swiglu", dims=DIMS, dtypes=("float32", "float32"),
                     peak_rss_bytes=5, output_bytes=4)
    assert MemoryResult.from_json(r.to_json()) == r
    assert [s["S"] for s in STUDIES["attention"]["sizes"]] == [512, 2048, 8192]
    assert [s["R"] * s["C"] for s in STUDIES["elementwise"]["sizes"]] == [2**20, 2**22, 2**24]
