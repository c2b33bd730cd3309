"""Indices a traced program is given are checked on every call, as an eager call checks them.

Before, inside ``pypto.jit`` (and composite ops, ``pypto.grad`` and the torch bridge) the kernels
clamped out-of-range indices and nothing was raised: ``index_select`` with index -1 or 7 on a
6-long axis silently read column 0 or 5, where the eager call raised a ParamError.
"""

import numpy as np
import pytest

import pypto
from pypto import ops as P
from pypto.errors import ParamError

X = np.arange(24, dtype=np.float32).reshape(4, 6)
IMG = np.random.default_rng(0).random((2, 3, 8, 8), dtype=np.float32)

# (program, good arguments, bad arguments, the eager error's words)
CASES = {
    "index_select": (lambda x, i: P.index_select(x, 1, i) * 2.0,
                     (X, np.array([5, 0])), (X, np.array([-1, 0])),
                     r"index\[0\] = -1 is out of range; valid indices are 0 to 5"),
    "take_along_axis": (lambda x, i: P.take_along_axis(x, i, axis=1),
                        (X, np.full((4, 2), -6)), (X, np.full((4, 2), 6)),
                        r"indices\[0, 0\] = 6 is out of range; valid indices are -6 to 5"),
    "gather": (lambda x, i: P.gather(x, 0, i),
               (X, np.zeros((2, 6), np.int64)), (X, np.full((2, 6), 4)),
               r"index\[0, 0\] = 4 is out of range; valid indices are 0 to 3"),
    "embedding": (lambda i, w: P.embedding(i, w),
                  (np.array([3, 0]), X), (np.array([3, 4]), X),
                  r"input\[1\] = 4 is out of range; valid indices are 0 to 3"),
    "one_hot": (lambda i: P.one_hot(i, 3) * 2,
                (np.array([0, 2]),), (np.array([0, 3]),),
                r"tensor\[1\] = 3 is out of range; valid indices are 0 to 2"),
    "scatter_add": (lambda x, i, s: P.scatter_add(x, 1, i, s),
                    (X, np.full((4, 2), 5), np.ones((4, 2), np.float32)),
                    (X, np.full((4, 2), 6), np.ones((4, 2), np.float32)),
                    r"index\[0, 0\] = 6 is out of range; valid indices are 0 to 5"),
    "cross_entropy": (lambda x, t: P.cross_entropy(x, t),
                      (X, np.array([0, 5, -100, 1])), (X, np.array([0, 6, -100, 1])),
                      r"target\[1\] = 6 is out of range; valid indices are 0 to 5"),
    "nll_loss": (lambda x, t: P.nll_loss(x, t, reduction="sum"),
                 (X, np.array([0, 5, 2, 1])), (X, np.array([0, -2, 2, 1])),
                 r"target\[1\] = -2 is out of range"),
    "roi_align": (lambda x, b: P.roi_align(x, b, (2, 2), sampling_ratio=2),
                  (IMG, np.array([[1, 0, 0, 4, 4]], np.float32)),
                  (IMG, np.array([[2, 0, 0, 4, 4]], np.float32)),
                  r"boxes\[0, 0\] = 2.0 is not a batch index in \[0, 1\]"),
    "roi_pool": (lambda x, b: P.roi_pool(x, b, (2, 2)),
                 (IMG, np.array([[1, 0, 0, 4, 4]], np.float32)),
                 (IMG, np.array([[0.5, 0, 0, 4, 4]], np.float32)),
                 r"boxes\[0, 0\] = 0.5 is not a batch index"),
}


def _eager(fn, args):
    return np.asarray(fn(*args))


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_program_checks_the_indices_it_is_given(name):
    fn, good, bad, words = CASES[name]
    with pytest.raises(ParamError, match=words):      # the eager call's error ...
        fn(*bad)
    f = pypto.jit(fn)
    np.testing.assert_allclose(f(*good), _eager(fn, good), rtol=1e-6)
    with pytest.raises(ParamError, match=words + r".*\(traced at .*test_program_value_checks"):
        f(*bad)                                       # ... and the program's, on a warm call
    np.testing.assert_allclose(f(*good), _eager(fn, good), rtol=1e-6)


def test_views_of_an_input_are_checked_as_the_op_reads_them():
    # only the elements the op reads count: the sliced-away 9s are not indices of the call
    f = pypto.jit(lambda x, i: P.index_select(x, 1, i.reshape(-1)[::2]))
    np.testing.assert_array_equal(f(X, np.array([[1, 9], [2, 9]])), X[:, [1, 2]])
    with pytest.raises(ParamError, match=r"index\[1\] = 6 is out of range"):
        f(X, np.array([[1, 0], [6, 0]]))
    g = pypto.jit(lambda x, i: P.index_select(x, 0, i.astype(np.int32).T.reshape(-1)))
    with pytest.raises(ParamError, match=r"index\[1\] = 4 is out of range"):
        g(X, np.array([[0, 1], [4, 0]], np.int64))


def test_weights_a_program_closes_over_are_checked():
    idx = np.array([0, 9])
    f = pypto.jit(lambda x: P.index_select(x, 0, idx))
    with pytest.raises(ParamError, match=r"index\[1\] = 9"):
        f(X)


def test_a_value_from_before_a_break_is_checked():
    def fn(x, i):
        j = i + 1
        if float(x.sum()) > 0:          # a break: j is an array when the next part runs
            return P.index_select(x, 1, j)
        return x
    f = pypto.jit(fn)
    np.testing.assert_array_equal(f(X, np.array([0, 4])), X[:, [1, 5]])
    with pytest.raises(ParamError, match=r"index\[1\] = 6 is out of range"):
        f(X, np.array([0, 5]))


