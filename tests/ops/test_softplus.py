"""softplus(x, beta=1.0, threshold=inf): torch's parameters, an accurate default.

Checked against an independent NumPy reference (the logarithm in extended precision from the
same rounded beta x the kernel computes), against torch.nn.functional.softplus, and for what the
default must keep: NumPy's logaddexp(0, x), the algorithm (its fingerprint) of the op before
beta and threshold existed, and torch's threshold=20 results in float16 and float32.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import pypto
import pypto.ops as P
from pypto.compiler.lower import build, fingerprint
from pypto.errors import ParamError

FLOATS = ("float32", "float64", "float16")


def _inputs(dtype, n=20_000, seed=0):
    """Every magnitude of both signs, the specials, and values at the switch points."""
    rng = np.random.default_rng(seed)
    big = 80.0 if dtype != "float64" else 720.0
    x = np.concatenate([rng.uniform(-30, 30, n), rng.uniform(-big, big, n),
                        10.0 ** rng.uniform(-8, 6, n) * rng.choice([-1, 1], n),
                        [0.0, -0.0, np.inf, -np.inf, np.nan, 20.0, -20.0, 1e30, -1e30]])
    with np.errstate(over="ignore"):
        return x.astype(dtype)


def _reference(x, beta=1.0, threshold=math.inf):
    """The kernel's beta x (rounded in the compute type), log(1 + e**t) / beta in long double,
    x where t > threshold: independent of the kernel's exp and log."""
    work = np.float32 if x.dtype == np.float16 else x.dtype.type
    w = x.astype(work)
    with np.errstate(over="ignore", invalid="ignore"):
        t = w * work(beta)
        ld = t.astype(np.longdouble)
        out = np.logaddexp(np.longdouble(0), ld) / np.longdouble(work(beta))
        out = np.where(t > work(threshold), w.astype(np.longdouble), out)
        return out.astype(x.dtype)


def _ulps(got, want):
    """|got - want| in ulps of want (NaN and equal infinities: 0)."""
    same = (got == want) | (np.isnan(got) & np.isnan(want))
    with np.errstate(invalid="ignore", over="ignore"):
        d = np.abs(got.astype(np.float64) - want.astype(np.float64))
        u = np.spacing(np.abs(want)).astype(np.float64)
    return np.where(same, 0.0, d / u)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("kw", [{}, {"beta": 2.5}, {"beta": 0.3}, {"beta": -1.0},
                                {"beta": -4.0, "threshold": 3.0}, {"threshold": 20.0},
                                {"beta": 1e-3, "threshold": -2.0}, {"beta": 1e6},
                                {"beta": 0.5, "threshold": -math.inf}])
def test_matches_an_extended_precision_reference(dtype, kw):
    x = _inputs(dtype)
    got = P.softplus(x, **kw)
    want = _reference(x, **kw)
    assert got.dtype == x.dtype and got.shape == x.shape
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    limit = {"float32": 6, "float64": 6, "float16": 1}[dtype]     # as test_elementwise allows
    bad = _ulps(got, want) > limit
    assert not bad.any(), (x[bad][:5], got[bad][:5], want[bad][:5])
    lin = np.isfinite(x) & (x.astype(np.float64) * kw.get("beta", 1.0)
                            > kw.get("threshold", math.inf) + 1e-3)
    np.testing.assert_array_equal(got[lin], x[lin])     # the linear part returns x itself


@pytest.mark.parametrize("dtype", FLOATS)
def test_default_is_numpys_logaddexp_for_every_x(dtype):
    x = _inputs(dtype)
    got = P.softplus(x)
    with np.errstate(over="ignore", invalid="ignore"):
        want = np.logaddexp(0, x.astype(np.float64)).astype(dtype)
    assert (_ulps(got, want) <= {"float32": 6, "float64": 6, "float16": 1}[dtype]).all()
    np.testing.assert_array_equal(P.softplus(np.array([-np.inf, np.inf, np.nan], dtype)),
                                  np.array([0.0, np.inf, np.nan], dtype))


