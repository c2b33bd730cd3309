"""Default schedules of the unary elementwise ops (kernel form [N] -> [N]).

The generic default (blocks of ``MIN_TASK_ELEMS`` elements in parallel, vectorized inside) suits
them all. ``sin`` and ``cos`` also have an update of the output that recomputes the rare elements
the fast path cannot take:

- float64: the elements of huge magnitude, with the C library (RVar ``big$x``, predicated on
  |x|). That update is a plain serial scan: splitting it would make its predicate read past the
  input's end.
- float32: every tile of ``HUGE_TILE`` elements holding a huge |x|, with the exact reduction
  (RVar ``redo$x`` in tiles, each a vector loop run only when its flag ``huge_tile``, the tile's
  largest |x| from a vectorized vertical max ``huge_column`` computed just before it, says so),
  in parallel tasks of about MIN_TASK_ELEMS elements.

Halide rounds the pure stage of a Func with updates up to whole splits unless told otherwise, so
that stage's tails are given explicitly.
"""

from __future__ import annotations

from ..defaults import MIN_TASK_ELEMS, D, generic, template


def with_serial_fixup(built, dims, lanes):
    out = built.funcs["out"]
    if not out.updates:
        return generic(built, dims, lanes)
    ds = _pure_stage(dims["N"], lanes)
    for u, (rv,) in enumerate(out.updates):
        ds.append(D("serial", "out", u + 1, var=rv))
    return ds


#: Tiles of ``pypto.ops.elementwise.HUGE_TILE`` elements (not imported: ops sit above this layer).
HUGE_TILE = 64


def _pure_stage(n, lanes):
    ds = []
    inner = "n"
    if n >= 2 * MIN_TASK_ELEMS:
        ds += [D("split", "out", var="n", outer="no", inner="ni", factor=MIN_TASK_ELEMS,
                 tail="shift_inwards"),
               D("parallel", "out", var="no")]
        inner = "ni"
    if n >= lanes > 1:
        ds.append(D("vectorize", "out", var=inner, factor=lanes, tail="shift_inwards"))
    return ds


def fast_then_huge_tiles(built, dims, lanes):
    """sin/cos/tan: the float32 tile update when the op has one, else ``with_serial_fixup``."""
    if "huge_tile" not in built.funcs:
        return with_serial_fixup(built, dims, lanes)
    n = dims["N"]
    (rv,) = built.funcs["out"].updates[0]
    (kv,) = built.funcs["huge_tile"].updates[0]
    cols = 8   # HUGE_LANES of pypto.ops.elementwise
    ds = _pure_stage(n, lanes)
    ds += [D("split", "out", 1, var=rv, outer="tile", inner="lane", factor=HUGE_TILE,
             tail="guard_with_if"),
           D("vectorize", "out", 1, var="lane", factor=lanes)]
    at = "tile"
    if n >= 2 * MIN_TASK_ELEMS:
        ds += [D("split", "out", 1, var="tile", outer="tiles", inner="t",
                 factor=MIN_TASK_ELEMS // HUGE_TILE, tail="guard_with_if"),
               D("parallel", "out", 1, var="tiles")]
        at = "t"
    return ds + [D("compute_at", "huge_column", at="out", var=at),
                 D("vectorize", "huge_column", var="j", factor=cols),
                 D("compute_at", "huge_tile", at="out", var=at),
                 D("atomic", "huge_tile", 1),
                 D("vectorize", "huge_tile", 1, var=kv, factor=cols)]


for _name in ("sin", "cos"):
    template(_name)(fast_then_huge_tiles)
