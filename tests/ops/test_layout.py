"""Layout, indexing and creation ops against NumPy written here (and torch where it has the op).

Also: every public call runs traced under ``pypto.jit`` with the eager result; out-of-range
indices are errors raised by the kernels, never garbage.
"""

from __future__ import annotations

import numpy as np
import pytest
from helpers import assert_same, rand

import pypto
import pypto.ops as P
from pypto.errors import DtypeError, ParamError, ShapeError

RNG = np.random.default_rng(3)
X = RNG.standard_normal((3, 4, 5)).astype(np.float32)


# -- layout --------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["float32", "int64", "bool"])
def test_concat_and_stack_along_every_axis(dtype):
    a, b, c = rand((2, 3, 4), dtype, 1), rand((2, 3, 4), dtype, 2), rand((2, 3, 4), dtype, 3)
    for axis in (0, 1, -1):
        assert_same(P.concat([a, b, c], axis=axis), np.concatenate([a, b, c], axis=axis))
        assert_same(P.stack([a, b, c], axis=axis), np.stack([a, b, c], axis=axis))
    assert_same(P.concat([a, b], axis=None), np.concatenate([a.ravel(), b.ravel()]))
    assert_same(P.stack([a], axis=3), a[..., None])


def test_concat_of_one_element_and_odd_sizes():
    a, b = rand((1, 1)), rand((1, 127), seed=1)
    assert_same(P.concat([a, b], axis=1), np.hstack([a, b]))
    assert_same(P.concat([rand((1000,))] * 5), np.concatenate([rand((1000,))] * 5))


def test_concat_and_stack_errors():
    with pytest.raises(ShapeError, match="all axes but axis 1 must match"):
        P.concat([rand((2, 3)), rand((3, 3))], axis=1)
    with pytest.raises(DtypeError, match="different dtypes"):
        P.concat([rand((2, 3)), rand((2, 3), "float64")])
    with pytest.raises(ParamError, match="non-empty list"):
        P.stack([])
    with pytest.raises(ShapeError, match="same shape"):
        P.stack([rand((2,)), rand((3,))])


def test_split_like_numpy():
    x = rand((6, 7), "int32")
    for got, want in zip(P.split(x, 3), np.split(x, 3)):
        assert_same(got, want)
    got = P.split(x, [2, 5], axis=1)
    assert isinstance(got, tuple) and len(got) == 3
    for g, w in zip(got, np.split(x, [2, 5], axis=1)):
        assert_same(g, w)
    with pytest.raises(ParamError, match="do not divide"):
        P.split(x, 4)


@pytest.mark.parametrize("mode", ["constant", "reflect", "replicate", "circular"])
def test_pad_modes_match_numpy(mode):
    x = rand((2, 5, 7))
    np_mode = {"replicate": "edge", "circular": "wrap"}.get(mode, mode)
    kw = {"constant_values": 1.5} if mode == "constant" else {}
    want = np.pad(x, ((0, 0), (2, 1), (3, 4)), mode=np_mode, **kw)
    assert_same(P.pad(x, (3, 4, 2, 1), mode=mode, value=1.5), want)


def test_pad_agrees_with_torch_and_refuses_bad_pads():
    torch = pytest.importorskip("torch")
    x = rand((1, 2, 4, 6))
    for mode in ("reflect", "replicate", "circular"):
        want = torch.nn.functional.pad(torch.from_numpy(x), (1, 2, 3, 0), mode=mode).numpy()
        assert_same(P.pad(x, (1, 2, 3, 0), mode=mode), want)
    with pytest.raises(ParamError, match="smaller than the axis"):
        P.pad(x, (6, 0), mode="reflect")
    want = torch.nn.functional.pad(torch.from_numpy(x), (-1, 0)).numpy()    # a crop, as torch's
    assert_same(P.pad(x, (-1, 0)), want)
    with pytest.raises(ParamError, match="crops more than the axis"):
        P.pad(x, (-7, 0))
    with pytest.raises(ParamError, match="mode"):
        P.pad(x, (1, 1), mode="mirror")


