"""pi.generation: admission, outcomes, retry, streaming (docs/design/turn.md#model-call)."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from chord.context import BACKGROUND
from pico3.models.faux import faux_error, faux_pause, faux_response, faux_tool_call
from pico3.models.provider import UserMessage

pytestmark = pytest.mark.anyio


def _model_messages(request: Any) -> list[str]:
    out: list[str] = []
    for message in request.messages:
        if isinstance(message, UserMessage):
            out.append(f"user:{message.content}")
        else:
            out.append(message.role if hasattr(message, "role") else type(message).__name__)
    return out


async def test_idle_send_is_one_envelope_with_placed_added_started(open_session) -> None:
    gate = anyio.Event()
    async with open_session([faux_response(faux_pause(gate), "ok")]) as s:
        handle = await s.root.send("hi", BACKGROUND)
        envelope = next(
            e for e in s.envelopes if any(v["type"] == "input.placed" for v in e.events)
        )
        types = [event["type"] for event in envelope.events]
        assert types == ["entry.added", "input.placed", "turn.started"]
        assert envelope.events[2]["inputs"] == [handle.id]
        assert any(op[0] == "s" and list(op[1]) == ["turn"] for op in envelope.ops)
        gate.set()
        assert (await handle.wait(BACKGROUND)).status == "done"


async def test_final_answer_resolves_input_done_with_the_answer(open_session) -> None:
    async with open_session([faux_response("hello there")]) as s:
        handle = await s.root.send("hi", BACKGROUND)
        record = await handle.wait(BACKGROUND)
        entries = await s.entries()
        assert [e.kind for e in entries] == ["pi.user", "pi.assistant"]
        assert record.status == "done" and record.answer == entries[1].id
        assert entries[1].model[0]["content"] == [{"type": "text", "text": "hello there"}]
        ended = s.events("turn.ended")
        assert ended == [
            {"type": "turn.ended", "inputs": [handle.id], "status": "done", "answer": entries[1].id}
        ]
        await s.idle()
        view = (await s.root.watch(BACKGROUND)).view
        assert "turn" not in view


async def test_tool_calls_create_tools_and_post_tools_with_the_assistant(open_session) -> None:
    # N tool tasks + one post_tools atomically with the assistant entry
    gate = anyio.Event()

    async def noop(args: dict[str, Any], api: Any, ctx: Any) -> Any:
        from pico3.tools import ToolResult

        await gate.wait()
        return ToolResult.text("ok")

    from pico3.tools import ToolDeclaration

    tool = ToolDeclaration("t", "T.", {"type": "object"}, noop)
    script = [
        faux_response(faux_tool_call("t", {}), faux_tool_call("t", {"x": 1})),
        faux_response("fin"),
    ]
    async with open_session(
        script, setup=lambda h: h.tools.register(tool), config={"selectedTools": ["t"]}
    ) as s:
        handle = await s.root.send("go", BACKGROUND)
        await s.wait_event("generation.completed")
        envelope = next(
            e for e in s.envelopes if any(v["type"] == "generation.completed" for v in e.events)
        )
        assert envelope.events[-1]["toolCalls"] == 2
        turn = s.view_after("generation.completed")["turn"]
        assert [slot["status"] for slot in turn["tools"]] == ["pending", "pending"]
        assert "generation" not in turn and "message" not in turn
        result = (await s.harness.get_task(envelope.events[-1]["taskId"], BACKGROUND)).outcome[
            "result"
        ]
        assert len(result["tools"]) == 2 and "postTools" in result
        post = await s.harness.get_task(result["postTools"], BACKGROUND)
        assert post.kind == "pi.post_tools" and post.after == result["tools"]
        gate.set()
        assert (await handle.wait(BACKGROUND)).status == "done"


async def test_retry_waits_backoff_then_succeeds_with_same_prep(open_session) -> None:
    # retrying{attempt 1} -> requesting{attempt 2}; failed attempt -> pi.usage
    script = [faux_error("overloaded", retryable=True), faux_response("second time")]
    async with open_session(script) as s:
        handle = await s.root.send("hi", BACKGROUND)
        await s.clock.wait_for_sleepers(1)
        retrying = s.events("generation.retrying")
        assert len(retrying) == 1
        assert retrying[0]["attempt"] == 1 and retrying[0]["retryAt"] == s.clock.now() + 2000
        s.clock.advance(2000)
        assert (await handle.wait(BACKGROUND)).status == "done"
        entries = await s.entries()
        assert [e.kind for e in entries] == ["pi.user", "pi.usage", "pi.assistant"]
        assert entries[1].data["attempt"] == 1 and entries[1].data["error"] == "overloaded"
        assert entries[2].data == {"attempt": 2}
        assert [e["attempt"] for e in s.events("generation.started")] == [1, 2]
        first, second = s.faux.state.requests
        assert _model_messages(first) == _model_messages(second)


async def test_retry_delay_doubles_and_is_capped(open_session) -> None:
    config = {
        "retry": {"enabled": True, "maxRetries": 5, "baseDelayMs": 1000, "maxAgentDelayMs": 3000}
    }
    script = [faux_error("busy", retryable=True)] * 3 + [faux_response("ok")]
    async with open_session(script, config=config) as s:
        handle = await s.root.send("hi", BACKGROUND)
        delays = []
        for attempt in range(1, 4):
            event = await s.wait_event("generation.retrying", attempt)
            await s.clock.wait_for_sleepers(1)
            delays.append(event["retryAt"] - s.clock.now())
            s.clock.advance(delays[-1])
        assert delays == [1000, 2000, 3000]
        assert (await handle.wait(BACKGROUND)).status == "done"


async def test_retries_exhausted_fails_the_group(open_session) -> None:
    config = {"retry": {"enabled": True, "maxRetries": 1, "baseDelayMs": 10, "maxAgentDelayMs": 10}}
    script = [faux_error("busy", retryable=True), faux_error("still busy", retryable=True)]
    async with open_session(script, config=config) as s:
        handle = await s.root.send("hi", BACKGROUND)
        await s.clock.wait_for_sleepers(1)
        s.clock.advance(10)
        record = await handle.wait(BACKGROUND)
        assert record.status == "unanswered" and record.reason == "failed"
        failed = s.events("generation.failed")
        assert failed[-1]["reason"] == "retries_exhausted"


async def test_retry_disabled_fails_provider_without_retrying(open_session) -> None:
    config = {
        "retry": {"enabled": False, "maxRetries": 3, "baseDelayMs": 10, "maxAgentDelayMs": 10}
    }
    async with open_session([faux_error("busy", retryable=True)], config=config) as s:
        record = await (await s.root.send("hi", BACKGROUND)).wait(BACKGROUND)
        assert record.reason == "failed"
        assert s.events("generation.failed")[0]["reason"] == "provider"
        assert s.events("generation.retrying") == []


async def test_non_retryable_error_is_display_only_and_never_reaches_a_request(
    open_session,
) -> None:
    script = [faux_error("bad request", "partial words"), faux_response("fine")]
    async with open_session(script) as s:
        first = await (await s.root.send("one", BACKGROUND)).wait(BACKGROUND)
        assert first.status == "unanswered" and first.reason == "failed"
        entries = await s.entries()
        shown = entries[-1]
        assert shown.kind == "pi.assistant" and not shown.model
        assert shown.data["reason"] == "error"
        assert shown.data["display"]["errorMessage"] == "bad request"
        await (await s.root.send("two", BACKGROUND)).wait(BACKGROUND)
        request = s.faux.state.requests[-1]
        assert _model_messages(request) == ["user:one", "user:two"]


class _AbortingProvider:
    """A provider whose stream ends "aborted" by itself (a provider-side abort, no mark)."""

    name = "faux"

    def models(self) -> list[Any]:
        from pico3.models.faux import FAUX_MODEL

        return [FAUX_MODEL]

    async def stream(self, request: Any, ctx: Any) -> Any:
        from pico3.models.stream import MessageBuilder

        builder = MessageBuilder(api="faux", provider="faux", model=request.model)
        yield builder.start()
        index, event = builder.open_text()
        yield event
        yield builder.delta(index, "half an ans")
        yield builder.abort()


async def test_provider_side_aborted_stop_fails_the_group_as_provider(open_session) -> None:
    # a provider's in-band "aborted" is not an abort mark
    async with open_session(provider=_AbortingProvider()) as s:
        record = await (await s.root.send("hi", BACKGROUND)).wait(BACKGROUND)
        assert record.status == "unanswered" and record.reason == "failed"
        assert s.events("generation.failed")[0]["reason"] == "provider"
        shown = (await s.entries())[-1]
        assert shown.kind == "pi.assistant" and not shown.model
        assert shown.data["display"]["stopReason"] == "aborted"


async def test_exhausted_script_is_a_provider_failure(open_session) -> None:
    async with open_session([]) as s:
        record = await (await s.root.send("hi", BACKGROUND)).wait(BACKGROUND)
        assert record.reason == "failed"
        assert s.events("generation.failed")[0]["reason"] == "provider"


async def test_missing_model_fails_no_model_and_settles_inputs(open_session) -> None:
    async with open_session([faux_response("never")], model=False) as s:
        record = await (await s.root.send("hi", BACKGROUND)).wait(BACKGROUND)
        assert record.status == "unanswered" and record.reason == "failed"
        assert s.events("generation.failed")[0]["reason"] == "no_model"
        assert s.faux.state.call_count == 0


async def test_streaming_publishes_coalesced_increments_into_turn_message(open_session) -> None:
    # incremental updates (string appends), coalesced; stored message = reduced stream
    words = " ".join(f"word{i}" for i in range(400))
    gate = anyio.Event()
    async with open_session([faux_response(words, faux_pause(gate))]) as s:
        seen = anyio.Event()
        s.on_envelope = lambda: seen.set() if _streamed_text(s.view) == words else None
        handle = await s.root.send("hi", BACKGROUND)
        await seen.wait()
        message_envelopes = [
            e for e in s.envelopes if any(list(op[1])[:2] == ["turn", "message"] for op in e.ops)
        ]
        appends = [op for e in message_envelopes for op in e.ops if op[0] == "a"]
        assert appends and all(list(op[1])[-1] == "text" for op in appends)
        assert len(message_envelopes) < len(words.split(" ")) // 10
        assert s.view["turn"]["generation"]["stage"] == "streaming"
        gate.set()
        await handle.wait(BACKGROUND)
        entries = await s.entries()
        assert entries[-1].model[0]["content"] == [{"type": "text", "text": words}]


def _streamed_text(view: Any) -> str | None:
    message = (view or {}).get("turn", {}).get("message")
    if not message or not message.get("content"):
        return None
    return message["content"][0].get("text")


async def test_busy_send_queues_and_reject_writes_nothing(open_session) -> None:
    from pico3.turn.placement import ConversationBusy

    gate = anyio.Event()
    async with open_session([faux_response(faux_pause(gate), "a"), faux_response("b")]) as s:
        first = await s.root.send("one", BACKGROUND)
        count = len(s.envelopes)
        with pytest.raises(ConversationBusy):
            await s.root.send("no", BACKGROUND, when_busy="reject")
        assert len(s.envelopes) == count
        queued = await s.root.send("two", BACKGROUND)
        assert s.envelopes[-1].events == [
            {"type": "input.queued", "input": queued.id, "mode": "followUp"}
        ]
        assert (await queued.result(BACKGROUND)).status == "queued"
        gate.set()
        assert (await first.wait(BACKGROUND)).status == "done"
        assert (await queued.wait(BACKGROUND)).status == "done"
        kinds = [e.kind for e in await s.entries()]
        assert kinds == ["pi.user", "pi.assistant", "pi.user", "pi.assistant"]


async def test_duplicate_request_id_returns_the_original_and_writes_nothing(open_session) -> None:
    async with open_session([faux_response("a")]) as s:
        first = await s.root.send("one", BACKGROUND, request_id="r1")
        await first.wait(BACKGROUND)
        count = len(s.envelopes)
        again = await s.root.send("one again", BACKGROUND, request_id="r1")
        assert again.id == first.id and len(s.envelopes) == count


async def test_input_abort_outcomes(open_session) -> None:
    gate = anyio.Event()
    async with open_session([faux_response(faux_pause(gate), "a")]) as s:
        first = await s.root.send("one", BACKGROUND)
        queued = await s.root.send("two", BACKGROUND)
        assert await s.root.input_abort(queued.id, BACKGROUND) == "aborted"
        assert await s.root.input_abort(queued.id, BACKGROUND) == "already_placed"
        assert await s.root.input_abort(first.id, BACKGROUND) == "already_placed"
        assert await s.root.input_abort(999_999, BACKGROUND) == "not_found"
        record = await queued.result(BACKGROUND)
        assert record.status == "unanswered" and record.reason == "aborted"
        gate.set()
        await first.wait(BACKGROUND)
        await s.idle()
        assert [e.kind for e in await s.entries()] == ["pi.user", "pi.assistant"]


async def test_several_inputs_of_one_group_resolve_to_the_same_answer(open_session) -> None:
    # follow-ups placed together at a final boundary form one group
    gate = anyio.Event()
    config = {"followUpMode": "all"}
    async with open_session(
        [faux_response(faux_pause(gate), "a"), faux_response("b")], config=config
    ) as s:
        first = await s.root.send("one", BACKGROUND)
        two = await s.root.send("two", BACKGROUND)
        three = await s.root.send("three", BACKGROUND)
        gate.set()
        await first.wait(BACKGROUND)
        a, b = await two.wait(BACKGROUND), await three.wait(BACKGROUND)
        assert a.status == b.status == "done" and a.answer == b.answer
        assert s.faux.state.call_count == 2


async def test_task_abort_keeps_queue_and_conversation_abort_withdraws(open_session) -> None:
    gate = anyio.Event()
    async with open_session([faux_response(faux_pause(gate), "a"), faux_response("b")]) as s:
        first = await s.root.send("one", BACKGROUND)
        queued = await s.root.send("two", BACKGROUND)
        written = await s.root.write("note", BACKGROUND, data={"x": 1})
        await s.root.abort(BACKGROUND)
        record = await first.wait(BACKGROUND)
        assert record.status == "unanswered" and record.reason == "aborted"
        assert (await queued.result(BACKGROUND)).reason == "aborted"
        sticky = await s.root.sticky(BACKGROUND)
        assert [item["id"] for item in sticky["inbox"]] == [written]


async def test_abort_mid_stream_keeps_the_partial_as_display_only(open_session) -> None:
    # docs/design/view.md#commit-mapping: display-only partial, turn deleted, turn.ended{aborted}
    gate = anyio.Event()
    async with open_session([faux_response("some partial words", faux_pause(gate), "rest")]) as s:
        handle = await s.root.send("hi", BACKGROUND)
        # the display entry keeps what was published (the timer flushes the tail within 100 ms)
        await s.wait_view(lambda v: _streamed_text(v) == "some partial words")
        await s.root.abort(BACKGROUND)
        record = await handle.wait(BACKGROUND)
        assert record.status == "unanswered" and record.reason == "aborted"
        shown = (await s.entries())[-1]
        assert shown.kind == "pi.assistant" and not shown.model
        assert shown.data["reason"] == "aborted"
        assert shown.data["display"]["content"][0]["text"].startswith("some partial")
        ended = s.events("turn.ended")[-1]
        assert ended["status"] == "unanswered" and ended["reason"] == "aborted"
        assert "turn" not in s.view


def test_a_harness_window_has_the_same_key_at_every_access_and_another_harness_another() -> None:
    from pico3.tasks.runtime import TaskHarness

    one, other = object(), object()
    assert TaskHarness(one).key == TaskHarness(one).key
    assert TaskHarness(one).key != TaskHarness(other).key


def test_the_request_memos_of_two_harnesses_conversation_one_are_kept_apart() -> None:
    # Two sessions in one process both have a conversation 1: each keeps its own memo, so
    # alternating turns between them does not convert each one's whole history every turn.
    from pico3.turn.model_call import _memo

    first, second = _memo(101, 1), _memo(202, 1)
    assert first is not second
    assert _memo(101, 1) is first
    assert _memo(202, 1) is second
