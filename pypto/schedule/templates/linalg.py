"""Default schedules of the linear algebra ops: blocked matrix products and tiled transposes.

The matrix product ``out[n, m] = sum_k a[k, m] * b[n, k]`` is computed in tiles of the output, one
parallel task per tile. A tile is ``TX`` columns by ``TY`` rows; its accumulator ``acc`` lives in a
small buffer and is updated by a register block of ``RY`` rows by ``RX = 3 vectors`` columns at a
time, with the reduction over ``k`` split into blocks of ``KC`` (so that the slice of ``b`` a
register block reads stays in L1) and unrolled by ``KU``. The ``TX`` columns of ``b`` a tile needs
are first copied to a dense staging buffer (``bp``), which keeps the inner loop on unit-stride loads
whatever the row stride of ``b``. linear's weight is stored [N, K] (rows along k): its tile panel is
its transpose ``wt``, gathered a vector of weight rows at a time (:func:`_stage_transposed`), and the
rest of its plan is matmul's.

Batched products (batch_matmul, einsum, baddbmm) whose k fits one block keep each register block's
sums in registers over all of k instead (:func:`register_gemm_directives`), and run one task per
batch entry and row tile, which copies the entry's ``b`` once and stages its column panels from the
copy (see ``BATCH_GEMM_KNOBS`` for what the tuner may change).

Every split's factor is derived from the call's sizes so that any size is correct: output splits use
``shift_inwards`` (factors never exceed the extent), splits inside the accumulator use
``guard_with_if`` (only the reduction can have a partial block).
"""

from __future__ import annotations

import numpy as np

from ..defaults import D, output_directives, template
from ..directives import LIMITS

SI = "shift_inwards"
GW = "guard_with_if"

#: Register block: RY output rows by REG_VECTORS vectors of output columns (12 accumulators).
RY = 4
REG_VECTORS = 3
#: Output rows per tile, reduction block, and reduction unroll.
TY = 512
KC = 512
KU = 4
#: Products with fewer multiply-adds use the small-product schedule (one thread).
SERIAL_MACS = 1 << 18
#: Rows per parallel task of a matrix-vector product.
MATVEC_ROWS = 64
#: Fewer output rows than this do not pay for staging ``b``.
STAGE_MIN_ROWS = 16
#: A register-blocked tile of fewer rows than this reads its columns of ``b`` in place: a staged
#: panel would serve too few rows to pay for its copy. One thread, Halide's profiler,
#: float32 matmul (M x K x N; tile rows in brackets), staged -> in place, ms per call:
#: 64 x 512 x 2048 (64) 1.71 -> 1.41 (the copy alone 0.40), 64 x 2048 x 512 (64) 1.44 -> 1.28,
#: 128 x 512 x 2048 (128) 3.10 -> 2.96, 256 x 512 x 2048 (256) 5.18 -> 4.96, 256 x 1024 x 1024
#: (256) 4.92 -> 4.90; with more rows the copy pays: 1024 x 512 x 2048 (516) 20.14 -> 20.26,
#: 1024^3 (516) 21.09 -> 22.06.
PANEL_MIN_ROWS = 257


def _lanes_for(built, lanes: int) -> int:
    # float16 products are computed in float32: use the float32 vector width.
    return lanes // 2 if built.out_dtypes[0] == "float16" else lanes


def _fit_unroll(ku: int, body: int) -> int:
    """``ku`` halved until a stage's unrolled body (``body`` values per step of k, times ``ku``)
    fits :data:`LIMITS`: with 16-lane vectors (AVX-512) a register block of 3 rows by 4 vectors
    unrolled 8 times along k was 1536 values, past what a schedule may unroll."""
    while ku > 1 and body * ku > LIMITS["unrolled_body"]:
        ku //= 2
    return ku


