"""matmul's default CPU schedule: where the sums live, how many parallel tasks, and that every
placement the tuner may pick stays correct (against a float64 NumPy product)."""

from __future__ import annotations

import numpy as np
import pytest

from helpers import assert_close, rand


def _built(dtype="float32"):
    import pypto
    from pypto.compiler.lower import build

    return build(pypto.get_op("matmul"), (dtype, dtype), {})


def _default(dims, dtype="float32"):
    from pypto.compiler import targets
    from pypto.schedule.defaults import default_schedule

    return default_schedule(_built(dtype), dims, targets.host()).directives


def _tasks(ds, dims) -> int:
    """Parallel tasks of a blocked product: output tiles of (column split) x (row split)."""
    n = next(d for d in ds if d.op == "split" and d.func == "out" and d.get("var") == "n")
    m = next(d for d in ds if d.op == "split" and d.func == "out" and d.get("var") == "m")
    return -(-dims["N"] // n.get("factor")) * -(-dims["M"] // m.get("factor"))


def _template(dims, lanes, dtype="float32", **knobs):
    from pypto.schedule.defaults import template_schedule

    return template_schedule(_built(dtype), dims, lanes, knobs)


def _acc_at(ds) -> list:
    return [d.get("var") for d in ds if d.op == "compute_at" and d.func == "acc"]


def test_sums_live_in_registers_when_k_fits_one_block():
    # k within one k block (512): each register block's sums stay in registers over all of k
    # (acc computed at the output's register-block loop), with no tile buffer cleared and copied
    # out. Longer k keeps the k-blocked tile buffer on 256-bit vectors (8 float32 lanes).
    for s, at in ((256, "mio"), (512, "mio"), (300, "mio"), (1024, "tile"), (2048, "tile")):
        assert _acc_at(_template({"M": s, "K": s, "N": s}, 8)) == [at], s
    assert _acc_at(_template({"M": 64, "K": 513, "N": 256}, 8)) == ["tile"]


def _register_block(ds) -> tuple[int, int]:
    """(rows, vectors) of the output's register block."""
    rows = next(d for d in ds if d.op == "split" and d.func == "out" and d.get("var") == "mi")
    cols = next(d for d in ds if d.op == "split" and d.func == "out" and d.get("var") == "n")
    vec = next(d for d in ds if d.op == "split" and d.func == "out" and d.get("var") == "ni")
    return rows.get("factor"), cols.get("factor") // vec.get("factor")


def test_float32_on_512_bit_vectors_keeps_a_6_by_4_block_in_registers():
    # float32 on AVX-512 (16 lanes, 32 vector registers): a 6 x 4-vector block with its sums in
    # registers over all of k beat 4 x 3 (in the k-blocked tile buffer at 1024^3 and 2048^3, in
    # registers at 256^3 and 512^3; see WIDE_RY). float64 there (8 lanes) and 256-bit vectors keep
    # 4 x 3.
    from pypto.schedule.templates.linalg import REG_VECTORS, RY, WIDE_RY, WIDE_VECTORS

    for s in (256, 512, 1024):
        ds = _template({"M": s, "K": s, "N": s}, 16)
        assert _acc_at(ds) == ["mio"] and _register_block(ds) == (WIDE_RY, WIDE_VECTORS), s
    assert _register_block(_template({"M": 512, "K": 512, "N": 512}, 8)) == (RY, REG_VECTORS)
    assert _acc_at(_template({"M": 1024, "K": 1024, "N": 1024}, 8, "float64")) == ["tile"]
    # The tuner's points stay within the registers: 8 x 4 is cut to 6 rows on 32 registers and to
    # 3 rows on 16.
    assert _register_block(_template({"M": 1024, "K": 1024, "N": 1024}, 16, ry=8,
                                     reg_vectors=4, acc="register"))[0] == 6
    assert _register_block(_template({"M": 1024, "K": 1024, "N": 1024}, 8, ry=8,
                                     reg_vectors=4, acc="register"))[0] == 3
    # The batched products' tuner points too (their default keeps 4 x 3 or 4 x 2).
    import pypto
    from pypto.compiler.lower import build
    from pypto.schedule.defaults import template_schedule

    bm = {"B": 8, "M": 256, "K": 256, "N": 256}
    for lanes, rows in ((16, 6), (8, 3)):
        built = build(pypto.get_op("batch_matmul"), ("float32", "float32"), {})
        ds = template_schedule(built, bm, lanes, {"ry": 8, "reg_vectors": 4})
        assert _register_block(ds)[0] == rows, lanes


def test_small_products_are_cut_into_enough_tasks():
    # 64^3 made 3 tasks of 24 columns (2 against 1 on two threads) and 128^3 made 6; row tiles
    # are halved until there are at least MIN_TASKS, but never below MIN_TILE_ROWS rows, and
    # products that already have enough tasks keep whole row tiles.
    from pypto.schedule.templates.linalg import MIN_TASKS, MIN_TILE_ROWS, TY, _fit_matmul

    for dims in ({"M": 64, "K": 64, "N": 64}, {"M": 128, "K": 128, "N": 128},
                 {"M": 96, "K": 2048, "N": 100}, {"M": 256, "K": 256, "N": 256},
                 {"M": 512, "K": 512, "N": 512}, {"M": 40, "K": 300, "N": 48}):
        ds = _default(dims)
        m = next(d for d in ds if d.op == "split" and d.func == "out" and d.get("var") == "m")
        assert _tasks(ds, dims) >= MIN_TASKS or m.get("factor") < 2 * MIN_TILE_ROWS, (dims, ds)
    for lanes in (8, 16):
        for s in (256, 512, 1024):
            dims = {"M": s, "K": s, "N": s}
            ds = _template(dims, lanes)
            m = next(d for d in ds if d.op == "split" and d.func == "out" and d.get("var") == "m")
            n = next(d for d in ds if d.op == "split" and d.func == "out" and d.get("var") == "n")
            ry = _fit_matmul(dims, {}, lanes, wide=lanes == 16)["ry"]
            whole = -(-s // n.get("factor")) * -(-s // min(s, TY))    # tasks with whole row tiles
            if whole >= MIN_TASKS:
                # (a tile is whole register blocks: 1024 rows in 6-row blocks make tiles of 516)
                assert min(s, TY) <= m.get("factor") < min(s, TY) + ry, (lanes, s, m)
            else:     # (256^3 with 16-lane vectors: 6 column tiles of 48)
                assert m.get("factor") < min(s, TY) and _tasks(ds, dims) >= MIN_TASKS, (s, m)


SHAPES = [
    {"M": 130, "K": 70, "N": 40},    # rows not a multiple of the register block
    {"M": 33, "K": 600, "N": 19},    # k over one k block; columns under one register block
    {"M": 20, "K": 64, "N": 5},      # columns narrower than a vector
    {"M": 70, "K": 512, "N": 90},    # k exactly one block
    {"M": 64, "K": 64, "N": 64},     # row tiles halved for enough tasks
]

POINTS = [{}, {"acc": "register"}, {"acc": "tile"},
          {"acc": "register", "ty": 32, "ry": 6, "reg_vectors": 2, "ku": 1, "stage": False},
          {"acc": "tile", "ty": 32, "kc": 64, "ry": 3},
          {"acc": "register", "ry": 6, "reg_vectors": 4, "kc": 64}]


@pytest.mark.parametrize("dims", SHAPES, ids=lambda d: "x".join(str(d[k]) for k in "MKN"))
def test_every_placement_of_the_sums_is_right(dims):
    # Each point is compiled and run into a poisoned output, so a value left unwritten shows.
    import pypto
    from pypto.compiler import targets
    from pypto.compiler.jit import compile_built
    from pypto.runtime import run_kernel
    from pypto.schedule.defaults import template_knobs, template_schedule, vector_lanes
    from pypto.schedule.schedule import Schedule

    op = pypto.get_op("matmul")
    knobs = template_knobs("matmul")
    assert knobs["acc"][0] == "auto" and knobs["ty"][0] == "auto"
    M, K, N = dims["M"], dims["K"], dims["N"]
    for i, point in enumerate(POINTS):
        for dtype in ("float32", "float64") if i < 2 else ("float32",):
            a, b = rand((M, K), dtype, seed=2 * i), rand((K, N), dtype, seed=2 * i + 1)
            want = np.matmul(a.astype(np.float64), b.astype(np.float64))
            built = _built(dtype)
            lanes = vector_lanes(targets.host(), dtype)
            sched = Schedule(op="matmul", directives=tuple(
                template_schedule(built, dims, lanes, point)))
            k = compile_built(built, sched, targets.host(), source="test point")
            out = np.full((M, N), np.nan, dtype)
            run_kernel(k, op, [a, b], dims, [out])
            tol = dict(rtol=1e-4, atol=1e-5 * max(1.0, K ** 0.5 * 4)) if dtype == "float32" \
                else dict(rtol=1e-12, atol=1e-12 * K)
            assert_close(out, want.astype(dtype), **tol, err_msg=f"{dims} {point} {dtype}")


def _wraps(ds) -> list:
    return sorted(d.get("as") for d in ds if d.op == "wrap")


def test_an_operand_one_panel_wide_is_read_in_place():
    # When one register panel spans all of b's columns the inner loop already reads b's rows
    # whole, in order: copying it (bp, and the batched products' brows) only cost (8 x 64^3
    # float32: 8.7 of 53 us). Wider operands keep their staged panels.
    import pypto
    from pypto.compiler.lower import build
    from pypto.schedule.defaults import template_schedule

    bm = build(pypto.get_op("batch_matmul"), ("float32", "float32"), {})
    # 64 columns are one panel on 512-bit vectors (16 float32 lanes), not on 256-bit ones.
    assert _wraps(template_schedule(bm, {"B": 8, "M": 64, "K": 64, "N": 64}, 16, {})) == []
    for lanes in (8, 16):
        assert _wraps(template_schedule(bm, {"B": 8, "M": 256, "K": 64, "N": 16}, lanes, {})) == []
        assert _wraps(template_schedule(bm, {"B": 8, "M": 256, "K": 256, "N": 256}, lanes,
                                        {})) == ["bp", "brows"]
        assert "bp" in _wraps(template_schedule(bm, {"B": 2, "M": 64, "K": 1024, "N": 256},
                                                lanes, {}))
    assert _wraps(_template({"M": 512, "K": 256, "N": 48}, 16)) == []
    assert _wraps(_template({"M": 512, "K": 256, "N": 512}, 16)) == ["bp"]


@pytest.mark.parametrize("n", [64, 48, 16])
def test_an_unstaged_operand_with_padded_rows_is_right(n):
    # b read in place may be a view whose rows are further apart than its width (columns cut
    # from a wider array; only the innermost stride is unit): the product must still be right.
    import pypto

    a = rand((8, 64, 64), "float32", seed=3)
    wide = rand((8, 64, 1024), "float32", seed=4)
    b = wide[:, :, 100:100 + n]
    assert not b.flags.c_contiguous
    want = np.matmul(a.astype(np.float64), b.astype(np.float64))
    assert_close(pypto.ops.batch_matmul(a, b), want.astype(np.float32), rtol=1e-4, atol=1e-4)
    a2 = rand((300, 64), "float32", seed=5)
    assert_close(pypto.ops.matmul(a2, wide[0, :, 7:7 + n]),
                 (a2.astype(np.float64) @ wide[0, :, 7:7 + n].astype(np.float64)).astype(np.float32),
                 rtol=1e-4, atol=1e-4)
