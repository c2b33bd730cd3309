"""Rules of the quantization ops of ``pypto.ops.quantized``.

* fake_quantize_per_tensor_affine, fake_quantize_per_channel_affine: the straight-through
  estimator, as PyTorch defines their gradient: ``dy`` where the rounded value
  ``round(x / scale) + zero_point`` lies within ``[quant_min, quant_max]``, 0 where it saturates.
  The output is piecewise constant, so this is a documented choice (not what central differences
  give). The scale and zero point get no gradient (PyTorch's ``_fake_quantize_learnable_*``
  variants give them): asking for one through ``scale`` is an error.
* quantized_conv2d, quantized_add, quantized_relu take and give integers: not differentiable.
"""

from __future__ import annotations

import numpy as np

from ... import ops
from . import NotDifferentiable, mark, rule

mark(NotDifferentiable("integer (quantized) arithmetic; use fake_quantize_* to train through "
                       "quantization"), "quantized_conv2d", "quantized_add", "quantized_relu")

_SCALE = NotDifferentiable("the straight-through rule gives the scale no gradient, as "
                           "torch.fake_quantize_per_channel_affine")


def _pass(x, dy, inv, zp, qmin, qmax):
    q = ops.round(x * inv) + zp
    return ops.where((q >= float(qmin)) & (q <= float(qmax)), dy, 0.0)


@rule("fake_quantize_per_tensor_affine")
def _fake_quantize_tensor(c):
    p = c.params
    s = np.float32(p["scale"])
    inv = float(np.float32(1.0) / s)
    return [_pass(c.inputs[0], c.dy, inv, float(p["zero_point"]), p["quant_min"], p["quant_max"])]


@rule("fake_quantize_per_channel_affine")
def _fake_quantize_channel(c):
    x, scale, zp = c.inputs
    ch = x.shape[1]
    inv = (1.0 / scale).astype(x.dtype).reshape(1, ch, 1)
    zpf = zp.astype(x.dtype).reshape(1, ch, 1)
    return [_pass(x, c.dy, inv, zpf, c.params["quant_min"], c.params["quant_max"]), _SCALE,
            None]
