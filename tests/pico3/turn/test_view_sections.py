"""The view refreshes only the sections a commit's document ops touched (``turn`` for a
streamed delta, ``tasks`` for a slot, config keys, ``plugins`` for a namespace): the replica a
client folds from the envelopes must stay equal to a view built from scratch, at every point of a
turn with streaming, parallel tool calls, task slots, a queued follow-up, config and namespace
writes."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from chord.context import BACKGROUND, Context
from pico3.harness import Harness
from pico3.kernel.tx import Transaction
from pico3.models.faux import faux_response, faux_text, faux_tool_call
from pico3.tools import ToolApi, ToolDeclaration, ToolResult

pytestmark = pytest.mark.anyio


async def rebuilt(h: Harness, cid: int) -> dict[str, Any]:
    """The view of ``cid`` as a first watch builds it (from the documents and the transcript)."""
    views = h.kernel.views

    async def capture() -> dict[str, Any]:
        view = await views._build(cid, BACKGROUND)  # pyright: ignore[reportPrivateUsage]
        return await view.snapshot(h.kernel.storage, BACKGROUND)

    return await h.kernel.on_line(capture, BACKGROUND)


async def test_the_replica_equals_a_view_built_from_scratch_throughout_a_turn(
    open_session: Any,
) -> None:
    gate = anyio.Event()
    started: list[str] = []
    both = anyio.Event()
    memoed: list[str] = []
    plan: Any = None

    async def slow(args: dict[str, Any], api: ToolApi, ctx: Context) -> ToolResult:
        started.append(str(args["text"]))
        await api.memo("seen", args["text"], ctx)
        memoed.append(str(args["text"]))
        if len(memoed) == 2:
            both.set()  # both calls are running and have written their memos
        await gate.wait()
        return ToolResult.text(f"slow {args['text']}")

    def setup(h: Any) -> None:
        nonlocal plan
        plan = h.namespace("plan", {"sticky": {"n": 0}}, view=lambda s: {"n": s["n"]})
        schema = {"type": "object", "properties": {"text": {"type": "string"}}}
        h.register_tool(ToolDeclaration("slow", "slow tool", schema, slow, replay="safe"))

    long_text = " ".join(f"word{i}" for i in range(40))
    script = [
        faux_response(
            faux_text(long_text),
            faux_tool_call("slow", {"text": "a"}),
            faux_tool_call("slow", {"text": "b"}),
        ),
        faux_response("after the tools"),
        faux_response("the follow-up answered"),
    ]
    checks = 0

    async with open_session(script, setup=setup, config={"selectedTools": ["slow"]}) as s:
        h, cid = s.harness, s.root.id

        async def same() -> None:
            nonlocal checks
            assert s.view == await rebuilt(h, cid)
            checks += 1

        await same()
        await s.root.send("go", BACKGROUND)
        with anyio.fail_after(60):
            await both.wait()

            def running(v: dict[str, Any]) -> bool:
                tools = v["turn"].get("tools") or [] if "turn" in v else []
                return len(tools) == 2 and all(t["status"] == "running" for t in tools)

            await s.wait_view(running)
        await same()  # mid-turn: streamed text, tool slots with memos hidden
        await s.root.send("and then?", BACKGROUND)  # queued: the inbox
        await same()
        await s.root.set_config({"thinkingLevel": "high"}, BACKGROUND)  # a config key
        await same()

        def bump(tx: Transaction, ctx: Context) -> None:
            tx.plugins(plan)["n"] = tx.plugins(plan)["n"] + 1

        await s.root.commit(bump, BACKGROUND)  # a namespace slice
        assert s.view["plugins"]["plan"] == {"n": 1}
        await same()
        gate.set()
        with anyio.fail_after(60):
            await s.idle()
        await same()  # the turn, its tasks and the inbox are gone; entries appended
        await s.root.reset_config(["thinkingLevel"], BACKGROUND)
        await same()
    assert checks == 7
    assert sorted(started) == ["a", "b"]
