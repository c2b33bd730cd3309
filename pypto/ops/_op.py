"""The op model: an op is an algorithm (Halide Funcs) with named dims, typed parameters and a NumPy
reference. It never contains a schedule.

An op is declared with :func:`op`::

    @op(category="linalg",
        inputs={"a": "M K", "b": "K N"},
        output="M N",
        dtypes=["float32", "float64"],
        reference=lambda a, b: np.matmul(a, b))
    def matmul2d(a, b, *, dims):
        n, m = hl.Var("n"), hl.Var("m")
        k = hl.RDom([hl.Range(0, dims.K)], "k")
        acc = hl.Func("acc")
        acc[n, m] = hl.cast(a.type(), 0)
        acc[n, m] += a[k, m] * b[n, k]
        out = hl.Func("out")
        out[n, m] = acc[n, m]
        return out

Dims are declared in NumPy order (``"M K"``: M rows, K columns); inside the algorithm inputs are
indexed in Halide order, innermost first (``a[k, m]``). The output Func's pure Vars are the output
dims' names in lower case, innermost first, so that schedules can name them.
"""

from __future__ import annotations

import dataclasses
import inspect
import math
import operator
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ..compiler.diskcache import data_address
from ..compiler.lower import Dims  # what an algorithm receives as ``dims``; made by lowering
from ..errors import ArgumentError, OpDefinitionError, ParamError, PyptoError
from .. import runtime as _runtime
from ..runtime import call_op as _call_op
from ..runtime import call_public as _call_public

_DIM_RE = re.compile(r"^[A-Z][A-Z0-9_]*$")
_NAME_RE = re.compile(r"^[a-z][a-z0-9_]*$")


@dataclasses.dataclass(frozen=True)
class TensorSpec:
    """An input or output tensor: its name and named dims in NumPy order."""

    name: str
    dims: tuple[str, ...]

    @property
    def rank(self) -> int:
        return len(self.dims)

    def __str__(self) -> str:
        return f"{self.name}: [{', '.join(self.dims)}]"


@dataclasses.dataclass(frozen=True)
class Param:
    """A scalar parameter baked into the compiled pipeline.

    Args:
        name: keyword name.
        kind: ``float``, ``int``, ``bool`` or ``str``.
        default: value used when the caller omits it; ``inspect.Parameter.empty`` makes it required.
        choices: allowed values (for ``str`` and small ``int`` sets).
        low, high: inclusive bounds for numbers.
        doc: one line for ``pypto ops show``.
        finite: a ``float`` must be finite (the default); False admits inf, -inf and NaN, for
            values an op stores rather than computes with (a fill such as ``masked_fill``'s
            ``-inf`` for attention scores).
    """

    name: str
    kind: type
    default: Any = inspect.Parameter.empty
    choices: tuple | None = None
    low: float | None = None
    high: float | None = None
    doc: str = ""
    finite: bool = True

    def coerce(self, op_name: str, value: Any) -> Any:
        """Checks ``value`` and returns it as ``kind``; raises ParamError naming what was expected."""
        where = f"{op_name}: parameter '{self.name}'"
        if value is None and self.default is None:
            return None  # an optional parameter left unset on purpose
        kind = self.kind
        if kind is bool:
            if not isinstance(value, (bool, np.bool_)):    # (NumPy 2's np.True_ is np.bool)
                raise ParamError(f"{where} expects a bool, got {value!r}")
            value = bool(value)
        elif kind is int:
            if isinstance(value, bool) or not hasattr(value, "__index__"):
                raise ParamError(f"{where} expects an int, got {value!r} ({type(value).__name__})")
            try:
                value = operator.index(value)
            except TypeError:   # an array of several ints has __index__ but no single value
                shape = getattr(value, "shape", None)
                raise ParamError(f"{where} expects one int, got "
                                 f"{'an array of shape ' + str(tuple(shape)) if shape else repr(value)}"
                                 ) from None
        elif kind is float:
            if isinstance(value, bool) or not isinstance(value, (int, float)) and not hasattr(
                value, "__float__"
            ):
                raise ParamError(f"{where} expects a number, got {value!r}")
            try:
                value = float(value)
            except (TypeError, ValueError, OverflowError):
                # an array of several numbers (float() of a size-2 array is a TypeError)
                shape = getattr(value, "shape", None)
                got = repr(value) if shape is None else f"an array of shape {tuple(shape)}"
                raise ParamError(f"{where} expects one number, got {got}") from None
            if self.finite and not math.isfinite(value):
                raise ParamError(f"{where} must be finite, got {value!r}")
        elif kind is str:
            if self.name == "dtype" and not isinstance(value, str):
                # a dtype parameter takes what np.dtype does (np.int16, np.dtype("int16"))
                try:
                    value = np.dtype(value).name
                except TypeError:
                    raise ParamError(f"{where} expects a dtype name or NumPy dtype, got "
                                     f"{value!r}") from None
            if not isinstance(value, str):
                raise ParamError(f"{where} expects a string, got {value!r}")
        if self.choices is not None and value not in self.choices:
            raise ParamError(f"{where} must be one of {list(self.choices)}, got {value!r}")
        if self.low is not None and value < self.low:
            raise ParamError(f"{where} must be >= {self.low}, got {value!r}")
        if self.high is not None and value > self.high:
            raise ParamError(f"{where} must be <= {self.high}, got {value!r}")
        return value


