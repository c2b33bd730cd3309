"""Shared test helpers: compare PyPTO results with NumPy references, per dtype."""

from __future__ import annotations

import numpy as np

from pypto.dtypes import tolerance


def assert_close(got, want, dtype=None, *, rtol=None, atol=None, err_msg=""):
    """Asserts ``got`` matches ``want`` in shape, dtype and value (NaN == NaN, Inf == Inf)."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, f"shape {got.shape} != reference {want.shape} {err_msg}"
    dt = dtype or want.dtype.name
    r, a = tolerance(dt)
    rtol = r if rtol is None else rtol
    atol = a if atol is None else atol
    if got.dtype.kind in "fc" or want.dtype.kind in "fc":
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol,
                                   atol=atol, equal_nan=True, err_msg=err_msg)
    else:
        np.testing.assert_array_equal(got, want, err_msg=err_msg)


def assert_same(got, want):
    """Asserts ``got`` equals ``want`` exactly: shape, dtype and every value."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, want.shape,
                                                                 got.dtype, want.dtype)
    np.testing.assert_array_equal(got, want)


def assert_template_knobs_exact(names, dtype: str, a, b, dims):
    """Every value of each op's ``update_grain`` template knob gives NumPy's result, bit for bit
    (the tuner's plan for the fmod family is their template)."""
    import pypto
    from pypto.compiler import targets
    from pypto.compiler.jit import compile_built
    from pypto.compiler.lower import build
    from pypto.runtime import run_kernel
    from pypto.schedule.defaults import template_knobs, template_schedule, vector_lanes
    from pypto.schedule.schedule import Schedule

    for name in names:
        op = pypto.get_op(name)
        with np.errstate(all="ignore"):
            want = getattr(np, name)(a, b)
        for grain in template_knobs(name)["update_grain"]:
            built = build(op, (dtype, dtype), {})
            ds = template_schedule(built, dims, vector_lanes(targets.host(), dtype),
                                   {"update_grain": grain})
            k = compile_built(built, Schedule(op=name, directives=tuple(ds)), targets.host(),
                              source="template")
            np.testing.assert_array_equal(run_kernel(k, op, [a, b], dims)[0], want,
                                          err_msg=f"{name} grain {grain}")


def rand(shape, dtype="float32", seed=0, low=-1.0, high=1.0):
    """Deterministic random data of a dtype (integers span the dtype's small range)."""
    rng = np.random.default_rng(seed)
    dt = np.dtype(dtype)
    if dt.kind == "f":
        return rng.uniform(low, high, size=shape).astype(dt)
    if dt.kind in "iu":
        info = np.iinfo(dt)
        lo, hi = max(info.min, -100), min(info.max, 100)
        return rng.integers(lo, hi + 1, size=shape).astype(dt)
    if dt.kind == "b":
        return rng.integers(0, 2, size=shape).astype(bool)
    raise ValueError(dtype)


#: Sizes every op is checked on: 1, small primes, and a non-power-of-two.
ODD_SIZES = (1, 3, 7, 127, 1000)


def opencl_device() -> bool:
    """True when Halide finds an OpenCL device here (PoCL in CI)."""
    import halide as hl

    from pypto.compiler import targets

    try:
        return bool(hl.host_supports_target_device(targets.parse("opencl")))
    except Exception:
        return False


#: A child process's script: one softmax call, checked, printing whether the kernel came from the
#: on-disk compile cache ("disk") or the JIT ("jit"). The compile-cache tests run it.
CACHE_PROBE = """
import numpy as np, pypto
from pypto.runtime import observe
x = np.arange(60, dtype=np.float32).reshape(6, 10) / 7
with observe() as calls:
    y = pypto.ops.softmax(x)
e = np.exp(x - x.max(1, keepdims=True))
assert np.allclose(y, e / e.sum(1, keepdims=True), rtol=1e-5), "wrong"
print("disk" if calls[-1][-1].disk else "jit")
"""


def program_segments(f):
    """The compiled segments of every path a jitted function ``f`` has recorded."""
    out, stack = [], list(f._cache.values())
    while stack:
        step = stack.pop()
        if step.segment is not None:
            out.append(step.segment)
        stack += list(step.children.values())
    return out
