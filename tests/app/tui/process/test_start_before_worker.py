"""The TUI takes typing before its session worker serves (issue 38, item 10), in tmux.

The worker is held at its start, deterministically, by ``CODING_AGENT_WORKER_START_GATE``: it
reads one line from a FIFO the test owns before it does anything (no socket, no lock), so the
test types into a TUI whose worker is not ready for as long as it likes, then lets it go.
Every wait polls the screen with a deadline (:class:`~tests.app.tui.process.test_tmux.Terminal`).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from coding_agent.session_files.folders import list_sessions
from coding_agent.worker.main import START_GATE_ENV
from tests.app.tui.process.test_tmux import (  # noqa: F401 - the fixture
    BINARY,
    Terminal,
    _script,  # pyright: ignore[reportPrivateUsage]
    _until,  # pyright: ignore[reportPrivateUsage]
    terminal,
)


@pytest.fixture
def gate(tmp_path: Path, terminal: Terminal) -> Iterator[int]:  # noqa: F811 - the fixture
    """A FIFO the worker waits on (in the terminal's environment); write a line to open it.

    The test holds it open for reading and writing (an open never blocks that way), so a line
    written before the worker opens it waits in the pipe for the worker."""
    path = tmp_path / "worker-gate"
    os.mkfifo(path)
    terminal.env[START_GATE_ENV] = str(path)
    fd = os.open(path, os.O_RDWR)
    try:
        yield fd
    finally:
        os.close(fd)


def _editor_line(screen: str) -> str:
    """The editor's first text line (the one under its top border)."""
    lines = screen.splitlines()
    top = next(i for i, line in enumerate(lines) if "╭─ ›" in line)
    return lines[top + 1]


def test_prompts_typed_before_the_worker_serves_are_pending_then_answered_in_order(
    terminal: Terminal,  # noqa: F811 - the fixture imported above
    gate: int,
    project: Path,
    agent_env: dict[str, str],
    tmp_path: Path,
) -> None:
    script = _script(tmp_path, [{"text": "Answer one."}, {"text": "Answer two."}])
    terminal.start("one", project, f"{BINARY} --faux-script {script}")
    terminal.wait_text("one", "Starting the session")
    terminal.wait_text("one", "enter queues")  # the editor's hint while the session starts

    # The worker waits at its gate: typing and submitting already work.
    terminal.type("one", "/cost")
    terminal.press("one", "Enter")
    terminal.type("one", "first prompt")
    terminal.press("one", "Enter")
    terminal.type("one", "second prompt")
    terminal.press("one", "Enter")
    terminal.type("one", "!!echo shell-ran-$((6*7))")
    terminal.press("one", "Enter")
    terminal.type("one", "/nope")
    terminal.press("one", "Enter")
    terminal.type("one", "draft kept")
    screen = terminal.wait(
        "one",
        lambda text: "/nope" in text and "draft kept" in _editor_line(text),
        "all five submissions pending and the draft in the editor",
    )
    assert screen.count("pending · sent as soon as the session is ready") == 5, screen
    assert screen.index("/cost") < screen.index("first prompt") < screen.index("second prompt")
    assert "Starting the session" in screen and "Answer one." not in screen
    [session] = list_sessions(env=agent_env)
    assert not session.worker_running(), "the worker was meant to wait at its gate"

    os.write(gate, b"go\n")  # the worker may start now
    screen = terminal.wait(
        "one",
        lambda text: "Answer one." in text and "Answer two." in text,
        "both prompts answered",
    )
    assert screen.index("first prompt") < screen.index("Answer one.")
    assert screen.index("Answer one.") < screen.index("second prompt") < screen.index("Answer two.")
    # /cost ran once the worker served, before the prompts. Its answer is a toast, which a
    # loaded machine can show and clear before both answers are on the screen: it is read from
    # what the TUI wrote (since the last key), where it comes before any answer.
    written = terminal.wait_written("one", "No model call yet")
    assert "Answer" not in written[: written.index("No model call yet")]
    terminal.wait_text("one", "shell-ran-42")  # the !! line ran in the worker's shell
    # An unknown command is said to be unknown only now (a toast too), and its text is back in
    # the editor in front of the draft: nothing typed is lost.
    terminal.wait_written("one", "Unknown command /nope")
    terminal.wait(
        "one",
        lambda text: (
            "/nope" in _editor_line(text)
            and "pending · sent" not in text
            and "Starting the session" not in text
            and "enter sends" in text
        ),
        "the unknown command back in the editor, nothing pending",
    )

    terminal.press("one", "C-c")  # clears the editor
    terminal.type("one", "/stop")
    terminal.press("one", "Enter")
    terminal.wait_text("one", "EXITED 0")


def test_quit_while_the_worker_starts_leaves_at_once_and_the_session_resumes(
    terminal: Terminal,  # noqa: F811 - the fixture imported above
    gate: int,
    project: Path,
    agent_env: dict[str, str],
) -> None:
    terminal.start("one", project, str(BINARY))
    terminal.wait_text("one", "Starting the session")
    terminal.type("one", "/quit")
    terminal.press("one", "Enter")
    done = terminal.wait_text("one", "EXITED 0")
    [session] = list_sessions(env=agent_env)
    assert f"--resume {session.id}" in done
    os.write(gate, b"go\n")  # the worker left behind starts and serves (the fixture stops it)
    _until(session.worker_running, "the worker left behind to serve")


def test_a_worker_that_cannot_start_ends_the_tui_with_its_error(
    terminal: Terminal,  # noqa: F811 - the fixture imported above
    project: Path,
    tmp_path: Path,
) -> None:
    bad = tmp_path / "bad-script.json"
    bad.write_text("{nope")
    terminal.start("one", project, f"{BINARY} --faux-script {bad}")
    done = terminal.wait_text("one", "EXITED")
    assert "EXITED 2" in done  # a usage error, as before the TUI painted first
    assert "invalid faux script" in done
    # a new session's failed start leaves no session, so no log is pointed at
    assert "worker log:" not in done
