"""Task abort and conversation abort (docs/design/harness.md#abort)."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from chord.context import BACKGROUND, Context
from pico3.harness import Harness
from pico3.kernel import Forbidden, Transaction
from pico3.storage import Input, Task
from pico3.tasks import Completion, Done, Runtime, TaskInfo, define_task

pytestmark = pytest.mark.anyio
ctx = BACKGROUND


class Probe:
    """Records what a test kind did; its handlers park on ``gate``."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.gate = anyio.Event()
        self.parked = anyio.Event()
        self.abort_started = anyio.Event()
        self.abort_gate = anyio.Event()
        self.abort_gate.set()
        self.rt: Runtime | None = None

    def kind(self, name: str, **extra: Any) -> Any:
        async def initial(task: TaskInfo, rt: Runtime, ctx: Context) -> Done:
            self.calls.append("initial")
            self.rt = rt
            self.parked.set()
            try:
                await self.gate.wait()
            except BaseException:
                self.calls.append("initial-cancelled")
                raise
            self.calls.append("initial-returned")
            return Done(lambda tx, cur, c: Completion.completed("normal"))

        async def abort(task: TaskInfo, rt: Runtime, ctx: Context) -> Any:
            self.calls.append("abort")
            self.abort_started.set()
            await self.abort_gate.wait()
            return lambda tx, cur, c: {"cleaned": True}

        return define_task(name, initial=initial, phases={}, abort=abort, **extra)


async def test_abort_cancels_the_run_joins_it_then_runs_abort(harness: Harness) -> None:  # 112
    probe = Probe()
    kind = probe.kind("test.abortable")
    harness.register_task_kind(kind)
    await harness.resume(ctx)
    c = await harness.root(ctx)
    task_id = await c.commit(lambda tx, _c: tx.create_task(kind, None), ctx)
    await probe.parked.wait()
    assert await harness.abort_task(task_id, ctx) == "marked"
    final = await harness.wait_for_task(task_id, ctx)
    assert probe.calls == ["initial", "initial-cancelled", "abort"]
    assert final.outcome == {"status": "aborted", "result": {"cleaned": True}}
    assert await harness.abort_task(task_id, ctx) == "terminal"


async def test_a_captured_runtime_rejects_after_return_and_after_a_mark(
    harness: Harness,
) -> None:  # 38
    probe = Probe()
    kind = probe.kind("test.captured")
    harness.register_task_kind(kind)
    await harness.resume(ctx)
    c = await harness.root(ctx)
    task_id = await c.commit(lambda tx, _c: tx.create_task(kind, None), ctx)
    await probe.parked.wait()
    rt = probe.rt
    assert rt is not None
    await rt.commit(lambda tx, cur, _c: tx.slot(cur).__setitem__("ok", 1), ctx)  # alive, unmarked
    probe.abort_gate = anyio.Event()
    await harness.abort_task(task_id, ctx)
    await probe.abort_started.wait()
    with pytest.raises(Forbidden):  # the run invocation ended (and the task is marked)
        await rt.commit(lambda tx, cur, _c: tx.slot(cur).__setitem__("late", 1), ctx)
    probe.abort_gate.set()
    await harness.wait_for_task(task_id, ctx)
    with pytest.raises(Forbidden):  # after terminalization
        await rt.commit(lambda tx, cur, _c: None, ctx)


async def test_pending_task_marked_before_reservation_never_runs_initial(
    harness: Harness,
) -> None:  # 114
    probe = Probe()
    kind = probe.kind("test.pending")
    harness.register_task_kind(kind)
    c = await harness.root(ctx)
    task_id = await c.commit(lambda tx, _c: tx.create_task(kind, None), ctx)
    assert await harness.abort_task(task_id, ctx) == "marked"
    await harness.resume(ctx)
    final = await harness.wait_for_task(task_id, ctx)
    assert probe.calls == ["abort"]
    assert final.outcome == {"status": "aborted", "result": {"cleaned": True}}


async def test_a_repeated_mark_during_a_running_abort_does_nothing(harness: Harness) -> None:  # 115
    probe = Probe()
    kind = probe.kind("test.remark")
    harness.register_task_kind(kind)
    await harness.resume(ctx)
    c = await harness.root(ctx)
    task_id = await c.commit(lambda tx, _c: tx.create_task(kind, None), ctx)
    await probe.parked.wait()
    probe.abort_gate = anyio.Event()
    await harness.abort_task(task_id, ctx)
    await probe.abort_started.wait()
    assert await harness.abort_task(task_id, ctx) == "marked"
    probe.abort_gate.set()
    await harness.wait_for_task(task_id, ctx)
    assert probe.calls.count("abort") == 1


async def test_closure_loses_to_an_earlier_mark(harness: Harness) -> None:  # 113
    entered = anyio.Event()
    release = anyio.Event()
    closures: list[str] = []

    async def initial(task: TaskInfo, rt: Runtime, ctx: Context) -> Done:
        async def closure(tx: Transaction, cur: Task, _c: Context) -> Completion:
            closures.append("ran")
            return Completion.completed("closure")

        entered.set()
        with anyio.CancelScope(shield=True):  # ignore the cancellation: return the step anyway
            await release.wait()
        return Done(closure)

    async def abort(task: TaskInfo, rt: Runtime, ctx: Context) -> Any:
        return lambda tx, cur, c: "aborted-result"

    kind = define_task("test.race", initial=initial, phases={}, abort=abort)
    harness.register_task_kind(kind)
    await harness.resume(ctx)
    c = await harness.root(ctx)
    task_id = await c.commit(lambda tx, _c: tx.create_task(kind, None), ctx)
    await entered.wait()
    await harness.abort_task(task_id, ctx)
    release.set()
    final = await harness.wait_for_task(task_id, ctx)
    assert closures == []  # the kernel refused the closure commit before its builder ran
    assert final.outcome == {"status": "aborted", "result": "aborted-result"}


