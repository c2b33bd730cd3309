"""The op library. Every op is ``pypto.ops.NAME(*arrays, **params)`` on NumPy arrays.

Families live in one module each; importing this package registers them all.
"""

from __future__ import annotations

import importlib

from ._op import Dims, Op, Param, TensorSpec, op
from ._registry import get_op, list_ops, register

FAMILIES = ("elementwise", "binary", "compare", "reduce", "norm", "linalg", "attention", "nn", "image", "quant",
            "math", "arith", "activations",
            "layout", "indexing", "creation", "scan", "sorting", "losses", "distance", "detection",
            "spatial", "resample", "conv", "pool", "rnn", "rotary", "grid",
            "morphology", "filters", "color", "warp", "histograms", "contraction", "quantized")
_loaded = False


def builtin_ops() -> list:
    """The ops PyPTO ships (defined in its family modules), without ops a user, a test or a
    composite registered."""
    return [o for o in list_ops() if isinstance(o, Op)
            and getattr(o.algorithm, "__module__", "").startswith(__name__ + ".")]


def _load_builtin() -> None:
    global _loaded
    if _loaded:
        return
    _loaded = True
    for fam in FAMILIES:
        try:
            importlib.import_module(f"{__name__}.{fam}")
        except ModuleNotFoundError as e:
            if e.name != f"{__name__}.{fam}":
                raise


def __getattr__(name: str):
    if name.startswith("_"):
        raise AttributeError(name)
    from ..errors import UnknownOpError

    try:
        found = get_op(name)
    except UnknownOpError as e:
        raise AttributeError(str(e)) from None
    if name in FAMILIES:
        return found
    globals()[name] = found  # later lookups skip the registry
    return found


def __dir__():
    return sorted(set(globals()) | {o.name for o in list_ops()})
