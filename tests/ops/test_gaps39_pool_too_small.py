"""Poolings given an input too small for the kernel, against torch: every call torch refuses
(an empty output; padding above half the kernel; avg_pool3d's input smaller than the kernel on
some axis even where padding or ceil_mode would let a window fit) is a ShapeError or ParamError
naming the op, the input size, the kernel, the padding and what to change; calls torch accepts
are accepted (a few run, the rest are checked through the output-size rule, which compiles
nothing)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from helpers import assert_close

import pypto.ops as P
from pypto.errors import ParamError, ShapeError
from pypto.ops.pool import pool_out

torch = pytest.importorskip("torch")
F = torch.nn.functional

OPS = [f"{kind}_pool{nsp}d" for nsp in (1, 2, 3) for kind in ("max", "avg")]


def _nsp(name):
    return int(name[-2])


def _torch_refuses(name, x, k, s, p, ceil):
    try:
        getattr(F, name)(torch.from_numpy(x), k, s, p, ceil_mode=ceil)
    except RuntimeError:
        return True
    return False


@pytest.mark.parametrize("name", OPS)
def test_refuses_exactly_where_torch_does(name):
    nsp = _nsp(name)
    refused = accepted = 0
    for n, k, s, p, ceil in itertools.product(range(1, 5), range(1, 5), range(1, 4), range(3),
                                              (False, True)):
        x = np.ones((1, 2) + (n,) * nsp, np.float32)
        if _torch_refuses(name, x, k, s, p, ceil):
            with pytest.raises((ShapeError, ParamError), match=name) as err:
                getattr(P, name)(x, k, s, p, ceil_mode=ceil)
            msg = str(err.value)
            if isinstance(err.value, ShapeError):
                assert " x ".join([str(n)] * nsp) in msg and "give a" in msg, msg
                assert f"padding {' x '.join([str(p)] * nsp)}" in msg, msg
            else:
                assert "'padding' must be at most half" in msg
            refused += 1
        else:
            # PyPTO's output size is torch's wherever torch runs (what the kernels are sized by)
            got = getattr(F, name)(torch.from_numpy(x), k, s, p, ceil_mode=ceil).shape[2:]
            assert tuple(got) == (pool_out(n, k, s, p, ceil),) * nsp
            accepted += 1
    assert refused > 50 and accepted > 50


@pytest.mark.parametrize("kw", [dict(kernel_size=3, padding=1), dict(kernel_size=3, ceil_mode=True),
                                dict(kernel_size=(2, 4, 2), padding=(0, 2, 1)),
                                dict(kernel_size=4, stride=1, padding=2, ceil_mode=True)])
def test_avg_pool3d_refuses_an_input_smaller_than_the_kernel_as_torch(kw):
    x = np.ones((1, 2, 2, 2, 2), np.float32)
    with pytest.raises(RuntimeError, match="smaller than kernel size"):
        F.avg_pool3d(torch.from_numpy(x), **kw)
    with pytest.raises(ShapeError, match=r"avg_pool3d: the input 2 x 2 x 2 is smaller than "
                                         r"kernel_size .* \(padding .*\); torch's avg_pool3d "
                                         r"refuses this .*: give a kernel_size no larger"):
        P.avg_pool3d(x, **kw)
    # the other poolings take it, as torch's do
    for name in ("max_pool3d",):
        want = getattr(F, name)(torch.from_numpy(x), **kw).numpy()
        assert_close(getattr(P, name)(x, **kw), want)


@pytest.mark.parametrize("name", ["avg_pool1d", "avg_pool2d", "max_pool1d", "max_pool2d"])
def test_inputs_smaller_than_the_kernel_that_torch_takes_are_taken(name):
    nsp = _nsp(name)
    x = np.arange(2 * 2 ** nsp, dtype=np.float32).reshape((1, 2) + (2,) * nsp)
    for kw in (dict(kernel_size=3, padding=1), dict(kernel_size=3, ceil_mode=True)):
        want = getattr(F, name)(torch.from_numpy(x), **kw).numpy()
        assert_close(getattr(P, name)(x, **kw), want)


@pytest.mark.parametrize("name", OPS)
def test_padding_above_half_the_kernel_is_a_param_error(name):
    x = np.ones((1, 2) + (6,) * _nsp(name), np.float32)
    for ceil in (False, True):
        with pytest.raises(RuntimeError, match="half"):
            getattr(F, name)(torch.from_numpy(x), 3, 1, 2, ceil_mode=ceil)
        with pytest.raises(ParamError, match=rf"{name}: 'padding' must be at most half of "
                                             rf"kernel_size"):
            getattr(P, name)(x, 3, 1, 2, ceil_mode=ceil)


def test_message_names_input_kernel_stride_padding_and_the_fix():
    x = np.ones((1, 1, 2, 5), np.float32)
    with pytest.raises(ShapeError) as err:
        P.max_pool2d(x, (5, 2), 1, (1, 0))
    assert str(err.value) == (
        "max_pool2d: the output would be 0 x 4; the padded input 4 x 5 is smaller than the "
        "kernel 5 x 2 (input 2 x 5, kernel_size 5 x 2, stride 1 x 1, padding 1 x 0): give a "
        "smaller kernel_size, more padding (at most half the kernel) or a larger input")
