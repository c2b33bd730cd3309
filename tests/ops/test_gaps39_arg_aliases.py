"""torch's spellings beside NumPy's: ``vector_norm`` takes ``dim``/``keepdim`` for
``axis``/``keepdims`` and refuses both spellings of one, even where one of them is the default
value (``keepdims=False, keepdim=True`` was taken as keepdim=True); the other reductions, which
take NumPy's names only, refuse torch's with an ArgumentError naming their call (``all``,
``any``, ``count_nonzero`` and the ``nan*`` ops said "unknown parameter(s) ['dim']; known: none").
``roll``'s shifts and axes are ints: floats and bools are a ParamError, as torch refuses them.
"""

from __future__ import annotations

import numpy as np
import pytest

import pypto.ops as P
from pypto.errors import ArgumentError, ParamError

X = np.random.default_rng(3).standard_normal((3, 4, 5)).astype(np.float32)


@pytest.mark.parametrize("kw", [dict(keepdims=False, keepdim=True),
                                dict(keepdims=True, keepdim=False),
                                dict(keepdims=False, keepdim=False),
                                dict(keepdims=np.True_, keepdim=True)])
def test_vector_norm_refuses_keepdims_and_keepdim(kw):
    with pytest.raises(ParamError, match=r"vector_norm: give 'keepdims' or torch's 'keepdim', "
                                         r"not both \(got keepdims="):
        P.vector_norm(X, 2, **kw)


@pytest.mark.parametrize("kw", [dict(axis=0, dim=1), dict(axis=1, dim=1),
                                dict(axis=(0, 1), dim=(0, 1)), dict(axis=-1, dim=2)])
def test_vector_norm_refuses_axis_and_dim(kw):
    with pytest.raises(ParamError, match="vector_norm: give the axes once, as 'axis' or as "
                                         "torch's 'dim', not both"):
        P.vector_norm(X, 2, **kw)


@pytest.mark.parametrize("kw, torch_kw", [
    (dict(), dict()), (dict(keepdims=False), dict(keepdim=False)),
    (dict(keepdim=True), dict(keepdim=True)), (dict(keepdims=True, dim=1), dict(keepdim=True,
                                                                               dim=1)),
    (dict(axis=(0, 2), keepdim=True), dict(dim=(0, 2), keepdim=True)),
    (dict(axis=None, dim=1), dict(dim=1)), (dict(keepdims=None, keepdim=True),
                                           dict(keepdim=True))])
def test_vector_norm_mixed_spellings_match_torch(kw, torch_kw):
    torch = pytest.importorskip("torch")
    want = torch.linalg.vector_norm(torch.tensor(X, dtype=torch.float64), 2, **torch_kw).numpy()
    got = P.vector_norm(X, 2, **kw)
    assert np.shape(got) == want.shape
    np.testing.assert_allclose(got, want, rtol=2e-6)


def test_vector_norm_keepdims_must_be_a_bool():
    with pytest.raises(ParamError, match="keepdims"):
        P.vector_norm(X, 2, keepdim="yes")


@pytest.mark.parametrize("name", ["sum", "mean", "max", "min", "prod", "all", "any",
                                  "count_nonzero", "nansum", "nanmean", "nanmax", "nanmin"])
@pytest.mark.parametrize("kw", [dict(dim=0), dict(keepdim=True)])
def test_numpy_style_reductions_refuse_torchs_names_alike(name, kw):
    key = next(iter(kw))
    with pytest.raises(ArgumentError, match=rf"{name}: got an unexpected keyword argument "
                                            rf"'{key}'; the call is {name}\(x, axis=None, "
                                            r"keepdims=False\)"):
        getattr(P, name)(X, **kw)


@pytest.mark.parametrize("shift", [1.0, 1.5, True, np.True_, np.float32(2), np.array(1.0),
                                   np.array([1.0, 2.0]), [1, 2.0], (True, 1)])
def test_roll_refuses_float_and_bool_shifts(shift):
    torch = pytest.importorskip("torch")
    axis = None if np.ndim(shift) == 0 and not isinstance(shift, (list, tuple)) else (0, 1)
    with pytest.raises(ParamError, match=r"roll: 'shift' must be an int, got "):
        P.roll(X, shift, axis)
    with pytest.raises((TypeError, RuntimeError)):   # torch refuses them too
        torch.roll(torch.tensor(X), shift, axis)


@pytest.mark.parametrize("axis", [1.0, True, (0, 1.0)])
def test_roll_refuses_float_and_bool_axes(axis):
    with pytest.raises(ParamError, match=r"roll: 'axis' must be an int, got "):
        P.roll(X, (1, 1) if isinstance(axis, tuple) else 1, axis)
