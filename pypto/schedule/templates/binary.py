"""Default schedules of the broadcasting binary ops (kernel form [R, C] -> [R, C]).

The generic default vectorizes C and runs rows in parallel. A 1-D input becomes one long row
(R = 1) and a few rows are too few tasks, so long rows are cut into chunks of ``MIN_TASK_ELEMS``
elements and the (chunk, row) pairs run in parallel.
"""

from __future__ import annotations

from ..defaults import MIN_TASK_ELEMS, D, output_directives, template

#: Fewer rows than this use chunks of the rows as parallel tasks.
FEW_ROWS = 16

BINARY_OPS = ("add", "sub", "mul", "div", "pow", "maximum", "minimum", "where", "swiglu")


def rows_or_chunks(built, dims, lanes, task=MIN_TASK_ELEMS):
    """Rows in parallel tasks of about ``task`` elements, or chunks of ``task`` elements of
    the rows of a short [R, C] output (a 1-D call is one long row)."""
    n_r, n_c = dims["R"], dims["C"]
    if n_r >= FEW_ROWS or n_c < 2 * task:
        return output_directives("out", ("c", "r"), dims, lanes, task=task)
    return [
        D("split", "out", var="c", outer="co", inner="ci", factor=task),
        D("vectorize", "out", var="ci", factor=lanes),
        D("fuse", "out", inner="co", outer="r", fused="task"),
        D("parallel", "out", var="task"),
    ]


for _name in BINARY_OPS:
    template(_name)(rows_or_chunks)
