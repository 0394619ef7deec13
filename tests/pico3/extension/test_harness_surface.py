"""The registration surface on a real harness (docs/design/harness.md#public-api, #hooks, #tool-api): tools,
sections and hooks on ``h`` and ``c``, ``rt.hooks`` inside a running task, and the ToolApi over a
task runtime."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from chord.context import BACKGROUND, Context
from pico3.harness import Harness
from pico3.kernel.errors import Closed, StaleDefinition
from pico3.kernel.tx import Authority, Transaction
from pico3.registry import DuplicateRegistration
from pico3.storage import MemoryStorage
from pico3.tasks import Completion, Done, TaskInfo, define_task
from pico3.tools import MISSING, ToolApi, ToolDeclaration, ToolResult, runtime_slot
from pico3.turn.sections import define_section
from pico3.turn.tool import TOOL_KIND

pytestmark = pytest.mark.anyio


async def _echo(args: dict[str, Any], api: ToolApi, ctx: Context) -> ToolResult:
    return ToolResult.text("ok")


ECHO = ToolDeclaration("echo", "Echo.", {"type": "object"}, _echo)


async def _abort(task: TaskInfo, rt: Any, ctx: Context) -> Any:
    return lambda tx, current, ctx: None


def ordinary(name: str, initial: Any, **options: Any) -> Any:
    return define_task(name, initial=initial, phases={}, abort=_abort, **options)


def finish(result: Any) -> Done:
    return Done(lambda tx, current, ctx: Completion.completed(result))


async def test_tools_and_sections_register_on_the_harness() -> None:
    h = await Harness.open(MemoryStorage(), None, BACKGROUND)
    remove_tool = h.register_tool(ECHO)
    remove_section = h.register_section(define_section("identity", str))
    assert h.tools.get("echo") is ECHO and h.tools.revision == 1
    with pytest.raises(DuplicateRegistration):
        h.register_tool(ECHO)
    remove_tool()
    remove_tool()
    remove_section()
    assert h.tools.revision == 2 and h.sections.revision == 2
    await h.close(BACKGROUND)
    with pytest.raises(Closed):
        h.register_tool(ECHO)
    with pytest.raises(Closed):
        h.register_section(define_section("identity", str))


async def test_h_hooks_checks_both_tokens() -> None:
    h = await Harness.open(MemoryStorage(), None, BACKGROUND)
    ns = h.namespace("approval")
    unregistered = ordinary("repo.never", _abort)
    with pytest.raises(StaleDefinition, match="kind token"):
        h.hooks(ns, unregistered, {"anything": _abort})
    registration = h.hooks(ns, TOOL_KIND, {"before_tool": _abort})  # the core kind is current
    ns.unregister()
    assert not registration.alive
    with pytest.raises(StaleDefinition, match="namespace token"):
        h.hooks(ns, TOOL_KIND, {"before_tool": _abort})
    await h.close(BACKGROUND)


async def test_rt_hooks_runs_harness_then_conversation_scopes_outermost_first() -> None:
    """A custom kind's own point, run from its handler through ``rt.hooks`` (docs/design/decisions.md#d8-g9)."""
    calls: list[tuple[str, Any]] = []
    child_id: list[int] = []

    async def initial(task: TaskInfo, rt: Any, ctx: Context) -> Done:
        values: list[Any] = []
        await rt.hooks.each(
            "before_batch",
            lambda handler, binding: handler(task.input["batch"], rt.hooks.api(), ctx),
            ctx,
            values.append,
        )
        return finish(values)

    worker = ordinary("repo.worker", initial)

    async def owner_initial(task: TaskInfo, rt: Any, ctx: Context) -> Done:
        async def build(tx: Transaction, current: Any, ctx: Context) -> int:
            cid = await tx.create_conversation(owner=current.id)
            tx.create_task(worker, {"batch": "b1"}, conversation_id=cid)
            return cid

        child_id.append(await rt.commit(build, ctx))
        return finish(None)

    owner = ordinary("repo.owner", owner_initial)

    def tag(name: str) -> Any:
        def handler(batch: Any, api: Any, ctx: Context) -> str:
            calls.append((name, api))
            return name

        return handler

    async with await Harness.open(MemoryStorage(), None, BACKGROUND) as h:
        h.register_task_kind(worker)
        h.register_task_kind(owner)
        root = await h.root(BACKGROUND)
        ns = h.namespace("plugin")
        root.hooks(ns, worker, {"before_batch": tag("root-subtree")}, subtree=True)
        root.hooks(ns, worker, {"before_batch": tag("root-only")})
        h.hooks(ns, worker, {"before_batch": tag("harness")})
        await h.resume(BACKGROUND)
        owner_task = await root.commit(lambda tx, _ctx: tx.create_task(owner, {}), BACKGROUND)
        await h.wait_for_task(owner_task, BACKGROUND)
        child = await h.conversation(child_id[0], BACKGROUND)
        assert child is not None
        child.hooks(ns, worker, {"before_batch": tag("child")})
        [worker_task] = await child.commit(
            lambda tx, _ctx: tx.tasks(child.id, kind="repo.worker"), BACKGROUND
        )
        done = await h.wait_for_task(worker_task.id, BACKGROUND)
    assert done.outcome == {"status": "completed", "result": ["harness", "root-subtree", "child"]}
    api = calls[0][1]
    assert (api.kind, api.task_id, api.conversation_id) == (
        "repo.worker",
        worker_task.id,
        child_id[0],
    )


async def test_tool_api_over_a_task_runtime_keeps_memos_out_of_the_view(recorder: Any) -> None:
    """``runtime_slot(rt)``: memos land in the task's slot; ``tasks[id].status`` never shows them."""
    memo_written, release = anyio.Event(), anyio.Event()
    seen: list[Any] = []

    async def initial(task: TaskInfo, rt: Any, ctx: Context) -> Done:
        api = ToolApi(
            task_id=rt.task_id,
            conversation_id=rt.conversation_id,
            call_id="-",
            slot=runtime_slot(rt),
        )
        seen.append(await api.memo("key", ctx))
        seen.append(await api.memo("key", "idempotency-123", ctx))
        await api.progress(lambda free: free.update(progress="writing"), ctx)
        memo_written.set()
        await release.wait()
        return finish(await api.memo("key", ctx))

    kind = ordinary("repo.keyed", initial, describe=lambda task: task.slot)
    async with await Harness.open(MemoryStorage(), None, BACKGROUND) as h:
        h.register_task_kind(kind)
        root = await h.root(BACKGROUND)
        watch = await root.watch(BACKGROUND)
        watch.start(recorder)
        await h.resume(BACKGROUND)
        task_id = await root.commit(lambda tx, _ctx: tx.create_task(kind, {}), BACKGROUND)
        await memo_written.wait()
        slot = await h.kernel.commit(
            lambda tx, _ctx: tx.slot(task_id).to_plain(), BACKGROUND, authority=Authority.CORE
        )
        assert slot["memos"] == {"tool:key": "idempotency-123"}  # durable, in the slot
        release.set()
        done = await h.wait_for_task(task_id, BACKGROUND)
    assert seen == [MISSING, "idempotency-123"]
    assert done.outcome == {"status": "completed", "result": "idempotency-123"}
    everything = repr([watch.view, *[e.to_json() for e in recorder.envelopes]])
    assert "idempotency-123" not in everything and "memos" not in everything
    assert "writing" in everything  # the slot's visible part did reach the view
