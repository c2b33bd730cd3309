"""Default schedules of the scans (cumsum, cumprod, logcumsumexp, cummax, cummin).

A scan's kernel is [O, R, I] -> [O, R, I], sequential along R. An output copies a running Func
(``run``; cummax/cummin's indices copy ``pair``, their values read the input at the indices)
whose pure definition is undefined and whose two updates write r = 0 and then r = 1 .. R - 1.
The running Func is computed per block of the output, in a layout of its own, so that the scan
itself runs with vector lanes:

- across rows, when I is below a vector (a scan along the last axis has I = 1): blocks of
  ``B`` rows (B = 8: more rows at a time would write B output rows whose addresses alias in L1
  when rows are a multiple of 4 KiB apart); the block's running values are stored rows
  innermost, so each step along R is one vector operation on the B rows, and the running value
  stays in registers. The block reads its input rows element by element (their strides are
  unknown when compiling) and the output copies it back in runs of ``COPY_RUN`` elements of
  each row, unrolled.
  Measured on one core (idle figures do not exist here: the machine was shared), cumsum of
  float32 [64, 2048, 1]: 0.10 ms against 0.18 ms for four rows interleaved in place and 0.16
  ms for torch; logcumsumexp gains most, its step being some forty vector operations.
- across I, when I spans a vector: tiles of I, the running Func stored I innermost.
- otherwise (fewer than two rows, or blocks whose running values would not stay in cache):
  one row at a time, serially.

Blocks (or rows) run in parallel in tasks of several blocks (:func:`.reduce.task_rows`).
"""

from __future__ import annotations

import numpy as np

from ..defaults import MIN_TASK_ELEMS, D, _pow2_at_most, template
from .reduce import task_rows

#: Rows per block of the across-rows form.
ROWS = 8
#: Elements of a row the across-rows form copies back at a time.
COPY_RUN = 8
#: Largest running buffer of one block (bytes) for the across-rows form: beyond it the block's
#: scan would stream through memory twice, and one row at a time reads it from cache instead.
MAX_BLOCK_BYTES = 1 << 21


def _itemsize(type_text: str) -> int:
    return max(np.dtype(t).itemsize for t in type_text.split(","))


def _parallel_blocks(out: str, var: str, blocks: int, block_elems: int, total: int) -> tuple:
    """Directives that run ``var`` (``blocks`` iterations) in parallel tasks of several blocks
    (:func:`.reduce.task_rows`), and the loop level (a Var of ``out``) at which one block is
    computed."""
    if total < 2 * MIN_TASK_ELEMS or blocks < 2:
        return [], var
    per_task = task_rows(blocks, block_elems)
    if per_task == 1 or blocks < 2 * per_task:
        return [D("parallel", out, var=var)], var
    outer, inner = f"{var}_t", f"{var}_b"
    return [D("split", out, var=var, outer=outer, inner=inner, factor=per_task),
            D("parallel", out, var=outer)], inner


