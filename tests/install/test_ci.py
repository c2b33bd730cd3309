"""CI runs the README's test command, verbatim, in a virtual environment it creates itself."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def readme_test_command() -> str:
    block = re.search(r"## Two commands.*?```bash\n(.*?)```", (ROOT / "README.md").read_text(),
                      re.S).group(1)
    lines = block.splitlines()
    return lines[lines.index("# 2. run the tests") + 1].strip()


def test_the_readme_installs_every_extra_the_tests_use():
    # The tests cross-check ops against PyTorch and run the PostgreSQL storage test.
    cmd = readme_test_command()
    assert re.search(r'-e "\.\[[^\]]*\btorch\b', cmd) and "postgres" in cmd and "test" in cmd, cmd


def test_ci_runs_the_readme_command_in_a_fresh_virtual_environment():
    script = (ROOT / ".ci" / "run").read_text().splitlines()
    cmd = readme_test_command()
    steps = [ln.strip() for ln in script if ln.strip() and not ln.lstrip().startswith("#")]
    assert steps[-1] == cmd  # exactly the README's command, last
    made = [i for i, s in enumerate(steps) if re.search(r"python3? -m venv (?!.*--system-site)", s)]
    entered = [i for i, s in enumerate(steps) if re.search(r"^(\.|source) .*bin/activate", s)]
    assert made and entered, "CI must create a virtual environment (no system packages) and enter it"
    assert made[0] < entered[0] < len(steps) - 1
