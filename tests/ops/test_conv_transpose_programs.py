"""conv_transpose1d/2d in programs, against torch, where a stride larger than the kernel leaves
output phases without taps: a jitted conv_transpose2d(stride=3, kernel 2, padding 0) read w past
its end (ExecutionError) while the eager call was right."""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest

import pypto

torch = pytest.importorskip("torch")
F = torch.nn.functional
o = pypto.ops


@pytest.mark.parametrize("nd, kernel, stride, padding", [
    (nd, k, s, p) for nd, k, s, p in itertools.product([1, 2], [1, 2, 3, 4], [2, 3, 5], [0, 1])
    if p < k and (s > k or (k, s) == (4, 2))])
def test_program_equals_torch(nd, kernel, stride, padding):
    rng = np.random.default_rng(kernel * 10 + stride)
    x = rng.standard_normal((1, 2) + (5,) * nd).astype(np.float32)
    w = rng.standard_normal((2, 3) + (kernel,) * nd).astype(np.float32)
    ours = o.conv_transpose1d if nd == 1 else o.conv_transpose2d
    theirs = F.conv_transpose1d if nd == 1 else F.conv_transpose2d
    want = theirs(torch.from_numpy(x), torch.from_numpy(w), stride=stride,
                  padding=padding).numpy()
    with warnings.catch_warnings():
        warnings.simplefilter("error", pypto.errors.PerformanceWarning)   # no safe-default fallback
        got = pypto.jit(lambda x, w: ours(x, w, stride=stride, padding=padding) * 1.0)(x, w)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(ours(x, w, stride=stride, padding=padding), want, rtol=1e-5,
                               atol=1e-5)
