"""A task's life: initial → checkpoints → Done; builders, retries, events, slots (docs/design/harness.md#task-kinds, #scheduler)."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from msgspec import UNSET

from chord.context import BACKGROUND, Context
from pico3.harness import Harness, HarnessOptions
from pico3.kernel import Envelope, Transaction
from pico3.storage import MemoryStorage, Task
from pico3.tasks import (
    RETRY,
    Completion,
    Done,
    Next,
    Runtime,
    TaskInfo,
    define_task,
)

pytestmark = pytest.mark.anyio
ctx = BACKGROUND


async def never_abort(task: TaskInfo, rt: Runtime, ctx: Context) -> Any:
    return lambda tx, current, ctx: None


def done(result: Any) -> Done:
    return Done(lambda tx, current, ctx: Completion.completed(result))


async def create(h: Harness, kind: Any, input: Any = None, **opts: Any) -> int:
    c = await h.root(ctx)
    return await c.commit(lambda tx, _ctx: tx.create_task(kind, input, **opts), ctx)


async def test_a_task_walks_its_phases_and_completes(harness: Harness) -> None:
    seen: list[tuple[str, Any]] = []

    async def initial(task: TaskInfo, rt: Runtime, ctx: Context) -> Next:
        seen.append(("initial", task.input))
        return Next({"phase": "counting", "n": 0})

    async def counting(task: TaskInfo, rt: Runtime, ctx: Context) -> Next | Done:
        assert task.checkpoint is not None
        n = task.checkpoint["n"]
        seen.append(("counting", n))
        if n == 2:
            return done({"counted": n})
        return Next({"phase": "counting", "n": n + 1})

    kind = define_task(
        "test.count", initial=initial, phases={"counting": counting}, abort=never_abort
    )
    harness.register_task_kind(kind)
    await harness.resume(ctx)
    task_id = await create(harness, kind, {"x": 1})
    final = await harness.wait_for_task(task_id, ctx)
    assert seen == [("initial", {"x": 1}), ("counting", 0), ("counting", 1), ("counting", 2)]
    assert final.status == "terminal"
    assert final.outcome == {"status": "completed", "result": {"counted": 2}}
    assert final.checkpoint is UNSET  # a terminal record drops its checkpoint


async def test_task_events_and_view_status_follow_the_task(harness: Harness) -> None:  # 13, 15
    gate, parked = anyio.Event(), anyio.Event()

    async def initial(task: TaskInfo, rt: Runtime, ctx: Context) -> Next:
        await rt.commit(lambda tx, current, _c: tx.slot(current).__setitem__("files", 3), ctx)
        return Next({"phase": "waiting"})

    async def waiting(task: TaskInfo, rt: Runtime, ctx: Context) -> Done:
        parked.set()
        await gate.wait()
        return done(None)

    kind = define_task(
        "test.described",
        initial=initial,
        phases={"waiting": waiting},
        abort=never_abort,
        slot=lambda input: {"files": 0, "memos": {"secret": 1}},
        describe=lambda task: {"stage": task.phase, "slot": task.slot},
    )
    harness.register_task_kind(kind)
    c = await harness.root(ctx)
    watch = await c.watch(ctx)
    envelopes: list[Envelope] = []
    watch.start(envelopes.append)
    await harness.resume(ctx)
    task_id = await create(harness, kind, None, background=True)
    await parked.wait()
    snapshot = await c.watch(ctx)
    # describe() output is tasks[id].status; memos never reach it
    assert snapshot.view["tasks"][str(task_id)] == {
        "kind": "test.described",
        "background": True,
        "status": {"stage": "waiting", "slot": {"files": 3}},
    }
    gate.set()
    await harness.wait_for_task(task_id, ctx)
    events = [e for env in envelopes for e in env.events if e["type"].startswith("task.")]
    assert events == [
        {"type": "task.started", "taskId": task_id, "kind": "test.described", "background": True},
        {"type": "task.ended", "taskId": task_id, "kind": "test.described", "outcome": "completed"},
    ]
    replica = snapshot.view
    assert str(task_id) not in (await c.watch(ctx)).view["tasks"]
    assert "secret" not in str(replica)
    sticky = await c.sticky(ctx)
    assert str(task_id) not in sticky.get("tasks", {})  # slot retired with the terminal record


async def test_without_describe_the_status_is_the_phase(harness: Harness) -> None:  # 15
    gate, parked = anyio.Event(), anyio.Event()

    async def initial(task: TaskInfo, rt: Runtime, ctx: Context) -> Next:
        return Next({"phase": "parked"})

    async def park(task: TaskInfo, rt: Runtime, ctx: Context) -> Done:
        parked.set()
        await gate.wait()
        return done(None)

    kind = define_task("test.plain", initial=initial, phases={"parked": park}, abort=never_abort)
    harness.register_task_kind(kind)
    c = await harness.root(ctx)
    task_id = await create(harness, kind)
    before = await c.watch(ctx)
    assert before.view["tasks"][str(task_id)] == {
        "kind": "test.plain",
        "status": {"phase": "pending"},
    }
    await harness.resume(ctx)
    await parked.wait()
    after = await c.watch(ctx)
    assert after.view["tasks"][str(task_id)]["status"] == {"phase": "parked"}
    gate.set()
    await harness.wait_for_task(task_id, ctx)


async def test_builder_retry_reenters_the_handler_and_completion_terminalizes(
    harness: Harness,
) -> None:
    calls: list[int] = []

    async def initial(task: TaskInfo, rt: Runtime, ctx: Context) -> Next:
        calls.append(len(calls))

        def build(tx: Transaction, current: Task, _ctx: Context) -> Any:
            if len(calls) < 3:
                tx.slot(current)["wasted"] = True  # discarded with the retry
                return RETRY
            return Completion.failed({"why": "enough"})

        return Next(build)

    kind = define_task("test.retry", initial=initial, phases={}, abort=never_abort)
    harness.register_task_kind(kind)
    await harness.resume(ctx)
    task_id = await create(harness, kind)
    final = await harness.wait_for_task(task_id, ctx)
    assert calls == [0, 1, 2]
    assert final.outcome == {"status": "failed", "failure": {"why": "enough"}}
    c = await harness.root(ctx)
    assert str(task_id) not in (await c.sticky(ctx)).get("tasks", {})


async def test_a_dependency_wakes_its_dependent_once_whatever_its_outcome(
    harness: Harness,
) -> None:  # 110
    runs: list[str] = []
    gate = anyio.Event()

    async def first(task: TaskInfo, rt: Runtime, ctx: Context) -> Done:
        runs.append("first")
        await gate.wait()
        return Done(lambda tx, cur, c: Completion.failed("boom"))

    async def second(task: TaskInfo, rt: Runtime, ctx: Context) -> Done:
        runs.append("second")
        return done(None)

    k1 = define_task("test.first", initial=first, phases={}, abort=never_abort)
    k2 = define_task("test.second", initial=second, phases={}, abort=never_abort)
    harness.register_task_kind(k1)
    harness.register_task_kind(k2)
    await harness.resume(ctx)
    c = await harness.root(ctx)

    def build(tx: Transaction, _c: Context) -> tuple[int, int]:
        a = tx.create_task(k1, None)
        return a, tx.create_task(k2, None, after=[a])

    a, b = await c.commit(build, ctx)
    pending = await harness.get_task(b, ctx)
    assert pending is not None and pending.status == "pending"
    gate.set()
    await harness.wait_for_task(b, ctx)
    assert runs == ["first", "second"]
    assert (await harness.get_task(a, ctx)).outcome == {"status": "failed", "failure": "boom"}  # type: ignore[union-attr]


async def test_a_task_created_while_dispatch_is_on_is_claimed_in_its_creating_commit(
    storage_factory: Any, options: HarnessOptions
) -> None:
    """No commit of its own marks a new task running when nothing stands in its way: it is
    created running and dispatched once its creating commit is durable. Before ``resume()`` (or
    with an ``after`` target still live) it is created pending and claimed by the drain."""
    runs: list[Any] = []
    started, gate = anyio.Event(), anyio.Event()

    async def initial(task: TaskInfo, rt: Runtime, ctx: Context) -> Done:
        runs.append(task.input)
        if task.input == "park":
            started.set()
            await gate.wait()
        return done(task.input)

    kind = define_task("test.claim", initial=initial, phases={}, abort=never_abort)
    storage = storage_factory()
    h = await Harness.open(storage, options, ctx)
    async with h:
        h.register_task_kind(kind)
        early = await create(h, kind, "early")
        assert (await h.get_task(early, ctx)).status == "pending"  # type: ignore[union-attr]
        await h.resume(ctx)
        assert (await h.wait_for_task(early, ctx)).outcome == {
            "status": "completed",
            "result": "early",
        }
        seq = storage.seq
        late = await create(h, kind, "park")
        assert storage.seq == seq + 1
        assert (await h.get_task(late, ctx)).status == "running"  # type: ignore[union-attr]
        waiting = await create(h, kind, "after", after=[late])
        assert (await h.get_task(waiting, ctx)).status == "pending"  # type: ignore[union-attr]
        await started.wait()
        assert storage.seq == seq + 2  # the two creations; no claim of the parked task's own
        gate.set()
        assert (await h.wait_for_task(waiting, ctx)).outcome == {
            "status": "completed",
            "result": "after",
        }
        assert runs == ["early", "park", "after"]


async def test_a_dependent_is_claimed_in_the_commit_that_ends_its_last_after_target(
    storage_factory: Any, options: HarnessOptions
) -> None:
    """A task whose ``after`` targets are all terminal once a commit lands turns running in that
    commit (the one that ends the last of them), not in a drain commit of its own, as a tool
    call's last result claims its turn's post-tools step. Ending one target of two claims
    nothing."""
    gates = {name: anyio.Event() for name in ("a", "b", "c")}
    started = {name: anyio.Event() for name in gates}

    async def initial(task: TaskInfo, rt: Runtime, ctx: Context) -> Done:
        started[task.input].set()
        await gates[task.input].wait()
        return done(task.input)

    kind = define_task("test.claim-after", initial=initial, phases={}, abort=never_abort)
    storage = storage_factory()
    h = await Harness.open(storage, options, ctx)
    async with h:
        h.register_task_kind(kind)
        await h.resume(ctx)
        a = await create(h, kind, "a")
        b = await create(h, kind, "b")
        c = await create(h, kind, "c", after=[a, b])
        await started["a"].wait()
        await started["b"].wait()
        gates["a"].set()
        await h.wait_for_task(a, ctx)
        assert (await h.get_task(c, ctx)).status == "pending"  # type: ignore[union-attr]
        seq = storage.seq
        gates["b"].set()
        await started["c"].wait()
        assert storage.seq == seq + 1  # b's end, which claimed c
        gates["c"].set()
        assert (await h.wait_for_task(c, ctx)).outcome == {"status": "completed", "result": "c"}


async def test_after_must_name_existing_tasks(harness: Harness) -> None:
    kind = define_task("test.dep", initial=lambda t, r, c: _never(), phases={}, abort=never_abort)
    harness.register_task_kind(kind)
    c = await harness.root(ctx)
    with pytest.raises(ValueError, match="after target 999"):
        await c.commit(lambda tx, _c: tx.create_task(kind, None, after=[999]), ctx)


class _NoTaskProbe(MemoryStorage):
    """A backend without the optional ``has_task`` (the kernel then keeps every task id)."""

    has_task = None  # pyright: ignore[reportAssignmentType, reportIncompatibleMethodOverride]


async def test_after_may_name_a_task_that_ended_before_a_reopen(
    storage_factory: Any, options: HarnessOptions
) -> None:
    """A reopened session reads only its live tasks as records; the ended ones still count as
    existing ``after`` targets (the kernel asks the storage), and an id that never was a task
    still does not."""
    await _after_across_reopen(storage_factory, options)


async def test_after_targets_without_the_storage_task_probe(options: HarnessOptions) -> None:
    """The same with a backend that cannot answer ``has_task``: the kernel keeps the ids."""
    shared = _NoTaskProbe()
    await _after_across_reopen(lambda: shared, options)


async def _after_across_reopen(storage_factory: Any, options: HarnessOptions) -> None:
    kind = define_task(
        "test.quick", initial=lambda t, r, c: _done_now(), phases={}, abort=never_abort
    )
    first = await Harness.open(storage_factory(), options, ctx)
    async with first:
        first.register_task_kind(kind)
        await first.resume(ctx)
        ended = await create(first, kind)
        await first.wait_for_task(ended, ctx)
        # an after target that ended in this session, before any reopen
        again = await create(first, kind, after=[ended])
        await first.wait_for_task(again, ctx)
    reopened = await Harness.open(storage_factory(), options, ctx)
    async with reopened:
        reopened.register_task_kind(kind)
        await reopened.resume(ctx)
        later = await create(reopened, kind, after=[ended])
        record = await reopened.wait_for_task(later, ctx)
        assert record.outcome == {"status": "completed", "result": None}
        assert record.after == [ended]
        c = await reopened.root(ctx)
        with pytest.raises(ValueError, match=f"after target {ended + 1000}"):
            await c.commit(lambda tx, _c: tx.create_task(kind, None, after=[ended + 1000]), ctx)


async def _done_now() -> Done:
    return done(None)


async def _never() -> Any:
    raise AssertionError("never runs")


async def test_clock_sleep_waits_for_the_injected_clock(
    harness: Harness, clock: Any
) -> None:  # docs/design/decisions.md#d8-g22
    async def initial(task: TaskInfo, rt: Runtime, ctx: Context) -> Done:
        start = rt.now()
        await rt.sleep(start + 5000, ctx)
        return done({"slept": rt.now() - start})

    kind = define_task("test.sleep", initial=initial, phases={}, abort=never_abort)
    harness.register_task_kind(kind)
    await harness.resume(ctx)
    task_id = await create(harness, kind)
    await clock.wait_for_sleepers(1)
    clock.advance(4999)
    assert (await harness.get_task(task_id, ctx)).status == "running"  # type: ignore[union-attr]
    clock.advance(1)
    final = await harness.wait_for_task(task_id, ctx)
    assert final.outcome == {"status": "completed", "result": {"slept": 5000}}
