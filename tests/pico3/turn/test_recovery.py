"""Recovery through suspend and reopen in one process (docs/design/harness.md#scheduler): a
suspended session keeps its task records live, and a new harness on the same JSONL storage
recovers them with whatever code is registered then."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from chord.context import BACKGROUND, Context
from pico3.harness import Harness, HarnessOptions
from pico3.models.faux import FauxProvider, faux_pause, faux_response, faux_tool_call
from pico3.storage import JsonlStorage
from pico3.tasks.clock import ManualClock
from pico3.tools import ToolApi, ToolDeclaration, ToolResult
from pico3.turn.models import Models

pytestmark = pytest.mark.anyio

MODEL = {"provider": "faux", "modelId": "faux-1"}


def declaration(
    execute: Any, *, replay: str = "safe", schema: dict[str, Any] | None = None
) -> ToolDeclaration:
    return ToolDeclaration("t", "T.", schema or {"type": "object"}, execute, replay=replay)  # type: ignore[arg-type]


async def open_harness(
    path: Path, script: list[Any], *tools: ToolDeclaration
) -> tuple[Harness, Any, ManualClock]:
    clock = ManualClock(1_000_000)
    options = HarnessOptions(
        require_approval=False, clock=clock, services={"models": Models([FauxProvider(script)])}
    )
    harness = await Harness.open(JsonlStorage(path, fsync=False), options, BACKGROUND)
    for tool in tools:
        harness.register_tool(tool)
    return harness, await harness.root(BACKGROUND), clock


async def results(root: Any) -> list[Any]:
    return [
        e for e in reversed(await root.entries(BACKGROUND, limit=100)) if e.kind == "pi.tool_result"
    ]


def text(entry: Any) -> str:
    return "".join(b.get("text", "") for b in entry.model[0]["content"])


async def run_until_started(path: Path, tool: ToolDeclaration, started: anyio.Event) -> None:
    script = [faux_response(faux_tool_call("t", {"n": 1}))]
    harness, root, _ = await open_harness(path, script, tool)
    async with harness:
        await root.set_config({"model": MODEL, "selectedTools": ["t"]}, BACKGROUND)
        await harness.resume(BACKGROUND)
        await root.send("go", BACKGROUND)
        await started.wait()
        await harness.suspend(BACKGROUND)


async def test_suspend_after_started_replays_only_a_safe_tool_that_still_fits(
    tmp_path: Path,
) -> None:
    # unsafe now, or schema-incompatible persisted args -> interrupted; else replay
    cases = {
        "replayed": declaration(lambda *a: _ok("replayed")),
        "unsafe now": declaration(lambda *a: _ok("ran"), replay="unsafe"),
        "schema changed": declaration(
            lambda *a: _ok("ran"),
            schema={"type": "object", "properties": {"n": {"type": "string"}}},
        ),
    }
    for name, after in cases.items():
        path = tmp_path / name.replace(" ", "_")
        started = anyio.Event()

        async def hang(
            args: dict[str, Any], api: ToolApi, ctx: Context, started: anyio.Event = started
        ) -> ToolResult:
            started.set()
            await anyio.sleep_forever()
            raise AssertionError

        await run_until_started(path, declaration(hang), started)
        harness, root, _ = await open_harness(path, [faux_response("after")], after)
        async with harness:
            await harness.resume(BACKGROUND)
            await root.wait_for_idle(BACKGROUND)
            (result,) = await results(root)
        if name == "replayed":
            assert text(result) == "replayed" and not result.model[0]["isError"], name
        else:
            assert result.model[0]["isError"] and "interrupted" in text(result), name


async def _ok(value: str) -> ToolResult:
    return ToolResult.text(value)


async def test_suspend_before_started_reruns_checks_and_hooks_then_starts(tmp_path: Path) -> None:
    # an unsafe tool: the before_tool hook runs again after reopen; the tool runs once
    asked: list[str] = []
    waiting = anyio.Event()
    ran: list[int] = []

    async def run(args: dict[str, Any], api: ToolApi, ctx: Context) -> ToolResult:
        ran.append(1)
        return ToolResult.text("ran")

    tool = declaration(run, replay="unsafe")

    def install_hook(harness: Harness, block: bool) -> None:
        from pico3.turn import TOOL_KIND

        ns = harness.namespace("gate")

        async def before(call: Any, api: Any, ctx: Context) -> None:
            asked.append("asked")
            if block:
                await api.waiting(ctx)
                waiting.set()
                await anyio.sleep_forever()

        harness.hooks(ns, TOOL_KIND, {"before_tool": before})

    script = [faux_response(faux_tool_call("t", {}))]
    harness, root, _ = await open_harness(tmp_path, script, tool)
    async with harness:
        install_hook(harness, block=True)
        await root.set_config({"model": MODEL, "selectedTools": ["t"]}, BACKGROUND)
        await harness.resume(BACKGROUND)
        await root.send("go", BACKGROUND)
        await waiting.wait()
        await harness.suspend(BACKGROUND)
    harness, root, _ = await open_harness(tmp_path, [faux_response("after")], tool)
    async with harness:
        sticky = await root.sticky(BACKGROUND)
        assert "waitingOn" not in sticky["turn"]["tools"][0]  # cleared by the suspend
        install_hook(harness, block=False)
        await harness.resume(BACKGROUND)
        await root.wait_for_idle(BACKGROUND)
        (result,) = await results(root)
    assert asked == ["asked", "asked"] and ran == [1] and text(result) == "ran"


async def test_suspend_in_collapse_summarizing_counts_as_a_failed_attempt(tmp_path: Path) -> None:
    # never the same attempt twice
    gate = anyio.Event()
    script = [faux_response("a1"), faux_response(faux_pause(gate), "S")]
    harness, root, _ = await open_harness(tmp_path, script)
    async with harness:
        await root.set_config({"model": MODEL, "keepRecent": 1}, BACKGROUND)
        await harness.resume(BACKGROUND)
        await (await root.send("q1", BACKGROUND)).wait(BACKGROUND)
        task_id = await root.collapse(BACKGROUND)
        watch = await root.watch(BACKGROUND)
        summarizing = anyio.Event()
        watch.start(
            lambda e: (
                summarizing.set()
                if any(list(op[1])[:2] == ["compaction", "attempt"] for op in e.ops)
                else None
            )
        )
        await summarizing.wait()
        await harness.suspend(BACKGROUND)
    harness, root, clock = await open_harness(tmp_path, [faux_response("SUMMARY")])
    async with harness:
        await harness.resume(BACKGROUND)
        await clock.wait_for_sleepers(1)
        sticky = await root.sticky(BACKGROUND)
        assert sticky["compaction"]["stage"] == "retrying" and sticky["compaction"]["attempt"] == 1
        clock.advance(sticky["compaction"]["retryAt"] - clock.now())
        task = await harness.wait_for_task(task_id, BACKGROUND)
    assert isinstance(task.outcome, dict) and task.outcome["status"] == "completed"


async def test_an_unsafe_tool_with_an_interrupted_callback_reports_with_its_memos(
    tmp_path: Path,
) -> None:
    # The interrupted run stored a memo before it hung; the restarted harness never re-runs the
    # tool but calls its ``interrupted`` callback, which reads that memo, and its result closes
    # the call as an error. Without a callback the generic text says it may have had effects.
    started = anyio.Event()

    async def hang(args: dict[str, Any], api: ToolApi, ctx: Context) -> ToolResult:
        await api.memo("pid", 4242, ctx)
        started.set()
        await anyio.sleep_forever()
        raise AssertionError

    seen: list[Any] = []

    async def interrupted(args: dict[str, Any], api: ToolApi, ctx: Context) -> ToolResult:
        seen.append((args, await api.memo("pid", ctx)))
        return ToolResult.text("cleaned up 4242")

    never = declaration(lambda *a: _ok("ran"), replay="unsafe")
    reporting = ToolDeclaration(
        "t", "T.", {"type": "object"}, never.execute, interrupted=interrupted
    )
    for name, after in {"callback": reporting, "generic": never}.items():
        path = tmp_path / name
        started = anyio.Event()
        await run_until_started(path, declaration(hang, replay="unsafe"), started)
        harness, root, _ = await open_harness(path, [faux_response("after")], after)
        async with harness:
            await harness.resume(BACKGROUND)
            await root.wait_for_idle(BACKGROUND)
            (result,) = await results(root)
        assert result.model[0]["isError"], name
        if name == "callback":
            assert text(result) == "cleaned up 4242"
            assert seen == [({"n": 1}, 4242)]
        else:
            assert text(result).startswith(
                "Tool call interrupted by a restart after it had started: "
                "it may have had partial effects."
            )


async def test_a_call_interrupted_by_a_restart_keeps_the_output_it_had_streamed(
    tmp_path: Path,
) -> None:
    started = anyio.Event()

    async def chatty(args: dict[str, Any], api: ToolApi, ctx: Context) -> ToolResult:
        async with api.streaming(ctx):
            api.stream("collected 3 items\n")
            await api.flush(ctx)
            started.set()
            await anyio.sleep_forever()
        raise AssertionError

    never = declaration(lambda *a: _ok("ran"), replay="unsafe")
    await run_until_started(tmp_path, declaration(chatty, replay="unsafe"), started)
    harness, root, _ = await open_harness(tmp_path, [faux_response("after")], never)
    async with harness:
        await harness.resume(BACKGROUND)
        await root.wait_for_idle(BACKGROUND)
        (result,) = await results(root)
    assert result.model[0]["isError"]
    assert text(result).startswith("Tool call interrupted by a restart")
    assert "Output before it stopped:\ncollected 3 items" in text(result)
