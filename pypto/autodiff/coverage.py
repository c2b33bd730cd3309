"""Which ops have a gradient, and what a gradient through each of the others does.

Every built-in op has one decision (``tests/autodiff/test_coverage.py`` fails for an op
without one):

* ``rule`` -- a gradient rule (:mod:`pypto.autodiff.rules`) or a ``@pypto.def_gradient``;
* ``constant`` -- nothing flows back: the output is piecewise constant in the inputs
  (comparisons, NaN tests, masks, step functions such as ``sign``); the gradient is zero, as in
  PyTorch;
* ``not differentiable`` -- asking for a gradient through the op raises
  :class:`~pypto.errors.NotDifferentiableError` naming the op, the argument and the reason
  (integer results such as argmax/argsort/nms indices, integer quantization, bitwise ops).

Ops that take and give only integers never see a float gradient; they are still decided, so a
gradient that reaches one through a cast (``argmax(x).astype(float)``) gets a clear error.

Run ``python -m pypto.autodiff.coverage`` to print every op's decision (``--missing``: only the
ops without one).
"""

from __future__ import annotations

import sys

from .custom import CUSTOM
from .rules import RULES, Constant, NotDifferentiable


def decision(name: str) -> tuple[str, str]:
    """``(kind, why)`` for the op called ``name``: kind is ``"rule"``, ``"constant"``,
    ``"not differentiable"`` or ``"missing"``."""
    if name in CUSTOM:
        return "rule", "a @pypto.def_gradient"
    entry = RULES.get(name)
    if entry is None:
        return "missing", ""
    if isinstance(entry, Constant):
        return "constant", entry.why
    if isinstance(entry, NotDifferentiable):
        return "not differentiable", entry.why
    return "rule", ""


def table(ops=None) -> dict[str, tuple[str, str]]:
    """Each op's decision (default: the built-in ops), by name."""
    if ops is None:
        from ..ops import builtin_ops

        ops = builtin_ops()
    return {op.name: decision(op.name) for op in ops}


def missing(ops=None) -> list[str]:
    """The ops with no decision."""
    return sorted(n for n, (kind, _) in table(ops).items() if kind == "missing")


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    rows = table()
    if "--missing" in argv:
        rows = {n: d for n, d in rows.items() if d[0] == "missing"}
    for name, (kind, why) in sorted(rows.items()):
        print(f"{name:34} {kind:19} {why}")
    return 1 if any(kind == "missing" for kind, _ in rows.values()) else 0


if __name__ == "__main__":
    raise SystemExit(main())
