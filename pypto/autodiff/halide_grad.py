"""``gradient="halide"``: an op's backward from Halide's own autodiff, behind two checks.

An op declared with ``@pypto.op(..., gradient="halide")`` and without a rule of its own gets its
backward from ``hl.propagate_adjoints`` run on its algorithm: a *backward op* whose inputs are the
forward's inputs and the output gradient ``dy`` and whose outputs are the gradients of the float
inputs. Being an op, the backward is compiled, cached, traced into programs and tuned like any
other.

Halide's autodiff is silently wrong on some definitions: it gives zero through ``strict_float``
arithmetic, ``reinterpret`` and bitwise ops, and drops the gradient at calls it does not know. So
the backward is accepted only after

1. a scan of the forward's definitions for those constructs, and
2. a finite-difference check on the op's example (float64 central differences of
   ``sum(op(x) * dy)`` against the backward's result, on a shrunken example shape).

Either failure raises :class:`~pypto.errors.NotDifferentiableError` naming the op, the input and
what to do (write the rule with ``@pypto.def_gradient``). The verdict is kept per op.
"""

from __future__ import annotations

import re
import threading

import halide as hl
import numpy as np

from ..errors import NotDifferentiableError, OpDefinitionError
from ..ops._op import Op

#: Constructs Halide's autodiff differentiates wrongly (zero) or not at all.
_UNSUPPORTED = re.compile(r"\b(strict_\w+|reinterpret|bitwise_\w+|shift_left|shift_right|"
                          r"popcount|count_leading_zeros|count_trailing_zeros|extern\w*)\b|<<|>>")

_lock = threading.Lock()
_verdicts: dict[int, object] = {}     # id(op) -> backward Op, or the error it failed with
_FD_ELEMENTS = 96                      # most input elements perturbed per input by the check


class _Wrapped:
    """An input image seen through a Func (Halide's autodiff differentiates Funcs, not
    ImageParams); indexing gives Exprs and ``dim``/``type`` come from the image."""

    def __init__(self, func, image):
        self.func, self.image = func, image

    def __getitem__(self, key):
        e = self.func[key]
        return e if isinstance(e, hl.Expr) else hl.Expr(e)

    def dim(self, i):
        return self.image.dim(i)

    def type(self):
        return self.image.type()

    def dimensions(self):
        return self.image.dimensions()

    def name(self):
        return self.image.name()


def _float_inputs(op: Op, sig) -> list[int]:
    return [k for k, dt in enumerate(sig) if np.dtype(dt).kind == "f"]


def backward_op(op: Op) -> Op:
    """The backward of ``op`` by Halide's autodiff (not checked: see :func:`rule_for`)."""
    from ..compiler.lower import build

    if len(op.outputs) != 1:
        raise NotDifferentiableError(
            f"gradient='halide' on op '{op.name}': Halide's autodiff differentiates one output, "
            f"the op has {len(op.outputs)}; write its rule with @pypto.def_gradient")
    out_spec = op.outputs[0]
    n = len(op.inputs)
    floats = sorted({k for sig in op.dtypes for k in _float_inputs(op, sig)})
    if not floats:
        raise NotDifferentiableError(f"op '{op.name}' has no float input to differentiate")
    sigs = []
    for sig in op.dtypes:
        if _float_inputs(op, sig) != floats:
            continue
        try:
            out_dt = build(op, sig, _params_for(op)).out_dtypes[0]
        except Exception:
            out_dt = sig[floats[0]]
        if np.dtype(out_dt).kind == "f":
            sigs.append((*sig, out_dt))
    if not sigs:
        raise NotDifferentiableError(f"op '{op.name}' has no float output to differentiate")

    def algorithm(*images, dims, **params):
        fwd = []
        for spec, im in zip(op.inputs, images[:n]):
            vs = [hl.Var(f"v{a}") for a in range(len(spec.dims))]
            f = hl.Func(f"{spec.name}_in")
            f[vs] = im[vs]
            fwd.append(_Wrapped(f, im))
        out = op.build(fwd, params, dims)[0]
        args = list(out.args())
        adj = hl.Func("dy_in")
        adj[args] = images[n][args]
        region = [(hl.Expr(0), getattr(dims, d) - 1) for d in reversed(out_spec.dims)]
        deriv = hl.propagate_adjoints(out, adj, region)
        grads = []
        for k in floats:
            spec = op.inputs[k]
            vs = [hl.Var(d.lower()) for d in reversed(spec.dims)]
            g = hl.Func(f"d_{spec.name}")
            g[vs] = hl.cast(fwd[k].type(), deriv[fwd[k].func][vs])
            grads.append(g)
        return tuple(grads)

    algorithm.__name__ = f"{op.name}_halide_grad"
    inputs = {spec.name: " ".join(spec.dims) for spec in op.inputs}
    if "dy" in inputs:
        raise OpDefinitionError(f"op '{op.name}': an input named 'dy' clashes with the output "
                                f"gradient of its Halide backward; rename it")
    inputs["dy"] = " ".join(out_spec.dims)
    outputs = {f"d_{op.inputs[k].name}": " ".join(op.inputs[k].dims) for k in floats}
    import inspect

    params = [p.name for p in op.params]
    algorithm.__signature__ = inspect.Signature(
        [inspect.Parameter(s, inspect.Parameter.POSITIONAL_ONLY) for s in inputs]
        + [inspect.Parameter("dims", inspect.Parameter.KEYWORD_ONLY)]
        + [inspect.Parameter(p, inspect.Parameter.KEYWORD_ONLY) for p in params])

    def reference(*arrays, **kw):
        grads = fd_gradients(op, arrays[:n], arrays[n], kw)
        got = tuple(grads[k] for k in floats)
        return got if len(got) > 1 else got[0]

    return Op(name=f"{op.name}_halide_grad", category="gradient", algorithm=algorithm,
              inputs=inputs, outputs=outputs, dtypes=sigs, reference=reference,
              params=op.params, doc=f"the backward of {op.name} by Halide's autodiff")


