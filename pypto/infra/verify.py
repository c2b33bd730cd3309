"""The output check: one routine for the tuner's worker, ``pypto bench``, profiling, memory, the
roofline and the database tools, so that no result is timed or stored unverified.

Each element is compared on its own (NumPy's ``isclose``: ``|got - want| <= atol + rtol*|want|``),
with the tolerance of the reference's dtype. A tolerance scaled by the reference's largest
magnitude would let every small element be wholly wrong; and since ``inf - inf`` is NaN, infinities
and NaNs are compared by position and sign, exactly, before any arithmetic.
"""

from __future__ import annotations

import numpy as np

from ..dtypes import tolerance

#: How much looser than the dtype's tolerance (:func:`pypto.dtypes.tolerance`, what the op tests use
#: against NumPy) a candidate may be: a schedule may reassociate reductions and fuse multiply-adds.
SLACK = 10.0


def poison(a: np.ndarray) -> None:
    """Fills an output buffer with values no correct kernel leaves behind (NaN, near-max ints)."""
    if a.dtype.kind == "f":
        a.fill(np.nan)
    elif a.dtype.kind in "iu":
        a.fill(np.iinfo(a.dtype).max - 3)
    else:
        a.fill(True)


def allowed(dtype) -> tuple[float, float]:
    """(rtol, atol) a result of ``dtype`` may differ from its reference by: SLACK x the dtype's."""
    rtol, atol = tolerance(np.dtype(dtype).name)
    return rtol * SLACK, atol * SLACK


def mismatch(got, want, tol: tuple[float, float] | None = None) -> str | None:
    """None when ``got`` matches the reference ``want``, else a sentence saying what differs.

    Args:
        got: the candidate's output.
        want: the reference output (its dtype picks the tolerance).
        tol: ``(rtol, atol)`` allowed per element; default :func:`allowed` for ``want``'s dtype.

    Floats: NaN and +-inf must sit exactly where the reference has them; every finite element
    must satisfy ``|got - want| <= atol + rtol * |want|``. Integers and bools must be equal.

    >>> mismatch(np.array([1e3, 1e-3], np.float32), np.array([1e3, 2e-3], np.float32))
    '1 of 2 elements differ beyond rtol=0.001, atol=0.0001; first at (1,): got 0.001, want 0.002'
    """
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape:
        return f"shape {got.shape} != {want.shape}"
    if got.dtype.kind not in "fc" and want.dtype.kind not in "fc":
        bad = got != want
        return _report(bad, got, want, "elements differ") if bad.any() else None
    rtol, atol = allowed(want.dtype) if tol is None else tol
    wide = np.complex128 if "c" in (got.dtype.kind, want.dtype.kind) else np.float64
    g, w = got.astype(wide), want.astype(wide)
    g_nan, w_nan = np.isnan(g), np.isnan(w)
    if not np.array_equal(g_nan, w_nan):
        return _report(g_nan != w_nan, got, want, "elements are NaN in one and not the other "
                                                 "(unwritten, or wrong)")
    special = np.isinf(w) | np.isinf(g)
    if special.any():
        bad = special & (g != w)  # an infinity of the same sign in the same place, nothing else
        if bad.any():
            return _report(bad, got, want, "elements differ in their infinities")
    finite = ~(w_nan | special)
    with np.errstate(invalid="ignore", over="ignore"):
        bad = finite & ~np.isclose(g, w, rtol=rtol, atol=atol)
    if bad.any():
        return _report(bad, got, want, f"elements differ beyond rtol={rtol:g}, atol={atol:g}")
    return None


def _report(bad: np.ndarray, got: np.ndarray, want: np.ndarray, what: str) -> str:
    at = tuple(int(i) for i in np.argwhere(bad)[0])
    return (f"{int(bad.sum())} of {bad.size} {what}; first at {at}: "
            f"got {_fmt(got[at])}, want {_fmt(want[at])}")


def _fmt(x) -> str:
    v = x.item()
    return f"{v:.6g}" if isinstance(v, float) else str(v)


def max_error(got, want) -> float:
    """A figure for reports, not a check: the largest absolute difference over the finite
    reference elements, relative to the reference's largest finite magnitude.

    Only meaningful for outputs that passed :func:`mismatch` (which has placed every NaN and
    infinity already).
    """
    g, w = np.asarray(got, np.float64), np.asarray(want, np.float64)
    ok = np.isfinite(w)
    if not ok.any():
        return 0.0
    scale = max(float(np.max(np.abs(w[ok]))), 1e-30)
    return float(np.max(np.abs(g[ok] - w[ok]))) / scale
