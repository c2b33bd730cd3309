"""``pypto ops``: list the op library, or show one op."""

from __future__ import annotations

import inspect
import os
import sys
import tempfile

import click

from .common import dtype_option, param_option, parse_params, shape_option, target_option


class _OpsGroup(click.Group):
    """``pypto ops NAME`` is ``pypto ops show NAME``: a word that is no subcommand names an op."""

    def resolve_command(self, ctx, args):
        if args and not args[0].startswith("-") and self.get_command(ctx, args[0]) is None:
            args = ["show", *args]
        return super().resolve_command(ctx, args)


@click.group(cls=_OpsGroup, invoke_without_command=True)
@click.option("--category", default=None, help="Only this category.")
@click.pass_context
def ops(ctx, category):
    """List ops by category (`pypto ops NAME` or `pypto ops show NAME` for one)."""
    if ctx.invoked_subcommand is not None:
        return
    from ..ops import list_ops

    current = None
    items = list_ops(category)
    if category is not None and not items:
        known = sorted({op.category for op in list_ops()})
        raise click.BadParameter(f"no category {category!r}; the categories are "
                                 f"{', '.join(known)}", param_hint="'--category'")
    for op in items:
        if op.category != current:
            current = op.category
            click.echo(click.style(f"\n{current}", bold=True))
        front = getattr(op, "frontend", None)
        text = inspect.cleandoc(front.__doc__ or "") if front is not None else ""
        first = ((text or op.doc).splitlines() or [""])[0]
        click.echo(f"  {op.name:<30} {first[:70]}")
    click.echo(f"\n{len(items)} ops")


def capture_stdout(fn) -> str:
    """Runs ``fn`` and returns what it wrote to file descriptor 1 (Halide prints from C++)."""
    sys.stdout.flush()
    saved = os.dup(1)
    with tempfile.TemporaryFile(mode="w+b") as tmp:
        os.dup2(tmp.fileno(), 1)
        try:
            fn()
        finally:
            sys.stdout.flush()
            os.dup2(saved, 1)
            os.close(saved)
        tmp.seek(0)
        return tmp.read().decode("utf-8", "replace")


@ops.command("show")
@click.argument("name")
@shape_option
@dtype_option
@param_option
@target_option
def show(name, shape, dtype, params, target):
    """Signature, reference, default schedule and loop nest of one op."""
    from ..infra.inputs import complete_dims, parse_shape
    from ..compiler import targets
    from ..compiler.jit import compile_built
    from ..compiler.lower import build
    from ..ops._load import resolve_op
    from ..schedule.defaults import default_schedule
    from .common import dtype_signature

    op = resolve_op(name)
    if hasattr(op, "specialize"):       # a composite op: its graph at a shape, then as an op
        click.echo(click.style(op.public_signature(), bold=True))
        click.echo(f"category: {op.category} (composite: written from other ops)")
        if op.doc:
            click.echo("\n" + op.doc)
        if not (shape or op.example):
            raise click.UsageError(f"give --shape with {', '.join(op.input_dims) or 'its dims'} "
                                   "to see its graph and loop nest")
        op = op.specialize(parse_shape(shape) if shape else op.example,
                           tuple(dtype.split(",")) if dtype else None, parse_params(params))
        click.echo(click.style("\nGraph:", bold=True))
        for i, n in enumerate(op.graph.nodes):
            ins = ", ".join(str(op.graph.ref(t)) for t in n.inputs)
            click.echo(f"  n{i}: {n.describe()}({ins}) -> {[s for s, _ in n.outs]}  [{n.where}]")
        shape, dtype, params = ",".join(f"{d}={op.call_dims[d]}" for d in op.input_dims), None, ()
    click.echo(click.style(op.public_signature(), bold=True))
    click.echo(f"kernel:   {op.signature()}")
    click.echo(f"category: {op.category}")
    click.echo("dtypes:   " + "; ".join(",".join(s) if len(set(s)) > 1 else s[0] for s in op.dtypes))
    for p in op.params:
        click.echo(f"param:    {p.name} ({p.kind.__name__}, default {p.default!r}) {p.doc}")
    front = inspect.cleandoc(op.frontend.__doc__ or "") if getattr(op, "frontend", None) else ""
    if front:                    # the call as users make it (the kernel's own words follow)
        click.echo("\n" + front)
    if op.doc:
        click.echo(("\nKernel: " if front else "\n") + op.doc)
    click.echo(click.style("\nNumPy reference:", bold=True))
    try:
        click.echo(inspect.getsource(op.reference).rstrip())
    except (OSError, TypeError):
        click.echo(f"  {op.reference!r}")
    params_d = op.resolve_params(parse_params(params))
    sig = dtype_signature(op, dtype)
    dims = complete_dims(op, parse_shape(shape) if shape else (op.example or {d: 64 for d in op.input_dims}),
                         params_d)
    t = targets.parse(target)
    built = build(op, sig, params_d)
    sched = default_schedule(built, dims, t)
    click.echo(click.style(f"\nDefault schedule for {dims} on {targets.family(t)}:", bold=True))
    kernel = compile_built(built, sched, t, source="default") if not t.has_gpu_feature() else None
    lines = kernel.python if kernel else [str(d) for d in sched.directives]
    click.echo("\n".join(f"  {line}" for line in lines) or "  (none)")
    click.echo(click.style("\nLoop nest:", bold=True))
    click.echo(capture_stdout(lambda: built.pipeline.print_loop_nest()).rstrip())
