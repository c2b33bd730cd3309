"""grid_sample at NaN, infinite and huge positions, against torch and the NumPy reference:
bilinear with zeros padding gives NaN where a position is NaN or infinite (torch's weights are);
nearest reads 0 there; border padding clips an infinite position to the edge and a NaN one to 0."""

from __future__ import annotations

import numpy as np
import pytest

import pypto
from pypto.ops.grid import _grid_sample_reference

torch = pytest.importorskip("torch")

NAN, INF = float("nan"), float("inf")
POSITIONS = [[NAN, 0.1], [0.23, NAN], [INF, 0.0], [0.3, 0.3], [-INF, 0.5], [NAN, NAN],
             [1e30, 0.2], [0.1, -1e30], [-0.7, INF]]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
@pytest.mark.parametrize("padding_mode", ["zeros", "border"])
@pytest.mark.parametrize("align_corners", [False, True])
def test_nonfinite_positions_as_torch(dtype, mode, padding_mode, align_corners):
    # Positions stay off nearest's rounding ties: the float64 reference and torch's float32
    # arithmetic may round a tie differently.
    x = np.arange(2 * 3 * 4 * 5, dtype=dtype).reshape(2, 3, 4, 5) - 17
    grid = np.array([POSITIONS, POSITIONS[::-1]], dtype=dtype)[:, None]     # [2, 1, 9, 2]
    kw = dict(mode=mode, padding_mode=padding_mode, align_corners=align_corners)
    got = pypto.ops.grid_sample(x, grid, **kw)
    want = torch.nn.functional.grid_sample(torch.from_numpy(x), torch.from_numpy(grid),
                                           **kw).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6, equal_nan=True)
    np.testing.assert_allclose(_grid_sample_reference(x, grid, **kw), want, rtol=1e-6,
                               atol=1e-6, equal_nan=True)
    nan_rows = np.isnan(got[:, 0, 0])
    if mode == "bilinear" and padding_mode == "zeros":
        bad = ~np.isfinite(grid[:, 0]).all(-1)
        assert (nan_rows == bad).all()
    else:
        assert not nan_rows.any()
