"""A traced segment as data: JSON that names registered ops only, so another process (a tuner
worker) can rebuild the same graph op without running the user's Python.

Loading checks everything it reads (kinds, op names, references, shapes, dtypes); it never
imports or evaluates anything named in the file.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from ..dtypes import SUPPORTED
from ..errors import PyptoError
from .graph import Graph, GraphOp
from .tensor import Node, Tensor

FORMAT = 1
_VIEWS = {"reshape", "permute", "broadcast", "slice"}
_LIMIT_NODES = 20000


class GraphFileError(PyptoError, ValueError):
    """A graph file is malformed; the message names what was wrong."""


def to_json(graph: Graph, *, name: str) -> dict:
    """The segment as a JSON-able dict."""
    nodes = []
    for n in graph.nodes:
        item: dict[str, Any] = {"kind": n.kind, "in": [list(graph.ref(t)) for t in n.inputs],
                                "outs": [[list(s), d.name] for s, d in n.outs]}
        if n.kind == "op":
            item.update(op=n.op.name, params=n.params, dims=n.dims, dtypes=list(n.dtypes))
        else:
            item["aux"] = _aux_json(n.aux)
        nodes.append(item)
    return {"format": FORMAT, "name": name,
            "sources": [[list(graph.source_shape(i)), graph.source_dtype(i).name]
                        for i in range(len(graph.sources))],
            "nodes": nodes,
            "outputs": [list(graph.ref(o)) for o in graph.outputs]}


def _aux_json(aux):
    if isinstance(aux, tuple):
        return [_aux_json(a) for a in aux]
    return aux


def _fail(msg: str):
    raise GraphFileError(f"graph file: {msg}")


def _shape(v, where) -> tuple[int, ...]:
    if not isinstance(v, list) or len(v) > 16 or not all(
            isinstance(n, int) and not isinstance(n, bool) and 0 < n < 2**31 for n in v):
        _fail(f"{where}: a shape must be a list of up to 16 positive ints, got {v!r}")
    return tuple(v)


def _dtype(v, where) -> np.dtype:
    if v not in SUPPORTED:
        _fail(f"{where}: unknown dtype {v!r}")
    return np.dtype(v)


def from_json(obj: Any) -> tuple[Graph, str]:
    """Rebuilds (graph, name) from :func:`to_json`'s data; ops come from the registry."""
    from ..ops import get_op

    if not isinstance(obj, dict) or obj.get("format") != FORMAT:
        _fail(f"expected a dict with format {FORMAT}")
    nodes_in = obj.get("nodes")
    if not isinstance(nodes_in, list) or len(nodes_in) > _LIMIT_NODES:
        _fail("'nodes' must be a list of at most 20000 items")
    srcs = []
    for i, s in enumerate(obj.get("sources") or []):
        if not isinstance(s, list) or len(s) != 2:
            _fail(f"source {i} must be [shape, dtype]")
        node = Node("input", [], [(_shape(s[0], f"source {i}"), _dtype(s[1], f"source {i}"))],
                    f"source {i}", value=None)
        srcs.append(Tensor(node))
    built: list[Node] = []

    def ref(r, where) -> Tensor:
        if not isinstance(r, list) or not r:
            _fail(f"{where}: bad reference {r!r}")
        if r[0] == "s" and len(r) == 2 and isinstance(r[1], int) and 0 <= r[1] < len(srcs):
            return srcs[r[1]]
        if (r[0] == "n" and len(r) == 3 and isinstance(r[1], int) and 0 <= r[1] < len(built)
                and isinstance(r[2], int) and 0 <= r[2] < len(built[r[1]].outs)):
            return Tensor(built[r[1]], r[2])
        _fail(f"{where}: reference {r!r} points nowhere (only to sources and earlier nodes)")

    for i, item in enumerate(nodes_in):
        where = f"node {i}"
        if not isinstance(item, dict):
            _fail(f"{where} must be a dict")
        kind = item.get("kind")
        ins = [ref(r, where) for r in item.get("in", [])]
        outs = [(_shape(o[0], where), _dtype(o[1], where)) for o in item.get("outs", [])]
        if kind == "op":
            op = get_op(item.get("op"))
            params = op.resolve_params(dict(item.get("params") or {}))
            dims = {k: int(v) for k, v in (item.get("dims") or {}).items()}
            node = Node("op", ins, outs, where, op=op, params=params, dims=dims,
                        dtypes=tuple(str(d) for d in item.get("dtypes", [])))
        elif kind in ("view", "cast"):
            aux = item.get("aux")
            if kind == "cast":
                _dtype(aux, where)
            elif not (isinstance(aux, list) and aux and aux[0] in _VIEWS):
                _fail(f"{where}: unknown view {aux!r}")
            else:
                aux = tuple(tuple(a) if isinstance(a, list) else a for a in aux)
            node = Node(kind, ins, outs, where, aux=aux)
        else:
            _fail(f"{where}: unknown kind {kind!r}")
        built.append(node)
    outputs = [ref(r, "outputs") for r in obj.get("outputs", [])]
    if not outputs:
        _fail("no outputs")
    graph = Graph(outputs)
    name = obj.get("name")
    if not isinstance(name, str):
        _fail("'name' must be a string")
    return graph, name


def graphs_dir() -> Path:
    """Where graph files for tuner workers are kept: a per-user folder created 0700."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    d = Path(base) / "pypto" / "graphs"
    d.mkdir(parents=True, exist_ok=True, mode=0o700)
    return d


def save(graph: Graph, *, name: str) -> str:
    """Writes the graph file for ``graph``; returns the op spec ``graph:<path>`` workers resolve."""
    data = json.dumps(to_json(graph, name=name), sort_keys=True)
    path = graphs_dir() / f"{name}-{hashlib.sha256(data.encode()).hexdigest()[:16]}.json"
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(data)
    os.replace(tmp, path)
    return f"graph:{path}"


def write_program(root, graph: Graph, name: str):
    """Writes ``graph`` as program ``name``'s graph file into database folder ``root`` (see
    ``pypto.database.programs``); returns its path."""
    from ..database.programs import write_graph

    return write_graph(root, name, json.dumps(to_json(graph, name=name), sort_keys=True))


def load_op(path: str) -> GraphOp:
    """The graph op a graph file describes (``resolve_op('graph:PATH')``)."""
    try:
        text = Path(path).read_text()
    except OSError as e:
        raise GraphFileError(f"graph file {path}: cannot read it ({e})") from None
    try:
        obj = json.loads(text)
    except ValueError as e:
        raise GraphFileError(f"graph file {path}: not JSON ({e})") from None
    graph, name = from_json(obj)
    return GraphOp(graph, name=name)


def _register() -> None:
    from ..database import programs

    programs.set_loader(load_op)


_register()
