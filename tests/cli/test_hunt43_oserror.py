"""An OSError a command did not foresee (disk full, a file removed under it) is one line naming
what the system refused and where, exit 2, not a traceback; --debug still shows the traceback."""

import errno

from click.testing import CliRunner

from pypto.cli.main import cli
from pypto.compiler import diskcache


def _full(*a, **k):
    raise OSError(errno.ENOSPC, "No space left on device", "/some/cache/ab")


def test_an_oserror_is_one_line(monkeypatch):
    monkeypatch.setattr(diskcache, "clear", _full)
    r = CliRunner().invoke(cli, ["cache", "clear"])
    assert r.exit_code == 2
    assert r.stderr.strip() == ("error: No space left on device: /some/cache/ab "
                                "(run with --debug for the traceback)")


def test_debug_shows_the_traceback(monkeypatch):
    monkeypatch.setattr(diskcache, "clear", _full)
    r = CliRunner().invoke(cli, ["--debug", "cache", "clear"])
    assert isinstance(r.exception, OSError)
