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
import threading
from pathlib import Path

from tests.crash_child import TIMEOUT, child_line

CHILD = Path(__file__).with_name("_job_crash_child.py")


def test_a_job_outlives_a_sigkilled_harness_and_completes_after_reopen(tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    os.mkfifo(gate)
    line = child_line(CHILD, tmp_path, "start", gate, kill=True)
    assert line.startswith("running ")
    # The job's process is still there, blocked on the gate: opening it for writing returns
    # once the process has it open; closing it lets the process exit 6.
    opener = threading.Thread(target=lambda: os.close(os.open(gate, os.O_WRONLY)), daemon=True)
    opener.start()
    opener.join(TIMEOUT)
    assert not opener.is_alive(), "the job's process never reached the gate"

    done = child_line(CHILD, tmp_path, "recover", gate, kill=False)
    outcome = json.loads(done.removeprefix("done "))
    assert outcome["status"] == "completed"
    assert outcome["result"]["exitCode"] == 6
    assert (tmp_path / "count").read_text() == "x"  # started once, never re-run
