"""``pypto build``: compile an op with its stored schedule into libraries for a target."""

from __future__ import annotations

import click

from .common import dtype_option, nonempty, param_option, parse_params


@click.command()
@click.option("--op", "op_name", required=True, help="Built-in op, path/file.py:NAME or package.module:NAME.")
@click.option("--target", default="host", show_default=True,
              help="Short name (host, x86-64-avx2, x86-64-avx512, arm-64-linux, arm-64-android, cuda, "
                   "opencl, vulkan, metal, wasm) or Halide target string; comma-separated for a "
                   "multi-target static library.")
@click.option("--shape", default=None, help="Named dims the schedule is looked up for, e.g. M=1024,N=1024,K=1024.")
@dtype_option
@param_option
@click.option("--format", "formats", default="static", show_default=True,
              help="Comma list of: static, shared, object, c, llvm, asm, stmt, html, python, pytorch.")
@click.option("--schedule", "schedule_file", default=None, type=click.Path(exists=True, dir_okay=False),
              help="Use this schedule file instead of the database.")
@click.option("--require-tuned", is_flag=True,
              help="Fail when the database has no schedule for it (with --all-shapes: no tuned shape).")
@click.option("--name", default=None, callback=nonempty, help="C function name (default pypto_<op>).")
@click.option("--all-shapes", is_flag=True,
              help="One static library for any shape, dispatching to the nearest tuned schedule "
                   "(takes no --shape, --schedule or --format).")
@click.option("-o", "--output", "out_dir", required=True, type=click.Path(), callback=nonempty,
              help="Output folder.")
def build(op_name, target, shape, dtype, params, formats, schedule_file, require_tuned, all_shapes,
          name, out_dir):
    """Build OP for TARGET into DIR, with a manifest describing the function."""
    from ..infra.inputs import complete_dims, parse_shape
    from ..compiler.aot import build_op
    from ..ops._load import resolve_op
    from .common import dtype_signature

    if all_shapes:
        # One library for every shape: these options choose or shape a single build, and were
        # dropped without a word (--format python gave a static library only).
        ignored = [flag for flag, given in (("--shape", shape), ("--schedule", schedule_file),
                                            ("--format", formats != "static")) if given]
        if ignored:
            raise click.UsageError(f"--all-shapes builds one static library from every tuned "
                                   f"shape; it takes no {', '.join(ignored)}")
    op = resolve_op(op_name)
    if hasattr(op, "specialize"):    # a composite op: one traced program at the given shape
        if not shape:
            raise click.UsageError(f"{op.name} is a composite op: give --shape with its declared "
                                   "dims (register_op(inputs=...))")
        op = op.specialize(parse_shape(shape), tuple(dtype.split(",")) if dtype else None,
                           parse_params(params))
        shape = ",".join(f"{d}={op.call_dims[d]}" for d in op.input_dims)
        params, dtype = (), None
    p = op.resolve_params(parse_params(params))
    if all_shapes:
        from ..compiler.aot import build_all_shapes

        res = build_all_shapes(op, target=target, out_dir=out_dir, dtypes=dtype_signature(op, dtype),
                               params=p, name=name, require_tuned=require_tuned)
        for w in res.warnings:
            click.echo(f"warning: {w}", err=True)
        click.echo(f"built {res.manifest['function']} for any shape with "
                   f"{len(res.manifest['variants'])} variant(s) for {res.manifest['target']}")
        for f in res.files:
            click.echo(f"  {f}")
        return
    dims = complete_dims(op, parse_shape(shape), p) if shape else None
    res = build_op(op, target=target, out_dir=out_dir, dims=dims,
                   dtypes=dtype_signature(op, dtype), params=p,
                   formats=[f.strip() for f in formats.split(",") if f.strip()], name=name,
                   schedule_file=schedule_file, require_tuned=require_tuned)
    for w in res.warnings:
        click.echo(f"warning: {w}", err=True)
    m = res.manifest
    click.echo(f"built {m['function']} for {m['target']} (schedule: {m['schedule']['source']})")
    for f in res.files:
        click.echo(f"  {f}")
