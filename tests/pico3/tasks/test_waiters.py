"""Waiters: wait_for_task / wait_for_input / wait_for_idle (docs/design/harness.md#waiters)."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from chord.context import BACKGROUND, Context, ContextCancelled, with_cancel
from pico3.harness import Harness
from pico3.kernel import Closed
from pico3.tasks import Completion, Done, Runtime, TaskInfo, UnknownTask, define_task

pytestmark = pytest.mark.anyio
ctx = BACKGROUND


def gated(name: str, gate: anyio.Event, started: anyio.Event | None = None) -> Any:
    async def initial(task: TaskInfo, rt: Runtime, ctx: Context) -> Done:
        if started is not None:
            started.set()
        await gate.wait()
        return Done(lambda tx, cur, c: Completion.completed(task.input))

    async def abort(task: TaskInfo, rt: Runtime, ctx: Context) -> Any:
        return lambda tx, cur, c: None

    return define_task(name, initial=initial, phases={}, abort=abort)


async def test_wait_for_a_finished_task_returns_at_once(harness: Harness) -> None:
    gate = anyio.Event()
    gate.set()
    kind = gated("test.instant", gate)
    harness.register_task_kind(kind)
    await harness.resume(ctx)
    c = await harness.root(ctx)
    task_id = await c.commit(lambda tx, _c: tx.create_task(kind, 7), ctx)
    first = await harness.wait_for_task(task_id, ctx)
    again = await harness.wait_for_task(task_id, ctx)
    assert first.outcome == again.outcome == {"status": "completed", "result": 7}
    with pytest.raises(UnknownTask):
        await harness.wait_for_task(424242, ctx)


async def test_a_cancelled_waiter_removes_only_itself(harness: Harness) -> None:  # 117
    gate = anyio.Event()
    kind = gated("test.slow", gate)
    harness.register_task_kind(kind)
    await harness.resume(ctx)
    c = await harness.root(ctx)
    task_id = await c.commit(lambda tx, _c: tx.create_task(kind, 1), ctx)
    waiters = harness.scheduler.waiters
    results: list[Any] = []
    cancel_ctx, cancel = with_cancel(ctx)

    async def cancelled_wait() -> None:
        with pytest.raises(ContextCancelled):
            await harness.wait_for_task(task_id, cancel_ctx)
        results.append("cancelled")

    async def kept_wait() -> None:
        results.append((await harness.wait_for_task(task_id, ctx)).outcome)

    async with anyio.create_task_group() as tg:
        tg.start_soon(cancelled_wait)
        tg.start_soon(kept_wait)
        while waiters.pending < 2:
            await anyio.lowlevel.checkpoint()
        cancel()
        while waiters.pending > 1:
            await anyio.lowlevel.checkpoint()
        assert (await harness.get_task(task_id, ctx)).status == "running"  # type: ignore[union-attr]
        gate.set()
    assert results == ["cancelled", {"status": "completed", "result": 1}]


async def test_an_already_cancelled_ctx_rejects_immediately(harness: Harness) -> None:  # 117
    dead, cancel = with_cancel(ctx)
    cancel()
    with pytest.raises(ContextCancelled):
        await harness.wait_for_idle(dead)
    assert harness.scheduler.waiters.pending == 0


@pytest.mark.parametrize("yields", range(6))
async def test_completion_racing_registration_never_loses_a_wakeup(
    harness: Harness, yields: int
) -> None:  # 117
    gate = anyio.Event()
    kind = gated("test.race", gate)
    harness.register_task_kind(kind)
    await harness.resume(ctx)
    c = await harness.root(ctx)
    task_id = await c.commit(lambda tx, _c: tx.create_task(kind, yields), ctx)
    got: list[Any] = []

    async def wait() -> None:
        got.append(await harness.wait_for_task(task_id, ctx))

    async with anyio.create_task_group() as tg:
        for _ in range(yields):  # let the registration land before, with, or after the end
            await anyio.lowlevel.checkpoint()
        gate.set()
        tg.start_soon(wait)
    assert got[0].outcome == {"status": "completed", "result": yields}


async def test_wait_for_idle_ignores_background_work(harness: Harness) -> None:
    fg_gate, bg_gate = anyio.Event(), anyio.Event()
    fg, bg = gated("test.fgw", fg_gate), gated("test.bgw", bg_gate)
    harness.register_task_kind(fg)
    harness.register_task_kind(bg)
    await harness.resume(ctx)
    c = await harness.root(ctx)
    await c.commit(
        lambda tx, _c: (tx.create_task(fg, 1), tx.create_task(bg, 2, background=True)), ctx
    )
    idle = anyio.Event()

    async def wait_idle() -> None:
        await c.wait_for_idle(ctx)
        idle.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(wait_idle)
        while harness.scheduler.waiters.pending < 1:
            await anyio.lowlevel.checkpoint()
        assert not idle.is_set()
        fg_gate.set()
    assert idle.is_set()
    bg_gate.set()
    await harness.wait_for_idle(ctx)


async def test_wait_for_input_resolves_when_the_input_is_terminal(harness: Harness) -> None:
    c = await harness.root(ctx)
    input_id = await c.write("note", ctx, data={"x": 1})
    record = await harness.wait_for_input(input_id, ctx)
    assert record.status == "done"


async def test_waiters_reject_closed_when_the_session_closes(
    storage_factory: Any, options: Any
) -> None:
    gate = anyio.Event()
    h = await Harness.open(storage_factory(), options, ctx)
    errors: list[BaseException] = []
    async with h:
        kind = gated("test.closing", gate)
        h.register_task_kind(kind)
        await h.resume(ctx)
        c = await h.root(ctx)
        task_id = await c.commit(lambda tx, _c: tx.create_task(kind, 1), ctx)

        async def wait() -> None:
            try:
                await h.wait_for_task(task_id, ctx)
            except Closed as exc:
                errors.append(exc)

        async with anyio.create_task_group() as tg:
            tg.start_soon(wait)
            while h.scheduler.waiters.pending < 1:
                await anyio.lowlevel.checkpoint()
            await h.close(ctx)
    assert len(errors) == 1
    reopened = await Harness.open(storage_factory(), options, ctx)
    record = await reopened.get_task(task_id, ctx)
    assert record is not None and record.status == "running"  # close never terminalizes
    await reopened.close(ctx)
