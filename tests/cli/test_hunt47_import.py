"""``pypto db import-autoschedule``: one autoscheduler whose output cannot be used (li2018's
``gpu_blocks`` for cuda) stopped the others with a message naming none of them; now each is
tried, the failure names the autoscheduler, and the exit status says something failed."""

from click.testing import CliRunner

from pypto.cli.main import cli
from pypto.database import tools
from pypto.errors import ScheduleError


def test_one_failing_autoscheduler_is_named_and_the_others_still_run(tmp_path, monkeypatch):
    ran = []

    def fake(op, dtypes, params, dims, name, target, out, *, measure):
        ran.append(name)
        raise ScheduleError("autoscheduler output: unsupported call .gpu_blocks() on out")

    monkeypatch.setattr(tools, "import_autoschedule", fake)
    r = CliRunner().invoke(cli, ["db", "import-autoschedule", "add", "--shape", "R=4,C=4",
                                 "--autoscheduler", "li2018", "--autoscheduler", "adams2019",
                                 "--db", str(tmp_path / "db"), "--no-measure"])
    assert r.exit_code == 2, r.output
    assert ran == ["li2018", "adams2019"]
    assert "li2018: not stored: autoscheduler output" in r.stderr
    assert "2 of 2 autoschedulers" in r.stderr and "--autoscheduler" in r.stderr
