"""``coding-agent --continue`` in a folder with no session, in a real terminal (tmux): the TUI
starts a new session and says so on its own screen, where the command line's stderr line is
covered at once (a Claude Code user expects ``claude -c`` to say there was nothing to continue).
"""

from __future__ import annotations

from pathlib import Path

from coding_agent.session_files.folders import list_sessions
from tests.app.tui.process.test_tmux import (  # noqa: F401 - the fixture
    BINARY,
    Terminal,
    _script,  # pyright: ignore[reportPrivateUsage]
    terminal,
)


def test_continue_with_no_session_here_says_so_in_the_tui(
    terminal: Terminal,  # noqa: F811 - the fixture imported above
    project: Path,
    agent_env: dict[str, str],
    tmp_path: Path,
) -> None:
    script = _script(tmp_path, [{"text": "Fresh answer."}])
    terminal.start("one", project, f"{BINARY} --continue --faux-script {script}")
    # The toast (capitalised: the command line's own stderr line, "coding-agent: no session
    # of …", is under the TUI's screen at once). Read from what the TUI wrote: a toast may come
    # and go between two looks at the screen on a loaded machine.
    terminal.wait_written("one", "No session of")
    terminal.type("one", "hello")
    terminal.press("one", "Enter")
    terminal.wait_text("one", "Fresh answer.")
    [session] = list_sessions(env=agent_env)
    assert session.cwd == project
    terminal.type("one", "/stop")
    terminal.press("one", "Enter")
    terminal.wait_text("one", "EXITED 0")
