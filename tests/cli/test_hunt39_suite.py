"""A ``pypto tune --suite`` file whose items have fields of the wrong type is a ParamError naming
the item and the field, raised while reading the file (an AttributeError/TypeError before)."""

import json

import pytest
from click.testing import CliRunner

from pypto.cli.main import cli
from pypto.cli.tune import read_suite
from pypto.errors import ParamError


@pytest.mark.parametrize("item, says", [
    ({"op": "softmax", "shape": 5}, "'shape' must be a string"),
    ({"op": "softmax", "shape": ["R=4"]}, "'shape' must be a string"),
    ({"op": "softmax", "shape": "R=4,C=8", "dtype": 7}, "'dtype' must be a string"),
    ({"op": "softmax", "shape": "R=4,C=8", "params": [1, 2]}, "'params' must be an object"),
    ({"op": "softmax", "shape": "R=4,C=8", "params": {"eps": {"a": 1}}}, "parameter 'eps'"),
    ({"op": "softmax", "shape": "R=4,C=8", "dtypes": "float32"}, "unknown field(s) ['dtypes']"),
])
def test_a_suite_item_of_the_wrong_type_is_named(tmp_path, item, says):
    suite = tmp_path / "suite.json"
    suite.write_text(json.dumps([{"op": "softmax", "shape": "R=4,C=8"}, item]))
    with pytest.raises(ParamError, match="item #1") as e:
        read_suite(str(suite))
    assert says in str(e.value)
    r = CliRunner().invoke(cli, ["tune", "--suite", str(suite), "--db", str(tmp_path / "db"),
                                 "--storage", f"sqlite:///{tmp_path}/s.db", "--no-progress"])
    assert r.exit_code == 2 and says in r.output
    assert not (tmp_path / "s.db").exists()  # refused before any tuning started


def test_a_well_typed_suite_still_reads(tmp_path):
    suite = tmp_path / "suite.json"
    items = [{"op": "softmax", "shape": "R=4,C=8", "dtype": "float64", "params": None},
             {"op": "softmax", "shape": "R=4,C=8", "params": {}}]
    suite.write_text(json.dumps(items))
    assert read_suite(str(suite)) == items


def test_an_unknown_baseline_is_refused_before_any_work():
    from click.testing import CliRunner

    from pypto.cli.main import cli

    r = CliRunner().invoke(cli, ["tune", "softmax", "--shape", "R=8,C=8", "--trials", "1",
                                  "--no-write", "--baselines", "default,bogus"])
    assert r.exit_code != 0
    assert "unknown baseline(s) 'bogus'" in r.output and "adams2019" in r.output