async def test_closure_that_commits_first_wins_over_a_later_mark(harness: Harness) -> None:  # 113
    kind = define_task(
        "test.quick",
        initial=lambda t, r, c: _done_now(),
        phases={},
        abort=lambda t, r, c: _abort_closure(),
    )
    harness.register_task_kind(kind)
    await harness.resume(ctx)
    c = await harness.root(ctx)
    task_id = await c.commit(lambda tx, _c: tx.create_task(kind, None), ctx)
    final = await harness.wait_for_task(task_id, ctx)
    assert final.outcome == {"status": "completed", "result": "first"}
    assert await harness.abort_task(task_id, ctx) == "terminal"


async def _done_now() -> Done:
    return Done(lambda tx, cur, c: Completion.completed("first"))


async def _abort_closure() -> Any:
    return lambda tx, cur, c: None


async def test_conversation_abort_reaches_foreground_and_spares_background(
    harness: Harness,
) -> None:  # 118, 60
    fg, bg = Probe(), Probe()
    k_fg, k_bg = fg.kind("test.fg"), bg.kind("test.bg")
    harness.register_task_kind(k_fg)
    harness.register_task_kind(k_bg)
    await harness.resume(ctx)
    c = await harness.root(ctx)

    def build(tx: Transaction, _c: Context) -> tuple[int, int]:
        return tx.create_task(k_fg, None), tx.create_task(k_bg, None, background=True)

    fg_id, bg_id = await c.commit(build, ctx)
    await fg.parked.wait()
    await bg.parked.wait()
    await c.abort(ctx)
    assert (await harness.get_task(fg_id, ctx)).outcome["status"] == "aborted"  # type: ignore[union-attr,index]
    assert (await harness.get_task(bg_id, ctx)).status == "running"  # type: ignore[union-attr]
    bg.gate.set()
    assert (await harness.wait_for_task(bg_id, ctx)).outcome == {
        "status": "completed",
        "result": "normal",
    }


async def test_conversation_abort_reaches_owned_conversations(harness: Harness) -> None:  # 118
    child = Probe()
    k_child = child.kind("test.child")
    made = anyio.Event()
    owned: list[int] = []

    async def initial(task: TaskInfo, rt: Runtime, ctx: Context) -> Done:
        async def spawn(tx: Transaction, cur: Task, _c: Context) -> int:
            cid = await tx.create_conversation(owner=cur.id)
            tx.create_task(k_child, None, conversation_id=cid)
            return cid

        owned.append(await rt.commit(spawn, ctx))
        made.set()
        await anyio.Event().wait()
        raise AssertionError("unreachable")

    async def abort(task: TaskInfo, rt: Runtime, ctx: Context) -> Any:
        return lambda tx, cur, c: None

    parent = define_task("test.parent", initial=initial, phases={}, abort=abort)
    harness.register_task_kind(parent)
    harness.register_task_kind(k_child)
    await harness.resume(ctx)
    c = await harness.root(ctx)
    parent_id = await c.commit(lambda tx, _c: tx.create_task(parent, None), ctx)
    await made.wait()
    await child.parked.wait()
    record = await harness.get_task(parent_id, ctx)
    assert record is not None and record.owns == owned
    await c.abort(ctx)
    children = [t for t in await _tasks(harness) if t.kind == "test.child"]
    assert [t.outcome for t in children] == [{"status": "aborted", "result": {"cleaned": True}}]


async def _tasks(h: Harness) -> list[Task]:
    return await h.kernel.commit(lambda tx, _c: tx.tasks(), ctx)


async def test_conversation_abort_withdraws_steer_and_follow_up_but_keeps_writes(
    harness: Harness,
) -> None:  # 60
    from pico3.kernel import Authority

    c = await harness.root(ctx)

    mint = harness.kernel.mint_id
    steer, write, follow = mint(), mint(), mint()

    def queue(tx: Transaction, _c: Context) -> None:
        sticky = tx.document("sticky", c.id)
        sticky["inbox"] = [
            {"id": steer, "mode": "steer", "input": {"content": "a"}},
            {"id": write, "mode": "write", "entry": {"kind": "note"}},
            {"id": follow, "mode": "followUp", "input": {"content": "b"}},
        ]
        for i in (steer, write, follow):
            tx.put_input(Input(id=i, conversation_id=c.id, status="queued"))

    await harness.kernel.commit(queue, ctx, conversation_id=c.id, authority=Authority.CORE)
    await harness.resume(ctx)
    await c.abort(ctx)
    sticky = await c.sticky(ctx)
    assert [item["id"] for item in sticky["inbox"]] == [write]
    assert (await harness.wait_for_input(steer, ctx)).reason == "aborted"
    assert (await harness.wait_for_input(follow, ctx)).status == "unanswered"
