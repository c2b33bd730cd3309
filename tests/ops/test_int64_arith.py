"""int64, NumPy's default integer, through the arithmetic ops: exact, wrapping on overflow as
NumPy does, with Python scalars typed the NumPy way (the array's int64)."""

import numpy as np
import pytest

import pypto

P = pypto.ops
RNG = np.random.default_rng(64)
LO, HI = np.iinfo(np.int64).min, np.iinfo(np.int64).max


def _ints(n):
    a = RNG.integers(LO, HI, n, dtype=np.int64, endpoint=True)
    a[: min(n, 4)] = [LO, HI, 0, -1][: min(n, 4)]
    return a


BINARY = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "maximum": np.maximum,
          "minimum": np.minimum}
UNARY = {"abs": np.abs, "neg": np.negative, "square": np.square, "sign": np.sign,
         "relu": lambda x: np.maximum(x, 0)}


@pytest.mark.parametrize("n", [1, 7, 1000, 100_003])
@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_int64_wraps_like_numpy(name, n):
    a, b = _ints(n), _ints(n)
    with np.errstate(over="ignore"):
        want = BINARY[name](a, b)
    got = getattr(P, name)(a, b)
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_int64_wraps_like_numpy(name):
    a = _ints(4099)
    with np.errstate(over="ignore"):
        want = UNARY[name](a)
    got = getattr(P, name)(a)
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, want)


def test_scalars_broadcasting_views_and_where():
    a = _ints(3 * 50).reshape(3, 50)
    np.testing.assert_array_equal(P.add(a, 2**40), a + np.int64(2**40))
    np.testing.assert_array_equal(P.mul(a[:, ::-2], a[:1, ::2]), a[:, ::-2] * a[:1, ::2])
    c = a > 0
    np.testing.assert_array_equal(P.where(c, a, -a), np.where(c, a, -a))
    assert P.add(a, 2).dtype == np.int64


def test_int64_indices_compose_in_a_program():
    # one_hot and argsort return int64: arithmetic on them stays in the program
    x = np.arange(6)
    got = pypto.jit(lambda t: P.one_hot(t, 8) * 3 + 1)(x)
    np.testing.assert_array_equal(got, np.eye(8, dtype=np.int64)[x] * 3 + 1)


def test_mixed_int_widths_are_still_refused():
    with pytest.raises(pypto.DtypeError, match="int64"):
        P.add(np.arange(3, dtype=np.int64), np.arange(3, dtype=np.int32))


@pytest.mark.parametrize("lo, hi", [(0, 5), (-2**53, 2**53), (None, 2**62), (3, None),
                                    (-2**70, 2**70), (LO, HI)], ids=str)
def test_clip_int64_is_exact(lo, hi):
    # Index clamping (np.clip(idx, 0, n - 1)) on NumPy's default ints; bounds beyond the dtype
    # clip to its limits, as NumPy 2 does with a Python int.
    a = _ints(1001)
    a[4:8] = [2**53 + 1, -2**53 - 1, 2**62, -2**62]
    want = np.clip(a, None if lo is None else max(lo, LO), None if hi is None else min(hi, HI))
    got = P.clip(a, lo, hi)
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, want)


def test_clip_int64_bound_without_an_exact_float64_is_refused():
    # Bounds reach the kernel as float64: 2**53 + 1 would clip at 2**53 + 2.
    with pytest.raises(pypto.ParamError, match=r"'max' is 9007199254740993.*pypto\.ops\.minimum"):
        P.clip(np.arange(3), 0, 2**53 + 1)


def test_torch_agrees_on_int64():
    torch = pytest.importorskip("torch")
    a, b = _ints(513), _ints(513)
    ta, tb = torch.from_numpy(a), torch.from_numpy(b)
    np.testing.assert_array_equal(P.mul(a, b), (ta * tb).numpy())
    np.testing.assert_array_equal(P.sub(a, b), (ta - tb).numpy())
    np.testing.assert_array_equal(P.maximum(a, b), torch.maximum(ta, tb).numpy())
    np.testing.assert_array_equal(P.clip(a, -2**40, 2**50), torch.clamp(ta, -2**40, 2**50).numpy())


REDUCE = {"sum": np.sum, "prod": np.prod, "max": np.max, "min": np.min, "argmax": np.argmax,
          "argmin": np.argmin}


@pytest.mark.parametrize("shape", [(1,), (7,), (5, 1000), (300, 7), (3, 4, 5)], ids=str)
@pytest.mark.parametrize("name", sorted(REDUCE))
def test_int64_reductions_match_numpy_over_every_axis(name, shape):
    x = RNG.integers(-2**62, 2**62, shape, dtype=np.int64)
    x.flat[0] = LO
    x.flat[-1] = x.flat[len(x.flat) // 2]           # a tie for the arg reductions
    axes = [None, *range(len(shape))]
    if len(shape) > 1 and not name.startswith("arg"):
        axes.append((0, len(shape) - 1))
    for ax in axes:
        with np.errstate(over="ignore"):
            want = REDUCE[name](x, axis=ax)
        got = getattr(P, name)(x, axis=ax)
        assert np.asarray(got).dtype == np.asarray(want).dtype, (name, ax)
        np.testing.assert_array_equal(got, want, err_msg=f"{name} axis={ax}")
