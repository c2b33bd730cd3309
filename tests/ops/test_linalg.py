"""Linear algebra (matmul, batch_matmul, linear, transpose, batch_transpose) against NumPy."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pypto.ops as P
from helpers import ODD_SIZES, assert_close, rand
from pypto.errors import DtypeError, ParamError, ShapeError


def mm_want(a, b):
    """float64 product rounded to the operands' dtype (float16 accumulates in float32)."""
    dt = np.result_type(a, b)
    return np.matmul(a.astype(np.float64), b.astype(np.float64)).astype(dt)


def mm_tol(k, dtype):
    # A sum of k products in [-1, 1] carries rounding error growing with k; float16 also rounds
    # the result to 11 bits.
    if dtype == "float16":
        return dict(rtol=2e-3, atol=2e-3 * max(1.0, np.sqrt(k)))
    if dtype == "float32":
        return dict(rtol=1e-4, atol=1e-5 * max(1.0, k ** 0.5 * 4))
    return {}


# -- matmul: 2-D ---------------------------------------------------------------------------------

@pytest.mark.parametrize("mkn", [(1, 1, 1), (3, 7, 5), (7, 3, 127), (127, 1000, 3), (1000, 7, 24),
                                 (64, 48, 80), (130, 129, 70)])
def test_matmul_2d_float32(mkn):
    m, k, n = mkn
    a, b = rand((m, k), seed=1), rand((k, n), seed=2)
    got = P.matmul(a, b)
    assert got.dtype == np.float32
    assert_close(got, mm_want(a, b), **mm_tol(k, "float32"))


@pytest.mark.parametrize("mkn", [(127, 127, 127), (3, 1000, 130), (1000, 300, 1), (1000, 1, 300)])
def test_matmul_blocked_schedule_odd_sizes(mkn):
    # Products large enough for the blocked default schedule, with partial tiles in every dim.
    m, k, n = mkn
    a, b = rand((m, k), seed=11), rand((k, n), seed=12)
    assert_close(P.matmul(a, b), mm_want(a, b), **mm_tol(k, "float32"))


def test_matmul_odd_sizes_each_dim():
    # Every odd size in each of the three dims, the others small.
    for s in ODD_SIZES:
        for m, k, n in ((s, 5, 9), (6, s, 9), (6, 5, s)):
            a, b = rand((m, k), seed=s), rand((k, n), seed=s + 1)
            assert_close(P.matmul(a, b), mm_want(a, b), **mm_tol(k, "float32"),
                         err_msg=f"{(m, k, n)}")


@pytest.mark.parametrize("dtype", ["float64", "float16"])
def test_matmul_2d_other_dtypes(dtype):
    for m, k, n in ((3, 7, 5), (67, 130, 41)):
        a, b = rand((m, k), dtype, seed=3), rand((k, n), dtype, seed=4)
        got = P.matmul(a, b)
        assert got.dtype == np.dtype(dtype)
        assert_close(got, mm_want(a, b), **mm_tol(k, dtype))


def test_matmul_float16_accumulates_in_float32():
    # 4096 products of 1 * 1: a float16 running sum would stop at 2048.
    a = np.ones((2, 4096), np.float16)
    b = np.ones((4096, 3), np.float16)
    got = P.matmul(a, b)
    assert got.dtype == np.float16
    np.testing.assert_array_equal(got, np.full((2, 3), 4096, np.float16))


def test_matmul_known_values():
    a = np.array([[1, 2], [3, 4], [5, 6]], np.float64)
    b = np.array([[1, 0, -1], [2, 1, 0]], np.float64)
    np.testing.assert_array_equal(P.matmul(a, b), [[5, 2, -1], [11, 4, -3], [17, 6, -5]])


def test_matmul_non_contiguous_inputs():
    base = rand((40, 60), seed=5)
    a = base.T                      # (60, 40), a transposed view
    b = rand((80, 30), seed=6)[::2]  # (40, 30), a step slice
    assert not a.flags.c_contiguous and not b.flags.c_contiguous
    assert_close(P.matmul(a, b), mm_want(a, b), **mm_tol(40, "float32"))
    # Both operands transposed, and a negative stride.
    c = rand((30, 60), seed=7)[:, ::-1]
    assert_close(P.matmul(c, a), mm_want(c, a), **mm_tol(60, "float32"))


def test_matmul_nan_and_inf_propagate():
    a = rand((5, 4), seed=8)
    b = rand((4, 6), seed=9)
    a[1, 2] = np.nan
    b[0, 3] = np.inf
    got = P.matmul(a, b)
    want = np.matmul(a, b)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(np.isinf(got), np.isinf(want))