def test_composite_ops_and_gradients_check_their_indices():
    @pypto.register_op(name="pick_rows_checked")
    def pick_rows(x, i):
        return P.index_select(x, 0, i) * 2.0

    np.testing.assert_array_equal(pick_rows(X, np.array([3])), X[[3]] * 2)
    with pytest.raises(ParamError, match=r"index\[1\] = 4 is out of range"):
        pick_rows(X, np.array([0, 4]))
    g = pypto.grad(lambda x, i: P.index_select(x, 0, i).sum())
    np.testing.assert_array_equal(g(X, np.array([1, 1]))[1], [2.0] * 6)
    with pytest.raises(ParamError, match=r"index\[0\] = -1 is out of range"):
        g(X, np.array([-1, 1]))


def test_the_torch_bridge_checks_its_indices():
    torch = pytest.importorskip("torch")
    import pypto.torch as pt

    top = pt.op(lambda x, i: P.index_select(x, 0, i) * 2.0)
    x = torch.arange(24.0).reshape(4, 6)
    assert torch.equal(top(x, torch.tensor([3, 0])), x[[3, 0]] * 2)
    with pytest.raises(ParamError, match=r"index\[0\] = 4 is out of range"):
        top(x, torch.tensor([4, 0]))


# -- indices the program computes itself -------------------------------------------------------

def _shifted_argmax(x, off):
    i = P.argmax(x, 1).astype(np.int64) + off       # computed: an argmax plus an offset
    return P.index_select(x, 1, i) * 2.0


def test_indices_a_program_computes_are_checked_before_they_are_read():
    f = pypto.jit(_shifted_argmax)
    cols = np.argmax(X, 1)                          # 5 in every row
    for off, ok in [(0, True), (1, False), (-5, True), (-6, False), (0, True)]:
        o = np.array(off)
        if ok:
            np.testing.assert_array_equal(f(X, o), X[:, cols + off] * 2.0)
        else:
            with pytest.raises(ParamError, match=rf"index\[0\] = {5 + off} is out of range; "
                               r"valid indices are 0 to 5 \(traced at .*test_program_value"):
                f(X, o)
    assert f.stats.traces == 1                      # the checks ran on replays
    # the indices are a pipeline of their own, checked before the one that reads them
    assert f.explain(X, np.array(0)).count("segment: pipeline") == 2


def test_computed_indices_seen_through_views_and_also_returned():
    def fn(x, off):
        i = (P.argmin(x, 0) + off).reshape(2, 3)    # [0]*6 plus off, as a 2x3 block
        return P.gather(x, 0, i.reshape(1, 6)), i
    f = pypto.jit(fn)
    got, i = f(X, np.array(3))
    np.testing.assert_array_equal(got, X[[3]])
    np.testing.assert_array_equal(i, np.full((2, 3), 3))
    with pytest.raises(ParamError, match=r"index\[0, 0\] = 4 is out of range; valid indices "
                       r"are 0 to 3"):
        f(X, np.array(4))


def test_computed_ids_of_an_embedding_and_a_gradient_through_them():
    w = np.arange(12, dtype=np.float64).reshape(4, 3)
    f = pypto.jit(lambda ids, w: P.embedding(ids * 2, w))
    np.testing.assert_array_equal(f(np.array([1, 0]), w), w[[2, 0]])
    with pytest.raises(ParamError, match=r"input\[0\] = 4 is out of range"):
        f(np.array([2, 0]), w)
    g = pypto.grad(lambda x, off: P.take_along_axis(
        x, P.argmax(x, 1, keepdims=True) + off, 1).sum())
    x = np.array([[1.0, 3.0, 2.0], [0.0, -1.0, 5.0]])
    np.testing.assert_array_equal(g(x, np.array(-1)), [[1, 0, 0], [0, 1, 0]])
    with pytest.raises(ParamError, match=r"indices\[1, 0\] = 3 is out of range"):
        g(x, np.array(1))


def test_a_composite_op_checks_the_indices_it_computes():
    @pypto.register_op(name="pick_shifted_argmax")
    def pick(x, off):
        return _shifted_argmax(x, off)

    np.testing.assert_array_equal(pick(X, np.array(0)), X[:, [5] * 4] * 2.0)
    with pytest.raises(ParamError, match=r"index\[0\] = 6 is out of range"):
        pick(X, np.array(1))
    f = pypto.jit(lambda x, o: pick(x, o) + 1.0)
    with pytest.raises(ParamError, match=r"index\[0\] = 6 is out of range"):
        f(X, np.array(1))


def test_under_fuse_and_trusted_indices_computed_indices_are_clamped():
    # one pipeline by request: no pipeline of the indices' own, so the kernel clamps them
    fused = pypto.fuse(_shifted_argmax)
    np.testing.assert_array_equal(fused(X, np.array(1)), X[:, [5] * 4] * 2.0)
    from pypto.ops.indexing import trusted_indices

    f = pypto.jit(_shifted_argmax)
    with trusted_indices():
        np.testing.assert_array_equal(f(X, np.array(1)), X[:, [5] * 4] * 2.0)


def test_gradient_rules_indices_are_not_checked():
    # grid_sample's rule gathers at clipped coordinates; a NaN coordinate becomes an index far
    # out of range, which the kernel clamps (the sample is masked off): no error, as before
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 2, 5, 5))
    grid = rng.uniform(-1, 1, (1, 3, 3, 2))
    grid[0, 1, 1, 0] = np.nan
    gx, gg = pypto.grad(lambda x, g: (P.grid_sample(x, g) ** 2).sum(), argnums=(0, 1))(x, grid)
    assert gx.shape == x.shape and gg.shape == grid.shape
    assert np.isfinite(gx).sum() > 0
