"""The crash tests' child processes (pico3's task, job and indexer crash tests, the indexer
feature's): a Python script run with its arguments, which prints a line once it reached the
point the test wants (``parked ...``: killed there; ``done ...``: recovered), then is SIGKILLed
or left to exit.

Reading never hangs: a child that goes silent for :data:`TIMEOUT` seconds, or exits before its
line, fails the test with what it wrote to stderr.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
from pathlib import Path

TIMEOUT = 30.0
"""How long a child may take to print its line, or to exit."""


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


def child_line(script: Path, *args: str | os.PathLike[str], kill: bool) -> str:
    """Run ``script`` with ``args`` and return the first line it prints. Then ``kill``: SIGKILL
    it (a crash at that point) and check it died of it; else check it exits 0 by itself. The
    child is gone and its pipes closed when this returns, whatever failed."""
    proc = subprocess.Popen(
        [sys.executable, str(script), *map(str, args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        line = read_line(proc)
        if kill:
            os.kill(proc.pid, signal.SIGKILL)
            assert proc.wait(timeout=TIMEOUT) == -signal.SIGKILL
        else:
            assert proc.wait(timeout=TIMEOUT) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
    return line
