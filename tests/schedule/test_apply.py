"""Applying schedules: correct results, clear errors, stale detection, Halide-Python transcripts."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import assert_close, rand
from pypto.compiler import targets
from pypto.compiler.jit import compile_built, get_kernel
from pypto.compiler.lower import build, fingerprint
from pypto.errors import CompileError, ScheduleError, StaleScheduleError
from pypto.runtime import prepare, run_kernel
from pypto.schedule.directives import Directive
from pypto.schedule.schedule import Schedule
from toyops import toy_matmul, toy_rownorm

D = Directive.make


def run_with(op, schedule, *arrays):
    arrs, dtypes, params, dims = prepare(op, arrays, {})
    k = get_kernel(op, dtypes, params, dims, schedule=schedule)
    return run_kernel(k, op, arrs, dims)[0], k


def test_a_hand_schedule_gives_the_reference_result_and_prints_as_python():
    a, b = rand((37, 19)), rand((19, 45), seed=1)
    s = Schedule("toy_matmul", (
        D("split", "out", var="m", outer="mo", inner="mi", factor=8, tail="guard_with_if"),
        D("parallel", "out", var="mo"),
        D("vectorize", "out", var="n", factor=8),
        D("compute_at", "acc", at="out", var="mo"),
        D("split", "acc", 1, var="n", outer="no", inner="ni", factor=8, tail="guard_with_if"),
        D("reorder", "acc", 1, vars=["ni", "k$x", "no", "m"]),
        D("vectorize", "acc", 1, var="ni"),
        D("unroll", "acc", 1, var="k$x", factor=2),
    ))
    got, k = run_with(toy_matmul, s, a, b)
    assert_close(got, a @ b)
    assert "acc.update(0).reorder(ni, k$x, no, m)" in k.python
    assert k.python[0] == "out.split(m, mo, mi, 8, hl.TailStrategy.GuardWithIf)"


@pytest.mark.parametrize("directive, message", [
    (D("parallel", "nope", var="y"), "no Func named 'nope'; schedulable Funcs: \\['acc', 'out'\\]"),
    (D("parallel", "out", var="q"), "no loop variable 'q' in 'out' stage 0; its loops"),
    (D("split", "acc", 3, var="n", outer="a", inner="b", factor=2), "has stages 0..1"),
    (D("compute_at", "acc", at="out", var="zz"), "'out' has no loop 'zz'"),
    (D("compute_inline", "acc"), "update definitions cannot be inlined"),
    (D("compute_at", "out", at="acc", var="n"), "is an output"),
    (D("rfactor", "acc", 1, pairs=[["n", "u"]], intm="acc_i"), "not an RVar"),
    (D("split", "out", var="n", outer="m", inner="ni", factor=4), "already exists"),
])
def test_invalid_directives_name_the_op_index_and_valid_names(directive, message):
    s = Schedule("toy_matmul", (D("parallel", "out", var="m"), directive))
    with pytest.raises(ScheduleError, match=message) as info:
        run_with(toy_matmul, s, rand((4, 3)), rand((3, 5)))
    assert "op 'toy_matmul', directive #1" in str(info.value)


def test_halide_refusals_are_wrapped_with_the_directive():
    # Vectorizing the reduction variable of an update is a race Halide refuses.
    s = Schedule("toy_matmul", (D("vectorize", "acc", 1, var="k$x", factor=4),))
    with pytest.raises((ScheduleError, CompileError), match="toy_matmul"):
        run_with(toy_matmul, s, rand((8, 8)), rand((8, 8)))


def test_unroll_product_is_bounded_before_compiling():
    s = Schedule("toy_matmul", (
        D("split", "out", var="n", outer="no", inner="ni", factor=64),
        D("split", "out", var="m", outer="mo", inner="mi", factor=64),
        D("unroll", "out", var="ni"), D("unroll", "out", var="mi"),
    ))
    with pytest.raises(ScheduleError, match="exceeds"):
        run_with(toy_matmul, s, rand((8, 8)), rand((8, 8)))


def test_a_stale_schedule_is_reported_and_not_applied():
    s = Schedule("toy_matmul", (D("parallel", "out", var="m"),), fingerprint="deadbeefdeadbeef")
    with pytest.raises(StaleScheduleError, match="fingerprint deadbeefdeadbeef"):
        run_with(toy_matmul, s, rand((4, 3)), rand((3, 5)))


def test_fingerprint_is_stable_across_builds_and_changes_with_the_math():
    f1 = fingerprint(build(toy_matmul, ("float32", "float32"), {}))
    f2 = fingerprint(build(toy_matmul, ("float32", "float32"), {}))
    f3 = fingerprint(build(toy_matmul, ("float64", "float64"), {}))
    f4 = fingerprint(build(toy_rownorm, ("float32",), {}))
    assert f1 == f2
    assert len({f1, f3, f4}) == 3


def test_rfactor_names_the_intermediate_so_it_can_be_scheduled():
    x = rand((5, 1000))
    s = Schedule("toy_rownorm", (
        D("compute_root", "rowsum"),
        D("split", "rowsum", 1, var="j$x", outer="jo", inner="ji", factor=8, tail="guard_with_if"),
        D("rfactor", "rowsum", 1, pairs=[["ji", "u"]], intm="partial"),
        D("compute_at", "partial", at="rowsum", var="r"),
        D("vectorize", "partial", 1, var="u"),
        D("vectorize", "out", var="c", factor=8),
    ))
    got, k = run_with(toy_rownorm, s, x)
    assert_close(got, toy_rownorm.reference(x))
    assert any(line.startswith("partial = rowsum.update(0).rfactor") for line in k.python)


# -- property test: random legal schedules keep results equal to NumPy and round-trip -------------
factors = st.sampled_from([1, 2, 3, 4, 8, 16])


@st.composite
def matmul_schedules(draw):
    out = []
    vec = draw(st.sampled_from([None, 4, 8]))
    # Output splits must guard their tails to be legal for every shape drawn below.
    fm = draw(factors)
    out.append(D("split", "out", var="m", outer="mo", inner="mi", factor=fm, tail="guard_with_if"))
    if draw(st.booleans()):
        out.append(D("parallel", "out", var="mo"))
    if vec:
        out.append(D("vectorize", "out", var="n", factor=vec, tail="guard_with_if"))
    where = draw(st.sampled_from(["inline_root", "at_mo", "at_mi"]))
    if where == "at_mo":
        out.append(D("compute_at", "acc", at="out", var="mo"))
    elif where == "at_mi":
        out.append(D("compute_at", "acc", at="out", var="mi"))
    else:
        out.append(D("compute_root", "acc"))
    if draw(st.booleans()):
        f = draw(st.sampled_from([2, 4, 8]))
        out.append(D("split", "acc", 1, var="n", outer="no", inner="ni", factor=f, tail="guard_with_if"))
        out.append(D("reorder", "acc", 1, vars=["ni", "k$x", "no", "m"]))
        if draw(st.booleans()):
            out.append(D("vectorize", "acc", 1, var="ni"))
        else:
            out.append(D("unroll", "acc", 1, var="ni"))
    if draw(st.booleans()):
        out.append(D("unroll", "acc", 1, var="k$x", factor=draw(st.sampled_from([2, 4]))))
    return Schedule("toy_matmul", tuple(out))


@settings(max_examples=25, deadline=None)
@given(matmul_schedules(), st.integers(1, 20), st.integers(1, 20), st.integers(1, 20))
def test_random_legal_schedules_match_numpy_and_round_trip(s, m, k, n):
    again = Schedule.loads(s.dumps())
    assert again == s
    a, b = rand((m, k), seed=m), rand((k, n), seed=n)
    got, _ = run_with(toy_matmul, again, a, b)
    assert_close(got, a @ b)


def test_compile_built_uses_the_given_target():
    built = build(toy_matmul, ("float32", "float32"), {})
    k = compile_built(built, Schedule("toy_matmul"), targets.host(), source="given")
    assert k.target == str(targets.host())
    assert np.array_equal(run_kernel(k, toy_matmul, [np.eye(3, dtype=np.float32)] * 2,
                                     {"M": 3, "K": 3, "N": 3})[0], np.eye(3, dtype=np.float32))


@pytest.mark.parametrize("kind", ["parallel", "vectorize", "unroll"])
def test_a_factor_directive_never_takes_a_name_the_schedule_uses(kind):
    # Halide names the hidden inner loop of vectorize/unroll/parallel(v, factor) from a
    # process-wide counter (v123); autoscheduler schedules carry such names as well. The next few
    # counter values are given to the schedule's own variables: none may collide.
    import halide as hl

    n = int(hl.Var().name()[1:])
    a, b = rand((37, 19)), rand((19, 45), seed=1)
    s = Schedule("toy_matmul", (
        D("split", "out", var="m", outer=f"v{n + 1}", inner=f"v{n + 2}", factor=8, tail="guard_with_if"),
        D("split", "out", var="n", outer=f"v{n + 3}", inner=f"v{n + 4}", factor=16, tail="guard_with_if"),
        D(kind, "out", var=f"v{n + 3}" if kind == "parallel" else f"v{n + 4}", factor=2),
        D("parallel", "out", var=f"v{n + 1}", factor=2) if kind != "parallel" else D("serial", "out", var=f"v{n + 2}"),
    ))
    got, _ = run_with(toy_matmul, s, a, b)
    assert_close(got, a @ b)
