"""Entries and keys for the database tests."""

from pypto.compiler import targets
from pypto.compiler.jit import clear_memory_cache
from pypto.compiler.lower import build, fingerprint
from pypto.database import Entry, Key, add_path, remove_path
from pypto.schedule.directives import Directive
from pypto.schedule.schedule import Schedule
from toyops import toy_matmul

D = Directive.make
F32 = ("float32", "float32")


def fp(op=toy_matmul, dtypes=F32):
    return fingerprint(build(op, dtypes, {}))


def family():
    return targets.family(targets.host())


def matmul_entry(m, k, n, *, time_ms=1.0, fprint=None, directives=None, tag="t"):
    directives = directives if directives is not None else (
        D("split", "out", var="m", outer="mo", inner="mi", factor=4, tail="guard_with_if"),
        D("parallel", "out", var="mo"),
        D("vectorize", "out", var="n", factor=4, tail="guard_with_if"),
    )
    f = fprint or fp()
    key = Key.make("toy_matmul", F32, {"M": m, "K": k, "N": n}, {}, family(), f)
    return Entry(key=key, schedule=Schedule("toy_matmul", tuple(directives), f), time_ms=time_ms,
                 baselines={"default": 2.0}, provenance={"method": tag})


def program_db(root, baselines=None) -> str:
    """A database at ``root`` holding one program entry (softmax's backward at R=4, C=8, at its
    fused default schedule) and the program's graph file; returns the program's name."""
    import pypto
    from pypto.autodiff.api import backward_program
    from pypto.database import DirectoryDatabase
    from pypto.frontend.graph import fused_schedule
    from pypto.frontend.serial import write_program

    op = pypto.get_op("softmax")
    g = backward_program(op, {"R": 4, "C": 8}, op.dtypes[0])
    built = build(g, g.dtypes[0], {})
    f = fingerprint(built)
    key = Key.make(g.name, g.dtypes[0], {d: g.call_dims[d] for d in g.input_dims}, {}, family(), f)
    entry = Entry(key=key, schedule=Schedule(g.name, tuple(fused_schedule(built, g.call_dims, 8)),
                                             f),
                  time_ms=1.0, baselines=baselines or {}, provenance={"method": "test"})
    DirectoryDatabase(root).commit([entry])
    write_program(root, g.graph, g.name)
    return g.name