def _parse_dims(text: str | Sequence[str], where: str) -> tuple[str, ...]:
    dims = tuple(text.split()) if isinstance(text, str) else tuple(text)
    for d in dims:
        if not _DIM_RE.match(d):
            raise OpDefinitionError(f"{where}: dim name {d!r} must be upper case, like 'M' or 'OH'")
    if len(set(dims)) != len(dims):
        raise OpDefinitionError(f"{where}: a dim is repeated in {dims}")
    return dims


def _specs(spec: Mapping[str, str | Sequence[str]], where: str) -> tuple[TensorSpec, ...]:
    out = []
    for name, dims in spec.items():
        if not _NAME_RE.match(name):
            raise OpDefinitionError(f"{where}: tensor name {name!r} must be lower case")
        out.append(TensorSpec(name, _parse_dims(dims, f"{where} {name}")))
    return tuple(out)


#: Held while an algorithm runs: a program's lowering (``frontend.graph``) renames the Funcs its
#: ops' algorithms make by patching ``hl.Func`` while it holds this lock, so an op built in
#: another thread meanwhile waits instead of getting renamed Funcs (a KeyError 'out').
ALGORITHM_LOCK = threading.RLock()


class Op:
    """A registered op. Calling it runs the compiled pipeline on NumPy arrays.

    Attributes:
        name: registry name, also the schedule-database name.
        category: a group such as ``"elementwise"`` or ``"nn"``.
        inputs, outputs: the tensors with their named dims (NumPy order).
        params: scalar parameters (compile-time constants).
        dtypes: accepted dtype signatures, one dtype name per input.
        reference: independent NumPy implementation with the public signature.
    """

    def __init__(
        self,
        *,
        name: str,
        category: str,
        algorithm: Callable,
        inputs: Mapping[str, Any],
        outputs: Mapping[str, Any],
        dtypes: Sequence[str | Sequence[str]],
        reference: Callable,
        params: Sequence[Param] = (),
        derive: Callable[[dict, dict], dict] | None = None,
        validate: Callable[[dict, dict], None] | None = None,
        frontend: Callable | None = None,
        kernel_reference: Callable | None = None,
        out_dtype: Callable[[tuple[str, ...], dict], str] | None = None,
        example: Mapping[str, int] | None = None,
        make_inputs: Callable | None = None,
        gradient: str | None = None,
        empty: Callable | None = None,
        doc: str = "",
    ):
        where = f"op {name!r}"
        if not _NAME_RE.match(name):
            raise OpDefinitionError(f"{where}: op names are lower case identifiers")
        self.name = name
        self.category = category
        self.algorithm = algorithm
        self.inputs = _specs(inputs, where)
        self.outputs = _specs(outputs, where)
        self.params = tuple(params)
        self.reference = reference
        self.derive = derive
        self.validate = validate
        self.frontend = frontend
        self.kernel_reference = kernel_reference
        self.out_dtype = out_dtype
        self.doc = inspect.cleandoc(doc or algorithm.__doc__ or "")
        sigs = []
        for sig in dtypes:
            sig = (sig,) * len(self.inputs) if isinstance(sig, str) else tuple(sig)
            if len(sig) != len(self.inputs):
                raise OpDefinitionError(f"{where}: dtype signature {sig} needs one dtype per input")
            sigs.append(sig)
        self.dtypes = tuple(sigs)
        in_dims = {d for t in self.inputs for d in t.dims}
        self.derived_dims = tuple(d for t in self.outputs for d in t.dims if d not in in_dims)
        if self.derived_dims and derive is None:
            raise OpDefinitionError(
                f"{where}: output dims {self.derived_dims} are not input dims; give derive=")
        self.example = dict(example) if example else None
        # make_inputs(dims, dtypes, params, rng) -> arrays: valid canonical inputs for ops whose
        # inputs must satisfy more than their dtype (indices, boxes, positive variances).
        self.make_inputs = make_inputs
        if gradient not in (None, "halide"):
            raise OpDefinitionError(f"{where}: gradient= must be None (rules or "
                                    f"@pypto.def_gradient) or 'halide', got {gradient!r}")
        #: "halide": without a rule, the backward comes from Halide's autodiff, accepted after
        #: a scan and a finite-difference check (``pypto.autodiff.halide_grad``).
        self.gradient = gradient
        #: empty(arrays, params, dims, specs) -> the value of each output (broadcast to it) for a
        #: call with a zero-size input and a non-empty output (a sum over an empty axis: 0);
        #: None refuses such calls with a ShapeError. Empty outputs need no rule (runtime).
        #: A built-in op without its own takes the shipped one (``_empty.RULES``), here in the
        #: ops layer, so the runtime reads ``op.empty`` and never imports an op module.
        if empty is None and getattr(algorithm, "__module__", "").startswith("pypto.ops."):
            from ._empty import RULES

            empty = RULES.get(name)
        self.empty = empty
        self._accepts = set(inspect.signature(algorithm).parameters)
        self._fast: dict = {}     # kernel-call signature -> the runtime's prepared fast path
        self._public: dict = {}   # public-call signature -> the same, through the frontend
        if "out" in {t.name for t in self.inputs} | {p.name for p in self.params}:
            raise OpDefinitionError(f"{where}: 'out' names the output array of every op call "
                                    f"(out=); name the input or parameter otherwise")
        # What help(), IPython's ``?`` and editors show for ``pypto.ops.<name>`` (an instance:
        # it showed the Op class's own docstring, the same for every op).
        self.__doc__ = self._user_doc()
        sig = self._public_sig()
        if sig is not None:
            self.__signature__ = sig

    def _public_sig(self) -> inspect.Signature | None:
        """The call as users make it: the frontend's (or the reference's) parameters and
        ``out=``."""
        try:
            sig = inspect.signature(self.frontend or self.reference)
        except (TypeError, ValueError):
            return None
        ps = list(sig.parameters.values())
        if "out" not in sig.parameters:
            at = len(ps) - (bool(ps) and ps[-1].kind is ps[-1].VAR_KEYWORD)
            ps.insert(at, inspect.Parameter("out", inspect.Parameter.KEYWORD_ONLY, default=None))
        try:
            return sig.replace(parameters=ps)
        except ValueError:
            return sig

    def _user_doc(self) -> str:
        front = inspect.cleandoc((self.frontend.__doc__ or "") if self.frontend else "")
        lines = [self.public_signature(), "", front or self.doc or f"The {self.name} op."]
        if front and self.doc:
            lines += ["", "Kernel: " + self.signature(), "", self.doc]
        lines += ["", "dtypes: " + "; ".join(", ".join(sig) for sig in self.dtypes)]
        for p in self.params:
            default = "" if p.default is inspect.Parameter.empty else f", default {p.default!r}"
            lines.append(f"kernel param {p.name} ({p.kind.__name__}{default}): "
                         f"{p.doc}".rstrip(": "))
        lines += ["", "out=: an array of the result's shape and dtype to write into (a tuple for "
                      "several outputs)."]
        return "\n".join(lines)

    # -- declaration helpers --------------------------------------------------------------------
    @property
    def dims(self) -> tuple[str, ...]:
        """All named dims, inputs first, in declaration order."""
        seen: list[str] = []
        for t in self.inputs + self.outputs:
            seen += [d for d in t.dims if d not in seen]
        return tuple(seen)

    @property
    def input_dims(self) -> tuple[str, ...]:
        seen: list[str] = []
        for t in self.inputs:
            seen += [d for d in t.dims if d not in seen]
        return tuple(seen)

    def signature(self) -> str:
        ins = ", ".join(str(t) for t in self.inputs)
        ps = ", ".join(
            p.name if p.default is inspect.Parameter.empty else f"{p.name}={p.default!r}"
            for p in self.params)
        outs = ", ".join(str(t) for t in self.outputs)
        return f"{self.name}({ins}{', ' if ps else ''}{ps}) -> {outs}"

    def public_signature(self) -> str:
        fn = self.frontend or self.reference
        try:
            return f"{self.name}{inspect.signature(fn)}"
        except (TypeError, ValueError):
            return self.signature()

    def resolve_params(self, given: Mapping[str, Any]) -> dict[str, Any]:
        """Fills defaults and checks every parameter; unknown names are an error."""
        known = {p.name: p for p in self.params}
        unknown = set(given) - set(known)
        if unknown:
            # an unknown keyword: an ArgumentError (a ParamError, and the TypeError Python gives)
            raise ArgumentError(f"{self.name}: unknown parameter(s) {sorted(unknown)}; "
                                f"known: {sorted(known) or 'none'}")
        out = {}
        for p in self.params:
            if p.name in given:
                out[p.name] = p.coerce(self.name, given[p.name])
            elif p.default is inspect.Parameter.empty:
                raise ParamError(f"{self.name}: parameter '{p.name}' is required")
            else:
                out[p.name] = p.default
        return out

    def build(self, images: Sequence[Any], params: Mapping[str, Any], dims: Dims):
        """Runs the algorithm; returns a tuple of output Funcs."""
        kwargs = {k: v for k, v in params.items() if k in self._accepts}
        if "dims" in self._accepts:
            kwargs["dims"] = dims
        with ALGORITHM_LOCK:
            result = self.algorithm(*images, **kwargs)
        funcs = tuple(result) if isinstance(result, (tuple, list)) else (result,)
        if len(funcs) != len(self.outputs):
            raise OpDefinitionError(
                f"op {self.name!r}: algorithm returned {len(funcs)} Func(s), declared {len(self.outputs)}")
        return funcs

    def __call__(self, *args, out=None, **kwargs):
        """The public call. ``out=`` (an array, or a tuple for several outputs) receives the
        result in place, as in NumPy; see :meth:`_call_into`."""
        if _runtime.checking:     # inside pypto.check_graph: record errors and go on
            return _runtime.checked_call(self, self._public_call, args, kwargs, out)
        try:
            return self._public_call(args, kwargs, out)
        except TypeError as e:
            bad = self._argument_error(e, args, kwargs)
            if bad is None:
                raise
            raise bad from None

    def _argument_error(self, err: TypeError, args, kwargs) -> ArgumentError | None:
        """An ArgumentError naming the op and its signature when ``err`` came from arguments
        that do not fit the public signature (Python's own message names the frontend, a
        private function); None when they fit and ``err`` came from elsewhere."""
        if isinstance(err, PyptoError):
            return None
        fn = self.frontend or self.reference
        try:
            inspect.signature(fn).bind(*args, **kwargs)
        except TypeError as e:
            return ArgumentError(f"{self.name}: {e}; the call is {self.public_signature()}")
        except ValueError:      # no signature to read
            return None
        return None

    def _public_call(self, args, kwargs, out):
        fe = self.frontend
        if fe is None:
            return _call_op(self, args, kwargs, out)
        if getattr(fe, "shape_only", False):
            return _call_public(self, args, kwargs, out)
        if out is not None:
            return self._call_into(args, kwargs, out)
        return self.frontend(*args, **kwargs)

    def kernel(self, *args, out=None, **kwargs):
        """Runs the algorithm directly on arrays in its canonical named-dim form (no frontend)."""
        return _call_op(self, args, kwargs, out)

    def _call_into(self, args, kwargs, out):
        """The public call writing into ``out``.

        The frontend runs as usual. Its first call of this op's kernel is offered ``out``: when
        ``out`` fits the kernel's outputs (count, dtype, element count, C order), the kernel writes
        into it (viewed in the kernel's shape). When the frontend's result is then ``out`` itself
        (same memory, shape and strides), ``out`` is returned: no copy. Otherwise (a frontend
        that reorders, reduces, splits or combines the kernel's results, or computes without
        this kernel) the result is checked against ``out`` and copied into it once. Frontends
        need no code for this: new ops get ``out=`` by being declared.
        """
        # What can be checked before anything runs; shapes and dtypes are checked against the
        # kernel's outputs when it is called, and against the frontend's result here after.
        # The count is the public result's, which may differ from the kernel's (a frontend that
        # splits or combines outputs), so any count is taken here and compared after the call.
        outs = _runtime.out_arrays(self.name, out, None)
        # ``out`` over one of the arguments: the kernels must not write it while the frontend
        # may still read that argument, so it is not offered to them (this is the one check for
        # the offered out=): the result is computed new and copied in.
        pend = [None if _runtime.overlaps(outs, [*args, *kwargs.values()]) else self, out, False]
        token = _runtime.pending_out.set(pend)
        try:
            if self.frontend is not None:
                result = self.frontend(*args, **kwargs)
            else:
                result = _call_op(self, args, kwargs)
        finally:
            _runtime.pending_out.reset(token)
        results = result if isinstance(result, tuple) else (result,)
        if len(results) != len(outs):
            from ..errors import ParamError

            want = "an array" if len(results) == 1 else f"a tuple of {len(results)} arrays"
            raise ParamError(f"{self.name}: out= must be {want} (one per output), got "
                             f"{len(outs)}")
        results = [np.asarray(r) for r in results]
        # Every entry is checked before any is written: a refused out= tuple is left as it was.
        for i, (o, r) in enumerate(zip(outs, results)):
            what = f"out[{i}]" if len(outs) > 1 else "out"
            if r.shape != o.shape:
                from ..errors import ShapeError

                raise ShapeError(f"{self.name}: {what} has shape {o.shape}; expected {r.shape} "
                                 f"(the shape of the result)")
            if r.dtype != o.dtype:
                from ..errors import DtypeError

                raise DtypeError(f"{self.name}: {what} has dtype {o.dtype}; expected {r.dtype} "
                                 f"(the dtype of the result)")
        for o, r in zip(outs, results):
            if r is o or (r.strides == o.strides and data_address(r) == data_address(o)):
                _runtime.out_stats["in_place"] += 1
            else:
                np.copyto(o, r)   # NumPy copies through a temporary where the two overlap
                _runtime.out_stats["copied"] += 1
        return out

    def kernel_ref(self, *arrays, **params):
        """The NumPy reference for a canonical-form call (what the tuner checks candidates with)."""
        if self.kernel_reference is not None:
            return self.kernel_reference(*arrays, **params)
        return self.reference(*arrays, **params)

    def __repr__(self) -> str:
        return f"<pypto op {self.signature()}>"


def op(
    *,
    category: str,
    inputs: Mapping[str, Any],
    reference: Callable,
    output: str | Sequence[str] | None = None,
    outputs: Mapping[str, Any] | None = None,
    dtypes: Sequence[str | Sequence[str]] = ("float32", "float64"),
    params: Sequence[Param] = (),
    name: str | None = None,
    register: bool = True,
    **extra,
) -> Callable[[Callable], Op]:
    """Declares an op from its algorithm function. See the module docstring for an example."""
    if (output is None) == (outputs is None):
        raise OpDefinitionError("give exactly one of output= (one tensor) or outputs= (a dict)")
    outs = {"out": output} if output is not None else dict(outputs)

    def wrap(fn: Callable) -> Op:
        the_op = Op(name=name or fn.__name__, category=category, algorithm=fn, inputs=inputs,
                    outputs=outs, dtypes=dtypes, reference=reference, params=params, **extra)
        if register:
            from ._registry import register as reg
            reg(the_op)
        return the_op

    return wrap