def _params_for(op: Op) -> dict:
    try:
        return op.resolve_params({})
    except Exception:
        return {}


def fd_gradients(op: Op, arrays, dy, params) -> list:
    """Central finite differences of ``sum(op(arrays) * dy)`` per float input (float64 where the
    op takes it), by the op's own NumPy reference: independent of any kernel."""
    xs = [np.array(a, dtype=np.float64) if np.asarray(a).dtype.kind == "f" else np.asarray(a)
          for a in arrays]
    dy = np.asarray(dy, dtype=np.float64)
    ref = op.kernel_reference or op.reference

    def loss(vals):
        with np.errstate(all="ignore"):
            y = np.asarray(ref(*vals, **params), dtype=np.float64)
        return float((y * dy).sum())

    out = []
    for k, x in enumerate(xs):
        if x.dtype.kind != "f":
            out.append(None)
            continue
        g = np.zeros_like(x)
        flat, gf = x.reshape(-1), g.reshape(-1)
        for i in range(flat.size):
            eps = 1e-6 * max(1.0, abs(flat[i]))
            keep = flat[i]
            flat[i] = keep + eps
            up = loss(xs)
            flat[i] = keep - eps
            down = loss(xs)
            flat[i] = keep
            gf[i] = (up - down) / (2 * eps)
        out.append(g)
    return out


def _scan(op: Op) -> None:
    from ..compiler.lower import build

    for sig in op.dtypes:
        built = build(op, sig, _params_for(op))
        for name, info in built.funcs.items():
            if info.is_input:
                continue
            text = " ".join(str(v) for v in info.func.values())
            m = _UNSUPPORTED.search(text)
            if m:
                raise NotDifferentiableError(
                    f"gradient='halide' on op '{op.name}': its Func '{name}' uses "
                    f"'{m.group(0)}', which Halide's autodiff differentiates as zero or not at "
                    f"all (strict_float arithmetic, reinterpret, bitwise ops, extern calls). "
                    f"Write the gradient with @pypto.def_gradient(op), or build the op from "
                    f"plain arithmetic and hl.exp/hl.log/hl.sqrt")


def _small_dims(op: Op) -> dict:
    dims = dict(op.example or {})
    if not dims:
        raise NotDifferentiableError(
            f"gradient='halide' on op '{op.name}': the op needs an example= shape so its "
            f"Halide gradient can be checked by finite differences before it is used")
    small = {d: min(v, 5) for d, v in dims.items()}
    return small


def _fd_check(op: Op, bwd: Op) -> None:
    from ..infra.inputs import make_inputs
    from ..infra.verify import mismatch

    n = len(op.inputs)
    sig = next((s for s in bwd.dtypes if all(np.dtype(d).kind != "f" or d == "float64"
                                              for d in s)), bwd.dtypes[0])
    dims = _small_dims(op)
    params = _params_for(op)
    arrays = make_inputs(op, sig[:n], dims, params, seed=3)
    for a in arrays:
        if a.size > _FD_ELEMENTS:
            raise NotDifferentiableError(
                f"gradient='halide' on op '{op.name}': its example shape is too large to check "
                f"by finite differences even shrunk to {dims}; give a smaller example=")
    y = op.kernel(*arrays, **params)
    dy = np.random.default_rng(4).uniform(-1, 1, size=np.shape(y)).astype(sig[n])
    got = bwd.kernel(*arrays, dy, **params)
    got = list(got) if isinstance(got, (tuple, list)) else [got]
    want = fd_gradients(op, arrays, dy, params)
    floats = [k for k in range(n) if np.dtype(sig[k]).kind == "f"]
    tol = 1e-5 if sig[n] == "float64" else 2e-2
    for g, k in zip(got, floats):
        w = want[k]
        scale = max(1.0, float(np.abs(w).max(initial=0.0)))
        bad = mismatch(np.asarray(g, dtype=np.float64), w, (tol, tol * scale))
        if bad:
            raise NotDifferentiableError(
                f"gradient='halide' on op '{op.name}': Halide's gradient for input "
                f"'{op.inputs[k].name}' disagrees with finite differences on the example "
                f"{dims} ({bad}); it may use a construct Halide's autodiff drops. Write the "
                f"gradient with @pypto.def_gradient(op)")


def checked_backward(op: Op) -> Op:
    """The accepted backward op of ``op`` (scan, then finite differences), once per op."""
    with _lock:
        got = _verdicts.get(id(op))
    if got is None:
        from ..frontend.tensor import activate, deactivate

        token = activate(None)      # the check runs eagerly, also when asked inside a trace
        try:
            _scan(op)
            got = backward_op(op)
            _fd_check(op, got)
        except NotDifferentiableError as e:
            got = e
        finally:
            deactivate(token)
        with _lock:
            _verdicts[id(op)] = got
    if isinstance(got, Exception):
        raise NotDifferentiableError(str(got))
    return got


def rule_for(op: Op):
    """A gradient rule (see :mod:`pypto.autodiff.rules`) running ``op``'s Halide backward."""
    bwd = checked_backward(op)
    floats = sorted({k for sig in op.dtypes for k in _float_inputs(op, sig)})

    def rule(call):
        got = bwd.kernel(*call.inputs, call.dy, **call.params)
        got = list(got) if isinstance(got, (tuple, list)) else [got]
        grads: list = [None] * len(call.inputs)
        for k, g in zip(floats, got):
            grads[k] = g
        return grads

    return rule
