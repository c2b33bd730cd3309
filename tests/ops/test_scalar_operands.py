"""Broadcasting ops with a Python number for one operand (``mul(x, 2.0)``, ``greater(x, 0)``):
values, dtypes and shapes as NumPy's (NEP 50: the number takes the array's dtype), in either
position, with ``out=``; and the number reaches the kernel as one row read for every row (a
stride-0 outer axis), not as a full-size array."""

import numpy as np
import pytest

from pypto import ops

RNG = np.random.default_rng(5)

_BINARY = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide,
           "pow": np.power, "maximum": np.maximum, "minimum": np.minimum,
           "greater": np.greater, "less_equal": np.less_equal, "equal": np.equal}


def _tol(dtype):
    return {"rtol": 2e-3, "atol": 1e-3} if dtype == np.float16 else {"rtol": 1e-6, "atol": 1e-7}


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize("shape", [(1,), (7,), (4099,), (3 * 4096,), (5, 3), (64, 65),
                                   (2, 3, 1000)])
@pytest.mark.parametrize("name", sorted(_BINARY))
def test_an_array_and_a_number_either_way_round(name, shape, dtype):
    x = (RNG.random(shape) * 4 + 0.25).astype(dtype)
    for num in (2.0, -3, 0.5, 0):
        for args in ((x, num), (num, x)):
            got = getattr(ops, name)(*args)
            with np.errstate(all="ignore"):
                want = _BINARY[name](*args)
            assert got.dtype == want.dtype and got.shape == want.shape, (args[1:], name)
            np.testing.assert_allclose(got, want, equal_nan=True, **_tol(dtype))


def test_infinities_nan_and_large_numbers_as_numpy():
    x = np.array([1.0, -2.0, np.inf, np.nan, 0.0], np.float32)
    for num in (np.inf, -np.inf, np.nan, 1e30, 2 ** 40):
        for name in ("add", "mul", "maximum", "greater"):
            with np.errstate(all="ignore"):
                want = _BINARY[name](x, num)
            np.testing.assert_array_equal(getattr(ops, name)(x, num), want)


def test_the_number_is_one_row_not_a_full_array():
    x = RNG.random((4096 * 8,)).astype(np.float32)
    np.testing.assert_allclose(ops.mul(x, 3.0), x * 3, rtol=1e-6)
    fast = ops.get_op("mul").__dict__.get("_fast") or {}
    rows = [k for k in fast if k[:3] == (np.dtype(np.float32), (8, 4096), (16384, 4))]
    assert rows and any(k[3:6] == (np.dtype(np.float32), (8, 4096), (0, 4)) for k in rows)


def test_out_with_a_number():
    x = RNG.random((300, 7)).astype(np.float32)
    out = np.empty_like(x)
    assert ops.add(x, 1.5, out=out) is out
    np.testing.assert_allclose(out, x + 1.5, rtol=1e-6)
    assert ops.sub(2, x, out=out) is out
    np.testing.assert_allclose(out, 2 - x, rtol=1e-6)


def test_other_calls_keep_the_general_path():
    i = np.arange(10, dtype=np.int32)
    assert ops.add(i, 2.5).dtype == (i + 2.5).dtype                 # promoted, as NumPy
    np.testing.assert_array_equal(ops.add(i, 2.5), i + 2.5)
    t = RNG.random((6, 4)).astype(np.float32).T                     # not C-ordered
    np.testing.assert_allclose(ops.mul(t, 2.0), t * 2, rtol=1e-6)
    np.testing.assert_array_equal(ops.mul(np.zeros((0, 3), np.float32), 2.0),
                                  np.zeros((0, 3), np.float32))
    with pytest.raises(Exception, match="does not fit|cannot combine"):
        ops.add(np.zeros(3, np.float32), 10 ** 400)