def _row_tile(M: int, ry: int, ty: int) -> tuple[int, int]:
    """(register rows, tile rows): the M rows cut into tiles of at most about ``ty`` rows, of
    equal size rounded up to whole register blocks (never more than M). Rounding ``min(ty, M)``
    down to a multiple of ``ry`` instead made two tiles of M = 130 rows (128, then 128 shifted
    inwards), computing most rows twice."""
    ry = min(ry, M)
    tiles = -(-M // max(ty, ry))
    rows = -(-M // tiles)
    return ry, min(M, -(-rows // ry) * ry)


def gemm_directives(dims, lanes: int, *, n: str, m: str, k: str, N: int, M: int, K: int,
                    batch: str | None = None, B: int = 1, b_src: str = "b",
                    b_is_func: bool = False, b_k: str = "j", ry: int = RY,
                    reg_vectors: int = REG_VECTORS,
                    ty: int = TY, kc: int = KC, ku: int = KU, stage: bool = True,
                    acc: str = "tile", task: str = "tile", out_reads: tuple = ()) -> list:
    """Directives for ``out[n, m(, batch)] = acc``, ``acc[n, m] += a[k, m] * B[n, k]``.

    ``b_src`` is the operand read along ``n`` in the inner loop: an input (staged with ``wrap``)
    or a Func of the algorithm (computed per tile). Products of one output column use
    :func:`matvec_directives`, small ones :func:`small_gemm_directives`. ``acc`` says where the
    sums live: ``"tile"`` (a tile buffer updated one k block at a time), ``"register"`` (each
    register block's sums stay in registers over all of k and are written to ``out`` once, see
    :func:`register_gemm_directives`, which also reads ``task``) or ``"auto"`` (registers when
    k fits one block).
    """
    if M * N * K * B < SERIAL_MACS:
        return small_gemm_directives(lanes, n=n, m=m, b_src=b_src, b_is_func=b_is_func)
    if N == 1 and K >= lanes and batch is None:
        return matvec_directives(lanes, n=n, m=m, k=k, M=M)
    if acc == "register" or (acc == "auto" and K <= kc):
        return register_gemm_directives(lanes, n=n, m=m, k=k, N=N, M=M, batch=batch,
                                        b_src=b_src, b_is_func=b_is_func, b_k=b_k, ry=ry,
                                        reg_vectors=reg_vectors, ty=ty, ku=ku, stage=stage,
                                        task=task, out_reads=out_reads)
    ds: list = []
    # Columns: a register block is RX = up to REG_VECTORS vectors; narrow outputs use what fits.
    if N >= lanes:
        vec = lanes
        tx = min(reg_vectors * lanes, lanes * (N // lanes))
    else:
        vec = 1
        tx = N
    ry, ty = _row_tile(M, ry, ty)
    kc = min(kc, K)
    ku = _fit_unroll(min(ku, kc), tx * ry)
    ds += [D("split", "out", var=n, outer="no", inner="ni", factor=tx, tail=SI),
           D("split", "out", var=m, outer="mo", inner="mi", factor=ty, tail=SI),
           D("reorder", "out", vars=["ni", "mi", "no", "mo"])]
    if vec > 1:
        ds += [D("split", "out", var="ni", outer="nio", inner="nii", factor=vec, tail=SI),
               D("vectorize", "out", var="nii")]
    # One task per output tile; consecutive tasks share the rows of ``a`` they read.
    ds.append(D("fuse", "out", inner="no", outer="mo", fused="tile"))
    task = "tile"
    if batch is not None:
        ds.append(D("fuse", "out", inner="tile", outer=batch, fused="task"))
        task = "task"
    ds.append(D("parallel", "out", var=task))
    # The accumulator of one tile, updated one register block at a time.
    ds.append(D("compute_at", "acc", at="out", var=task))
    if vec > 1:
        ds.append(D("vectorize", "acc", var=n, factor=vec))
    ds += [D("split", "acc", 1, var=k, outer="ko", inner="ki", factor=kc, tail=GW),
           D("split", "acc", 1, var="ki", outer="kio", inner="kii", factor=ku, tail=GW),
           D("split", "acc", 1, var=m, outer="mo", inner="mi", factor=ry, tail=GW)]
    if vec > 1:
        ds.append(D("split", "acc", 1, var=n, outer="nio", inner="nii", factor=vec, tail=GW))
        ds.append(D("reorder", "acc", 1, vars=["nii", "nio", "mi", "kii", "kio", "mo", "ko"]))
        ds.append(D("vectorize", "acc", 1, var="nii"))
        ds.append(D("unroll", "acc", 1, var="nio", factor=tx // vec, tail=GW))
    else:
        ds.append(D("reorder", "acc", 1, vars=[n, "mi", "kii", "kio", "mo", "ko"]))
        if tx > 1:
            ds.append(D("unroll", "acc", 1, var=n, factor=tx, tail=GW))
    ds += [D("unroll", "acc", 1, var="mi"), D("unroll", "acc", 1, var="kii")]
    # Stage the operand's columns of a tile (all of k) densely.
    _stage_b(ds, b_src, b_is_func, task, n, vec, M, stage and tx < N, b_k=b_k)
    return ds


def _columns(N: int, lanes: int, reg_vectors: int) -> tuple[int, int]:
    """(vector width, columns per register block): up to ``reg_vectors`` vectors, fewer when the
    output is narrower; one column at a time (no vectors) when it is narrower than a vector."""
    if N >= lanes:
        return lanes, min(reg_vectors * lanes, lanes * (N // lanes))
    return 1, N


def _stage_b(ds: list, b_src: str, b_is_func: bool, at: str, n: str, vec: int, M: int,
             stage: bool, panel_at: str | None = None, b_k: str = "j") -> None:
    """Stages the operand read along n: the tile's columns of all of k, copied densely (a packed
    panel) at loop level ``at``, so the inner loop reads it with unit stride from L1. With
    ``panel_at``, whole rows of it are first copied at that outer level (a sequential read that
    the prefetchers follow), and the dense panels are cut from that copy (in L2).

    The callers pass ``stage`` false when one panel spans all of the operand's columns: the inner
    loop then reads whole rows of it in order, as a copy would, and the copies only cost (and,
    for register-blocked tiles, when a tile has too few rows to pay for the copy:
    ``PANEL_MIN_ROWS``). At
    8 x 64^3 float32 (one thread, Halide's profiler, ~6,000 calls each) the two copies and their
    allocations took 8.7 of 53.3 us per call; without them the kernel took 41.4. Through
    ``pypto.ops.batch_matmul(..., out=)``, one thread, best of five blocks of 3,000 calls: 44.6
    us against NumPy's 38.6.

    A Func operand (linear's ``wt``, the transpose of a weight stored [n, k]: pure vars ``n`` and
    ``b_k``) is computed per tile instead, one vector of ``vec`` weight rows at a time over all of
    k (see :func:`_stage_transposed`)."""
    if b_is_func:
        ds.append(D("compute_at", b_src, at="out", var=at))
        if vec > 1:
            ds += _stage_transposed(b_src, n, b_k, vec)
        return
    if M < STAGE_MIN_ROWS or not stage:
        return
    src = b_src
    if panel_at is not None:
        ds += [D("wrap", b_src, consumer="acc", **{"as": "brows"}),
               D("compute_at", "brows", at="out", var=panel_at)]
        if vec > 1:
            ds.append(D("vectorize", "brows", var="_0", factor=vec))
        src = "brows"
    ds += [D("wrap", src, consumer="acc", **{"as": "bp"}),
           D("compute_at", "bp", at="out", var=at)]
    if vec > 1:
        ds.append(D("vectorize", "bp", var="_0", factor=vec))


def _stage_transposed(func: str, n: str, k: str, vec: int) -> list:
    """The panel ``func[n, k] = w[k, n]`` of a tile (its ``TX`` columns n, a multiple of ``vec``,
    by all of k) from a weight ``w`` whose rows (fixed n) are contiguous along k: vectors of
    ``vec`` values along n, each gathered from ``vec`` rows of ``w``, with the ``vec`` rows of one
    vector read over all of k before the next ``vec`` rows.

    Going over k for all ``TX`` rows at once (k outside n) read 24 rows a row stride apart in
    turn: with a power-of-two row stride (K = 1024 floats is 4 KiB) their cache lines share one
    L1 set, more of them than it has ways, and each line was fetched again for every k. Halide's
    profiler, float32, R = I = O = 1024, one thread, under load (two runs each): that copy took
    12.5-14.3% of linear's time, this order 2.7-4.4% (matmul's dense copy of its operand 7-11%).
    End to end the two ran level within the noise of a loaded machine (one thread, CPU time,
    interleaved, median of 80: 31.25 against 31.29 ms; R=4096: 121.6 against 125.2, 12 rounds)."""
    return [D("split", func, var=n, outer="no", inner="ni", factor=vec, tail=SI),
            D("reorder", func, vars=["ni", k, "no"]),
            D("vectorize", func, var="ni")]


def register_gemm_directives(lanes: int, *, n: str, m: str, k: str, N: int, M: int,
                             batch: str | None = None, b_src: str = "b", b_is_func: bool = False,
                             b_k: str = "j", ry: int = RY, reg_vectors: int = REG_VECTORS, ty: int = TY,
                             ku: int = KU, stage: bool = True, task: str = "tile",
                             out_reads: tuple = ()) -> list:
    """The blocked product with its sums in registers.

    ``out`` is cut into tiles of ``TX`` columns by ``TY`` rows, a tile into register blocks of
    ``RY`` rows by ``TX`` columns; each block's ``acc`` is ``RY x TX`` values computed over all of
    k (``RY * RX`` vector accumulators, stored only as ``out`` is written from them). Without a
    k-blocked accumulator buffer there is no zeroing pass, no reload per k block and no copy
    into ``out``; the price is that a staged panel spans all of k, which suits products whose k
    fits a block (the panel stays in L1).

    ``task`` says what one parallel task is, the batch always outermost (consecutive tasks share
    a batch entry's operands):

    - ``"tile"``: one tile; its ``TX`` columns of ``b`` are staged densely per task, as in
      :func:`gemm_directives`. Many small tasks: suits any shape.
    - ``"rows"`` (batched products): ``TY`` rows of one batch entry, across all columns. The
      task first copies the entry's ``b`` whole (K x N, read row by row), then stages each
      ``TX``-column panel densely from that copy before its register blocks run. Staging straight
      from ``b`` reads 96 bytes per row of ``b`` a stride apart, which the prefetchers follow
      poorly: it took 12-13% of a 8x256^3 product (Halide's profiler), the two copies 5%.
      The inputs in ``out_reads`` (read by ``out`` at its own coordinates, as baddbmm's
      ``input``) are copied per task too, the task's rows whole, for the same reason: read a
      register block at a time they took 20% of baddbmm's 8x256^3 (one thread, CPU time, under
      load: 4.15 ms, copied 3.63, NumPy's matmul then add 3.62).
    """
    vec, tx = _columns(N, lanes, reg_vectors)
    ry, ty = _row_tile(M, ry, ty)
    rows = task == "rows" and batch is not None
    ku = _fit_unroll(ku, tx * ry)
    ds = [D("split", "out", var=n, outer="no", inner="ni", factor=tx, tail=SI),
          D("split", "out", var=m, outer="mo", inner="mi", factor=ty, tail=SI),
          D("split", "out", var="mi", outer="mio", inner="mii", factor=ry, tail=SI)]
    if vec > 1:
        ds.append(D("split", "out", var="ni", outer="nio", inner="nii", factor=vec, tail=SI))
        inner = ["nii", "nio"]
    else:
        inner = ["ni"]
    ds.append(D("reorder", "out", vars=inner + ["mii", "mio", "no", "mo"]))
    if rows:   # the column panels (no) run inside the task
        ds.append(D("fuse", "out", inner="mo", outer=batch, fused="task"))
        at, panel_at, par = "no", "task", "task"
    else:
        ds.append(D("fuse", "out", inner="no", outer="mo", fused="tile"))
        at, panel_at, par = "tile", None, "tile"
        if batch is not None:
            ds.append(D("fuse", "out", inner="tile", outer=batch, fused="task"))
            at = par = "task"
    ds.append(D("parallel", "out", var=par))
    if vec > 1:
        ds += [D("vectorize", "out", var="nii"), D("unroll", "out", var="nio")]
    elif tx > 1:
        ds.append(D("unroll", "out", var="ni"))
    ds.append(D("unroll", "out", var="mii"))
    # One register block's sums: RY x TX values, every lane unrolled (so they stay in registers)
    # around the k loop.
    ds.append(D("compute_at", "acc", at="out", var="mio"))
    if vec > 1:
        ds += [D("vectorize", "acc", var=n, factor=vec),
               D("split", "acc", 1, var=n, outer="nio", inner="nii", factor=vec, tail=GW)]
        lanes_vars = ["nii", "nio"]
    else:
        lanes_vars = [n]
    ds.append(D("unroll", "acc", var=n))
    ds.append(D("unroll", "acc", var=m))
    if ku > 1:
        ds += [D("split", "acc", 1, var=k, outer="ko", inner="ki", factor=ku, tail=GW),
               D("reorder", "acc", 1, vars=lanes_vars + [m, "ki", "ko"]),
               D("unroll", "acc", 1, var="ki")]
    else:
        ds.append(D("reorder", "acc", 1, vars=lanes_vars + [m, k]))
    if vec > 1:
        ds += [D("vectorize", "acc", 1, var="nii"), D("unroll", "acc", 1, var="nio")]
    elif tx > 1:
        ds.append(D("unroll", "acc", 1, var=n))
    ds.append(D("unroll", "acc", 1, var=m))
    panel = stage and tx < N and (rows or ty >= PANEL_MIN_ROWS)
    _stage_b(ds, b_src, b_is_func, at, n, vec, M, panel, panel_at, b_k=b_k)
    if rows:
        for src in out_reads:
            ds += [D("wrap", src, consumer="out", **{"as": f"{src}_rows"}),
                   D("compute_at", f"{src}_rows", at="out", var="task")]
            if vec > 1:
                ds.append(D("vectorize", f"{src}_rows", var="_0", factor=vec))
    return ds


def matvec_directives(lanes: int, *, n: str, m: str, k: str, M: int) -> list:
    """One output column: each row's dot product is split into ``lanes`` partial sums (a vector
    along k, contiguous in both operands), added up at the end."""
    ty = min(MATVEC_ROWS, M)
    ru = min(RY, ty)
    return [
        D("bound", "out", var=n, min=0, extent=1),
        D("split", "out", var=m, outer="mo", inner="mi", factor=ty, tail=SI),
        D("parallel", "out", var="mo"),
        D("compute_at", "acc", at="out", var="mo"),
        D("split", "acc", 1, var=k, outer="ko", inner="kv", factor=lanes, tail=GW),
        D("rfactor", "acc", 1, pairs=[["kv", "u"]], intm="partial"),
        D("compute_at", "partial", at="out", var="mo"),
        D("vectorize", "partial", var="u"),
        D("split", "partial", 1, var=m, outer="mo", inner="mi", factor=ru, tail=GW),
        D("reorder", "partial", 1, vars=["u", "mi", "ko", "mo"]),
        D("vectorize", "partial", 1, var="u"),
        D("unroll", "partial", 1, var="mi"),
    ]


def small_gemm_directives(lanes: int, *, n: str, m: str, b_src: str, b_is_func: bool) -> list:
    """A schedule for small products that does not depend on the sizes (one compiled kernel
    serves them all): rows of the output vectorized along n, each row's sums in registers."""
    ds = [D("vectorize", "out", var=n, factor=lanes, tail=GW),
          D("compute_at", "acc", at="out", var=m),
          D("vectorize", "acc", var=n, factor=lanes, tail=GW),
          D("vectorize", "acc", 1, var=n, factor=lanes, tail=GW)]
    if b_is_func:
        ds.append(D("compute_root", b_src))
    return ds


#: What the tuner may change in the blocked product (first value = the default above). The
#: register block stays within the vector registers: ry * reg_vectors accumulators plus operands
#: (see :func:`_fit`).
GEMM_KNOBS = {"ry": (RY, 2, 3, 5, 6, 8), "reg_vectors": (REG_VECTORS, 1, 2, 4),
              "ty": (TY, 32, 64, 128, 256, 1024), "kc": (KC, 64, 128, 256, 1024),
              "ku": (KU, 1, 2, 8), "stage": (True, False)}
#: Accumulators a register block may hold: of 16 vector registers (AVX2, NEON's 128-bit
#: halves), and of 32 (AVX-512, whose vectors are 512 bits wide).
MAX_ACC = 14
MAX_ACC_WIDE = 24
#: float32 lanes of a vector that comes with 32 vector registers (AVX-512).
WIDE_LANES = 16


def _wide(lanes: int) -> bool:
    """Whether a product of ``lanes``-lane vectors gets the wide register block (WIDE_RY): float32
    on AVX-512. float64 there (8 lanes) keeps the 16-register plan, which nothing measured beat:
    1024^3, two threads, medians of 7 blocks, JIT-compiled kernels: 4 x 3 in the tile buffer
    19.5 ms, 6 x 4 in registers 19.5, 5 x 4 19.1, 4 x 3 in registers 18.0 (spread 10-20%), torch
    16.3."""
    return lanes >= WIDE_LANES


def _fit(knobs: dict, wide: bool = False) -> dict:
    cap = MAX_ACC_WIDE if wide else MAX_ACC
    while knobs.get("ry", RY) * knobs.get("reg_vectors", REG_VECTORS) > cap and knobs["ry"] > 1:
        knobs["ry"] -= 1
    return knobs


#: The matrix product's knobs: as the batched products', where the sums live (``acc``) and
#: ``"auto"`` row tiles, both resolved by :func:`_fit_matmul`.
MATMUL_KNOBS = {**GEMM_KNOBS, "ry": ("auto",) + GEMM_KNOBS["ry"],
                "reg_vectors": ("auto",) + GEMM_KNOBS["reg_vectors"],
                "ty": ("auto",) + GEMM_KNOBS["ty"], "acc": ("auto", "register", "tile")}
#: The register block of a float32 product on 512-bit vectors: WIDE_RY rows by WIDE_VECTORS vectors
#: (24 of the 32 registers), its sums in registers over all of k. Kernels compiled as calls run
#: them (ahead of time, PyPTO's thread pool), two threads, median of 7-9 blocks of 5 calls after a
#: pause, side by side with torch (MKL, ``out=``): 1024^3 7.36 ms against 8.85 for 4 x 3 in a
#: k-blocked tile buffer (torch 7.12); 2048^3 61.0 against 68.6 (torch 63.6); 512^3 1.28 against
#: 1.38 for 4 x 3 in registers (torch 1.24); 256^3 0.29 against 0.35. The tuner, timing the
#: same way, had found 6 x 4 at 256^3 too (0.177 ms against the 4 x 3 default's 0.275).
WIDE_RY = 6
WIDE_VECTORS = 4
#: Row tiles are halved (down to MIN_TILE_ROWS rows) while a matrix product has fewer parallel
#: tasks than this, so that a few threads get even shares (64^3 made 3 tasks, 128^3 made 6).
#: Not more: at 256^3 (11 tasks of 24 columns) two row tiles staged every column panel twice and
#: ran 2-3% slower on two threads (median of 150 single calls, under load).
MIN_TASKS = 8
MIN_TILE_ROWS = 32
#: The k block of float32 products on 512-bit vectors whose tiles have fewer than PANEL_MIN_ROWS
#: rows: sums in a k-blocked tile buffer, the tile's columns of ``b`` staged densely. Register
#: blocks over all of k read ``b`` in place there, a row stride apart; with a power-of-two row
#: stride (N = 2048 floats, 8 KiB) every row of the panel falls in the same few L1 sets. Intel
#: Xeon (Sapphire Rapids), two threads, kernel into its output, median of 7 blocks of 5 calls
#: after a pause, ms, register blocks -> k-blocked tile (torch.mm ``out=``): 64x512x2048 1.85 ->
#: 0.78 (0.82), 128x512x2048 4.34 -> 1.27 (1.30), 256x1024x1024 6.89 -> 2.53 (2.72), 64x2048x512
#: 2.15 -> 0.81 (0.68), 16x1024x1024 0.71 -> 0.39 (0.33), 256x4096x1024 30.8 -> 13.7 (10.1);
#: level where the stride is not a power of two (64x500x2000 0.97 both, torch 1.01) and at
#: 32x512x512 and 256^3. A k block of 256 or 64 was slower at the first three shapes. Only from
#: SKINNY_MIN_K: below it the two ran level (256^3 0.251 against 0.254, 256x256x1024 0.86 against
#: 0.87), and 256^3 keeps the register block the tuner found there.
SKINNY_KC = 128
SKINNY_MIN_K = 512


def _fit_matmul(dims, knobs: dict, lanes: int, wide: bool = False,
                b_in_place: bool = True) -> dict:
    """The matrix product's knobs with ``"auto"`` resolved for ``dims``: sums in registers when k
    fits one k block (no tile buffer to clear, reload per k block and copy to the output, as in
    the batched products), else a k-blocked tile buffer; row tiles of TY rows, halved while
    there are fewer than MIN_TASKS tasks.

    With k in one block the tile buffer was the slower: float32, one thread, CPU time, median of
    60 calls, under load: 256^3 0.783 against 0.748 ms, 512^3 4.21 against 4.07 (NumPy 0.69,
    3.60); two threads, wall time, median of 150-200 single calls, under load: 256^3 0.92-0.96
    against 0.84-0.89 ms. With k over one block, 16-register targets keep the tile buffer.
    float32 on 512-bit vectors (``wide``) takes a WIDE_RY x WIDE_VECTORS register block with its
    sums in registers over all of k, at any k (see WIDE_RY), except where tiles have too few
    rows to stage a panel and ``b_in_place`` (matmul, whose ``b`` an unstaged register block
    reads in place; linear always stages its weight): then a k-blocked tile (SKINNY_KC)."""
    knobs = {"acc": "auto", "ty": "auto", "ry": "auto", "reg_vectors": "auto", **knobs}
    M, K, N = dims["M"], dims["K"], dims["N"]
    if knobs["ry"] == "auto":
        knobs["ry"] = WIDE_RY if wide else RY
    if knobs["reg_vectors"] == "auto":
        knobs["reg_vectors"] = WIDE_VECTORS if wide else REG_VECTORS
    if knobs["ty"] == "auto":
        knobs["ty"] = TY
        tx = _columns(N, lanes, _fit(dict(knobs), wide).get("reg_vectors", REG_VECTORS))[1]
        while (-(-N // tx) * -(-M // knobs["ty"]) < MIN_TASKS
               and knobs["ty"] // 2 >= MIN_TILE_ROWS):
            knobs["ty"] //= 2
    if knobs["acc"] == "auto":
        knobs["acc"] = "register" if K <= knobs.get("kc", KC) or wide else "tile"
        if wide and min(M, knobs["ty"]) < PANEL_MIN_ROWS and K >= SKINNY_MIN_K and b_in_place:
            # Too few rows per tile to stage a panel over all of k for register blocks, which
            # then read ``b`` in place: k-blocked tiles with a staged panel instead (see
            # SKINNY_KC).
            knobs["acc"] = "tile"
            knobs.setdefault("kc", SKINNY_KC)
    return _fit(knobs, wide)


@template("matmul", knobs=MATMUL_KNOBS)
def _matmul(built, dims, lanes, **knobs):
    lanes = _lanes_for(built, lanes)
    return gemm_directives(dims, lanes, n="n", m="m", k="k$x", N=dims["N"], M=dims["M"],
                           K=dims["K"], **_fit_matmul(dims, knobs, lanes, _wide(lanes)))


#: Batched products (batch_matmul, einsum, baddbmm) also choose where the sums live (``acc``, see
#: :func:`gemm_directives`) and what a parallel task is (``task``, see
#: :func:`register_gemm_directives`); ``"auto"`` values are resolved by :func:`_fit_batched`.
BATCH_GEMM_KNOBS = {**GEMM_KNOBS, "ty": ("auto",) + GEMM_KNOBS["ty"],
                    "reg_vectors": ("auto",) + GEMM_KNOBS["reg_vectors"],
                    "acc": ("auto", "register", "tile"), "task": ("auto", "rows", "tile")}
#: Rows per task of a batched product run as ``task="rows"``. Each column panel staged in a task
#: serves that many rows: at 8x256^3 float32 (one thread, CPU time, under load) 256 rows ran
#: 3.74 ms, 128 rows 4.09 (twice the panels staged), NumPy 3.79.
ROWS_TY = 256
#: ``task="rows"`` copies one batch entry's ``b`` whole per task: only when it is this small...
ROWS_B_BYTES = 1 << 19
#: ...and when it makes at least this many tasks (with row tiles of at least ROWS_MIN_TY rows).
ROWS_MIN_TASKS = 8
ROWS_MIN_TY = 32
#: Register blocks two vectors wide instead of three when that computes this much less of the
#: output (columns are cut in whole blocks, the last shifted inwards): N = 64 takes 3 blocks of 24
#: (72 columns) or 4 of 16 (64); one thread, CPU time, under load: 0.084 ms against 0.091
#: (NumPy 0.077). At N = 256 (264 or 256 columns) the two ran level.
NARROW_SAVING = 0.05


def _block_vectors(N: int, lanes: int, wide: bool = False) -> int:
    """Vectors per register block along n: REG_VECTORS, or two where that computes much less
    of the output; on AVX-512 float32 (``wide``) WIDE_VECTORS (with WIDE_RY rows) unless that
    computes much more than the narrower blocks. At 8 x 256^3 and 32 x 256^3 float32 (AOT
    kernels, two threads, medians of 9 blocks of 10 calls, two runs each) 6 x 4 took 1.22-1.27
    and 4.75 ms against the 4 x 3 default's 1.50-1.61 and 5.41 (torch.bmm into its output
    1.22-1.55 and 4.80, NumPy 1.65-1.73 and 7.12)."""
    def computed(rv):
        tx = min(rv * lanes, lanes * (N // lanes)) if N >= lanes else N
        return -(-N // tx) * tx
    narrow = 2 if computed(2) <= (1 - NARROW_SAVING) * computed(REG_VECTORS) else REG_VECTORS
    if wide and computed(WIDE_VECTORS) <= (1 + NARROW_SAVING) * computed(narrow):
        return WIDE_VECTORS
    return narrow


def _fit_batched(dims, knobs: dict, b_bytes: int, lanes: int, wide: bool = False) -> dict:
    """The batched template's knobs with ``"auto"`` resolved for ``dims``: register blocks of
    three vectors unless two waste much less; sums in registers when k fits one k block; then
    one task per batch entry and row tile (``"rows"``) when a batch entry's ``b`` is small
    enough to copy per task and that makes enough tasks, else one task per output tile."""
    knobs = {"acc": "auto", "task": "auto", "ty": "auto", "reg_vectors": "auto", **knobs}
    B, M, K, N = dims["B"], dims["M"], dims["K"], dims["N"]
    if knobs["reg_vectors"] == "auto":
        knobs["reg_vectors"] = _block_vectors(N, lanes, wide)
        if wide and knobs["reg_vectors"] == WIDE_VECTORS:
            knobs.setdefault("ry", WIDE_RY)
    if knobs["acc"] == "auto":
        knobs["acc"] = "register" if K <= knobs.get("kc", KC) else "tile"
    ty = ROWS_TY if knobs["ty"] == "auto" else knobs["ty"]
    if knobs["task"] == "auto":
        knobs["task"] = "tile"
        if (knobs["acc"] == "register" and K * N * b_bytes <= ROWS_B_BYTES
                and M >= STAGE_MIN_ROWS and knobs.get("stage", True)):
            while B * -(-M // ty) < ROWS_MIN_TASKS and ty // 2 >= ROWS_MIN_TY:
                ty //= 2
            if B * -(-M // ty) >= ROWS_MIN_TASKS:
                knobs["task"] = "rows"
    if knobs["ty"] == "auto":
        knobs["ty"] = ty if knobs["task"] == "rows" else TY
    return _fit(knobs, wide)


def _b_bytes(built) -> int:
    return np.dtype(built.dtypes[-1]).itemsize


@template("batch_matmul", knobs=BATCH_GEMM_KNOBS)
def _batch_matmul(built, dims, lanes, **knobs):
    lanes = _lanes_for(built, lanes)
    return gemm_directives(dims, lanes, n="n", m="m", k="k$x", N=dims["N"], M=dims["M"],
                           K=dims["K"], batch="b", B=dims["B"],
                           **_fit_batched(dims, knobs, _b_bytes(built), lanes, _wide(lanes)))


#: linear's knobs: the matrix product's but ``stage`` (its weight is always staged per tile, as
#: the transposed panel ``wt``).
LINEAR_KNOBS = {k: v for k, v in MATMUL_KNOBS.items() if k != "stage"}


@template("linear", knobs=LINEAR_KNOBS)
def _linear(built, dims, lanes, **knobs):
    """As the matrix product (sums in registers when k fits one block, row tiles cut for enough
    tasks: :func:`_fit_matmul`), reading the weight [O, I] through ``wt`` (its transpose, staged
    per tile by :func:`_stage_transposed`), with matmul's wide register block on AVX-512 float32
    (AOT kernels side by side, median of 9 blocks of 10 calls: [2048, 512] x [2048, 512]^T
    17.4 ms against 18.8 for 4 x 3 (torch.addmm into its output 17.9); [256, 1024] x
    [1024, 1024]^T 2.78 against 3.00 (torch 2.70); [64, 512] x [2048, 512]^T level)."""
    lanes = _lanes_for(built, lanes)
    as_matmul = {"M": dims["R"], "K": dims["I"], "N": dims["O"]}
    return gemm_directives(dims, lanes, n="o", m="r", k="i$x", N=dims["O"], M=dims["R"],
                           K=dims["I"], b_src="wt", b_is_func=True, b_k="j",
                           **_fit_matmul(as_matmul, knobs, lanes, _wide(lanes),
                                         b_in_place=False))


# -- transposes -----------------------------------------------------------------------------------

#: Side of the square blocks a transpose moves at a time (at most one vector).
TRANSPOSE_BLOCK = 8
#: Blocks are grouped into tiles of this many rows and columns, one tile per parallel step.
TRANSPOSE_TILE = 64
#: Fewer elements than this are copied on one thread.
TRANSPOSE_SERIAL = 1 << 16


def _tiled_transpose(r: str, c: str, R: int, C: int, lanes: int, outer: list[str],
                     parallel: bool, func: str = "out") -> list:
    """``out[r, c] = x[c, r]``: square blocks, vectorized along r and unrolled along c (reads and
    writes stay within a few cache lines), grouped into larger tiles."""
    t = min(lanes, TRANSPOSE_BLOCK)
    g = TRANSPOSE_TILE // t
    ds = [D("split", func, var=r, outer="ro", inner="ri", factor=t, tail=SI),
          D("split", func, var=c, outer="co", inner="ci", factor=t, tail=SI),
          D("split", func, var="ro", outer="roo", inner="roi", factor=g, tail=GW),
          D("split", func, var="co", outer="coo", inner="coi", factor=g, tail=GW),
          D("reorder", func, vars=["ri", "ci", "roi", "coi", "roo", "coo", *outer]),
          D("vectorize", func, var="ri"),
          D("unroll", func, var="ci")]
    if parallel:
        task = "coo"
        for i, o in enumerate(outer):
            ds.append(D("fuse", func, inner=task, outer=o, fused=f"t{i}"))
            task = f"t{i}"
        ds.append(D("parallel", func, var=task))
    return ds


def transpose_directives(func: str, args, extents, lanes: int) -> list | None:
    """A transposing copy ``func`` (a Func over ``args``, innermost first, whose innermost
    axis reads across the rows of its source) in square blocks as the transpose op's default;
    None when it is narrower than a block. A fused program makes an operand read through a
    transpose dense with it: at [2048, 2048], a vector along the output's rows took 16-19 ms
    (each vector 16 cache lines a row apart), where this order reads whole lines."""
    t = min(lanes, TRANSPOSE_BLOCK)
    R, C = extents[0], extents[1]
    if len(args) < 2 or R < t or C < t:
        return None
    total = 1
    for e in extents:
        total *= e
    return _tiled_transpose(args[0], args[1], R, C, lanes, list(args[2:]),
                            total >= TRANSPOSE_SERIAL, func)


@template("transpose")
def _transpose(built, dims, lanes):
    R, C = dims["R"], dims["C"]
    t = min(lanes, TRANSPOSE_BLOCK)
    if R < t or C < t:
        return output_directives("out", ("r", "c"), dims, lanes)
    return _tiled_transpose("r", "c", R, C, lanes, [], R * C >= TRANSPOSE_SERIAL)


@template("batch_transpose")
def _batch_transpose(built, dims, lanes):
    B, R, C, E = dims["B"], dims["R"], dims["C"], dims["E"]
    t = min(lanes, TRANSPOSE_BLOCK)
    parallel = B * R * C * E >= TRANSPOSE_SERIAL
    if E == 1 and R >= t and C >= t:
        return _tiled_transpose("r", "c", R, C, lanes, ["b"], parallel)
    # Blocks of E contiguous elements move whole: copy them as vectors.
    return output_directives("out", ("e", "r", "c", "b"), dims, lanes)