def test_default_keeps_the_algorithm_and_key_of_explicit_defaults():
    """The default builds the algorithm of softplus(x) before beta and threshold (no beta x
    value; only the log1p term and the NaN test); threshold=20 is another algorithm."""
    op = pypto.get_op("softplus")
    for sig in op.dtypes:
        default = build(op, sig, op.resolve_params({}))
        explicit = build(op, sig, op.resolve_params({"beta": 1.0, "threshold": math.inf}))
        assert fingerprint(default) == fingerprint(explicit)
        assert "softplus_bx" not in default.funcs
        torchlike = build(op, sig, op.resolve_params({"threshold": 20.0}))
        assert fingerprint(torchlike) != fingerprint(default)
    assert op.resolve_params({}) == {"beta": 1.0, "threshold": math.inf}


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_default_equals_threshold_20_in_float32_and_float16(dtype):
    """Beyond beta x = 20 the accurate value already rounds to x: torch's linear part changes
    nothing there (every 61st float32 above 20 here; all of them were checked once)."""
    if dtype == "float32":
        lo = int(np.float32(20).view(np.uint32))
        hi = int(np.float32(np.inf).view(np.uint32))
        x = np.arange(lo, hi + 1, 61, dtype=np.uint32).view(np.float32)
    else:
        x = np.arange(int(np.float16(20).view(np.uint16)), 0x7C01, dtype=np.uint16).view(np.float16)
    x = np.concatenate([x, -x, np.random.default_rng(1).uniform(-40, 40, 5000).astype(dtype)])
    np.testing.assert_array_equal(P.softplus(x), P.softplus(x, threshold=20.0))
    big = x > 20
    np.testing.assert_array_equal(P.softplus(x)[big], x[big])
    for beta in (0.25, 3.0):
        np.testing.assert_array_equal(P.softplus(x, beta=beta),
                                      P.softplus(x, beta=beta, threshold=20.0))


def test_float64_default_is_accurate_past_torchs_threshold():
    x = np.array([20.5, 25.0, 30.0, 33.0, 34.0])
    got = P.softplus(x)
    np.testing.assert_array_equal(got, x + np.log1p(np.exp(-x)))
    assert (got[:4] > x[:4]).all() and got[4] == x[4]
    np.testing.assert_array_equal(P.softplus(x, threshold=20.0), x)      # torch's choice


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("kw", [{}, {"beta": 2.0}, {"beta": 0.7, "threshold": 5.0},
                                {"beta": -1.5}, {"beta": -1.5, "threshold": 1.0}])
def test_against_torch(dtype, kw):
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    x = _inputs(dtype, 5000)
    if dtype == "float64":    # torch's log1p(exp(beta x)) overflows past 709 without threshold
        x = x[~(np.abs(x * kw.get("beta", 1.0)) > 700)]
    got = P.softplus(x, **kw)
    tkw = dict(kw)
    tkw.setdefault("threshold", 20.0 if dtype != "float64" else math.inf)
    want = F.softplus(torch.from_numpy(x), **tkw).numpy()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    fin = np.isfinite(want)
    np.testing.assert_array_equal(got[~fin], want[~fin])
    rtol = {"float32": 1e-6, "float64": 1e-14, "float16": 1e-3}[dtype]
    tiny = {"float32": 1e-37, "float64": 1e-300, "float16": 1e-7}[dtype]
    np.testing.assert_allclose(got[fin], want[fin], rtol=rtol, atol=tiny)
    if dtype == "float64" and "threshold" not in kw:     # torch's default, passed explicitly
        beta = kw.get("beta", 1.0)
        got20 = P.softplus(x, beta=beta, threshold=20.0)
        want20 = F.softplus(torch.from_numpy(x), beta=beta).numpy()
        lin = x * beta > 20
        np.testing.assert_array_equal(got20[lin], want20[lin])
        np.testing.assert_array_equal(got20[~lin & fin], got[~lin & fin])


def test_signs_of_zero_and_the_limits():
    x = np.array([np.inf, -np.inf, 0.0, -0.0, np.nan])
    np.testing.assert_array_equal(np.signbit(P.softplus(x[:2], beta=-1.0)), [True, True])
    np.testing.assert_array_equal(P.softplus(x, beta=-1.0), [-0.0, -np.inf, -math.log(2),
                                                             -math.log(2), np.nan])
    np.testing.assert_array_equal(P.softplus(x, beta=3.0), [np.inf, 0.0, math.log(2) / 3,
                                                            math.log(2) / 3, np.nan])
    # beta x overflows: the result is x above 0 and 0 below (log(2) / beta at 0)
    np.testing.assert_array_equal(P.softplus(np.array([1e300, -1e300, 0.0]), beta=1e10),
                                  [1e300, 0.0, math.log(2) / 1e10])
    # a tiny beta: log(2) / beta + x / 2, beyond float32's range: inf
    np.testing.assert_array_equal(P.softplus(np.float32([1.0]), beta=1e-40), [np.inf])


