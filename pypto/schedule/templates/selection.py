"""Default schedule of ``median`` (``pypto.ops.sorting``): selection by counting passes.

Blocks of rows are parallel tasks; each block's keys are staged with the row index innermost
(``keys[o, i, r]``), so every counting pass (``cnt<b>``, ``rest``) runs over the row with one
vector of rows per load, and the candidates between passes (``cand<b>``, ``low``) are one vector
each. Fewer rows than a vector: the same at root, vectorized along nothing.
"""

from __future__ import annotations

from ..defaults import D, template

#: Rows per parallel task, in vectors (the block's keys stay in L2: 2 x 8 rows of 8192 float32
#: keys is 512 KiB).
_VECTORS = 1


def _selection(built, dims, lanes):
    n_o = dims.get("O", 1)
    passes = [n for n, f in built.funcs.items()
              if not f.is_input and not f.is_output and n != "keys"]
    ds: list = []
    if n_o < lanes:
        ds.append(D("compute_root", "keys"))
        for n in passes:
            ds.append(D("compute_root", n))
        return ds
    block = min(n_o - n_o % lanes, _VECTORS * lanes)
    ds += [D("split", "out", var="o", outer="oo", inner="oi", factor=block),
           D("parallel", "out", var="oo"),
           D("vectorize", "out", var="oi", factor=lanes)]
    ds += [D("compute_at", "keys", at="out", var="oo"),
           D("vectorize", "keys", var="o", factor=lanes)]
    for n in passes:
        f = built.funcs[n]
        ds += [D("compute_at", n, at="out", var="oo"),
               D("vectorize", n, var="o", factor=lanes)]
        if f.updates:
            # One vector of rows at a time through the whole row: its count stays in a
            # register (a loop over the vectors inside the row loop kept it in memory, a
            # store-to-load round trip per step: ~3x slower).
            (r,) = f.updates[0]
            ds += [D("split", n, 1, var="o", outer="o_o", inner="o_v", factor=lanes),
                   D("reorder", n, 1, vars=["o_v", r, "o_o", "i"]),
                   D("vectorize", n, 1, var="o_v")]
    return ds


template("median")(_selection)
