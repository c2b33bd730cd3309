"""Default schedule of quantized_matmul: register-blocked tiles of the int32 accumulator.

Each tile of the output (3 vectors along N by 8 rows along M) is accumulated over all of K in
registers: per k, a few vectors of ``b`` and one broadcast of ``a`` per row. Row blocks run in
parallel. Small outputs fall back to the generic default.
"""

from __future__ import annotations

from ..defaults import D, generic, template

TILE_ROWS = 8
TILE_VECTORS = 3


@template("quantized_matmul")
def _quantized_matmul(built, dims, lanes):
    M, N = dims.get("M", 1), dims.get("N", 1)
    tn, tm = TILE_VECTORS * lanes, TILE_ROWS
    if N < tn or M < tm:
        return generic(built, dims, lanes)
    k = built.funcs["acc"].updates[0][0]
    return [
        D("tile", "out", x="n", y="m", xo="no", yo="mo", xi="ni", yi="mi", xfactor=tn,
          yfactor=tm),
        D("vectorize", "out", var="ni", factor=lanes),
        D("unroll", "out", var="mi"),
        D("parallel", "out", var="mo"),
        D("compute_at", "acc", at="out", var="no"),
        D("vectorize", "acc", var="n", factor=lanes),
        D("unroll", "acc", var="m"),
        D("reorder", "acc", 1, vars=["n", "m", k]),
        D("split", "acc", 1, var="n", outer="no", inner="ni", factor=lanes),
        D("vectorize", "acc", 1, var="ni"),
        D("unroll", "acc", 1, var="no"),
        D("unroll", "acc", 1, var="m"),
    ]
