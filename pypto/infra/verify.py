"""Output checks shared by the tuner's worker and the benchmarks: nothing is timed unverified."""

from __future__ import annotations

import numpy as np

from ..dtypes import tolerance


def poison(a: np.ndarray) -> None:
    """Fills an output buffer with values no correct kernel leaves behind (NaN, near-max ints)."""
    if a.dtype.kind == "f":
        a.fill(np.nan)
    elif a.dtype.kind in "iu":
        a.fill(np.iinfo(a.dtype).max - 3)
    else:
        a.fill(True)


def mismatch(got: np.ndarray, want: np.ndarray, tol: tuple[float, float] | None = None) -> str | None:
    """None when ``got`` matches ``want`` within the dtype's tolerance, else what differs.

    Floats: NaNs must sit where the reference has them, and the largest error must stay within
    10x the dtype's (rtol x largest magnitude, atol). Integers and bools must match exactly.
    """
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape:
        return f"shape {got.shape} != {want.shape}"
    if tol is None:
        tol = tolerance(want.dtype.name)
    if got.dtype.kind == "f" or want.dtype.kind == "f":
        g, w = got.astype(np.float64), want.astype(np.float64)
        if not np.array_equal(np.isnan(g), np.isnan(w)):
            return f"NaN at {int(np.sum(np.isnan(g) != np.isnan(w)))} places (unwritten or wrong)"
        ok = ~np.isnan(w)
        scale = max(float(np.max(np.abs(w[ok]))) if ok.any() else 0.0, 1e-30)
        err = float(np.max(np.abs(g[ok] - w[ok]))) if ok.any() else 0.0
        rtol, atol = tol
        if err > max(atol, rtol * scale) * 10:
            return f"max error {err:.3g} (scale {scale:.3g})"
        return None
    if not np.array_equal(got, want):
        return f"{int(np.sum(got != want))} elements differ"
    return None


def max_error(got: np.ndarray, want: np.ndarray) -> float:
    """Largest absolute difference, relative to the reference's largest magnitude."""
    g, w = np.asarray(got, np.float64), np.asarray(want, np.float64)
    ok = ~np.isnan(w)
    if not ok.any():
        return 0.0
    scale = max(float(np.max(np.abs(w[ok]))), 1e-30)
    return float(np.max(np.abs(g[ok] - w[ok]))) / scale
