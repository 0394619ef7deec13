"""The Anthropic adapter, with the real SDK talking to a local stub server."""

from __future__ import annotations

from typing import Any

import anyio
import msgspec
import pytest
from provider_support import Sleeps, collect
from stub_server import Reply, StubServer, sse

from chord.context import BACKGROUND, with_cancel
from coding_agent.worker.providers.anthropic import AnthropicProvider, build_params
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

MODEL = "claude-sonnet-4-6"


def _start(input_tokens: int = 25, cache_read: int = 0) -> str:
    message = {
        "id": "msg_01",
        "type": "message",
        "role": "assistant",
        "model": MODEL,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {
            "input_tokens": input_tokens,
            "output_tokens": 1,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": cache_read,
        },
    }
    return sse({"type": "message_start", "message": message}, "message_start")


def _block_start(index: int, block: dict[str, Any]) -> str:
    data = {"type": "content_block_start", "index": index, "content_block": block}
    return sse(data, "content_block_start")


def _delta(index: int, delta: dict[str, Any]) -> str:
    return sse(
        {"type": "content_block_delta", "index": index, "delta": delta}, "content_block_delta"
    )


def _block_stop(index: int) -> str:
    return sse({"type": "content_block_stop", "index": index}, "content_block_stop")


def _end(stop_reason: str, output_tokens: int) -> list[str]:
    return [
        sse(
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop_reason, "stop_sequence": None},
                "usage": {"output_tokens": output_tokens},
            },
            "message_delta",
        ),
        sse({"type": "message_stop"}, "message_stop"),
    ]


def _text_events(*parts: str) -> list[str]:
    return [
        _start(),
        _block_start(0, {"type": "text", "text": ""}),
        sse({"type": "ping"}, "ping"),
        *(_delta(0, {"type": "text_delta", "text": p}) for p in parts),
        _block_stop(0),
        *_end("end_turn", 15),
    ]


def _error_body(kind: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": kind, "message": message}}


def _provider(server: StubServer, sleeps: Sleeps | None = None, **kw: Any) -> AnthropicProvider:
    return AnthropicProvider(
        api_key="test-key",
        base_url=server.url,
        sleep=sleeps or Sleeps(),
        retry=kw.pop("retry", RetryPolicy(max_retries=2, base_delay=1.0, jitter=0.0)),
        **kw,
    )


def _request(**kw: Any) -> Request:
    return Request(model=MODEL, messages=[UserMessage(content="hi")], **kw)


@pytest.mark.anyio
async def test_plain_text_answer_streams_deltas_usage_and_cost() -> None:
    with StubServer([Reply(events=_text_events("Hello", ", world"))]) as server:
        events = await collect(_provider(server), _request(system=["be brief"]))
    assert isinstance(events[0], StartEvent)
    assert [e.delta for e in events if isinstance(e, TextDeltaEvent)] == ["Hello", ", world"]
    done = events[-1]
    assert isinstance(done, DoneEvent) and done.reason == "stop"
    message = done.message
    assert message.content == [TextContent(text="Hello, world")]
    assert (message.provider, message.model, message.api) == (
        "anthropic",
        MODEL,
        "anthropic-messages",
    )
    assert message.usage is not None
    assert (message.usage.input, message.usage.output) == (25, 15)
    assert message.usage.cost.total == pytest.approx((25 * 3 + 15 * 15) / 1e6)
    assert reduce_events(events) == message
    sent = server.requests[0]
    assert sent.path == "/v1/messages"
    assert "test-key" in sent.headers.get("x-api-key", sent.headers.get("authorization", ""))
    assert sent.body["stream"] is True and sent.body["model"] == MODEL
    assert sent.body["system"][-1]["cache_control"] == {"type": "ephemeral"}


@pytest.mark.anyio
async def test_tool_call_arguments_arrive_as_json_fragments() -> None:
    events_in = [
        _start(),
        _block_start(0, {"type": "text", "text": ""}),
        _delta(0, {"type": "text_delta", "text": "Let me look."}),
        _block_stop(0),
        _block_start(1, {"type": "tool_use", "id": "toolu_01", "name": "read", "input": {}}),
        _delta(1, {"type": "input_json_delta", "partial_json": ""}),
        _delta(1, {"type": "input_json_delta", "partial_json": '{"path": "sr'}),
        _delta(1, {"type": "input_json_delta", "partial_json": 'c/a.py", "limit": 5}'}),
        _block_stop(1),
        *_end("tool_use", 40),
    ]
    tools = [Tool(name="read", description="Read a file", parameters={"type": "object"})]
    with StubServer([Reply(events=events_in)]) as server:
        events = await collect(_provider(server), _request(tools=tools))
    fragments = [e.delta for e in events if isinstance(e, ToolCallDeltaEvent)]
    assert fragments == ['{"path": "sr', 'c/a.py", "limit": 5}']
    done = events[-1]
    assert isinstance(done, DoneEvent) and done.reason == "toolUse"
    assert done.message.content[1] == ToolCall(
        id="toolu_01", name="read", arguments={"path": "src/a.py", "limit": 5}
    )
    assert reduce_events(events) == done.message
    assert server.requests[0].body["tools"] == [
        {"name": "read", "description": "Read a file", "input_schema": {"type": "object"}}
    ]


@pytest.mark.anyio
async def test_thinking_blocks_keep_their_signature_and_budget_is_sent() -> None:
    events_in = [
        _start(),
        _block_start(0, {"type": "thinking", "thinking": "", "signature": ""}),
        _delta(0, {"type": "thinking_delta", "thinking": "Consider"}),
        _delta(0, {"type": "signature_delta", "signature": "EqQB"}),
        _block_stop(0),
        _block_start(1, {"type": "text", "text": "Yes."}),
        _block_stop(1),
        *_end("max_tokens", 9),
    ]
    with StubServer([Reply(events=events_in)]) as server:
        events = await collect(_provider(server), _request(thinking_level="low", max_tokens=1000))
    done = events[-1]
    assert isinstance(done, DoneEvent) and done.reason == "length"
    assert done.message.content == [
        ThinkingContent(thinking="Consider", signature="EqQB"),
        TextContent(text="Yes."),
    ]
    assert reduce_events(events) == done.message
    body = server.requests[0].body
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 4096}
    assert body["max_tokens"] == 5096


