"""What the built-in ops give for a zero-size input whose output is not empty.

The runtime (``runtime._empty_call``) handles every kernel call with a zero-size input on the
first-call path, without a kernel: an empty output is returned as it is; a non-empty one takes
the op's rule, ``rule(arrays, params, dims, specs) -> value(s)`` (broadcast to each output),
``op.empty`` (an op PyPTO ships takes its entry of :data:`RULES` when it is made). An op without a
rule refuses such a call with a ShapeError naming the empty argument and axis.

The values follow NumPy (torch where NumPy has no such op): a reduction over an empty axis gives
its identity (sum 0, prod 1, all True, any False, logsumexp -inf, a norm 0), a mean or variance
NaN (with NumPy's RuntimeWarning), a contraction over K = 0 zeros (plus the bias or the
``beta * input`` term), and the extremes (max, min, argmax, ...) have no identity: a ShapeError
worded as NumPy's ValueError.
"""

from __future__ import annotations

import sys
import warnings

import numpy as np

from ..errors import ShapeError


def _const(value):
    return lambda arrays, params, dims, specs: value


def _outside_pypto() -> int:
    """The ``stacklevel`` of the first caller outside PyPTO (for the caller of the rule)."""
    frame, level = sys._getframe(2), 2
    while frame is not None and frame.f_globals.get("__name__", "").startswith("pypto"):
        frame, level = frame.f_back, level + 1
    return level


def _nan_warn(what: str):
    def rule(arrays, params, dims, specs):
        warnings.warn(what, RuntimeWarning, stacklevel=_outside_pypto())
        return np.nan
    return rule


def _no_identity(numpy_name: str, op_name: str):
    def rule(arrays, params, dims, specs):
        raise ShapeError(f"{op_name}: zero-size array to reduction operation {numpy_name} which "
                         f"has no identity (the reduced axis is empty; give it at least one "
                         f"element, or reduce over a non-empty axis)")
    return rule


def _norm(arrays, params, dims, specs):
    kind = params.get("ord")
    if kind in ("inf", "-inf") or (kind == "p" and params.get("p", 2.0) < 0):
        name = params["p"] if kind == "p" else kind
        raise ShapeError(f"vector_norm: cannot compute the {name} norm over an empty axis: the "
                         f"maximum, the minimum and a negative power have no identity (as in "
                         f"torch)")
    return 0.0


def _linear(arrays, params, dims, specs):
    return arrays[2]                      # x @ weight.T over I = 0 is zeros: the bias remains


def _addmm(arrays, params, dims, specs):
    beta = params.get("beta", 1.0)
    if beta == 0:
        return 0.0                        # torch: input is ignored (NaN in it does not spread)
    return beta * arrays[0].astype(specs[0][1], copy=False)


def _scatter_add(arrays, params, dims, specs):
    return arrays[0]                      # nothing to add: the input itself


def _sdpa(arrays, params, dims, specs):
    if dims.get("L") == 0 and dims.get("D") != 0:
        return 0.0
    raise ShapeError("attention: q and k have a zero-size feature axis D; give them at least "
                     "one feature")


def _histogram(arrays, params, dims, specs):
    return 0


def _pad(arrays, params, dims, specs):
    if params.get("mode") == "constant":
        return params.get("value", 0.0)
    raise ShapeError(f"pad: cannot pad an empty axis in mode {params.get('mode')!r} (it has no "
                     f"edge to repeat or reflect); use mode='constant'")


RULES = {
    # reductions: identities
    "sum": _const(0), "nansum": _const(0), "count_nonzero": _const(0), "prod": _const(1),
    "all": _const(True), "any": _const(False), "logsumexp": _const(-np.inf),
    "vector_norm": _norm,
    "mean": _nan_warn("Mean of empty slice"), "nanmean": _nan_warn("Mean of empty slice"),
    "var": _nan_warn("Degrees of freedom <= 0 for slice"),
    "std": _nan_warn("Degrees of freedom <= 0 for slice"),
    "median": _nan_warn("Mean of empty slice"),
    "global_avg_pool2d": _nan_warn("Mean of empty slice"),
    "max": _no_identity("maximum", "max"), "min": _no_identity("minimum", "min"),
    "nanmax": _no_identity("fmax", "nanmax"), "nanmin": _no_identity("fmin", "nanmin"),
    "argmax": _no_identity("argmax", "argmax"), "argmin": _no_identity("argmin", "argmin"),
    # contractions over an empty K
    "matmul": _const(0), "batch_matmul": _const(0), "einsum": _const(0),
    "quantized_matmul": _const(0), "linear": _linear, "addmm": _addmm, "baddbmm": _addmm,
    "trace": _const(0), "cdist": _const(0), "cosine_similarity": _const(0),
    "pairwise_distance": _const(0),
    # attention over no keys: torch's zeros (the weighted sum of nothing)
    "scaled_dot_product_attention": _sdpa, "masked_attention": _sdpa,
    # counts and scatters over nothing
    "histogram": _histogram, "scatter_add": _scatter_add,
    "nms": _const((0, 0)), "batched_nms": _const((0, 0)),     # keep: nothing, count: 0
    # constructions around nothing
    "diag": _const(0), "pad": _pad,
}

