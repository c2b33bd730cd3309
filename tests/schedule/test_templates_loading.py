"""Every family's templates load, whichever template module was imported first."""

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
