"""``torch.func.vmap`` over a ``pypto.torch.op``: the op once per sample, stacked (torch cannot
generate that fallback for an op returning a list of tensors)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import pypto  # noqa: E402
import pypto.torch as pt  # noqa: E402

o = pypto.ops
gen = torch.Generator().manual_seed(2)


def test_vmap_over_each_dim_and_unbatched_arguments():
    x = torch.randn(3, 4, 5, dtype=torch.float64, generator=gen)
    soft = pt.op(o.softmax)
    torch.testing.assert_close(torch.func.vmap(soft)(x), torch.softmax(x, -1))
    torch.testing.assert_close(torch.func.vmap(soft, in_dims=1)(x),
                               torch.softmax(x.transpose(0, 1), -1))
    mm = pt.op(lambda a, b: o.matmul(a, b))
    a = torch.randn(6, 2, 3, dtype=torch.float64, generator=gen)
    b = torch.randn(3, 4, dtype=torch.float64, generator=gen)
    torch.testing.assert_close(torch.func.vmap(mm, in_dims=(0, None))(a, b), a @ b)


def test_vmap_of_several_outputs_and_nested():
    x = torch.randn(2, 3, 6, dtype=torch.float64, generator=gen)
    top = pt.op(lambda x: o.topk(x, 2))
    values, indices = torch.func.vmap(top)(x)
    want = torch.topk(x, 2)
    torch.testing.assert_close(values, want.values)
    assert torch.equal(indices, want.indices)
    tanh = pt.op(o.tanh)
    y = torch.randn(2, 3, 4, 5, dtype=torch.float64, generator=gen)
    torch.testing.assert_close(torch.func.vmap(torch.func.vmap(tanh))(y), torch.tanh(y))
