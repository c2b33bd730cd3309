"""``pypto bench``: ops side by side with NumPy, PyTorch and Halide's autoschedulers."""

from __future__ import annotations

import json
import os
import sys

import click

from ..errors import ParamError
from .common import dtype_option, param_option, parse_params, writable_file


def _autoschedule_dir(given: str | None) -> str:
    if given:
        return given
    from ..bench.harness import default_suite_path

    suite = default_suite_path()
    if suite:
        return os.path.join(os.path.dirname(suite), "autoschedules")
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "pypto", "autoschedules")


def replace_block(path: str, name: str, text: str) -> None:
    """Replaces the text between ``<!-- NAME:start -->`` and ``<!-- NAME:end -->`` in ``path``."""
    start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
    with open(path, encoding="utf-8") as f:
        doc = f.read()
    i, j = doc.find(start), doc.find(end)
    if i < 0 or j < i:
        raise ParamError(f"{path} has no '{start}' ... '{end}' block to fill")
    doc = doc[:i + len(start)] + "\n" + text.rstrip() + "\n" + doc[j:]
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(doc)
    os.replace(tmp, path)


@click.command()
@click.argument("ops", nargs=-1)
@click.option("--suite", default=None, type=click.Path(exists=True, dir_okay=False),
              help="Suite file (default: benchmarks/suite.json of this source tree).")
@click.option("--shape", default=None, help="Measure the one OP at this shape instead of the suite's.")
@dtype_option
@param_option
@click.option("--sizes/--no-sizes", default=True, show_default=True,
              help="Include the suite's size sweep (smaller and larger shapes).")
@click.option("--compare", default="numpy,torch,halide", show_default=True,
              help="Peers: numpy, torch, torch-compile, halide (Adams2019, Mullapudi2016, Li2018).")
@click.option("--autoschedules", default=None, type=click.Path(file_okay=False),
              help="Database of autoscheduler schedules (default: benchmarks/autoschedules).")
@click.option("--no-autoschedule-missing", is_flag=True,
              help="Do not run an autoscheduler for shapes missing from that database.")
@click.option("--roofline", "roofline", is_flag=True, help="Measure the machine's roofs and place every op.")
@click.option("--memory", is_flag=True, help="Peak memory of one call per implementation (fresh processes).")
@click.option("--compile-cost", is_flag=True, help="Cold compile and time to first result (fresh processes).")
@click.option("--quick", is_flag=True, help="Fewer timing rounds (for a first look, not for records).")
@click.option("--json", "json_out", default=None, type=click.Path(dir_okay=False),
              callback=writable_file, help="Write the report as JSON.")
@click.option("--from-json", "from_json", default=None, type=click.Path(exists=True, dir_okay=False),
              help="Render an earlier report instead of measuring.")
@click.option("--plot", default=None, type=click.Path(dir_okay=False), callback=writable_file,
              help="Bar chart of speedups over NumPy (PNG).")
@click.option("--roofline-plot", default=None, type=click.Path(dir_okay=False), callback=writable_file,
              help="Roofline chart (PNG).")
@click.option("--markdown", is_flag=True, help="Print a Markdown table instead of the text table.")
@click.option("--readme", default=None, type=click.Path(exists=True, dir_okay=False),
              help="Write the Markdown table into this file's <!-- bench:start/end --> block.")
@click.option("--no-progress", is_flag=True, help="No progress bar.")
@click.option("--programs", is_flag=True,
              help="Programs (an elementwise chain, an MLP block, a ResNet basic block, a model "
                   "with data-dependent control flow, a tiny jitted call) fused against per-op "
                   "calls, NumPy and torch; with --memory also peak memory fused vs unfused.")
@click.option("--overhead", is_flag=True,
              help="Warm-call overhead in microseconds at tiny sizes (add, exp, sum, matmul): the "
                   "kernel alone, the PyPTO call, NumPy and torch; the 10 us target is shown.")
@click.option("--grad", is_flag=True,
              help="Forward+backward (value and gradients) of matmul, conv2d, softmax, layer_norm, "
                   "attention, lstm_cell and an LSTM layer against torch eager autograd (and "
                   "torch.compile with --compare torch-compile); with --memory also attention's "
                   "peak memory.")
@click.option("--all-ops", "all_ops", is_flag=True,
              help="Every op (or the OPS given) at one representative shape against NumPy and torch "
                   "eager, shorter timing; ends with the ops where PyPTO trails a peer (a report, "
                   "not a test; about half an hour on two cores).")
@click.option("--check-only", is_flag=True, hidden=True,
              help="With --all-ops: one round, no pause: checks every peer against the reference; "
                   "the figures mean nothing.")