# -- matmul: batches, broadcasting, 1-D ----------------------------------------------------------

def test_batch_matmul_kernel():
    a, b = rand((3, 7, 5), seed=1), rand((3, 5, 9), seed=2)
    got = P.batch_matmul(a, b)
    assert_close(got, mm_want(a, b))
    assert_close(P.matmul(a, b), got)


def test_batch_matmul_larger_and_float64():
    a, b = rand((5, 33, 70), "float64", seed=3), rand((5, 70, 19), "float64", seed=4)
    assert_close(P.batch_matmul(a, b), mm_want(a, b))
    a, b = rand((2, 130, 64), seed=3), rand((2, 64, 40), seed=4)
    assert_close(P.batch_matmul(a, b), mm_want(a, b), **mm_tol(64, "float32"))


@pytest.mark.parametrize("sa,sb", [
    ((2, 1, 4, 3), (5, 3, 6)),      # batch dims broadcast both ways
    ((4, 3), (2, 3, 3, 5)),         # a 2-D matrix against a stack
    ((2, 3, 4, 3), (3, 5)),         # a stack against one matrix
    ((1, 4, 3), (2, 3, 5)),
])
def test_matmul_broadcast_batches(sa, sb):
    a, b = rand(sa, seed=1), rand(sb, seed=2)
    got = P.matmul(a, b)
    assert got.shape == np.matmul(a, b).shape
    assert_close(got, mm_want(a, b))


@pytest.mark.parametrize("sa,sb", [
    ((5,), (5, 3)), ((4, 5), (5,)), ((5,), (5,)), ((5,), (2, 5, 3)), ((2, 4, 5), (5,)),
    ((1,), (1, 1)), ((127,), (127,)),
])
def test_matmul_1d_operands(sa, sb):
    a, b = rand(sa, seed=3), rand(sb, seed=4)
    got = P.matmul(a, b)
    want = np.matmul(a, b)
    assert np.shape(got) == np.shape(want)
    assert np.asarray(got).dtype == want.dtype
    assert_close(got, mm_want(a, b), **mm_tol(sa[-1], "float32"))


def test_matmul_accepts_lists():
    got = P.matmul([[1.0, 2.0]], [[3.0], [4.0]])
    np.testing.assert_array_equal(got, [[11.0]])


def test_matmul_read_only_and_broadcast_views():
    a = rand((4, 3), seed=1)
    a.flags.writeable = False
    b = np.broadcast_to(rand((3, 1), seed=2), (3, 5))
    assert_close(P.matmul(a, b), mm_want(a, np.ascontiguousarray(b)))
    c = np.broadcast_to(rand((1, 4, 3), seed=3), (2, 4, 3))
    d = rand((2, 3, 5), seed=4)
    assert_close(P.matmul(c, d), mm_want(c, d))


def test_matmul_stacks_reach_the_kernel_uncopied(monkeypatch):
    # Stacks whose batch dims already agree go to batch_matmul's kernel as they are: no broadcast
    # view that the kernel would need copied (a copy of each operand cost as much as the product).
    seen = []
    real = P.batch_matmul.kernel

    def spy(a, b, **kw):
        seen.append((a, b))
        return real(a, b, **kw)

    monkeypatch.setattr(P.batch_matmul, "kernel", spy)
    a, b = rand((3, 4, 6), seed=1), rand((3, 6, 5), seed=2)
    assert_close(P.matmul(a, b), mm_want(a, b))
    (ka, kb), = seen
    assert np.shares_memory(ka, a) and np.shares_memory(kb, b)
    # A broadcast batch dim is still materialised (and right).
    seen.clear()
    c = rand((1, 4, 6), seed=3)
    assert_close(P.matmul(c, b), mm_want(c, b))
    (kc, kb2), = seen
    assert kc.shape == (3, 4, 6) and not np.shares_memory(kc, c) and np.shares_memory(kb2, b)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.sampled_from([1, 2, 3]), min_size=1, max_size=3),
       st.lists(st.sampled_from([1, 2, 3]), min_size=1, max_size=3),
       st.data())
