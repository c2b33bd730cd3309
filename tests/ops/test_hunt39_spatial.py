"""adaptive_avg_pool2d's output_size as torch takes it: a None in the pair keeps that input size
(found in a bug hunt: it was a ParamError)."""

from __future__ import annotations

import numpy as np
import pytest

import pypto
import pypto.ops as P
from pypto.errors import ParamError


def _adaptive_mean(x, oh, ow):
    """torch's adaptive bins written out: [floor(i n / o), ceil((i + 1) n / o))."""
    h, w = x.shape[-2:]
    out = np.empty(x.shape[:-2] + (oh, ow))
    for i in range(oh):
        for j in range(ow):
            rs, re = (i * h) // oh, -((-(i + 1) * h) // oh)
            cs, ce = (j * w) // ow, -((-(j + 1) * w) // ow)
            out[..., i, j] = x[..., rs:re, cs:ce].mean(axis=(-2, -1))
    return out


@pytest.mark.parametrize("size,want", [((None, 3), (7, 3)), ((2, None), (2, 5)),
                                       ([None, None], (7, 5)), ((4, 2), (4, 2))])
def test_adaptive_avg_pool2d_none_keeps_the_input_size(size, want):
    x = np.random.default_rng(0).standard_normal((2, 3, 7, 5))
    got = P.adaptive_avg_pool2d(x, size)
    assert got.shape == (2, 3) + want
    np.testing.assert_allclose(got, _adaptive_mean(x, *want), rtol=1e-12)
    np.testing.assert_allclose(pypto.get_op("adaptive_avg_pool2d").reference(x, size), got,
                               rtol=1e-12)
    np.testing.assert_allclose(P.adaptive_avg_pool2d(x[0], size), got[0], rtol=1e-12)


def test_adaptive_avg_pool2d_bad_sizes_still_refused():
    x = np.ones((1, 1, 4, 4), np.float32)
    for bad in (None, (None,), (0, None), (1.5, None), (None, 2, 3)):
        with pytest.raises(ParamError, match="output_size"):
            P.adaptive_avg_pool2d(x, bad)
