"""Default schedules of the bool ops: ``logical_and``, ``logical_or`` (kernel [R, C]) and
``logical_not`` ([N]).

A bool is one byte. The generic default sizes tasks in elements (``MIN_TASK_ELEMS``, 64 KB of a
float32 output but 16 KB of a bool one) and its vector loop moves one 32-byte vector an iteration.
These ops cost one or two loads, one logic instruction and one store per vector, less per byte
than any float op, so they take tasks of ``BYTE_TASK`` elements (256 KB of output) and an inner
loop of ``UNROLL`` vectors (128 bytes an iteration, as NumPy's own bool loops do).
Measured here (2 cores under load from other work, kernel alone with ``out=``, 4M bools, single
calls after a pause, median of the per-round ratio NumPy time / PyPTO time over 50 rounds):
``logical_not`` 0.86-0.88 with the generic default, 0.94-0.96 with these tasks; ``logical_and``
(2048 x 2048) 0.91-0.95 against 1.00-1.02.

Every tail is guarded, never shifted inwards: an output written over its own input
(``logical_not(x, out=x)``) must not compute an element twice, the second time from the
already overwritten input.
"""

from __future__ import annotations

from ..defaults import D, template

#: Elements (bytes) of output per parallel task.
BYTE_TASK = 1 << 18
#: Vectors per iteration of the innermost loop.
UNROLL = 4


def _vector_loop(var: str, n: int, lanes: int) -> list:
    """Vectorize ``var`` (extent ``n``) by ``lanes``, ``UNROLL`` vectors an iteration where it
    is long enough, with a guarded tail."""
    if n >= lanes * UNROLL:
        return [D("split", "out", var=var, outer=f"{var}u", inner=f"{var}v",
                  factor=lanes * UNROLL, tail="guard_with_if"),
                D("split", "out", var=f"{var}v", outer=f"{var}k", inner=f"{var}l", factor=lanes),
                D("vectorize", "out", var=f"{var}l"),
                D("unroll", "out", var=f"{var}k")]
    if n >= lanes:
        return [D("vectorize", "out", var=var, factor=lanes, tail="guard_with_if")]
    return []


@template("logical_not")
def flat_bytes(built, dims, lanes):
    n = dims["N"]
    if n < 2 * BYTE_TASK:
        return _vector_loop("n", n, lanes)
    return [D("split", "out", var="n", outer="no", inner="ni", factor=BYTE_TASK,
              tail="guard_with_if"),
            D("parallel", "out", var="no"),
            *_vector_loop("ni", BYTE_TASK, lanes)]


@template("logical_and")
@template("logical_or")
def rows_of_bytes(built, dims, lanes):
    n_r, n_c = dims["R"], dims["C"]
    if n_r * n_c < 2 * BYTE_TASK:
        return _vector_loop("c", n_c, lanes)
    rows = BYTE_TASK // n_c          # rows per task
    if rows >= 1 and n_r >= 2 * rows:
        ds = _vector_loop("c", n_c, lanes)
        if rows == 1:
            return ds + [D("parallel", "out", var="r")]
        return ds + [D("split", "out", var="r", outer="ro", inner="ri", factor=rows,
                       tail="guard_with_if"),
                     D("parallel", "out", var="ro")]
    # Few long rows: chunks of each row are the tasks.
    return [D("split", "out", var="c", outer="co", inner="ci", factor=BYTE_TASK,
              tail="guard_with_if"),
            *_vector_loop("ci", BYTE_TASK, lanes),
            D("fuse", "out", inner="co", outer="r", fused="task"),
            D("parallel", "out", var="task")]
