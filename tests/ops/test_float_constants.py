"""Float64 constants in op algorithms are exact on every target (``pypto/ops/_consts.py``).

Halide's OpenCL C prints a float64 literal through float32, so an op that wrote ``hl.f64(0.1)``
computed with float32(0.1) there. The OpenCL side is checked in
``tests/gpu/test_opencl_ops.py::test_float64_constants_reach_opencl_exactly``; this file checks the
helpers on the CPU and that no op module bypasses them.
"""

from __future__ import annotations

import pathlib
import re

import halide as hl
import numpy as np
import pytest

from pypto.ops._consts import exact_in_float32, lit, lit64

OPS_DIR = pathlib.Path(__file__).resolve().parents[2] / "pypto" / "ops"


def _realize(expr_of_x, n=8):
    x = hl.Var("x")
    f = hl.Func("f")
    f[x] = expr_of_x(hl.cast(hl.Float(64), x))
    return np.asarray(f.realize([n]))


def test_no_op_module_writes_a_bare_float64_literal():
    offenders = []
    for path in sorted(OPS_DIR.glob("*.py")):
        if path.name == "_consts.py":
            continue
        for i, line in enumerate(path.read_text().splitlines(), 1):
            if re.search(r"\bhl\.f64\(", line):
                offenders.append(f"{path.name}:{i}: {line.strip()}")
    assert not offenders, ("float64 constants must come from pypto.ops._consts (lit64 / lit), "
                           "which keeps them exact on OpenCL:\n" + "\n".join(offenders))


@pytest.mark.parametrize("v", [0.0, 1.0, -2.0, 0.5, 3.0, 2.0 ** -20, float("inf"), float("nan")])
def test_a_value_float32_holds_stays_a_plain_literal(v):
    e = lit64(v)
    assert e.type() == hl.Float(64)
    assert "reinterpret" not in str(e)       # the simplifier (and bounds inference) still sees it


@pytest.mark.parametrize("v", [0.1, 1.0 / 9.0, 1e-5, -0.7, 1e300, 2.0 ** -1074])
def test_a_value_float32_cannot_hold_is_exact_to_the_last_bit(v):
    assert not exact_in_float32(v)
    e = lit64(v)
    assert e.type() == hl.Float(64) and "reinterpret" in str(e)
    got = _realize(lambda x: x * 0 + e)
    assert np.array_equal(got, np.full(8, v))
    # and in arithmetic, the same as the float64 literal would give on a CPU
    got = _realize(lambda x: x * e)
    assert np.array_equal(got, np.arange(8) * v)


def test_lit_in_a_narrower_type_is_folded_to_that_type():
    # A float32 kernel never carries a float64 value, so a device without float64 can run it.
    e = lit(hl.Float(32), 0.1)
    assert e.type() == hl.Float(32)
    assert "float64" not in str(e) and "reinterpret" not in str(e)
    got = _realize(lambda x: hl.cast(hl.Float(64), e))
    assert np.array_equal(got, np.full(8, float(np.float32(0.1))))
    assert lit(hl.Int(32), 7.0).type() == hl.Int(32)
    assert "reinterpret" in str(lit(hl.Float(64), 0.1))
