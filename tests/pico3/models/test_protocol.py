"""The provider records speak the harness's message JSON; the builder enforces the contract."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from chord.context import BACKGROUND, with_cancel
from pico3.models import (
    ABORTED,
    AssistantMessage,
    FauxProvider,
    ModelCost,
    ModelInfo,
    ModelProvider,
    ModelProviderError,
    StartEvent,
    TextDeltaEvent,
    ToolCall,
    Usage,
    UserMessage,
    abortable,
    compute_cost,
    estimate_tokens,
    message_to_json,
    messages_from_json,
    reduce_events,
    retryable_status,
)
from pico3.models.stream import MessageBuilder, StreamProtocolError

STORED: list[dict[str, Any]] = [
    {"role": "user", "content": "hi", "timestamp": 1},
    {
        "role": "user",
        "content": [
            {"type": "text", "text": "look"},
            {"type": "image", "data": "aGk=", "mimeType": "image/png"},
        ],
        "timestamp": 2,
    },
    {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "hm", "signature": "s"},
            {"type": "text", "text": "calling"},
            {"type": "toolCall", "id": "c1", "name": "read", "arguments": {"path": "a"}},
        ],
        "api": "anthropic-messages",
        "provider": "anthropic",
        "model": "m",
        "usage": {
            "input": 3,
            "output": 4,
            "cacheRead": 1,
            "cacheWrite": 2,
            "totalTokens": 10,
            "cost": {"input": 0.5, "total": 0.5},
        },
        "stopReason": "toolUse",
        "timestamp": 3,
    },
    {
        "role": "toolResult",
        "toolCallId": "c1",
        "toolName": "read",
        "content": [{"type": "text", "text": "file"}],
        "isError": True,
        "timestamp": 4,
    },
    {"role": "system", "content": "the tools changed", "timestamp": 5},
]


def test_stored_messages_round_trip_through_the_records() -> None:
    records = messages_from_json(STORED)
    assert [message_to_json(m) for m in records] == STORED


def test_unknown_keys_are_ignored_and_bad_messages_name_the_field() -> None:
    extra = [{**STORED[3], "details": {"reason": "x"}}]
    assert message_to_json(messages_from_json(extra)[0]) == STORED[3]
    with pytest.raises(ValueError, match=r"toolCallId.*\$\[0\]"):
        messages_from_json([{"role": "toolResult", "toolName": "x", "content": []}])
    with pytest.raises(ValueError, match="role"):
        messages_from_json([{"role": "robot", "content": "x"}])


def test_cost_follows_the_price_per_million() -> None:
    model = ModelInfo(
        id="m", provider="p", cost=ModelCost(input=3, output=15, cache_read=0.3, cache_write=3.75)
    )
    cost = compute_cost(Usage(input=1_000_000, output=2_000, cache_read=10_000), model)
    assert cost.input == 3 and cost.output == pytest.approx(0.03)
    assert cost.cache_read == pytest.approx(0.003) and cost.cache_write == 0
    assert cost.total == pytest.approx(3.033)
    unpriced = ModelInfo(id="m", provider="p")
    assert compute_cost(Usage(input=5), unpriced).total == 0


def test_estimate_counts_characters_over_four_and_images() -> None:
    records = messages_from_json(STORED[:2])
    assert estimate_tokens(records, ["abcd"]) == 1 + 1 + 1 + 1200  # "abcd", "hi", "look", image


def test_retryable_statuses() -> None:
    assert all(retryable_status(s) for s in (408, 409, 429, 500, 502, 503, 529))
    assert not any(retryable_status(s) for s in (400, 401, 403, 404, 413, 422))


def test_faux_provider_satisfies_the_protocol() -> None:
    assert isinstance(FauxProvider(), ModelProvider)


def test_builder_rejects_invalid_tool_json_as_retryable_error() -> None:
    builder = MessageBuilder(api="a", provider="p", model="m")
    builder.start()
    index, _ = builder.open_tool_call("c", "read")
    builder.delta(index, '{"path": ')
    with pytest.raises(ModelProviderError, match="invalid JSON arguments") as info:
        builder.close(index)
    assert info.value.retryable
    index, _ = builder.open_tool_call("d", "read")
    builder.delta(index, "[1]")
    with pytest.raises(ModelProviderError, match="must be a JSON object"):
        builder.close(index)


def test_builder_refuses_events_after_the_end_and_unknown_blocks() -> None:
    builder = MessageBuilder(api="a", provider="p", model="m")
    with pytest.raises(StreamProtocolError, match="no open block at index 3"):
        builder.delta(3, "x")
    builder.done("stop", None)
    with pytest.raises(StreamProtocolError, match="already ended"):
        builder.open_text()


def test_builder_closes_open_blocks_before_done_and_reduction_matches() -> None:
    builder = MessageBuilder(api="a", provider="p", model="m", clock=lambda: 2.0)
    events: list[Any] = [builder.start()]
    text, event = builder.open_text()
    events.append(event)
    call, event = builder.open_tool_call("c", "grep")
    events.append(event)
    events.append(builder.delta(call, '{"q":'))
    events.append(builder.delta(text, "hello"))
    events.append(builder.delta(call, '"x"}'))
    events.extend(builder.done("toolUse", Usage(input=1)))
    assert [type(e).__name__ for e in events[-3:]] == [
        "TextEndEvent",
        "ToolCallEndEvent",
        "DoneEvent",
    ]
    final = reduce_events(events)
    assert final == builder.message and final.timestamp == 2000
    assert final.content[1] == ToolCall(id="c", name="grep", arguments={"q": "x"})


def test_reduce_rejects_broken_streams() -> None:
    message = AssistantMessage()
    with pytest.raises(StreamProtocolError, match="first event must be start"):
        reduce_events([TextDeltaEvent(content_index=0, delta="x", partial=message)])
    with pytest.raises(StreamProtocolError, match="no start or no terminal"):
        reduce_events([StartEvent(partial=message)])
    with pytest.raises(StreamProtocolError, match="no TextContent block at index 0"):
        reduce_events(
            [
                StartEvent(partial=message),
                TextDeltaEvent(content_index=0, delta="x", partial=message),
            ]
        )


@pytest.mark.anyio
async def test_abortable_returns_the_value_or_aborted() -> None:
    async def value() -> int:
        return 7

    assert await abortable(value, BACKGROUND) == 7
    ctx, cancel = with_cancel(BACKGROUND)
    started = anyio.Event()

    async def forever() -> int:
        started.set()
        await anyio.sleep_forever()
        return 0

    results: list[object] = []

    async def run() -> None:
        results.append(await abortable(forever, ctx))

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        await started.wait()
        cancel()
    assert results == [ABORTED]
    assert await abortable(value, ctx) is ABORTED


def test_user_message_accepts_plain_text() -> None:
    assert message_to_json(UserMessage(content="x")) == {"role": "user", "content": "x"}
