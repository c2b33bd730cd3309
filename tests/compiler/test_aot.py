"""Ahead-of-time builds: C, ctypes and Python-extension callers match NumPy; cross builds; errors."""

import ctypes
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
from click.testing import CliRunner

import pypto
from helpers import assert_close, opencl_device
from pypto.cli.main import cli
from pypto.compiler.aot import build_op

R, C = 5, 13
HAS_CC = shutil.which("cc") is not None and shutil.which("c++") is not None

C_MAIN = r"""
#include <stdio.h>
#include <string.h>
#include "HalideBuffer_free.h"
#include "pypto_softmax.h"

int main(void) {
    static float in[%(R)d][%(C)d], out[%(R)d][%(C)d];
    for (int r = 0; r < %(R)d; r++)
        for (int c = 0; c < %(C)d; c++) in[r][c] = (float)((r * 7 + c * 3) %% 11) / 5.0f;
    halide_dimension_t d[2] = {{0, %(C)d, 1, 0}, {0, %(R)d, %(C)d, 0}};
    halide_buffer_t bi, bo;
    memset(&bi, 0, sizeof bi); memset(&bo, 0, sizeof bo);
    bi.host = (uint8_t *)in; bi.type.code = halide_type_float; bi.type.bits = 32; bi.type.lanes = 1;
    bi.dimensions = 2; bi.dim = d;
    bi.flags = 1;  /* host_dirty: the data lives on the host */
    bo = bi; bo.host = (uint8_t *)out; bo.flags = 0;
    int err = pypto_softmax(&bi, &bo);
    if (!err) err = halide_copy_to_host(NULL, &bo);  /* a GPU build leaves results on the device */
    if (err) { printf("error %%d\n", err); return 1; }
    for (int r = 0; r < %(R)d; r++)
        for (int c = 0; c < %(C)d; c++) printf("%%.9g\n", out[r][c]);
    return 0;
}
"""


def _input(rows=R, cols=C):
    r, c = np.meshgrid(np.arange(rows), np.arange(cols), indexing="ij")
    return (((r * 7 + c * 3) % 11) / 5.0).astype(np.float32)