def test_matmul_broadcast_property(batch_a, batch_b, data):
    # Make the two batch shapes compatible by setting one side of a clash to 1.
    n = min(len(batch_a), len(batch_b))
    for i in range(1, n + 1):
        if batch_a[-i] != batch_b[-i] and 1 not in (batch_a[-i], batch_b[-i]):
            if data.draw(st.booleans()):
                batch_a[-i] = 1
            else:
                batch_b[-i] = 1
    a = rand(tuple(batch_a) + (3, 4), seed=len(batch_a))
    b = rand(tuple(batch_b) + (4, 5), seed=len(batch_b) + 7)
    got = P.matmul(a, b)
    want = np.matmul(a, b)
    assert got.shape == want.shape
    assert_close(got, mm_want(a, b))


# -- batched products: the default schedule and its tuner knobs -----------------------------------

BATCHED_SHAPES = [
    {"B": 3, "M": 130, "K": 70, "N": 40},     # rows not a multiple of the register block
    {"B": 2, "M": 33, "K": 600, "N": 19},     # k over one k block; columns under one block
    {"B": 4, "M": 20, "K": 64, "N": 5},       # columns narrower than a vector
    {"B": 2, "M": 64, "K": 48, "N": 256},
]


def _batched_inputs(op, dims, dtype, seed):
    B, M, K, N = dims["B"], dims["M"], dims["K"], dims["N"]
    a, b = rand((B, M, K), dtype, seed=seed), rand((B, K, N), dtype, seed=seed + 1)
    if op.name == "baddbmm":
        c = rand((B, M, N), dtype, seed=seed + 2)
        return [c, a, b], {"beta": 0.5, "alpha": -2.0}, 0.5 * c.astype(np.float64) - 2.0 * (
            np.matmul(a.astype(np.float64), b.astype(np.float64)))
    return [a, b], {}, np.matmul(a.astype(np.float64), b.astype(np.float64))


@pytest.mark.parametrize("name", ["batch_matmul", "einsum", "baddbmm"])
@pytest.mark.parametrize("acc", ["register", "tile"])
def test_batched_product_schedules_are_right(name, acc):
    # Every placement of the sums (registers over all of k, or a k-blocked tile buffer) and every
    # kind of parallel task, with other knobs off their defaults too, on shapes with partial
    # blocks in every dim.
    import pypto
    from pypto.compiler import targets
    from pypto.compiler.jit import compile_built
    from pypto.compiler.lower import build
    from pypto.runtime import run_kernel
    from pypto.schedule.defaults import template_knobs, template_schedule, vector_lanes
    from pypto.schedule.schedule import Schedule

    op = pypto.get_op(name)
    knobs = template_knobs(name)
    assert knobs["acc"][0] == "auto" and knobs["task"][0] == "auto"
    lanes = vector_lanes(targets.host(), "float32")
    odd = {"ry": 6, "reg_vectors": 2, "ty": 32, "ku": 1, "stage": False}
    if acc == "register":
        points = [{"acc": acc, "task": "rows"}, {"acc": acc, "task": "tile"},
                  dict(odd, acc=acc, task="rows")]
    else:
        points = [{"acc": acc}, dict(odd, acc=acc)]
    for i, dims in enumerate(BATCHED_SHAPES):
        for j, point in enumerate(points if i < 2 else points[:-1]):
            arrays, params, want = _batched_inputs(op, dims, "float32", seed=10 * i + j)
            built = build(op, ("float32",) * len(arrays), params)
            sched = Schedule(op=name, directives=tuple(
                template_schedule(built, dims, lanes, point)))
            k = compile_built(built, sched, targets.host(), source="test point")
            out = np.full([dims[d] for d in "BMN"], np.nan, np.float32)   # poisoned
            run_kernel(k, op, arrays, dims, [out])
            assert_close(out, want.astype(np.float32), **mm_tol(dims["K"], "float32"),
                         err_msg=f"{name} {dims} {point}")


