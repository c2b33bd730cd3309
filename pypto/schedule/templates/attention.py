"""Default schedule of scaled dot-product attention: one block of queries at a time.

Each parallel task takes ``QB`` queries of one (batch, head) and computes, in buffers of ``QB x L``,
their scores, row maxima, exponentials and row sums, then the weighted sum of values; the full
``S x L`` score matrix never exists. Score and probability buffers are stored with the query index
innermost so that the row reductions (max, sum) run as vertical vector operations over queries.

- scores: register blocks of the ``QB`` queries (3 vectors) by 4 keys, the reduction over D
  inside; the block's queries are first copied transposed (``qs``) so that vectors of queries load
  with unit stride.
- num (the product with v): per block of 2 vectors of E, register blocks of 2 vectors by 6 queries,
  keys in blocks of 64 so that the rows of v they read stay in L1.

Small problems get a schedule whose factors do not depend on the sizes (one compiled kernel).
"""

from __future__ import annotations

from ..defaults import D, template

SI = "shift_inwards"
GW = "guard_with_if"

#: Below this many multiply-adds the size-independent schedule is used.
SMALL_MACS = 1 << 20

KEYS_PER_BLOCK = 4     # keys per register block of the score product
E_VECTORS = 2          # vectors of E per register block of the value product
Q_PER_BLOCK = 6        # queries per register block of the value product
UNROLL = 4             # unrolling of the reductions over D and L
L_BLOCK = 64           # keys per block of the value product (its rows of v stay in L1)


def _small(lanes: int) -> list:
    """Small problems: one query at a time, vectors along keys and value columns. No factor
    depends on the sizes, so one compiled kernel serves every small shape."""
    ds = [D("vectorize", "out", var="e", factor=lanes, tail=GW)]
    for f in ("scores", "rowmax", "p", "denom", "num"):
        ds.append(D("compute_at", f, at="out", var="s"))
    for f, var in (("scores", "l"), ("p", "l"), ("num", "e")):
        ds += [D("vectorize", f, var=var, factor=lanes, tail=GW)]
    ds += [D("vectorize", "scores", 1, var="l", factor=lanes, tail=GW),
           D("vectorize", "num", 1, var="e", factor=lanes, tail=GW)]
    return ds


