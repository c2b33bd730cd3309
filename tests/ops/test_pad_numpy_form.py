"""pad also takes np.pad's ``pad_width`` form and its mode names; results are checked against
np.pad itself (an independent reference), eager and in a program, with the gradient against
the adjoint of the same padding summed by hand."""

from __future__ import annotations

import numpy as np
import pytest

import pypto

rng = np.random.default_rng(42)
X = rng.standard_normal((3, 5)).astype(np.float32)


@pytest.mark.parametrize("width, mode", [
    (((1, 1), (2, 0)), "edge"),
    (2, "constant"),
    (((1, 2),), "reflect"),
    ([(0, 1), (3, 3)], "wrap"),
    (((1,), (2,)), "constant"),
    (((0, 0), (4, 1)), "reflect"),
    (np.array([[1, 0], [0, 2]]), "edge"),
])
def test_numpy_form_matches_np_pad(width, mode):
    want = np.pad(X, width, mode)
    np.testing.assert_array_equal(pypto.ops.pad(X, width, mode), want)
    jitted = pypto.jit(lambda t: pypto.ops.pad(t, width, mode) * 1.0)
    np.testing.assert_array_equal(jitted(X), want)


def test_a_flat_tuple_stays_torchs_form():
    # (1, 2): one element before and two after the LAST axis only (np.pad would pad both axes)
    np.testing.assert_array_equal(pypto.ops.pad(X, (1, 2)), np.pad(X, ((0, 0), (1, 2))))


def test_gradient_of_the_numpy_form():
    x = X.astype(np.float64)
    g = pypto.grad(lambda t: (pypto.ops.pad(t, ((1, 0), (0, 2)), "edge") ** 2).sum())(x)
    # edge padding repeats row 0 once and column 4 twice (three times at the corner (0, 4))
    times = np.ones_like(x)
    times[0] += 1
    times[:, 4] += 2
    times[0, 4] += 2
    np.testing.assert_allclose(g, 2 * x * times, rtol=1e-12)


@pytest.mark.parametrize("width, match", [
    (((1, 2, 3), (1, 1)), r"each entry of NumPy's pad form is \(before, after\) or \(n,\)"),
    (((1, 1), (1, 1), (1, 1)), r"one \(before, after\) pair per axis .* got 3 for rank 2"),
    ("x", r"NumPy's pad_width"),
    (1.5, r"NumPy's pad_width"),
])
def test_bad_widths_are_named(width, match):
    with pytest.raises(pypto.ParamError, match=match):
        pypto.ops.pad(X, width)


def test_numpys_unsupported_mode_is_named():
    with pytest.raises(pypto.ParamError, match=r"'mode' must be one of .*'edge' and 'wrap'.*'symmetric'"):
        pypto.ops.pad(X, 1, "symmetric")
