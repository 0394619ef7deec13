"""The OpenAI adapter, with the real SDK talking to a local stub server."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from provider_support import Sleeps, collect
from stub_server import Reply, StubServer, sse

from chord.context import BACKGROUND, with_cancel
from coding_agent.settings.model_config import LOCAL_COMPAT, OPENAI_COMPAT
from coding_agent.worker.providers.openai import OpenAIProvider, build_params
from pico3.models import (
    DoneEvent,
    ErrorEvent,
    Request,
    RetryPolicy,
    StartEvent,
    StreamEvent,
    TextContent,
    TextDeltaEvent,
    ThinkingContent,
    Tool,
    ToolCall,
    ToolCallDeltaEvent,
    UserMessage,
    messages_from_json,
    reduce_events,
)

MODEL = "gpt-4.1"


def _chunk(delta: dict[str, Any] | None = None, finish: str | None = None, **extra: Any) -> str:
    choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
    body = {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1_700_000_000,
        "model": MODEL,
        "choices": choices,
        **extra,
    }
    return sse(body)


def _usage(prompt: int, completion: int, cached: int = 0) -> str:
    usage = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": cached},
    }
    return _chunk(None, usage=usage)


def _text_events(*parts: str) -> list[str]:
    return [
        _chunk({"role": "assistant", "content": ""}),
        *(_chunk({"content": p}) for p in parts),
        _chunk({}, "stop"),
        _usage(1000, 20, cached=400),
        sse("[DONE]"),
    ]


def _provider(server: StubServer, sleeps: Sleeps | None = None, **kw: Any) -> OpenAIProvider:
    return OpenAIProvider(
        api_key="test-key",
        base_url=f"{server.url}/v1",
        compat=kw.pop("compat", OPENAI_COMPAT),
        sleep=sleeps or Sleeps(),
        retry=RetryPolicy(max_retries=2, base_delay=1.0, jitter=0.0),
        **kw,
    )


def _request(**kw: Any) -> Request:
    return Request(model=kw.pop("model", MODEL), messages=[UserMessage(content="hi")], **kw)


async def _run_cancelled_at_first_delta(provider: OpenAIProvider) -> list[StreamEvent]:
    """Stream ``_request()`` and cancel the context at the first text delta; all events seen."""
    ctx, cancel = with_cancel(BACKGROUND)
    events: list[StreamEvent] = []
    try:
        async for event in provider.stream(_request(), ctx):
            events.append(event)
            if isinstance(event, TextDeltaEvent):
                cancel()
    finally:
        await provider.aclose()
    return events


@pytest.mark.anyio
async def test_plain_text_answer_with_usage_from_the_final_chunk() -> None:
    with StubServer([Reply(events=_text_events("Hel", "lo"))]) as server:
        events = await collect(_provider(server), _request(system=["a", "b"]))
    assert [e.delta for e in events if isinstance(e, TextDeltaEvent)] == ["Hel", "lo"]
    done = events[-1]
    assert isinstance(done, DoneEvent) and done.reason == "stop"
    assert done.message.content == [TextContent(text="Hello")]
    usage = done.message.usage
    assert usage is not None
    assert (usage.input, usage.output, usage.cache_read) == (600, 20, 400)
    assert usage.cost.total == pytest.approx((600 * 2 + 20 * 8 + 400 * 0.5) / 1e6)
    assert reduce_events(events) == done.message
    sent = server.requests[0]
    assert sent.path == "/v1/chat/completions"
    assert sent.headers["authorization"] == "Bearer test-key"
    assert sent.body["stream_options"] == {"include_usage": True}
    assert sent.body["messages"][0] == {"role": "system", "content": "a\n\nb"}
    assert sent.body["max_completion_tokens"] == 32_768


@pytest.mark.anyio
async def test_parallel_tool_calls_stream_arguments_by_index() -> None:
    events_in = [
        _chunk({"role": "assistant", "content": None}),
        _chunk(
            {
                "tool_calls": [
                    {
                        "index": 0,
                        "id": "call_a",
                        "type": "function",
                        "function": {"name": "read", "arguments": ""},
                    }
                ]
            }
        ),
        _chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"path":'}}]}),
        _chunk(
            {
                "tool_calls": [
                    {
                        "index": 1,
                        "id": "call_b",
                        "type": "function",
                        "function": {"name": "ls", "arguments": "{}"},
                    }
                ]
            }
        ),
        _chunk({"tool_calls": [{"index": 0, "function": {"arguments": ' "a.py"}'}}]}),
        _chunk({}, "tool_calls"),
        _usage(50, 30),
        sse("[DONE]"),
    ]
    tools = [Tool(name="read", description="Read", parameters={"type": "object"})]
    with StubServer([Reply(events=events_in)]) as server:
        events = await collect(_provider(server), _request(tools=tools))
    assert [e.delta for e in events if isinstance(e, ToolCallDeltaEvent)] == [
        '{"path":',
        "{}",
        ' "a.py"}',
    ]
    done = events[-1]
    assert isinstance(done, DoneEvent) and done.reason == "toolUse"
    assert done.message.content == [
        ToolCall(id="call_a", name="read", arguments={"path": "a.py"}),
        ToolCall(id="call_b", name="ls", arguments={}),
    ]
    assert reduce_events(events) == done.message
    assert server.requests[0].body["tools"] == [
        {
            "type": "function",
            "function": {"name": "read", "description": "Read", "parameters": {"type": "object"}},
        }
    ]


@pytest.mark.anyio
async def test_local_server_reasoning_and_compat_profile() -> None:
    events_in = [
        _chunk({"role": "assistant", "reasoning_content": "think"}),
        _chunk({"reasoning_content": "ing"}),
        _chunk({"content": "answer"}),
        _chunk({}, "length"),
        sse("[DONE]"),
    ]
    no_usage = LOCAL_COMPAT.__class__(usage_in_streaming=False, max_tokens_field="max_tokens")
    with StubServer([Reply(events=events_in)]) as server:
        events = await collect(
            _provider(server, compat=no_usage), _request(model="qwen3:8b", max_tokens=256)
        )
    done = events[-1]
    assert isinstance(done, DoneEvent) and done.reason == "length"
    assert done.message.content == [
        ThinkingContent(thinking="thinking"),
        TextContent(text="answer"),
    ]
    assert done.message.usage is None  # unknown, not zero
    body = server.requests[0].body
    assert body["max_tokens"] == 256 and "stream_options" not in body
    assert body["model"] == "qwen3:8b"


@pytest.mark.anyio
async def test_429_waits_for_retry_after_and_retries_once() -> None:
    limited = Reply(
        429,
        {"retry-after": "3"},
        {
            "error": {
                "message": "Rate limit reached",
                "type": "requests",
                "code": "rate_limit_exceeded",
            }
        },
    )
    sleeps = Sleeps()
    with StubServer([limited, Reply(events=_text_events("ok"))]) as server:
        events = await collect(_provider(server, sleeps), _request())
    assert sleeps.waits == [3.0] and len(server.requests) == 2
    done = events[-1]
    assert isinstance(done, DoneEvent) and done.message.content == [TextContent(text="ok")]


@pytest.mark.anyio
async def test_500_backs_off_then_succeeds() -> None:
    failed = Reply(500, json_body={"error": {"message": "internal", "type": "server_error"}})
    sleeps = Sleeps()
    with StubServer([failed, Reply(events=_text_events("ok"))]) as server:
        events = await collect(_provider(server, sleeps), _request())
    assert sleeps.waits == [1.0] and len(server.requests) == 2
    assert isinstance(events[-1], DoneEvent)


@pytest.mark.anyio
async def test_400_is_not_retried_and_surfaces_the_servers_message() -> None:
    bad = Reply(
        400,
        json_body={
            "error": {"message": "Unknown parameter: 'x'.", "type": "invalid_request_error"}
        },
    )
    sleeps = Sleeps()
    with StubServer([bad]) as server:
        events = await collect(_provider(server, sleeps), _request())
    assert sleeps.waits == [] and len(server.requests) == 1
    error = events[-1]
    assert isinstance(error, ErrorEvent) and not error.retryable
    assert error.error.error_message == "openai 400: Unknown parameter: 'x'."


@pytest.mark.anyio
@pytest.mark.parametrize("status", [404, 405, 501])
async def test_a_404_names_the_url_and_what_to_check(status: int) -> None:
    """A wrong base URL said only ``openai 404: Error code: 404`` (issue 38 item 8); a web
    server that takes no POST there answers 405 or 501 (``python -m http.server``)."""
    with StubServer([Reply(status, json_body={"error": "not found"})]) as server:
        events = await collect(_provider(server, Sleeps()), _request())
    error = events[-1]
    assert isinstance(error, ErrorEvent) and not error.retryable
    message = error.error.error_message
    assert message is not None
    assert message.startswith(f"openai {status} from {server.url}/")
    assert "check the base URL (OPENAI_BASE_URL or providers.openai.base_url" in message


@pytest.mark.anyio
async def test_a_stream_cut_before_finish_reason_is_a_retryable_error() -> None:
    events_in = [_chunk({"role": "assistant", "content": "par"}), sse("[DONE]")]
    with StubServer([Reply(events=events_in)]) as server:
        events = await collect(_provider(server), _request())
    error = events[-1]
    assert isinstance(error, ErrorEvent) and error.retryable
    assert error.error.content == [TextContent(text="par")]


@pytest.mark.anyio
async def test_abort_mid_stream_closes_the_connection_and_ends_aborted() -> None:
    reply = Reply(events=_text_events("first", "second"), hold_after=2)
    with StubServer([reply]) as server:
        events = await _run_cancelled_at_first_delta(_provider(server))
        assert await anyio.to_thread.run_sync(server.disconnected.wait, 10)
    error = events[-1]
    assert isinstance(error, ErrorEvent) and error.reason == "aborted"
    assert error.error.content == [TextContent(text="first")]


def test_history_converts_tool_calls_and_results() -> None:
    messages = messages_from_json(
        [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "see"},
                    {"type": "image", "data": "AA==", "mimeType": "image/png"},
                ],
            },
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "private"},
                    {"type": "toolCall", "id": "c", "name": "ls", "arguments": {"p": "."}},
                ],
            },
            {
                "role": "toolResult",
                "toolCallId": "c",
                "toolName": "ls",
                "content": [{"type": "text", "text": "a"}],
            },
        ]
    )
    info = OpenAIProvider(api_key="k").model("gpt-5")
    params = build_params(
        Request(model="gpt-5", messages=messages, thinking_level="xhigh"), info, OPENAI_COMPAT
    )
    sent = params["messages"]
    assert sent[0]["content"][1] == {
        "type": "image_url",
        "image_url": {"url": "data:image/png;base64,AA=="},
    }
    assert sent[1] == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "c", "type": "function", "function": {"name": "ls", "arguments": '{"p":"."}'}}
        ],
    }
    assert sent[2] == {"role": "tool", "tool_call_id": "c", "content": "a"}
    assert params["reasoning_effort"] == "high"


@pytest.mark.anyio
async def test_abort_while_waiting_for_the_server_ends_the_read_at_once() -> None:
    reply = Reply(events=_text_events("first", "second"), hold_after=2)
    ctx, cancel = with_cancel(BACKGROUND)
    events: list[StreamEvent] = []
    with StubServer([reply]) as server:
        provider = _provider(server)

        async def consume() -> None:
            async for event in provider.stream(_request(), ctx):
                events.append(event)

        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(consume)
                # The server has sent "first" and is now holding: the adapter is blocked reading.
                assert await anyio.to_thread.run_sync(server.holding.wait, 10)
                await anyio.wait_all_tasks_blocked()
                cancel()
        finally:
            await provider.aclose()
        assert await anyio.to_thread.run_sync(server.disconnected.wait, 10)
    error = events[-1]
    assert isinstance(error, ErrorEvent) and error.reason == "aborted"
    assert error.error.content == [TextContent(text="first")]


# -- many events in one network read (the reader takes them as one batch) ---------------------
@pytest.mark.anyio
async def test_an_abort_stops_between_the_events_of_one_read() -> None:
    body = "".join(_text_events(*"abcdefghij"))  # one write: the client reads it at once
    with StubServer([Reply(events=[body])]) as server:
        events = await _run_cancelled_at_first_delta(_provider(server))
    assert [e.delta for e in events if isinstance(e, TextDeltaEvent)] == ["a"]
    error = events[-1]
    assert isinstance(error, ErrorEvent) and error.reason == "aborted"
    assert error.error.content == [TextContent(text="a")]


@pytest.mark.anyio
async def test_a_malformed_event_after_good_ones_in_the_same_read_keeps_them() -> None:
    good = _text_events("ab", "cd", "ef")[:4]  # the role chunk and three deltas
    body = "".join(good) + "data: {not json\n\n" + "".join(_text_events("never"))
    with StubServer([Reply(events=[body])]) as server:
        events = await collect(_provider(server), _request())
    assert [e.delta for e in events if isinstance(e, TextDeltaEvent)] == ["ab", "cd", "ef"]
    error = events[-1]
    assert isinstance(error, ErrorEvent) and error.reason == "error"
    assert "malformed stream chunk" in (error.error.error_message or "")
    assert error.error.content == [TextContent(text="abcdef")]
    assert len(server.requests) == 1  # a broken stream is not retried


@pytest.mark.anyio
async def test_batches_are_the_events_a_list_per_read() -> None:
    """``stream(...).batches()`` (what ``stream_message`` reads) gives the events iterating the
    stream gives, in order; a body the client reads at once comes as few lists, not one per
    event (``start`` alone first, the terminal event last)."""
    body = "".join(_text_events(*"abcdefghij"))  # one write: the client reads it at once
    seen: list[list[StreamEvent]] = []
    with StubServer([Reply(events=[body]), Reply(events=[body])]) as server:
        provider = _provider(server)
        try:
            each = [event async for event in provider.stream(_request(), BACKGROUND)]
            stream: Any = provider.stream(_request(), BACKGROUND)
            seen = [batch async for batch in stream.batches()]
        finally:
            await provider.aclose()
    flat = [event for batch in seen for event in batch]
    assert [type(event) for event in flat] == [type(event) for event in each]
    deltas = [e.delta for e in flat if isinstance(e, TextDeltaEvent)]
    assert deltas == list("abcdefghij")
    assert isinstance(seen[0][0], StartEvent) and len(seen[0]) == 1
    last, expected = flat[-1], each[-1]
    assert isinstance(last, DoneEvent) and isinstance(expected, DoneEvent)
    assert last.message.content == expected.message.content == [TextContent(text="abcdefghij")]
    assert last.message.usage == expected.message.usage
    assert len(seen) < len(flat) / 2
