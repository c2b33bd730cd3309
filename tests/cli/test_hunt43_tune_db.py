"""``pypto tune`` into a database whose file for the op does not load is refused before tuning
(the write refuses to replace such a file; that refusal came after the whole run)."""

from click.testing import CliRunner

from autotune import tuner as tuner_mod
from pypto.cli.main import cli
from pypto.compiler import targets


def test_a_destination_file_that_does_not_load_is_refused_before_tuning(tmp_path, monkeypatch):
    fam = targets.family(targets.host())
    path = tmp_path / "db" / fam / "add.json"
    path.parent.mkdir(parents=True)
    path.write_text("{torn")
    ran = []
    monkeypatch.setattr(tuner_mod.Tuner, "run", lambda self: ran.append(1))
    r = CliRunner().invoke(cli, ["tune", "add", "--shape", "R=4,C=4", "--trials", "1",
                                 "--db", str(tmp_path / "db"),
                                 "--storage", f"sqlite:///{tmp_path / 's.db'}", "--no-progress"])
    assert r.exit_code == 2, r.output
    assert str(path) in r.stderr and "before tuning" in r.stderr
    assert ran == [] and path.read_text() == "{torn"
