"""Central finite differences in float64, the reference every gradient rule is checked against.

The function is evaluated through ``pypto.jit`` (forward only; its own Halide kernels), never
through the backward under test. ``check_vjp`` weighs the outputs with a random cotangent so one
scalar covers every output element.
"""

from __future__ import annotations

import numpy as np

import pypto


def numeric_vjp(f, args, ct, eps=1e-6):
    """d <f(args), ct> / d args[k] for each float argument, by central differences."""
    jf = pypto.jit(f)

    def scalar(xs):
        out = jf(*xs)
        outs = out if isinstance(out, tuple) else (out,)
        cts = ct if isinstance(ct, tuple) else (ct,)
        return sum(float(np.sum(np.asarray(o, np.float64) * c)) for o, c in zip(outs, cts))

    grads = []
    for k, a in enumerate(args):
        if not (isinstance(a, np.ndarray) and a.dtype.kind == "f"):
            grads.append(None)
            continue
        g = np.zeros(a.shape)
        for i in np.ndindex(a.shape):
            plus = [x.copy() if j == k else x for j, x in enumerate(args)]
            minus = [x.copy() if j == k else x for j, x in enumerate(args)]
            plus[k][i] += eps
            minus[k][i] -= eps
            g[i] = (scalar(plus) - scalar(minus)) / (2 * eps)
        grads.append(g)
    return grads


def check_vjp(f, *args, seed=0, rtol=1e-6, atol=1e-7, eps=1e-6):
    """Asserts pypto.vjp's gradients of ``f`` at ``args`` (float64) equal the central
    differences; returns the analytic gradients. (An op without float64 takes float32 args,
    a larger ``eps`` and looser tolerances.)"""
    rng = np.random.default_rng(seed)
    out, vjp_fn = pypto.vjp(f, *args)
    outs = out if isinstance(out, tuple) else (out,)
    cts = tuple(rng.standard_normal(np.shape(o)).astype(np.asarray(o).dtype) for o in outs)
    got = vjp_fn(*cts)
    want = numeric_vjp(f, args, cts if len(cts) > 1 else cts[0], eps=eps)
    for k, (g, w) in enumerate(zip(got, want)):
        if w is None:
            continue
        assert g is not None, f"no gradient for argument #{k}"
        assert g.shape == w.shape and g.dtype == args[k].dtype, (k, g.shape, g.dtype)
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol * (1 + np.abs(w).max()),
                                   err_msg=f"argument #{k}")
    return got
