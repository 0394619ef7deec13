"""``waitingOn`` through the real turn loop (docs/design/harness.md#before-tool): set in
its own envelope, cleared in the same envelope as ``started`` (allowed) or the synthetic result
(blocked or raised), and never left durable after a conversation abort."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest

from chord.context import BACKGROUND, Context
from chord.delta import apply_immutable
from pico3.harness import ConversationHandle, Harness, HarnessOptions
from pico3.hooks import BeforeToolApi
from pico3.kernel.view import Envelope
from pico3.models.faux import FauxProvider, faux_response, faux_tool_call
from pico3.storage import MemoryStorage
from pico3.tasks.clock import ManualClock
from pico3.tools import ToolApi, ToolDeclaration, ToolResult
from pico3.turn.models import Models
from pico3.turn.tool import TOOL_KIND

pytestmark = pytest.mark.anyio
MODEL = {"provider": "faux", "modelId": "faux-1"}


async def _run(args: dict[str, Any], api: ToolApi, ctx: Context) -> ToolResult:
    return ToolResult.text("ran")


GATED = ToolDeclaration("gated", "A gated tool.", {"type": "object"}, _run)


class Replica:
    """Folds every envelope like a client; remembers the view before and after each."""

    def __init__(self, view: Any) -> None:
        self.view = view
        self.steps: list[tuple[Any, Envelope, Any]] = []
        self.arrived = anyio.Event()

    def __call__(self, envelope: Envelope) -> None:
        before, self.view = self.view, apply_immutable(self.view, envelope.ops)
        self.steps.append((before, envelope, self.view))
        self.arrived.set()
        self.arrived = anyio.Event()

    def step_with(self, event_type: str) -> tuple[Any, Envelope, Any]:
        for step in self.steps:
            if any(event["type"] == event_type for event in step[1].events):
                return step
        raise AssertionError(f"no envelope carried {event_type}")

    async def wait_for(self, event_type: str) -> None:
        while not any(e["type"] == event_type for _, env, _ in self.steps for e in env.events):
            await self.arrived.wait()


@asynccontextmanager
async def turn_with_hook(
    handler: Any,
) -> AsyncIterator[tuple[Harness, ConversationHandle, Replica]]:
    faux = FauxProvider([faux_response(faux_tool_call("gated", {})), faux_response("done")])
    options = HarnessOptions(clock=ManualClock(1_000_000), services={"models": Models([faux])})
    async with await Harness.open(MemoryStorage(), options, BACKGROUND) as h:
        h.register_tool(GATED)
        hook = h.hooks(h.namespace("approval"), TOOL_KIND, {"before_tool": handler})
        h.register_approval_authority(hook)  # the approval gate lets what it allows run
        root = await h.root(BACKGROUND)
        await root.set_config({"model": MODEL, "selectedTools": ["gated"]}, BACKGROUND)
        watch = await root.watch(BACKGROUND)
        replica = Replica(watch.view)
        watch.start(replica)
        await h.resume(BACKGROUND)
        yield h, root, replica


def waiting_on(view: Any) -> Any:
    tools = ((view or {}).get("turn") or {}).get("tools") or [{}]
    return tools[0].get("waitingOn")


@pytest.mark.parametrize(
    ("decision", "closing_event"),
    [("allow", "tool.started"), ("block", "tool.finished"), ("raise", "tool.finished")],
)
async def test_waiting_on_is_cleared_in_the_envelope_that_decides_the_call(
    decision: str, closing_event: str
) -> None:
    async def handler(call: dict[str, Any], api: BeforeToolApi, ctx: Context) -> Any:
        await api.waiting(ctx)
        if decision == "block":
            return {"block": "denied"}
        if decision == "raise":
            raise RuntimeError("approval service down")
        return None

    async with turn_with_hook(handler) as (_h, root, replica):
        await (await root.send("go", BACKGROUND)).wait(BACKGROUND)
    before, envelope, after = replica.step_with("tool.waiting")
    assert waiting_on(before) is None and waiting_on(after) == "approval"
    assert [e["type"] for e in envelope.events] == ["tool.waiting"]  # its own commit
    before, envelope, after = replica.step_with(closing_event)
    assert waiting_on(before) == "approval" and waiting_on(after) is None
    status = after["turn"]["tools"][0]["status"]
    assert status == ("running" if decision == "allow" else "error")


async def test_conversation_abort_while_waiting_unwinds_the_handler_and_clears_waiting_on() -> None:
    unwound = anyio.Event()

    async def handler(call: dict[str, Any], api: BeforeToolApi, ctx: Context) -> Any:
        await api.waiting(ctx)
        try:
            await anyio.Event().wait()  # the human never answers
        finally:
            unwound.set()

    async with turn_with_hook(handler) as (_h, root, replica):
        handle = await root.send("go", BACKGROUND)
        await replica.wait_for("tool.waiting")
        await root.abort(BACKGROUND)
        await unwound.wait()
        input_record = await handle.wait(BACKGROUND)
        sticky = await root.sticky(BACKGROUND)
    assert input_record.status == "unanswered"
    assert "waitingOn" not in repr(sticky)
    assert waiting_on(replica.view) is None
