"""Axes of the reductions that NumPy (or torch) accepts: axis 0 or -1 of a 0-d array (NumPy's
``sum``, ``prod``, ``max``, ``min``, ``argmax``, ``argmin``, all of torch's) and a tuple of axes
for ``median``."""

from __future__ import annotations

import numpy as np
import pytest

import pypto
import pypto.ops as P
from pypto.errors import ParamError

X0 = np.array(3.5)
NUMPY_0D = ["sum", "prod", "max", "min", "argmax", "argmin"]
#: the reductions sharing reduce._axes, with their NumPy (or torch) counterpart on a 0-d array
OTHERS = {"mean": 3.5, "var": 0.0, "std": 0.0, "logsumexp": 3.5, "all": True, "any": True,
          "count_nonzero": 1, "vector_norm": 3.5, "nansum": 3.5, "nanmean": 3.5, "nanmax": 3.5,
          "nanmin": 3.5, "median": 3.5}


@pytest.mark.parametrize("name", NUMPY_0D)
@pytest.mark.parametrize("axis", [0, -1])
@pytest.mark.parametrize("keepdims", [False, True])
def test_axis_0_of_a_0d_array_is_numpys(name, axis, keepdims):
    want = getattr(np, name)(X0, axis=axis, keepdims=keepdims)
    got = getattr(P, name)(X0, axis=axis, keepdims=keepdims)
    assert np.shape(got) == np.shape(want) == ()
    assert np.asarray(got).dtype == np.asarray(want).dtype
    assert got == want


@pytest.mark.parametrize("name", sorted(OTHERS))
@pytest.mark.parametrize("axis", [0, -1, (0,), (-1,)])
def test_axis_0_of_a_0d_array_in_every_reduction(name, axis):
    got = getattr(P, name)(X0, axis=axis)
    assert np.shape(got) == () and got == OTHERS[name]
    assert np.shape(getattr(P, name)(X0, axis=axis, keepdims=True)) == ()


def test_axis_0_of_a_0d_array_agrees_with_torch():
    torch = pytest.importorskip("torch")
    t = torch.tensor(3.5, dtype=torch.float64)
    for name, ref in [("sum", torch.sum), ("mean", torch.mean), ("max", torch.amax),
                      ("logsumexp", torch.logsumexp), ("nansum", torch.nansum)]:
        for axis in (0, -1, (0,)):
            assert getattr(P, name)(X0, axis=axis) == ref(t, dim=axis).item(), (name, axis)
    assert P.var(X0, axis=0) == torch.var(t, dim=0, correction=0).item()
    assert P.argmax(X0, axis=-1) == torch.argmax(t, dim=-1).item()


def test_a_0d_array_refuses_other_axes():
    for name in ("sum", "argmax", "mean"):
        with pytest.raises(ParamError, match=rf"{name}: parameter 'axis' must be in \[-1, 0\] for "
                                             r"an input of rank 0, got 1"):
            getattr(P, name)(X0, axis=1)
    with pytest.raises(ParamError, match="repeats an axis"):
        P.sum(X0, axis=(0, -1))
    with pytest.raises(ParamError, match="single int"):
        P.argmax(X0, axis=(0,))


def test_sum_of_a_0d_array_traced():
    assert pypto.jit(lambda t: P.sum(t * 2.0, axis=0))(X0) == 7.0


# -- median over several axes ----------------------------------------------------------------------

XM = np.random.default_rng(5).standard_normal((3, 4, 5))
XM[0, 1, 2] = XM[2, 3, 4]                 # a tie


@pytest.mark.parametrize("axis", [(0, 1), (1, 2), (0, 2), (2, 0), (0, 1, 2), (-1, 0), (), (1,)])
@pytest.mark.parametrize("keepdims", [False, True])
def test_median_over_a_tuple_of_axes_is_numpys(axis, keepdims):
    want = np.median(XM, axis=axis, keepdims=keepdims)
    got = P.median(XM, axis=axis, keepdims=keepdims)
    assert np.shape(got) == np.shape(want)
    np.testing.assert_array_equal(got, want)
    f32 = XM.astype(np.float32)
    np.testing.assert_allclose(pypto.jit(lambda t: P.median(t, axis=axis))(f32),
                               np.median(f32, axis=axis), rtol=1e-6)


def test_median_over_a_tuple_of_axes_with_nan_and_errors():
    x = XM.copy()
    x[1, 0, 3] = np.nan
    np.testing.assert_array_equal(np.isnan(P.median(x, axis=(0, 2))),
                                  np.isnan(np.median(x, axis=(0, 2))))
    with pytest.raises(ParamError, match="median: parameter 'axis' repeats an axis"):
        P.median(XM, axis=(0, -3))
    with pytest.raises(ParamError, match=r"median: parameter 'axis' must be in \[-3, 2\]"):
        P.median(XM, axis=(0, 3))


def test_median_gradient_over_a_tuple_of_axes():
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(6).standard_normal((3, 4, 5))       # odd count over (0, 2): 15
    ct = np.random.default_rng(7).standard_normal(4)
    _, vjp = pypto.vjp(lambda t: P.median(t, axis=(0, 2)), x)
    tx = torch.tensor(x, requires_grad=True)
    y = torch.median(tx.permute(1, 0, 2).reshape(4, -1), dim=1).values
    (y * torch.tensor(ct)).sum().backward()
    np.testing.assert_allclose(vjp(ct)[0], tx.grad.numpy())
