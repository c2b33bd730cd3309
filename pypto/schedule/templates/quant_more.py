"""Default schedules of the quantized ops of pypto/ops/quantized.py.

quantized_conv2d has conv2d's Funcs (``x_pad``, ``acc`` over RVars ``r$x, r$y, r$z``, ``out``)
and parameter names, so it takes conv2d's register-tiled template (templates/nn.py) on int32
accumulators. The elementwise ops (fake quantization, add, relu) take the generic default.
"""

from __future__ import annotations

from ..defaults import D, MIN_TASK_ELEMS, generic, template
from .nn import _conv2d

template("quantized_conv2d")(_conv2d)


@template("fake_quantize_per_channel_affine")
def _per_channel(built, dims, lanes):
    """The generic default when the slices are long; channels-last inputs (N == 1, the channel
    axis last) take their vectors across channels instead."""
    N, C = dims.get("N", 1), dims.get("C", 1)
    if N >= lanes or C < lanes:
        return generic(built, dims, lanes)
    ds = [D("reorder", "out", vars=["c", "n", "b"]),
          D("vectorize", "out", var="c", factor=lanes, tail="guard_with_if")]
    if N * C * dims.get("B", 1) >= 2 * MIN_TASK_ELEMS:
        ds.append(D("parallel", "out", var="b"))
    return ds
