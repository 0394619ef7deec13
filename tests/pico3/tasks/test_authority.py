"""What an ordinary task may touch (docs/design/harness.md#authority)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
import pytest

from chord.context import BACKGROUND, Context
from pico3.harness import Harness
from pico3.kernel import Forbidden, StaleDefinition, Transaction
from pico3.storage import Task
from pico3.tasks import Completion, Done, Runtime, TaskInfo, define_task

pytestmark = pytest.mark.anyio
ctx = BACKGROUND


async def noop_abort(task: TaskInfo, rt: Runtime, ctx: Context) -> Any:
    return lambda tx, cur, c: None


async def finish(task: TaskInfo, rt: Runtime, ctx: Context) -> Done:
    return Done(lambda tx, cur, c: Completion.completed(None))


Attempt = Callable[[Transaction, Task], Any]

MALICIOUS: dict[str, Attempt] = {
    "inbox": lambda tx, cur: tx.document("sticky")["inbox"],
    "turn": lambda tx, cur: tx.document("sticky").__setitem__("turn", {}),
    "core config write": lambda tx, cur: tx.config(cur.conversation_id).set(
        {"thinkingLevel": "high"}
    ),
    "config reset": lambda tx, cur: tx.config(cur.conversation_id).reset(["thinkingLevel"]),
    "another task's slot": lambda tx, cur: tx.slot(cur.id + 1000),
    "core task by name": lambda tx, cur: tx.create_task("pi.generation", {}),
    "append_entry": lambda tx, cur: tx.append_entry(cur.conversation_id, None),  # type: ignore[arg-type]
    "put_input": lambda tx, cur: tx.put_input(None),  # type: ignore[arg-type]
    "mark another task": lambda tx, cur: tx.mark_task(cur.id),
    "finish itself": lambda tx, cur: tx.finish_task(cur.id, {"status": "completed"}),
    "emit core event": lambda tx, cur: tx.emit_event(cur.conversation_id, {"type": "turn.started"}),
}


@pytest.mark.parametrize("attempt", sorted(MALICIOUS))
async def test_an_ordinary_task_cannot_reach_core_state(
    harness: Harness, attempt: str
) -> None:  # 39
    outcome: list[BaseException] = []

    async def initial(task: TaskInfo, rt: Runtime, ctx: Context) -> Done:
        async def build(tx: Transaction, cur: Task, _c: Context) -> None:
            MALICIOUS[attempt](tx, cur)

        try:
            await rt.commit(build, ctx)
        except Exception as exc:
            outcome.append(exc)
        return await finish(task, rt, ctx)

    kind = define_task("test.malicious", initial=initial, phases={}, abort=noop_abort)
    harness.register_task_kind(kind)
    await harness.resume(ctx)
    c = await harness.root(ctx)
    task_id = await c.commit(lambda tx, _c: tx.create_task(kind, None), ctx)
    await harness.wait_for_task(task_id, ctx)
    assert len(outcome) == 1
    assert isinstance(outcome[0], (Forbidden, StaleDefinition, TypeError, ValueError))
    if attempt not in ("core task by name",):
        assert isinstance(outcome[0], Forbidden), outcome[0]


async def test_a_task_cannot_reach_conversations_outside_its_subtree(
    harness: Harness,
) -> None:  # 40
    errors: list[BaseException] = []
    c = await harness.root(ctx)
    other = await c.fork("start", ctx)

    async def initial(task: TaskInfo, rt: Runtime, ctx: Context) -> Done:
        for attempt in (
            lambda: rt.commit(lambda tx, cur, _c: tx.write(other.id, "note", data={}), ctx),
            lambda: rt.sticky(other.id, ctx),
        ):
            try:
                await attempt()
            except Forbidden as exc:
                errors.append(exc)
        await rt.commit(
            lambda tx, cur, _c: tx.write(cur.conversation_id, "note", data={"ok": 1}), ctx
        )
        return await finish(task, rt, ctx)

    kind = define_task("test.scoped", initial=initial, phases={}, abort=noop_abort)
    harness.register_task_kind(kind)
    await harness.resume(ctx)
    task_id = await c.commit(lambda tx, _c: tx.create_task(kind, None), ctx)
    assert (await harness.wait_for_task(task_id, ctx)).outcome == {
        "status": "completed",
        "result": None,
    }
    assert len(errors) == 2


async def test_a_stale_kind_token_rejects(harness: Harness) -> None:  # 42
    kind = define_task("test.token", initial=finish, phases={}, abort=noop_abort)
    unregister = harness.register_task_kind(kind)
    unregister()
    unregister()  # 41: harmless twice
    again = define_task("test.token", initial=finish, phases={}, abort=noop_abort)
    harness.register_task_kind(again)
    c = await harness.root(ctx)
    with pytest.raises(StaleDefinition):
        await c.commit(lambda tx, _c: tx.create_task(kind, None), ctx)
    await c.commit(lambda tx, _c: tx.create_task(again, None), ctx)


async def test_registration_rejects_reserved_and_duplicate_names(harness: Harness) -> None:  # 41
    with pytest.raises(ValueError, match="reserved"):
        define_task("pi.mine", initial=finish, phases={}, abort=noop_abort)
    kind = define_task("test.dup", initial=finish, phases={}, abort=noop_abort)
    harness.register_task_kind(kind)
    with pytest.raises(ValueError, match="already registered"):
        harness.register_task_kind(
            define_task("test.dup", initial=finish, phases={}, abort=noop_abort)
        )
    with pytest.raises(ValueError, match="no handler"):
        define_task("test.x", initial=finish, phases={}, abort=noop_abort, inflight=("ghost",))


async def test_kind_config_keys_are_checked_visible_and_read_only_for_tasks(
    harness: Harness,
) -> None:
    seen: list[Any] = []
    kind = define_task(
        "test.config",
        initial=finish,
        phases={},
        abort=noop_abort,
        config={"rewindable": {"indexIgnore": []}, "sticky": {"batch": 10}},
    )
    harness.register_task_kind(kind)
    clash = define_task(
        "test.clash", initial=finish, phases={}, abort=noop_abort, config={"sticky": {"batch": 1}}
    )
    with pytest.raises(ValueError, match="collides"):
        harness.register_task_kind(clash)
    with pytest.raises(ValueError, match="collides"):
        harness.register_task_kind(
            define_task(
                "test.core",
                initial=finish,
                phases={},
                abort=noop_abort,
                config={"sticky": {"retry": 1}},
            )
        )

    async def reader(task: TaskInfo, rt: Runtime, ctx: Context) -> Done:
        seen.append(await rt.config(task.conversation_id, ctx))
        return await finish(task, rt, ctx)

    reading = define_task("test.reader", initial=reader, phases={}, abort=noop_abort)
    harness.register_task_kind(reading)
    await harness.resume(ctx)
    c = await harness.root(ctx)
    task_id = await c.commit(lambda tx, _c: tx.create_task(reading, None), ctx)
    await harness.wait_for_task(task_id, ctx)
    assert seen[0]["indexIgnore"] == [] and seen[0]["batch"] == 10  # 135: defaults before any set


async def test_deadlock_guards_reject_impossible_waits(harness: Harness) -> None:
    from pico3.tasks import DeadlockError

    errors: list[BaseException] = []
    blocker = anyio.Event()

    async def waiter(task: TaskInfo, rt: Runtime, ctx: Context) -> Done:
        try:
            await rt.wait_for_task(task.id, ctx)
        except DeadlockError as exc:
            errors.append(exc)
        dependents = [t for t in harness.kernel.live_tasks() if task.id in t.after]
        try:
            await rt.wait_for_task(dependents[0].id, ctx)
        except DeadlockError as exc:
            errors.append(exc)
        blocker.set()
        return await finish(task, rt, ctx)

    first = define_task("test.waiter", initial=waiter, phases={}, abort=noop_abort)
    second = define_task("test.after", initial=finish, phases={}, abort=noop_abort)
    harness.register_task_kind(first)
    harness.register_task_kind(second)
    await harness.resume(ctx)
    c = await harness.root(ctx)

    def build(tx: Transaction, _c: Context) -> int:
        a = tx.create_task(first, None)
        tx.create_task(second, None, after=[a])
        return a

    task_id = await c.commit(build, ctx)
    await harness.wait_for_task(task_id, ctx)
    assert len(errors) == 2
