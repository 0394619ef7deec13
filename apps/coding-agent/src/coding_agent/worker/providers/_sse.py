"""Server-sent events straight off an SDK's raw HTTP response, decoded by msgspec.

Both adapters keep the official SDK for what it is good at (configuration, auth headers, base
URLs, timeouts, status errors) but send a body they encoded themselves and read the stream
themselves: the SDKs' request-parameter transforms and per-chunk pydantic models cost more than
everything else in a late turn. :class:`SseStream` wraps the ``httpx2.Response`` an SDK's
``post(..., cast_to=httpx2.Response, stream=True)`` returns and yields one decoded value per
event (``decode(event_name, data)``; ``None`` skips the event), following the SSE framing rules:
``data:`` lines are joined with newlines, ``event:`` names the event, a blank line dispatches,
``:`` lines are comments, ``\\r\\n`` ends a line as well as ``\\n``.

A decoder reports the end of the stream (``[DONE]``, ``message_stop``) by returning
``Last(value)``: the rest of the body is read (so the HTTP/1.1 connection is reused) and the
iteration ends after ``value`` (none when it is ``None``).
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable
from typing import Any, Protocol

__all__ = ["Decode", "Last", "RawResponse", "SseStream"]


class RawResponse(Protocol):
    """What is used of ``httpx2.Response``."""

    def aiter_bytes(self) -> AsyncIterator[bytes]: ...

    async def aclose(self) -> None: ...


class Last:
    """Wraps the last value of a stream (``Last(value)``); ``Last(None)`` ends it silently."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


async def add_event(decoded: Any, batch: list[Any], chunks: AsyncIterator[Any]) -> bool:
    """Append a decoder's result to ``batch`` (``None`` adds nothing); ``True`` when it was a
    :class:`Last`, after the rest of the body is read and dropped so the connection stays
    usable (the caller yields what ``batch`` holds and stops)."""
    last = isinstance(decoded, Last)
    if last:
        async for _ in chunks:
            pass
        decoded = decoded.value
    if decoded is not None:
        batch.append(decoded)
    return last


_EVENT_DATA = re.compile(rb"event: [^\n]*\ndata: [^\n]*")
"""An event of an ``event:`` line and one ``data:`` line (both with their space)."""


def _line(
    line: bytes, event: str | None, data: list[bytes], ready: list[tuple[str | None, bytes]]
) -> tuple[str | None, list[bytes]]:
    """Take one line (without its ``\\n``) of the stream: a field adds to the event being read,
    a blank line adds that event to ``ready`` as (name, data); the event's state after it."""
    if line.endswith(b"\r"):
        line = line[:-1]
    if line:
        if line[0] == 58:  # b":": a comment
            return event, data
        field, _, value = line.partition(b":")
        if value[:1] == b" ":
            value = value[1:]
        if field == b"data":
            data.append(value)
        elif field == b"event":
            event = value.decode()
        return event, data
    if data or event is not None:
        ready.append((event, data[0] if len(data) == 1 else b"\n".join(data)))
        return None, []
    return event, data


Decode = Callable[[str | None, bytes], Any]
"""``decode(event_name, data)``: one event's value, ``None`` to skip it, or ``Last(value)``."""


class SseStream:
    """The decoded events of one streamed response (an ``SdkStream`` for ``drive``).

    :meth:`batches` yields the events of each network read together (a read of a fast stream
    holds hundreds), so the reader pays its per-await costs (an abortable wait, a cancel scope)
    once per read rather than once per event; iterating the stream itself yields them one by
    one. An error decoding an event comes after the events before it."""

    def __init__(self, response: RawResponse, decode: Decode) -> None:
        self._response = response
        self._decode = decode

    def __aiter__(self) -> AsyncIterator[Any]:
        return self._events()

    async def _events(self) -> AsyncIterator[Any]:
        async for batch in self.batches():
            for value in batch:
                yield value

    async def close(self) -> None:
        """Close the HTTP response (a stream cut short closes its connection)."""
        await self._response.aclose()

    async def batches(self) -> AsyncIterator[list[Any]]:
        """The decoded events, a list per network read (never an empty one).

        A read without ``\\r`` that starts no event half-way (nearly every read) is cut at its
        blank lines at once (``split``), and its events of the two shapes nearly every stream
        sends (one ``data:`` line; an ``event:`` line and one ``data:`` line) are taken
        whole; any other event of it, and any read with ``\\r``, goes line by line."""
        decode = self._decode
        event: str | None = None
        data: list[bytes] = []
        rest = b""
        chunks = self._response.aiter_bytes()
        async for chunk in chunks:
            buffer = rest + chunk if rest else chunk
            batch: list[Any] = []
            ready: list[tuple[str | None, bytes]] = []
            if not data and event is None and b"\r" not in buffer:
                blocks = buffer.split(b"\n\n")
                rest = blocks.pop()  # the event still arriving
            else:
                blocks = ()
                start = 0
                while True:
                    end = buffer.find(b"\n", start)
                    if end < 0:
                        break
                    line = buffer[start:end]
                    start = end + 1
                    event, data = _line(line, event, data, ready)
                rest = buffer[start:]
            for block in blocks:
                if block[:6] == b"data: " and b"\n" not in block:
                    ready.append((None, block[6:]))
                elif block[:7] == b"event: " and _EVENT_DATA.fullmatch(block):
                    split = block.index(b"\n")
                    ready.append((block[7:split].decode(), block[split + 7 :]))
                else:  # whole lines, then the blank line that ended them
                    for line in block.split(b"\n"):
                        event, data = _line(line, event, data, ready)
                    event, data = _line(b"", event, data, ready)
            for name, payload in ready:
                try:
                    decoded = decode(name, payload)
                except Exception:
                    if batch:
                        yield batch  # what came before the bad event, then the error
                    raise
                if decoded.__class__ is Last:
                    await add_event(decoded, batch, chunks)
                    if batch:
                        yield batch
                    return
                if decoded is not None:
                    batch.append(decoded)
            if batch:
                yield batch
        ready = []
        *lines, rest = rest.split(b"\n")  # the split path leaves whole lines in ``rest`` too
        for line in lines:
            event, data = _line(line, event, data, ready)
        for name, payload in ready:  # (none: ``rest`` never holds a blank line ending an event)
            decoded = decode(name, payload)
            if isinstance(decoded, Last):
                if decoded.value is not None:
                    yield [decoded.value]
                return
            if decoded is not None:
                yield [decoded]
        if rest.rstrip(b"\r").startswith(b"data:"):  # a last line without its newline
            value = rest.rstrip(b"\r")[5:]
            data.append(value[1:] if value[:1] == b" " else value)
        if data:  # the last event without its blank line
            decoded = decode(event, b"\n".join(data))
            if isinstance(decoded, Last):
                decoded = decoded.value
            if decoded is not None:
                yield [decoded]
