"""``pypto tune`` into a database whose file for the op does not load (a newer format) is refused
before tuning (the write refuses to replace such a file; that refusal came after the whole run);
a corrupt one is said before tuning, and the write moves it aside."""

from click.testing import CliRunner

from autotune import tuner as tuner_mod
from pypto.cli.main import cli
from pypto.compiler import targets


def test_a_destination_file_that_does_not_load_is_refused_before_tuning(tmp_path, monkeypatch):
    fam = targets.family(targets.host())
    path = tmp_path / "db" / fam / "add.json"
    path.parent.mkdir(parents=True)
    path.write_text('{"entries": [], "family": "%s", "format": 999, "op": "add"}' % fam)
    before = path.read_text()
    ran = []
    monkeypatch.setattr(tuner_mod.Tuner, "run", lambda self: ran.append(1))
    r = CliRunner().invoke(cli, ["tune", "add", "--shape", "R=4,C=4", "--trials", "1",
                                 "--db", str(tmp_path / "db"),
                                 "--storage", f"sqlite:///{tmp_path / 's.db'}", "--no-progress"])
    assert r.exit_code == 2, r.output
    assert str(path) in r.stderr and "before tuning" in r.stderr
    assert ran == [] and path.read_text() == before


def test_a_corrupt_destination_file_is_said_before_tuning_and_moved_aside_by_the_write(
        tmp_path, monkeypatch):
    from pypto.errors import PyptoError

    fam = targets.family(targets.host())
    path = tmp_path / "db" / fam / "add.json"
    path.parent.mkdir(parents=True)
    path.write_text("{torn")

    def stop(self):
        raise PyptoError("stopped here")

    monkeypatch.setattr(tuner_mod.Tuner, "run", stop)
    r = CliRunner().invoke(cli, ["tune", "add", "--shape", "R=4,C=4", "--trials", "1",
                                 "--db", str(tmp_path / "db"),
                                 "--storage", f"sqlite:///{tmp_path / 's.db'}", "--no-progress"])
    assert "stopped here" in r.stderr      # the run went ahead
    assert str(path) in r.stderr and "move it aside" in r.stderr
    assert path.read_text() == "{torn"
