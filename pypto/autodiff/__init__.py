"""Gradients of PyPTO programs: ``grad``, ``value_and_grad``, ``vjp`` and ``def_gradient``.

A backward pass is a program like any other: the rules (:mod:`pypto.autodiff.rules`) are
written with PyPTO ops on Tensors, so forward and backward trace into one graph that lowers to
fused Halide pipelines. Halide's own ``propagate_adjoints`` is not used: it returns zero through
``strict_float`` arithmetic and ``reinterpret``, which most elementwise kernels are built on.
"""

from __future__ import annotations

from . import rules
from .api import grad, value_and_grad, vjp
from .custom import clear_gradient, def_gradient

__all__ = ["clear_gradient", "def_gradient", "grad", "rules", "value_and_grad", "vjp"]
