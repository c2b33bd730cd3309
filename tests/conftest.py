import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
# Compiled kernels of this test session go to a fresh cache, not the user's.
os.environ.setdefault("PYPTO_CACHE_DIR", tempfile.mkdtemp(prefix="pypto-test-cache-"))
