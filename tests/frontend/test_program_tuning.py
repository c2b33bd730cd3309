"""Programs tune and build as one unit: pypto.tune, composite ops on the command line, targets."""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import pypto
from helpers import opencl_device

pytestmark = pytest.mark.slow

MY_OPS = textwrap.dedent('''
    import pypto

    @pypto.register_op(inputs={"x": "R C"}, example={"R": 32, "C": 64})
    def my_quantize(x, bits=8):
        scale = (2**bits - 1) / (x.max() - x.min())
        return (x - x.min()) * scale
''')


@pytest.fixture
def user_db(tmp_path, monkeypatch):
    db = tmp_path / "user_db"
    monkeypatch.setenv("PYPTO_USER_SCHEDULES", str(db))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return db


def test_pypto_tune_stores_a_program_and_the_next_call_uses_it(user_db, tmp_path):
    @pypto.jit
    def chain(x):
        return pypto.ops.tanh(0.5 * x + 0.1) * pypto.ops.sigmoid(x) + 1

    x = np.random.default_rng(0).random((64, 128), np.float32)
    # Without the default among the baselines there is no default timing the winner must
    # clear by more than the noise, so the winner is stored whatever the machine's load.
    res = pypto.tune(chain, x, trials=2, storage=f"sqlite:///{tmp_path / 't.db'}",
                     baselines=("unfused",), say=lambda s: None)
    assert "unfused" in res.table                   # the program run op by op is a baseline
    assert res.written, res.message
    files = list(user_db.rglob("g_*.json"))
    assert len(files) == 1
    np.testing.assert_allclose(chain(x), np.tanh(0.5 * x + 0.1) / (1 + np.exp(-x)) + 1, rtol=1e-5)
    assert f"schedule database {user_db}" in chain.explain(x)


def test_a_composite_op_tuned_on_the_cli_is_used_in_a_fresh_process(user_db, tmp_path):
    (tmp_path / "my_ops.py").write_text(MY_OPS)
    env = dict(os.environ)
    tune = subprocess.run(
        [sys.executable, "-m", "pypto.cli.main", "tune", "my_ops.py:my_quantize", "--shape",
         "R=32,C=64", "--trials", "2", "--baselines", "none", "--no-progress", "--storage",
         f"sqlite:///{tmp_path / 't.db'}"], cwd=tmp_path, env=env, capture_output=True,
        text=True, timeout=600)
    assert tune.returncode == 0, tune.stdout + tune.stderr
    stored = json.loads(next(user_db.rglob("my_quantize.json")).read_text())
    assert stored and "my_quantize" in json.dumps(stored)
    code = textwrap.dedent('''
        import numpy as np, sys
        sys.path.insert(0, ".")
        from my_ops import my_quantize
        x = np.random.default_rng(1).random((32, 64), np.float32)
        y = my_quantize(x)
        assert np.allclose(y, (x - x.min()) * np.float32(255 / (x.max() - x.min())), rtol=1e-5)
        print(my_quantize.jitted().explain(x))
    ''')
    call = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600)
    assert call.returncode == 0, call.stderr
    assert f"schedule database {user_db}" in call.stdout and "(exact)" in call.stdout


def test_a_tuned_gradient_function_is_found_by_its_next_call(user_db, tmp_path):
    o = pypto.ops

    def loss(w, x):
        return (o.tanh(x @ w) ** 2).mean()

    rng = np.random.default_rng(2)
    w, x = rng.random((16, 8), np.float32), rng.random((32, 16), np.float32)
    g = pypto.grad(loss)
    res = pypto.tune(g, w, x, trials=2, storage=f"sqlite:///{tmp_path / 'g.db'}",
                     baselines=("unfused",), say=lambda s: None)
    assert res.written, res.message
    t = np.tanh(x.astype(np.float64) @ w)
    want = x.T @ (2 * t * (1 - t * t)) / t.size
    np.testing.assert_allclose(g(w, x), want, rtol=1e-4, atol=1e-6)
    from pypto.frontend import jit as J   # noqa: F401  (the module, for its kernel table)
    import importlib
    kernels = importlib.import_module("pypto.frontend.jit")._kernels.values()
    assert any(k.source.startswith(f"database {user_db}") for _, k in kernels)


