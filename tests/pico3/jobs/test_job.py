"""``pi.job`` with a real process host (docs/design/turn.md#jobs)."""

from __future__ import annotations

import signal
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from chord.context import BACKGROUND
from pico3.handle import HarnessHandle
from pico3.jobs import JOB_KIND, KILL_GRACE_MS, job_input
from pico3.process_host import KillSignal, LocalProcessHost, ProcessSpec, ProcessStatus
from pico3.tasks import ManualClock

pytestmark = pytest.mark.anyio
ctx = BACKGROUND
PY = sys.executable


async def create_job(handle: HarnessHandle, code: str, cwd: Path, **options: Any) -> int:
    job = job_input(PY, ["-c", code], cwd=str(cwd), **options)
    c = await handle.harness.root(ctx)
    return await c.commit(lambda tx, _c: tx.create_task(JOB_KIND, job, background=True), ctx)


async def finished(handle: HarnessHandle, task_id: int) -> dict[str, Any]:
    task = await handle.harness.wait_for_task(task_id, ctx)
    assert isinstance(task.outcome, dict)
    return task.outcome


async def notices(handle: HarnessHandle) -> list[Any]:
    c = await handle.harness.root(ctx)
    entries = await c.commit(lambda tx, _c: tx.scan_entries(c.id, limit=50, kind="pi.notice"), ctx)
    return [e.data for e in reversed(entries)]


def phase_is(handle: HarnessHandle, task_id: int, phase: str, **fields: Any) -> Any:
    async def check() -> bool:
        task = await handle.harness.get_task(task_id, ctx)
        checkpoint = getattr(task, "checkpoint", None)
        if not isinstance(checkpoint, dict) or checkpoint.get("phase") != phase:
            return False
        return all(checkpoint.get(k) == v for k, v in fields.items())

    return check


class RecordingHost(LocalProcessHost):
    """The real host, with every call appended to ``log`` (and optional failures)."""

    def __init__(self, state: Path, log: list[Any], *, fail: str | None = None) -> None:
        super().__init__(state)
        self.log = log
        self.fail = fail
        self.killed = anyio.Event()

    async def start(self, key: str, spec: ProcessSpec, ctx: Any) -> None:
        self.log.append(("start", key))
        await super().start(key, spec, ctx)

    async def status(self, key: str, ctx: Any) -> ProcessStatus:
        self.log.append(("status", key))
        if self.fail == "status":
            raise OSError("the host lost its state directory")
        if self.fail == "forgetful":
            return ProcessStatus.unknown()
        if self.fail == "lost":  # started where this host cannot reach (another machine)
            return ProcessStatus(state="lost", detail=f"{key} ran on a machine that is gone")
        return await super().status(key, ctx)

    async def kill(self, key: str, signal: KillSignal, ctx: Any) -> None:
        self.log.append(("kill", key, signal))
        self.killed.set()
        if self.fail == "kill":
            raise PermissionError("operation not permitted")
        await super().kill(key, signal, ctx)


async def test_a_job_completes_with_exit_code_output_and_an_idle_notice(
    handle: HarnessHandle, tmp_path: Path
) -> None:
    # an idle job notice appends immediately.
    code = "import sys; print('hi'); print('oops', file=sys.stderr); sys.exit(3)"
    task_id = await create_job(handle, code, tmp_path, notify=True)
    outcome = await finished(handle, task_id)
    assert outcome == {
        "status": "completed",
        "result": {"exitCode": 3, "occurrences": 1, "stdout": "hi\n", "stderr": "oops\n"},
    }
    assert await notices(handle) == [{"job": task_id, "occurrence": 1, "exitCode": 3}]
    c = await handle.harness.root(ctx)
    sticky = await c.sticky(ctx)
    assert str(task_id) not in sticky.get("tasks", {})  # the slot retired with the task


