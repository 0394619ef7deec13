"""MessageMirror's coalescing (docs/design/turn.md#model-call: ``turn.message`` while streaming).

The mirror takes its clock as a parameter; these tests move it by hand, so "the model took a
second to answer" is one assignment, not a wait.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from pico3.models.provider import (
    AssistantMessage,
    DoneEvent,
    ErrorEvent,
    StartEvent,
    TextContent,
    TextDeltaEvent,
    TextEndEvent,
    TextStartEvent,
)
from pico3.turn.message_mirror import FLUSH_INTERVAL, MessageMirror, stream_message

pytestmark = pytest.mark.anyio

PARTIAL = AssistantMessage(api="faux", provider="faux", model="faux-1")


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


async def test_opening_events_after_a_slow_first_token_publish_with_the_first_delta() -> None:
    """The model's time to its first event is no reason to flush the opening events on their
    own: the first delta right behind them is published in the same (one) commit."""
    clock = Clock()
    flushed: list[dict[str, Any]] = []

    async def flush(partial: dict[str, Any]) -> None:
        flushed.append(partial)

    async with MessageMirror(flush, clock=clock) as mirror:
        clock.now += 10 * FLUSH_INTERVAL  # the request is out; the first token takes a while
        await mirror.feed(StartEvent(partial=PARTIAL))
        await mirror.feed(TextStartEvent(content_index=0, partial=PARTIAL))
        await mirror.feed(TextDeltaEvent(content_index=0, delta="Hello", partial=PARTIAL))
        assert [p["content"] for p in flushed] == [[{"type": "text", "text": "Hello"}]]
        mirror.supersede()
    assert len(flushed) == 1


async def test_pending_text_older_than_the_interval_is_flushed_by_the_next_event() -> None:
    clock = Clock()
    flushed: list[str] = []

    async def flush(partial: dict[str, Any]) -> None:
        flushed.append(partial["content"][0]["text"])

    async with MessageMirror(flush, clock=clock) as mirror:
        await mirror.feed(TextStartEvent(content_index=0, partial=PARTIAL))
        await mirror.feed(TextDeltaEvent(content_index=0, delta="a", partial=PARTIAL))
        assert flushed == ["a"]  # the first delta: at once
        clock.now += FLUSH_INTERVAL / 2
        await mirror.feed(TextDeltaEvent(content_index=0, delta="b", partial=PARTIAL))
        assert flushed == ["a"]  # small and fresh: it waits
        clock.now += 2 * FLUSH_INTERVAL
        await mirror.feed(TextDeltaEvent(content_index=0, delta="c", partial=PARTIAL))
        assert flushed == ["a", "abc"]  # "b" waited the interval: flushed with "c"
        mirror.supersede()


def _answer(parts: list[str]) -> list[Any]:
    """A streamed text answer: start, a text block of ``parts``, done."""
    message = AssistantMessage(
        api="faux", provider="faux", model="faux-1", content=[TextContent(text="".join(parts))]
    )
    return [
        StartEvent(partial=PARTIAL),
        TextStartEvent(content_index=0, partial=PARTIAL),
        *(TextDeltaEvent(content_index=0, delta=part, partial=PARTIAL) for part in parts),
        TextEndEvent(content_index=0, content="".join(parts), partial=PARTIAL),
        DoneEvent(reason="stop", message=message),
    ]


class _Batched:
    """A provider stream that also offers its events a list per read (as the SDK adapters'
    streams do); iterating it one by one is a failure here."""

    def __init__(self, reads: list[list[Any]]) -> None:
        self.reads = reads

    def __aiter__(self) -> _Batched:
        return self

    async def __anext__(self) -> Any:
        raise AssertionError("stream_message iterated one by one a stream offering batches")

    async def batches(self) -> AsyncIterator[list[Any]]:
        for read in self.reads:
            yield read


async def _one_by_one(events: list[Any]) -> AsyncIterator[Any]:
    for event in events:
        yield event


async def test_a_stream_offering_batches_is_fed_a_read_at_a_time_to_the_same_answer() -> None:
    parts = [f"tok{i} " for i in range(400)]
    events = _answer(parts)
    reads = [events[:1], events[1:150], events[150:151], events[151:]]  # the terminal ends a read
    batched: list[str] = []
    single: list[str] = []

    async def flush_batched(partial: dict[str, Any]) -> None:
        batched.append(partial["content"][0]["text"])

    async def flush_single(partial: dict[str, Any]) -> None:
        single.append(partial["content"][0]["text"])

    message, retryable = await stream_message(_Batched(reads), flush_batched)
    expected, _ = await stream_message(_one_by_one(events), flush_single)
    assert message == expected and not retryable
    assert message.content == [TextContent(text="".join(parts))]
    # each flush publishes whole reads: the text of the reads so far, never a read's half
    ends = {"".join(parts[: end - 2]) for end in (150, 151, 402)}
    assert batched and set(batched) <= ends
    assert len(batched) < len(single)


async def test_a_batch_publishes_what_feeding_its_events_one_by_one_publishes() -> None:
    events = _answer(["a", "bc", "def"])[:-1]
    batch: list[dict[str, Any]] = []
    each: list[dict[str, Any]] = []

    async def flush_batch(partial: dict[str, Any]) -> None:
        batch.append(partial)

    async def flush_each(partial: dict[str, Any]) -> None:
        each.append(partial)

    async with MessageMirror(flush_batch, clock=Clock()) as mirror:
        await mirror.feed_batch(events)
    async with MessageMirror(flush_each, clock=Clock()) as mirror:
        for event in events:
            await mirror.feed(event)
    assert batch[-1] == each[-1]
    assert batch[-1]["content"] == [{"type": "text", "text": "abcdef"}]


async def test_an_answer_whose_last_read_holds_its_end_flushes_nothing_of_that_read() -> None:
    """A short answer arriving in one network read (start, deltas, done) is stored by the
    answer's own commit: its first delta costs no ``turn.message`` commit (a durable write
    that the answer's commit supersedes at once). An earlier read is still published."""
    flushed: list[str] = []

    async def flush(partial: dict[str, Any]) -> None:
        flushed.append(partial["content"][0]["text"] if partial["content"] else "")

    events = _answer(["Done", ": the short", " answer."])
    message, retryable = await stream_message(_Batched([events]), flush)
    assert message.content == [TextContent(text="Done: the short answer.")] and not retryable
    assert flushed == []

    flushed.clear()
    message, _ = await stream_message(_Batched([events[:3], events[3:]]), flush)
    assert message.content == [TextContent(text="Done: the short answer.")]
    assert flushed == ["Done"]  # the first read's delta: at once, as before


async def test_an_error_in_the_last_read_still_publishes_the_text_before_it() -> None:
    """Only a complete answer supersedes: a read ending in an error keeps its text published
    (the failed call's display entry is what a reader sees next)."""
    flushed: list[str] = []

    async def flush(partial: dict[str, Any]) -> None:
        flushed.append(partial["content"][0]["text"])

    failed = AssistantMessage(
        api="faux", provider="faux", model="faux-1", stop_reason="error", error_message="boom"
    )
    events = [*_answer(["a", "b"])[:-1], ErrorEvent(reason="error", error=failed)]
    message, _ = await stream_message(_Batched([events]), flush)
    assert message.stop_reason == "error"
    assert flushed and flushed[-1] == "ab"