def test_tile_repeat_flip_roll_like_numpy():
    x = rand((3, 1, 4), "int32")
    assert_same(P.tile(x, (2, 3, 1)), np.tile(x, (2, 3, 1)))
    assert_same(P.tile(x, (2, 1, 1, 2)), np.tile(x, (2, 1, 1, 2)))
    assert_same(P.repeat(x, 3, axis=2), np.repeat(x, 3, axis=2))
    assert_same(P.repeat(x, 2), np.repeat(x, 2))
    for axis in (None, 0, (0, 2), (1, 2)):
        assert_same(P.flip(x, axis), np.flip(x, axis))
    assert_same(P.roll(x, 5), np.roll(x, 5))
    assert_same(P.roll(x, (-1, 7), axis=(0, 2)), np.roll(x, (-1, 7), axis=(0, 2)))
    assert_same(P.roll(x, 3, axis=0), np.roll(x, 3, axis=0))


# -- creation ------------------------------------------------------------------------------------

@pytest.mark.parametrize("k", [0, 2, -1])
def test_tril_triu_diag_diagonal(k):
    x = rand((2, 4, 6), "float64")
    assert_same(P.tril(x, k), np.tril(x, k))
    assert_same(P.triu(x, k), np.triu(x, k))
    v = rand((5,), "int32")
    assert_same(P.diag(v, k), np.diag(v, k))
    assert_same(P.diag(x[0], k), np.diag(x[0], k))
    assert_same(P.diagonal(x, k, 1, 2), np.diagonal(x, k, 1, 2))
    assert_same(P.diagonal(x, k, 2, 1), np.diagonal(x, k, 2, 1))


def test_eye_and_arange():
    assert_same(P.eye(3, 5, 1), np.eye(3, 5, 1, dtype=np.float32))
    assert_same(P.eye(4, dtype="int64"), np.eye(4, dtype=np.int64))
    assert_same(P.arange(7), np.arange(7))
    assert_same(P.arange(10, -3, -4), np.arange(10, -3, -4))
    got, want = P.arange(0.5, 3.0, 0.25), np.arange(0.5, 3.0, 0.25)
    assert got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-15)
    np.testing.assert_allclose(P.arange(0, 1, 0.1, dtype="float32"),
                               np.arange(0, 1, 0.1, dtype=np.float32), rtol=1e-6)
    assert_same(P.arange(3, 1), np.arange(3, 1))      # no elements: empty, as NumPy
    with pytest.raises(ParamError, match="zero"):
        P.arange(0, 3, 0)


# -- indexing ------------------------------------------------------------------------------------

@pytest.mark.parametrize("idt", ["int32", "int64"])
def test_gather_family(idt):
    x = rand((3, 6, 4), "float64")
    idx = RNG.integers(-6, 6, (3, 2, 4)).astype(idt)
    assert_same(P.take_along_axis(x, idx, 1), np.take_along_axis(x, idx.astype(np.int64), 1))
    pos = RNG.integers(0, 6, (2, 5, 3)).astype(idt)
    want = np.empty((2, 5, 3))
    for i in range(2):
        for j in range(5):
            for k in range(3):
                want[i, j, k] = x[i, pos[i, j, k], k]      # torch.gather's definition
    assert_same(P.gather(x, 1, pos), want)
    sel = np.array([5, 0, 0, 3], idt)
    assert_same(P.index_select(x, 1, sel), x[:, [5, 0, 0, 3]])
    assert_same(P.index_select(x, 2, sel[1:]), x[:, :, [0, 0, 3]])


def test_embedding_one_hot_sequence_mask():
    w = rand((10, 3))
    ids = np.array([[1, 9], [0, 1]])
    assert_same(P.embedding(ids, w, padding_idx=0), w[ids])
    oh = np.zeros((2, 2, 10), np.int64)
    for (i, j), v in np.ndenumerate(ids):
        oh[i, j, v] = 1
    assert_same(P.one_hot(ids, 10), oh)
    assert_same(P.one_hot(np.array([2, 0])), np.array([[0, 0, 1], [1, 0, 0]]))
    lengths = np.array([0, 3, 5])
    want = np.array([[j < n for j in range(4)] for n in lengths])
    assert_same(P.sequence_mask(lengths, 4), want)
    assert_same(P.sequence_mask(lengths), np.array([[j < n for j in range(5)] for n in lengths]))


