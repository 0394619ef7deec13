"""``drive``'s per-read lists (coding_agent.worker.providers._drive): the reads a scripted SDK
stream gives, mapped by a small mapper of its own, through the real
:class:`~pico3.models.MessageBuilder`."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from chord.context import BACKGROUND
from coding_agent.worker.providers._drive import drive
from pico3.models import (
    DoneEvent,
    MessageBuilder,
    RetryPolicy,
    StreamEvent,
    TextContent,
    TextDeltaEvent,
)

pytestmark = pytest.mark.anyio


class _Reads:
    """An SDK stream whose network reads are scripted lists of chunks."""

    def __init__(self, reads: list[list[str]]) -> None:
        self.reads = reads

    async def batches(self) -> AsyncIterator[list[Any]]:
        for read in self.reads:
            yield read

    async def close(self) -> None:
        return None


class _Mapper:
    """``"text:..."`` extends the answer, ``"finish"`` is OpenAI's ``finish_reason`` (the
    content is complete; the end, with its usage, comes later), ``"usage"`` changes nothing."""

    def __init__(self, builder: MessageBuilder) -> None:
        self.builder = builder
        self.text: int | None = None
        self.finished = False

    def feed(self, chunk: str) -> list[StreamEvent]:
        if chunk == "finish":
            self.finished = True
            return []
        if chunk.startswith("text:"):
            out: list[StreamEvent] = []
            if self.text is None:
                self.text, opened = self.builder.open_text()
                out.append(opened)
            out.append(self.builder.delta(self.text, chunk[5:]))
            return out
        return []

    def finish(self) -> list[StreamEvent]:
        return self.builder.done("stop", None) if self.finished else []

    def ending(self) -> bool:
        return self.finished


async def _lists(reads: list[list[str]], *, with_ending: bool) -> list[list[StreamEvent]]:
    builder = MessageBuilder(api="faux", provider="faux", model="faux-1")
    mapper = _Mapper(builder)

    async def sleep(seconds: float) -> None:
        raise AssertionError("nothing is retried here")

    async def open() -> Any:
        return _Reads(reads)

    stream = drive(
        builder,
        open=open,
        feed=mapper.feed,
        finish=mapper.finish,
        classify=lambda exc: None,
        policy=RetryPolicy(max_retries=0),
        sleep=sleep,
        ctx=BACKGROUND,
        ending=mapper.ending if with_ending else None,
    )
    return [batch async for batch in stream.batches()]


def _texts(batch: list[StreamEvent]) -> list[str]:
    return [event.delta for event in batch if isinstance(event, TextDeltaEvent)]


async def test_the_reads_from_the_finish_reason_on_come_with_the_terminal_event() -> None:
    reads = [["text:ab"], ["text:cd", "finish"], ["text:", "usage"], []]
    lists = await _lists(reads, with_ending=True)
    assert [_texts(batch) for batch in lists[1:]] == [["ab"], ["cd", ""]]
    done = lists[-1][-1]
    assert isinstance(done, DoneEvent)
    assert done.message.content == [TextContent(text="abcd")]
    # without ``ending`` each read is its own list, the terminal event alone at the end
    plain = await _lists(reads, with_ending=False)
    assert [_texts(batch) for batch in plain[1:]] == [["ab"], ["cd"], [""], []]
    assert isinstance(plain[-1][-1], DoneEvent) and not _texts(plain[-1])
