"""The exp inside kernels (softmax, attention, logsumexp, the recurrent cells' gates): within
1 ulp of the correctly rounded e**x down to its documented flush point, 0 below it, +inf on
overflow, NaN kept; checked against NumPy's long-double exp. (float64 ran Halide's exp while
Halide's OpenCL C printed its float64 constants through float32; they are exact now, see
``pypto/ops/_consts.py``, and float64 has the same vectorized form as float32, where Halide's exp
called the C library one value at a time.)"""

import halide as hl
import numpy as np
import pytest

from pypto.ops.elementwise import kernel_exp

# just above the x below which the result is 0 (-125.5 ln2 and -1021.5 ln2)
FLUSH = {np.float32: -86.98, np.float64: -708.05}


def _run(x: np.ndarray, lanes: int) -> np.ndarray:
    inp = hl.ImageParam(hl.Float(8 * x.itemsize), 1, "x")
    i = hl.Var("i")
    f = hl.Func("f")
    f[i] = kernel_exp(inp[i])
    f.vectorize(i, lanes, hl.TailStrategy.GuardWithIf)
    inp.set(hl.Buffer(x))
    return np.asarray(f.realize([len(x)])).copy()


@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("lanes", [1, 16])
def test_kernel_exp_is_within_an_ulp_and_flushes_only_below_its_bound(dt, lanes):
    rng = np.random.default_rng(3)
    edge = 89.5 if dt is np.float32 else 711.0
    x = np.concatenate([np.linspace(-edge, edge, 400_001), rng.standard_normal(100_000) * 4,
                        rng.uniform(-1e-3, 1e-3, 1000), [0.0, -0.0, 1e-40, -1e-40]]).astype(dt)
    out = _run(x, lanes)
    ref = np.exp(x.astype(np.longdouble))
    fin = np.finfo(dt)
    kept = (x > FLUSH[dt]) & (ref <= fin.max)
    rel = np.abs((out[kept].astype(np.longdouble) - ref[kept]) / ref[kept])
    assert float(rel.max()) <= fin.eps, float(rel.max() / fin.eps)
    assert np.all(np.isposinf(out[ref > fin.max]))
    flushed = x < FLUSH[dt] - 0.02
    assert np.all(out[flushed] == 0.0)
    # results just above the flush point are normal numbers, never 0
    assert np.all(out[(x > FLUSH[dt]) & (x < FLUSH[dt] + 1)] >= fin.tiny)


@pytest.mark.parametrize("dt", [np.float32, np.float64, np.float16])
def test_kernel_exp_specials(dt):
    x = np.array([np.nan, -np.nan, np.inf, -np.inf, -1e4, 1e4, 0.0, 1.0] * 2, dtype=dt)
    out = _run(x, 8)
    assert np.isnan(out[0]) and np.isnan(out[1])
    assert np.isposinf(out[2]) and out[3] == 0.0
    assert out[4] == 0.0 and np.isposinf(out[5])
    assert out[6] == 1.0
    assert out[7] == np.exp(np.float64(1.0)).astype(dt)
