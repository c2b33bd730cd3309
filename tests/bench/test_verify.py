"""The one output check (``pypto.infra.verify``): element by element, infinities and NaNs in place.

Every consumer (the tuner's worker, ``pypto bench``, profiling, memory, roofline, the database
tools) goes through it; the last test keeps a second comparison from growing back elsewhere.
"""

import ast
import pathlib

import numpy as np
import pytest

from pypto.bench.harness import Candidate, Context, Item
from pypto.bench import harness
from pypto.bench.verify import mismatch

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_a_result_wrong_only_in_its_small_elements_is_rejected():
    want = np.array([1000.0, 0.001, 0.002, -0.003, 500.0], np.float32)
    got = want.copy()
    got[1:4] = 0.0  # wholly wrong, but tiny next to the largest magnitude
    why = mismatch(got, want)
    assert why is not None and "3 of 5" in why
    assert mismatch(want.copy(), want) is None


def test_each_element_gets_its_own_relative_tolerance():
    want = np.linspace(1e-3, 1e3, 64).astype(np.float32)
    assert mismatch(want * np.float32(1 + 2e-4), want) is None    # within float32 rtol everywhere
    assert mismatch(want * np.float32(1 + 1e-2), want) is not None  # 1% off everywhere


@pytest.mark.parametrize("got", [[1.0, 1.0, 2.0],          # inf replaced by a number
                                 [-np.inf, 1.0, 2.0],      # the wrong infinity
                                 [np.inf, 1.0, np.inf],    # an extra infinity
                                 [np.nan, 1.0, 2.0]])      # inf replaced by NaN
def test_infinities_must_sit_where_the_reference_has_them(got):
    want = np.array([np.inf, 1.0, 2.0], np.float32)
    assert mismatch(np.array(got, np.float32), want) is not None
    assert mismatch(want.copy(), want) is None


@pytest.mark.parametrize("got", [[np.nan, np.nan, 2.0],    # a NaN where the reference has a number
                                 [0.0, 1.0, 2.0],          # a number where the reference has NaN
                                 [np.inf, 1.0, 2.0]])
def test_nans_must_sit_where_the_reference_has_them(got):
    want = np.array([np.nan, 1.0, 2.0], np.float64)
    assert mismatch(np.array(got), want) is not None
    assert mismatch(want.copy(), want) is None


def test_integers_and_bools_match_exactly_and_shapes_must_agree():
    want = np.arange(6, dtype=np.int32)
    off = want.copy()
    off[3] += 1
    assert "1 of 6" in mismatch(off, want)
    assert mismatch(np.array([True, False]), np.array([True, True])) is not None
    assert "shape" in mismatch(want[:3], want)


def test_the_bench_rejects_a_candidate_wrong_only_in_small_elements():
    ctx = Context(Item("softmax", "R=4,C=64"))
    want = ctx.want[0].copy()
    want[0, 0] = 1e4  # one large element sets the scale a max-scaled check would use
    ctx.want = [want]
    small = np.zeros_like(want)
    small[0, 0] = want[0, 0]  # every other element wholly wrong
    cands = {"right": Candidate(fn=lambda: None, label="right", outputs=lambda: [want.copy()]),
             "small": Candidate(fn=lambda: None, label="small", outputs=lambda: [small])}
    good, bad, _ = harness.verify(ctx, cands)
    assert list(good) == ["right"] and "small" in bad, bad


def _comparisons(path: pathlib.Path) -> list[str]:
    """Calls in ``path`` that compare arrays by tolerance, or read a dtype's tolerance."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Attribute) and node.attr in ("allclose", "isclose", "assert_allclose"):
            found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.attr}")
        if isinstance(node, ast.ImportFrom) and any(a.name == "tolerance" for a in node.names):
            found.append(f"{path.relative_to(ROOT)}:{node.lineno}: imports tolerance")
    return found


def test_one_verification_routine_in_the_library_and_the_tuner():
    home = ROOT / "pypto" / "infra" / "verify.py"
    files = [p for d in ("pypto", "autotune") for p in (ROOT / d).rglob("*.py") if p != home]
    found = [hit for p in files for hit in _comparisons(p)]
    assert not found, "compare outputs through pypto.infra.verify.mismatch, not by hand:\n" + "\n".join(found)


def test_the_docstring_example_runs():
    import doctest

    import pypto.infra.verify

    assert doctest.testmod(pypto.infra.verify).failed == 0
