"""``SseStream``: the server-sent events of a raw response, however the reads cut them.

The reader takes most events whole (a read cut at its blank lines) and the rest line by line;
whichever way, the events must be those a plain line-by-line reading of the whole body finds
(:func:`_reference`), in order, each in the batch of the read that completed it."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coding_agent.worker.providers._sse import Last, SseStream

pytestmark = pytest.mark.anyio


class _Reads:
    """A raw response whose body arrives in the given reads."""

    def __init__(self, reads: list[bytes]) -> None:
        self.reads = reads

    async def aiter_bytes(self) -> AsyncIterator[bytes]:
        for read in self.reads:
            yield read

    async def aclose(self) -> None:
        return None


def _reference(body: bytes) -> list[tuple[str | None, bytes]]:
    """The events of ``body`` read line by line (``\\n`` ends a line, a ``\\r`` before it is
    dropped); a last event without its blank line counts when it has data."""
    events: list[tuple[str | None, bytes]] = []
    name: str | None = None
    data: list[bytes] = []
    *lines, last = body.split(b"\n")
    for line in lines:
        line = line.removesuffix(b"\r")
        if not line:
            if data or name is not None:
                events.append((name, b"\n".join(data)))
            name, data = None, []
        elif not line.startswith(b":"):
            field, _, value = line.partition(b":")
            value = value.removeprefix(b" ")
            if field == b"data":
                data.append(value)
            elif field == b"event":
                name = value.decode()
    last = last.removesuffix(b"\r")
    if last.startswith(b"data:"):
        data.append(last[5:].removeprefix(b" "))
    if data:
        events.append((name, b"\n".join(data)))
    return events


async def _read(reads: list[bytes]) -> list[list[tuple[str | None, bytes]]]:
    stream = SseStream(_Reads(reads), lambda name, data: (name, data))
    return [batch async for batch in stream.batches()]


_TEXT = st.text(alphabet='ab{}": ', max_size=6).map(str.encode)
_EVENT = st.tuples(
    st.sampled_from([None, "delta", "message_stop"]),
    st.lists(_TEXT, min_size=1, max_size=3),
    st.sampled_from(["", ": ping", "id: 7", "data:nospace"]),  # a line of another kind
    st.integers(0, 2),  # extra blank lines after the event
)


def _body(events: list[Any], endings: list[bytes]) -> bytes:
    lines: list[bytes] = []
    for name, data, other, blanks in events:
        if other:
            lines.append(other.encode())
        if name is not None:
            lines.append(b"event: " + name.encode())
        lines.extend(b"data: " + value for value in data)
        lines.extend([b""] * (1 + blanks))
    return b"".join(line + endings[i % len(endings)] for i, line in enumerate(lines))


def _cut(body: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({cut % (len(body) + 1) for cut in cuts} | {0, len(body)})
    return [body[a:b] for a, b in itertools.pairwise(points) if b > a]


@settings(max_examples=300, deadline=None)
@given(
    events=st.lists(_EVENT, max_size=8),
    endings=st.lists(st.sampled_from([b"\n", b"\n", b"\r\n"]), min_size=1, max_size=4),
    cuts=st.lists(st.integers(0, 10_000), max_size=10),
    tail=st.sampled_from([b"", b"data: last", b"data: last\r", b"event: x\ndata: y\n"]),
)
async def test_events_are_those_of_a_line_by_line_reading_whatever_the_reads(
    events: list[Any], endings: list[bytes], cuts: list[int], tail: bytes
) -> None:
    body = _body(events, endings) + tail
    reads = _cut(body, cuts)
    batches = await _read(reads)
    assert [event for batch in batches for event in batch] == _reference(body)
    assert all(batches) and len(batches) <= len(reads) + 1


async def test_each_read_yields_the_events_it_completed() -> None:
    first = b"data: 1\n\nevent: e\ndata: 2\n\ndata: 3"
    second = b"\n\n: comment\n\ndata: 4\r\n\r\n"
    assert await _read([first, second]) == [
        [(None, b"1"), ("e", b"2")],
        [(None, b"3"), (None, b"4")],
    ]


async def test_a_last_event_ends_the_stream_after_its_value() -> None:
    body = b"data: 1\n\ndata: [DONE]\n\ndata: never\n\n"

    def decode(name: str | None, data: bytes) -> Any:
        return Last(None) if data == b"[DONE]" else data

    stream = SseStream(_Reads([body[:5], body[5:]]), decode)
    assert [batch async for batch in stream.batches()] == [[b"1"]]


async def test_a_bad_event_comes_after_the_good_ones_of_its_read() -> None:
    def decode(name: str | None, data: bytes) -> Any:
        if data == b"bad":
            raise ValueError("bad event")
        return data

    stream = SseStream(_Reads([b"data: 1\n\ndata: 2\n\ndata: bad\n\ndata: 3\n\n"]), decode)
    seen: list[list[Any]] = []
    with pytest.raises(ValueError, match="bad event"):
        async for batch in stream.batches():
            seen.append(batch)
    assert seen == [[b"1", b"2"]]
