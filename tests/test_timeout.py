"""The test run has a time limit per test (pytest-timeout), so a hung JIT or worker fails CI
instead of hanging it."""


def test_every_test_has_a_generous_time_limit(request):
    limit = float(request.config.getini("timeout") or 0)
    # Generous: the slowest honest test (tuning, a subprocess bench) takes a few minutes on 2 cores.
    assert 300 <= limit <= 3600, f"[tool.pytest.ini_options] timeout is {limit!r}"
