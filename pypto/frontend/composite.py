"""Composite ops: ``@pypto.register_op`` turns a function written with PyPTO ops into an op.

A composite op is callable on arrays (it runs as a jitted, fused program named after the op, so
its database entries are keyed by that name and its graph fingerprint), is listed by
``pypto ops``, and composes: called inside another traced function it is inlined into that
program. ``@pypto.target_specific("cuda")`` adds another implementation for one target family;
calls pick the implementation for the current target and fall back to the generic one.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence

import numpy as np

from ..errors import DtypeError, OpDefinitionError
from . import tensor as T
from .jit import JitFunction, _op_name


_GPU = {"cuda", "opencl", "vulkan", "metal"}
#: Plug-in point of pypto.autodiff (a layer above): fn(op, impl, args, kwargs) runs an inlined
#: call and remembers it when the op has a user-defined gradient.
_call_hook = None
#: Target families an implementation can be registered for (tags of ``targets.family``).
_FAMILIES = _GPU | {"x86", "arm", "avx2", "avx512", "sse41", "wasm", "riscv", "powerpc"}


class CompositeOp:
    """An op written from other ops (see the module docstring)."""

    def __init__(self, fn: Callable, *, name: str | None = None, category: str = "composite",
                 dtypes: Sequence[str] | None = None, doc: str = "", inputs=None, example=None):
        self.fn = fn
        if name is not None and _op_name(name) != name:
            # A name asked for is the name the op is found by (pypto tune NAME, the database):
            # not silently another ("bad name!" became bad_name).
            raise OpDefinitionError(f"register_op: name {name!r} is not an op name (lower case "
                                    f"letters, digits and _, starting with a letter); e.g. "
                                    f"name={_op_name(name)!r}")
        self.name = _op_name(name or fn.__name__)
        self.category = category
        self.doc = inspect.cleandoc(doc or fn.__doc__ or f"composite op {self.name}")
        self.allowed = tuple(np.dtype(d).name for d in dtypes) if dtypes else None
        self.impls: dict[str, Callable] = {}
        self._jits: dict[Callable, JitFunction] = {}
        self.__wrapped__ = fn
        self.__name__ = self.name
        self.__doc__ = self.doc
        self.declared = {k: tuple(v.split()) if isinstance(v, str) else tuple(v)
                         for k, v in (inputs or {}).items()}
        self.example = dict(example) if example else None
        self.params = ()
        self.inputs = ()
        self.outputs = ()
        self.dtypes = ()

    # -- the op-like surface `pypto ops` reads --------------------------------------------------
    def signature(self) -> str:
        return f"{self.name}{inspect.signature(self.fn)}"

    def public_signature(self) -> str:
        return self.signature()

    def __repr__(self) -> str:
        return f"<pypto composite op {self.signature()}>"

    # -- implementations per target family ------------------------------------------------------
    def implementation(self, family: str | None = None) -> Callable:
        """The function for ``family`` (the current target's when None), else the generic one."""
        if family is None:
            from ..compiler import targets

            family = targets.family(targets.current())
        tags = set(family.split("-"))
        gpu = [f for f in self.impls if f in tags and f in _GPU]   # a GPU API beats the CPU arch
        for fam in gpu + [f for f in self.impls if f not in gpu]:
            if fam in tags or family.startswith(fam):
                return self.impls[fam]
        return self.fn

    def _check(self, args) -> None:
        if self.allowed is None:
            return
        for i, a in enumerate(args):
            dt = getattr(a, "dtype", None)
            if dt is not None and np.dtype(dt).name not in self.allowed:
                raise DtypeError(f"{self.name}: argument #{i} has dtype {np.dtype(dt).name}, but "
                                 f"the op is declared for {', '.join(self.allowed)} "
                                 f"(register_op(dtypes=...)); cast it, or declare the dtype")

    def __call__(self, *args, **kwargs):
        self._check(args)
        impl = self.implementation()
        if T.current() is not None:       # inside another program: inline
            if _call_hook is not None:    # autodiff keeps a call with a user gradient as one unit
                return _call_hook(self, impl, args, kwargs)
            return impl(*args, **kwargs)
        return self.jitted(impl)(*args, **kwargs)

    def specialize(self, shape: dict, dtypes=None, params=None):
        """The graph op of this composite at concrete input shapes, for tuning and building.

        ``shape`` maps the declared input dims (``register_op(inputs={"x": "R C"})``) to extents;
        ``params`` gives the static (non-array) arguments.
        """
        from .check import spec
        from .programs import trace_graph_op

        if not self.declared:
            raise OpDefinitionError(
                f"{self.name}: to tune or build it from the command line, declare its array "
                f"arguments with named dims: @pypto.register_op(inputs={{'x': 'R C'}}); then "
                f"give --shape R=...,C=... (in Python, pypto.tune({self.name}, *arrays) needs no "
                f"declaration)")
        missing = [d for d in self.input_dims if d not in shape]
        if missing:
            from ..errors import ShapeError

            raise ShapeError(f"{self.name}: shape must name {', '.join(self.input_dims)}; "
                             f"missing {', '.join(missing)}")
        dts = list(dtypes or ()) or [self.allowed[0] if self.allowed else "float32"] * len(
            self.declared)
        specs = [spec(tuple(int(shape[d]) for d in dims), dt)
                 for (_, dims), dt in zip(self.declared.items(), dts)]
        return trace_graph_op(self, specs, dict(params or {}))

    @property
    def input_dims(self) -> tuple[str, ...]:
        seen: list[str] = []
        for dims in self.declared.values():
            seen += [d for d in dims if d not in seen]
        return tuple(seen)

    def jitted(self, impl: Callable | None = None) -> JitFunction:
        """The jitted function calls go through (for ``explain`` and counters): one per
        implementation, keyed by the function itself. (Keyed by ``__qualname__``, a
        target-specific implementation named like the generic one, as ``target_specific``
        finds it, shared one: the first target's implementation ran under every target.)"""
        impl = impl or self.implementation()
        jf = self._jits.get(impl)
        if jf is None:
            jf = self._jits[impl] = JitFunction(impl, name=self.name)
            jf.seg_name = self.name
        return jf


def register_op(fn: Callable | None = None, *, name: str | None = None,
                category: str = "composite", dtypes: Sequence[str] | None = None,
                inputs=None, example=None, replace: bool = False):
    """Registers ``fn`` (written with PyPTO ops and Tensor methods) as an op.

    ``inputs`` (optional) names the array arguments' dims, as ``@pypto.op`` does, so the op can be
    tuned and built from the command line (``--shape R=...,C=...``); ``dtypes`` restricts the
    accepted dtypes; ``example`` gives a shape for ``pypto ops show``.

    Example:
        >>> import pypto
        >>> @pypto.register_op
        ... def my_quantize(x, bits):
        ...     scale = (2**bits - 1) / (x.max() - x.min())
        ...     return (x - x.min()) * scale
    """
    def wrap(f):
        from ..ops._registry import _OPS, register

        cop = CompositeOp(f, name=name, category=category, dtypes=dtypes, inputs=inputs,
                          example=example)
        # Defining a composite op again (a re-run cell, a reloaded module) replaces it; a
        # built-in op is replaced only when asked.
        register(cop, replace=replace or isinstance(_OPS.get(cop.name), CompositeOp))
        return cop

    return wrap(fn) if fn is not None else wrap


def target_specific(family: str, op: CompositeOp | None = None):
    """Registers another implementation of a composite op for one target family.

    ``@pypto.target_specific("cuda", my_op)`` or, when the generic function is named the same,
    ``@pypto.target_specific("cuda")`` on a function of that name: the composite op is found in
    the registry by the function's name.
    """
    if family not in _FAMILIES:
        raise OpDefinitionError(f"target_specific: unknown target family {family!r}; known: "
                                f"{', '.join(sorted(_FAMILIES))}")

    def wrap(f):
        target_op = op
        if target_op is None:
            from ..ops._registry import _OPS

            target_op = _OPS.get(_op_name(f.__name__))
            if not isinstance(target_op, CompositeOp):
                raise OpDefinitionError(
                    f"target_specific({family!r}): no composite op named {f.__name__!r}; register "
                    f"the generic version first with @pypto.register_op, or pass the op: "
                    f"@pypto.target_specific({family!r}, my_op)")
        target_op.impls[family] = f
        target_op._jits.clear()
        # Found by name, the function would shadow the op under the same name: give the op back.
        return f if op is not None else target_op

    return wrap
