"""``coding-agent --help`` names the same current model as the errors about a model that is not
``provider/id`` (a newcomer's first day: the help said ``claude-sonnet-4-5`` while the errors
said ``claude-sonnet-4-6``), through the real binary; and neither the command line nor its
help loads pico3's model names for it (``tests/app/tui/process/test_cli.py`` checks --help
imports nothing heavy)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from pico3.models import ANTHROPIC_ALIASES

BINARY = Path(sys.executable).with_name("coding-agent")


def _run(env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BINARY), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )


def test_the_help_names_the_model_the_errors_name(agent_env: dict[str, str], tmp_path: Path):
    shown = _run(agent_env, tmp_path, "--help")
    assert shown.returncode == 0, shown.stderr
    [example] = re.findall(r"the model, e\.g\. (\S+)", shown.stdout)
    refused = _run(agent_env, tmp_path, "--model", "claude", "-p", "hi")
    assert refused.returncode != 0
    [suggested] = re.findall(r"provider/model-id \(e\.g\. (\S+)\)", refused.stderr)
    assert example == suggested == f"anthropic/{ANTHROPIC_ALIASES['sonnet']}"  # /model sonnet's
    from coding_agent.cli.main import HELP_EXAMPLE_MODEL
    from coding_agent.settings.model_config import EXAMPLE_MODEL

    # the errors' example comes from pico3's table; --help's is written out (it imports
    # nothing heavy) and must follow it
    assert example == HELP_EXAMPLE_MODEL == EXAMPLE_MODEL


def test_the_command_line_loads_no_model_names_before_help_is_asked() -> None:
    code = "import sys, coding_agent.cli.main as m; m.build_parser(); print('pico3' in sys.modules)"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert done.stdout.strip() == "False"
