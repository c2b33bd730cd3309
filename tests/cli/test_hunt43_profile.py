"""``pypto profile --stmt-html`` into a folder that does not exist: refused before profiling
(Halide writes nothing there and reports no error: the command said "loop nest: PATH", exit 0)."""

from click.testing import CliRunner

from pypto.cli.main import cli


def test_a_stmt_html_in_a_missing_folder_is_refused_up_front(tmp_path):
    where = tmp_path / "no_such_folder" / "nest.html"
    r = CliRunner().invoke(cli, ["profile", "add", "--shape", "R=4,C=8", "--runs", "1",
                                 "--min-samples", "0", "--stmt-html", str(where)])
    assert r.exit_code == 2 and "does not exist" in r.output and "--stmt-html" in r.output
    assert "loop nest" not in r.output and not where.exists()


def test_a_stmt_html_is_written_where_asked(tmp_path):
    where = tmp_path / "nest.html"
    r = CliRunner().invoke(cli, ["profile", "add", "--shape", "R=4,C=8", "--runs", "1",
                                 "--min-samples", "0", "--stmt-html", str(where)])
    assert r.exit_code == 0, r.output
    assert f"loop nest: {where}" in r.output and "<html" in where.read_text().lower()


def test_an_instruction_set_this_cpu_lacks_is_refused_not_run(monkeypatch):
    import halide as hl

    from pypto.compiler import targets

    monkeypatch.setattr(targets, "host", lambda: hl.Target("x86-64-linux-avx-avx2-f16c-fma-sse41"))
    r = CliRunner().invoke(cli, ["profile", "add", "--shape", "R=4,C=8", "--runs", "1",
                                 "--target", "x86-64-linux-avx-avx2-avx512-f16c-fma-sse41"])
    assert r.exit_code == 2 and "lacks avx512" in r.stderr, r.output
