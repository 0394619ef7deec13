"""``ToolApi`` task helpers over a real task runtime (docs/design/harness.md#tool-api): a tool creates ordinary
tasks, reads their slots (memos removed), waits for them, and stays inside its subtree."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from chord.context import BACKGROUND, Context
from pico3.harness import Harness
from pico3.kernel.errors import Forbidden
from pico3.kernel.tx import Authority
from pico3.storage import MemoryStorage
from pico3.tasks import Completion, Done, TaskInfo, define_task
from pico3.tools import RuntimeTools, ToolApi, runtime_slot
from pico3.turn.tool import TOOL_KIND

pytestmark = pytest.mark.anyio


async def _abort(task: TaskInfo, rt: Any, ctx: Context) -> Any:
    return lambda tx, current, ctx: None


def finish(result: Any) -> Done:
    return Done(lambda tx, current, ctx: Completion.completed(result))


def _tool_api(rt: Any, call_id: str = "call_1", *, runtime: bool = True) -> ToolApi:
    """The ``ToolApi`` a tool task's body gets (``runtime``: with the task helpers)."""
    return ToolApi(
        task_id=rt.task_id,
        conversation_id=rt.conversation_id,
        call_id=call_id,
        slot=runtime_slot(rt),
        runtime=RuntimeTools(rt) if runtime else None,
    )


async def test_a_tool_creates_reads_and_waits_for_an_ordinary_task() -> None:
    child_ready, child_release = anyio.Event(), anyio.Event()
    report: dict[str, Any] = {}

    async def child_initial(task: TaskInfo, rt: Any, ctx: Context) -> Done:
        api = _tool_api(rt, call_id="-", runtime=False)
        await api.memo("key", "secret", ctx)
        child_ready.set()
        await child_release.wait()
        return finish({"files": 3})

    child_kind = define_task(
        "repo.child",
        initial=child_initial,
        phases={},
        abort=_abort,
        slot=lambda input: {"files": 0},
    )

    async def tool_initial(task: TaskInfo, rt: Any, ctx: Context) -> Done:
        api = _tool_api(rt)
        child = await api.task(child_kind, {"root": "."}, {"background": True}, ctx)
        await child_ready.wait()
        report["slot"] = await api.slot(child, ctx)
        report["live"] = (await api.get_task(child, ctx)).status
        child_release.set()
        report["done"] = (await api.wait_for_task(child, ctx)).outcome
        report["after"] = await api.slot(child, ctx)
        for attempt in (
            api.task(TOOL_KIND, {}, None, ctx),
            api.get_task(task.input["elsewhere"], ctx),
        ):
            try:
                await attempt
            except Forbidden as exc:
                report.setdefault("forbidden", []).append(str(exc))
        try:
            await api.task(child_kind, {}, {"priority": 1}, ctx)
        except ValueError as exc:
            report["bad option"] = str(exc)
        return finish(None)

    async def quick_initial(task: TaskInfo, rt: Any, ctx: Context) -> Done:
        return finish(None)

    quick = define_task("repo.quick", initial=quick_initial, phases={}, abort=_abort)
    tool_like = define_task(
        "pi.test_tool", initial=tool_initial, phases={}, abort=_abort, core=True
    )
    async with await Harness.open(MemoryStorage(), None, BACKGROUND) as h:
        h.register_task_kind(child_kind)
        h.register_task_kind(quick)
        h.register_task_kind(tool_like)
        root = await h.root(BACKGROUND)
        unrelated = await root.fork("start", BACKGROUND)  # not owned by the tool's task
        elsewhere = await unrelated.commit(lambda tx, _ctx: tx.create_task(quick, {}), BACKGROUND)
        await h.resume(BACKGROUND)
        tool_task = await h.kernel.commit(  # core kinds are created by core code (pi.tool's way)
            lambda tx, _ctx: tx.create_task(tool_like, {"elsewhere": elsewhere}),
            BACKGROUND,
            conversation_id=root.id,
            authority=Authority.CORE,
        )
        done = await h.wait_for_task(tool_task, BACKGROUND)
    assert done.outcome == {"status": "completed", "result": None}
    assert report["slot"] == {"files": 0}  # memos removed from the snapshot
    assert report["live"] == "running"
    assert report["done"] == {"status": "completed", "result": {"files": 3}}
    assert report["after"] is None  # the slot retired with the task
    assert len(report["forbidden"]) == 2
    assert "ordinary tasks only" in report["forbidden"][0]
    assert "outside task" in report["forbidden"][1]
    assert "unknown ['priority']" in report["bad option"]


async def test_a_memo_option_creates_the_task_once_in_the_commit_that_memoizes_it() -> None:
    made: list[int] = []
    report: dict[str, Any] = {}

    async def child_initial(task: TaskInfo, rt: Any, ctx: Context) -> Done:
        made.append(task.id)
        return finish(None)

    child_kind = define_task("repo.once", initial=child_initial, phases={}, abort=_abort)

    async def tool_initial(task: TaskInfo, rt: Any, ctx: Context) -> Done:
        api = _tool_api(rt)
        seqs = [h.kernel.storage.seq]
        # `after` this tool: the child only starts once the tool ended, so nothing else commits
        options = {"memo": "job", "after": [rt.task_id]}
        first = await api.task(child_kind, {"n": 1}, options, ctx)
        seqs.append(h.kernel.storage.seq)
        again = await api.task(child_kind, {"n": 2}, options, ctx)  # a re-run's call
        seqs.append(h.kernel.storage.seq)
        report.update(first=first, again=again, memo=await api.memo("job", ctx), seqs=seqs)
        return finish(None)

    tool_like = define_task(
        "pi.test_tool", initial=tool_initial, phases={}, abort=_abort, core=True
    )
    async with await Harness.open(MemoryStorage(), None, BACKGROUND) as h:
        h.register_task_kind(child_kind)
        h.register_task_kind(tool_like)
        root = await h.root(BACKGROUND)
        await h.resume(BACKGROUND)
        tool_task = await h.kernel.commit(
            lambda tx, _ctx: tx.create_task(tool_like, {}),
            BACKGROUND,
            conversation_id=root.id,
            authority=Authority.CORE,
        )
        await h.wait_for_task(tool_task, BACKGROUND)
        await h.wait_for_task(report["first"], BACKGROUND)
    assert report["first"] == report["again"] == report["memo"] == made[0]
    assert len(made) == 1  # the second call found the memo and created nothing
    first, created, found = report["seqs"]
    assert created == first + 1  # one commit made the task and its memo
    assert found == created  # a call that finds the memo writes nothing