@pytest.mark.anyio
async def test_429_waits_for_retry_after_and_retries_once() -> None:
    replies = [
        Reply(429, {"retry-after": "7"}, _error_body("rate_limit_error", "slow down")),
        Reply(events=_text_events("ok")),
    ]
    sleeps = Sleeps()
    with StubServer(replies) as server:
        events = await collect(_provider(server, sleeps), _request())
    assert sleeps.waits == [7.0]
    assert len(server.requests) == 2
    done = events[-1]
    assert isinstance(done, DoneEvent) and done.message.content == [TextContent(text="ok")]


@pytest.mark.anyio
async def test_500_backs_off_then_succeeds() -> None:
    replies = [
        Reply(500, json_body=_error_body("api_error", "boom")),
        Reply(events=_text_events("ok")),
    ]
    sleeps = Sleeps()
    with StubServer(replies) as server:
        events = await collect(_provider(server, sleeps), _request())
    assert sleeps.waits == [1.0] and len(server.requests) == 2
    assert isinstance(events[-1], DoneEvent)


@pytest.mark.anyio
@pytest.mark.parametrize("status", [404, 405, 501])
async def test_a_wrong_base_url_names_the_url_and_what_to_check(status: int) -> None:
    """ANTHROPIC_BASE_URL pointing at some other server said ``anthropic 404 error: 404 <html>``
    with no URL and no hint (issue 38 item 8)."""
    with StubServer([Reply(status, json_body={"detail": "no"})]) as server:
        events = await collect(_provider(server, Sleeps()), _request())
    error = events[-1]
    assert isinstance(error, ErrorEvent) and not error.retryable
    message = error.error.error_message
    assert message is not None
    assert message.startswith(f"anthropic {status} error from {server.url}/")
    assert "/v1/messages" in message
    assert "check the base URL (ANTHROPIC_BASE_URL or providers.anthropic.base_url" in message


@pytest.mark.anyio
async def test_400_is_not_retried_and_surfaces_the_servers_message() -> None:
    replies = [Reply(400, json_body=_error_body("invalid_request_error", "max_tokens: too big"))]
    sleeps = Sleeps()
    with StubServer(replies) as server:
        events = await collect(_provider(server, sleeps), _request())
    assert sleeps.waits == [] and len(server.requests) == 1
    error = events[-1]
    assert isinstance(error, ErrorEvent) and error.reason == "error" and not error.retryable
    assert error.error.error_message == "anthropic 400 invalid_request_error: max_tokens: too big"


