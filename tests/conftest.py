import atexit
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
# The op tests JIT-compile in memory (fast); tests/compiler/test_diskcache.py covers the on-disk
# cache, which every test that needs it turns on for itself.
os.environ.setdefault("PYPTO_CACHE_DIR", "off")
# Calls read the user schedule database (~/.local/share/pypto/schedules by default): what a person
# tuned there must not change what the tests see, so the tests get an empty one of their own.
_user_db = tempfile.mkdtemp(prefix="pypto-test-user-schedules-")
os.environ["PYPTO_USER_SCHEDULES"] = _user_db
atexit.register(shutil.rmtree, _user_db, True)
