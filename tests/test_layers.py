"""Layers import downward only: every import in pypto/ and autotune/, at module top or inside a
function, is read with ``ast`` and checked against the layer table below.

A module may import its own layer and any layer below. The CLI and the package face
(``pypto/__init__.py``) sit on top and may import anything. The only upward imports are the lazy
plugin points in ``ALLOWED``, each with its reason; a new upward import fails here, and so does an
allowed one that no longer exists (the list stays true). Imports made by ``importlib`` from a
computed name (the op families, the schedule templates) are not seen; none of them runs upward.
"""

from __future__ import annotations

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]

#: Bottom first. A module belongs to the longest prefix that names it. Packages that do not exist
#: yet (frontend, autodiff, torch) have their place already.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("base", ("pypto.errors", "pypto.dtypes")),
    ("infra", ("pypto.infra",)),               # version, profiling switch, inputs, timing, verify, strict JSON
    # Lowering an op's algorithm into Halide Funcs, and naming targets: what schedules are applied
    # to and made for. They live in compiler/ but import nothing above base and infra.
    ("lowering", ("pypto.compiler.lower", "pypto.compiler.targets")),
    ("schedule", ("pypto.schedule",)),
    ("compiler", ("pypto.compiler",)),         # jit, aot, diskcache
    ("ops/runtime", ("pypto.ops", "pypto.runtime")),
    ("database", ("pypto.database",)),
    ("frontend", ("pypto.frontend",)),         # Tensor, tracing, jit (may look schedules up)
    ("autodiff", ("pypto.autodiff",)),
    ("nn", ("pypto.nn",)),                     # layers written as programs
    ("torch", ("pypto.torch",)),
    ("bench", ("pypto.bench",)),
    ("autotune", ("autotune",)),
    ("top", ("pypto.cli", "pypto")),           # the CLI and the package face
]

#: (importer, imported) -> why this upward import is a lazy plugin point.
ALLOWED: dict[tuple[str, str], str] = {
    ("pypto.compiler.jit", "pypto.database.lookup"):
        "a call's schedule comes from the database: looked up when a kernel is chosen",
    ("pypto.compiler.aot", "pypto.database.lookup"):
        "`pypto build` compiles the stored schedule for a shape (or every stored shape)",
    ("pypto.bench.harness", "autotune.evaluate"):
        "missing autoscheduler results are computed in the tuner's sandboxed worker process "
        "(a crash or hang there is a skipped peer), only when a bench asks for them",
    ("pypto.frontend.programs", "autotune.tuner"):
        "pypto.tune(fn, *arrays) hands a traced program to the tuner (optuna), only when called",
    ("pypto.ops._load", "pypto.frontend.serial"):
        "an op spec 'graph:PATH' names a traced program saved as data (how the tuner's workers "
        "receive one); loaded only for such specs",
}


def layer_of(module: str) -> int:
    best, found = "", None
    for i, (_, prefixes) in enumerate(LAYERS):
        for p in prefixes:
            if (module == p or module.startswith(p + ".")) and len(p) > len(best):
                best, found = p, i
    if found is None:
        raise AssertionError(f"{module} is in no layer; add it to LAYERS in tests/test_layers.py")
    return found


def modules() -> dict[str, pathlib.Path]:
    out = {}
    for top in ("pypto", "autotune"):
        for path in (ROOT / top).rglob("*.py"):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
    return out


def imports(module: str, path: pathlib.Path, known: set[str]) -> list[tuple[str, int, bool]]:
    """(imported module, line, lazy) for every import of pypto or autotune in ``path``."""
    tree = ast.parse(path.read_text(), str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    top_level = {id(n) for n in tree.body}
    found = []
    for node in ast.walk(tree):
        lazy = id(node) not in top_level
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(base + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            # ``from pkg import sub`` imports the submodule pkg.sub when there is one.
            names = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
        else:
            continue
        found += [(n, node.lineno, lazy) for n in names if n.split(".")[0] in ("pypto", "autotune")]
    return found


def upward_edges() -> dict[tuple[str, str], list[str]]:
    mods = modules()
    edges: dict[tuple[str, str], list[str]] = {}
    for mod, path in sorted(mods.items()):
        for target, line, lazy in imports(mod, path, set(mods)):
            if layer_of(target) > layer_of(mod):
                where = f"{path.relative_to(ROOT)}:{line} ({'lazy' if lazy else 'module top'})"
                seen = edges.setdefault((mod, target), [])
                if where not in seen:
                    seen.append(where)
    return edges


def test_every_module_has_a_layer():
    for mod in modules():
        layer_of(mod)


def test_no_module_imports_a_layer_above_its_own():
    bad = [f"{a} -> {b}: {', '.join(w)}" for (a, b), w in upward_edges().items() if (a, b) not in ALLOWED]
    assert not bad, ("upward imports (move the shared piece down, e.g. into pypto/infra, or make it "
                     "a documented lazy plugin point in ALLOWED):\n" + "\n".join(bad))


def test_allowed_upward_imports_are_lazy_and_still_exist():
    edges = upward_edges()
    for pair, why in ALLOWED.items():
        assert pair in edges, f"{pair} is allowed ({why}) but no longer imported: drop it from ALLOWED"
        tops = [w for w in edges[pair] if "module top" in w]
        assert not tops, f"{pair} must be imported lazily (inside the function that needs it): {tops}"


@pytest.mark.parametrize("module, target, lazy", [
    ("pypto.compiler.jit", "pypto.bench.profile", False),
    ("pypto.schedule.gpu", "pypto.compiler.jit", True),
])
def test_the_checker_sees_module_top_and_lazy_imports(tmp_path, module, target, lazy):
    path = tmp_path / "m.py"
    rel = "." * 2 + target.split(".", 1)[1].rpartition(".")[0]
    body = f"from {rel} import {target.rpartition('.')[2]}\n"
    path.write_text(body if not lazy else "def f():\n    " + body)
    got = imports(module, path, {target})
    assert got == [(target, 1 if not lazy else 2, lazy)]
    assert layer_of(target) > layer_of(module)
