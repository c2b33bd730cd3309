import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
# The op tests JIT-compile in memory (fast); tests/compiler/test_diskcache.py covers the on-disk
# cache, which every test that needs it turns on for itself.
os.environ.setdefault("PYPTO_CACHE_DIR", "off")
