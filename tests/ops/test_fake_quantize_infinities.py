"""fake_quantize at +-inf and NaN: both forms saturate infinities at the clamp limits (torch's
per-tensor kernel does; its per-channel kernel maps +inf to quant_min) and keep NaN."""

from __future__ import annotations

import numpy as np
import pytest

import pypto

torch = pytest.importorskip("torch")

X = np.array([[np.inf, -np.inf, np.nan, 1.3, -200.0, 200.0]], np.float32)


def test_per_tensor_infinities_as_torch_and_nan_kept():
    got = pypto.ops.fake_quantize_per_tensor_affine(X, 0.1, 3, -128, 127)
    want = torch.fake_quantize_per_tensor_affine(torch.from_numpy(X), 0.1, 3, -128,
                                                 127).numpy()
    finite = ~np.isnan(X)
    np.testing.assert_allclose(got[finite], want[finite], rtol=1e-6)
    assert np.isnan(got[~finite]).all()


def test_per_channel_saturates_both_infinities():
    scale, zp = np.array([0.1], np.float32), np.array([3], np.int32)
    got = pypto.ops.fake_quantize_per_channel_affine(X, scale, zp, 0, -128, 127)
    s = np.float32(0.1)
    np.testing.assert_allclose(got[0, :2], [(127 - 3) * s, (-128 - 3) * s], rtol=1e-6)
    assert np.isnan(got[0, 2])
    want = torch.fake_quantize_per_channel_affine(torch.from_numpy(X), torch.from_numpy(scale),
                                                  torch.from_numpy(zp), 0, -128, 127).numpy()
    np.testing.assert_allclose(got[0, 3:], want[0, 3:], rtol=1e-6)
    # torch's per-channel kernel: +inf -> quant_min (documented divergence).
    assert want[0, 0] == pytest.approx((-128 - 3) * s)
