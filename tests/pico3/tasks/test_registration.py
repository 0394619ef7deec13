"""Registration timing: unregister keeps pending tasks pending, orphaning only at resume, resume
racing commits, terminal records after reopen (docs/design/reload.md#registrations, docs/design/storage.md#open-and-resume)."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from chord.context import BACKGROUND, Context
from pico3.harness import Harness, HarnessOptions
from pico3.tasks import Completion, Done, Runtime, TaskInfo, define_task

pytestmark = pytest.mark.anyio
ctx = BACKGROUND


def counting(name: str, runs: list[str]) -> Any:
    async def initial(task: TaskInfo, rt: Runtime, ctx: Context) -> Done:
        runs.append(name)
        return Done(lambda tx, cur, c: Completion.completed(name))

    async def abort(task: TaskInfo, rt: Runtime, ctx: Context) -> Any:
        return lambda tx, cur, c: None

    return define_task(name, initial=initial, phases={}, abort=abort)


async def test_unregistered_kind_leaves_pending_tasks_pending_until_reregistered(
    harness: Harness,
) -> None:  # 16
    runs: list[str] = []
    kind = counting("test.later", runs)
    unregister = harness.register_task_kind(kind)
    await harness.resume(ctx)
    c = await harness.root(ctx)
    release = harness.hold()  # keep the scheduler from racing the unregister below
    pending_id = await c.commit(lambda tx, _c: tx.create_task(kind, None), ctx)
    unregister()
    release()
    await harness.scheduler.wait_quiescent()
    record = await harness.get_task(pending_id, ctx)
    assert record is not None and record.status == "pending"  # not dispatched, not orphaned
    assert runs == []
    harness.register_task_kind(counting("test.later", runs))  # a new implementation
    final = await harness.wait_for_task(pending_id, ctx)
    assert final.outcome == {"status": "completed", "result": "test.later"}
    assert runs == ["test.later"]


async def test_a_task_whose_kind_is_missing_at_resume_is_orphaned_only_there(
    storage_factory: Any, options: HarnessOptions
) -> None:  # 17
    runs: list[str] = []
    h = await Harness.open(storage_factory(), options, ctx)
    async with h:
        kind = counting("test.gone", runs)
        h.register_task_kind(kind)
        c = await h.root(ctx)
        task_id = await c.commit(lambda tx, _c: tx.create_task(kind, None), ctx)
    h2 = await Harness.open(storage_factory(), options, ctx)
    async with h2:
        c2 = await h2.root(ctx)
        watch = await c2.watch(ctx)
        events: list[dict[str, Any]] = []
        watch.start(lambda env: events.extend(env.events))
        assert (await h2.get_task(task_id, ctx)).status == "pending"  # type: ignore[union-attr]
        orphaned = await h2.resume(ctx)
        assert orphaned == [task_id]
        record = await h2.get_task(task_id, ctx)
        assert record is not None and record.outcome == {"status": "orphaned"}
        assert {
            "type": "task.ended",
            "taskId": task_id,
            "kind": "test.gone",
            "outcome": "orphaned",
        } in events
    assert runs == []


@pytest.mark.parametrize("order", ["commit-first", "resume-first"])
async def test_resume_racing_a_commit_misses_nothing_and_runs_nothing_twice(
    storage_factory: Any, options: HarnessOptions, order: str
) -> None:  # 111
    runs: list[str] = []
    h = await Harness.open(storage_factory(), options, ctx)
    async with h:
        kind = counting("test.race", runs)
        h.register_task_kind(kind)
        c = await h.root(ctx)
        ids: list[int] = []

        async def create() -> None:
            ids.append(await c.commit(lambda tx, _c: tx.create_task(kind, None), ctx))

        async with anyio.create_task_group() as tg:
            if order == "commit-first":
                tg.start_soon(create)
                tg.start_soon(h.resume, ctx)
            else:
                tg.start_soon(h.resume, ctx)
                tg.start_soon(create)
        await h.wait_for_task(ids[0], ctx)
        await h.scheduler.wait_quiescent()
    assert runs == ["test.race"]


async def test_terminal_records_stay_readable_after_many_retirements_and_reopen(
    storage_factory: Any, options: HarnessOptions
) -> None:  # 119
    runs: list[str] = []
    h = await Harness.open(storage_factory(), options, ctx)
    ids: list[int] = []
    async with h:
        kind = counting("test.many", runs)
        h.register_task_kind(kind)
        await h.resume(ctx)
        c = await h.root(ctx)
        for _ in range(30):
            ids.append(await c.commit(lambda tx, _c: tx.create_task(kind, None), ctx))
        for task_id in ids:
            await h.wait_for_task(task_id, ctx)
    h2 = await Harness.open(storage_factory(), options, ctx)
    async with h2:
        for task_id in ids:
            record = await h2.wait_for_task(task_id, ctx)
            assert record.outcome == {"status": "completed", "result": "test.many"}
        sticky = await (await h2.root(ctx)).sticky(ctx)
        assert sticky.get("tasks", {}) == {}
    assert len(runs) == 30