def test_scatter_add_adds_duplicates():
    x = rand((2, 5, 3))
    idx = np.array([[[0, 1, 4], [0, 1, 4], [2, 2, 2]], [[4, 4, 4], [0, 0, 0], [1, 2, 3]]])
    src = rand((2, 4, 3), seed=9)
    want = x.astype(np.float64).copy()
    for i in range(2):
        for j in range(3):
            for k in range(3):
                want[i, idx[i, j, k], k] += src[i, j, k]
    np.testing.assert_allclose(P.scatter_add(x, 1, idx, src), want, rtol=1e-6)


def test_masked_fill_broadcasts_the_mask():
    x = rand((3, 4), "int32")
    mask = np.array([True, False, False, True])
    assert_same(P.masked_fill(x, mask, 7), np.where(mask, np.int32(7), x))
    with pytest.raises(DtypeError, match="bool"):
        P.masked_fill(x, mask.astype(np.int32), 1)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("value", [float("-inf"), float("inf"), float("nan")])
def test_masked_fill_and_pad_store_non_finite_fills_of_floats(dtype, value):
    # -inf is the usual fill of masked attention scores (and of max pooling's padding)
    x = rand((3, 5), dtype)
    mask = np.array([[True, False, False, True, False]] * 3)
    assert_same(P.masked_fill(x, mask, value), np.where(mask, np.asarray(value, dtype), x))
    want = np.pad(x, ((1, 2), (0, 1)), constant_values=value)
    assert_same(P.pad(x, (0, 1, 1, 2), value=value), want)


@pytest.mark.parametrize("dtype", ["int32", "int64"])
@pytest.mark.parametrize("value", [float("-inf"), float("nan")])
def test_a_non_finite_fill_of_an_integer_array_is_a_param_error(dtype, value):
    x = rand((2, 3), dtype)
    with pytest.raises(ParamError, match=f"masked_fill: parameter 'value' is {value!r}, which "
                                         f"{dtype} values cannot hold"):
        P.masked_fill(x, x > 0, value)
    with pytest.raises(ParamError, match=f"pad: parameter 'value' is {value!r}, which {dtype}"):
        P.pad(x, (1, 1), value=value)


def test_an_integer_fill_past_float64s_exact_range_is_refused():
    x = np.zeros(3, np.int64)
    mask = np.array([True, False, True])
    assert_same(P.masked_fill(x, mask, 2 ** 53), np.where(mask, np.int64(2 ** 53), x))
    with pytest.raises(ParamError, match=r"masked_fill: value 9007199254740993 has no exact "
                                         r"float64 form"):
        P.masked_fill(x, mask, 2 ** 53 + 1)       # it was written as 2**53


def test_other_float_params_stay_finite():
    with pytest.raises(ParamError, match="leaky_relu: parameter 'negative_slope' must be finite"):
        P.leaky_relu(rand((4,)), negative_slope=float("inf"))


@pytest.mark.parametrize("call, what", [
    (lambda: P.embedding(np.array([3, 10]), rand((10, 2))), r"input\[1\] = 10 .* 0 to 9"),
    (lambda: P.gather(X, 1, np.full((3, 1, 5), -1)), r"index\[0, 0, 0\] = -1 .* 0 to 3"),
    (lambda: P.take_along_axis(X, np.full((3, 1, 5), 4), 1), r"indices\[0, 0, 0\] = 4 .* -4 to 3"),
    (lambda: P.index_select(X, 2, np.array([5])), r"index\[0\] = 5 .* 0 to 4"),
    (lambda: P.one_hot(np.array([0, 3]), 3), r"tensor\[1\] = 3 .* 0 to 2"),
    (lambda: P.scatter_add(X, 0, np.full((3, 4, 5), 3), X), r"index\[0, 0, 0\] = 3 .* 0 to 2"),
])
def test_out_of_range_indices_are_clear_errors(call, what):
    with pytest.raises(ParamError, match=what):
        call()


