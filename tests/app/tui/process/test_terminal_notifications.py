"""The terminal channel of notifications (issue 43 deliver 4): the real binary's TUI in tmux
writes OSC 9 and a bell, wrapped in tmux's passthrough, when an approval waits; the worker
leaves the desktop alone while the TUI is attached (``desktop_when = "detached"``).

A private tmux server runs the TUI; ``pipe-pane`` copies every byte the TUI writes to its pane
(before tmux interprets them) into a file, which the test reads. Waits poll the pane or the file
with a deadline. tmux is required in CI, as for ``test_tmux.py``.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from coding_agent.session_files.folders import list_sessions
from tests.app.tui.process.tmux_support import dialog_boxes, key_line

TIMEOUT = 90.0
BINARY = Path(sys.executable).with_name("coding-agent")
NOTICE = (
    b"\x1bPtmux;\x1b\x1b]9;coding-agent: project: Needs your permission to use bash\x07\x1b\\\x07"
)
"""OSC 9 inside tmux's passthrough (each ESC doubled), then the bell."""


class Tmux:
    def __init__(self, socket: Path, env: dict[str, str]) -> None:
        self.socket, self.env = socket, env

    def __call__(self, *args: str) -> str:
        return subprocess.run(
            ["tmux", "-S", str(self.socket), *args],
            env=self.env, capture_output=True, text=True, check=True, timeout=30,
        ).stdout  # fmt: skip

    def wait(self, check: Callable[[], bool], what: str) -> None:
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            if check():
                return
            time.sleep(0.1)  # polling the pane or a file; the condition is what is waited on
        raise AssertionError(f"timed out waiting for {what}; the screen was:\n{self.screen()}")

    def screen(self) -> str:
        return self("capture-pane", "-p", "-J", "-t", "main:one")


@pytest.fixture
def tmux(agent_env: dict[str, str]) -> Iterator[Tmux]:
    if shutil.which("tmux") is None:
        message = "tmux is not installed (apt-get install tmux; .ci/run does it)"
        if os.environ.get("CI") or os.environ.get("CODING_AGENT_REQUIRE_TMUX"):
            pytest.fail(message)
        pytest.skip(message)
    env = {**agent_env, "TERM": "xterm-256color", "LANG": "C.UTF-8"}
    for key in ("TMUX", "TERM_PROGRAM", "LC_TERMINAL"):
        env.pop(key, None)
    socket = Path(tempfile.gettempdir()) / f"ca-notify-{uuid.uuid4().hex[:10]}.sock"
    try:
        yield Tmux(socket, env)
    finally:
        subprocess.run(["tmux", "-S", str(socket), "kill-server"], env=env, check=False)
        socket.unlink(missing_ok=True)
        for session in list_sessions(env=env):
            if session.worker_running():
                try:
                    os.kill(int(session.lock_path.read_text().split()[0]), signal.SIGTERM)
                except (OSError, ValueError, IndexError):
                    pass


def test_an_approval_writes_osc_9_and_a_bell_through_tmux(
    tmux: Tmux, project: Path, tmp_path: Path
) -> None:
    assert BINARY.exists(), f"{BINARY} is missing: is the console script installed (uv sync)?"
    script = tmp_path / "script.json"
    script.write_text(
        json.dumps(
            [
                {"toolCalls": [{"name": "bash", "arguments": {"command": "echo hi"}}]},
                {"text": "All done."},
            ]
        )
    )
    raw = tmp_path / "pane.raw"
    desktop = tmp_path / "notify-send.log"  # a fake notify-send first on PATH records its calls
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "notify-send").write_text(f'#!/bin/sh\necho "$*" >> {desktop}\n')
    (bin_dir / "notify-send").chmod(0o755)
    tmux.env["PATH"] = f"{bin_dir}{os.pathsep}{tmux.env.get('PATH', os.defpath)}"
    tmux.env["DBUS_SESSION_BUS_ADDRESS"] = f"unix:path={tmp_path / 'bus'}"  # a desktop
    line = f"{BINARY} --faux-script {script} --linger 30; echo EXITED $?; exec sleep 600"
    tmux("new-session", "-d", "-s", "main", "-n", "one", "-x", "120", "-y", "45",
         "-c", str(project), line)  # fmt: skip
    tmux("pipe-pane", "-o", "-t", "main:one", f"cat >> {raw}")
    tmux.wait(lambda: "enter sends" in tmux.screen(), "the TUI")
    tmux("send-keys", "-t", "main:one", "-l", "run it")
    tmux("send-keys", "-t", "main:one", "Enter")
    tmux.wait(lambda: "Allow bash?" in tmux.screen(), "the approval dialog")
    tmux.wait(lambda: raw.exists() and NOTICE in raw.read_bytes(), "the notification's bytes")
    # The worker decided the desktop before the TUI was told: a TUI is attached, so not there.
    assert not desktop.exists()
    # The dialog is answered; the turn's end is not a terminal event by default.
    tmux.wait(  # the whole box, armed (the only dialog of this pane: no older key line)
        lambda: any(
            "Allow bash?" in " ".join(rows) and "enter answers" in key_line(rows)
            for rows in dialog_boxes(tmux.screen())
        ),
        "the armed dialog",
    )
    tmux("send-keys", "-t", "main:one", "Enter")
    tmux.wait(lambda: "All done." in tmux.screen(), "the answer")
    tmux("send-keys", "-t", "main:one", "-l", "/stop")
    tmux("send-keys", "-t", "main:one", "Enter")
    tmux.wait(lambda: "EXITED 0" in tmux.screen(), "the TUI's exit")
    written = raw.read_bytes()
    assert written.count(NOTICE) == 1
    assert written.count(b"]9;") == 1  # nothing else notified
