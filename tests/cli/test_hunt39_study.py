"""``pypto study --from-json`` reads a file as data: a corrupt or foreign one is one error line
naming the file and the field; --json/--plot into a missing folder are refused before any work."""

import json

import pytest
from click.testing import CliRunner

from pypto.cli.main import cli

GOOD = {"study": "softmax|float32|C=8,R=4", "op": "softmax", "shape": "C=8,R=4", "n_trials": 2,
        "n_failed": 0, "best_ms": 0.5, "best_baseline_ms": 1.0, "wall_s": 3.0, "trials": [],
        "curve": [{"trial": 0, "elapsed_s": 0.0, "best_ms": 1.0},
                  {"trial": 1, "elapsed_s": 3.0, "best_ms": 0.5}]}


def _study(*args):
    return CliRunner().invoke(cli, ["study", *args])


def test_histories_written_by_json_are_read_back(tmp_path):
    f = tmp_path / "h.json"
    f.write_text(json.dumps([GOOD]))
    r = _study("--from-json", str(f))
    assert r.exit_code == 0, r.output
    assert "softmax C=8,R=4" in r.output and "2.00x" in r.output


@pytest.mark.parametrize("text, says", [
    ('[{"study": "a", "op', "invalid JSON"),                    # truncated
    ('{"study": "a"}', "expected a list of study histories"),    # wrong top-level type
    ('[{"x": 1}]', "history #0 has no valid 'study'"),           # foreign objects
    ('[7]', "history #0 is not an object"),
    (json.dumps([dict(GOOD, best_ms="fast")]), "no valid 'best_ms'"),   # string for a number
    (json.dumps([dict(GOOD, curve=[{"trial": 0}])]), "curve point #0"),
    ('[' * 100000, "nested deeper"),                              # hostile nesting
])
def test_a_bad_histories_file_is_one_line_naming_it(tmp_path, text, says):
    f = tmp_path / "h.json"
    f.write_text(text)
    r = _study("--from-json", str(f))
    assert r.exit_code == 2, r.output
    assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
    assert "error:" in r.output and str(f) in r.output and says in r.output


@pytest.mark.parametrize("flag", ["--json", "--plot"])
def test_an_output_in_a_missing_folder_is_refused_up_front(tmp_path, flag):
    f = tmp_path / "h.json"
    f.write_text(json.dumps([GOOD]))
    r = _study("--from-json", str(f), flag, str(tmp_path / "nope" / "out"))
    assert r.exit_code == 2
    assert "does not exist" in r.output and "softmax" not in r.output  # nothing ran first
