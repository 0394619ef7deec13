"""A new user's first day, round two (issue 38, items 7 and 8), through the real binary in tmux.

Each test reads the screen as a person would (:class:`~tests.app.tui.process.test_tmux.Terminal`).
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.app.tui.process.test_tmux import BINARY, Terminal, terminal  # noqa: F401 - the fixture


def _slow_script(folder: Path, text: str) -> Path:
    """A faux script whose answer waits ten minutes before its first word (a slow model)."""
    path = folder / "slow.json"
    path.write_text(json.dumps({"steps": [{"text": text}], "latency": 600}))
    return path


def test_an_answer_aborted_before_its_first_word_is_marked_interrupted_after_a_restart_too(
    terminal: Terminal,  # noqa: F811 - the fixture imported above
    project: Path,
    tmp_path: Path,
) -> None:
    script = _slow_script(tmp_path, "Too late.")
    terminal.start("one", project, f"{BINARY} --faux-script {script}")
    terminal.wait_text("one", "faux/faux-1")
    terminal.type("one", "explain the build")
    terminal.press("one", "Enter")
    terminal.wait_text("one", "to interrupt")  # the turn runs; nothing streamed yet
    terminal.press("one", "Escape")
    screen = terminal.wait_text("one", "■ Interrupted by user")
    assert "Too late." not in screen
    terminal.type("one", "/stop")
    terminal.press("one", "Enter")
    terminal.wait_text("one", "EXITED 0")
    # The mark is in the session, not in that terminal's memory: a new start shows it.
    terminal.start("two", project, f"{BINARY} --continue")
    again = terminal.wait_text("two", "■ Interrupted by user")
    assert "explain the build" in again
    terminal.type("two", "/stop")
    terminal.press("two", "Enter")
    terminal.wait_text("two", "EXITED 0")
