"""A real crash inside the indexer's in-flight phase (docs/design/harness.md#task-kinds;
issue 6 crash tests).

A child process runs the seed indexer on JSONL storage and is SIGKILLed after the first batch's
effect and before the next checkpoint, the worst case of docs/design/storage.md#worst-cases. A second child reopens
the session: recovery enters the in-flight phase ``writing``, which repeats the write *with the
same key*; the fake idempotent sink sees that key twice and keeps one logical write.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
from pathlib import Path

CHILD = Path(__file__).with_name("_indexer_crash_child.py")
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


def run_child(directory: Path, stage: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, str(CHILD), str(directory), stage],
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


def deliveries(sink: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in sink.read_text().splitlines()]


def test_sigkill_inside_the_inflight_phase_repeats_the_keyed_effect_after_reopen(
    tmp_path: Path,
) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    for name in ("a.py", "b.py", "c.py"):
        (repo / name).write_text(name)

    proc = run_child(tmp_path, "park")
    try:
        assert read_line(proc) == "parked b.py"  # effect done, next checkpoint not yet
        os.kill(proc.pid, signal.SIGKILL)
        assert proc.wait(timeout=TIMEOUT) == -signal.SIGKILL
    finally:
        finish(proc)
    assert deliveries(tmp_path / "sink") == [{"key": "b.py", "files": ["a.py", "b.py"]}]

    proc = run_child(tmp_path, "recover")
    try:
        line = read_line(proc)
        assert proc.wait(timeout=TIMEOUT) == 0
    finally:
        finish(proc)
    assert line.startswith("done ")
    outcome = json.loads(line.removeprefix("done "))
    # As the example is written, `writing`'s recovery does not re-count the batch's files.
    assert outcome == {"status": "completed", "result": {"files": 1}}
    assert deliveries(tmp_path / "sink") == [
        {"key": "b.py", "files": ["a.py", "b.py"]},
        {"key": "b.py", "files": None},  # the in-flight phase's recovery write: same key
        {"key": "c.py", "files": ["c.py"]},
    ]
    logical = {record["key"] for record in deliveries(tmp_path / "sink")}
    assert logical == {"b.py", "c.py"}  # one logical write per key