@click.option("--small", is_flag=True, hidden=True, help="With --all-ops: the ops' example shapes.")
def bench(ops, suite, shape, dtype, params, sizes, compare, autoschedules, no_autoschedule_missing,
          roofline, memory, compile_cost, quick, json_out, from_json, plot, roofline_plot, markdown, readme,
          no_progress, programs, overhead, grad, all_ops, check_only, small):
    """Measure OPS (default: the whole suite) side by side with their peers, verified first.

    Every implementation's output is compared with the op's NumPy reference before it is timed;
    one that differs is reported and left out. The rest are timed with the fair protocol: before
    each candidate's turn a 0.3 s pause (other libraries' threads stop spinning) and an untimed
    call of the same candidate, then a single call and a block of back-to-back calls, the order
    rotating each round; medians and spread are reported for both. PyPTO is timed as users call
    it (fresh output) and with out= where a peer writes into a preallocated output. NumPy runs
    with OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE unset (the command restarts itself without them).
    """
    mode = next((flag for flag, on in (("--all-ops", all_ops), ("--overhead", overhead),
                                       ("--grad", grad), ("--programs", programs)) if on), None)
    if mode:
        # These render the suite's report; the other modes print reports of their own and
        # dropped them without a word (--overhead --plot x.png wrote no chart).
        unused = [flag for flag, given in (("--from-json", from_json), ("--plot", plot),
                                           ("--roofline-plot", roofline_plot), ("--readme", readme))
                  if given]
        if unused:
            raise click.UsageError(f"{mode} takes no {', '.join(unused)} (they go with the suite's "
                                   "report)")
    if all_ops:
        _all_ops(ops, compare, quick, check_only, small, json_out, markdown)
        return
    if check_only or small:
        raise click.UsageError("--check-only and --small go with --all-ops")
    if overhead:
        _overhead(quick, json_out, "torch" in compare)
        return
    if grad:
        from ..bench import training

        training.main((["--quick"] if quick else []) + (["--memory"] if memory else [])
                      + (["--json", json_out] if json_out else [])
                      + (["--torch-compile"] if "torch-compile" in compare else []))
        return
    if programs:
        from ..bench import programs as progs

        progs.main((["--quick"] if quick else []) + (["--memory"] if memory else [])
                   + (["--json", json_out] if json_out else [])
                   + (["--torch-compile"] if "torch-compile" in compare else []))
        return
    from ..bench import harness

    if from_json:
        import jsonschema

        try:
            with open(from_json) as f:
                report = json.load(f)
            harness.validate_report(report)
        except (ValueError, OSError, jsonschema.ValidationError) as e:
            raise click.ClickException(f"{from_json} is not a pypto bench report: "
                                       f"{str(e).splitlines()[0]}") from None
    else:
        report = _measure(harness, ops, suite, shape, dtype, params, sizes, compare, autoschedules,
                          no_autoschedule_missing, roofline, memory, compile_cost, quick, no_progress,
                          json_out)
    table = harness.markdown(report)
    click.echo(table if markdown else harness.text_table(report))
    if readme:
        m = report["machine"]
        head = (f"Measured by `pypto bench` on {m['cpu']} ({m['cores']} cores), {m['date'][:10]}; "
                f"Python {m['python']}, Halide {m['halide']}, NumPy {m['numpy']} ({m['blas']})"
                + (f", PyTorch {m['torch']}" if m.get("torch") else "") + ". Milliseconds, median of "
                "single calls, each after a 0.3 s pause and an untimed call of the same candidate, "
                "order rotating (± spread when over 10%); ratios above 1 mean PyPTO is faster; "
                "x = not timed: it failed to build or run, or its output differed from the reference "
                "(the reason is in the JSON report); - = not measured.")
        replace_block(readme, "bench", head + "\n\n" + table)
        cc = harness.compile_markdown(report)
        if cc and "<!-- compile:start -->" in open(readme, encoding="utf-8").read():
            replace_block(readme, "compile", cc)
        click.echo(f"wrote the table into {readme}", err=True)
    if plot:
        from ..bench.plots import plot_speedups

        click.echo(f"wrote {plot_speedups(report, plot)}", err=True)
    if roofline_plot:
        _roofline_plot(report, roofline_plot)


def _all_ops(ops, compare: str, quick: bool, check_only: bool, small: bool, json_out: str | None,
             markdown: bool) -> None:
    from ..bench import harness, sweep

    peers = harness.parse_compare(compare) & {"numpy", "torch", "torch-compile"}
    if not peers:
        raise click.UsageError("--all-ops compares with numpy, torch or torch-compile; --compare names none")
    timing = sweep.CHECK if check_only else sweep.QUICK if quick else sweep.TIMING
    items = sweep.items(ops, small=small)
    click.echo(f"{len(items)} op(s) against {', '.join(sorted(peers))}"
               + (" (Halide's autoschedulers are left out of the sweep)" if "halide" in compare else ""),
               err=True)
    write = (lambda rep: _write_json(rep, json_out)) if json_out else None
    report = sweep.run(items, compare=peers, timing=timing, log=lambda s: click.echo(s, err=True),
                       after_item=write)
    harness.validate_report(report)
    click.echo(harness.markdown(report) if markdown else sweep.table(report))
    click.echo("")
    click.echo(sweep.summary(report))
    if json_out:
        click.echo(f"wrote {json_out}", err=True)


