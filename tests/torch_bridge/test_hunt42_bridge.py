"""Defects found by helper-42's differential hunt of ``pypto.torch.op`` over the ops: float
inputs that need no gradient, constant (NumPy) outputs, tensors on two devices and dtypes NumPy
cannot view."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import pypto  # noqa: E402
import pypto.torch as pt  # noqa: E402
from pypto.errors import DtypeError, NotDifferentiableError  # noqa: E402

o = pypto.ops
gen = torch.Generator().manual_seed(42)

ROIS = [[0, 0.5, 1.0, 4.2, 3.1], [1, 2.0, -0.7, 5.5, 4.0], [0, -1.5, 2.2, 3.0, 6.0]]


def _roi_align(x, boxes):
    return o.roi_align(x, boxes, (2, 3), sampling_ratio=2)


def test_boxes_given_as_a_tensor_need_no_gradient():
    """roi_align's boxes are a float tensor that needs no gradient (its rule has none): the
    backward differentiated every float input and failed with NotDifferentiableError."""
    x = torch.randn(2, 2, 5, 6, dtype=torch.float64, generator=gen, requires_grad=True)
    boxes = torch.tensor(ROIS, dtype=torch.float64)
    top = pt.op(_roi_align)
    ct = torch.randn(3, 2, 2, 3, dtype=torch.float64, generator=gen)
    (gx,) = torch.autograd.grad(top(x, boxes), x, ct)
    _, vjp_fn = pypto.vjp(lambda v: _roi_align(v, boxes.numpy()), x.detach().numpy())
    np.testing.assert_allclose(gx.numpy(), vjp_fn(ct.numpy())[0], rtol=1e-12, atol=1e-12)
    assert torch.autograd.gradcheck(top, (x, boxes))
    # Asked for, the boxes' gradient is still PyPTO's clear refusal.
    with pytest.raises(NotDifferentiableError, match="boxes"):
        top(x, boxes.clone().requires_grad_(True)).sum().backward()


def test_a_quantization_scale_tensor_needs_no_gradient():
    """fake_quantize_per_channel_affine with its scale a tensor: torch's straight-through
    gradient for the input, where the bridge's backward raised NotDifferentiableError."""
    x = torch.randn(3, 4, dtype=torch.float64, generator=gen) * 3
    x.requires_grad_(True)
    scale = torch.tensor([0.1, 0.2, 0.15, 0.3], dtype=torch.float64)
    zero = torch.tensor([0, 1, -2, 3], dtype=torch.int32)
    top = pt.op(lambda v, s, z: o.fake_quantize_per_channel_affine(v, s, z, 1, -5, 5))
    got = top(x, scale, zero)
    (gx,) = torch.autograd.grad(got.sum(), x)
    y = x.detach().float().requires_grad_(True)
    want = torch.fake_quantize_per_channel_affine(y, scale.float(), zero, 1, -5, 5)
    want.sum().backward()
    torch.testing.assert_close(got.detach().float(), want.detach(), rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(gx.float(), y.grad)


def test_inputs_without_gradients_at_second_order():
    """linear with the data not requiring a gradient: first and second derivatives of the
    weights against torch's own (the backward differentiates the flagged inputs only)."""
    lin = pt.op(lambda x, w, b: o.tanh(o.linear(x, w, b)))
    x = torch.randn(4, 3, dtype=torch.float64, generator=gen)
    w = torch.randn(2, 3, dtype=torch.float64, generator=gen, requires_grad=True)
    b = torch.randn(2, dtype=torch.float64, generator=gen, requires_grad=True)
    assert torch.autograd.gradcheck(lin, (x, w, b))
    assert torch.autograd.gradgradcheck(lin, (x, w, b))
    (gw,) = torch.autograd.grad(lin(x, w, b).square().sum(), w, create_graph=True)
    (ggw,) = torch.autograd.grad(gw.sum(), w)
    w2 = w.detach().clone().requires_grad_(True)
    (hw,) = torch.autograd.grad(torch.tanh(torch.nn.functional.linear(x, w2, b.detach()))
                                .square().sum(), w2, create_graph=True)
    (hhw,) = torch.autograd.grad(hw.sum(), w2)
    torch.testing.assert_close(gw.detach(), hw.detach())
    torch.testing.assert_close(ggw, hhw)


CONST = np.array([1.5, -2.0, 0.25])


def _with_constant(v):
    return o.exp(v) * 2.0, CONST, o.sin(v).sum()


def test_a_constant_array_among_the_outputs():
    """A function returning a NumPy array beside traced ones: the outputs' specs counted the
    traced values only and the call failed with "out= has 2 entries; the function returns 3
    arrays" (a user who never passed out=)."""
    top = pt.op(_with_constant)
    for n in (3, 3, 4):                     # a trace, a replay, another shape
        x = torch.randn(2, n, dtype=torch.float64, generator=gen, requires_grad=True)
        a, c, s = top(x)
        assert torch.equal(c, torch.from_numpy(CONST))
        torch.testing.assert_close(a, torch.exp(x) * 2)
        torch.testing.assert_close(s, torch.sin(x).sum())
        (a.sum() + 3 * s + c.sum()).backward()
        torch.testing.assert_close(x.grad, 2 * torch.exp(x.detach()) + 3 * torch.cos(x.detach()))
    x = torch.randn(2, 3, dtype=torch.float64, generator=gen, requires_grad=True)
    assert torch.autograd.gradgradcheck(top, (x,))
    # only an integer output and a constant: no gradient reaches the input
    top2 = pt.op(lambda v: (o.argmax(v, axis=1), CONST))
    idx, c = top2(x)
    assert torch.equal(idx, torch.argmax(x, 1))
    c.sum().backward()
    assert x.grad is None


def test_histogram_through_the_bridge():
    """histogram returns its bin edges as a NumPy array: through the bridge it failed."""
    x = torch.rand(20, dtype=torch.float64, generator=gen) * 4 - 2
    counts, edges = pt.op(lambda v: o.histogram(v, 5, (-2.0, 2.0)))(x)
    want_counts, want_edges = np.histogram(x.numpy(), 5, (-2.0, 2.0))
    np.testing.assert_array_equal(counts.numpy(), want_counts)
    np.testing.assert_allclose(edges.numpy(), want_edges)


def test_tensors_on_two_devices_are_an_error():
    """A meta tensor with a CPU one: the meta kernel (the fake implementation) ran and returned
    an uninitialized CPU tensor, where torch's own ops raise."""
    top = pt.op(o.add)
    with pytest.raises(DtypeError, match=r"pypto.torch.op\(add\): argument #1 is on meta"):
        top(torch.ones(3), torch.ones(3, device="meta"))
    with pytest.raises(DtypeError, match=r"argument #1 is on cpu"):
        top(torch.ones(3, device="meta"), torch.ones(3))
    assert top(torch.ones(3, device="meta"), torch.ones(3, device="meta")).device.type == "meta"


@pytest.mark.parametrize("dtype", ["bfloat16", "float8_e4m3fn", "float8_e5m2"])
def test_dtypes_numpy_cannot_view_name_the_op_and_argument(dtype):
    """float8 gave torch's "Got unsupported ScalarType Float8_e4m3fn" (a TypeError naming
    neither the op nor the argument); bfloat16 named no op."""
    top = pt.op(o.mul, name="scaled")
    x = torch.ones(3)
    y = torch.ones(3).to(getattr(torch, dtype))
    with pytest.raises(DtypeError, match=rf"pypto.torch.op\(scaled\): argument #1 is {dtype}"):
        top(x, y)
    with pytest.raises(DtypeError, match=rf"pypto.torch.op\(scaled\): argument #1 is {dtype}"):
        top(x.to("meta"), y.to("meta"))             # the fake implementation too


def test_vmap_over_an_empty_batch():
    """torch.func.vmap over a batch of none: empty outputs of one sample's shapes and dtypes,
    as torch's own ops give (the per-sample rule stacked no results: IndexError)."""
    assert torch.func.vmap(pt.op(o.tanh))(torch.zeros(0, 3)).shape == (0, 3)
    values, indices = torch.func.vmap(pt.op(lambda x: o.topk(x, 2)), in_dims=1)(
        torch.zeros(4, 0, 5, dtype=torch.float64))
    want = torch.topk(torch.zeros(0, 4, 5, dtype=torch.float64), 2)
    assert (values.shape, values.dtype) == (want.values.shape, want.values.dtype)
    assert (indices.shape, indices.dtype) == (want.indices.shape, want.indices.dtype)
    mm = pt.op(o.matmul)
    got = torch.func.vmap(mm, in_dims=(0, None))(torch.zeros(0, 2, 3), torch.ones(3, 4))
    assert got.shape == (0, 2, 4)


def test_float16_flip_as_eagerly():
    x = torch.randn(3, 4, generator=gen).to(torch.float16)
    got = pt.op(lambda v: o.flip(v, axis=0))(x)
    assert torch.equal(got, torch.flip(x, (0,)))


TAIL = np.ones(2)


def _with_tail(v):
    return o.concat([v, TAIL]) * 2.0


def test_a_global_array_that_changes_shape():
    """An array the function reads by name changes shape between calls: @pypto.jit traces
    again, but the bridge kept the first output shape and failed with "out has shape (5,);
    expected (7,)" (an out= the user never passed)."""
    global TAIL
    top = pt.op(_with_tail)
    x = torch.zeros(3, dtype=torch.float64, requires_grad=True)
    try:
        torch.testing.assert_close(top(x), torch.tensor([0, 0, 0, 2, 2.0], dtype=torch.float64))
        TAIL = np.full(4, 2.0)
        y = top(x)
        torch.testing.assert_close(y, torch.tensor([0, 0, 0, 4, 4, 4, 4.0], dtype=torch.float64))
        y.sum().backward()
        torch.testing.assert_close(x.grad, torch.full((3,), 2.0, dtype=torch.float64))
    finally:
        TAIL = np.ones(2)


def test_a_tensor_given_by_keyword_is_an_argument():
    """(Keyword arguments were refused; see test_bridge_constants.py.)"""
    torch.testing.assert_close(pt.op(o.exp)(x=torch.ones(2)), torch.full((2,), np.e))


def test_every_float_input_requiring_a_gradient_runs_the_default_backward():
    """Integer arguments beside float ones that all require a gradient: the backward is the op
    registered with the forward (the program ``pypto tune --grad`` tunes), not a pruned one."""
    top = pt.op(lambda x, i: o.take_along_axis(x, i, axis=1) ** 2)
    x = torch.randn(2, 3, dtype=torch.float64, generator=gen, requires_grad=True)
    idx = torch.tensor([[2, 0], [1, 1]])
    top(x, idx).sum().backward()
    want = torch.zeros(2, 3, dtype=torch.float64)
    want.scatter_add_(1, idx, 2 * torch.take_along_dim(x.detach(), idx, 1))
    torch.testing.assert_close(x.grad, want)
    assert [wrt for _, wrt in top._backward] == [None]
