"""The README's op-authoring example runs and matches its own NumPy reference."""

import os
import re

import numpy as np

from helpers import assert_close
from pypto.ops._load import resolve_op

README = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "README.md")


def test_readme_user_op_example(tmp_path):
    text = open(README).read()
    code = re.search(r"```python\n# my_ops.py\n(.*?)```", text, re.S).group(1)
    (tmp_path / "my_ops.py").write_text(code)
    op = resolve_op(f"{tmp_path / 'my_ops.py'}:row_scale")
    x = np.random.default_rng(0).random((37, 101)).astype(np.float32)
    assert_close(op(x, alpha=0.5), op.reference(x, alpha=0.5))
    assert_close(op(x.T.copy().T), op.reference(x))
