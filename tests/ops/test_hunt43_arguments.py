"""An unknown keyword is an ArgumentError (a ParamError and Python's TypeError, errors.py) for
every kind of op (helper-65's hunt).

The elementwise and broadcasting frontends, and ops whose keywords reach the parameter check
(losses, batch_matmul, einsum, masked_attention...), raised a plain ParamError (a ValueError), so
``except TypeError`` missed it; glu and geglu took any keyword and first checked the axis, so
``glu(x, dim=1)`` on an odd last axis said "axis -1 of x has odd length"."""

import numpy as np
import pytest

import pypto
from pypto.errors import ArgumentError

P = pypto.ops
X = np.ones((3, 4), np.float32)


@pytest.mark.parametrize("call, what", [
    (lambda: P.exp(X, bogus=1), r"^exp: got an unexpected keyword argument 'bogus'; the call is "
                                r"exp\(x\)$"),
    (lambda: P.celu(X, 1.0, alpah=2.0), r"^celu: .*'alpah'; the call is celu\(x, alpha=1.0\)$"),
    (lambda: P.add(X, X, dim=1), r"^add: got an unexpected keyword argument 'dim'; the call is "
                                 r"add\(a, b\)$"),
    (lambda: P.less(X, X, X), r"^less: too many positional arguments"),
    (lambda: P.threshold(X), r"^threshold: missing a required argument: 'threshold'"),
    (lambda: P.mse_loss(X, X, bogus=1), r"^mse_loss: unknown parameter\(s\) \['bogus'\]"),
    (lambda: P.huber_loss(X, X, delt=1.0), r"^huber_loss: unknown parameter\(s\) \['delt'\]; "
                                           r"known: \['delta'\]"),
    (lambda: P.batch_matmul(X[None], X.T[None], bogus=1), r"^batch_matmul: unknown parameter"),
    (lambda: P.einsum("ij->ji", X, optimize=True), r"^einsum: unknown keyword argument"),
    (lambda: P.glu(X, dim=0), r"^glu: got an unexpected keyword argument 'dim'; the call is "
                              r"glu\(x, axis=-1\)$"),
    (lambda: P.glu(np.ones((4, 5), np.float32), dim=0), r"^glu: .*'dim'"),    # odd last axis
    (lambda: P.geglu(X, approx="tanh"), r"^geglu: .*'approx'; the call is geglu\(x, axis=-1, "
                                        r"\*, approximate='none'\)$"),
])
def test_an_unknown_keyword_is_an_argument_error(call, what):
    with pytest.raises(ArgumentError, match=what) as info:
        call()
    assert isinstance(info.value, TypeError) and isinstance(info.value, pypto.ParamError)


def test_fitting_calls_still_compute():
    x = np.linspace(-2, 2, 12, dtype=np.float32).reshape(3, 4)
    np.testing.assert_allclose(P.celu(x, alpha=2.0), np.where(x > 0, x, 2 * np.expm1(x / 2)),
                               rtol=1e-6, atol=1e-7)
    a, b = x[:, :2], x[:, 2:]
    np.testing.assert_allclose(P.glu(x, axis=-1), a / (1 + np.exp(-b)), rtol=1e-6)
    np.testing.assert_allclose(P.huber_loss(x, 0 * x, delta=0.5, reduction="none"),
                               np.where(np.abs(x) <= 0.5, 0.5 * x * x, 0.5 * (np.abs(x) - 0.25)),
                               rtol=1e-6)