def test_batched_default_plan():
    # When k fits one k block, each register block's sums live in registers over all of k
    # (computed at the output's register-block loop), not in a tile buffer copied to the output;
    # a task is a batch entry's row tile, with that entry's b copied whole (rows) and each column
    # panel staged from the copy, when that makes enough tasks; otherwise a task is one tile,
    # whose columns of b are read in place when it has too few rows to pay for a staged panel
    # (2 x 64 x 256 x 256, one thread, Halide's profiler: 0.194 ms staged, 0.176 in place).
    import pypto
    from pypto.compiler import targets
    from pypto.compiler.lower import build
    from pypto.schedule.defaults import default_schedule, vector_lanes

    lanes = vector_lanes(targets.host(), "float32")
    for name in ("batch_matmul", "einsum"):
        built = build(pypto.get_op(name), ("float32", "float32"), {})
        for (B, M, K), at, staged in (((8, 256, 256), "mio", ["brows", "bp"]),
                                      ((2, 64, 256), "mio", []),
                                      ((8, 256, 2048), "task", ["bp"])):
            ds = default_schedule(built, {"B": B, "M": M, "K": K, "N": 256},
                                  targets.host()).directives
            placed = [d.get("var") for d in ds if d.op == "compute_at" and d.func == "acc"]
            wraps = [d.get("as") for d in ds if d.op == "wrap"]
            assert placed == [at] and wraps == staged, (name, B, M, K, placed, wraps)
        # Register blocks are three vectors wide unless two cut the columns with much less waste
        # (8 lanes, AVX2); on AVX-512 (16 lanes) four unless that computes much more than three
        # or two (96 columns: 128 against 96); 40 columns hold only two vectors.
        widths = {8: ((256, 24), (64, 16), (40, 24), (48, 24)),
                  16: ((256, 64), (64, 64), (96, 48), (40, 32))}.get(lanes, ())
        for N, width in widths:
            ds = default_schedule(built, {"B": 8, "M": 64, "K": 64, "N": N},
                                  targets.host()).directives
            assert ds[0].op == "split" and ds[0].get("var") == "n", ds[0]
            assert ds[0].get("factor") == width, (N, ds[0])
    # baddbmm's input, read by the output at its own coordinates, is copied per task too, unless
    # beta=0 (then it is not read at all).
    op = pypto.get_op("baddbmm")
    for beta, want in ((1.0, ["brows", "bp", "input_rows"]), (0.0, ["brows", "bp"])):
        built = build(op, ("float32",) * 3, {"beta": beta, "alpha": 1.0})
        ds = default_schedule(built, {"B": 8, "M": 256, "K": 256, "N": 256},
                              targets.host()).directives
        assert [d.get("as") for d in ds if d.op == "wrap"] == want, beta


