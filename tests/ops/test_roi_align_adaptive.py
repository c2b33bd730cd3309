"""roi_align's adaptive sampling (sampling_ratio <= 0, torchvision's default and PyPTO's):
ceil(box side / bins) samples per bin and axis, per box; forward against a torch port of
torchvision's CPU kernel, on OpenCL, and its gradient against torch autograd through that port."""

from __future__ import annotations

import numpy as np
import pytest

import pypto
from helpers import opencl_device

torch = pytest.importorskip("torch")
from test_torch_crosscheck40 import t_roi_align  # noqa: E402  (tests/ops is on sys.path)

o = pypto.ops


def _boxes(dtype):
    rng = np.random.default_rng(3)
    rows = []
    for k in range(24):
        x1, y1 = rng.uniform(-3, 20), rng.uniform(-3, 16)
        w, h = np.exp(rng.uniform(np.log(0.3), np.log(30), 2))
        rows.append([k % 2, x1, y1, x1 + w, y1 + h])
    rows += [[0, 0, 0, 14, 7], [1, 2, 2, 2, 2], [0, 5, 5, 3, 1], [1, 0, 0, 23, 19]]
    return np.array(rows, dtype)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("aligned", [False, True])
@pytest.mark.parametrize("output_size, scale", [(7, 1.0), ((3, 5), 0.5), (1, 1.0)])
def test_adaptive_as_torchvision(dtype, aligned, output_size, scale):
    x = np.random.default_rng(1).standard_normal((2, 3, 20, 24)).astype(dtype)
    boxes = _boxes(dtype)
    got = o.roi_align(x, boxes, output_size, spatial_scale=scale, aligned=aligned)
    want = t_roi_align(torch.from_numpy(x), torch.from_numpy(boxes), output_size,
                       spatial_scale=scale, aligned=aligned).numpy()
    tol = dict(rtol=1e-5, atol=1e-5) if dtype == "float32" else dict(rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(got, want, **tol)
    np.testing.assert_allclose(o.roi_align.reference(x, boxes, output_size, spatial_scale=scale,
                                                     aligned=aligned), want, **tol)
    # sampling_ratio=0 and -1 are the same (torchvision: any value <= 0).
    np.testing.assert_array_equal(
        o.roi_align(x, boxes, output_size, spatial_scale=scale, aligned=aligned,
                    sampling_ratio=0), got)


def test_a_fixed_ratio_is_not_adaptive():
    x = np.random.default_rng(2).standard_normal((2, 3, 20, 24)).astype(np.float32)
    boxes = _boxes(np.float32)
    fixed = o.roi_align(x, boxes, 3, sampling_ratio=2)
    np.testing.assert_allclose(fixed, t_roi_align(torch.from_numpy(x), torch.from_numpy(boxes),
                                                  3, sampling_ratio=2).numpy(),
                               rtol=1e-5, atol=1e-5)
    assert not np.allclose(fixed, o.roi_align(x, boxes, 3))


@pytest.mark.parametrize("aligned", [False, True])
def test_adaptive_gradient_as_torch_autograd(aligned):
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 2, 9, 11))
    boxes = np.array([[0, 1, 2, 7.5, 8], [1, 3.5, 0.2, 10, 8.9], [0, 2, 2, 2.5, 2.5],
                      [1, -2, -1, 12, 3]])
    ct = rng.standard_normal((4, 2, 3, 2))
    g = pypto.grad(lambda x: (o.roi_align(x, boxes, (3, 2), aligned=aligned) * ct).sum())(x)
    xt = torch.tensor(x, requires_grad=True)
    (t_roi_align(xt, torch.tensor(boxes), (3, 2), aligned=aligned) * torch.tensor(ct)).sum() \
        .backward()
    np.testing.assert_allclose(g, xt.grad.numpy(), rtol=1e-12, atol=1e-13)


@pytest.mark.opencl
@pytest.mark.skipif(not opencl_device(), reason="needs an OpenCL device (PoCL)")
def test_adaptive_on_opencl():
    x = np.random.default_rng(5).standard_normal((2, 3, 20, 24)).astype(np.float32)
    boxes = _boxes(np.float32)
    with pypto.target("opencl"):
        got = o.roi_align(x, boxes, 4)
    np.testing.assert_allclose(got, o.roi_align.reference(x, boxes, 4), rtol=1e-5, atol=1e-5)


def test_inside_a_program_boxes_must_be_known_or_the_ratio_given():
    x = np.zeros((1, 1, 8, 8), np.float32)
    boxes = np.array([[0, 1, 1, 5, 5]], np.float32)
    with pytest.raises(pypto.errors.ParamError, match="inside a program give a sampling_ratio"):
        pypto.jit(lambda x, b: o.roi_align(x, b, 2), fullgraph=True)(x, boxes)
    got = pypto.jit(lambda x, b: o.roi_align(x, b, 2, sampling_ratio=2))(x, boxes)
    assert got.shape == (1, 1, 2, 2)
