"""A function that needs a traced value in Python cannot be one program: pypto.grad and
pypto.torch.op say so, name where, and advise cond/where (not 'drop fullgraph=True', which the
caller did not set and cannot drop)."""

from __future__ import annotations

import numpy as np
import pytest

import pypto

o = pypto.ops


def branchy(x):
    if float(o.sum(x)) > 0:
        return o.tanh(x).sum()
    return (x * 2).sum()


def _check(message, who):
    assert message.startswith(who), message
    assert "must trace as one program" in message
    assert "(float)" in message and "computed by sum" in message
    assert "pypto.cond(pred, f, g, *xs) or pypto.ops.where" in message
    assert "fullgraph" not in message


def test_grad_of_a_branch_on_a_value():
    with pytest.raises(pypto.GraphBreakError) as e:
        pypto.grad(branchy)(np.ones(3, np.float32))
    _check(str(e.value), "grad(branchy)")


def test_torch_op_of_a_branch_on_a_value():
    torch = pytest.importorskip("torch")
    import pypto.torch as pt

    with pytest.raises(pypto.GraphBreakError) as e:
        pt.op(branchy)(torch.ones(3))
    _check(str(e.value), "pypto.torch.op(branchy)")


def test_jit_keeps_its_own_advice():
    with pytest.raises(pypto.GraphBreakError, match="drop fullgraph=True"):
        pypto.jit(branchy, fullgraph=True)(np.ones(3, np.float32))
