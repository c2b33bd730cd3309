"""The table of gradient rules, keyed by op name (``"view:reshape"`` and ``"cast"`` for views).

A rule receives a :class:`Call` (the node's canonical input and output Tensors, its params and
dims, and the output gradients ``dys``) and returns one gradient per input (None: no gradient,
e.g. for an integer input). Rules are written with PyPTO ops on Tensors, so the backward is a
traced program like any other and lowers to fused pipelines.

Two markers stand for ops without a formula, each with the reason shown to users:

* :class:`Constant` (:data:`ZERO` is the common one) -- the output is piecewise constant in the
  inputs (comparisons, logical ops, NaN tests, masks made from indices): nothing flows back, as
  in PyTorch and JAX, where masks are constants;
* :class:`NotDifferentiable` -- asking for a gradient through the op is an error
  (:class:`~pypto.errors.NotDifferentiableError`) naming the op and argument: argmax, argmin,
  argsort, integer quantization, bitwise ops.

A rule may also return a :class:`Constant` in place of one input's gradient: that input gets
nothing and, unlike None, the question does not travel on to the op that made it. Index inputs
(gather's ``index``, embedding's ``input``) are constants in this sense: ``x[argmax(x)]`` is
differentiable in ``x`` although ``argmax`` is not.

Every built-in op has an entry (a rule or a marker); ``tests/autodiff/test_coverage.py`` fails
for an op without one.

``@pypto.def_gradient`` (in :mod:`pypto.autodiff.custom`) overrides any entry.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

#: op name -> rule, ZERO, or a NotDifferentiable marker.
RULES: dict[str, Any] = {}

@dataclasses.dataclass(frozen=True)
class Constant:
    """Marks an op (or one input of a call) through which no gradient flows; ``why`` says why."""

    why: str


ZERO = Constant("its output is piecewise constant in its inputs (a mask or a comparison)")


@dataclasses.dataclass(frozen=True)
class NotDifferentiable:
    """Marks an op whose gradient is undefined; ``why`` ends the error message."""

    why: str


@dataclasses.dataclass
class Call:
    """One recorded op call as a rule sees it."""

    op: Any
    inputs: list
    outs: list
    dys: list
    params: dict
    dims: dict
    live: tuple = ()      # the inputs whose gradient is asked for (a rule may skip the others)

    def wants(self, i: int) -> bool:
        return i in self.live

    @property
    def dy(self):
        return self.dys[0]

    @property
    def y(self):
        return self.outs[0]


def rule(*names: str) -> Callable:
    """Registers the decorated function as the rule of each op in ``names``."""
    def wrap(fn):
        for n in names:
            RULES[n] = fn
        return fn
    return wrap


def mark(value, *names: str) -> None:
    for n in names:
        RULES[n] = value


def _load() -> None:
    from . import (activations, cells, contraction, elementwise, filters, image,  # noqa: F401
                   indexing, layout, linalg, losses, math, nn, quant, reduce, resample, scan,
                   spatial, views)


_load()
