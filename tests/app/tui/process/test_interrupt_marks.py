"""Esc or Ctrl+C while a tool runs: the transcript says "■ Interrupted by user" once, as it does
for an answer stopped while it streams (Claude Code always shows the line). The mark is the
session's (an interrupted answer after the tools, docs/design/turn.md), so a new start shows
each turn's mark again, once. The real binary in tmux, the scripted faux model."""

from __future__ import annotations

import json
from pathlib import Path

from tests.app.tui.process.test_tmux import BINARY, Terminal, terminal  # noqa: F401 - the fixture

MARK = "■ Interrupted by user"


def _sleeping(text: str) -> dict[str, object]:
    """An answer with some words and a long ``bash`` call (the tool the user interrupts)."""
    return {"text": text, "toolCalls": [{"name": "bash", "arguments": {"command": "sleep 30"}}]}


def test_esc_and_ctrl_c_while_a_tool_runs_mark_the_turn_interrupted_once(
    terminal: Terminal,  # noqa: F811 - the fixture imported above
    project: Path,
    tmp_path: Path,
) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps([_sleeping("Let me wait."), _sleeping("Waiting again."),
                                  {"text": "Never reached."}]))  # fmt: skip
    flags = f"--faux-script {script} --permission-mode auto"
    terminal.start("one", project, f"{BINARY} {flags}")
    terminal.wait_text("one", "enter sends")
    terminal.type("one", "wait")
    terminal.press("one", "Enter")
    terminal.wait_text("one", "sleep 30")  # the call is shown: its tool is about to run or runs
    terminal.press("one", "Escape")
    screen = terminal.wait(
        "one", lambda text: MARK in text and "Tool call aborted." in text, "the first mark"
    )
    assert screen.count(MARK) == 1, screen

    terminal.type("one", "again")
    terminal.press("one", "Enter")
    terminal.wait_text("one", "Waiting again.")
    terminal.press("one", "C-c")  # Ctrl+C stops the running turn as Esc does
    screen = terminal.wait("one", lambda text: text.count(MARK) >= 2, "the second mark")
    assert screen.count(MARK) == 2, screen  # one per interrupted turn
    assert "Never reached." not in screen
    terminal.type("one", "/stop")
    terminal.press("one", "Enter")
    terminal.wait_text("one", "EXITED 0")

    # From storage: a new start renders both turns with one mark each.
    terminal.start("two", project, f"{BINARY} --continue")
    again = terminal.wait("two", lambda text: "Waiting again." in text, "the transcript")
    assert again.count(MARK) == 2, again
    terminal.type("two", "/stop")
    terminal.press("two", "Enter")
    terminal.wait_text("two", "EXITED 0")
