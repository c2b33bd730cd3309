"""Default schedules of the math, arith and activation families (``pypto.ops.math``, ``arith``,
``activations``): the templates of the families whose kernel forms they share.

- The broadcasting binary ops and the gated activations (kernel output [R, C]) take the binary
  ops' rows-or-chunks schedule: a 1-D call is one long row (R = 1), which the generic default
  would run on one core.
- ``tan`` has the float64 update for huge |x| that ``sin``/``cos`` have (a serial scan).
- ``softmin`` is softmax's algorithm on -x and takes softmax's row schedule.
"""

from __future__ import annotations

from ..defaults import template
from .binary import rows_or_chunks
from .elementwise import with_serial_fixup
from .norm import row_normalization

ROW_OPS = ("atan2", "hypot", "copysign", "lerp", "fmod", "remainder", "floor_divide", "fmax",
           "fmin", "logaddexp", "logaddexp2", "heaviside", "bitwise_and", "bitwise_or",
           "bitwise_xor", "left_shift", "right_shift", "prelu", "glu", "geglu")

for _name in ROW_OPS:
    template(_name)(rows_or_chunks)
template("tan")(with_serial_fixup)
template("softmin")(row_normalization)
