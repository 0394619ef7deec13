"""``/hooks`` in the real TUI: the ``coding-agent`` binary in a private tmux server, with a
temporary HOME whose ``~/.claude/settings.json`` holds hooks and whose own hooks file is broken
(issue 39, item 4)."""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[2] / "app" / "tui" / "process"))  # the tmux helpers
from test_tmux import (  # pyright: ignore[reportMissingImports]
    BINARY,
    Terminal,
    _stop_worker,  # pyright: ignore[reportPrivateUsage]
)

from coding_agent.session_files.folders import list_sessions


@pytest.fixture
def hooks_terminal(tmp_path: Path, agent_env: dict[str, str]) -> Iterator[Terminal]:
    if shutil.which("tmux") is None:
        message = "tmux is not installed (apt-get install tmux; .ci/run does it)"
        if os.environ.get("CI") or os.environ.get("CODING_AGENT_REQUIRE_TMUX"):
            pytest.fail(message)
        pytest.skip(message)
    env = dict(agent_env)
    home = tmp_path / "home"
    env.update(
        TERM="xterm-256color",
        COLORTERM="truecolor",
        LANG="C.UTF-8",
        HOME=str(home),
        XDG_CONFIG_HOME=str(tmp_path / "config"),
        CLAUDE_CONFIG_DIR=str(home / ".claude"),
    )
    env.pop("TMUX", None)
    socket = Path(tempfile.gettempdir()) / f"ca-hooks-{uuid.uuid4().hex[:10]}.sock"
    term = Terminal(socket, env)
    try:
        yield term
    finally:
        term.close()
        for session in list_sessions(env=env):
            _stop_worker(session)


def test_slash_hooks_lists_each_hook_with_its_source_and_a_broken_file(
    hooks_terminal: Terminal, tmp_path: Path
) -> None:
    claude = tmp_path / "home" / ".claude"
    claude.mkdir(parents=True)
    source = claude / "settings.json"
    fmt = {"type": "command", "command": "ruff format-it", "timeout": 30}
    source.write_text(
        json.dumps({"hooks": {"PostToolUse": [{"matcher": "Edit|Write", "hooks": [fmt]}]}})
    )
    broken = tmp_path / "config" / "coding-agent" / "hooks.json"
    broken.parent.mkdir(parents=True)
    broken.write_text('{"hooks": {"Stopp": []}}')
    project = tmp_path / "project"
    project.mkdir()
    hooks_terminal.start("one", project, str(BINARY))
    hooks_terminal.wait_text("one", "enter sends")
    hooks_terminal.type("one", "/hooks")
    hooks_terminal.press("one", "Enter")
    # The whole dialog (its box drawn to the bottom), not a frame whose top alone is drawn.
    screen = hooks_terminal.wait_dialog(
        "one", "Hooks", body="PostToolUse [Edit|Write]: ruff format-it"
    )
    assert "timeout 30 s" in screen and "settings.json" in screen
    assert "Not loaded:" in screen and "hooks.Stopp: unknown event" in screen
