"""A pypto.torch op called with no tensors is a TraceError saying so (an op registered with an
empty argument list made torch's schema parser fail with "expected ident")."""

import pytest

torch = pytest.importorskip("torch")

import pypto  # noqa: E402
import pypto.torch as pt  # noqa: E402
from pypto.errors import TraceError  # noqa: E402


def test_no_tensors_is_a_trace_error():
    top = pt.op(lambda: pypto.ops.tanh(torch.zeros(1).numpy()))
    with pytest.raises(TraceError, match="called with no tensors"):
        top()
