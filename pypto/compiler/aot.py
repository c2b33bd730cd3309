"""Ahead-of-time builds: an op plus its stored (or given, or default) schedule -> files for a target.

Everything is written into a temporary folder next to the destination and moved into place only
when every artifact and the manifest exist, so a failed build leaves nothing half-made behind.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import shutil
import subprocess
import sysconfig
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import halide as hl

from ..errors import CompileError, PyptoError, ScheduleError, StaleScheduleError, TargetError
from ..infra.version import halide_version as _halide_version
from ..schedule.apply import apply_schedule
from ..schedule.defaults import default_schedule
from ..schedule import fit
from ..schedule.schedule import Schedule
from . import targets
from .lower import build, fingerprint

T = hl.OutputFileType
#: Format name -> the Halide outputs it needs (suffixes after the function name).
FORMATS: dict[str, tuple[tuple[Any, str], ...]] = {
    "static": ((T.static_library, ".a"), (T.c_header, ".h")),
    "shared": ((T.static_library, ".a"), (T.c_header, ".h")),  # + linked .so
    "object": ((T.object, ".o"), (T.c_header, ".h")),
    "c": ((T.c_source, ".halide_generated.cpp"), (T.c_header, ".h")),
    "llvm": ((T.llvm_assembly, ".ll"),),
    "asm": ((T.assembly, ".s"),),
    "stmt": ((T.stmt, ".stmt"),),
    "html": ((T.stmt_html, ".stmt.html"),),
    "python": ((T.python_extension, ".py.cpp"), (T.static_library, ".a"), (T.c_header, ".h")),
    "pytorch": ((T.pytorch_wrapper, ".pytorch.h"), (T.static_library, ".a"), (T.c_header, ".h")),
}


#: Words a C or C++ compiler reads as something else than a function's name.
_C_KEYWORDS = frozenset("""
    alignas alignof and asm auto bool break case catch char char16_t char32_t char8_t class const
    constexpr continue decltype default delete do double else enum explicit export extern false
    float for friend goto if inline int long mutable namespace new noexcept not nullptr operator
    or private protected public register restrict return short signed sizeof static struct switch
    template this throw true try typedef typeid typename union unsigned using virtual void
    volatile wchar_t while xor""".split())
_C_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}\Z")


def function_name(name: str | None, op) -> str:
    """The C function name of a build: ``name``, or ``pypto_<op>``, checked before anything is
    compiled (a keyword or a name of Halide's runtime built a library nobody could link, and a
    name that is not an identifier failed in the C compiler with pages of errors)."""
    fn = name or f"pypto_{op.name}"
    if not _C_NAME.match(fn):
        raise PyptoError(f"function name {fn!r} is not a C identifier (ASCII letters, digits and "
                         "_, not starting with a digit); choose another --name")
    if fn in _C_KEYWORDS:
        raise PyptoError(f"function name {fn!r} is a C/C++ keyword; choose another --name")
    if fn.startswith("halide_"):
        raise PyptoError(f"function name {fn!r} is in the namespace of Halide's runtime "
                         "(halide_*), which the library links; choose another --name")
    return fn


@dataclasses.dataclass
class BuildResult:
    out_dir: Path
    files: list[Path]
    manifest: dict
    warnings: list[str]


def _choose_schedule(op, built, fp, dtypes, params, dims, target, *, schedule_file, require_tuned,
                     warnings) -> tuple[Schedule, dict]:
    if schedule_file is not None:
        text = Path(schedule_file).read_bytes()
        s = Schedule.loads(text, str(schedule_file))
        if s.op != op.name:
            raise ScheduleError(f"{schedule_file}: schedule is for op {s.op!r}, not {op.name!r}")
        if s.fingerprint is not None and s.fingerprint != fp:
            raise StaleScheduleError(f"{schedule_file}: made for fingerprint {s.fingerprint}, the op "
                                     f"now has {fp}; re-tune or regenerate it")
        return s, {"source": f"file {schedule_file}", "hash": s.hash}
    skipped: list[str] = []
    if dims is not None:
        from ..database.lookup import _search

        notes: list[str] = []
        found, _ = _search(op, fp, dtypes, params, dims, target, notes)
        if found is not None:
            return found.schedule, {"source": found.source, "key": str(found.entry.key),
                                    "hash": found.schedule.hash, "distance": found.distance}
        # Why stored entries were passed over (a stale one: the op changed since it was tuned);
        # files that do not load have been warned about by the lookup itself.
        skipped = [n for n in notes if not n.startswith("not read:")]
    why = "".join(f"; {n}" for n in skipped)
    if require_tuned:
        raise PyptoError(f"{op.name}: no tuned schedule for {dict(dims or {})} on "
                         f"{targets.family(target)} and --require-tuned was given{why}; run "
                         f"`pypto tune {op.name} --shape ... --target ...` first")
    warnings.append(f"{op.name}: no tuned schedule for this shape and target; using the default")
    warnings += [f"{op.name}: {n}" for n in skipped]
    s = default_schedule(built, dims or {}, target)
    return s, {"source": "default", "hash": s.hash}


def _arguments(op, dtypes, out_dtypes) -> list[dict]:
    args = []
    for spec, dt in zip(op.inputs, dtypes):
        args.append({"name": spec.name, "kind": "input", "dtype": dt, "dims": list(spec.dims),
                     "halide_dims": list(reversed(spec.dims))})
    for spec, dt in zip(op.outputs, out_dtypes):
        args.append({"name": spec.name, "kind": "output", "dtype": dt, "dims": list(spec.dims),
                     "halide_dims": list(reversed(spec.dims))})
    return args


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def aot_target(name: str) -> hl.Target:
    """A Halide target for ahead-of-time output (never the JIT feature)."""
    t = targets.parse(name)
    return hl.Target(str(t).replace("-jit", ""))


def _output_folder(out_dir) -> Path:
    """``out_dir`` checked before anything is compiled: it is a folder, or can be made one (its
    parents are created now: the build writes its files in a temporary folder beside it)."""
    if not str(out_dir).strip():    # Path("") is the current folder
        raise PyptoError("the output folder is empty; give the folder to write into (-o)")
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise PyptoError(f"output {out} exists and is not a folder; choose another -o")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        blocker = next((p for p in reversed(out.parents) if p.exists() and not p.is_dir()), None)
        why = (f"{blocker} is a file, not a folder" if blocker is not None
               else f"{e.strerror} ({e.filename})")
        raise PyptoError(f"cannot create the output folder {out}: {why}; choose another -o") from None
    if not os.access(out.parent, os.W_OK | os.X_OK) or (out.is_dir() and
                                                        not os.access(out, os.W_OK | os.X_OK)):
        raise PyptoError(f"cannot write the output folder {out}; choose another -o")
    return out


def build_op(op, *, target: str, out_dir: str | os.PathLike, dims: Mapping[str, int] | None,
             dtypes: Sequence[str] | None = None, params: Mapping[str, Any] | None = None,
             formats: Sequence[str] = ("static",), name: str | None = None,
             schedule_file: str | None = None, require_tuned: bool = False) -> BuildResult:
    """Compiles ``op`` for ``target`` (comma-separated: a multi-target static library)."""
    from ..infra.version import __version__

    out = _output_folder(out_dir)
    bad = [f for f in formats if f not in FORMATS]
    if bad:
        raise PyptoError(f"unknown format(s) {bad}; choose from {', '.join(FORMATS)}")
    tnames = [t.strip() for t in target.split(",") if t.strip()]
    if not tnames:
        raise TargetError(f"no target given; known: {', '.join(targets.SHORT_NAMES)}")
    tlist = [aot_target(t) for t in tnames]
    seen: dict[str, str] = {}
    for given, t in zip(tnames, tlist):
        if str(t) in seen:
            raise TargetError(f"targets {seen[str(t)]!r} and {given!r} are the same target "
                              f"({t}); name each once")
        seen[str(t)] = given
    if not formats:
        raise PyptoError(f"no output format given; choose from {', '.join(FORMATS)}")
    _check_multitarget(tnames, tlist)
    dtypes = tuple(dtypes) if dtypes else op.dtypes[0]
    params = op.resolve_params(dict(params or {}))
    fn = function_name(name, op)
    warnings: list[str] = []
    sched_dims = dims
    if dims is None:
        # No shape: the library accepts any shape; its schedule is chosen for the op's example.
        from ..infra.inputs import complete_dims

        sched_dims = complete_dims(op, op.example or {d: 64 for d in op.input_dims}, params)
        warnings.append(f"{op.name}: no --shape; the schedule is chosen for the example shape "
                        f"{','.join(f'{k}={v}' for k, v in sched_dims.items())}")
    built = build(op, dtypes, params)
    fp = fingerprint(built)
    schedule, sched_info = _choose_schedule(op, built, fp, dtypes, params, sched_dims, tlist[0],
                                            schedule_file=schedule_file,
                                            require_tuned=require_tuned, warnings=warnings)
    apply_schedule(built, schedule)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        files = _emit(built, fn, tlist, formats, tmp)
        manifest = {
            "format": 1, "function": fn, "op": op.name, "fingerprint": fp,
            "arguments": _arguments(op, dtypes, built.out_dtypes),
            "params": params, "shape": dict(dims) if dims else None,
            "schedule_shape": dict(sched_dims),
            "schedule": sched_info, "target": ",".join(str(t) for t in tlist),
            "versions": {"pypto": __version__, "halide": _halide_version()},
            "files": {p.name: _sha(p) for p in files},
        }
        (tmp / f"{fn}.manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
        out.mkdir(parents=True, exist_ok=True)
        moved = []
        for p in sorted(tmp.iterdir()):
            dest = out / p.name
            os.replace(p, dest)
            moved.append(dest)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return BuildResult(out_dir=out, files=moved, manifest=manifest, warnings=warnings)


def _check_multitarget(tnames: list[str], tlist: list[hl.Target]) -> None:
    """A multi-target library is one schedule (chosen for the first target) compiled for each
    target, all of one architecture: what Halide cannot build is said before it tries (it said
    "All Targets must have matching arch-bits-os", or that a GPU schedule needs a GPU feature)."""
    if len(tlist) < 2:
        return
    first = tlist[0]
    for given, t in zip(tnames[1:], tlist[1:]):
        if (t.arch, t.bits, t.os) != (first.arch, first.bits, first.os):
            raise TargetError(f"targets {tnames[0]!r} and {given!r} differ in architecture or OS; "
                              "a multi-target library holds one architecture: build each "
                              "separately (one --target each)")
        if first.has_gpu_feature() and not t.has_gpu_feature():
            raise TargetError(f"the schedule of a multi-target library is chosen for the first "
                              f"target, {tnames[0]!r}, a GPU schedule that {given!r} cannot run; "
                              f"name the CPU target first (--target {given},{tnames[0]}) or build "
                              "each separately")


def _emit(built, fn: str, tlist: list[hl.Target], formats, tmp: Path) -> list[Path]:
    outputs: dict[Any, str] = {}
    for f in formats:
        for kind, suffix in FORMATS[f]:
            outputs[kind] = str(tmp / f"{fn}{suffix}")
    try:
        if len(tlist) > 1:
            if set(formats) - {"static"}:
                raise PyptoError("several targets build one multi-target static library; "
                                 "use --format static")
            _multitarget(built, fn, tlist, tmp)
        else:
            built.pipeline.compile_to(outputs, built.images, fn, tlist[0])
    except hl.HalideError as e:
        raise CompileError(f"op {built.op.name!r}: Halide could not build {fn} for "
                           f"{', '.join(map(str, tlist))}: {str(e).strip()}") from None
    if set(formats) & {"shared", "python"}:
        _check_host_links(tlist[0], formats)
    if "shared" in formats:
        _link_shared(tmp / f"{fn}.a", tmp / f"lib{fn}.so")
    if "python" in formats:
        _build_python_extension(tmp, fn)
    return sorted(tmp.iterdir())


def _check_host_links(target, formats) -> None:
    """The shared library and the Python extension are linked by this machine's C compiler,
    which links only objects of its own architecture: an arm-64 build on x86-64 dumped pages of
    linker errors. Those formats are refused for another architecture, naming the ones that
    work."""
    from . import targets

    if not targets.host_cpu(target):
        wanted = ", ".join(sorted(set(formats) & {"shared", "python"}))
        raise PyptoError(f"--format {wanted} is linked by this machine's C compiler, which "
                         f"cannot link for {target} (this machine is {targets.host()}); "
                         f"build --format static, object or c here and link on the target, or "
                         f"use a cross toolchain")


def _multitarget(built, fn: str, tlist, tmp: Path) -> None:
    """One static library with a variant per target, picked at run time by CPU features.

    Halide names the entry point after the output Func, so the output is copied through a Func
    named ``fn`` (vectorized and parallel like any output): one extra pass over the result.
    """
    if len(built.outputs) != 1:
        raise PyptoError(f"{built.op.name}: multi-target builds take single-output ops")
    out = built.outputs[0]
    args = out.args()
    w = hl.Func(fn)
    w[args] = out[args]
    out.compute_root()
    lanes = max(1, tlist[0].natural_vector_size(out.type()))
    w.vectorize(args[0], lanes, hl.TailStrategy.GuardWithIf)
    if len(args) > 1:
        w.parallel(args[-1])
    hl.Pipeline([w]).compile_to_multitarget_static_library(str(tmp / fn), built.images, tlist)
    if w.name() != fn:
        _rename_entry_point(tmp, fn, w.name())


def _rename_entry_point(tmp: Path, fn: str, func_name: str) -> None:
    """Renames the library's functions from what Halide called them back to ``fn``.

    Halide keeps Func names unique within a process: when ``fn`` was taken (by an earlier build),
    the wrapper Func became ``fn$1`` and its C functions ``fn_1``, ``fn_1_argv``, ... The symbols
    are renamed with ``objcopy`` and the header rewritten; the name inside the library's metadata
    (``fn_1_metadata()->name``) keeps Halide's spelling.
    """
    import re

    got = "".join(c if c.isalnum() else "_" for c in func_name)  # how Halide spells it in C
    objcopy = shutil.which("objcopy")
    if objcopy is None:
        raise PyptoError(f"{fn}: Halide named the function {got} because {fn} was used earlier in "
                         "this process; renaming it needs objcopy (install binutils), or build "
                         "in a fresh process")
    archive, header = tmp / f"{fn}.a", tmp / f"{fn}.h"
    r = subprocess.run(["nm", "--defined-only", "--format=posix", str(archive)],
                       capture_output=True, text=True)
    if r.returncode:
        raise CompileError(f"listing the symbols of {archive.name} failed: {r.stderr.strip()[:2000]}")
    ours = re.compile(re.escape(got) + r"(-[\w-]+)?(_argv|_metadata)?")
    names = {line.split()[0] for line in r.stdout.splitlines() if line.split()}
    renames = sorted(f"{n} {fn}{n[len(got):]}" for n in names if ours.fullmatch(n))
    (tmp / "renames.txt").write_text("\n".join(renames) + "\n")
    r = subprocess.run([objcopy, f"--redefine-syms={tmp / 'renames.txt'}", str(archive)],
                       capture_output=True, text=True)
    (tmp / "renames.txt").unlink()
    if r.returncode:
        raise CompileError(f"renaming {got} to {fn} in {archive.name} failed: {r.stderr.strip()[:2000]}")
    text = header.read_text()
    text = re.sub(rf"\b{re.escape(got)}(?=(_argv|_metadata)?\b)", fn, text)
    text = text.replace(f"_{func_name.replace('$', '__')}_buffer", f"_{fn}_buffer")
    header.write_text(text)


def _cc() -> str:
    for c in (os.environ.get("CXX"), "c++", "g++", "clang++"):
        if c and shutil.which(c):
            return c
    raise PyptoError("a C++ compiler is needed for shared objects and Python extensions "
                     "(install g++), or build --format static")


def _link_shared(archive: Path, so: Path) -> None:
    cmd = [_cc(), "-shared", "-o", str(so), "-Wl,--whole-archive", str(archive),
           "-Wl,--no-whole-archive", "-lpthread", "-ldl"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        raise CompileError(f"linking {so.name} failed: {r.stderr.strip()[:2000]}")


def _build_python_extension(tmp: Path, fn: str) -> None:
    inc = os.path.join(os.path.dirname(hl.__file__), "include")
    ext = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
    cmd = [_cc(), "-shared", "-fPIC", "-O2", "-std=c++17", f"-I{inc}",
           f"-I{sysconfig.get_paths()['include']}", str(tmp / f"{fn}.py.cpp"), str(tmp / f"{fn}.a"),
           "-o", str(tmp / f"{fn}{ext}"), "-lpthread", "-ldl"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        raise CompileError(f"compiling the Python extension failed: {r.stderr.strip()[:2000]}")



# -- shape-generic libraries ----------------------------------------------------------------------

_DISPATCH = r"""
#include <math.h>
#include <stddef.h>
#include "HalideRuntime.h"