def _softmax_ref(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _run_c(lib_dir, archive, rows=R, cols=C):
    src = lib_dir / "main.c"
    src.write_text(C_MAIN % {"R": rows, "C": cols})
    (lib_dir / "HalideBuffer_free.h").write_text('#include "HalideRuntime.h"\n')
    inc = os.path.join(os.path.dirname(__import_halide().__file__), "include")
    exe = lib_dir / "main"
    subprocess.run(["cc", "-O1", f"-I{inc}", f"-I{lib_dir}", str(src), str(archive), "-o", str(exe),
                    "-lpthread", "-ldl", "-lm"], check=True, capture_output=True)
    out = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout
    return np.array([float(v) for v in out.split()], np.float32).reshape(rows, cols)


def __import_halide():
    import halide

    return halide


@pytest.mark.skipif(not HAS_CC, reason="needs a C compiler")
def test_static_library_and_header_from_c(tmp_path):
    res = build_op(pypto.get_op("softmax"), target="host", out_dir=tmp_path, dims={"R": R, "C": C})
    m = res.manifest
    assert [a["name"] for a in m["arguments"]] == ["x", "out"]
    assert m["arguments"][0]["dims"] == ["R", "C"] and m["arguments"][0]["halide_dims"] == ["C", "R"]
    assert m["schedule"]["source"] == "default" and m["schedule"]["hash"]
    assert set(m["files"]) == {"pypto_softmax.a", "pypto_softmax.h"}
    assert_close(_run_c(tmp_path, tmp_path / "pypto_softmax.a"), _softmax_ref(_input()))


def _buf(a, keep=[]):  # noqa: B006  (keeps the dim arrays alive for the call)
    from pypto.compiler.diskcache import _buffer

    return _buffer(a, keep)


@pytest.mark.skipif(not HAS_CC, reason="needs a C compiler")
def test_shared_object_through_ctypes(tmp_path):
    build_op(pypto.get_op("softmax"), target="host", out_dir=tmp_path, dims={"R": R, "C": C},
             formats=["shared"])
    lib = ctypes.CDLL(str(tmp_path / "libpypto_softmax.so"))
    x = _input()
    out = np.zeros_like(x)
    bi, bo = _buf(x), _buf(out)
    assert lib.pypto_softmax(ctypes.byref(bi), ctypes.byref(bo)) == 0
    assert_close(out, _softmax_ref(x))


@pytest.mark.skipif(not HAS_CC, reason="needs a C++ compiler")
def test_python_extension_in_a_fresh_interpreter(tmp_path):
    build_op(pypto.get_op("softmax"), target="host", out_dir=tmp_path, dims={"R": R, "C": C},
             formats=["python"])
    code = (f"import sys, numpy as np; sys.path.insert(0, {str(tmp_path)!r}); import pypto_softmax as m;"
            f"x = np.load({str(tmp_path / 'x.npy')!r}); out = np.zeros_like(x);"
            "m.pypto_softmax(x, out); np.save(sys.argv[1], out)")
    np.save(tmp_path / "x.npy", _input())
    subprocess.run([sys.executable, "-c", code, str(tmp_path / "out.npy")], check=True,
                   capture_output=True, cwd=tmp_path)
    assert_close(np.load(tmp_path / "out.npy"), _softmax_ref(_input()))


@pytest.mark.skipif(not HAS_CC, reason="needs a C compiler")
def test_multi_target_library_runs_here(tmp_path):
    res = build_op(pypto.get_op("softmax"), target="x86-64-avx2,x86-64-linux-sse41", out_dir=tmp_path,
                   dims={"R": R, "C": C})
    assert "," in res.manifest["target"]
    assert_close(_run_c(tmp_path, tmp_path / "pypto_softmax.a"), _softmax_ref(_input()))


@pytest.mark.skipif(not HAS_CC, reason="needs a C compiler")
def test_a_second_multi_target_build_in_one_process_keeps_its_function_name(tmp_path):
    # Halide keeps Func names unique in a process: the second build's wrapper Func would be
    # pypto_softmax$1, and its C function pypto_softmax_1, unlike its header and manifest.
    for i in range(2):
        out = tmp_path / f"build{i}"
        res = build_op(pypto.get_op("softmax"), target="x86-64-avx2,x86-64-linux-sse41", out_dir=out,
                       dims={"R": R, "C": C})
        assert res.manifest["function"] == "pypto_softmax"
        assert "pypto_softmax_1" not in (out / "pypto_softmax.h").read_text()
        assert_close(_run_c(out, out / "pypto_softmax.a"), _softmax_ref(_input()))


@pytest.mark.parametrize("target, feature", [("arm-64-linux", "arm-64-linux"), ("cuda", "cuda"),
                                             ("opencl", "opencl")])
def test_cross_builds_compile_here_with_right_manifests(tmp_path, target, feature):
    res = build_op(pypto.get_op("matmul"), target=target, out_dir=tmp_path,
                   dims={"M": 64, "K": 32, "N": 48}, formats=["static"])
    m = json.loads((tmp_path / "pypto_matmul.manifest.json").read_text())
    assert m == res.manifest
    assert feature in m["target"] and "jit" not in m["target"]
    assert m["shape"] == {"M": 64, "K": 32, "N": 48}
    assert [a["dtype"] for a in m["arguments"]] == ["float32"] * 3
    assert (tmp_path / "pypto_matmul.a").stat().st_size > 0


def run(*args):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


@pytest.mark.parametrize("args, message", [
    (["--op", "softmax", "--target", "nope"], "unknown target 'nope'"),
    (["--op", "nosuchop"], "no op named 'nosuchop'"),
    (["--op", "matmul", "--shape", "M=4"], "missing K, N"),
])
def test_bad_builds_fail_clearly_and_leave_nothing(tmp_path, args, message):
    out = tmp_path / "out"
    r = run("build", *args, "-o", str(out))
    assert r.exit_code == 2 and message in r.output
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_output_that_is_a_file_is_refused(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    r = run("build", "--op", "softmax", "-o", str(f))
    assert r.exit_code == 2 and "is not a folder" in r.output
    assert f.read_text() == "x"


def test_a_stale_schedule_file_is_refused(tmp_path):
    s = {"format": 1, "op": "softmax", "fingerprint": "0123456789abcdef", "directives": []}
    (tmp_path / "s.json").write_text(json.dumps(s))
    r = run("build", "--op", "softmax", "--schedule", str(tmp_path / "s.json"), "-o", str(tmp_path / "o"))
    assert r.exit_code == 2 and "made for fingerprint 0123456789abcdef" in r.output
    assert not (tmp_path / "o").exists()


def test_require_tuned_without_an_entry_is_an_error(tmp_path, monkeypatch):
    monkeypatch.setenv("PYPTO_NO_SHIPPED_SCHEDULES", "1")
    r = run("build", "--op", "softmax", "--shape", "R=3,C=7", "--require-tuned", "-o", str(tmp_path / "o"))
    assert r.exit_code == 2 and "--require-tuned" in r.output




@pytest.mark.opencl
@pytest.mark.skipif(not HAS_CC or not opencl_device(), reason="needs a C compiler and an OpenCL device (PoCL)")
def test_opencl_build_runs_on_pocl(tmp_path):
    res = build_op(pypto.get_op("softmax"), target="opencl", out_dir=tmp_path, dims={"R": R, "C": C})
    assert "opencl" in res.manifest["target"]
    assert_close(_run_c(tmp_path, tmp_path / "pypto_softmax.a"), _softmax_ref(_input()))


@pytest.mark.skipif(not HAS_CC, reason="needs a C compiler")
def test_all_shapes_library_dispatches_to_the_nearest_tuned_schedule(tmp_path):
    from pypto.compiler import targets
    from pypto.compiler.aot import build_all_shapes
    from pypto.compiler.lower import build, fingerprint
    from pypto.database import DirectoryDatabase, Entry, Key, add_path, remove_path
    from pypto.schedule.defaults import default_schedule

    op = pypto.get_op("softmax")
    fp = fingerprint(build(op, ("float32",), {}))
    db = DirectoryDatabase(tmp_path / "db")
    fam = targets.family(targets.host())
    for dims in ({"R": 4, "C": 16}, {"R": 4096, "C": 1024}):
        s = default_schedule(build(op, ("float32",), {}), dims, targets.host()).with_fingerprint(fp)
        db.commit([Entry(key=Key.make("softmax", ("float32",), dims, {}, fam, fp), schedule=s, time_ms=1.0)])
    add_path(db.root)
    try:
        res = build_all_shapes(op, target="host", out_dir=tmp_path / "lib")
    finally:
        remove_path(db.root)
    shapes = [v["shape"] for v in res.manifest["variants"]]
    assert {"R": 4, "C": 16} in shapes and {"R": 4096, "C": 1024} in shapes and shapes[-1] is None
    assert res.manifest["shape"] == "any"
    lib = tmp_path / "lib"
    # the header includes HalideRuntime.h: it is in the folder, which compiles on its own
    assert "HalideRuntime.h" in (lib / "pypto_softmax.h").read_text()
    assert (lib / "HalideRuntime.h").is_file()
    assert_close(_run_c(lib, lib / "pypto_softmax.a"), _softmax_ref(_input()))
    # Shapes that no variant's vectors fit (3 columns), that only the small one fits, and odd
    # large ones: the dispatcher runs the nearest variant whose factors fit (with 16-lane
    # vectors the R=4, C=16 entry cannot run at 13 columns; Halide's error handler aborts).
    for rows, cols in ((1, 3), (2, 17), (5, 13), (9, 1000)):
        assert_close(_run_c(lib, lib / "pypto_softmax.a", rows, cols),
                     _softmax_ref(_input(rows, cols)), err_msg=f"{rows}x{cols}")
