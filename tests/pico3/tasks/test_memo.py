"""Memos on task slots: first writer wins, presence semantics, retired with the task
(docs/design/harness.md#durable-primitives, #memos)."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from chord.context import BACKGROUND, Context
from pico3.harness import Harness
from pico3.kernel import Transaction, memo_once
from pico3.tasks import Completion, Done, Runtime, TaskInfo, define_task

pytestmark = pytest.mark.anyio
ctx = BACKGROUND


async def noop_abort(task: TaskInfo, rt: Runtime, ctx: Context) -> Any:
    return lambda tx, cur, c: None


def memo(rt: Runtime, key: str, candidate: Any, ctx: Context) -> Any:
    return rt.commit(lambda tx, cur, _c: memo_once(tx.slot(cur), key, candidate), ctx)


async def test_concurrent_memo_writers_receive_the_same_winner(harness: Harness) -> None:  # 1
    winners: list[Any] = []

    async def initial(task: TaskInfo, rt: Runtime, ctx: Context) -> Done:
        async with anyio.create_task_group() as tg:
            for candidate in ("a", "b", "c"):

                async def write(value: str = candidate) -> None:
                    winners.append(await memo(rt, "answer", value, ctx))

                tg.start_soon(write)
        return Done(lambda tx, cur, c: Completion.completed(None))

    kind = define_task("test.memo", initial=initial, phases={}, abort=noop_abort)
    harness.register_task_kind(kind)
    await harness.resume(ctx)
    c = await harness.root(ctx)
    await harness.wait_for_task(await c.commit(lambda tx, _c: tx.create_task(kind, None), ctx), ctx)
    assert len(winners) == 3 and len(set(winners)) == 1


async def test_none_is_a_stored_memo_value(harness: Harness) -> None:  # 2
    got: list[Any] = []

    async def initial(task: TaskInfo, rt: Runtime, ctx: Context) -> Done:
        got.append(await memo(rt, "k", None, ctx))
        got.append(await memo(rt, "k", "later", ctx))
        return Done(lambda tx, cur, c: Completion.completed(None))

    kind = define_task("test.none", initial=initial, phases={}, abort=noop_abort)
    harness.register_task_kind(kind)
    await harness.resume(ctx)
    c = await harness.root(ctx)
    await harness.wait_for_task(await c.commit(lambda tx, _c: tx.create_task(kind, None), ctx), ctx)
    assert got == [None, None]


async def test_memos_die_with_the_task_and_never_reach_the_view(harness: Harness) -> None:  # 5, 13
    parked, gate = anyio.Event(), anyio.Event()
    seen: list[Any] = []

    async def initial(task: TaskInfo, rt: Runtime, ctx: Context) -> Done:
        seen.append(await rt.commit(lambda tx, cur, _c: tx.slot(cur).to_plain(), ctx))
        await memo(rt, "k", {"secret": "token-123"}, ctx)
        parked.set()
        await gate.wait()
        return Done(lambda tx, cur, c: Completion.completed(None))

    kind = define_task(
        "test.retire", initial=initial, phases={}, abort=noop_abort, slot=lambda i: {"progress": 0}
    )
    harness.register_task_kind(kind)
    await harness.resume(ctx)
    c = await harness.root(ctx)
    first = await c.commit(lambda tx, _c: tx.create_task(kind, None), ctx)
    await parked.wait()
    view = (await c.watch(ctx)).view
    assert "token-123" not in str(view)
    assert view["tasks"][str(first)]["status"] == {"phase": "running"}
    gate.set()
    await harness.wait_for_task(first, ctx)
    assert str(first) not in (await c.sticky(ctx)).get("tasks", {})
    parked, gate = anyio.Event(), anyio.Event()
    gate.set()
    second = await c.commit(lambda tx, _c: tx.create_task(kind, None), ctx)
    await harness.wait_for_task(second, ctx)
    assert seen == [{"progress": 0}, {"progress": 0}]  # a later task starts with an empty slot


async def test_hosts_cannot_reach_slots(harness: Harness) -> None:
    from pico3.kernel import Forbidden

    kind = define_task(
        "test.slotless", initial=lambda t, r, c: _never(), phases={}, abort=noop_abort
    )
    harness.register_task_kind(kind)
    c = await harness.root(ctx)
    task_id = await c.commit(lambda tx, _c: tx.create_task(kind, None), ctx)

    def peek(tx: Transaction, _c: Context) -> Any:
        return tx.slot(task_id)

    with pytest.raises(Forbidden):
        await c.commit(peek, ctx)


async def _never() -> Any:
    raise AssertionError("never runs")