async def test_spawning_is_committed_before_start_and_running_after(
    open_session: Any,
    record_checkpoints: Any,
    storage_factory: Any,
    clock: ManualClock,
    reports: list[BaseException],
    tmp_path: Path,
) -> None:
    log: list[Any] = []
    with RecordingHost(tmp_path / "p", log) as host:
        async with open_session(storage_factory, clock, reports, host) as handle:
            record_checkpoints(handle, log)
            task_id = await create_job(handle, "pass", tmp_path)
            await finished(handle, task_id)
    assert log[:3] == [
        ("checkpoint", task_id, "spawning"),
        ("start", f"{task_id}:1"),
        ("checkpoint", task_id, "running"),
    ]


async def test_without_a_process_host_a_job_fails_spawn_before_any_checkpoint(
    open_session: Any,
    record_checkpoints: Any,
    storage_factory: Any,
    clock: ManualClock,
    reports: list[BaseException],
    tmp_path: Path,
) -> None:
    log: list[Any] = []
    async with open_session(storage_factory, clock, reports, None) as handle:
        record_checkpoints(handle, log)
        task_id = await create_job(handle, "pass", tmp_path)
        outcome = await finished(handle, task_id)
    assert outcome == {
        "status": "failed",
        "failure": {"reason": "spawn", "detail": "no process host"},
    }
    assert log == []


async def test_a_refused_start_fails_spawn_with_a_notice(
    handle: HarnessHandle, tmp_path: Path
) -> None:
    job = job_input(str(tmp_path / "missing"), cwd=str(tmp_path), notify=True)
    c = await handle.harness.root(ctx)
    task_id = await c.commit(lambda tx, _c: tx.create_task(JOB_KIND, job, background=True), ctx)
    outcome = await finished(handle, task_id)
    assert outcome["status"] == "failed"
    assert outcome["failure"]["reason"] == "spawn"
    assert "missing" in outcome["failure"]["detail"]
    assert await notices(handle) == [{"job": task_id, "failure": "spawn"}]


async def test_a_raising_status_fails_interrupted_without_rerun(
    open_session: Any,
    storage_factory: Any,
    clock: ManualClock,
    reports: list[BaseException],
    tmp_path: Path,
) -> None:
    # even with rerun set, a raising status never starts again.
    log: list[Any] = []
    with RecordingHost(tmp_path / "p", log, fail="status") as host:
        async with open_session(storage_factory, clock, reports, host) as handle:
            task_id = await create_job(handle, "pass", tmp_path, rerun=True)
            outcome = await finished(handle, task_id)
    assert outcome["failure"]["reason"] == "interrupted"
    assert [entry for entry in log if entry[0] == "start"] == [("start", f"{task_id}:1")]


async def test_a_running_job_survives_suspend_and_reopen_and_completes_with_its_exit_code(
    handle: HarnessHandle,
    host: LocalProcessHost,
    gates: Any,
    until: Any,
    tmp_path: Path,
) -> None:
    # Reload / : the process keeps running across the suspend; the
    # reopened task re-finds it by key (no `unknown`) and completes with its exit code.
    gate = gates["job"]
    counter = tmp_path / "count"
    code = f"open({str(counter)!r}, 'a').write('x'); {gate.reader}; raise SystemExit(4)"
    task_id = await create_job(handle, code, tmp_path)
    await until(handle, phase_is(handle, task_id, "running"))
    await gate.opened()
    assert not handle.quiescent()  # a polling job is an invocation
    await handle.suspend(ctx)
    status = await host.status(f"{task_id}:1", ctx)
    assert status.state == "running"
    await handle.reopen(ctx)
    await gate.release()
    outcome = await finished(handle, task_id)
    assert outcome["result"]["exitCode"] == 4
    assert counter.read_text() == "x"  # started once, re-found after the reopen


