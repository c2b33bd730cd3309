"""``pypto build -o DIR`` where DIR cannot be made (a file in its path, a folder that cannot be
created) is one error naming the folder and saying what to do, before anything is compiled (a
raw FileExistsError/FileNotFoundError traceback after the compile before)."""

import pytest
from click.testing import CliRunner

from pypto.cli.main import cli
from pypto.compiler import aot
from pypto.errors import PyptoError
from pypto.ops import get_op


@pytest.fixture
def no_compile(monkeypatch):
    """Fails the test if the build gets as far as compiling."""
    def boom(*a, **k):
        raise AssertionError("compiled before checking the output folder")
    monkeypatch.setattr(aot, "build", boom)


@pytest.mark.parametrize("all_shapes", [False, True])
def test_an_output_below_a_file_is_refused_before_compiling(tmp_path, no_compile, all_shapes):
    blocker = tmp_path / "afile"
    blocker.write_text("keep me")
    out = blocker / "sub" / "lib"
    call = aot.build_all_shapes if all_shapes else aot.build_op
    kw = {} if all_shapes else {"dims": None}
    with pytest.raises(PyptoError, match=f"{blocker} is a file, not a folder; choose another -o"):
        call(get_op("softmax"), target="host", out_dir=out, **kw)
    assert blocker.read_text() == "keep me"


def test_the_cli_says_it_in_one_line(tmp_path):
    blocker = tmp_path / "afile"
    blocker.write_text("")
    r = CliRunner().invoke(cli, ["build", "--op", "softmax", "-o", str(blocker / "x")])
    assert r.exit_code == 2
    assert "Traceback" not in r.output and "is a file, not a folder" in r.output


def test_an_output_under_an_uncreatable_folder_is_refused(tmp_path, no_compile):
    with pytest.raises(PyptoError, match="cannot create the output folder /proc/"):
        aot.build_op(get_op("softmax"), target="host", out_dir="/proc/no_such_dir/x", dims=None)
