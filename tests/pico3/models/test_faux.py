"""The faux provider streams scripts deterministically and honours the stream contract."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from chord.context import BACKGROUND, with_cancel
from pico3.models import (
    DoneEvent,
    ErrorEvent,
    FauxProvider,
    Request,
    StartEvent,
    StreamEvent,
    TextContent,
    TextDeltaEvent,
    ThinkingContent,
    ToolCall,
    ToolCallDeltaEvent,
    ToolCallEndEvent,
    ToolResultMessage,
    UserMessage,
    copy_message,
    faux_demo_script,
    faux_echo,
    faux_error,
    faux_pause,
    faux_response,
    faux_thinking,
    faux_tool_call,
    reduce_events,
)


def _request(text: str = "hi") -> Request:
    return Request(model="faux-1", messages=[UserMessage(content=text)])


async def _collect(provider: FauxProvider, request: Request | None = None) -> list[StreamEvent]:
    return [event async for event in provider.stream(request or _request(), BACKGROUND)]


def _kinds(events: list[StreamEvent]) -> list[str]:
    return [type(event).__name__ for event in events]


@pytest.mark.anyio
async def test_text_streams_word_by_word_and_reduces_to_the_final_message() -> None:
    provider = FauxProvider([faux_response("Hello there, world.")])
    events = await _collect(provider)
    assert isinstance(events[0], StartEvent)
    deltas = [e.delta for e in events if isinstance(e, TextDeltaEvent)]
    assert deltas == ["Hello ", "there, ", "world."]
    done = events[-1]
    assert isinstance(done, DoneEvent) and done.reason == "stop"
    assert done.message.content == [TextContent(text="Hello there, world.")]
    assert reduce_events(events) == done.message


@pytest.mark.anyio
async def test_two_runs_of_one_script_give_identical_events() -> None:
    def script() -> list[Any]:
        return [faux_response(faux_thinking("let me see"), "ok", faux_tool_call("read", {"p": 1}))]

    clock = lambda: 1.5  # noqa: E731
    first = await _collect(FauxProvider(script(), clock=clock))
    second = await _collect(FauxProvider(script(), clock=clock))
    assert first == second


@pytest.mark.anyio
async def test_tool_calls_stream_json_fragments_and_stop_for_tool_use() -> None:
    args = {"path": "src/main.py", "lines": [1, 2, 3], "note": "x" * 40}
    provider = FauxProvider([faux_response("reading", faux_tool_call("read", args))], chunk_chars=8)
    events = await _collect(provider)
    fragments = [e.delta for e in events if isinstance(e, ToolCallDeltaEvent)]
    assert len(fragments) > 3 and all(len(f) <= 8 for f in fragments)
    end = next(e for e in events if isinstance(e, ToolCallEndEvent))
    assert end.tool_call == ToolCall(id="call_1_1", name="read", arguments=args)
    done = events[-1]
    assert isinstance(done, DoneEvent) and done.reason == "toolUse"
    assert reduce_events(events) == done.message


@pytest.mark.anyio
async def test_thinking_keeps_its_signature() -> None:
    provider = FauxProvider([faux_response(faux_thinking("hmm", signature="sig"), "done")])
    events = await _collect(provider)
    done = events[-1]
    assert isinstance(done, DoneEvent)
    assert done.message.content[0] == ThinkingContent(thinking="hmm", signature="sig")
    assert reduce_events(events) == done.message


@pytest.mark.anyio
async def test_usage_is_estimated_from_request_and_output() -> None:
    provider = FauxProvider([faux_response("12345678")])
    events = await _collect(provider, _request("x" * 40))
    done = events[-1]
    assert isinstance(done, DoneEvent) and done.message.usage is not None
    assert (done.message.usage.input, done.message.usage.output) == (10, 2)
    assert done.message.usage.total_tokens == 12


@pytest.mark.anyio
async def test_scripted_error_ends_with_classified_error_event_after_partial_content() -> None:
    provider = FauxProvider([faux_error("overloaded", "partial", retryable=True, retry_after=3)])
    events = await _collect(provider)
    error = events[-1]
    assert isinstance(error, ErrorEvent)
    assert (error.reason, error.retryable, error.retry_after) == ("error", True, 3)
    assert error.error.stop_reason == "error" and error.error.error_message == "overloaded"
    assert error.error.content == [TextContent(text="partial")]


@pytest.mark.anyio
async def test_empty_queue_fails_instead_of_hanging() -> None:
    events = await _collect(FauxProvider())
    assert _kinds(events) == ["StartEvent", "ErrorEvent"]
    error = events[-1]
    assert isinstance(error, ErrorEvent)
    assert error.error.error_message == "No more faux responses queued"


@pytest.mark.anyio
async def test_abort_during_a_pause_ends_with_aborted_and_keeps_partial_text() -> None:
    gate = anyio.Event()
    provider = FauxProvider([faux_response("before ", faux_pause(gate), "after")])
    ctx, cancel = with_cancel(BACKGROUND)
    events: list[StreamEvent] = []
    async for event in provider.stream(_request(), ctx):
        events.append(event)
        if isinstance(event, TextDeltaEvent):
            cancel()  # the stream is now parked on the pause, which the abort must end
    error = events[-1]
    assert isinstance(error, ErrorEvent) and error.reason == "aborted"
    assert error.error.stop_reason == "aborted"
    assert error.error.content == [TextContent(text="before ")]
    assert not gate.is_set()


@pytest.mark.anyio
async def test_abort_between_deltas_stops_the_stream_at_once() -> None:
    provider = FauxProvider([faux_response("one two three four five")])
    ctx, cancel = with_cancel(BACKGROUND)
    events: list[StreamEvent] = []
    async for event in provider.stream(_request(), ctx):
        events.append(event)
        if isinstance(event, TextDeltaEvent) and event.delta == "two ":
            cancel()
    assert [e.delta for e in events if isinstance(e, TextDeltaEvent)] == ["one ", "two "]
    assert isinstance(events[-1], ErrorEvent) and events[-1].reason == "aborted"


@pytest.mark.anyio
async def test_pause_resumes_when_the_gate_is_set() -> None:
    gate = anyio.Event()
    provider = FauxProvider([faux_response("a ", faux_pause(gate), "b")])
    seen: list[StreamEvent] = []

    async def consume() -> None:
        seen.extend([event async for event in provider.stream(_request(), BACKGROUND)])

    async with anyio.create_task_group() as tg:
        tg.start_soon(consume)
        await anyio.wait_all_tasks_blocked()
        assert seen == []  # parked on the gate
        gate.set()
    done = seen[-1]
    assert isinstance(done, DoneEvent)
    assert done.message.content == [TextContent(text="a "), TextContent(text="b")]


@pytest.mark.anyio
async def test_callable_steps_see_the_request_and_the_state() -> None:
    provider = FauxProvider([faux_echo, faux_echo, faux_echo, faux_echo])
    first = await _collect(provider, _request("tool:read,bash"))
    done = first[-1]
    assert isinstance(done, DoneEvent) and done.reason == "toolUse"
    calls = [b for b in done.message.content if isinstance(b, ToolCall)]
    assert [(c.id, c.name) for c in calls] == [("call_1_0", "read"), ("call_1_1", "bash")]
    result = ToolResultMessage(tool_call_id="call_1_0", tool_name="read", content=[])
    after = await _collect(provider, Request(model="faux-1", messages=[result]))
    assert isinstance(after[-1], DoneEvent)
    assert after[-1].message.content == [TextContent(text="after tools")]
    failed = await _collect(provider, _request("error:boom"))
    assert isinstance(failed[-1], ErrorEvent) and failed[-1].error.error_message == "boom"
    plain = await _collect(provider, _request("why"))
    assert isinstance(plain[-1], DoneEvent)
    assert plain[-1].message.content == [TextContent(text="answer to why")]
    assert provider.state.call_count == 4 and provider.pending_count == 0


@pytest.mark.anyio
async def test_demo_script_calls_each_tool_then_summarises() -> None:
    script = faux_demo_script([("read", {"path": "a"}), ("bash", {"command": "ls"})], "All done.")
    provider = FauxProvider(script)
    names: list[str] = []
    for _ in range(2):
        done = (await _collect(provider))[-1]
        assert isinstance(done, DoneEvent) and done.reason == "toolUse"
        names += [b.name for b in done.message.content if isinstance(b, ToolCall)]
    final = (await _collect(provider))[-1]
    assert isinstance(final, DoneEvent) and final.reason == "stop"
    assert names == ["read", "bash"]
    assert final.message.content == [TextContent(text="All done.")]


def test_demo_script_rejects_mismatched_narration() -> None:
    with pytest.raises(ValueError, match="narration has 1 lines for 2 tool calls"):
        faux_demo_script([("a", {}), ("b", {})], "s", narration=["x"])


@pytest.mark.anyio
async def test_copied_partial_does_not_change_as_the_stream_goes_on() -> None:
    provider = FauxProvider([faux_response("alpha beta")])
    snapshot = None
    async for event in provider.stream(_request(), BACKGROUND):
        if isinstance(event, TextDeltaEvent) and snapshot is None:
            snapshot = copy_message(event.partial)
    assert snapshot is not None
    assert snapshot.content == [TextContent(text="alpha ")]


@pytest.mark.anyio
async def test_set_and_append_responses_manage_the_queue() -> None:
    provider = FauxProvider([faux_response("x")])
    provider.set_responses([faux_response("a")])
    provider.append_responses([faux_response("b")])
    assert provider.pending_count == 2
    texts = []
    for _ in range(2):
        done = (await _collect(provider))[-1]
        assert isinstance(done, DoneEvent)
        texts.append(done.message.content)
    assert texts == [[TextContent(text="a")], [TextContent(text="b")]]


@pytest.mark.anyio
async def test_the_provider_keeps_only_its_newest_requests_but_counts_them_all() -> None:
    from pico3.models.faux import KEPT_REQUESTS

    total = KEPT_REQUESTS + 5
    provider = FauxProvider([faux_response(f"a{i}") for i in range(total)])
    for i in range(total):
        await _collect(provider, _request(f"q{i}"))
    assert provider.state.call_count == total
    kept = [r.messages[0].content for r in provider.state.requests]
    assert kept == [f"q{i}" for i in range(5, total)]