@pytest.mark.parametrize("rerun", [False, True])
async def test_a_key_the_host_does_not_know_fails_interrupted_unless_rerun(
    open_session: Any,
    storage_factory: Any,
    clock: ManualClock,
    reports: list[BaseException],
    gates: Any,
    until: Any,
    tmp_path: Path,
    rerun: bool,
) -> None:
    # reopen with a host that has no record of the key (an in-memory host after a
    # restart behaves so).
    gate = gates["unknown"]
    mark = tmp_path / "second-run"
    code = f"import os; os.path.exists({str(mark)!r}) or {gate.reader}; print('ran')"
    with LocalProcessHost(tmp_path / "first") as first:
        async with open_session(storage_factory, clock, reports, first) as handle:
            task_id = await create_job(handle, code, tmp_path, rerun=rerun)
            await until(handle, phase_is(handle, task_id, "running"))
            await handle.suspend(ctx)
        await gate.release()
        mark.touch()
    with LocalProcessHost(tmp_path / "second") as second:
        async with open_session(storage_factory, clock, reports, second) as handle:
            outcome = await finished(handle, task_id)
        if rerun:
            assert outcome["status"] == "completed"
            assert outcome["result"]["stdout"] == "ran\n"
            assert (await second.status(f"{task_id}:1", ctx)).state == "exited"  # same key
        else:
            assert outcome["status"] == "failed"
            assert outcome["failure"]["reason"] == "interrupted"
            assert (await second.status(f"{task_id}:1", ctx)).state == "unknown"


async def test_a_lost_key_fails_interrupted_and_is_never_started_again_even_with_rerun(
    open_session: Any,
    storage_factory: Any,
    clock: ManualClock,
    reports: list[BaseException],
    tmp_path: Path,
) -> None:
    log: list[Any] = []
    with RecordingHost(tmp_path / "p", log, fail="lost") as host:
        async with open_session(storage_factory, clock, reports, host) as handle:
            task_id = await create_job(handle, "pass", tmp_path, rerun=True, notify=True)
            outcome = await finished(handle, task_id)
            seen = await notices(handle)
    assert outcome["failure"]["reason"] == "interrupted"
    assert "ran on a machine that is gone; it is not started again" in outcome["failure"]["detail"]
    key = f"{task_id}:1"
    assert [e for e in log if e[0] == "start"] == [("start", key)]  # the first start only
    assert [n["failure"] for n in seen] == ["interrupted"]


async def test_a_host_that_forgets_a_restarted_key_again_fails_interrupted(
    open_session: Any,
    storage_factory: Any,
    clock: ManualClock,
    reports: list[BaseException],
    tmp_path: Path,
) -> None:
    # rerun starts the key once more; unknown right after that start ends the job (no loop).
    log: list[Any] = []
    with RecordingHost(tmp_path / "p", log, fail="forgetful") as host:
        async with open_session(storage_factory, clock, reports, host) as handle:
            task_id = await create_job(handle, "pass", tmp_path, rerun=True)
            outcome = await finished(handle, task_id)
    assert outcome["failure"]["reason"] == "interrupted"
    assert "again" in outcome["failure"]["detail"]
    key = f"{task_id}:1"
    assert [e for e in log if e[0] == "start"] == [("start", key), ("start", key)]


async def test_aborting_a_job_without_a_key_kills_nothing(
    open_session: Any,
    storage_factory: Any,
    clock: ManualClock,
    reports: list[BaseException],
    until: Any,
    tmp_path: Path,
) -> None:
    log: list[Any] = []
    with RecordingHost(tmp_path / "p", log) as host:
        async with open_session(storage_factory, clock, reports, host) as handle:
            task_id = await create_job(handle, "pass", tmp_path, not_before=clock.now() + 60_000)
            await until(handle, phase_is(handle, task_id, "waiting"))
            assert await handle.harness.abort_task(task_id, ctx) == "marked"
            outcome = await finished(handle, task_id)
    assert outcome == {"status": "aborted", "result": {"killed": False}}
    assert log == []