def test_tune_grad_on_the_cli_tunes_the_backward_the_torch_bridge_runs(user_db, tmp_path):
    tune = subprocess.run(
        [sys.executable, "-m", "pypto.cli.main", "tune", "softmax", "--shape", "R=16,C=32",
         "--grad", "--trials", "2", "--baselines", "none", "--no-progress", "--storage",
         f"sqlite:///{tmp_path / 't.db'}"], cwd=tmp_path, env=dict(os.environ),
        capture_output=True, text=True, timeout=600)
    assert tune.returncode == 0, tune.stdout + tune.stderr
    assert "softmax backward at R=16,C=32: program g_" in tune.stdout
    name = tune.stdout.split("program ")[1].split()[0]
    assert list(user_db.rglob(f"{name}.json"))
    from pypto.autodiff.api import backward_program, vjp_arrays
    import importlib
    J = importlib.import_module("pypto.frontend.jit")
    op = pypto.get_op("softmax")
    assert backward_program(op, {"R": 16, "C": 32}, ("float32",)).name == name
    x = np.random.default_rng(3).random((16, 32), np.float32)
    ct = np.random.default_rng(4).random((16, 32), np.float32)
    (gx,) = vjp_arrays(op, [x], [ct], [0])
    s = np.exp(x - x.max(1, keepdims=True))
    s /= s.sum(1, keepdims=True)
    np.testing.assert_allclose(gx, s * (ct - (ct * s).sum(1, keepdims=True)), rtol=1e-4,
                               atol=1e-6)
    assert any(op_.name == name and k.source.startswith(f"database {user_db}")
               for op_, k in J._kernels.values())


def test_backward_program_takes_public_or_canonical_params_and_gives_the_bridges_graph():
    """``pypto tune conv2d --grad --param padding=1`` (public keyword) and ``pad_h=1,pad_w=1``
    (the canonical parameters ``pypto tune conv2d`` takes) name the graph the bridge runs."""
    from pypto.autodiff.api import _programs, backward_program, vjp_arrays

    op = pypto.get_op("conv2d")
    dims = dict(N=1, C=3, H=6, W=6, O=2, CG=3, KH=3, KW=3)
    public = backward_program(op, dims, ("float32",) * 3, {"padding": 1})
    canonical = backward_program(op, dims, ("float32",) * 3, {"pad_h": 1, "pad_w": 1})
    unpadded = backward_program(op, dims, ("float32",) * 3, {})
    assert public.name == canonical.name != unpadded.name
    rng = np.random.default_rng(0)
    x, w, b = (rng.random(s, np.float32) for s in ((1, 3, 6, 6), (2, 3, 3, 3), (2,)))
    ct = rng.random((1, 2, 6, 6), np.float32)
    fn = lambda x, w, b: pypto.ops.conv2d(x, w, b, padding=1)   # noqa: E731
    vjp_arrays(fn, [x, w, b], [ct], [0, 1, 2])
    J = __import__("importlib").import_module("pypto.frontend.jit")
    assert public.name in {op_.name for op_, _ in J._kernels.values()}
    with pytest.raises(pypto.errors.ParamError, match="padding"):
        backward_program(op, dims, ("float32",) * 3, {"padding": 1, "pad_h": 1})
    assert _programs is not None


@pytest.mark.parametrize("target", ["cuda", "opencl"])
def test_a_composite_op_builds_for_gpu_targets(tmp_path, target):
    (tmp_path / "my_ops.py").write_text(MY_OPS)
    out = tmp_path / "out"
    r = subprocess.run(
        [sys.executable, "-m", "pypto.cli.main", "build", "--op", "my_ops.py:my_quantize",
         "--shape", "R=32,C=64", "--target", target, "--format", "static", "-o", str(out)],
        cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert (out / "pypto_my_quantize.a").stat().st_size > 0
    header = (out / "pypto_my_quantize.h").read_text()
    assert "pypto_my_quantize(" in header


def test_a_composite_op_runs_on_opencl_and_picks_its_target_version():
    if not opencl_device():
        pytest.skip("needs an OpenCL device (PoCL)")

    @pypto.register_op
    def scaled(x):
        return x * 2.0

    @pypto.target_specific("opencl", scaled)
    def scaled_gpu(x):
        return (x + x) * 1.5          # a different result, so the choice is visible

    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    with pypto.target("opencl"):
        got = scaled(x)
    np.testing.assert_allclose(got, x * 3.0)
    np.testing.assert_allclose(scaled(x), x * 2.0)
    from pypto.ops import _registry
    _registry._OPS.pop("scaled", None)
