"""``pypto db show OP --shape`` with a dim the op does not have said "no entries", as if that
shape had been looked for; it is a usage error naming the dim and the op's dims."""

from click.testing import CliRunner

from pypto.cli.main import cli


def test_show_refuses_a_shape_with_a_dim_the_op_lacks(tmp_path):
    r = CliRunner().invoke(cli, ["db", "show", "add", "--shape", "Q=3", "--db", str(tmp_path)])
    assert r.exit_code == 2, r.output
    assert "Q" in r.stderr and "R, C" in r.stderr


def test_show_with_the_op_s_dims_still_answers(tmp_path):
    r = CliRunner().invoke(cli, ["db", "show", "add", "--shape", "R=3,C=4", "--db", str(tmp_path)])
    assert "no entries" in r.output and "not a dim" not in r.output
