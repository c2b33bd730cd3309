"""Every family's templates load, whichever template module was imported first; the structural
default's parallel blocks."""

import subprocess
import sys


def test_importing_one_template_module_first_still_loads_every_family():
    code = (
        "import pypto.schedule.templates.scan\n"
        "from pypto.schedule import defaults\n"
        "assert 'cumsum' in defaults._TEMPLATES\n"
        "defaults.template_knobs('cumsum')\n"
        "missing = [n for n in ('baddbmm', 'batch_matmul', 'concat', 'softmax', 'conv2d')\n"
        "           if n not in defaults._TEMPLATES]\n"
        "assert not missing, missing\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]


def test_an_output_whose_outer_dims_are_all_one_runs_in_parallel_blocks():
    from pypto.schedule.defaults import MIN_TASK_ELEMS, output_directives

    long = 4 * MIN_TASK_ELEMS
    for args, dims in ((["x"], {"X": long}), (["x", "y"], {"X": long, "Y": 1}),
                       (["x", "y", "z"], {"X": long, "Y": 1, "Z": 1})):
        ds = output_directives("out", args, dims, 8)
        assert [d.op for d in ds] == ["split", "parallel", "vectorize"], (args, ds)
        assert ds[0].get("factor") == MIN_TASK_ELEMS
    # a real outer dim is the parallel one, as before
    ds = output_directives("out", ["x", "y"], {"X": long, "Y": 4}, 8)
    assert ("parallel", "y") in [(d.op, d.get("var")) for d in ds]