def _overhead(quick: bool, json_out: str | None, with_torch: bool) -> None:
    from ..bench import overhead

    rows = overhead.measure(rounds=3 if quick else 15, calls=200 if quick else 500,
                            with_torch=with_torch)
    click.echo(overhead.text(rows))
    if json_out:
        with open(json_out, "w") as f:
            json.dump({"target_us": overhead.TARGET_US, "rows": rows}, f, indent=1)
        click.echo(f"wrote {json_out}", err=True)


def _measure(harness, ops, suite, shape, dtype, params, sizes, compare, autoschedules, no_missing,
             roofline, memory, compile_cost, quick, no_progress, json_out):
    peers = harness.parse_compare(compare)
    if shape:
        if len(ops) != 1:
            raise click.UsageError("--shape measures one op: give exactly one OP")
        items = [harness.Item(op=ops[0], shape=shape, params=parse_params(params), dtype=dtype, group="given")]
    else:
        if params or dtype:
            raise click.UsageError("--param and --dtype go with --shape; suite items carry their own")
        path = suite or harness.default_suite_path()
        if path is None:
            raise click.UsageError("no suite file here: give --suite FILE, or OP --shape ...")
        items = harness.select(harness.load_suite(path, sizes=sizes), ops, ("suite", "size") if sizes else ("suite",))
    roofs = None
    if roofline:
        from ..bench.roofline import measure_roofs

        click.echo("measuring the machine's roofs ...", err=True)
        roofs = measure_roofs()
    report = harness.new_report(peers, roofs)
    timing = {"min_rounds": 3, "max_rounds": 7, "budget_s": 5.0} if quick else {}
    adir = _autoschedule_dir(autoschedules)
    from tqdm import tqdm

    bar = tqdm(items, desc="bench", unit="op", file=sys.stderr, disable=no_progress, dynamic_ncols=True)
    for item in bar:
        bar.set_postfix_str(item.label[:60])
        rec = harness.run_item(item, compare=peers, autoschedule_db=adir, compute_missing=not no_missing,
                               timing=timing, roofs=roofs, log=lambda s: tqdm.write(s, file=sys.stderr))
        if memory:
            rec["memory"] = _memory(rec, peers)
        if compile_cost:
            rec["compile"] = harness.compile_cost(item)
        report["items"].append(rec)
        if json_out:  # written after every item, so an interrupted run keeps what it measured
            _write_json(report, json_out)
    bar.close()
    harness.validate_report(report)
    if json_out:
        _write_json(report, json_out)
    return report


def _memory(rec, peers) -> dict:
    from ..bench.memory import peak_memory
    from ..ops import get_op

    op = get_op(rec["op"])
    dims = {d: rec["dims"][d] for d in op.input_dims}
    out = {}
    for impl in ("pypto", "numpy", "torch"):
        if impl != "pypto" and impl not in peers:
            continue
        try:
            res = peak_memory(impl, rec["op"], dims, rec["params"], rec["dtypes"])
        except Exception as e:  # a failed measurement is reported in the record, not fatal
            out[impl] = {"error": f"{type(e).__name__}: {str(e)[:200]}"}
            continue
        out[impl] = res.to_json() if hasattr(res, "to_json") else res
    return out


def _write_json(report, path: str) -> None:
    from ..bench.harness import relative_paths

    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(relative_paths(report), f, indent=1, sort_keys=True)
    os.replace(tmp, path)


#: Which measured implementations the roofline chart shows, and their legend names.
_ROOFLINE_SERIES = {"pypto": "PyPTO", "numpy": "NumPy", "torch": "PyTorch eager",
                    "torch-compile": "torch.compile"}


def _roofline_plot(report, path: str) -> None:
    from ..bench.roofline import Roofs, plot_roofline

    if not report.get("roofs"):
        raise click.UsageError("--roofline-plot needs the roofs: add --roofline (or a report made with it)")
    points = []
    for it in report["items"]:
        if it["group"] == "size":
            continue
        for impl, series in _ROOFLINE_SERIES.items():
            p = (it.get("roofline") or {}).get(impl)
            if p and p.get("flops"):
                points.append({**p, "label": it["op"] if impl == "pypto" else "", "series": series})
    title = "Roofline: suite ops, PyPTO and peers"
    click.echo(f"wrote {plot_roofline(points, Roofs.from_json(report['roofs']), path, title=title)}", err=True)
