"""A folder the agent cannot write (a read-only home, its own sandbox around a nested run, a
state folder that is a file) ends ``coding-agent -p`` with one line naming the path and the
fix, not a traceback: the real binary."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BINARY = Path(sys.executable).with_name("coding-agent")


def test_a_state_folder_that_cannot_be_made_is_one_line_naming_it_and_the_fix(
    agent_env: dict[str, str], tmp_path: Path
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")  # a folder cannot be made under a file, even by root
    state = blocker / "state"
    ran = subprocess.run(
        [str(BINARY), "-p", "hi"], env={**agent_env, "XDG_STATE_HOME": str(state)},
        cwd=tmp_path, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert ran.returncode == 1
    assert "Traceback" not in ran.stderr
    [line] = ran.stderr.splitlines()
    assert line.startswith(f"coding-agent: error: Not a directory: {state}")
    assert "set XDG_STATE_HOME to a folder that is" in line
