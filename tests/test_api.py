"""The public API: what `import pypto` offers, and what it must not load."""

import subprocess
import sys

import pypto


def test_public_api_is_pinned():
    assert sorted(pypto.__all__) == sorted([
        "ArgumentError", "CompileError", "DatabaseError", "DatabaseWarning", "Directive", "DtypeError", "ExecutionError", "FusionError",
        "GraphBreakError", "InputError", "NotDifferentiableError", "Op", "OpDefinitionError",
        "Param", "ParamError", "PerformanceWarning", "PyptoError", "RecompileLimitError", "Schedule", "ScheduleError",
        "ShapeError", "StaleScheduleError", "TargetError", "Tensor", "TraceError",
        "UnknownOpError", "ZeroSizeError", "__version__", "add_schedule_path", "check_graph", "cond", "constant",
        "def_gradient", "explain", "fuse", "get_op", "grad", "jit", "list_ops", "memory_policy",
        "nn", "op", "ops",
        "profile", "register_op", "spec",
        "target", "target_specific", "tune", "value_and_grad", "vjp"])
    for name in pypto.__all__:
        assert hasattr(pypto, name), name


def test_import_pypto_and_call_an_op_without_optuna():
    code = ("import sys, numpy as np, pypto; pypto.list_ops(); "
            "pypto.ops.get_op; assert 'optuna' not in sys.modules, 'optuna loaded'; print('ok')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def test_errors_subclass_the_builtin_classes_users_expect():
    assert issubclass(pypto.DtypeError, TypeError)
    assert issubclass(pypto.ShapeError, ValueError)
    assert issubclass(pypto.ParamError, ValueError)
    assert issubclass(pypto.ArgumentError, TypeError) and issubclass(pypto.ArgumentError,
                                                                      pypto.ParamError)
    for cls in (pypto.DtypeError, pypto.ShapeError, pypto.ScheduleError, pypto.DatabaseError,
                pypto.CompileError, pypto.UnknownOpError):
        assert issubclass(cls, pypto.PyptoError)


def test_unknown_op_suggests_close_names():
    try:
        pypto.get_op("matmull")
    except pypto.UnknownOpError as e:
        assert "did you mean" in str(e) and "matmul" in str(e)
    else:
        raise AssertionError("no error")


def test_user_op_in_a_file_is_resolved(tmp_path):
    from pypto.ops._load import resolve_op

    f = tmp_path / "myop.py"
    f.write_text(
        "import halide as hl, numpy as np, pypto\n"
        "@pypto.op(category='user', inputs={'x': 'N'}, output='N', reference=lambda x: x + 1,"
        " register=False)\n"
        "def plus_one(x):\n"
        "    n = hl.Var('n'); out = hl.Func('out'); out[n] = x[n] + 1; return out\n")
    op = resolve_op(f"{f}:plus_one")
    import numpy as np

    assert np.array_equal(op(np.arange(5, dtype=np.float32)), np.arange(1, 6, dtype=np.float32))


def test_the_layers_are_reachable_from_the_package():
    import pypto

    assert callable(pypto.nn.lstm)
