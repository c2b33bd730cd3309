"""Traced programs bake extents into their reductions, which the algorithm fingerprint does not
see: the compile cache must still tell kernels of one program at different extents apart (the
rest of the suite runs with the cache off, so these turn it on)."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np

import pypto

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_a_third_shape_gets_a_kernel_of_its_own_extents(monkeypatch, tmp_path):
    # (4, 5) compiles the program, (3, 5) a shape-generic one with only the rows read from the
    # input, (6, 7) one with the columns too: the last was served the second's kernel, whose
    # reductions still ran over 5 columns.
    monkeypatch.setenv("PYPTO_CACHE_DIR", str(tmp_path))

    @pypto.jit
    def rows(x):
        return x.sum(axis=1, keepdims=True) + x

    @pypto.jit
    def product(a, b):
        return pypto.ops.relu(a @ b)

    rng = np.random.default_rng(3)
    for m, k in [(4, 5), (3, 5), (6, 7), (2, 9)]:
        x = rng.standard_normal((m, k))
        np.testing.assert_allclose(rows(x), x.sum(axis=1, keepdims=True) + x, rtol=1e-12)
        b = rng.standard_normal((k, 3))
        np.testing.assert_allclose(product(x, b), np.maximum(x @ b, 0), rtol=1e-12, atol=1e-12)


CODE = """
import sys, numpy as np, pypto

@pypto.fuse
def program(a, b):
    return pypto.ops.relu(a @ b) + a.sum(axis=1, keepdims=True)

k = int(sys.argv[1])
a = np.arange(4 * k, dtype=np.float64).reshape(4, k) / 7
b = np.ones((k, 3))
got = program(a, b)
want = np.maximum(a @ b, 0) + a.sum(axis=1, keepdims=True)
print(float(np.abs(got - want).max()))
"""


def test_a_fused_program_at_another_shape_is_not_loaded_from_the_cache(tmp_path):
    # A fused function keeps its name at every shape: in a process of its own each shape
    # compiles it anew, and the second process loaded the first one's kernel from the cache.
    env = dict(os.environ, PYPTO_CACHE_DIR=str(tmp_path), PYTHONPATH=ROOT)
    for k in (7, 5, 9, 7):
        r = subprocess.run([sys.executable, "-c", CODE, str(k)], env=env, capture_output=True,
                           text=True)
        assert r.returncode == 0, r.stderr[-3000:]
        assert float(r.stdout.split()[-1]) < 1e-12, (k, r.stdout, r.stderr[-2000:])