@pytest.mark.anyio
async def test_overloaded_error_inside_the_stream_is_retryable_and_keeps_partial() -> None:
    events_in = [
        _start(),
        _block_start(0, {"type": "text", "text": ""}),
        _delta(0, {"type": "text_delta", "text": "Half"}),
        sse(_error_body("overloaded_error", "Overloaded"), "error"),
    ]
    with StubServer([Reply(events=events_in)]) as server:
        events = await collect(_provider(server), _request())
    error = events[-1]
    assert isinstance(error, ErrorEvent) and error.retryable
    assert "overloaded_error: Overloaded" in (error.error.error_message or "")
    assert error.error.content == [TextContent(text="Half")]


@pytest.mark.anyio
async def test_retries_give_up_with_the_last_error() -> None:
    replies = [Reply(503, json_body=_error_body("api_error", f"down {i}")) for i in range(3)]
    sleeps = Sleeps()
    with StubServer(replies) as server:
        events = await collect(_provider(server, sleeps), _request())
    assert sleeps.waits == [1.0, 2.0] and len(server.requests) == 3
    error = events[-1]
    assert isinstance(error, ErrorEvent) and error.retryable
    assert "down 2" in (error.error.error_message or "")


@pytest.mark.anyio
async def test_abort_mid_stream_closes_the_connection_and_ends_aborted() -> None:
    reply = Reply(events=_text_events("first", "second"), hold_after=4)
    ctx, cancel = with_cancel(BACKGROUND)
    events: list[StreamEvent] = []
    with StubServer([reply]) as server:
        provider = _provider(server)
        try:
            async for event in provider.stream(_request(), ctx):
                events.append(event)
                if isinstance(event, TextDeltaEvent):
                    cancel()  # the server is holding the rest back; only the abort can end this
        finally:
            await provider.aclose()
        assert await anyio.to_thread.run_sync(server.disconnected.wait, 10)
    error = events[-1]
    assert isinstance(error, ErrorEvent) and error.reason == "aborted"
    assert error.error.stop_reason == "aborted"
    assert error.error.content == [TextContent(text="first")]
    assert error.error.usage is not None and error.error.usage.input == 25


def test_history_is_converted_with_tool_results_grouped() -> None:
    messages = messages_from_json(
        [
            {"role": "user", "content": "go"},
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "unsigned"},
                    {"type": "toolCall", "id": "a", "name": "ls", "arguments": {}},
                    {"type": "toolCall", "id": "b", "name": "ls", "arguments": {"p": 1}},
                ],
            },
            {
                "role": "toolResult",
                "toolCallId": "a",
                "toolName": "ls",
                "content": [{"type": "text", "text": "x"}],
            },
            {
                "role": "toolResult",
                "toolCallId": "b",
                "toolName": "ls",
                "content": [],
                "isError": True,
            },
        ]
    )
    info = AnthropicProvider(api_key="k").model(MODEL)
    params = build_params(Request(model=MODEL, messages=messages), info)
    sent = params["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "user"]
    assert sent[1]["content"][0] == {"type": "text", "text": "unsigned"}
    results = sent[2]["content"]
    assert [r["tool_use_id"] for r in results] == ["a", "b"]
    assert results[1]["is_error"] is True
    assert results[-1]["cache_control"] == {"type": "ephemeral"}
    assert "thinking" not in params


@pytest.mark.anyio
async def test_bad_request_input_ends_the_stream_with_an_error_without_calling_the_server() -> None:
    bad = msgspec.structs.replace(_request(), thinking_level="extreme")
    with StubServer([]) as server:
        events = await collect(_provider(server), bad)
    assert server.requests == []
    error = events[-1]
    assert isinstance(error, ErrorEvent) and not error.retryable
    assert error.error.error_message == "unknown thinking level 'extreme'"


def test_another_apis_signed_thinking_is_replayed_as_text_not_as_thinking() -> None:
    """An OpenAI Responses or Gemini signature means nothing to Anthropic (it would be refused):
    thinking from another API goes back as text, its signature dropped."""
    from pico3.models import AssistantMessage

    foreign = AssistantMessage(
        content=[
            ThinkingContent(thinking="hmm", signature="gAAAA-encrypted"),
            TextContent(text="ok"),
        ],
        api="openai-responses",
    )
    ours = AssistantMessage(
        content=[ThinkingContent(thinking="yes", signature="sig"), TextContent(text="ok")],
        api="anthropic-messages",
    )
    info = AnthropicProvider(api_key="k").model(MODEL)
    for message, first in (
        (foreign, {"type": "text", "text": "hmm"}),
        (ours, {"type": "thinking", "thinking": "yes", "signature": "sig"}),
    ):
        request = Request(model=MODEL, messages=[UserMessage(content="q"), message])
        assert build_params(request, info)["messages"][1]["content"][0] == first
