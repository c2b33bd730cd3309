"""``pypto db merge`` takes a program's graph file along with its entry: without it the merged
entry could not be checked (``validate --deep``) or revalidated in the destination."""

from dbhelpers import program_db
from pypto.database import DirectoryDatabase
from pypto.database.programs import graph_path
from pypto.database.tools import merge, validate_paths


def _program_db(root):
    name = program_db(root, baselines={"default": 1.0})
    assert validate_paths([root], deep=True) == []
    return name


def test_merge_copies_the_graph_file_of_a_program_entry(tmp_path):
    name = _program_db(tmp_path / "src")
    assert merge([tmp_path / "src"], tmp_path / "dest") == 1
    assert graph_path(tmp_path / "dest", name).read_text() == graph_path(tmp_path / "src", name).read_text()
    assert validate_paths([tmp_path / "dest"], deep=True) == []


def test_merge_of_one_file_copies_it_too_and_keeps_a_graph_already_there(tmp_path):
    name = _program_db(tmp_path / "src")
    (src_file,) = DirectoryDatabase(tmp_path / "src").files()
    dest_graph = graph_path(tmp_path / "dest", name)
    merge([src_file], tmp_path / "dest")
    assert validate_paths([tmp_path / "dest"], deep=True) == []
    mine = dest_graph.read_text() + " "                     # the destination's own copy
    dest_graph.write_text(mine)
    merge([src_file], tmp_path / "dest")
    assert dest_graph.read_text() == mine                    # not overwritten


def test_a_graph_file_that_is_a_link_is_not_followed(tmp_path):
    name = _program_db(tmp_path / "src")
    secret = tmp_path / "secret.txt"
    secret.write_text("not for the database")
    link = graph_path(tmp_path / "src", name)
    link.unlink()
    link.symlink_to(secret)
    merge([tmp_path / "src"], tmp_path / "dest")
    assert not graph_path(tmp_path / "dest", name).exists()
    assert all("not for the database" not in p.read_text(errors="replace")
               for p in (tmp_path / "dest").rglob("*") if p.is_file())
