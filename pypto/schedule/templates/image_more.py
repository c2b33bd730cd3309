"""Default schedules of the morphology, filter, colour, warp and histogram ops
(pypto/ops/{morphology,filters,color,warp,histograms}.py).

Window ops reuse the strip schedule of the separable filters (templates/image.py): strips of
output rows run in parallel, a row pass (when the op has one) is computed per strip with its halo,
and everything is vectorized along W. Morphology on uint8 compares bytes directly, so it keeps the
full byte vector width (the blurs halve it for their wider sums).
"""

from __future__ import annotations

from ..defaults import D, MIN_TASK_ELEMS, generic, output_directives, template
from .image import _separable


def _footprint_halo(params) -> int:
    rows = params.get("footprint", "1").split("/")
    return len(rows) // 2


def _morph(row_funcs, passes):
    base = _separable(row_funcs, lambda p: passes * _footprint_halo(p))

    def fn(built, dims, lanes):
        if built.out_dtypes[0] in ("uint8", "int8"):
            lanes *= 2     # undo the halving the blurs' template applies (max/min stay 8-bit)
        return base(built, dims, lanes)
    return fn


template("dilate")(_morph(["rows0"], 1))
template("erode")(_morph(["rows0"], 1))
template("morph_open")(_morph(["rows0", "stage0", "rows1"], 2))
template("morph_close")(_morph(["rows0", "stage0", "rows1"], 2))