%(decls)s

/* Tuned shapes, in the order of the named dims %(dim_names)s; -1 marks a default variant. */
static const double shapes[%(nv)d][%(nd)d] = {%(shapes)s};

/* Whether variant v's split, vector and task factors fit the extents n (a factor that needs
   a loop at least that long, or a multiple of it; see pypto.schedule.fit). The last variant
   fits every shape. */
static int fits(int v, const long long *n) {
    switch (v) {
%(fits)s
    }
    return 1;
}

int %(fn)s(%(params)s) {
    double ext[%(nd)d] = {%(extents)s};
    long long n[%(nd)d];
    int order[%(nv)d];
    double dist[%(nv)d];
    for (int d = 0; d < %(nd)d; d++) n[d] = (long long)ext[d];
    for (int v = 0; v < %(nv)d; v++) {
        order[v] = v;
        dist[v] = 0;
        for (int d = 0; d < %(nd)d; d++)
            dist[v] += shapes[v][d] < 0 ? 1e30 * (v + 1) : fabs(log2(ext[d] / shapes[v][d]));
    }
    for (int i = 1; i < %(nv)d; i++)  /* insertion sort: nearest tuned shape first */
        for (int j = i; j > 0 && dist[order[j]] < dist[order[j - 1]]; j--) {
            int t = order[j]; order[j] = order[j - 1]; order[j - 1] = t;
        }
    /* The nearest variant whose factors fit this shape. (Halide's default error handler aborts
       the process, so a variant that does not fit must not be tried.) */
    for (int i = 0; i < %(nv)d; i++) {
        if (!fits(order[i], n)) continue;
        switch (order[i]) {
%(cases)s
        }
    }
    return -1;
}
"""


def _c_term(t, index: Mapping[str, int]) -> str:
    """A term of :func:`pypto.schedule.fit.requirements` as a C expression over ``n[]``."""
    if isinstance(t, int):
        return f"{t}LL"
    if t[0] == "dim":
        return f"n[{index[t[1]]}]"
    if t[0] == "ceil":
        return f"(({_c_term(t[1], index)} + {t[2] - 1}LL) / {t[2]}LL)"
    return f"({_c_term(t[1], index)} * {_c_term(t[2], index)})"


def _c_fits(needs: list, index: Mapping[str, int]) -> str:
    """The C condition that every requirement holds (``1`` when there are none)."""
    conds = []
    for kind, e, f in needs:
        term = _c_term(e, index)
        conds.append(f"{term} >= {f}LL" if kind == "at_least" else f"{term} % {f}LL == 0")
    return " && ".join(dict.fromkeys(conds)) or "1"


def _variant_error(op, dtypes, target: str, shape, label: str, err: Exception) -> CompileError:
    """A variant of the any-shape library that does not compile, said with the op, dtypes, shape
    and target, and what to do (Halide's own text, "Error: ..." stripped, is kept as the reason)."""
    why = str(err).strip()
    why = why[len("Error:"):].strip() if why.startswith("Error:") else why
    where = f"op {op.name!r} ({'/'.join(dtypes)}) for target {target!r}"
    if shape is None and label.endswith("(any shape)"):
        return CompileError(
            f"{where}: the default schedule made to run at any shape does not compile for this "
            f"target ({why}); --all-shapes needs it as the fallback, so build one library per "
            f"shape instead: `pypto build --op {op.name} --target {target} --shape "
            f"{','.join(f'{d}=...' for d in op.input_dims)}`")
    at = "the example shape" if shape is None else ",".join(f"{d}={v}" for d, v in shape.items())
    fix = ("report it: the default schedule should always compile" if shape is None else
           "prune or re-tune that entry (`pypto db show`, `pypto db prune`), or build with "
           "--shape for other shapes")
    return CompileError(f"{where}: variant {label} at {at} does not compile ({why}); {fix}")


def build_all_shapes(op, *, target: str, out_dir: str | os.PathLike, dtypes=None, params=None,
                     name: str | None = None, require_tuned: bool = False) -> BuildResult:
    """One static library whose entry point takes any shape and runs the schedule tuned for the
    nearest stored shape (by the database's distance), falling back to the default schedule.
    With ``require_tuned``, a database with no tuned shape for it is an error."""
    from ..infra.version import __version__
    from ..infra.inputs import complete_dims
    from ..database.lookup import search_path

    out = _output_folder(out_dir)
    if "," in target:
        raise PyptoError("--all-shapes builds for one target at a time")
    t = aot_target(target)
    dtypes = tuple(dtypes) if dtypes else op.dtypes[0]
    params = op.resolve_params(dict(params or {}))
    fn = function_name(name, op)
    fp = fingerprint(build(op, dtypes, params))
    fam = targets.family(t)
    pkey = tuple(sorted(params.items()))
    from ..database.lookup import key_mismatch

    seen, variants, passed_over = set(), [], []
    for db in search_path():
        for e in db.entries(op.name, fam):
            k = e.key
            if k.dtypes == dtypes and k.params == pkey and k.fingerprint == fp and k.shape not in seen:
                why = key_mismatch(op, k)
                if why:    # one such entry stopped the whole build ('shape must name M, K, N')
                    passed_over.append(f"{op.name}: {k} in {db.name} passed over: {why}")
                    continue
                seen.add(k.shape)
                variants.append((e.key.shape_dict, e.schedule, str(e.key)))
    if require_tuned and not variants:
        raise PyptoError(f"{op.name}: no tuned schedule for {'/'.join(dtypes)} on {fam} and "
                         f"--require-tuned was given; run `pypto tune {op.name} --shape ... "
                         f"--target ...` first")
    ex = complete_dims(op, op.example or {d: 64 for d in op.input_dims}, params)
    dims_order = list(op.input_dims)
    no_rt = t.with_feature(hl.TargetFeature.NoRuntime)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        objs, cases, shapes, info, fits = [], [], [], [], []
        index = {d: i for i, d in enumerate(dims_order)}
        inputs = {spec.name: tuple(spec.dims) for spec in op.inputs}
        ex_dims = complete_dims(op, ex, params)
        default = default_schedule(build(op, dtypes, params), ex_dims, t)
        # Tuned variants, then the default at the op's example shape, then that default made to
        # run at any shape (tails guarded): the dispatcher runs the nearest one that fits.
        all_variants = variants + [(None, default, "default"),
                                   (None, fit.any_shape(default), "default (any shape)")]
        for i, (shape, sched, label) in enumerate(all_variants):
            vname = f"{fn}_v{i}"
            built = build(op, dtypes, params)
            if i < len(all_variants) - 1:
                stored = complete_dims(op, shape, params) if shape else ex_dims
                fits.append(f"        case {i}: return "
                            f"{_c_fits(fit.requirements(sched, stored, inputs), index)};")
            try:
                apply_schedule(built, sched)
                built.pipeline.compile_to({T.object: str(tmp / f"{vname}.o")}, built.images, vname, no_rt)
            except (ScheduleError, hl.HalideError) as e:
                raise _variant_error(op, dtypes, target, shape, label, e) from None
            objs.append(tmp / f"{vname}.o")
            shapes.append("{" + ", ".join(str(float(shape[d])) if shape else "-1" for d in dims_order) + "}")
            nargs = len(op.inputs) + len(op.outputs)
            call = ", ".join(f"a{j}" for j in range(nargs))
            cases.append(f"        case {i}: return {vname}({call});")
            info.append({"function": vname, "shape": shape, "entry": label, "schedule_hash": sched.hash})
        hl.compile_standalone_runtime(str(tmp / "runtime.o"), t)
        nargs = len(op.inputs) + len(op.outputs)
        params_c = ", ".join(f"struct halide_buffer_t *a{j}" for j in range(nargs))
        extents = []
        for d in dims_order:
            for j, spec in enumerate(op.inputs):
                if d in spec.dims:
                    extents.append(f"(double)a{j}->dim[{spec.rank - 1 - spec.dims.index(d)}].extent")
                    break
        decls = "\n".join(f"int {v['function']}({params_c});" for v in info)
        src = _DISPATCH % {"decls": decls, "dim_names": ",".join(dims_order), "nv": len(info),
                           "fits": "\n".join(fits),
                           "nd": len(dims_order), "shapes": ", ".join(shapes), "fn": fn,
                           "params": params_c, "extents": ", ".join(extents), "cases": "\n".join(cases)}
        (tmp / f"{fn}_dispatch.c").write_text(src)
        inc = os.path.join(os.path.dirname(hl.__file__), "include")
        cc = shutil.which("cc") or _cc()
        r = subprocess.run([cc, "-O2", "-fPIC", "-c", f"-I{inc}", str(tmp / f"{fn}_dispatch.c"),
                            "-o", str(tmp / f"{fn}_dispatch.o")], capture_output=True, text=True)
        if r.returncode:
            raise CompileError(f"compiling the dispatcher failed: {r.stderr.strip()[:2000]}")
        r = subprocess.run(["ar", "rcs", str(tmp / f"{fn}.a"), *map(str, objs), str(tmp / "runtime.o"),
                            str(tmp / f"{fn}_dispatch.o")], capture_output=True, text=True)
        if r.returncode:
            raise CompileError(f"archiving failed: {r.stderr.strip()[:2000]}")
        (tmp / f"{fn}.h").write_text(
            f"#pragma once\n#include \"HalideRuntime.h\"\n#ifdef __cplusplus\nextern \"C\" {{\n#endif\n"
            f"int {fn}({params_c});\n#ifdef __cplusplus\n}}\n#endif\n")
        # The header includes Halide's runtime header: shipped beside it, so the folder compiles
        # on its own (the single-shape header embeds those declarations instead).
        shutil.copyfile(os.path.join(inc, "HalideRuntime.h"), tmp / "HalideRuntime.h")
        for p in list(tmp.iterdir()):
            if p.suffix in (".o", ".c"):
                p.unlink()
        files = sorted(tmp.iterdir())
        manifest = {
            "format": 1, "function": fn, "op": op.name, "fingerprint": fp,
            "arguments": _arguments(op, dtypes, build(op, dtypes, params).out_dtypes),
            "params": params, "shape": "any", "dispatch_dims": dims_order, "variants": info,
            "target": str(t), "versions": {"pypto": __version__, "halide": _halide_version()},
            "files": {p.name: _sha(p) for p in files},
        }
        (tmp / f"{fn}.manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
        out.mkdir(parents=True, exist_ok=True)
        moved = []
        for p in sorted(tmp.iterdir()):
            os.replace(p, out / p.name)
            moved.append(out / p.name)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    warnings = passed_over + ([] if variants else [
        f"{op.name}: no tuned schedules on {fam}; the library has only the default variant"])
    return BuildResult(out_dir=out, files=moved, manifest=manifest, warnings=warnings)
