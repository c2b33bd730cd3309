"""``pypto bench --overhead``: the kernel-alone call computes the op, and the report has every
case and candidate. Times are printed, never asserted."""

from __future__ import annotations

import numpy as np
from click.testing import CliRunner

import pypto.ops as P
from pypto.bench import overhead
from pypto.cli.main import cli


def test_the_kernel_alone_writes_the_result_of_the_public_call():
    x = np.arange(16, dtype=np.float32)
    y = np.full(16, 0.5, np.float32)
    run, kind = overhead.kernel_only(P.add, (x, y))
    run.outputs[0][:] = -1
    run()
    np.testing.assert_array_equal(run.outputs[0], x + y)
    a = np.random.default_rng(0).standard_normal((16, 16)).astype(np.float32)
    b = a[::-1].copy()
    run, _ = overhead.kernel_only(P.matmul, (a, b))
    run()
    np.testing.assert_allclose(run.outputs[0], a @ b, rtol=1e-5, atol=1e-5)


def test_the_cli_reports_every_case_with_the_target():
    r = CliRunner().invoke(cli, ["bench", "--overhead", "--quick", "--compare", "numpy"])
    assert r.exit_code == 0, r.output
    for case in ("add 16 floats", "exp 16 floats", "sum 16 floats", "matmul 16x16",
                 "matmul 64x64"):
        assert case in r.output
    assert f"target: overhead (pypto - kernel) <= {overhead.TARGET_US:g} us" in r.output
