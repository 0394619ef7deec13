"""The harness *process* dies while a job runs; the job's process does not.

A child process runs a harness with one ``pi.job`` and is SIGKILLed once the job's ``running``
checkpoint is committed. The job's process (supervised, detached from the harness) keeps
running; the test lets it finish, then a second child reopens the session with a new
:class:`LocalProcessHost` on the same state directory: recovery enters ``running``, re-finds
the key and completes with the process's exit code. The process ran once.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import threading
from pathlib import Path

CHILD = Path(__file__).with_name("_job_crash_child.py")
TIMEOUT = 30.0


def read_line(proc: subprocess.Popen[bytes]) -> str:
    """One stdout line from the child; a silent or dead child fails the test, never hangs it."""
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    data = b""
    while not data.endswith(b"\n"):
        ready, _, _ = select.select([fd], [], [], TIMEOUT)
        assert ready, "the crash child stopped talking"
        chunk = os.read(fd, 1)
        if not chunk:
            proc.wait()
            err = proc.stderr.read().decode() if proc.stderr else ""
            raise AssertionError(f"the crash child exited: {err}")
        data += chunk
    return data.decode().strip()


def run_child(directory: Path, stage: str, gate: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, str(CHILD), str(directory), stage, str(gate)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def finish(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.kill()
        proc.wait()
    for stream in (proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()


def test_a_job_outlives_a_sigkilled_harness_and_completes_after_reopen(tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    os.mkfifo(gate)
    proc = run_child(tmp_path, "start", gate)
    try:
        line = read_line(proc)
        assert line.startswith("running ")
        os.kill(proc.pid, signal.SIGKILL)
        assert proc.wait(timeout=TIMEOUT) == -signal.SIGKILL
    finally:
        finish(proc)
    # The job's process is still there, blocked on the gate: opening it for writing returns
    # once the process has it open; closing it lets the process exit 6.
    opener = threading.Thread(target=lambda: os.close(os.open(gate, os.O_WRONLY)), daemon=True)
    opener.start()
    opener.join(TIMEOUT)
    assert not opener.is_alive(), "the job's process never reached the gate"

    proc = run_child(tmp_path, "recover", gate)
    try:
        done = read_line(proc)
        assert proc.wait(timeout=TIMEOUT) == 0
    finally:
        finish(proc)
    outcome = json.loads(done.removeprefix("done "))
    assert outcome["status"] == "completed"
    assert outcome["result"]["exitCode"] == 6
    assert (tmp_path / "count").read_text() == "x"  # started once, never re-run
