"""einsum, outer, addmm, baddbmm and trace (pypto/ops/contraction.py).

Checked against NumPy (np.einsum, np.outer, np.trace and plain products, computed here) and
torch where it has the op, on sizes 1, odd and several vectors/threads, on views, in every
declared dtype, traced, with ``out=``, and on the error cases.
"""

from __future__ import annotations

import numpy as np
import pytest

import pypto
import pypto.ops as P
from helpers import assert_close, rand
from pypto import runtime
from pypto.errors import DtypeError, ParamError, ShapeError

FLOATS = ["float32", "float64", "float16"]


def _ein_want(s, *ops):
    ops = [np.asarray(o) for o in ops]
    if ops[0].dtype == np.float16:
        return np.einsum(s, *[o.astype(np.float64) for o in ops]).astype(np.float16)
    return np.einsum(s, *[o.astype(np.float64) for o in ops]).astype(ops[0].dtype)


EINSUM_CASES = [
    ("ij,jk->ik", [(3, 4), (4, 5)]),
    ("ij,jk", [(1, 1), (1, 1)]),
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("bik,bjk->bij", [(3, 7, 65), (3, 9, 65)]),            # A @ B^T
    ("bhqd,bhkd->bhqk", [(2, 3, 17, 8), (2, 3, 19, 8)]),
    ("ij->ji", [(3, 4)]),
    ("ba", [(3, 4)]),                                        # implicit: transposed
    ("ii->i", [(4, 4)]),
    ("ii", [(5, 5)]),                                        # trace
    ("iij->ij", [(3, 3, 2)]),
    ("ij->", [(3, 4)]),
    ("ij->j", [(300, 5)]),
    ("ijk->ik", [(3, 4, 5)]),
    ("i,i->", [(7,), (7,)]),
    ("i,j->ij", [(4,), (6,)]),
    ("...ij,...jk->...ik", [(2, 3, 4), (2, 4, 5)]),
    ("...ij,jk->...ik", [(2, 2, 3, 4), (4, 5)]),
    ("...j,j->...", [(2, 3, 4), (4,)]),
    ("ij,ij->ij", [(3, 4), (3, 4)]),
    ("bi,bi->b", [(3, 4), (1, 4)]),                          # a size-1 label broadcasts
    ("ij,jk,kl->il", [(3, 4), (4, 5), (5, 2)]),
    ("ab,cd->abcd", [(2, 3), (4, 1)]),
    ("ij,jk->", [(3, 4), (4, 5)]),
    ("ij,kl->", [(3, 4), (4, 5)]),
    ("Ab,bC->CA", [(3, 4), (4, 5)]),
    ("ij,jk->ik", [(130, 257), (257, 66)]),                  # several tiles and threads
]


@pytest.mark.parametrize("dtype", FLOATS)
def test_einsum_against_numpy(dtype):
    for k, (s, shapes) in enumerate(EINSUM_CASES):
        ops = [rand(sh, dtype, seed=k + j) for j, sh in enumerate(shapes)]
        got = P.einsum(s, *ops)
        assert np.asarray(got).dtype == np.dtype(dtype), s
        tol = {"rtol": 2e-2, "atol": 2e-2} if dtype == "float16" else {}
        assert_close(got, _ein_want(s, *ops), err_msg=s, **tol)
        assert_close(got, P.einsum.reference(s, *ops), err_msg=s, **tol)


