"""The README's op-authoring example runs and matches its own NumPy reference."""

import os
import re
import textwrap

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


def test_readme_programs_examples_run():
    text = open(README).read()
    section = text.split("## Programs", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    env: dict = {}
    exec(compile(blocks[0], "README programs example", "exec"), env)   # noqa: S102 - our README
    x, w1, b1, w2 = env["x"], env["w1"], env["b1"], env["w2"]
    h = x.astype(np.float64) @ w1 + b1
    from math import erf
    gelu = 0.5 * h * (1 + np.vectorize(erf)(h / np.sqrt(2)))
    np.testing.assert_allclose(env["y"], x + gelu @ w2, rtol=1e-4)
    assert "segment: pipeline" in env["mlp"].explain(x, w1, b1, w2)
    code = "import pypto\n" + textwrap.dedent(blocks[1])
    exec(compile(code, "README composite example", "exec"), env)   # noqa: S102
    q = env["my_quantize"](x)
    np.testing.assert_allclose(q, (x - x.min()) * np.float32(255 / (x.max() - x.min())), rtol=1e-5)
    from pypto.ops import _registry
    _registry._OPS.pop("my_quantize", None)