def test_row_tiles_do_not_recompute_rows():
    # Tiles of the rows split M evenly in whole register blocks: an M just over a multiple of
    # the register rows no longer makes a second, shifted tile that recomputes nearly all rows.
    from pypto.schedule.defaults import template_knobs

    template_knobs("matmul")   # loads every template module before this one is imported alone
    from pypto.schedule.templates.linalg import _row_tile

    assert _row_tile(130, 4, 512) == (4, 130)
    assert _row_tile(1024, 4, 512) == (4, 512)
    for M in list(range(1, 80)) + [127, 130, 255, 257, 513, 1000, 1023, 3001]:
        for ry in (1, 2, 3, 4, 6, 8):
            for ty in (32, 64, 256, 512):
                r, t = _row_tile(M, ry, ty)
                tiles = -(-M // t)
                assert r == min(ry, M) and t <= M, (M, ry, ty)
                assert t <= max(ty, r) + r - 1 or tiles == 1, (M, ry, ty, t)
                assert tiles * t - M < tiles * r, (M, ry, ty, t)


# -- matmul: errors ------------------------------------------------------------------------------

def test_matmul_k_mismatch():
    with pytest.raises(ShapeError, match=r"dim K is 3 .*'a'.* but 4 .*'b'"):
        P.matmul(rand((2, 3)), rand((4, 5)))
    with pytest.raises(ShapeError, match=r"dim K is 3 .* but 4"):
        P.matmul(rand((2, 2, 3)), rand((4, 5)))
    with pytest.raises(ShapeError, match=r"dim K is 6 .* but 5"):
        P.matmul(rand((6,)), rand((5,)))


def test_matmul_batch_mismatch():
    with pytest.raises(ShapeError, match="cannot be broadcast"):
        P.matmul(rand((2, 3, 4)), rand((3, 4, 5)))


def test_matmul_bad_dtypes_and_ranks():
    with pytest.raises(DtypeError, match="matmul"):
        P.matmul(rand((2, 3), "int32"), rand((3, 4), "int32"))
    for a, b in [((2, 2, 3), (2, 3, 4)), ((2, 3), (5, 3, 4)), ((2, 3), (3,))]:
        # a stack of products is computed by batch_matmul: the error still names matmul
        with pytest.raises(DtypeError, match=r"^matmul: argument 'a' has dtype int32; expected "
                                             r"float16 or float32 or float64$"):
            P.matmul(rand(a, "int32"), rand(b, "int32"))
    with pytest.raises(DtypeError, match="'b'"):
        P.matmul(rand((2, 3)), rand((3, 4), "float64"))
    with pytest.raises(ShapeError, match="at least 1 dimension"):
        P.matmul(np.float32(2.0), rand((3, 4)))
    with pytest.raises(ShapeError, match=r"'a' must be 3-D"):
        P.batch_matmul(rand((3, 4)), rand((2, 4, 5)))
    with pytest.raises(DtypeError, match="not an array|must be a NumPy array"):
        P.matmul("abc", rand((3, 4)))


# -- linear --------------------------------------------------------------------------------------

def lin_want(x, w, bias=None):
    dt = x.dtype
    out = x.astype(np.float64) @ w.astype(np.float64).T
    if bias is not None:
        out = out + bias.astype(np.float64)
    return out.astype(dt)


@pytest.mark.parametrize("r,i,o", [(1, 1, 1), (3, 7, 5), (127, 33, 24), (6, 1000, 3), (40, 48, 130),
                                   (200, 64, 131)])
def test_linear_shapes(r, i, o):
    x, w, bias = rand((r, i), seed=1), rand((o, i), seed=2), rand((o,), seed=3)
    assert_close(P.linear(x, w, bias), lin_want(x, w, bias), **mm_tol(i, "float32"))
    assert_close(P.linear(x, w), lin_want(x, w), **mm_tol(i, "float32"))


def test_linear_leading_dims_and_1d():
    w, bias = rand((6, 5), seed=2), rand((6,), seed=3)
    x3 = rand((2, 3, 5), seed=1)
    got = P.linear(x3, w, bias)
    assert got.shape == (2, 3, 6)
    assert_close(got, lin_want(x3, w, bias))
    x1 = rand((5,), seed=4)
    got = P.linear(x1, w, bias)
    assert got.shape == (6,)
    assert_close(got, lin_want(x1, w, bias))


@pytest.mark.parametrize("dtype", ["float64", "float16"])
def test_linear_dtypes(dtype):
    x, w, bias = rand((9, 20), dtype, 1), rand((11, 20), dtype, 2), rand((11,), dtype, 3)
    got = P.linear(x, w, bias)
    assert got.dtype == np.dtype(dtype)
    assert_close(got, lin_want(x, w, bias), **mm_tol(20, dtype))


def test_linear_non_contiguous():
    x = rand((20, 9), seed=1).T          # (9, 20)
    w = rand((22, 20), seed=2)[::2]      # (11, 20)
    assert_close(P.linear(x, w), lin_want(x, w))


def test_linear_matches_reference_function():
    x, w, bias = rand((4, 5), seed=1), rand((3, 5), seed=2), rand((3,), seed=3)
    assert_close(P.linear(x, w, bias), P.linear.reference(x, w, bias))


def test_linear_errors():
    with pytest.raises(ShapeError, match=r"dim I .* is 5 .*'x'.* but 4 .*'weight'"):
        P.linear(rand((3, 5)), rand((2, 4)))
    with pytest.raises(ShapeError, match="'weight' must be 2-D"):
        P.linear(rand((3, 5)), rand((5,)))
    with pytest.raises(ShapeError, match="'bias' must be 1-D"):
        P.linear(rand((3, 5)), rand((2, 5)), rand((1, 2)))
    with pytest.raises(ShapeError, match="dim O"):
        P.linear(rand((3, 5)), rand((2, 5)), rand((3,)))
    with pytest.raises(DtypeError, match="linear"):
        P.linear(rand((3, 5)), rand((2, 5), "float64"))


# -- transpose -----------------------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(1, 1), (1, 1000), (1000, 1), (3, 7), (127, 1000), (64, 100),
                                   (33, 17)])
def test_transpose_2d(shape):
    x = rand(shape, seed=sum(shape))
    got = P.transpose(x)
    assert got.flags.c_contiguous
    np.testing.assert_array_equal(got, x.T)


@pytest.mark.parametrize("dtype", ["float64", "float16", "int8", "int32", "uint16", "int64",
                                   "bool"])
def test_transpose_dtypes(dtype):
    x = rand((13, 29), dtype, seed=3)
    got = P.transpose(x)
    assert got.dtype == x.dtype
    np.testing.assert_array_equal(got, x.T)


@pytest.mark.parametrize("axes", [None, (0, 2, 1), (1, 0, 2), (2, 1, 0), (1, 2, 0), (2, 0, 1),
                                  (0, 1, 2), (-1, 0, -2)])
def test_transpose_3d(axes):
    x = rand((4, 7, 9), seed=1)
    got = P.transpose(x, axes)
    np.testing.assert_array_equal(got, np.transpose(x, axes))
    assert got.flags.c_contiguous