async def test_abort_sends_term_waits_the_grace_period_then_kill(
    open_session: Any,
    storage_factory: Any,
    clock: ManualClock,
    reports: list[BaseException],
    gates: Any,
    until: Any,
    tmp_path: Path,
) -> None:
    # TERM, 5 s (on the harness clock), KILL.
    gate = gates["stubborn"]
    code = f"import signal; signal.signal(signal.SIGTERM, signal.SIG_IGN); {gate.reader}"
    log: list[Any] = []
    with RecordingHost(tmp_path / "p", log) as host:
        async with open_session(storage_factory, clock, reports, host) as handle:
            task_id = await create_job(handle, code, tmp_path)
            await until(handle, phase_is(handle, task_id, "running"))
            await gate.opened()
            await handle.harness.abort_task(task_id, ctx)
            await host.killed.wait()
            await clock.wait_for_sleepers(1)  # the abort waits out the grace period
            key = f"{task_id}:1"
            assert [e for e in log if e[0] == "kill"] == [("kill", key, "SIGTERM")]
            assert (await host.status(key, ctx)).state == "running"  # TERM was ignored
            clock.advance(KILL_GRACE_MS)
            outcome = await finished(handle, task_id)
            assert outcome == {"status": "aborted", "result": {"killed": True}}
            assert [e for e in log if e[0] == "kill"] == [
                ("kill", key, "SIGTERM"),
                ("kill", key, "SIGKILL"),
            ]
            assert (await host.wait(key, ctx)).exit_code == -signal.SIGKILL


async def test_abort_of_a_process_that_honours_term_needs_no_grace(
    handle: HarnessHandle, host: LocalProcessHost, gates: Any, until: Any, tmp_path: Path
) -> None:
    gate = gates["polite"]
    task_id = await create_job(handle, gate.reader, tmp_path)
    await until(handle, phase_is(handle, task_id, "running"))
    await gate.opened()
    await handle.harness.abort_task(task_id, ctx)
    outcome = await finished(handle, task_id)  # no clock advance needed
    assert outcome == {"status": "aborted", "result": {"killed": True}}
    assert (await host.wait(f"{task_id}:1", ctx)).exit_code == -signal.SIGTERM


async def test_a_kill_failure_is_a_failing_abort(
    open_session: Any,
    storage_factory: Any,
    clock: ManualClock,
    reports: list[BaseException],
    gates: Any,
    until: Any,
    tmp_path: Path,
) -> None:
    # the abort fails (a contract fault), it never claims a kill.
    gate = gates["unkillable"]
    log: list[Any] = []
    with RecordingHost(tmp_path / "p", log, fail="kill") as host:
        async with open_session(storage_factory, clock, reports, host) as handle:
            task_id = await create_job(handle, gate.reader, tmp_path)
            await until(handle, phase_is(handle, task_id, "running"))
            await handle.harness.abort_task(task_id, ctx)
            outcome = await finished(handle, task_id)
        await gate.release()
    assert outcome["status"] == "faulted"
    assert "operation not permitted" in outcome["error"]


async def test_a_recurring_job_notices_each_occurrence_and_abort_ends_the_schedule(
    handle: HarnessHandle,
    host: LocalProcessHost,
    clock: ManualClock,
    until: Any,
    tmp_path: Path,
) -> None:
    start = clock.now()
    task_id = await create_job(handle, "print('tick')", tmp_path, notify=True, every=60_000)
    await until(handle, phase_is(handle, task_id, "waiting", occurrence=2))
    task = await handle.harness.get_task(task_id, ctx)
    assert task is not None and task.checkpoint == {
        "phase": "waiting",
        "untilMs": start + 60_000,
        "occurrence": 2,
    }
    assert await notices(handle) == [{"job": task_id, "occurrence": 1, "exitCode": 0}]
    clock.advance(60_000)
    await until(handle, phase_is(handle, task_id, "waiting", occurrence=3))
    assert [n["occurrence"] for n in await notices(handle)] == [1, 2]
    await handle.harness.abort_task(task_id, ctx)
    outcome = await finished(handle, task_id)
    assert outcome == {"status": "aborted", "result": {"killed": False}}
    assert (await host.status(f"{task_id}:3", ctx)).state == "unknown"


async def test_a_recurring_job_runs_once_after_downtime_never_a_backlog(
    handle: HarnessHandle,
    host: LocalProcessHost,
    clock: ManualClock,
    until: Any,
    tmp_path: Path,
) -> None:
    # (no backlog).
    every = 60_000
    task_id = await create_job(handle, "print('tick')", tmp_path, every=every)
    await until(handle, phase_is(handle, task_id, "waiting", occurrence=2))
    await handle.suspend(ctx)
    clock.advance(10 * every)  # ten periods of downtime
    await handle.reopen(ctx)
    await until(handle, phase_is(handle, task_id, "waiting", occurrence=3))
    task = await handle.harness.get_task(task_id, ctx)
    assert task is not None and task.checkpoint is not None
    assert task.checkpoint["untilMs"] == clock.now() + every
    assert (await host.status(f"{task_id}:2", ctx)).state == "exited"
    assert (await host.status(f"{task_id}:3", ctx)).state == "unknown"
    await handle.harness.abort_task(task_id, ctx)
    await finished(handle, task_id)


