"""A per-op cost model (flops and compulsory bytes) and the placement of a run on the roofline.

What is counted, once for every op:

- **flops**: the arithmetic of the op's math, not of any schedule: a multiply-add is 2 flops, an
  add, multiply, divide, compare (max, min, select), ``sqrt``, ``rsqrt`` or rounding is 1, and a
  transcendental (``exp``, ``log``, ``tanh``, ``erf``, ``sin``, ``cos``, ``expm1``, ``log1p``) is
  :data:`TRANSCENDENTAL` flops (1 by default; pass ``transcendental=`` to weigh them by what they
  cost in instructions instead). Integer arithmetic (quantized ops) is counted the same way.
- **bytes**: the compulsory traffic: every input read once and every output written once, at its
  dtype's size. A schedule that re-reads data, or a cache that cannot hold a reused block, moves
  more; the model never counts that, so a measured point can only sit below the true roof.

Ops the model has no formula for get one flop per output element and a note saying "estimate".
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ..errors import DtypeError, ParamError
from ..infra.inputs import complete_dims, parse_shape

__all__ = ["Cost", "TRANSCENDENTAL", "op_cost", "place"]

#: Flops one transcendental function counts for (exp, log, tanh, erf, sin, cos, expm1, log1p).
TRANSCENDENTAL = 1.0


@dataclasses.dataclass(frozen=True)
class Cost:
    """Flops and compulsory bytes of one call, and what was counted."""

    flops: float
    bytes: float
    note: str

    @property
    def intensity(self) -> float:
        """Arithmetic intensity in flop/byte."""
        return self.flops / self.bytes if self.bytes else math.inf


# -- flop formulas -------------------------------------------------------------------------------
# Each takes (dims, params, T) and returns (flops, note); T is the transcendental weight.

Formula = Callable[[Mapping[str, int], Mapping[str, Any], float], tuple[float, str]]
_FORMULAS: dict[str, Formula] = {}


def _formula(*names: str):
    def wrap(fn: Formula) -> Formula:
        for n in names:
            _FORMULAS[n] = fn
        return fn
    return wrap


def _prod(values) -> int:
    return int(np.prod([int(v) for v in values], dtype=np.int64)) if values else 1


_MAC = "2 flops per multiply-add"


@_formula("matmul")
def _matmul(d, p, T):
    return 2.0 * d["M"] * d["N"] * d["K"], _MAC


@_formula("batch_matmul")
def _batch_matmul(d, p, T):
    return 2.0 * d["B"] * d["M"] * d["N"] * d["K"], _MAC


@_formula("quantized_matmul")
def _qmatmul(d, p, T):
    return 2.0 * d["M"] * d["N"] * d["K"], _MAC + " (integer); zero-point corrections not counted"


@_formula("linear")
def _linear(d, p, T):
    return 2.0 * d["R"] * d["O"] * d["I"] + d["R"] * d["O"], _MAC + " + 1 bias add per output"


@_formula("conv2d")
def _conv2d(d, p, T):
    # CG = C / groups is already the weights' channel dim, so groups need no extra factor; stride,
    # padding and dilation enter through the derived output size OH x OW.
    outs = d["N"] * d["O"] * d["OH"] * d["OW"]
    return 2.0 * outs * d["CG"] * d["KH"] * d["KW"] + outs, \
        _MAC + " over CG*KH*KW per output (padding taps included) + 1 bias add per output"


@_formula("depthwise_conv2d")
def _depthwise(d, p, T):
    return 2.0 * d["N"] * d["C"] * d["OH"] * d["OW"] * d["KH"] * d["KW"], \
        _MAC + " over KH*KW per output (padding taps included)"


@_formula("max_pool2d")
def _max_pool(d, p, T):
    return float(d["N"] * d["C"] * d["OH"] * d["OW"] * p["kernel_h"] * p["kernel_w"]), \
        "1 compare per window tap"


@_formula("avg_pool2d")
def _avg_pool(d, p, T):
    outs = d["N"] * d["C"] * d["OH"] * d["OW"]
    return float(outs * p["kernel_h"] * p["kernel_w"] + outs), "1 add per window tap + 1 divide"


def _transcendental_note(T: float) -> str:
    return f"a transcendental counts {T:g} flop{'s' if T != 1 else ''}"


@_formula("softmax")
def _softmax(d, p, T):
    n = d["R"] * d["C"]
    return (4 + T) * n + d["R"], ("per element: max, subtract, exp, sum, scale; 1 reciprocal per "
                                  f"row; {_transcendental_note(T)}")


@_formula("log_softmax")
def _log_softmax(d, p, T):
    n = d["R"] * d["C"]
    return (4 + T) * n + T * d["R"], ("per element: max, subtract, exp, sum, subtract; 1 log per "
                                      f"row; {_transcendental_note(T)}")


@_formula("layer_norm")
def _layer_norm(d, p, T):
    return 8.0 * d["R"] * d["C"] + 4.0 * d["R"], \
        ("per element: 1 for the mean, 3 for the variance (subtract, square, add), 4 to normalize "
         "(subtract, scale, gamma, beta); per row: 2 divides, eps add, rsqrt")


@_formula("rms_norm")
def _rms_norm(d, p, T):
    return 4.0 * d["R"] * d["C"] + 3.0 * d["R"], \
        "per element: square, add, scale, gamma; per row: divide, eps add, rsqrt"


@_formula("batch_norm")
def _batch_norm(d, p, T):
    return 4.0 * d["N"] * d["C"] * d["S"] + 2.0 * d["C"], \
        "per element: subtract, scale, gamma, beta; per channel: eps add, rsqrt"


@_formula("box_blur")
def _box_blur(d, p, T):
    k = p["size"]
    return float((2 * (k - 1) + 1) * d["B"] * d["H"] * d["W"]), \
        f"separable: {k - 1} adds per pass, 2 passes, 1 divide per output (size {k})"


@_formula("sum", "max", "min", "prod")
def _fold(d, p, T):
    return float(d["O"] * d["R"]), "1 per input element"


@_formula("argmax", "argmin")
def _arg(d, p, T):
    return float(d["O"] * d["R"]), "1 compare per input element"


@_formula("mean")
def _mean(d, p, T):
    return float(d["O"] * d["R"] + d["O"]), "1 add per input element + 1 divide per row"


@_formula("var")
def _var(d, p, T):
    n, o = d["O"] * d["R"], d["O"]
    return 4.0 * n + 2.0 * o, ("two passes: 1 add per element for the mean, then "
                                      "subtract, square, add; 2 divides per row")


@_formula("std")
def _std(d, p, T):
    flops, note = _var(d, p, T)
    return flops + d["O"], note + "; 1 sqrt per row"


@_formula("logsumexp")
def _logsumexp(d, p, T):
    n, o = d["O"] * d["R"], d["O"]
    return (3 + T) * n + (1 + T) * o, ("per element: max, subtract, exp, add; per row: log, add; "
                                       + _transcendental_note(T))


@_formula("scaled_dot_product_attention")
def _sdpa(d, p, T):
    bh, s, l_ = d["B"] * d["H"], d["S"], d["L"]
    sl = s * l_
    flops = bh * (2.0 * sl * d["D"] + 2.0 * sl * d["E"] + (5 + T) * sl + s * d["E"])
    return flops, (_MAC + " in q.k and p.v; per score: scale, max, subtract, exp, sum; 1 divide "
                   f"per output; {_transcendental_note(T)}")


@_formula("transpose", "batch_transpose")
def _move(d, p, T):
    return 0.0, "data movement only: 0 flops"


# Elementwise ops: flops per output element as (plain operations, transcendentals).
_ELEMENTWISE: dict[str, tuple[int, int]] = {
    "abs": (1, 0), "neg": (1, 0), "relu": (1, 0), "square": (1, 0), "sqrt": (1, 0),
    "rsqrt": (1, 0), "reciprocal": (1, 0), "floor": (1, 0), "ceil": (1, 0), "round": (1, 0),
    "clip": (2, 0), "leaky_relu": (2, 0),
    "exp": (0, 1), "log": (0, 1), "sin": (0, 1), "cos": (0, 1), "tanh": (0, 1), "erf": (0, 1),
    "expm1": (0, 1), "log1p": (0, 1),
    "sigmoid": (3, 1),       # 1 / (1 + exp(-x))
    "silu": (4, 1),          # x * sigmoid(x)
    "softplus": (4, 2),      # max(x, 0) + log1p(exp(-|x|))
    "add": (1, 0), "sub": (1, 0), "mul": (1, 0), "div": (1, 0), "maximum": (1, 0),
    "minimum": (1, 0), "where": (1, 0),
    "pow": (1, 2),           # exp(b * log(a))
    "swiglu": (4, 1),        # silu(x) * y
    "dequantize": (2, 0),    # (q - zero_point) * scale
    "quantize": (4, 0),      # clamp(round(x / scale) + zero_point)
    "requantize": (4, 0),
}


def _gelu(p) -> tuple[int, int]:
    # exact: 0.5 * x * (1 + erf(x / sqrt 2)); tanh form: 0.5 x (1 + tanh(c (x + 0.044715 x^3)))
    return (8, 1) if p.get("approximate") == "tanh" else (4, 1)


# -- the model -----------------------------------------------------------------------------------

@functools.lru_cache(maxsize=256)
def _out_dtypes(op_name: str, dtypes: tuple[str, ...], params: tuple) -> tuple[str, ...]:
    """The output dtypes as the built pipeline has them (argmax gives int64, int sums int64...)."""
    from ..compiler.lower import build
    from ..ops import get_op

    return build(get_op(op_name), dtypes, dict(params)).out_dtypes


def _dtypes(op, dtypes) -> tuple[str, ...]:
    if dtypes is None:
        return op.dtypes[0]
    sig = (dtypes,) * len(op.inputs) if isinstance(dtypes, str) else tuple(dtypes)
    if sig not in op.dtypes:
        allowed = ", ".join("(" + ", ".join(s) + ")" for s in op.dtypes)
        raise DtypeError(f"{op.name}: dtypes {sig} are not a signature of this op; use one of "
                         f"{allowed}")
    return sig


def op_cost(op_name: str, dims: Mapping[str, int] | str, params: Mapping[str, Any] | None = None,
            dtypes: str | Sequence[str] | None = None, *,
            transcendental: float = TRANSCENDENTAL) -> Cost:
    """Flops and compulsory bytes of one call of ``op_name`` in its canonical (kernel) form.

    Args:
        op_name: a registered op.
        dims: the input dims by name (``{"M": 64, "K": 32, "N": 16}`` or ``"M=64,K=32,N=16"``);
            derived output dims (conv2d's OH, OW) are computed from them and the params.
        params: the op's parameters (defaults filled in).
        dtypes: one dtype for every input, or one per input; default the op's first signature.
        transcendental: flops one transcendental function counts for.

    >>> op_cost("matmul", "M=2,K=3,N=4").flops
    48.0
    """
    from ..ops import get_op

    op = get_op(op_name)
    shape = parse_shape(dims) if isinstance(dims, str) else dict(dims)
    shape = {k: v for k, v in shape.items() if k not in op.derived_dims}  # recomputed below
    params = op.resolve_params(params or {})
    sig = _dtypes(op, dtypes)
    if op.validate is not None:
        op.validate(dict(shape), params)
    d = complete_dims(op, shape, params)
    outs = _out_dtypes(op.name, sig, tuple(sorted(params.items())))
    nbytes = sum(_prod([d[x] for x in spec.dims]) * np.dtype(dt).itemsize
                 for spec, dt in zip(op.inputs, sig))
    nbytes += sum(_prod([d[x] for x in spec.dims]) * np.dtype(dt).itemsize
                  for spec, dt in zip(op.outputs, outs))
    byte_note = "bytes: inputs read once + outputs written once"
    if op.name in _FORMULAS:
        flops, note = _FORMULAS[op.name](d, params, transcendental)
    elif op.name in _ELEMENTWISE or op.name == "gelu":
        plain, trans = _gelu(params) if op.name == "gelu" else _ELEMENTWISE[op.name]
        n = _prod([d[x] for x in op.outputs[0].dims])
        flops = float(n * (plain + trans * transcendental))
        note = f"per element: {plain} operation(s) + {trans} transcendental(s)"
        if trans:
            note += f"; {_transcendental_note(transcendental)}"
    else:
        flops = float(sum(_prod([d[x] for x in spec.dims]) for spec in op.outputs))
        note = "estimate: 1 flop per output element (no formula for this op)"
    return Cost(flops=float(flops), bytes=float(nbytes), note=f"{note}; {byte_note}")


def place(cost: Cost, time_ms: float, roofs) -> dict[str, Any]:
    """Where one measured call sits on the roofline of ``roofs`` (a :class:`Roofs`).

    Returns a dict with ``gflops`` and ``gbs`` attained, ``intensity`` (flop/byte), ``bound``
    (``"compute"`` right of the ridge point, else ``"memory"``), ``roof_gflops`` (the attainable
    GFLOP/s at that intensity) and ``fraction`` of it reached. A zero-flop op (a transpose) is
    memory bound and its fraction is of the bandwidth.
    """
    if not time_ms > 0 or not math.isfinite(time_ms):
        raise ParamError(f"place: time_ms must be a positive number of milliseconds, "
                         f"got {time_ms!r}")
    peak, bw = float(roofs.peak_gflops), float(roofs.best_bandwidth_gbs)
    seconds = time_ms * 1e-3
    gflops = cost.flops / seconds / 1e9
    gbs = cost.bytes / seconds / 1e9
    ai = cost.intensity
    ridge = peak / bw
    bound = "compute" if ai >= ridge else "memory"
    roof = peak if bound == "compute" else ai * bw
    fraction = gflops / peak if bound == "compute" else gbs / bw
    return {"time_ms": float(time_ms), "flops": cost.flops, "bytes": cost.bytes,
            "intensity": ai, "gflops": gflops, "gbs": gbs, "bound": bound,
            "roof_gflops": roof, "fraction": fraction, "ridge": ridge}