def _scan(built, dims, lanes):
    n_o, n_r, n_i = dims.get("O", 1), dims.get("R", 1), dims.get("I", 1)
    total = n_o * n_r * n_i
    ds = []
    for out in (f for f in built.funcs.values() if f.is_output):
        runs = [built.funcs[c] for c in out.calls if built.funcs[c].updates]
        if not runs:
            # An output read from another one (cummax's values: the input at its indices),
            # along R innermost unless I spans a vector.
            if n_i >= lanes:
                ds.append(D("vectorize", out.name, var="i", factor=lanes))
            else:
                ds.append(D("reorder", out.name, vars=["r", "i", "o"]))
            ds += _parallel_blocks(out.name, "o", n_o, n_r * n_i, total)[0]
            continue
        (run,) = runs
        (k,) = run.updates[1]
        size = _itemsize(run.type)
        rows = _pow2_at_most(n_o, ROWS)
        if n_i >= lanes:
            # Across I: tiles of one vector of I, each scanned along R; rows in parallel.
            ds += [D("split", out.name, var="i", outer="io", inner="iv", factor=lanes),
                   D("reorder", out.name, vars=["iv", "r", "io", "o"]),
                   D("vectorize", out.name, var="iv")]
            par, at = _parallel_blocks(out.name, "o", n_o, n_r * n_i, total)
            ds += par
            ds += [D("compute_at", run.name, at=out.name, var="io"),
                   D("split", run.name, 1, var="i", outer="io", inner="iv", factor=lanes),
                   D("reorder", run.name, 1, vars=["iv", "io", "o"]),
                   D("vectorize", run.name, 1, var="iv"),
                   D("split", run.name, 2, var="i", outer="io", inner="iv", factor=lanes),
                   D("reorder", run.name, 2, vars=["iv", k, "io", "o"]),
                   D("vectorize", run.name, 2, var="iv")]
        elif rows >= 2 and rows * n_r * n_i * size <= MAX_BLOCK_BYTES:
            # Across rows: blocks of `rows` rows (the last block shifted inwards), the running
            # values stored rows innermost and scanned one vector per step.
            ds.append(D("split", out.name, var="o", outer="oo", inner="oi", factor=rows))
            if n_r >= COPY_RUN:
                # The copy back writes runs of COPY_RUN elements of each row in turn (whole
                # cache lines), not one element of each row in turn: cumsum of float32
                # [256, 2048] on one core 0.41 -> 0.32 ms, cummax [256, 1024] 0.46 -> 0.40.
                ds += [D("split", out.name, var="r", outer="ro", inner="ri", factor=COPY_RUN),
                       D("reorder", out.name, vars=["ri", "oi", "ro", "i", "oo"]),
                       D("unroll", out.name, var="ri")]
            else:
                ds.append(D("reorder", out.name, vars=["oi", "r", "i", "oo"]))
            ds.append(D("unroll", out.name, var="oi"))
            blocks = -(-n_o // rows)
            par, at = _parallel_blocks(out.name, "oo", blocks, rows * n_r * n_i, total)
            ds += par
            ds += [D("compute_at", run.name, at=out.name, var=at),
                   D("reorder_storage", run.name, vars=["o", "r", "i"]),
                   D("split", run.name, 1, var="o", outer="oo", inner="ov", factor=rows),
                   D("reorder", run.name, 1, vars=["ov", "oo", "i"]),
                   D("vectorize", run.name, 1, var="ov"),
                   D("split", run.name, 2, var="o", outer="oo", inner="ov", factor=rows),
                   D("reorder", run.name, 2, vars=["ov", "oo", k, "i"]),
                   D("vectorize", run.name, 2, var="ov")]
        else:
            # One row at a time (a single long row: the scan is serial).
            par, at = _parallel_blocks(out.name, "o", n_o, n_r * n_i, total)
            ds += par
            ds.append(D("compute_at", run.name, at=out.name, var="o"))
    return ds


#: Elements per chunk of cummax/cummin's chunked form of one long row (the algorithm,
#: ``pypto.ops.scan``, imports it): a block of one chunk per vector lane keeps its running values
#: (16 x 4096 x 8 bytes for float32) in L2.
CHUNK = 4096


def _scan_long(built, dims, lanes):
    """One long row by chunks (``pypto.ops.scan``: cummax/cummin's ``_cumext_long``,
    ``_lse_long``): the chunk summaries in vector lanes across chunks, in parallel; their carries
    serially (one step a chunk); then blocks of ``lanes`` chunks, each block scanned with one
    chunk a lane into a running buffer of its own (chunks innermost), copied out in parallel.
    cummax/cummin's values (the input at the indices) are a pass of their own.

    The output starts at 0 (``bound``) and blocks are whole (the last one guarded, not shifted
    inwards), so a block's buffer holds exactly ``lanes`` chunks and the copy reads it as a
    ``lanes`` x ``lanes`` transpose: 16M float32, cummax under load, the copy 130 -> 32-43 ms
    against a gather per element. Rows shorter than two blocks (only a direct kernel call makes
    them) keep Halide's default."""
    n = dims["R"]
    block = lanes * CHUNK
    (j,) = built.funcs["summary"].updates[0]
    (k,) = built.funcs["run"].updates[1]
    (out,) = [f.name for f in built.funcs.values() if f.is_output and "run" in f.calls]
    ds = [D("compute_root", "summary"),
          D("split", "summary", 1, var="c", outer="co", inner="cv", factor=lanes,
            tail="guard_with_if"),
          D("reorder", "summary", 1, vars=["cv", j, "co"]),
          D("vectorize", "summary", 1, var="cv"),
          D("parallel", "summary", 1, var="co"),
          D("compute_root", "carry"),
          D("bound", out, var="r", min=0, extent=n),
          D("split", out, var="r", outer="rb", inner="rr", factor=block, tail="guard_with_if"),
          D("split", out, var="rr", outer="rc", inner="rj", factor=CHUNK),
          D("split", out, var="rj", outer="jo", inner="ji", factor=lanes),
          D("reorder", out, vars=["ji", "rc", "jo", "rb"]),
          D("vectorize", out, var="ji"),
          D("vectorize", out, var="rc"),
          D("parallel", out, var="rb"),
          D("compute_at", "run", at=out, var="rb"),
          D("reorder_storage", "run", vars=["c", "r"]),
          D("bound_extent", "run", var="c", extent=lanes),
          D("vectorize", "run", 1, var="c", factor=lanes),
          D("split", "run", 2, var="c", outer="co", inner="cv", factor=lanes),
          D("reorder", "run", 2, vars=["cv", k, "co"]),
          D("vectorize", "run", 2, var="cv")]
    if "values" in built.funcs:
        ds += [D("split", "values", var="r", outer="rb", inner="rr", factor=block),
               D("vectorize", "values", var="rr", factor=lanes),
               D("parallel", "values", var="rb")]
    return ds if n >= 2 * block else []


for _name in ("cumsum", "cumprod", "logcumsumexp", "cummax", "cummin"):
    template(_name)(_scan)
for _name in ("cummax_long", "cummin_long", "logcumsumexp_long"):
    template(_name)(_scan_long)