def test_einsum_repeated_calls_take_the_planned_product():
    # A signature whose einsum is one product of reshapes of its operands is planned once and
    # later calls go straight to the kernel; the answers stay those of the full path. Views are
    # signatures of their own (strides are part of it); einsums that need more (a permute, a
    # sum) are not planned.
    from pypto.ops import contraction

    contraction._PLANS.clear()
    a, b = rand((3, 5, 7), seed=1), rand((3, 7, 4), seed=2)
    for s, x, y in (("bmk,bkn->bmn", a, b), ("ij,jk->ik", a[0], b[0]),
                    ("bmk,bkn->bnm", a, b), ("bmk,bkn->bm", a, b),
                    ("bmk,bkn->bmn", a[:, ::2], b), ("bmk,bkn->bmn", a, b[:, :, 1:])):
        first = P.einsum(s, x, y)
        for _ in range(2):
            got = P.einsum(s, x, y)
            assert got.shape == first.shape and np.array_equal(got, first), s
            assert_close(got, _ein_want(s, x, y), err_msg=s)
    planned = sorted(k[0] for k in contraction._PLANS)
    assert planned == ["bmk,bkn->bmn"] * 3 + ["ij,jk->ik"], planned
    # The same subscripts on other shapes or strides are another signature.
    c = rand((2, 5, 7), seed=3)[:, :, ::-1]
    assert_close(P.einsum("bmk,bkn->bmn", c, b[:2]), _ein_want("bmk,bkn->bmn", c, b[:2]))
    assert_close(P.einsum("bmk,bkn->bmn", a, b), _ein_want("bmk,bkn->bmn", a, b))


def test_einsum_against_torch_views_and_keyword():
    torch = pytest.importorskip("torch")
    a = rand((6, 40, 30), "float64")[:, ::2, 1::2]        # strided views
    b = rand((30, 6, 20), "float64").transpose(1, 0, 2)[:, ::2]
    for s in ("bij,bjk->bik", "bij,bjk->kbi", "bij,bjk->b", "bii->bi"):
        x, y = (a, b) if "bjk" in s else (a[:, :15, :15], None)
        ops = (x,) if y is None else (x, y)
        want = torch.einsum(s.replace("bii->bi", "bii->bi"), *[torch.from_numpy(np.array(o))
                                                               for o in ops]).numpy()
        assert_close(P.einsum(s, *ops), want, err_msg=s)
    assert_close(P.einsum(a, b, subscripts="bij,bjk->bik"), np.einsum("bij,bjk->bik", a, b))


def test_einsum_errors():
    a, b = rand((3, 4)), rand((4, 5))
    with pytest.raises(ParamError, match="name 2 operand\\(s\\), but 1 were given"):
        P.einsum("ij,jk->ik", a)
    with pytest.raises(ShapeError, match="operand 0 has 2 dims .* name 3"):
        P.einsum("ijk,jk->i", a, b)
    with pytest.raises(ShapeError, match="label 'j' has size 4 in operand 0 but 5"):
        P.einsum("ij,jk->ik", a, b.T)
    with pytest.raises(ParamError, match="output label 'z' appears in no operand"):
        P.einsum("ij,jk->iz", a, b)
    with pytest.raises(ParamError, match="repeat a label"):
        P.einsum("ij,jk->ii", a, b)
    with pytest.raises(ParamError, match="holds '1'; labels are letters"):
        P.einsum("i1,jk->ik", a, b)
    with pytest.raises(ParamError, match="more than one '->'"):
        P.einsum("ij->j->i", a)
    with pytest.raises(DtypeError, match="must share one dtype, got float32, float64"):
        P.einsum("ij,jk->ik", a, b.astype(np.float64))
    with pytest.raises(DtypeError, match="dtype int32 are not supported"):
        P.einsum("ij->ji", np.ones((2, 2), np.int32))
    with pytest.raises(ParamError, match="first argument must be the subscripts"):
        P.einsum(a, b)
    with pytest.raises(ShapeError, match="label 'i' is repeated in operand 0 over dims of sizes"):
        P.einsum("ii->i", a)


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "int32", "int64"])
def test_outer(dtype):
    for m, n in ((1, 1), (7, 3), (300, 257)):
        a, b = rand((m,), dtype, seed=m), rand((n,), dtype, seed=n)
        got = P.outer(a, b)
        assert got.dtype == np.dtype(dtype)
        assert_close(got, a[:, None] * b[None, :])
    x = rand((4, 6), dtype)
    assert_close(P.outer(x[:, ::2], x[0]), np.outer(x[:, ::2], x[0]))      # flattened, as NumPy
    with pytest.raises(DtypeError, match="outer.*'b'"):
        P.outer(rand(3), rand(3, "float64"))


