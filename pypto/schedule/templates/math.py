"""Default schedules of the math, arith and activation families (``pypto.ops.math``, ``arith``,
``activations``): the templates of the families whose kernel forms they share.

- The broadcasting binary ops and the gated activations (kernel output [R, C]) take the binary
  ops' rows-or-chunks schedule: a 1-D call is one long row (R = 1), which the generic default
  would run on one core. ``fmod``, ``remainder`` and ``floor_divide`` add their update (the
  recomputation of tiles with huge quotients, float32 and float64 alike).
- The integer bitwise and shift ops size their parallel tasks in bytes, not elements: 1-byte
  types take the bool ops' schedule (``templates.logical``), 2-byte types tasks of 64 KiB (the
  bytes of MIN_TASK_ELEMS float32 elements); 4 bytes and wider keep the defaults.
- ``tan`` has ``sin``/``cos``'s updates and takes their schedule: the float32 recomputation of
  tiles holding a huge |x|, the float64 serial scan of huge elements.
- ``softmin`` is softmax's algorithm on -x and takes softmax's row schedule.
"""

from __future__ import annotations

from ..defaults import MIN_TASK_ELEMS, D, output_directives, template
from .binary import FEW_ROWS, rows_or_chunks
from .elementwise import fast_then_huge_tiles
from .logical import flat_bytes, rows_of_bytes
from .norm import row_normalization

ROW_OPS = ("atan2", "hypot", "copysign", "lerp", "fmax", "fmin", "logaddexp", "logaddexp2",
           "heaviside", "prelu", "glu", "geglu")

for _name in ROW_OPS:
    template(_name)(rows_or_chunks)


#: The integer ops of a vector instruction or two per vector: their tasks are sized in bytes.
INT_ROW_OPS = ("bitwise_and", "bitwise_or", "bitwise_xor", "left_shift", "right_shift")


def byte_tasks(built) -> int:
    """Elements of a parallel task that writes the bytes of MIN_TASK_ELEMS float32 elements
    (64 KiB): 2x the elements for 2-byte types; 4 bytes and wider keep MIN_TASK_ELEMS.
    (1-byte types take the bool ops' schedule instead: see :func:`int_blocks`.)"""
    size = max(1, min(4, *(f.type().bytes() for f in built.outputs)))
    return MIN_TASK_ELEMS * 4 // size


def _one_byte(built) -> bool:
    return all(f.type().bytes() == 1 for f in built.outputs)


def int_rows_or_chunks(built, dims, lanes):
    """1-byte types: the bool ops' schedule (``templates.logical``: 256 KiB tasks, a 4x unrolled
    vector loop, guarded tails); wider: rows-or-chunks in tasks of :func:`byte_tasks` elements."""
    if _one_byte(built):
        return rows_of_bytes(built, dims, lanes)
    return rows_or_chunks(built, dims, lanes, task=byte_tasks(built))


for _name in INT_ROW_OPS:
    template(_name)(int_rows_or_chunks)


@template("bitwise_not")
def int_blocks(built, dims, lanes):
    """1-byte types (int8, uint8, bool): ``logical_not``'s schedule; wider: the 1-D generic
    default (blocks in parallel, vectorized inside) in tasks of :func:`byte_tasks` elements.

    Measured here (two threads, under load, 4M int8, median ratio NumPy out= / kernel over 25
    rounds, the kernel called through its ctypes entry): the generic default's tasks of
    MIN_TASK_ELEMS elements (16 KiB, about a microsecond of work each) 0.70-0.78x, 64 KiB tasks
    0.81-0.83x, this schedule 0.87x (bitwise_xor 2048 x 2048: 0.69-0.71x, 0.78-0.81x, 0.82x).
    Single-threaded (CPU time) the kernels matched NumPy within the noise: their inner loop is
    NumPy's (a load, a vpxor, a store a vector)."""
    if _one_byte(built):
        return flat_bytes(built, dims, lanes)
    return output_directives("out", ("n",), dims, lanes, task=byte_tasks(built))


#: Tiles of ``pypto.ops.arith.HARD_TILE`` elements (not imported: ops sit above this layer).
HARD_TILE = 64


#: The update's parallel tasks, in multiples of MIN_TASK_ELEMS (a knob: the tuner's generic space
#: cannot place this op's gated update, so the template is its legal plan).
_GRAIN = {"update_grain": (1, 4, 16)}


@template("fmod", knobs=_GRAIN)
@template("remainder", knobs=_GRAIN)
@template("floor_divide", knobs=_GRAIN)
def direct_then_hard_tiles(built, dims, lanes, update_grain=1):
    """Rows-or-chunks for the direct path. The update (float32 and float64) recomputes the flagged tiles: RVar
    ``redo$x`` in tiles of HARD_TILE, each a vector loop run only when its flag (``hard_tile``,
    computed just before it as a vectorized max) is set; rows, or runs of tiles of one long row,
    in parallel tasks of about ``update_grain`` x MIN_TASK_ELEMS elements."""
    ds = rows_or_chunks(built, dims, lanes)
    out = built.funcs["out"]
    if not out.updates:
        return ds
    (rv,) = out.updates[0]
    (kv,) = built.funcs["hard_tile"].updates[0]
    n_r, n_c = dims["R"], dims["C"]
    ds += [D("split", "out", 1, var=rv, outer="tile", inner="lane", factor=HARD_TILE,
             tail="guard_with_if"),
           D("vectorize", "out", 1, var="lane", factor=lanes)]
    at = "tile"
    task = MIN_TASK_ELEMS * update_grain
    if n_r * n_c >= 2 * task:
        if n_r >= FEW_ROWS:
            ds.append(D("parallel", "out", 1, var="r", factor=max(1, task // n_c)))
        else:
            ds += [D("split", "out", 1, var="tile", outer="tiles", inner="t",
                     factor=task // HARD_TILE, tail="guard_with_if"),
                   D("parallel", "out", 1, var="tiles")]
            at = "t"
    return ds + [D("compute_at", "hard_tile", at="out", var=at),
                 D("atomic", "hard_tile", 1),
                 D("vectorize", "hard_tile", 1, var=kv, factor=lanes)]


template("tan")(fast_then_huge_tiles)
template("softmin")(row_normalization)
