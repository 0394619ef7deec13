"""Quiescence, hold, suspend and reopen (docs/design/harness.md#scheduler,
docs/design/reload.md#quiescent-reload, #suspend-and-reopen, docs/design/decisions.md#d8-g7, #d8-g8)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
import pytest

from chord.context import BACKGROUND, Context
from pico3.handle import HarnessHandle
from pico3.harness import Harness, HarnessOptions
from pico3.kernel import Authority, Transaction, memo_once
from pico3.registration_swap import reload
from pico3.storage import Storage
from pico3.tasks import Completion, Done, Next, NotQuiescent, Runtime, TaskInfo, define_task

pytestmark = pytest.mark.anyio
ctx = BACKGROUND


async def noop_abort(task: TaskInfo, rt: Runtime, ctx: Context) -> Any:
    return lambda tx, cur, c: None


class Worker:
    """A two-phase kind whose ``working`` handler parks until released; counts entries."""

    def __init__(self, name: str = "test.worker") -> None:
        self.entries: list[str] = []
        self.parked = anyio.Event()
        self.gate = anyio.Event()
        self.name = name

    def kind(self) -> Any:
        async def initial(task: TaskInfo, rt: Runtime, ctx: Context) -> Next:
            self.entries.append("initial")
            return Next({"phase": "working", "step": 1})

        async def working(task: TaskInfo, rt: Runtime, ctx: Context) -> Done:
            self.entries.append(f"working:{task.checkpoint['step']}")  # type: ignore[index]
            self.parked.set()
            await self.gate.wait()
            return Done(lambda tx, cur, c: Completion.completed(self.entries[-1]))

        return define_task(
            self.name, initial=initial, phases={"working": working}, abort=noop_abort
        )


async def test_quiescent_is_false_while_an_invocation_exists(harness: Harness) -> None:  # 27
    worker = Worker()
    harness.register_task_kind(worker.kind())
    await harness.resume(ctx)
    assert harness.quiescent()
    c = await harness.root(ctx)
    kind = harness.scheduler.kinds.get("test.worker")
    task_id = await c.commit(lambda tx, _c: tx.create_task(kind, None), ctx)
    await worker.parked.wait()
    assert not harness.quiescent()
    with pytest.raises(NotQuiescent):
        harness.hold()
    worker.gate.set()
    await harness.wait_for_task(task_id, ctx)
    await harness.scheduler.wait_quiescent()
    assert harness.quiescent()


async def test_hold_defers_dispatch_but_not_commits_and_release_resumes(
    harness: Harness,
) -> None:  # 28
    worker = Worker()
    worker.gate.set()
    kind = worker.kind()
    harness.register_task_kind(kind)
    await harness.resume(ctx)
    release = harness.hold()
    inner = harness.hold()  # holds nest
    c = await harness.root(ctx)
    task_id = await c.commit(lambda tx, _c: tx.create_task(kind, None), ctx)
    await c.write("note", ctx, data={"during": "hold"})  # commits and reads continue
    assert (await c.context(ctx)) is not None
    await harness.scheduler.wait_quiescent()
    assert worker.entries == []
    assert (await harness.get_task(task_id, ctx)).status == "pending"  # type: ignore[union-attr]
    inner()
    inner()  # idempotent
    assert worker.entries == []
    release()
    final = await harness.wait_for_task(task_id, ctx)
    assert final.outcome == {"status": "completed", "result": "working:1"}


async def test_suspend_keeps_records_live_and_reopen_resumes_from_the_checkpoint(
    storage_factory: Callable[[], Storage], options: HarnessOptions
) -> None:  # docs/design/reload.md#registrations
    first, second = Worker(), Worker()
    async with HarnessHandle(storage_factory, options) as handle:
        remove = handle.add_registration(lambda h: h.register_task_kind(first.kind()))
        await handle.open(ctx)
        h = handle.harness
        c = await h.root(ctx)
        kind = h.scheduler.kinds.get("test.worker")
        task_id = await c.commit(lambda tx, _c: tx.create_task(kind, None), ctx)
        await first.parked.wait()
        await handle.suspend(ctx)
        assert not handle.is_open
        remove()
        handle.add_registration(lambda h: h.register_task_kind(second.kind()))
        await handle.reopen(ctx)
        second.gate.set()
        final = await handle.harness.wait_for_task(task_id, ctx)
    assert first.entries == ["initial", "working:1"]
    assert second.entries == ["working:1"]  # recovery re-entered the phase, never initial
    assert final.outcome == {"status": "completed", "result": "working:1"}


def effect_kind(effects: list[str], parked: anyio.Event, gate: anyio.Event) -> Any:
    """``initial`` writes an in-flight checkpoint with an idempotency key, performs the effect
    and parks (a suspend lands "between the effect and the next checkpoint")."""

    async def initial(task: TaskInfo, rt: Runtime, ctx: Context) -> Next:
        key = f"batch-{task.id}"
        await rt.commit(lambda tx, cur, _c: tx.checkpoint({"phase": "sending", "key": key}), ctx)
        effects.append(key)
        parked.set()
        await gate.wait()
        return Next({"phase": "sent", "key": key})

    async def sending(task: TaskInfo, rt: Runtime, ctx: Context) -> Next:
        key = task.checkpoint["key"]  # type: ignore[index]
        effects.append(key)  # recovery program: repeat the keyed effect
        return Next({"phase": "sent", "key": key})

    async def sent(task: TaskInfo, rt: Runtime, ctx: Context) -> Done:
        return Done(lambda tx, cur, c: Completion.completed({"key": task.checkpoint["key"]}))  # type: ignore[index]

    return define_task(
        "test.effect",
        initial=initial,
        phases={"sending": sending, "sent": sent},
        inflight=("sending",),
        abort=noop_abort,
        describe=lambda t: {"stage": t.phase},
    )


async def test_an_inflight_phase_runs_as_the_recovery_program_after_reopen(
    storage_factory: Callable[[], Storage], options: HarnessOptions
) -> None:
    effects: list[str] = []
    parked, gate = anyio.Event(), anyio.Event()
    async with HarnessHandle(storage_factory, options) as handle:
        handle.add_registration(lambda h: h.register_task_kind(effect_kind(effects, parked, gate)))
        await handle.open(ctx)
        h = handle.harness
        kind = h.scheduler.kinds.get("test.effect")
        c = await h.root(ctx)
        task_id = await c.commit(lambda tx, _c: tx.create_task(kind, None), ctx)
        await parked.wait()
        await handle.suspend(ctx)
        await handle.reopen(ctx)
        final = await handle.harness.wait_for_task(task_id, ctx)
    assert effects == [f"batch-{task_id}", f"batch-{task_id}"]  # same key twice: one logical write
    assert final.outcome == {"status": "completed", "result": {"key": f"batch-{task_id}"}}


async def test_suspend_clears_waiting_on_in_its_own_commit_and_the_tool_task_stays_running(
    storage_factory: Callable[[], Storage], options: HarnessOptions
) -> None:  # 11: the clearing commit itself (the turn layer's pi.tool is never dispatched here)
    async with HarnessHandle(storage_factory, options) as handle:
        await handle.open(ctx, resume=False)
        h = handle.harness
        c = await h.root(ctx)

        def start(tx: Transaction, _c: Context) -> int:
            slot = {
                "callId": "c1",
                "name": "x",
                "args": {},
                "status": "pending",
                "waitingOn": "approval",
            }
            tx.document("sticky")["turn"] = {"tools": [slot]}
            return tx.create_task("pi.tool", {"index": 0})

        task_id = await h.kernel.commit(start, ctx, conversation_id=c.id, authority=Authority.CORE)
        watch = await c.watch(ctx)
        assert watch.view["turn"]["tools"][0]["waitingOn"] == "approval"
        envelopes: list[Any] = []
        watch.start(envelopes.append)
        await handle.suspend(ctx)
        assert [env.ops for env in envelopes] == [[("d", ("turn", "tools", 0, "waitingOn"))]]
    h2 = await Harness.open(storage_factory(), options, ctx)
    record = await h2.get_task(task_id, ctx)
    assert record is not None and record.status != "terminal"
    sticky = await (await h2.root(ctx)).sticky(ctx)
    assert "waitingOn" not in sticky["turn"]["tools"][0]
    await h2.close(ctx)


async def test_reload_swaps_quietly_when_quiescent_and_by_reopen_when_busy(
    storage_factory: Callable[[], Storage], options: HarnessOptions
) -> None:
    old, new = Worker(), Worker()
    async with HarnessHandle(storage_factory, options) as handle:
        removers = [handle.add_registration(lambda h: h.register_task_kind(old.kind()))]
        await handle.open(ctx)

        def swap_to(worker: Worker) -> Callable[[], None]:
            def swap() -> None:
                removers.pop()()
                removers.append(
                    handle.add_registration(lambda h: h.register_task_kind(worker.kind()))
                )

            return swap

        harness_before = handle.harness
        assert await reload(handle, swap_to(new), ctx) == "quiescent"
        assert handle.harness is harness_before  # nothing reopened
        c = await handle.harness.root(ctx)
        kind = handle.harness.scheduler.kinds.get("test.worker")
        task_id = await c.commit(lambda tx, _c: tx.create_task(kind, None), ctx)
        await new.parked.wait()
        newest = Worker()
        newest.gate.set()
        assert await reload(handle, swap_to(newest), ctx) == "reopened"
        final = await handle.harness.wait_for_task(task_id, ctx)
    assert old.entries == []
    assert new.entries == ["initial", "working:1"]
    assert newest.entries == ["working:1"]
    assert final.outcome == {"status": "completed", "result": "working:1"}


async def test_a_swap_that_raises_while_busy_still_reopens_the_session(
    storage_factory: Callable[[], Storage], options: HarnessOptions
) -> None:
    worker = Worker()
    async with HarnessHandle(storage_factory, options) as handle:
        handle.add_registration(lambda h: h.register_task_kind(worker.kind()))
        await handle.open(ctx)
        c = await handle.harness.root(ctx)
        kind = handle.harness.scheduler.kinds.get("test.worker")
        task_id = await c.commit(lambda tx, _c: tx.create_task(kind, None), ctx)
        await worker.parked.wait()

        def broken_swap() -> None:
            raise RuntimeError("the candidate facets failed to activate")

        with pytest.raises(RuntimeError, match="failed to activate"):
            await reload(handle, broken_swap, ctx)
        assert handle.is_open  # reopened with the registrations it had
        worker.gate.set()
        final = await handle.harness.wait_for_task(task_id, ctx)
    assert worker.entries == ["initial", "working:1", "working:1"]
    assert final.outcome == {"status": "completed", "result": "working:1"}


async def test_suspend_with_abort_removed_aborts_tasks_of_removed_kinds(
    storage_factory: Callable[[], Storage], options: HarnessOptions
) -> None:
    worker = Worker()
    async with HarnessHandle(storage_factory, options) as handle:
        remove = handle.add_registration(lambda h: h.register_task_kind(worker.kind()))
        await handle.open(ctx)
        h = handle.harness
        kind = h.scheduler.kinds.get("test.worker")
        c = await h.root(ctx)
        task_id = await c.commit(lambda tx, _c: tx.create_task(kind, None), ctx)
        await worker.parked.wait()
        remove()  # the new generation no longer has this kind
        await handle.suspend(ctx, abort_removed=True)
        await handle.reopen(ctx)
        record = await handle.harness.get_task(task_id, ctx)
    assert record is not None and record.outcome == {"status": "aborted", "result": None}


async def test_a_sleep_cut_by_suspend_resumes_to_its_stored_deadline(
    storage_factory: Callable[[], Storage], options: HarnessOptions, clock: Any
) -> None:  # docs/design/decisions.md#d8-g22
    async def initial(task: TaskInfo, rt: Runtime, ctx: Context) -> Next:
        return Next({"phase": "waiting", "until": rt.now() + 10_000})

    async def waiting(task: TaskInfo, rt: Runtime, ctx: Context) -> Done:
        await rt.sleep(task.checkpoint["until"], ctx)  # type: ignore[index]
        return Done(lambda tx, cur, c: Completion.completed(None))

    kind = define_task("test.timer", initial=initial, phases={"waiting": waiting}, abort=noop_abort)
    async with HarnessHandle(storage_factory, options) as handle:
        handle.add_registration(lambda h: h.register_task_kind(kind))
        await handle.open(ctx)
        h = handle.harness
        task_id = await (await h.root(ctx)).commit(lambda tx, _c: tx.create_task(kind, None), ctx)
        await clock.wait_for_sleepers(1)
        clock.advance(4_000)
        await handle.suspend(ctx)
        assert clock.sleepers == 0
        await handle.reopen(ctx)
        await clock.wait_for_sleepers(1)
        clock.advance(5_999)
        assert (await handle.harness.get_task(task_id, ctx)).status == "running"  # type: ignore[union-attr]
        clock.advance(1)
        final = await handle.harness.wait_for_task(task_id, ctx)
    assert final.outcome == {"status": "completed", "result": None}


class Asker:
    """A task that asks a "human" unless a decision memo exists; the memo is written after the
    answer, as the approval hook does (docs/design/harness.md#before-tool). Each step sets ``step`` for the test."""

    def __init__(self) -> None:
        self.asked = 0
        self.answer = anyio.Event()
        self.step = anyio.Event()
        self.park_after_memo = True

    def kind(self) -> Any:
        async def initial(task: TaskInfo, rt: Runtime, ctx: Context) -> Done:
            decided = await rt.commit(
                lambda tx, cur, _c: tx.slot(cur).get("memos", {}).get("decision"), ctx
            )
            if decided is None:
                self.asked += 1
                self._signal()
                await self.answer.wait()
                decided = await rt.commit(
                    lambda tx, cur, _c: memo_once(tx.slot(cur), "decision", "allow"), ctx
                )
                self._signal()
                if self.park_after_memo:
                    await anyio.Event().wait()  # until the test suspends
            return Done(lambda tx, cur, c: Completion.completed(decided))

        return define_task("test.asking", initial=initial, phases={}, abort=noop_abort)

    def _signal(self) -> None:
        self.step.set()
        self.step = anyio.Event()


@pytest.mark.parametrize("when", ["before-memo", "after-memo"])
async def test_a_decision_memo_survives_suspend_and_is_not_asked_again(
    storage_factory: Callable[[], Storage], options: HarnessOptions, when: str
) -> None:  # docs/design/harness.md#memos, docs/design/reload.md#suspend-and-reopen: re-ask before the memo, never after
    asker = Asker()
    async with HarnessHandle(storage_factory, options) as handle:
        handle.add_registration(lambda h: h.register_task_kind(asker.kind()))
        await handle.open(ctx)
        h = handle.harness
        kind = h.scheduler.kinds.get("test.asking")
        step = asker.step
        task_id = await (await h.root(ctx)).commit(lambda tx, _c: tx.create_task(kind, None), ctx)
        await step.wait()  # asking the human
        if when == "after-memo":
            step = asker.step
            asker.answer.set()
            await step.wait()  # the memo is durable; the handler parks before returning
        await handle.suspend(ctx)
        asker.park_after_memo = False
        asker.answer.set()
        await handle.reopen(ctx)
        final = await handle.harness.wait_for_task(task_id, ctx)
    assert asker.asked == (2 if when == "before-memo" else 1)
    assert final.outcome == {"status": "completed", "result": "allow"}