def test_traced_indices_given_and_computed_are_checked():
    w = rand((4, 3))
    f = pypto.jit(lambda i, w: P.embedding(i, w))
    with pytest.raises(ParamError, match=r"input\[0\] = 7 is out of range; valid indices are 0 "
                                         r"to 3 \(traced at .*test_layout.py"):
        f(np.array([7, -2, 1]), w)
    # indices the program computes are computed first, then checked the same way
    g = pypto.jit(lambda i, w: P.embedding(i * 3, w))
    np.testing.assert_array_equal(g(np.array([1, 0]), w), w[[3, 0]])
    with pytest.raises(ParamError, match=r"input\[0\] = 9 is out of range; valid indices are 0 "
                                         r"to 3 \(traced at .*test_layout.py"):
        g(np.array([3, 1, 0]), w)


def test_index_dtype_and_rank_errors():
    with pytest.raises(DtypeError, match="int32 or int64"):
        P.index_select(X, 0, np.array([0.0]))
    with pytest.raises(ShapeError, match="rank"):
        P.take_along_axis(X, np.zeros((3, 1), np.int64), 1)
    with pytest.raises(ParamError, match="traced"):
        pypto.jit(lambda i: P.one_hot(i))(np.array([1, 2]))


# -- every public call traces ----------------------------------------------------------------

CALLS = {
    "concat": lambda x: P.concat([x, x * 2], axis=1),
    "stack": lambda x: P.stack([x, x, x], axis=-1),
    "split": lambda x: P.split(x, [1, 3], axis=1),
    "pad": lambda x: P.pad(x, (1, 2, 0, 1), mode="reflect"),
    "tile": lambda x: P.tile(x, (1, 2, 2)),
    "repeat": lambda x: P.repeat(x, 2, axis=0),
    "flip": lambda x: P.flip(x, (0, 2)),
    "roll": lambda x: P.roll(x, (1, -2), axis=(1, 2)),
    "tril": lambda x: P.tril(x, 1),
    "triu": lambda x: P.triu(x),
    "diag": lambda x: P.diag(x[0]),
    "diagonal": lambda x: P.diagonal(x, 1, 1, 2),
    "take_along_axis": lambda x: P.take_along_axis(x, np.ones((3, 2, 5), np.int64), 1),
    "gather": lambda x: P.gather(x, 2, np.zeros((2, 2, 2), np.int64)),
    "index_select": lambda x: P.index_select(x, 1, np.array([3, 1])),
    "embedding": lambda x: P.embedding(np.array([2, 0]), x[0]),
    "one_hot": lambda x: P.one_hot((x[0, :, 0] > 0).astype(np.int64), 2),
    "scatter_add": lambda x: P.scatter_add(x, 1, np.zeros((3, 4, 5), np.int64), x),
    "masked_fill": lambda x: P.masked_fill(x, x > 0, -1.0),
    "sequence_mask": lambda x: P.sequence_mask((x[0, :, 0] > 0).astype(np.int32), 3),
    "eye": lambda x: P.eye(4, 5) + x[0],
    "arange": lambda x: P.arange(5, dtype="float32") * x[0, 0],
}


@pytest.mark.parametrize("name", sorted(CALLS))
def test_public_call_runs_traced(name):
    fn = CALLS[name]
    want = fn(X)
    got = pypto.jit(fn)(X)
    for g, w in zip(got if isinstance(got, tuple) else (got,),
                    want if isinstance(want, tuple) else (want,)):
        assert_same(g, w)


def test_an_array_is_a_sequence_of_its_sub_arrays_in_programs_too():
    # NumPy (and the eager call) read concat(a) as concat(list(a)); a program refused it
    c = rand((2, 3, 5))
    for fn in (lambda a: P.concat(a, axis=1), lambda a: P.stack(a, axis=-1),
               lambda a: P.concat(a[1:], axis=0)):
        np.testing.assert_array_equal(pypto.jit(fn)(c), fn(c))
    np.testing.assert_array_equal(P.concat(c, axis=1), np.concatenate(c, axis=1))