@pytest.mark.parametrize("dtype", FLOATS)
def test_addmm_and_baddbmm(dtype):
    tol = {"rtol": 2e-2, "atol": 5e-2} if dtype == "float16" else {}

    def want(c, a, b, beta, alpha):
        prod = np.matmul(a.astype(np.float64), b.astype(np.float64))
        base = 0.0 if beta == 0 else beta * c.astype(np.float64)
        return (base + alpha * prod).astype(dtype)

    for m, k, n in ((1, 1, 1), (7, 3, 5), (130, 257, 66)):
        a, b = rand((m, k), dtype, seed=1), rand((k, n), dtype, seed=2)
        for c, beta, alpha in ((rand((m, n), dtype), 1, 1), (rand((n,), dtype), 0.5, -2.0),
                               (rand((m, 1), dtype), 0, 3.0)):
            assert_close(P.addmm(c, a, b, beta=beta, alpha=alpha), want(c, a, b, beta, alpha),
                         **tol)
        a3, b3 = rand((3, m, k), dtype, seed=3), rand((3, k, n), dtype, seed=4)
        c3 = rand((3, m, n), dtype, seed=5)
        for c, beta, alpha in ((c3, 1, 1), (c3[0, :1], 2.0, 0.5), (c3, 0, 1)):
            assert_close(P.baddbmm(c, a3, b3, beta=beta, alpha=alpha),
                         want(c, a3, b3, beta, alpha), **tol)
    # Views, and beta=0 ignores a NaN in input (torch's rule).
    a = rand((20, 30), dtype)
    c = np.full((10, 20), np.nan, dtype)
    got = P.addmm(c, a[::2, ::3], a.T[::3, :20], beta=0)
    assert not np.isnan(got).any()
    assert_close(got, want(c, a[::2, ::3], a.T[::3, :20], 0, 1), **tol)


def test_addmm_against_torch():
    torch = pytest.importorskip("torch")
    c, a, b = rand((5,), "float64"), rand((7, 9), "float64"), rand((9, 5), "float64")
    t = [torch.from_numpy(v) for v in (c, a, b)]
    assert_close(P.addmm(c, a, b, beta=0.25, alpha=3), torch.addmm(*t, beta=0.25, alpha=3))
    c3, a3, b3 = rand((4, 7, 5), "float64"), rand((4, 7, 9), "float64"), rand((4, 9, 5),
                                                                              "float64")
    t = [torch.from_numpy(v) for v in (c3, a3, b3)]
    assert_close(P.baddbmm(c3, a3, b3, beta=-1, alpha=0.5), torch.baddbmm(*t, beta=-1,
                                                                         alpha=0.5))