@pytest.mark.parametrize("axes", [(0, 2, 1, 3), (3, 1, 0, 2), (3, 2, 1, 0), (1, 3, 0, 2),
                                  (2, 0, 3, 1)])
def test_transpose_4d(axes):
    x = rand((3, 5, 2, 7), seed=2)
    np.testing.assert_array_equal(P.transpose(x, axes), np.transpose(x, axes))


def test_transpose_size_one_axes_and_low_ranks():
    x = rand((1, 5, 1, 3), seed=4)
    for axes in [(2, 3, 0, 1), (3, 1, 2, 0), None]:
        np.testing.assert_array_equal(P.transpose(x, axes), np.transpose(x, axes))
    v = rand((7,), seed=5)
    got = P.transpose(v)
    np.testing.assert_array_equal(got, v)
    got[0] = 99.0  # a new array, not a view of the input
    assert v[0] != 99.0
    np.testing.assert_array_equal(P.transpose(np.float32(3.0)), np.float32(3.0))


def test_transpose_non_contiguous_input():
    x = rand((20, 30), seed=6)
    np.testing.assert_array_equal(P.transpose(x.T), x)
    y = rand((6, 8, 10), seed=7)[::2, :, ::3]
    np.testing.assert_array_equal(P.transpose(y, (2, 0, 1)), np.transpose(y, (2, 0, 1)))


def test_batch_transpose_kernel():
    x = rand((2, 24, 40, 3), seed=8)
    np.testing.assert_array_equal(P.batch_transpose(x), x.transpose(0, 2, 1, 3))
    x = rand((1, 9, 1, 5), "int16", seed=9)
    np.testing.assert_array_equal(P.batch_transpose(x), x.transpose(0, 2, 1, 3))


def test_transpose_errors():
    x = rand((2, 3, 4))
    with pytest.raises(ParamError, match="repeats an axis"):
        P.transpose(x, (0, 0, 1))
    with pytest.raises(ParamError, match="out of range"):
        P.transpose(x, (0, 1, 3))
    with pytest.raises(ParamError, match="each of the 3 axes"):
        P.transpose(x, (0, 1))
    with pytest.raises(ParamError, match="sequence of ints"):
        P.transpose(x, "abc")
    with pytest.raises(DtypeError, match="transpose"):
        P.transpose(rand((2, 3)).astype(np.complex64))


def test_a_tile_of_few_rows_stages_b_per_tile_in_k_blocks():
    """Register blocks over all of k stage their tile's columns of b only when enough rows reuse
    the panel (PANEL_MIN_ROWS); with fewer rows (an LSTM step's product, 64 rows) and k from
    SKINNY_MIN_K, float32 on 512-bit vectors sums in a k-blocked tile instead, the panel staged
    (read in place, a power-of-two row stride apart, it ran 2.4x slower). 1024^3 keeps register
    blocks with a staged panel, 256^3 (k below SKINNY_MIN_K) register blocks reading b in place.
    All three are right."""
    import pypto
    from pypto.compiler.lower import build
    from pypto.schedule.defaults import template_schedule
    from pypto.schedule.templates.linalg import PANEL_MIN_ROWS, SKINNY_KC

    built = build(pypto.get_op("matmul"), ("float32", "float32"), {})
    plans = {(64, 512, 2048): ("tile", True), (1024, 1024, 1024): ("register", True),
             (256, 256, 256): ("register", False)}
    for (m, k, n), (acc, staged) in plans.items():
        ds = template_schedule(built, {"M": m, "K": k, "N": n}, 16, {})
        kblocks = [d.get("factor") for d in ds if d.op == "split" and d.func == "acc"
                   and d.get("outer") == "ko"]
        assert any(d.op == "wrap" for d in ds) == staged, (m, k, n)
        assert (kblocks == [SKINNY_KC]) == (acc == "tile"), (m, k, n, kblocks)
        rows = [d.get("factor") for d in ds if d.op == "split" and d.func == "out"
                and d.get("inner") == "mi"]
        assert (rows[0] >= PANEL_MIN_ROWS) == (acc == "register" and staged), rows
    for shape in plans:
        m, k, n = shape
        a, b = rand((m, k), seed=3), rand((k, n), seed=4)
        assert_close(pypto.ops.matmul(a, b), (a.astype(np.float64) @ b.astype(np.float64))
                     .astype(np.float32), rtol=1e-4, atol=1e-4)
