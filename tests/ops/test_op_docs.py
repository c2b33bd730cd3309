"""``help(pypto.ops.X)``, IPython's ``?`` and editors show each op's own call and
documentation: every op showed the Op class's docstring, the same for all 244."""

import inspect

import pytest

import pypto
from pypto.ops._op import Op

NAMES = sorted(op.name for op in pypto.ops.builtin_ops())


@pytest.mark.parametrize("name", NAMES)
def test_each_op_documents_its_own_call(name):
    op = getattr(pypto.ops, name)
    doc = inspect.getdoc(op)
    assert doc != inspect.getdoc(Op)
    assert doc.startswith(op.public_signature()), doc[:200]
    first = doc.split("\n\n")[1]
    assert len(first) > 3 and "Calling it runs the compiled pipeline" not in first
    sig = inspect.signature(op)
    assert "out" in sig.parameters, sig


def test_the_signature_is_the_public_call():
    sig = inspect.signature(pypto.ops.conv2d)
    assert list(sig.parameters)[:3] == ["x", "w", "bias"]
    assert sig.parameters["out"].kind is inspect.Parameter.KEYWORD_ONLY
    assert "F.conv2d" in inspect.getdoc(pypto.ops.conv2d)
