"""A --storage URL that cannot be opened is one ParamError naming it (password hidden) and what to
do, from the tuner and from ``pypto study`` alike; SQLAlchemy's exceptions never reach the user."""

import pytest
from click.testing import CliRunner

from autotune.history import histories
from autotune.tuner import TuneConfig, make_storage
from pypto.cli.main import cli
from pypto.errors import ParamError


def _cfg():
    return TuneConfig(op="softmax", shape={"R": 4, "C": 8})


def test_a_file_that_is_not_a_database_is_a_param_error(tmp_path):
    junk = tmp_path / "notes.txt"
    junk.write_text("not sqlite at all\n" * 10)
    with pytest.raises(ParamError, match="is not an Optuna SQLite database") as e:
        make_storage(str(junk), _cfg())
    assert str(junk) in str(e.value)
    with pytest.raises(ParamError, match="is not an Optuna SQLite database"):
        histories(str(junk))
    assert junk.read_text().startswith("not sqlite")  # left as it was


def test_a_missing_folder_and_an_unknown_scheme_say_what_to_do(tmp_path):
    with pytest.raises(ParamError, match="does not exist; create it"):
        make_storage(f"sqlite:///{tmp_path}/no/such/dir/s.db", _cfg())
    with pytest.raises(ParamError, match="cannot open the tuning storage bogus://x.*check the URL"):
        make_storage("bogus://x", _cfg())


def test_a_server_url_never_shows_its_password():
    # No driver or no server on port 1: either way a ParamError, and the password stays hidden.
    with pytest.raises(ParamError) as e:
        make_storage("postgresql://user:s3cr3t@127.0.0.1:1/db", _cfg())
    assert "s3cr3t" not in str(e.value) and "user:***@127.0.0.1" in str(e.value)


def test_the_study_command_reports_a_bad_storage_in_one_line(tmp_path):
    junk = tmp_path / "x.db"
    junk.write_bytes(b"\0garbage" * 100)
    r = CliRunner().invoke(cli, ["study", "--storage", str(junk)])
    assert r.exit_code == 2
    assert "Traceback" not in r.output and "is not an Optuna SQLite database" in r.output
