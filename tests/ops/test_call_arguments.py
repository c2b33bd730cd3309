"""Arguments that do not fit an op's signature get an ArgumentError naming the op and its public
signature (Python's own TypeError named the private frontend function); an error raised inside
an op that fits its signature passes through as it was."""

import numpy as np
import pytest

import pypto
from pypto.ops import _registry

X = np.ones((3, 4), np.float32)


@pytest.mark.parametrize("call,what", [
    (lambda: pypto.ops.sum(X, foo=1), "unexpected keyword argument 'foo'"),
    (lambda: pypto.ops.embedding(np.array([0]), X, sparse=True), "'sparse'"),
    (lambda: pypto.ops.matmul(X, X.T, y=1), "'y'"),
    (lambda: pypto.ops.softmax(), "missing a required argument"),
    (lambda: pypto.ops.cumsum(X, 1, 2, 3), "too many positional arguments"),
])
def test_a_call_that_does_not_fit_the_signature_names_the_op(call, what):
    with pytest.raises(pypto.ArgumentError, match=what) as info:
        call()
    name = str(info.value).split(":")[0]
    assert f"the call is {name}(" in str(info.value)
    assert "_frontend" not in str(info.value)
    assert isinstance(info.value, TypeError) and isinstance(info.value, pypto.ParamError)


def test_every_op_with_a_frontend_names_itself_for_an_unknown_keyword():
    for name in sorted(_registry._OPS):
        op = pypto.get_op(name)
        if getattr(op, "frontend", None) is None:     # no frontend, or a composite op of a test
            continue
        # (a missing argument may be named first: X alone does not fit every op)
        with pytest.raises(pypto.ParamError, match=rf"^{name}: "):
            op(X, no_such_argument=1)


def test_a_type_error_from_inside_a_fitting_call_is_not_renamed():
    with pytest.raises(pypto.DtypeError):
        pypto.ops.softmax(np.ones(3, np.int32))
