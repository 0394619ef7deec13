"""Edges of the task contract: abort invocations may not create or checkpoint, scans after task
writes poison, a raising ``describe`` leaves only its record, storage faults reject waiters,
orphans' owned work is marked at resume (docs/design/harness.md#read-rules, docs/design/storage.md#open-and-resume, docs/design/harness.md#abort, #waiters, docs/design/decisions.md#d8-g21)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import anyio
import pytest

from chord.context import BACKGROUND, Context
from pico3.harness import Harness, HarnessOptions
from pico3.kernel import Authority, Faulted, Forbidden, ReadAfterWrite, Transaction
from pico3.storage import MemoryStorage, Task, Write
from pico3.tasks import Completion, Done, Runtime, TaskInfo, define_task

pytestmark = pytest.mark.anyio
ctx = BACKGROUND


async def finish(task: TaskInfo, rt: Runtime, ctx: Context) -> Done:
    return Done(lambda tx, cur, c: Completion.completed(None))


async def noop_abort(task: TaskInfo, rt: Runtime, ctx: Context) -> Any:
    return lambda tx, cur, c: None


async def test_an_abort_invocation_cannot_checkpoint_create_or_write(harness: Harness) -> None:
    errors: list[str] = []
    parked = anyio.Event()

    async def initial(task: TaskInfo, rt: Runtime, ctx: Context) -> Done:
        parked.set()
        await anyio.Event().wait()
        raise AssertionError("unreachable")

    async def abort(task: TaskInfo, rt: Runtime, ctx: Context) -> Any:
        attempts = {
            "checkpoint": lambda tx, cur, _c: tx.checkpoint({"phase": "x"}),
            "create": lambda tx, cur, _c: tx.create_task(kind, None),
            "write": lambda tx, cur, _c: tx.write(cur.conversation_id, "note", data={}),
        }
        for name, attempt in attempts.items():
            try:
                await rt.commit(attempt, ctx)
            except Forbidden:
                errors.append(name)
        await rt.commit(lambda tx, cur, _c: tx.slot(cur).__setitem__("cleanup", True), ctx)
        return lambda tx, cur, c: {"cleaned": True}

    kind = define_task("test.abortrules", initial=initial, phases={"x": finish}, abort=abort)
    harness.register_task_kind(kind)
    await harness.resume(ctx)
    c = await harness.root(ctx)
    task_id = await c.commit(lambda tx, _c: tx.create_task(kind, None), ctx)
    await parked.wait()
    await harness.abort_task(task_id, ctx)
    final = await harness.wait_for_task(task_id, ctx)
    assert errors == ["checkpoint", "create", "write"]
    assert final.outcome == {"status": "aborted", "result": {"cleaned": True}}


async def test_a_task_scan_after_a_task_write_poisons_the_transaction(
    harness: Harness,
) -> None:  # 35
    kind = define_task("test.scan", initial=finish, phases={}, abort=noop_abort)
    harness.register_task_kind(kind)
    c = await harness.root(ctx)

    async def build(tx: Transaction, _c: Context) -> None:
        tx.create_task(kind, None)
        try:
            await tx.tasks()
        except ReadAfterWrite:
            pass  # caught, but the transaction stays poisoned

    with pytest.raises(ReadAfterWrite):
        await c.commit(build, ctx)
    assert await harness.kernel.commit(lambda tx, _c: tx.tasks(), ctx) == []


async def test_direct_task_reads_see_same_batch_creations_and_patches(
    harness: Harness,
) -> None:  # 36
    kind = define_task("test.read", initial=finish, phases={}, abort=noop_abort)
    harness.register_task_kind(kind)
    c = await harness.root(ctx)

    async def build(tx: Transaction, _c: Context) -> Task | None:
        task_id = tx.create_task(kind, {"a": 1})
        return await tx.task(task_id)

    record = await c.commit(build, ctx)
    assert record is not None and record.status == "pending" and record.input == {"a": 1}


async def test_a_raising_describe_drops_only_its_record_and_reports(
    harness: Harness, reports: list[BaseException]
) -> None:  # docs/design/decisions.md#d8-g21
    gate, parked = anyio.Event(), anyio.Event()

    async def park(task: TaskInfo, rt: Runtime, ctx: Context) -> Done:
        parked.set()
        await gate.wait()
        return await finish(task, rt, ctx)

    def broken(task: TaskInfo) -> Any:
        raise RuntimeError("describe bug")

    bad = define_task("test.bad", initial=park, phases={}, abort=noop_abort, describe=broken)
    good = define_task("test.good", initial=finish, phases={}, abort=noop_abort)
    harness.register_task_kind(bad)
    harness.register_task_kind(good)
    c = await harness.root(ctx)
    watch = await c.watch(ctx)
    bad_id = await c.commit(lambda tx, _c: tx.create_task(bad, None), ctx)  # the commit stands
    good_id = await c.commit(lambda tx, _c: tx.create_task(good, None, background=True), ctx)
    view = (await c.watch(ctx)).view
    assert str(bad_id) not in view["tasks"] and str(good_id) in view["tasks"]
    assert any(isinstance(r, RuntimeError) and "describe bug" in str(r) for r in reports)
    watch.stop()
    await harness.resume(ctx)
    await parked.wait()
    gate.set()
    await harness.wait_for_task(bad_id, ctx)


class FailingStorage(MemoryStorage):
    """A memory storage whose commits fail once ``fail`` is set."""

    fail = False

    async def commit(self, writes: Sequence[Write], ctx: Context) -> int:
        if self.fail:
            raise OSError("disk on fire")
        return await super().commit(writes, ctx)


async def test_a_storage_fault_rejects_waiters_with_faulted(clock: Any) -> None:  # 43
    storage = FailingStorage()
    gate = anyio.Event()

    async def park(task: TaskInfo, rt: Runtime, ctx: Context) -> Done:
        await gate.wait()
        return await finish(task, rt, ctx)

    kind = define_task("test.faulting", initial=park, phases={}, abort=noop_abort)
    h = await Harness.open(storage, HarnessOptions(clock=clock, on_report=lambda e: None), ctx)
    errors: list[BaseException] = []
    async with h:
        h.register_task_kind(kind)
        await h.resume(ctx)
        c = await h.root(ctx)
        task_id = await c.commit(lambda tx, _c: tx.create_task(kind, None), ctx)

        async def wait() -> None:
            try:
                await h.wait_for_task(task_id, ctx)
            except Faulted as exc:
                errors.append(exc)

        async with anyio.create_task_group() as tg:
            tg.start_soon(wait)
            while h.scheduler.waiters.pending < 1:
                await anyio.lowlevel.checkpoint()
            storage.fail = True
            with pytest.raises(Faulted):
                await c.write("note", ctx, data={})
        gate.set()
    assert len(errors) == 1


async def test_resume_marks_foreground_work_owned_by_an_orphan(
    storage_factory: Any, options: HarnessOptions
) -> None:  # docs/design/storage.md#open-and-resume
    owner_kind = define_task("test.owner", initial=finish, phases={}, abort=noop_abort)
    child_kind = define_task("test.ownedchild", initial=finish, phases={}, abort=noop_abort)
    h = await Harness.open(storage_factory(), options, ctx)
    async with h:
        h.register_task_kind(owner_kind)
        h.register_task_kind(child_kind)
        c = await h.root(ctx)
        owner_id = await c.commit(lambda tx, _c: tx.create_task(owner_kind, None), ctx)

        async def spawn(tx: Transaction, _c: Context) -> int:
            cid = await tx.create_conversation(owner=owner_id)
            return tx.create_task(child_kind, None, conversation_id=cid)

        child_id = await h.kernel.commit(spawn, ctx, authority=Authority.CORE)
    h2 = await Harness.open(storage_factory(), options, ctx)
    async with h2:
        h2.register_task_kind(child_kind)  # the owner's kind is gone
        assert await h2.resume(ctx) == [owner_id]
        final = await h2.wait_for_task(child_id, ctx)
    assert final.outcome == {"status": "aborted", "result": None}


async def test_live_foreground_turn_tasks_make_writes_queue(harness: Harness) -> None:  # 2.7, 48
    c = await harness.root(ctx)

    async def same_batch(tx: Transaction, _c: Context) -> tuple[bool, int]:
        before = tx.is_busy(c.id)
        tx.create_task("pi.post_tools", {"inputs": [], "assistant": 0, "tools": []})
        return before, tx.write(c.id, "note", data={"n": 1})  # busy now: queued

    before, queued = await harness.kernel.commit(
        same_batch, ctx, conversation_id=c.id, authority=Authority.CORE
    )
    assert before is False
    assert (await harness.kernel.commit(lambda tx, _c: tx.input(queued), ctx)).status == "queued"  # type: ignore[union-attr]

    other = await c.fork("start", ctx)
    await harness.kernel.commit(
        lambda tx, _c: tx.create_task("pi.post_tools", {}, background=True),
        ctx,
        conversation_id=other.id,
        authority=Authority.CORE,
    )
    landed = await other.write("note", ctx, data={"n": 2})  # background turn work: not busy
    assert (await harness.wait_for_input(landed, ctx)).status == "done"
