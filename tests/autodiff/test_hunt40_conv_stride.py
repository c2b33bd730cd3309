"""conv2d's input gradient with a stride larger than the kernel and no padding: the transposed
convolution it was computed with (conv_transpose2d's phased form) fails at run time inside a
traced program there ("Input buffer i1 is accessed at 2, which is beyond the max (1)"), so
``pypto.grad`` of such a conv2d raised ExecutionError. That axis is now spread by the stride
and transposed at stride 1. Checked against central differences."""

from __future__ import annotations

import numpy as np
from fd import check_vjp

import pypto

o = pypto.ops
rng = np.random.default_rng(40)


def test_conv2d_stride_beyond_kernel_without_padding():
    # stride 3 > kernel 2 on both axes; the width drops 2 columns (7 = 2 * 3 + 2 - 1 + 2)
    check_vjp(lambda x, w: o.conv2d(x, w, stride=3), rng.standard_normal((1, 2, 8, 7)),
              rng.standard_normal((3, 2, 2, 2)))


def test_depthwise_and_mixed_axes():
    # rows padded (the phased form works), columns not; and a depthwise conv
    check_vjp(lambda x, w, b: o.conv2d(x, w, b, stride=(4, 3), padding=(1, 0)),
              rng.standard_normal((1, 2, 11, 8)), rng.standard_normal((3, 2, 2, 2)),
              rng.standard_normal(3))
    check_vjp(lambda x, w: o.depthwise_conv2d(x, w, stride=3),
              rng.standard_normal((1, 3, 8, 7)), rng.standard_normal((3, 1, 2, 2)))