def test_addmm_errors():
    a, b = rand((3, 4)), rand((4, 5))
    with pytest.raises(ShapeError, match="dim K is 4 in 'mat1' but 5 in 'mat2'"):
        P.addmm(rand((3, 4)), a, b.T)
    with pytest.raises(ShapeError, match="'input' of shape \\(4,\\) cannot be broadcast"):
        P.addmm(rand(4), a, b)
    with pytest.raises(ShapeError, match="'batch1' must be 3-D"):
        P.baddbmm(rand((3, 5)), a, b)
    with pytest.raises(ShapeError, match="batch sizes of 'batch1' \\(2\\) and 'batch2' \\(3\\)"):
        P.baddbmm(rand((3, 5)), rand((2, 3, 4)), rand((3, 4, 5)))
    with pytest.raises(ParamError, match="'beta' must be a finite number"):
        P.addmm(rand((3, 5)), a, b, beta=float("nan"))
    with pytest.raises(DtypeError, match="addmm.*int32"):
        P.addmm(np.ones((3, 5), np.int32), a.astype(np.int32), b.astype(np.int32))


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64"])
def test_trace(dtype):
    for shape, kw in (((1, 1), {}), ((5, 5), {}), ((3, 7), {"offset": 2}), ((7, 3),
                                                                            {"offset": -2}),
                      ((3, 4), {"offset": 9}), ((3, 4), {"offset": -9}),
                      ((2, 3, 4), {"axis1": 1, "axis2": 2}),
                      ((4, 3, 2, 5), {"axis1": 3, "axis2": 0, "offset": -1}),
                      ((300, 301), {}),
                      # batches of 16 or more run in parallel tasks of 8 (the last shifted in)
                      ((37, 20, 19), {"axis1": 1, "axis2": 2, "offset": -3}),
                      ((20, 64, 16), {"axis1": 2, "axis2": 1, "offset": 1})):
        x = rand(shape, dtype, seed=sum(shape))
        got = P.trace(x, **kw)
        want = np.trace(x.astype(np.float64) if dtype.startswith("float") else x, **kw)
        want = np.asarray(want).astype(dtype if dtype.startswith("float") else np.int64)
        assert np.shape(got) == want.shape, (shape, kw)
        assert np.asarray(got).dtype == want.dtype
        assert_close(got, want)
    x = rand((6, 8), dtype)
    assert_close(P.trace(x[::2, 1::2]), np.trace(x[::2, 1::2]).astype(np.asarray(
        P.trace(x)).dtype))
    with pytest.raises(ShapeError, match="at least 2 dims"):
        P.trace(rand(3, dtype))
    with pytest.raises(ParamError, match="axis1 and axis2 must differ"):
        P.trace(x, axis1=1, axis2=-1)


def test_float32_trace_sums_in_float64():
    n = 2048
    diag = np.full(n, 1e-8, np.float32)
    diag[0] = 1.0
    x = np.diag(diag)
    # In float32, 1 + 1e-8 is 1: a float32 running sum stays at 1.0; float64 keeps the tail.
    want = np.float32(diag.astype(np.float64).sum())
    assert want != np.float32(1.0)
    assert P.trace(x) == want


def test_contractions_run_traced_and_write_out():
    a, b, c = rand((4, 6)), rand((6, 5)), rand((4, 5))

    @pypto.jit
    def f(a, b, c):
        return (P.einsum("ij,jk->ik", a, b) + P.addmm(c, a, b, beta=0.5)
                + P.outer(a[:, 0], b[0]) + P.trace(a[:, :4]) + P.einsum("ij->i", a)[:, None])

    want = (a @ b + 0.5 * c + a @ b + np.outer(a[:, 0], b[0]) + np.trace(a[:, :4])
            + a.sum(1)[:, None])
    assert_close(f(a, b, c), want, rtol=1e-5, atol=1e-5)
    g = pypto.jit(lambda x, y, z: P.baddbmm(z, x, y, alpha=2.0) * 1.0)
    a3, b3, c3 = rand((2, 4, 6)), rand((2, 6, 5)), rand((2, 4, 5))
    assert_close(g(a3, b3, c3), c3 + 2 * a3 @ b3, rtol=1e-5, atol=1e-5)
    for name, args, kw in (("einsum", ("bij,bjk->bik", a3, b3), {}),
                           ("addmm", (c, a, b), {"alpha": 2.0}), ("outer", (a[0], b[0]), {})):
        want = getattr(P, name)(*args, **kw)
        buf = np.empty_like(want)
        before = dict(runtime.out_stats)
        assert getattr(P, name)(*args, out=buf, **kw) is buf
        np.testing.assert_array_equal(buf, want)
        assert runtime.out_stats["in_place"] == before["in_place"] + 1, name
