"""What a program's pipelines write and copy: a value wanted both as it is and reshaped is one
output (the reshape a NumPy view of it), and an operand read through a transpose is made dense
in square blocks. Results are checked against NumPy in float64."""

import numpy as np
import pytest

import pypto
from helpers import program_segments

P = pypto.ops
RNG = np.random.default_rng(7)


def _f32(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def test_a_value_wanted_flat_and_reshaped_is_written_once():
    x = _f32(6, 8)

    def f(x):
        s = P.sigmoid(x).reshape(48)
        return s, s.reshape(6, 8) * 1.0 + 0.0, s.reshape(3, 16)

    g = pypto.jit(f)
    got = g(x)
    want = 1.0 / (1.0 + np.exp(-x.astype(np.float64)))
    np.testing.assert_allclose(got[0], want.reshape(48), rtol=1e-5)
    np.testing.assert_allclose(got[1], want, rtol=1e-5)
    np.testing.assert_allclose(got[2], want.reshape(3, 16), rtol=1e-5)
    (seg,) = program_segments(g)
    # Written once, in the shape of most dims; the flat value is a NumPy reshape of it.
    shapes = sorted(tuple(s) for s in seg.out_shapes)
    assert shapes == [(3, 16), (6, 8)], shapes
    assert np.shares_memory(got[0], got[2])
    # A replay (no trace) gives the same arrays.
    again = g(x)
    for a, b in zip(got, again):
        np.testing.assert_array_equal(a, b)


def test_a_product_wanted_only_reshaped_is_written_as_the_product():
    # The LSTM's input projection: [T * B, 4H] computed once, read by later pipelines as
    # [T, B, 4H]. The pipeline writes the product's own output (no copy into a reshaped one);
    # the reshape is a NumPy view of it, and the steps read it through that view.
    xs, w = _f32(6, 4, 8), _f32(12, 8)

    def f(xs, w):
        g = P.linear(xs.reshape(24, 8), w, np.zeros(12, np.float32)).reshape(6, 4, 12)
        return g, g[2] * 2.0

    g = pypto.jit(f)
    got = g(xs, w)
    want = xs.astype(np.float64).reshape(24, 8) @ w.astype(np.float64).T
    np.testing.assert_allclose(got[0], want.reshape(6, 4, 12), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[1], 2 * want.reshape(6, 4, 12)[2], rtol=1e-5, atol=1e-6)
    segs = program_segments(g)
    assert any((24, 12) in [tuple(s) for s in seg.out_shapes] for seg in segs)
    assert not any((6, 4, 12) in [tuple(s) for s in seg.out_shapes] for seg in segs)
    assert got[0].base is not None          # a view of the product's array
    again = g(xs, w)
    for a, b in zip(got, again):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("rows", [24, 192])
def test_a_product_both_output_and_read_is_computed_into_the_output(rows):
    # The LSTM's first pipeline: the input projection is an output of the pipeline and the
    # steps in it read it too. The product's loop nest moves onto the output and the readers
    # read the output: no pipeline buffer of the product's size that the output copies.
    xs, w = _f32(rows // 4, 4, 40), _f32(48, 40)

    def f(xs, w):
        g = P.linear(xs.reshape(rows, 40), w, np.zeros(48, np.float32)).reshape(rows // 4, 4, 48)
        return g, P.tanh(g[2]) * 2.0 + g[1]

    g = pypto.jit(f)
    got = g(xs, w)
    want = (xs.astype(np.float64).reshape(rows, 40) @ w.astype(np.float64).T).reshape(-1, 4, 48)
    np.testing.assert_allclose(got[0], want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got[1], np.tanh(want[2]) * 2 + want[1], rtol=1e-5, atol=1e-5)
    (seg,) = program_segments(g)
    (k, out_func, _), = seg.op.plan.early.values()
    out = out_func.name().split("$")[0]
    ds = seg.kernel.schedule.directives
    named = {d.func for d in ds}
    assert not any(n.endswith("_out") for n in named), sorted(named)   # the product inlined
    assert any(d.op == "compute_at" and d.func.endswith("_acc") and d.get("at") == out
               for d in ds), [str(d) for d in ds]
    again = g(xs, w)
    for a, b in zip(got, again):
        np.testing.assert_array_equal(a, b)


def test_values_the_backward_reads_are_not_written_twice():
    # lstm-style gate slices: each activated slice is wanted by the backward as computed and
    # as reshaped; the forward's pipeline writes it once.
    x, w = _f32(4, 8), _f32(32, 8)

    def loss(x, w):
        gates = P.matmul(x, w.T)
        i = P.sigmoid(gates[:, :8])
        g = P.tanh(gates[:, 8:16])
        return (i * g).sum()

    val, (dx, dw) = pypto.value_and_grad(loss, argnums=(0, 1))(x, w)
    xd, wd = x.astype(np.float64), w.astype(np.float64)
    gates = xd @ wd.T
    i, g = 1 / (1 + np.exp(-gates[:, :8])), np.tanh(gates[:, 8:16])
    dgates = np.zeros_like(gates)
    dgates[:, :8] = g * i * (1 - i)
    dgates[:, 8:16] = i * (1 - g * g)
    np.testing.assert_allclose(val, (i * g).sum(), rtol=1e-4)
    np.testing.assert_allclose(dx, dgates @ wd, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(dw, dgates.T @ xd, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("m,k,n", [(256, 192, 64), (37, 300, 9), (5, 7, 3)])
def test_an_operand_read_through_a_transpose_is_copied_in_blocks(m, k, n):
    # a^T @ b: matmul packs its b, not its a, so a transposed a is made dense first; wide
    # enough, in square blocks (the transpose op's order), else element by element.
    a, b = _f32(k, m), _f32(k, n)
    f = pypto.jit(lambda a, b: P.matmul(a.T, b) * 2.0)
    got = f(a, b)
    np.testing.assert_allclose(got, 2.0 * (a.astype(np.float64).T @ b.astype(np.float64)),
                               rtol=1e-4, atol=1e-4)
    (seg,) = program_segments(f)
    ds = seg.kernel.schedule.directives
    views = {d.func for d in ds if d.op == "compute_root" and d.func.endswith("_view")}
    blocked = {d.func for d in ds if d.op == "split" and d.get("inner") == "ri"}
    if min(m, k) >= 16:
        assert views and views <= blocked, (views, blocked)
    elif min(m, k) < 8:
        assert not (views & blocked), (views, blocked)


@pytest.mark.parametrize("src,dst", [((4, 8, 16), (32, 16)), ((32, 16), (4, 8, 16)),
                                     ((4, 8, 16), (4, 128)), ((6, 4, 10), (6, 2, 20)),
                                     ((3, 5, 7), (105,)), ((2, 3, 4, 5), (2, 12, 5))])
def test_reads_through_a_reshape_of_a_computed_value(src, dst):
    # The reshape maps the axes both shapes share at either end one to one and splits only
    # the axes between: every layout against NumPy, read by a product and by a reduction.
    x = _f32(*src)
    k = dst[-1]
    w = _f32(k, 3)
    f = pypto.jit(lambda x, w: (P.matmul(P.exp(x).reshape(*dst), w), P.sum(P.exp(x).reshape(*dst),
                                                                            axis=-1)))
    got_p, got_s = f(x, w)
    e = np.exp(x.astype(np.float64)).reshape(dst)
    np.testing.assert_allclose(got_p, e @ w.astype(np.float64), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(got_s, e.sum(-1), rtol=1e-5)


def test_a_reshape_read_in_a_pipeline_made_for_several_shapes():
    # Extents that only agree at one shape are not taken as the same axis: the pipeline made
    # shape-generic after a few shapes reads [b, n, 16] as [b * n, 16] right at each of them.
    f = pypto.jit(lambda x, w: P.matmul(P.tanh(x).reshape(-1, 16), w))
    w = _f32(16, 4)
    for b, n in ((2, 16), (3, 5), (16, 2), (4, 16), (1, 1)):
        x = _f32(b, n, 16)
        want = np.tanh(x.astype(np.float64)).reshape(-1, 16) @ w.astype(np.float64)
        np.testing.assert_allclose(f(x, w), want, rtol=1e-4, atol=1e-4, err_msg=f"{b}x{n}")


def test_a_value_written_out_and_read_by_another_output_is_computed_once():
    # The sigmoid is an output and the product reads it: it is computed at root once, not
    # inlined into both (a value read by a single output stays inlined).
    x = _f32(64, 48)

    def f(x):
        s = P.sigmoid(x)
        return s, P.tanh(s) * s, P.exp(x) + 1.0

    g = pypto.jit(f)
    got = g(x)
    xd = x.astype(np.float64)
    s = 1 / (1 + np.exp(-xd))
    for a, b in zip(got, (s, np.tanh(s) * s, np.exp(xd) + 1)):
        np.testing.assert_allclose(a, b, rtol=1e-5)
    (seg,) = program_segments(g)
    low = seg.op.plan
    roots = {d.func for d in seg.kernel.schedule.directives if d.op == "compute_root"}
    kept = {name for name in low.materialize if low.funcs[name].kind == "pointwise"}
    assert len(kept) == 1 and kept <= roots, (kept, roots)
