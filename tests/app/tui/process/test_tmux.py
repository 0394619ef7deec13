"""Smoke test of the real ``coding-agent`` binary in a real terminal (tmux), offline (issue 8).

A private tmux server runs the installed console script in a project folder. The test types into
the pane and reads the screen back, exactly as a person would: the faux demo tour runs (files
listed and read, a question, a write and an edit and a command approved), a second terminal
attaches to the same session and sees the same transcript, ``/quit`` leaves it and ``/stop`` ends the worker.

Waits poll the captured pane text with a deadline; tmux is required: ``.ci/run`` installs it and
sets ``CODING_AGENT_REQUIRE_TMUX``, so in CI (or with ``CI`` set) a missing tmux is a failure,
never a skip.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from coding_agent.session_files.folders import Session, list_sessions, load_session
from tests.app.tui.process.tmux_support import BINARY, TIMEOUT, Terminal


@pytest.fixture
def terminal(agent_env: dict[str, str]) -> Iterator[Terminal]:
    if shutil.which("tmux") is None:
        message = "tmux is not installed (apt-get install tmux; .ci/run does it)"
        if os.environ.get("CI") or os.environ.get("CODING_AGENT_REQUIRE_TMUX"):
            pytest.fail(message)
        pytest.skip(message)
    env = dict(agent_env)
    env.update(TERM="xterm-256color", COLORTERM="truecolor", LANG="C.UTF-8")
    env.pop("TMUX", None)
    # A short socket path: AF_UNIX paths are limited, pytest's tmp paths are long.
    socket = Path(tempfile.gettempdir()) / f"ca-tmux-{uuid.uuid4().hex[:10]}.sock"
    term = Terminal(socket, env)
    try:
        yield term
    finally:
        term.close()
        for session in list_sessions(env=env):
            _stop_worker(session)


def _stop_worker(session: Session) -> None:
    """A worker left by a failed test: SIGTERM the pid its lock file names."""
    if not session.worker_running():
        return
    try:
        pid = int(session.lock_path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        pass


def test_the_binary_runs_the_demo_attaches_a_second_terminal_and_quits(
    terminal: Terminal, project: Path, agent_env: dict[str, str]
) -> None:
    assert BINARY.exists(), f"{BINARY} is missing: is the console script installed (uv sync)?"
    terminal.start("one", project, str(BINARY))
    terminal.wait_text("one", "enter sends")
    terminal.wait_text("one", "faux/faux-1")

    terminal.type("one", "show me around")
    terminal.press("one", "Enter")
    screen = terminal.wait_dialog("one", "What should the demo notes be about?")
    assert "Testing" in screen and "Documentation" in screen
    terminal.press("one", "Enter")  # "Testing"
    for tool in ("write", "edit", "bash"):
        terminal.wait_dialog("one", f"Allow {tool}?")
        terminal.press("one", "Enter")  # Allow
    final = terminal.wait_text("one", "That was the offline demo")
    assert "Topic: Testing" in final  # the edit's diff, rendered
    assert (project / "faux-demo-notes.md").read_text().endswith("Topic: Testing\n")

    [session] = list_sessions(env=agent_env)
    assert session.worker_running()
    terminal.start("two", project, f"{BINARY} attach {session.id}")
    attached = terminal.wait_text("two", "That was the offline demo")
    assert "show me around" in attached or "Topic: Testing" in attached

    terminal.type("two", "/quit")
    terminal.press("two", "Enter")
    terminal.wait_text("two", "EXITED 0")
    assert session.worker_running(), "an attached TUI leaves the worker running"

    terminal.type("one", "/stop")
    terminal.press("one", "Enter")
    done = terminal.wait_text("one", "EXITED 0")
    assert f"coding-agent --resume {session.id}" in done
    assert not session.worker_running(), "/stop ends the worker"


# -- issue 14 items 1 and 2: launch settings survive every worker; /quit, /stop, Ctrl+C ------
def _pid(session: Session) -> int | None:
    """The pid the session's lock file names; ``None`` while it names none (a new lock file
    is empty until its worker writes its pid)."""
    try:
        return int(session.lock_path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _until(check: object, what: str) -> None:
    """Poll ``check()`` (a file or a process state) until true, within the deadline."""
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        if check():  # type: ignore[operator]
            return
        time.sleep(0.1)  # polling outside state; the condition is what is waited on
    raise AssertionError(f"timed out waiting for {what}")


def _script(folder: Path, steps: list[dict[str, object]]) -> Path:
    path = folder / "script.json"
    path.write_text(json.dumps(steps))
    return path


def _bash(command: str) -> dict[str, object]:
    return {"toolCalls": [{"name": "bash", "arguments": {"command": command}}]}


def test_launch_settings_survive_continue_and_a_sigkilled_worker(
    terminal: Terminal, project: Path, agent_env: dict[str, str], tmp_path: Path
) -> None:
    script = _script(
        tmp_path,
        [_bash("echo one >> log.txt"), {"text": "First done."},
         _bash("echo two >> log.txt"), {"text": "Second done."}],
    )  # fmt: skip
    flags = f"--faux-script {script} --permission-mode auto --thinking high --linger 300"
    terminal.start("one", project, f"{BINARY} {flags}")
    terminal.wait_text("one", "thinking high")
    terminal.type("one", "first")
    terminal.press("one", "Enter")
    terminal.wait_text("one", "First done.")
    assert (project / "log.txt").read_text() == "one\n"  # auto: bash ran, nobody was asked
    [session] = list_sessions(env=agent_env)
    stored = load_session(session.path).settings
    assert (stored.faux_script, stored.permission_mode, stored.thinking, stored.linger) == (
        str(script),
        "auto",
        "high",
        300.0,
    )
    terminal.type("one", "/stop")
    terminal.press("one", "Enter")
    terminal.wait_text("one", "EXITED 0")
    assert not session.worker_running()

    # A later start without any flag: the stored settings, in a new worker.
    terminal.start("two", project, str(BINARY) + " --continue")
    # Both in one capture: the transcript and the footer (drawn after it, lower down) of a
    # frame tmux may show half drawn.
    terminal.wait(
        "two", lambda text: "First done." in text and "thinking high" in text, "the settings"
    )
    first = _pid(session)
    assert first is not None, "the worker serving --continue names itself in the lock file"
    os.kill(first, signal.SIGKILL)
    _until(
        lambda: session.worker_running() and _pid(session) not in (None, first),
        "the restarted worker",
    )
    terminal.wait("two", lambda text: "unavailable" not in text.lower(), "the reconnection")
    terminal.type("two", "second")
    terminal.press("two", "Enter")
    screen = terminal.wait(
        "two", lambda text: "Second done." in text and "thinking high" in text, "the answer"
    )
    # The restarted worker answered from the stored script and ran bash without asking.
    assert (project / "log.txt").read_text() == "one\ntwo\n"
    assert "Allow bash?" not in screen
    terminal.type("two", "/stop")
    terminal.press("two", "Enter")
    terminal.wait_text("two", "EXITED 0")
    assert not session.worker_running()


def test_quit_leaves_the_turn_running_ctrl_c_twice_quits_and_stop_asks(
    terminal: Terminal, project: Path, agent_env: dict[str, str], tmp_path: Path
) -> None:
    script = _script(
        tmp_path,
        [_bash("until [ -e go ]; do sleep 0.1; done; echo ran >> done.txt"),
         {"text": "The slow one finished."},
         _bash("sleep 60"), {"text": "Never mind."}],
    )  # fmt: skip
    terminal.start("one", project, f"{BINARY} --faux-script {script} --permission-mode auto")
    terminal.wait_text("one", "enter sends")
    terminal.type("one", "slow")
    terminal.press("one", "Enter")
    terminal.wait_text("one", "until [ -e go ]")  # the command waits for the test's word
    terminal.type("one", "/quit")
    terminal.press("one", "Enter")
    done = terminal.wait_text("one", "EXITED 0")
    assert "keeps running in the background" in done
    [session] = list_sessions(env=agent_env)
    assert session.worker_running(), "/quit leaves the worker running"
    (project / "go").touch()  # now the command the turn was running may finish
    _until(lambda: (project / "done.txt").exists(), "the command the turn was running")
    assert (project / "done.txt").read_text() == "ran\n"

    terminal.start("two", project, str(BINARY) + " --continue")
    terminal.wait_text("two", "The slow one finished.")  # the turn ended while nobody watched
    terminal.type("two", "draft")
    terminal.press("two", "C-c")  # Ctrl+C with text clears the editor
    terminal.wait("two", lambda text: "draft" not in text, "the editor cleared")
    terminal.press("two", "C-c")
    # The notice is a toast: on a loaded machine it can come and go between two polls of the
    # screen, so the test reads what the program wrote (since that key) instead.
    terminal.wait_written("two", "Press Ctrl+C again to quit")
    # Two presses in one burst: the second Ctrl+C must come within DOUBLE_CTRL_C (1 s) of a
    # first, and on a loaded machine the notice's round trip alone can take longer (a press
    # after the window is a first press again).
    terminal.press("two", "C-c", "C-c")
    terminal.wait_text("two", "EXITED 0")
    assert session.worker_running(), "Ctrl+C twice leaves like /quit"

    terminal.start("three", project, str(BINARY) + " --continue")
    terminal.wait_text("three", "The slow one finished.")
    terminal.type("three", "long")
    terminal.press("three", "Enter")
    terminal.wait_text("three", "sleep 60")
    terminal.type("three", "/stop")
    terminal.press("three", "Enter")
    terminal.wait_dialog("three", "Stop the session's worker?", body="A turn is running")
    terminal.press("three", "Escape")  # keep it running
    terminal.wait_written("three", "The worker keeps running")  # a toast: read from the record
    assert session.worker_running()
    terminal.type("three", "/quit --stop")
    terminal.press("three", "Enter")
    terminal.wait_dialog("three", "Stop the session's worker?")
    terminal.press("three", "Enter")  # Stop
    done = terminal.wait_text("three", "EXITED 0")
    assert f"Session {session.id} stopped" in done
    _until(lambda: not session.worker_running(), "the worker to stop")


# -- issue 20: keys as tmux delivers them -----------------------------------------------------
def test_typeahead_is_sent_by_its_enter_and_alt_enter_breaks_the_line(
    terminal: Terminal, project: Path, agent_env: dict[str, str], tmp_path: Path
) -> None:
    script = _script(tmp_path, [{"text": "Got the early one."}, {"text": "Got both lines."}])
    terminal.start("one", project, f"{BINARY} --faux-script {script}")
    # Typed at once, while the program starts (the terminal is still in cooked mode, where
    # Enter arrives as a newline): the text is kept and its Enter sends it.
    terminal.type("one", "typed early")
    terminal.press("one", "Enter")
    terminal.wait_text("one", "Got the early one.")
    screen = terminal.wait(
        "one", lambda text: "enter sends" in text and "alt+enter newline" in text, "the hint"
    )
    assert "shift+enter" not in screen  # tmux has no Shift+Enter

    terminal.type("one", "first line")
    terminal.press("one", "M-Enter")  # tmux sends ESC Enter
    terminal.type("one", "second line")
    editor = terminal.wait_text("one", "second line")
    assert "Got both lines." not in editor, "Alt+Enter did not send"
    lines = [line for line in editor.splitlines() if "first line" in line or "second line" in line]
    assert len(lines) == 2, editor  # two lines in the editor
    terminal.press("one", "Enter")
    terminal.wait_text("one", "Got both lines.")
    [session] = list_sessions(env=agent_env)
    terminal.type("one", "/stop")
    terminal.press("one", "Enter")
    terminal.wait_text("one", "EXITED 0")
    assert not session.worker_running()


# -- issue 36 item 2: dialogs need deliberate keys --------------------------------------------
def test_keys_sent_in_one_burst_as_a_dialog_opens_answer_nothing_and_stay_in_the_editor(
    terminal: Terminal, project: Path, agent_env: dict[str, str], tmp_path: Path
) -> None:
    script = _script(
        tmp_path,
        [_bash("echo ran > ran.txt"), {"text": "Done after the dialog."}],
    )
    terminal.start("one", project, f"{BINARY} --faux-script {script}")
    terminal.wait_text("one", "enter sends")
    terminal.type("one", "run it")
    terminal.press("one", "Enter")
    terminal.wait_text("one", "Allow bash?")
    # One burst, as a user typing on when the dialog pops up: the letters of the old
    # shortcuts (y, a, n), a number, and Enter after each word.
    terminal.press("one", "yes", "Enter", " always", "Enter", " 1", "Enter", " no", "Enter")
    # The dialog is still open and armed again once the typing stopped (its typed letters
    # armed it anew, so its arming line was written after the burst); the text is in the
    # editor under it.
    screen = terminal.wait_dialog("one", "Allow bash?")
    assert "yes always 1 no" in screen
    assert not (project / "ran.txt").exists(), "a typed key answered the dialog"
    terminal.press("one", "Escape")  # Deny, on purpose (Escape denies an approval)
    screen = terminal.wait_text("one", "Done after the dialog.")
    assert not (project / "ran.txt").exists()
    assert "yes always 1 no" in screen
    terminal.press("one", "C-c")  # Ctrl+C clears the editor: the text was there, unsent
    terminal.wait("one", lambda text: "yes always 1 no" not in text, "the editor cleared")
    [session] = list_sessions(env=agent_env)
    terminal.type("one", "/stop")
    terminal.press("one", "Enter")
    terminal.wait_text("one", "EXITED 0")
    assert not session.worker_running()


def test_two_terminals_answer_one_dialog_at_once_one_decision_and_a_notice(
    terminal: Terminal, project: Path, agent_env: dict[str, str], tmp_path: Path
) -> None:
    script = _script(
        tmp_path,
        [_bash("echo one >> log.txt"), {"text": "First answered."},
         _bash("echo two >> log.txt"), {"text": "Second answered."}],
    )  # fmt: skip
    terminal.start("one", project, f"{BINARY} --faux-script {script}")
    terminal.wait_text("one", "enter sends")
    [session] = list_sessions(env=agent_env)
    terminal.start("two", project, f"{BINARY} attach {session.id}")
    terminal.wait_text("two", "enter sends")

    terminal.type("one", "first")
    terminal.press("one", "Enter")
    terminal.wait_dialog("one", "Allow bash?")
    terminal.wait_dialog("two", "Allow bash?")
    terminal.press("one", "Enter")  # Allow, in both terminals at once
    terminal.press("two", "Enter")
    for window in ("one", "two"):
        terminal.wait_text(window, "First answered.")
    assert (project / "log.txt").read_text() == "one\n"  # one decision: the command ran once

    terminal.type("one", "second")
    terminal.press("one", "Enter")
    terminal.wait_dialog("two", "Allow bash?")
    terminal.wait_dialog("one", "Allow bash?")
    terminal.press("two", "Enter")  # answered in the second terminal only
    # A toast (5 s): a loaded machine can show and clear it between two captures of the pane.
    notice = terminal.wait_written("one", "Already answered in another window")
    assert "Traceback" not in notice
    terminal.wait_text("one", "Second answered.")
    assert (project / "log.txt").read_text() == "one\ntwo\n"
    for window in ("one", "two"):
        assert "EXITED" not in terminal.screen(window)  # no crash in either
    terminal.type("two", "/quit")
    terminal.press("two", "Enter")
    terminal.wait_text("two", "EXITED 0")
    terminal.type("one", "/stop")
    terminal.press("one", "Enter")
    terminal.wait_text("one", "EXITED 0")
    assert not session.worker_running()


def test_a_dialog_longer_than_its_box_says_how_much_more_and_scrolls_to_it(
    terminal: Terminal, project: Path, agent_env: dict[str, str], tmp_path: Path
) -> None:
    # 60 blank lines push the end of the command out of the dialog (issue 36 item 6).
    script = _script(
        tmp_path,
        [_bash("echo hello" + "\n" * 60 + "echo payload-at-the-end"), {"text": "Denied it."}],
    )
    terminal.start("one", project, f"{BINARY} --faux-script {script}")
    terminal.wait_text("one", "enter sends")
    terminal.type("one", "run it")
    terminal.press("one", "Enter")
    screen = terminal.wait_dialog("one", "Allow bash?")
    assert "more lines ↓" in screen and "PgUp/PgDn scroll" in screen
    assert "payload-at-the-end" not in screen
    for _ in range(6):
        terminal.press("one", "PageDown")
    # The end of the scroll, whole: the payload and, under it, the "more" line updated (a frame
    # half drawn, or one of the six pages before the last, shows the payload with the old line).
    terminal.wait(
        "one",
        lambda text: (
            "payload-at-the-end" in text
            and "lines above" in text
            and "more lines ↓" not in text
            and "Allow bash?" in text  # scrolling answered nothing
        ),
        "the dialog scrolled to its end",
    )
    terminal.press("one", "Escape")  # deny
    terminal.wait_text("one", "Denied it.")
    [session] = list_sessions(env=agent_env)
    terminal.type("one", "/stop")
    terminal.press("one", "Enter")
    terminal.wait_text("one", "EXITED 0")
    assert not session.worker_running()


def test_stop_in_one_terminal_ends_a_second_attached_one_with_one_line(
    terminal: Terminal, project: Path, agent_env: dict[str, str]
) -> None:
    """``/stop`` in one TUI while another is attached: the other leaves with one line naming
    what happened and how to continue — no hang, no traceback, and no new worker started
    behind the first one's back (it would resume what ``/stop`` stopped)."""
    script = _script(project, [{"text": "Hello from the script."}])
    terminal.start("one", project, f"{BINARY} --faux-script {script}")
    terminal.wait_text("one", "enter sends")
    terminal.type("one", "hi")
    terminal.press("one", "Enter")
    terminal.wait_text("one", "Hello from the script.")
    [session] = list_sessions(env=agent_env)
    terminal.start("two", project, f"{BINARY} attach {session.id}")
    terminal.wait_text("two", "Hello from the script.")

    terminal.type("one", "/stop")
    terminal.press("one", "Enter")
    terminal.wait_text("one", "EXITED 0")
    done = terminal.wait_text("two", "EXITED 0")
    line = f"Session {session.id} was stopped outside this window (/stop in another one, say)"
    assert line in " ".join(done.split()), done
    assert f"--resume {session.id}" in done and "Traceback" not in done
    assert not session.worker_running(), "the second TUI started no worker again"
