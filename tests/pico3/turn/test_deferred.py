"""pi.generation with deferred answers (docs/design/turn.md#model-call ``deferred``, docs/design/view.md#shape, #commit-mapping, docs/design/turn.md#models).

A faux step answers with a handle instead of a message; the generation persists ``{handle,
pollAt}``, sleeps on the ManualClock and polls with ``fetch_deferred``. Time moves only when a
test advances the clock, and every wait is on an event or a sleeper count, never on time.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from chord.context import BACKGROUND
from pico3.harness import Harness, HarnessOptions
from pico3.models.faux import (
    FAUX_MODEL,
    FauxProvider,
    faux_deferred,
    faux_fetch_error,
    faux_not_ready,
    faux_response,
    faux_tool_call,
)
from pico3.models.provider import FetchResult, ModelInfo, Request, StreamEvent
from pico3.models.stream import MessageBuilder
from pico3.storage import JsonlStorage, MemoryStorage
from pico3.tasks.clock import ManualClock
from pico3.tools import ToolDeclaration, ToolResult
from pico3.turn import MODEL_CALL_KIND
from pico3.turn.model_call import DEFAULT_POLL_MS
from pico3.turn.models import Models

pytestmark = pytest.mark.anyio

MODEL = {"provider": "faux", "modelId": "faux-1"}


async def checkpoint(s: Any, task_id: int) -> dict[str, Any]:
    task = await s.harness.get_task(task_id, BACKGROUND)
    assert task is not None and isinstance(task.checkpoint, dict)
    return task.checkpoint


def without_timestamp(message: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in message.items() if k != "timestamp"}


async def test_deferred_answer_persists_handle_and_polls_at_poll_after(open_session) -> None:
    # pollAfterMs respected; docs/design/view.md#shape {stage: deferred, attempt, pollAt}; docs/design/view.md#view-events event
    async with open_session([faux_deferred("the answer", poll_after_ms=7000)]) as s:
        start = s.clock.now()
        handle = await s.root.send("hi", BACKGROUND)
        event = await s.wait_event("generation.deferred")
        task_id = event["taskId"]
        assert event == {"type": "generation.deferred", "taskId": task_id, "pollAt": start + 7000}
        view = await s.wait_view(lambda v: v["turn"]["generation"]["stage"] == "deferred")
        assert view["turn"]["generation"] == {
            "stage": "deferred",
            "attempt": 1,
            "pollAt": start + 7000,
        }
        assert "message" not in view["turn"]
        saved = await checkpoint(s, task_id)
        assert saved["phase"] == "deferred"
        assert saved["handle"] == "faux-deferred-1" and saved["pollAt"] == start + 7000
        assert saved["attempt"] == 1 and saved["model"] == MODEL

        await s.clock.wait_for_sleepers(1)
        s.clock.advance(6999)  # one millisecond early: the poll stays asleep
        assert s.clock.sleepers == 1 and s.faux.state.fetches == []
        s.clock.advance(1)
        record = await handle.wait(BACKGROUND)

        assert record.status == "done"
        assert s.faux.state.fetches == ["faux-deferred-1"]
        assert s.faux.state.call_count == 1
        entries = await s.entries()
        assert [e.kind for e in entries] == ["pi.user", "pi.assistant"]
        assert record.answer == entries[1].id
        assert entries[1].model[0]["content"] == [{"type": "text", "text": "the answer"}]
        assert [e["type"] for e in s.events() if e["type"].startswith("generation.")] == [
            "generation.started",
            "generation.deferred",
            "generation.completed",
        ]
        await s.idle()
        assert "turn" not in s.view
        deferred_answer = entries[1]

    # the same exchange streamed: the stored assistant message is the same (but its time)
    async with open_session([faux_response("the answer")], storage=MemoryStorage()) as s:
        await (await s.root.send("hi", BACKGROUND)).wait(BACKGROUND)
        streamed = (await s.entries())[1]
    assert without_timestamp(deferred_answer.model[0]) == without_timestamp(streamed.model[0])
    assert deferred_answer.data == streamed.data


async def test_poll_defaults_to_five_seconds(open_session) -> None:
    # pollAt = now + (pollAfterMs or 5000)
    async with open_session([faux_deferred("ok")]) as s:
        start = s.clock.now()
        handle = await s.root.send("hi", BACKGROUND)
        event = await s.wait_event("generation.deferred")
        assert event["pollAt"] == start + DEFAULT_POLL_MS == start + 5000
        await s.clock.wait_for_sleepers(1)
        s.clock.advance(DEFAULT_POLL_MS)
        assert (await handle.wait(BACKGROUND)).status == "done"


async def test_not_ready_re_defers_with_a_new_handle_and_poll_time(open_session) -> None:
    # a re-deferred handle refreshes the checkpoint
    script = [faux_deferred(faux_not_ready(poll_after_ms=3000), "finally", poll_after_ms=1000)]
    async with open_session(script) as s:
        start = s.clock.now()
        handle = await s.root.send("hi", BACKGROUND)
        first = await s.wait_event("generation.deferred")
        assert first["pollAt"] == start + 1000
        await s.clock.wait_for_sleepers(1)
        s.clock.advance(1000)

        second = await s.wait_event("generation.deferred", 2)
        assert second["pollAt"] == start + 1000 + 3000
        saved = await checkpoint(s, first["taskId"])
        assert saved["phase"] == "deferred" and saved["handle"] == "faux-deferred-2"
        assert saved["pollAt"] == second["pollAt"] and saved["attempt"] == 1
        view = await s.wait_view(
            lambda v: v["turn"]["generation"].get("pollAt") == second["pollAt"]
        )
        assert view["turn"]["generation"]["stage"] == "deferred"

        await s.clock.wait_for_sleepers(1)
        s.clock.advance(3000)
        assert (await handle.wait(BACKGROUND)).status == "done"
        assert s.faux.state.fetches == ["faux-deferred-1", "faux-deferred-2"]
        assert s.faux.state.call_count == 1
        assert (await s.entries())[-1].model[0]["content"][0]["text"] == "finally"


async def test_abort_while_deferred_cancels_the_handle_and_ends_aborted(open_session) -> None:
    # abort calls cancel_deferred; docs/design/turn.md#model-call abort closure
    async with open_session([faux_deferred("never fetched")]) as s:
        handle = await s.root.send("hi", BACKGROUND)
        event = await s.wait_event("generation.deferred")
        await s.clock.wait_for_sleepers(1)
        await s.root.abort(BACKGROUND)

        record = await handle.wait(BACKGROUND)
        assert record.status == "unanswered" and record.reason == "aborted"
        task = await s.harness.wait_for_task(event["taskId"], BACKGROUND)
        assert isinstance(task.outcome, dict) and task.outcome["status"] == "aborted"
        assert s.faux.state.cancelled == ["faux-deferred-1"]
        assert s.faux.state.fetches == [] and s.faux.deferred_handles == []
        ended = s.events("turn.ended")
        assert ended[-1]["status"] == "unanswered" and ended[-1]["reason"] == "aborted"
        entries = await s.entries()
        assert [e.kind for e in entries] == ["pi.user", "pi.assistant"]
        # nothing was streamed: the mark that the answer was interrupted, display-only
        assert not entries[1].model and entries[1].data["reason"] == "aborted"
        assert entries[1].data["display"]["content"] == []
        assert entries[1].data["display"]["stopReason"] == "aborted"


async def test_fetch_error_retries_the_request_under_the_retry_policy(open_session) -> None:
    # a failing fetch is a failed attempt: pi.usage, retrying, then a fresh request
    script = [faux_deferred(faux_fetch_error("gateway down")), faux_response("second try")]
    async with open_session(script) as s:
        handle = await s.root.send("hi", BACKGROUND)
        await s.wait_event("generation.deferred")
        await s.clock.wait_for_sleepers(1)
        s.clock.advance(DEFAULT_POLL_MS)

        retrying = await s.wait_event("generation.retrying")
        assert retrying["attempt"] == 1
        assert retrying["error"] == "deferred fetch failed: gateway down"
        assert retrying["retryAt"] == s.clock.now() + 2000
        saved = await checkpoint(s, retrying["taskId"])
        assert saved["phase"] == "retrying" and "handle" not in saved and "pollAt" not in saved

        await s.clock.wait_for_sleepers(1)
        s.clock.advance(2000)
        assert (await handle.wait(BACKGROUND)).status == "done"
        assert s.faux.state.call_count == 2
        entries = await s.entries()
        assert [e.kind for e in entries] == ["pi.user", "pi.usage", "pi.assistant"]
        assert entries[1].data == {"attempt": 1, "error": "deferred fetch failed: gateway down"}
        assert entries[2].data == {"attempt": 2}


async def test_non_retryable_fetch_error_fails_the_turn(open_session) -> None:
    script = [faux_deferred(faux_fetch_error("batch expired", retryable=False))]
    async with open_session(script) as s:
        handle = await s.root.send("hi", BACKGROUND)
        await s.wait_event("generation.deferred")
        await s.clock.wait_for_sleepers(1)
        s.clock.advance(DEFAULT_POLL_MS)
        record = await handle.wait(BACKGROUND)
        assert record.status == "unanswered" and record.reason == "failed"
        (failed,) = s.events("generation.failed")
        assert failed["reason"] == "provider"
        assert failed["detail"] == "deferred fetch failed: batch expired"
        assert s.faux.state.call_count == 1


async def test_fetched_tool_calls_run_like_streamed_ones(open_session) -> None:
    # the offered tool list survives the deferred checkpoint
    ran: list[dict[str, Any]] = []

    async def execute(args: dict[str, Any], api: Any, ctx: Any) -> ToolResult:
        ran.append(args)
        return ToolResult.text("ran")

    tool = ToolDeclaration("t", "T.", {"type": "object"}, execute)
    script = [faux_deferred(faux_response(faux_tool_call("t", {"n": 1}))), faux_response("fin")]
    async with open_session(
        script, setup=lambda h: h.tools.register(tool), config={"selectedTools": ["t"]}
    ) as s:
        handle = await s.root.send("go", BACKGROUND)
        await s.wait_event("generation.deferred")
        await s.clock.wait_for_sleepers(1)
        s.clock.advance(DEFAULT_POLL_MS)
        assert (await handle.wait(BACKGROUND)).status == "done"
        assert ran == [{"n": 1}]
        kinds = [e.kind for e in await s.entries()]
        assert kinds == ["pi.user", "pi.system", "pi.assistant", "pi.tool_result", "pi.assistant"]
        (completed, _) = s.events("generation.completed")
        assert completed["toolCalls"] == 1


async def test_after_response_sees_the_fetched_message_not_the_handle(open_session) -> None:
    # once per terminal message, deferred fetches included
    seen: list[tuple[str, int, str]] = []

    def observe(message: dict[str, Any], api: Any, ctx: Any) -> None:
        text = "".join(b.get("text", "") for b in message["content"])
        seen.append((message["stopReason"], api.attempt, text))

    def setup(h: Any) -> None:
        h.hooks(h.namespace("watcher"), MODEL_CALL_KIND, {"after_response": observe})

    script = [faux_deferred(faux_not_ready(), "late")]
    async with open_session(script, setup=setup) as s:
        handle = await s.root.send("hi", BACKGROUND)
        for n in (1, 2):
            await s.wait_event("generation.deferred", n)
            await s.clock.wait_for_sleepers(1)
            s.clock.advance(DEFAULT_POLL_MS)
        await handle.wait(BACKGROUND)
        assert seen == [("stop", 1, "late")]


async def test_suspend_while_deferred_resumes_polling_without_a_new_request(
    tmp_path: Path,
) -> None:
    # docs/design/turn.md#model-call: deferred is not in-flight; recovery polls the persisted handle
    faux = FauxProvider([faux_deferred("after the restart", poll_after_ms=4000)])

    async def open_harness() -> tuple[Harness, ManualClock]:
        clock = ManualClock(1_000_000)
        options = HarnessOptions(
            require_approval=False, clock=clock, services={"models": Models([faux])}
        )
        harness = await Harness.open(JsonlStorage(tmp_path, fsync=False), options, BACKGROUND)
        return harness, clock

    harness, clock = await open_harness()
    async with harness:
        root = await harness.root(BACKGROUND)
        await root.set_config({"model": MODEL}, BACKGROUND)
        await harness.resume(BACKGROUND)
        sent = await root.send("hi", BACKGROUND)
        await clock.wait_for_sleepers(1)  # the deferred phase sleeps until pollAt
        sticky = await root.sticky(BACKGROUND)
        assert sticky["turn"]["generation"]["stage"] == "deferred"
        await harness.suspend(BACKGROUND)
    assert faux.state.fetches == [] and faux.state.call_count == 1

    harness, clock = await open_harness()
    async with harness:
        root = await harness.root(BACKGROUND)
        await harness.resume(BACKGROUND)
        await clock.wait_for_sleepers(1)
        generation = (await root.sticky(BACKGROUND))["turn"]["generation"]
        assert generation == {"stage": "deferred", "attempt": 1, "pollAt": 1_004_000}
        clock.advance(4000)
        record = await harness.wait_for_input(sent.id, BACKGROUND)
        entries = list(reversed(await root.entries(BACKGROUND, limit=10)))
    assert record.status == "done"
    assert faux.state.call_count == 1 and faux.state.fetches == ["faux-deferred-1"]
    assert [e.kind for e in entries] == ["pi.user", "pi.assistant"]
    model = entries[1].model
    assert isinstance(model, list)
    assert model[0]["content"] == [{"type": "text", "text": "after the restart"}]


class _DefersOnly:
    """A provider that answers every request with a deferred handle and cannot fetch it."""

    name = "faux"

    def __init__(self, handle: Any) -> None:
        self.handle = handle

    def models(self) -> Sequence[ModelInfo]:
        return (FAUX_MODEL,)

    def model(self, model_id: str) -> ModelInfo:
        return FAUX_MODEL

    async def stream(self, request: Request, ctx: Any) -> AsyncIterator[StreamEvent]:
        builder = MessageBuilder(api="faux", provider="faux", model=request.model)
        yield builder.start()
        yield builder.defer(self.handle)


class _DefersBadHandle(_DefersOnly):
    async def fetch_deferred(self, model: str, handle: Any, ctx: Any) -> FetchResult:
        raise AssertionError("never fetched: the handle was never stored")

    async def cancel_deferred(self, model: str, handle: Any, ctx: Any) -> None:
        return None


@pytest.mark.parametrize(
    ("provider", "detail"),
    [
        (_DefersOnly("h1"), "provider 'faux' deferred but cannot fetch_deferred"),
        (_DefersBadHandle(float("nan")), "deferred handle is not strict JSON"),
    ],
)
async def test_an_unusable_deferred_answer_fails_the_turn_without_persisting(
    open_session, provider: Any, detail: str
) -> None:
    async with open_session(provider=provider) as s:
        handle = await s.root.send("hi", BACKGROUND)
        record = await handle.wait(BACKGROUND)
        assert record.status == "unanswered" and record.reason == "failed"
        (failed,) = s.events("generation.failed")
        assert failed["reason"] == "provider" and failed["detail"].startswith(detail)
        assert s.events("generation.deferred") == []