@template("masked_attention")         # the same Funcs; its mask tests inline into scores and p
@template("scaled_dot_product_attention")
def _sdpa(built, dims, lanes):
    if built.out_dtypes[0] == "float16":
        lanes //= 2  # computed in float32
    S, L, E, Dd = dims["S"], dims["L"], dims["E"], dims["D"]
    if dims["B"] * dims["H"] * S * L * (Dd + E) < SMALL_MACS:
        return _small(lanes)
    vec = lanes if S >= lanes else 1
    qb = min(3 * lanes, lanes * (S // lanes)) if vec > 1 else S
    evec = lanes if E >= lanes else 1
    # Columns of the output (and of num) handled per inner step: E_VECTORS vectors at most.
    eb = min(E_VECTORS * evec, evec * (E // evec)) if evec > 1 else E
    ds = []
    # Output: query blocks of all (batch, head) pairs form one parallel loop; inside a task,
    # blocks of eb columns.
    ds += [D("split", "out", var="s", outer="so", inner="si", factor=qb, tail=SI),
           D("split", "out", var="e", outer="eo", inner="ei", factor=eb, tail=SI),
           D("reorder", "out", vars=["ei", "si", "eo", "so"])]
    if evec > 1:
        ds += [D("split", "out", var="ei", outer="eio", inner="eii", factor=evec, tail=SI),
               D("vectorize", "out", var="eii")]
    ds += [D("fuse", "out", inner="so", outer="h", fused="sh"),
           D("fuse", "out", inner="sh", outer="b", fused="task"),
           D("parallel", "out", var="task")]

    # Transposed copy of the block's queries: qs[d, s] stored with s innermost.
    ds += [D("wrap", "q", consumer="scores", **{"as": "qs"}),
           D("compute_at", "qs", at="out", var="task"),
           D("reorder_storage", "qs", vars=["_1", "_0", "_2", "_3"])]

    # Scores of the block: s innermost in storage; 3 vectors of s by 4 keys per register block.
    ds += [D("compute_at", "scores", at="out", var="task"),
           D("reorder_storage", "scores", vars=["s", "l", "h", "b"]),
           D("reorder", "scores", vars=["s", "l"])]
    if vec > 1:
        ds.append(D("vectorize", "scores", var="s", factor=vec, tail=GW))
    kb = min(KEYS_PER_BLOCK, L)
    du = min(UNROLL, Dd)
    ds += [D("split", "scores", 1, var="l", outer="lo", inner="li", factor=kb, tail=GW),
           D("split", "scores", 1, var="dd$x", outer="ddo", inner="ddi", factor=du, tail=GW)]
    if vec > 1:
        ds += [D("split", "scores", 1, var="s", outer="so", inner="sv", factor=vec, tail=GW),
               D("reorder", "scores", 1, vars=["sv", "so", "li", "ddi", "ddo", "lo"]),
               D("vectorize", "scores", 1, var="sv"),
               D("unroll", "scores", 1, var="so", factor=qb // vec, tail=GW)]
    else:
        ds += [D("reorder", "scores", 1, vars=["s", "li", "ddi", "ddo", "lo"])]
    ds += [D("unroll", "scores", 1, var="li"), D("unroll", "scores", 1, var="ddi")]

    # Row maxima and sums: vectors of queries, the loop over keys inside.
    for f, r in (("rowmax", "lm$x"), ("denom", "ls$x")):
        ds += [D("compute_at", f, at="out", var="task")]
        if vec > 1:
            ds += [D("vectorize", f, var="s", factor=vec, tail=GW),
                   D("split", f, 1, var="s", outer="so", inner="sv", factor=vec, tail=GW),
                   D("reorder", f, 1, vars=["sv", "so", r]),
                   D("vectorize", f, 1, var="sv"),
                   D("unroll", f, 1, var="so", factor=qb // vec, tail=GW)]

    # Probabilities of the block, stored like the scores.
    ds += [D("compute_at", "p", at="out", var="task"),
           D("reorder_storage", "p", vars=["s", "l", "h", "b"]),
           D("reorder", "p", vars=["s", "l"])]
    if vec > 1:
        ds.append(D("vectorize", "p", var="s", factor=vec, tail=GW))

    # Weighted values of one block of eb columns: register blocks of E_VECTORS vectors of E by
    # Q_PER_BLOCK queries, keys in blocks of L_BLOCK (whose rows of v stay in L1).
    ds += [D("compute_at", "num", at="out", var="eo")]
    if evec > 1:
        qn = min(Q_PER_BLOCK, qb)
        ds += [D("vectorize", "num", var="e", factor=evec, tail=GW),
               D("split", "num", 1, var="lv$x", outer="lvo", inner="lvi", factor=min(L, L_BLOCK),
                 tail=GW),
               D("split", "num", 1, var="lvi", outer="lvio", inner="lvii",
                 factor=min(L, L_BLOCK, UNROLL), tail=GW),
               D("split", "num", 1, var="e", outer="eo", inner="ei", factor=evec, tail=GW),
               D("split", "num", 1, var="s", outer="so", inner="si", factor=qn, tail=GW),
               D("reorder", "num", 1, vars=["ei", "eo", "si", "lvii", "lvio", "so", "lvo"]),
               D("vectorize", "num", 1, var="ei"),
               D("unroll", "num", 1, var="eo", factor=eb // evec, tail=GW),
               D("unroll", "num", 1, var="si"),
               D("unroll", "num", 1, var="lvii")]
    return ds
