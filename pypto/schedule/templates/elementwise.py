"""Default schedules of the unary elementwise ops (kernel form [N] -> [N]).

The generic default (blocks of ``MIN_TASK_ELEMS`` elements in parallel, vectorized inside) suits
them all. ``sin`` and ``cos`` in float64 also have an update of the output that recomputes the
rare elements of huge magnitude with the C library (RVar ``big$x``, predicated on |x|). That
update is a plain serial scan: splitting it would make its predicate read past the input's end.
Halide rounds the pure stage of a Func with updates up to whole splits unless told otherwise, so
that stage's tails are given explicitly.
"""

from __future__ import annotations

from ..defaults import MIN_TASK_ELEMS, D, generic, template


def with_serial_fixup(built, dims, lanes):
    out = built.funcs["out"]
    if not out.updates:
        return generic(built, dims, lanes)
    n = dims["N"]
    ds = []
    inner = "n"
    if n >= 2 * MIN_TASK_ELEMS:
        ds += [D("split", "out", var="n", outer="no", inner="ni", factor=MIN_TASK_ELEMS,
                 tail="shift_inwards"),
               D("parallel", "out", var="no")]
        inner = "ni"
    if n >= lanes > 1:
        ds.append(D("vectorize", "out", var=inner, factor=lanes, tail="shift_inwards"))
    for u, (rv,) in enumerate(out.updates):
        ds.append(D("serial", "out", u + 1, var=rv))
    return ds


for _name in ("sin", "cos"):
    template(_name)(with_serial_fixup)