async def test_recovery_from_waiting_sleeps_to_the_stored_deadline(
    handle: HarnessHandle,
    host: LocalProcessHost,
    clock: ManualClock,
    until: Any,
    tmp_path: Path,
) -> None:
    deadline = clock.now() + 10_000
    task_id = await create_job(handle, "print('late')", tmp_path, not_before=deadline)
    await until(handle, phase_is(handle, task_id, "waiting"))
    await handle.suspend(ctx)
    await handle.reopen(ctx)
    await clock.wait_for_sleepers(1)
    clock.advance(9_999)
    assert clock.sleepers == 1  # still asleep one millisecond before the deadline
    assert (await host.status(f"{task_id}:1", ctx)).state == "unknown"
    clock.advance(1)
    outcome = await finished(handle, task_id)
    assert outcome["result"]["stdout"] == "late\n"


async def test_the_view_describes_a_running_job_with_its_mirrored_output(
    handle: HarnessHandle, clock: ManualClock, gates: Any, until: Any, tmp_path: Path
) -> None:
    # describe = {stage, ...slot}.
    gate = gates["view"]
    task_id = await create_job(handle, f"print('ready', flush=True); {gate.reader}", tmp_path)
    await until(handle, phase_is(handle, task_id, "running"))
    await gate.opened()  # 'ready' is printed
    clock.advance(1_000)  # the next poll mirrors it

    async def mirrored() -> Any:
        c = await handle.harness.root(ctx)
        watch = await c.watch(ctx)
        watch.stop()
        record = watch.view["tasks"].get(str(task_id))
        return record if record and record["status"].get("stdout") == "ready\n" else None

    record = await until(handle, mirrored)
    assert record == {
        "kind": "pi.job",
        "background": True,
        "status": {
            "stage": "running",
            "stdout": "ready\n",
            "stderr": "",
            "droppedStdout": 0,
            "droppedStderr": 0,
            "occurrence": 1,
        },
    }
    await gate.release()
    await finished(handle, task_id)


def test_job_input_refuses_bad_fields_by_name() -> None:
    with pytest.raises(ValueError, match=r"input\.command"):
        job_input("", cwd=".")
    with pytest.raises(ValueError, match=r"input\.every"):
        job_input("x", cwd=".", every=0)
    with pytest.raises(ValueError, match=r"input\.env"):
        job_input("x", cwd=".", env={"A": 1})  # type: ignore[dict-item]


async def test_a_job_created_with_a_bad_input_fails_spawn_naming_the_field(
    handle: HarnessHandle,
) -> None:
    c = await handle.harness.root(ctx)
    task_id = await c.commit(
        lambda tx, _c: tx.create_task(JOB_KIND, {"command": "x"}, background=True), ctx
    )
    outcome = await finished(handle, task_id)
    assert outcome["failure"]["reason"] == "spawn"
    assert "input.cwd" in outcome["failure"]["detail"]


async def test_a_conversation_abort_leaves_a_background_job_running(
    handle: HarnessHandle, gates: Any, until: Any, tmp_path: Path
) -> None:
    # docs/design/harness.md#namespaces: background work (jobs) survives a conversation abort.
    gate = gates["survivor"]
    task_id = await create_job(handle, f"{gate.reader}; print('still here')", tmp_path)
    await until(handle, phase_is(handle, task_id, "running"))
    root = await handle.harness.root(ctx)
    await root.abort(ctx)
    task = await handle.harness.get_task(task_id, ctx)
    assert task is not None and task.status == "running" and task.abort is not True
    await gate.release()
    outcome = await finished(handle, task_id)
    assert outcome["result"]["stdout"] == "still here\n"