@pytest.mark.parametrize("dtype,beta", [("float32", 1e-30), ("float32", -3e-20),
                                        ("float32", 2.0 ** -140), ("float64", 1e-300),
                                        ("float64", -0.01), ("float16", 1e-3)])
def test_a_small_beta_keeps_the_tail_where_exp_underflows(dtype, beta):
    """e**(beta x) / beta with e**(beta x) below the least normal (or 0) but the quotient a
    normal number: the kernel scales before it rounds."""
    lim = {"float32": 250.0, "float64": 1500.0, "float16": 150.0}[dtype]
    t = -np.linspace(0, lim, 4001)
    with np.errstate(over="ignore"):
        x = (t / beta).astype(dtype)
    x = x[np.isfinite(x)]
    got, want = P.softplus(x, beta=beta), _reference(x, beta=beta)
    assert (_ulps(got, want) <= (1 if dtype == "float16" else 6)).all()
    assert (np.abs(want) > 0).sum() > x.size // 3       # the tail is there and was checked


@pytest.mark.parametrize("n", [1, 7, 64, 3 * 16384 + 77])
def test_sizes_and_layouts(n):
    rng = np.random.default_rng(n)
    x = rng.uniform(-30, 30, n)
    want = _reference(x, beta=1.7, threshold=8.0)
    got = P.softplus(x, beta=1.7, threshold=8.0)
    assert (_ulps(got, want) <= 6).all()
    x2 = np.asfortranarray(rng.uniform(-30, 30, (n, 3)))
    got2 = P.softplus(x2, 1.7, 8.0)
    assert got2.shape == x2.shape and (_ulps(got2, _reference(x2, 1.7, 8.0)) <= 6).all()
    out = np.empty_like(x)
    assert P.softplus(x, beta=1.7, threshold=8.0, out=out) is out
    np.testing.assert_array_equal(out, got)


def test_traced_and_fused_calls_take_the_parameters():
    """Inside pypto.jit the element function is built again (lifted into a fused chain)."""
    x = np.random.default_rng(3).uniform(-30, 30, (40, 7)).astype(np.float32)
    f = pypto.jit(lambda v: P.softplus(v * 2.0, beta=0.4, threshold=5.0) + 1.0)
    np.testing.assert_array_equal(f(x), P.softplus(x * 2.0, beta=0.4, threshold=5.0) + 1.0)
    x64 = x.astype(np.float64)
    g = pypto.grad(lambda v: P.softplus(v, beta=-0.7).sum())(x64)
    np.testing.assert_allclose(g, 1.0 / (1.0 + np.exp(0.7 * x64)), rtol=1e-12)


def test_refusals_name_the_parameter():
    x = np.ones(3, np.float32)
    cases = [({"beta": 0.0}, "'beta' must be nonzero"), ({"beta": 0}, "'beta' must be nonzero"),
             ({"beta": math.inf}, "'beta' must be finite"),
             ({"beta": -math.inf}, "'beta' must be finite"),
             ({"beta": math.nan}, "'beta' must be finite"),
             ({"threshold": math.nan}, "'threshold' must not be NaN"),
             ({"beta": 1e39}, r"'beta' is 1e\+39, beyond float32's range"),
             ({"beta": "2"}, "'beta' expects a number"),
             ({"threshold": None}, "'threshold' expects a number")]
    for kw, msg in cases:
        with pytest.raises(ParamError, match=f"softplus: parameter {msg}"):
            P.softplus(x, **kw)
    with pytest.raises(ParamError, match="'beta' must be nonzero"):
        P.softplus(np.ones(0), beta=0.0)                 # an empty array too
    with pytest.raises(ParamError, match="'beta' must be nonzero"):
        pypto.get_op("softplus").kernel(x, beta=0.0)     # and the kernel's own call
    with pytest.raises(ParamError, match="beyond float32's range, in which a float16 array"):
        P.softplus(np.ones(3, np.float16), beta=-1e39)
    np.testing.assert_array_equal(P.softplus(np.ones(3), beta=1e39), np.ones(3))   # float64: fine


def test_signature_is_torchs():
    assert pypto.get_op("softplus").public_signature() == "softplus(x, beta=1.0, threshold=inf)"
