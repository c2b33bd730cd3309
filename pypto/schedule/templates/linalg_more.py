"""Default schedules of einsum's contraction, addmm and baddbmm (pypto/ops/contraction.py).

Their Funcs have the shape of the matrix products' (``acc[n, m(, b)] += a[k, m] * b[n, k]``,
then ``out`` from ``acc``), so they take the blocked product schedule of templates/linalg.py,
with the same tunable knobs; the operand staged along ``n`` is ``b``, ``mat2`` or ``batch2``.
"""

from __future__ import annotations

from ..defaults import D, generic, template
from .linalg import (BATCH_GEMM_KNOBS, GEMM_KNOBS, _b_bytes, _fit, _fit_batched, _lanes_for,
                     _wide, gemm_directives)


@template("einsum", knobs=BATCH_GEMM_KNOBS)
def _einsum(built, dims, lanes, **knobs):
    lanes = _lanes_for(built, lanes)
    return gemm_directives(dims, lanes, n="n", m="m", k="k$x", N=dims["N"], M=dims["M"],
                           K=dims["K"], batch="b", B=dims["B"],
                           **_fit_batched(dims, knobs, _b_bytes(built), lanes, _wide(lanes)))


@template("addmm", knobs=GEMM_KNOBS)
def _addmm(built, dims, lanes, **knobs):
    lanes = _lanes_for(built, lanes)
    return gemm_directives(dims, lanes, n="n", m="m", k="k$x", N=dims["N"], M=dims["M"],
                           K=dims["K"], b_src="mat2", **_fit(knobs))


@template("baddbmm", knobs=BATCH_GEMM_KNOBS)
def _baddbmm(built, dims, lanes, **knobs):
    lanes = _lanes_for(built, lanes)
    return gemm_directives(dims, lanes, n="n", m="m", k="k$x", N=dims["N"], M=dims["M"],
                           K=dims["K"], batch="b", B=dims["B"], b_src="batch2",
                           out_reads=_out_reads(built, "input"),
                           **_fit_batched(dims, knobs, _b_bytes(built), lanes, _wide(lanes)))


def _out_reads(built, *names: str) -> tuple:
    """Which of the inputs ``names`` the output reads (baddbmm with beta=0 does not read input)."""
    calls = built.funcs["out"].calls
    return tuple(n for n in names if n in calls or f"{n}_im" in calls)


#: Matrices per task of a batched trace (one vector of float64 or int64 sums).
TRACE_BLOCK = 8


@template("trace")
def _trace(built, dims, lanes):
    """Batches of matrices: tasks of TRACE_BLOCK matrices, their diagonals summed as one vector
    (a gather per step: each diagonal element is a line of its own). A diagonal read is a cache
    miss more often than not, so two threads overlap twice the misses: 64 matrices of 512 x 512,
    AOT kernels, steady state 0.114 ms against 0.171 serial (torch 0.094). Fewer matrices run
    serially, vectorized across them where they fill a vector."""
    if dims["B"] < 2 * TRACE_BLOCK:
        return generic(built, dims, lanes)
    return [D("split", "out", var="b", outer="bo", inner="bi", factor=TRACE_BLOCK),
            D("vectorize", "out", var="bi"),
            D("parallel", "out", var="bo"),
            D("compute_at", "acc", at="out", var="bo"),
            D("vectorize", "acc", var="b", factor=TRACE_BLOCK),
            D("vectorize", "acc", 1, var="b", factor=TRACE_BLOCK)]
