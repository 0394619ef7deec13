"""MessageMirror's coalescing (docs/design/turn.md#model-call: ``turn.message`` while streaming).

The mirror takes its clock as a parameter; these tests move it by hand, so "the model took a
second to answer" is one assignment, not a wait.
"""

from __future__ import annotations

from typing import Any

import pytest

from pico3.models.provider import (
    AssistantMessage,
    StartEvent,
    TextDeltaEvent,
    TextStartEvent,
)
from pico3.turn.message_mirror import FLUSH_INTERVAL, MessageMirror

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
