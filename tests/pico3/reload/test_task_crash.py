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
from pathlib import Path

from tests.crash_child import child_line

CHILD = Path(__file__).with_name("_task_crash_child.py")


def kill_at(directory: Path, stage: str) -> None:
    assert child_line(CHILD, directory, stage, kill=True) == f"parked {stage}"


def recover(directory: Path) -> dict[str, object]:
    line = child_line(CHILD, directory, "recover", kill=False)
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
