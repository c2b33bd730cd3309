"""Default schedules of the detection ops that pool boxes.

``roi_pool`` and ``roi_align`` (output ``out[ow, oh, c, k]``): boxes are parallel tasks; what
depends on the box and a bin but not on the channel (roi_pool's bin edges ``bin_rows`` and
``bin_cols``, roi_align's sample positions and weights ``sample_rows`` and ``sample_cols``) is
computed once per box, the bins' maxima or sums (``acc``) per box too, the output row vectorized
along OW where it is a vector wide. (Inlined, as the generic schedule has them, the edges and
samples were recomputed for every channel, and roi_pool's edges at every pixel of a bin: 1,000
boxes on a 256 x 50 x 68 map, two threads, medians: roi_pool 306 -> 90 ms; roi_align 144-199
-> 132-139 ms, where the bilinear samples of every channel are the cost.)
"""

from __future__ import annotations

from ..defaults import D, template


def _per_box(built, dims, lanes: int, per_box: tuple[str, ...]) -> list:
    ds = [D("parallel", "out", var="k")]
    ow = dims.get("OW") or 1
    if ow >= 4:
        ds.append(D("vectorize", "out", var="ow", factor=min(lanes, 1 << (ow.bit_length() - 1))))
    return ds + [D("compute_at", f, at="out", var="k") for f in ("acc",) + per_box]


@template("roi_pool")
def roi_pool(built, dims, lanes: int) -> list:
    return _per_box(built, dims, lanes, ("bin_rows", "bin_cols"))


@template("roi_align")
def roi_align(built, dims, lanes: int) -> list:
    return _per_box(built, dims, lanes, ("sample_rows", "sample_cols"))
