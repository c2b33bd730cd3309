"""Every op at one representative shape against NumPy and torch eager: ``pypto bench --all-ops``.

    python benchmarks/bench_ops.py [OP ...] [--json FILE] [--quick]

Kept as a thin wrapper: the sweep, its shapes (``pypto.bench.sweep.SHAPES``) and its peers live in
the library now, and every figure goes through the bench harness (each candidate checked against
the op's reference before it is timed). The arguments are passed on unchanged.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from pypto.cli.main import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(["bench", "--all-ops", *sys.argv[1:]]))
