"""``pypto ops NAME`` shows one op, as ``pypto ops show NAME`` does."""

from click.testing import CliRunner

from pypto.cli.main import cli


def run(*args):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def test_ops_name_is_ops_show_name():
    short = run("ops", "softmax", "--shape", "R=4,C=8")
    full = run("ops", "show", "softmax", "--shape", "R=4,C=8")
    assert short.exit_code == 0, short.output
    assert short.output == full.output
    assert short.output.startswith("softmax(")


def test_a_misspelled_name_gets_suggestions_and_exit_2():
    r = run("ops", "layer_nrm")
    assert r.exit_code == 2
    assert "no op named 'layer_nrm'; did you mean layer_norm" in r.output


def test_the_listing_and_its_options_still_work():
    r = run("ops", "--category", "linalg")
    assert r.exit_code == 0 and "matmul" in r.output
    assert run("ops", "--help").output.count("pypto ops NAME") == 1
