"""Every op's algorithm fingerprint (and the digest of its reduction domains, which the compile
cache keys kernels by too) is the same in every build and in a fresh process."""

import inspect
import json
import subprocess
import sys

import pypto
from pypto.compiler.lower import build, fingerprint, rdom_digest

CODE = """
import json, inspect, pypto
from pypto.compiler.lower import build, fingerprint, rdom_digest
out = {}
for op in pypto.ops.builtin_ops():
    if any(p.default is inspect.Parameter.empty for p in op.params):
        continue
    b = build(op, op.dtypes[0], op.resolve_params({}))
    out[op.name] = fingerprint(b) + "/" + rdom_digest(b)
print(json.dumps(out))
"""


def _all():
    out = {}
    for op in pypto.ops.builtin_ops():
        if op.category == "test" or any(p.default is inspect.Parameter.empty for p in op.params):
            continue
        params = op.resolve_params({})
        b = build(op, op.dtypes[0], params)
        out[op.name] = fingerprint(b) + "/" + rdom_digest(b)
        b2 = build(op, op.dtypes[0], params)
        assert out[op.name] == fingerprint(b2) + "/" + rdom_digest(b2), op.name
    return out


def test_fingerprints_are_stable_across_builds_and_processes():
    here = _all()
    assert len(here) >= 45
    there = json.loads(subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True,
                                      check=True).stdout)
    for name, fp in here.items():
        assert there[name] == fp, name
