"""``pi.job`` is registered by every harness, like the core kinds (docs/design/turn.md#jobs): a
stored job is never orphaned because a host forgot ``jobs.install``, and without a process host
it fails ``spawn`` / ``"no process host"`` before any checkpoint."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from chord.context import BACKGROUND
from pico3 import jobs
from pico3.harness import Harness, HarnessOptions
from pico3.jobs import JOB_KIND, job_input
from pico3.storage import JsonlStorage
from pico3.tasks.clock import ManualClock

pytestmark = pytest.mark.anyio


async def test_a_harness_registers_pi_job_and_install_is_a_no_op(tmp_path: Path) -> None:
    harness = await Harness.open(JsonlStorage(tmp_path, fsync=False), None, BACKGROUND)
    async with harness:
        assert harness.scheduler.kinds.get("pi.job") is JOB_KIND
        remove = jobs.install(harness)  # hosts written before the default keep working
        remove()
        assert harness.scheduler.kinds.get("pi.job") is JOB_KIND


async def test_a_stored_job_without_a_process_host_fails_spawn_not_orphaned(
    tmp_path: Path,
) -> None:
    options = HarnessOptions(clock=ManualClock(1_000_000))
    harness = await Harness.open(JsonlStorage(tmp_path, fsync=False), options, BACKGROUND)
    async with harness:
        root = await harness.root(BACKGROUND)
        job = job_input("true", cwd=str(tmp_path))
        task_id = await root.commit(
            lambda tx, _c: tx.create_task(JOB_KIND, job, background=True), BACKGROUND
        )
        await harness.suspend(BACKGROUND)  # stored, never dispatched

    harness = await Harness.open(JsonlStorage(tmp_path, fsync=False), options, BACKGROUND)
    async with harness:
        orphaned = await harness.resume(BACKGROUND)  # no jobs.install here
        task = await harness.wait_for_task(task_id, BACKGROUND)
    assert task_id not in orphaned
    assert task.checkpoint is msgspec.UNSET  # failed before any checkpoint
    assert task.outcome == {
        "status": "failed",
        "failure": {"reason": "spawn", "detail": "no process host"},
    }
