"""Real crashes: SIGKILL a process whose task is mid-phase, reopen, check recovery.

The child (``_task_crash_child.py``) runs one task on ``JsonlStorage(fsync=False)`` and parks at
a chosen point; the test SIGKILLs it there and runs the child again to recover:

* killed inside the ordinary phase ``working``: recovery re-enters ``working`` from its
  checkpoint (``initial`` never runs twice) and the effect happens once;
* killed after the in-flight checkpoint and the keyed effect: recovery enters the in-flight
  phase's handler (the recovery program), which repeats the effect *with the same key*; the
  fake idempotent sink sees the key twice, one logical write (docs/design/harness.md#task-kinds).
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
from pathlib import Path

CHILD = Path(__file__).with_name("_task_crash_child.py")
TIMEOUT = 30.0


def read_line(proc: subprocess.Popen[bytes]) -> str:
    """One stdout line from the child, with a timeout (a hung child fails, never hangs)."""
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    data = b""
    while not data.endswith(b"\n"):
        ready, _, _ = select.select([fd], [], [], TIMEOUT)
        assert ready, "the crash child stopped talking"
        chunk = os.read(fd, 1)
        assert chunk, (
            f"the crash child exited: {proc.stderr.read().decode() if proc.stderr else ''}"
        )
        data += chunk
    return data.decode().strip()


def run_child(directory: Path, stage: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, str(CHILD), str(directory), stage],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def kill_at(directory: Path, stage: str) -> None:
    proc = run_child(directory, stage)
    try:
        assert read_line(proc) == f"parked {stage}"
        os.kill(proc.pid, signal.SIGKILL)
        assert proc.wait(timeout=TIMEOUT) == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()


def recover(directory: Path) -> dict[str, object]:
    proc = run_child(directory, "recover")
    try:
        line = read_line(proc)
        assert proc.wait(timeout=TIMEOUT) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
    assert line.startswith("done ")
    return json.loads(line.removeprefix("done "))


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def test_a_task_killed_mid_phase_resumes_from_its_checkpoint(tmp_path: Path) -> None:
    kill_at(tmp_path, "phase")
    assert lines(tmp_path / "log") == ["initial", "working"]
    outcome = recover(tmp_path)
    assert lines(tmp_path / "log") == ["initial", "working", "working", "sent"]
    assert lines(tmp_path / "sink") == ["batch-2"]  # the effect ran once
    assert outcome == {"status": "completed", "result": {"key": "batch-2"}}


def test_an_inflight_phase_handler_is_the_recovery_program_after_sigkill(tmp_path: Path) -> None:
    kill_at(tmp_path, "inflight")
    assert lines(tmp_path / "sink") == ["batch-2"]
    outcome = recover(tmp_path)
    assert lines(tmp_path / "log") == ["initial", "working", "sending", "sent"]
    sink = lines(tmp_path / "sink")
    assert sink == ["batch-2", "batch-2"] and set(sink) == {
        "batch-2"
    }  # same key: one logical write
    assert outcome == {"status": "completed", "result": {"key": "batch-2"}}
