"""Streaming a model answer into ``turn.message``, coalesced.

A provider produces one event per token or so; a commit per token would make every watcher pay
for an envelope per token and the store for a write per token. :class:`MessageMirror` sits in
between. It applies each stream event to a *local* copy of the partial message (never keeping
the provider's live object) and publishes the difference to ``sticky.turn.message`` through a
caller-supplied ``flush`` commit when

* the first content delta arrives (a reader sees text start at once),
* at least :data:`FLUSH_BYTES` bytes are pending, and at least a :data:`FLUSH_FRACTION` of
  what the stream produced so far (so a long answer takes a number of commits that grows
  with the logarithm of its size, not with its size: each commit's main-log line and the
  joining of the text so far stay a small part of what is stored and done), or
* what is pending has waited :data:`FLUSH_INTERVAL` seconds (a timer task covers a provider
  that goes quiet); the wait counts from the first change not yet published, not from the
  last flush, so the model's time to its first event (the stream's opening events arrive after
  it, back to back) does not flush those events one commit ahead of the first delta's,

(unless the read that holds them also holds the end of a complete answer: see below), and
once more when the stream ends, unless it ended with a complete answer (``stop``,
``toolUse``, ``length``): the commit that stores that answer follows at once and supersedes
``turn.message``, so a flush of the tail would be a durable commit (an fsync) that no reader
keeps; a crash in between loses only display text that recovery discards anyway (a model call
interrupted while ``requesting`` deletes ``turn.message`` and retries). The flush writes only
what changed: a new block is
appended, a grown string is assigned (the tracked document records a string append), a tool
call's arguments are set when they materialize. So a client folding the envelopes sees
``turn.message`` set once, then ``a`` ops on ``content.i.text``.

Text is kept as a list of parts per block and joined only at flush time, so a long stream costs
proportional to its size, not to its size times its token count.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import anyio
import anyio.abc
import msgspec

from chord.json import copy_json
from pico3.kernel.proxy import TrackedDict
from pico3.models.provider import (
    AssistantMessage,
    DoneEvent,
    ErrorEvent,
    ServerToolEvent,
    StartEvent,
    StreamEvent,
    TextDeltaEvent,
    TextStartEvent,
    ThinkingDeltaEvent,
    ThinkingEndEvent,
    ThinkingStartEvent,
    ToolCallEndEvent,
    ToolCallStartEvent,
    message_to_json,
)

__all__ = [
    "FLUSH_BYTES",
    "FLUSH_FRACTION",
    "FLUSH_INTERVAL",
    "MessageMirror",
    "apply_partial",
    "assistant_json",
    "stream_message",
]

FLUSH_BYTES = 256
"""Pending bytes that force a flush (at the least; see :data:`FLUSH_FRACTION`)."""

FLUSH_FRACTION = 8
"""Past ``FLUSH_BYTES * FLUSH_FRACTION`` streamed bytes, a flush waits for ``1/FLUSH_FRACTION``
of the bytes streamed so far (or for :data:`FLUSH_INTERVAL`)."""

FLUSH_INTERVAL = 0.1
"""Seconds after which pending content is flushed even if it is small."""

Flush = Callable[[dict[str, Any]], Awaitable[None]]
"""Commits a snapshot of the partial message into ``turn.message`` (see :func:`apply_partial`)."""


class MessageMirror:
    """The local partial message of one stream and its coalesced publication.

    Use as an async context manager around the stream; :meth:`feed` every event; leaving the
    block flushes whatever is pending (unless the body raised).
    """

    def __init__(self, flush: Flush, *, clock: Callable[[], float] = anyio.current_time) -> None:
        self._flush_fn = flush
        self._clock = clock  # read at every delta: see __aenter__
        self._header: dict[str, Any] = {"role": "assistant", "content": []}
        self._blocks: list[dict[str, Any]] = []
        self._parts: list[list[str]] = []
        self._pending = 0
        self._total = 0
        self._dirty = False
        self._first = True
        self._superseded = False
        self._since = 0.0  # when the oldest change not yet published arrived
        self._lock = anyio.Lock()
        self._wake = anyio.Event()
        self._group: anyio.abc.TaskGroup | None = None

    async def __aenter__(self) -> MessageMirror:
        if self._clock is anyio.current_time:
            self._clock = _loop_clock()
        self._group = anyio.create_task_group()
        await self._group.__aenter__()
        self._group.start_soon(self._timer)
        return self

    async def __aexit__(self, *exc: object) -> bool:
        assert self._group is not None
        self._group.cancel_scope.cancel()
        await self._group.__aexit__(None, None, None)
        if exc[0] is None and not self._superseded:
            await self.flush()
        return False

    def supersede(self) -> None:
        """The stream ended with a complete answer that the caller commits next: nothing more
        is published, neither when leaving the block nor by a later :meth:`flush` (pending
        display text would be overwritten at once). :func:`stream_message` calls it before
        feeding the read that ends with the answer, so a short answer that arrives in one read
        (its first delta included) costs no ``turn.message`` commit at all."""
        self._superseded = True

    async def _timer(self) -> None:
        while True:
            await self._wake.wait()
            self._wake = anyio.Event()
            await anyio.sleep(max(0.0, self._since + FLUSH_INTERVAL - self._clock()))
            if self._dirty:
                await self.flush()

    def snapshot(self) -> dict[str, Any]:
        """The partial message as plain JSON (blocks joined)."""
        out = dict(self._header)
        content: list[dict[str, Any]] = []
        for block, parts in zip(self._blocks, self._parts, strict=True):
            copy = dict(block)
            if block["type"] == "text":
                copy["text"] = "".join(parts)
            elif block["type"] == "thinking":
                copy["thinking"] = "".join(parts)
            content.append(copy)
        out["content"] = content
        return out

    async def flush(self) -> None:
        """Publish pending changes now (no-op when nothing is pending)."""
        async with self._lock:
            if not self._dirty or self._superseded:
                return
            self._dirty = False
            self._pending = 0
            await self._flush_fn(self.snapshot())

    async def feed(self, event: StreamEvent) -> None:
        """Apply one event locally; flush when a threshold is reached."""
        applied = self._apply(event)
        if applied is not None:
            await self._published(*applied)

    async def feed_batch(self, events: list[StreamEvent]) -> None:
        """Apply ``events`` (one network read's, or any run of them) locally, then flush once
        if a threshold is reached: what :meth:`feed` of each does, the flush after the last."""
        grew = 0
        content_delta = False
        marked = False
        for event in events:
            if event.__class__ is TextDeltaEvent or event.__class__ is ThinkingDeltaEvent:
                delta = event.delta  # pyright: ignore[reportAttributeAccessIssue]
                self._parts[event.content_index].append(delta)  # pyright: ignore[reportAttributeAccessIssue]
                grew += len(delta.encode())
                content_delta = marked = True
                continue
            applied = self._apply(event)
            if applied is not None:
                grew += applied[0]
                content_delta = content_delta or applied[1]
                marked = True
        if marked:
            self._mark()
            await self._published(grew, content_delta)

    def _apply(self, event: StreamEvent) -> tuple[int, bool] | None:
        """Apply ``event`` to the local copy: (bytes it grew by, whether it was content), or
        ``None`` when it changes nothing to publish (the start event marks its own change)."""
        grew = 0
        content_delta = False
        match event:
            case TextDeltaEvent() | ThinkingDeltaEvent():  # nearly every event: matched first
                self._parts[event.content_index].append(event.delta)
                grew = len(event.delta.encode())
                content_delta = True
            case StartEvent():
                partial = event.partial
                self._header = {
                    "role": "assistant",
                    "content": [],
                    "api": partial.api,
                    "provider": partial.provider,
                    "model": partial.model,
                    "timestamp": partial.timestamp,
                }
                self._mark()
                return None
            case TextStartEvent():
                self._open({"type": "text", "text": ""})
            case ThinkingStartEvent():
                self._open({"type": "thinking", "thinking": ""})
            case ToolCallStartEvent():
                self._open(
                    {"type": "toolCall", "id": event.id, "name": event.name, "arguments": {}}
                )
            case ThinkingEndEvent():
                if event.signature is not None:
                    self._blocks[event.content_index]["signature"] = event.signature
            case ToolCallEndEvent():
                arguments = copy_json(event.tool_call.arguments)
                self._blocks[event.content_index]["arguments"] = arguments
                grew = 2 + len(str(arguments))
                content_delta = True
            case ServerToolEvent():  # complete when it arrives (the provider's web search)
                self._open(msgspec.to_builtins(event.block))
                grew = 64
                content_delta = True
            case _:
                return None
        self._mark()
        return grew, content_delta

    async def _published(self, grew: int, content_delta: bool) -> None:
        """Count ``grew`` pending bytes; flush now when a threshold is reached, else let the
        timer flush when the pending change gets old."""
        self._pending += grew
        self._total += grew
        threshold = max(FLUSH_BYTES, self._total // FLUSH_FRACTION)
        if (content_delta and self._first) or self._pending >= threshold:
            self._first = self._first and not content_delta
            await self.flush()
        elif self._clock() - self._since >= FLUSH_INTERVAL:
            await self.flush()
        else:
            self._wake.set()

    def _mark(self) -> None:
        if not self._dirty:
            self._dirty = True
            self._since = self._clock()

    def _open(self, block: dict[str, Any]) -> None:
        self._blocks.append(block)
        self._parts.append([])


def _loop_clock() -> Callable[[], float]:
    """:func:`anyio.current_time` of the running loop, looked up once: on asyncio it is the
    loop's ``time`` (what anyio returns, without finding the backend at every delta)."""
    try:
        return asyncio.get_running_loop().time
    except RuntimeError:  # another backend (trio): anyio's own
        return anyio.current_time


def apply_partial(turn: TrackedDict, partial: dict[str, Any]) -> None:
    """Make ``turn["message"]`` equal ``partial``, writing only what differs (appends for text
    that grew, splices for new blocks)."""
    if "message" not in turn:
        turn["message"] = partial
        return
    message = turn["message"]
    for key, value in partial.items():
        if key != "content" and message.get(key) != value:
            message[key] = value
    content = message["content"]
    new = partial["content"]
    for index, block in enumerate(new):
        if index >= len(content):
            content.append(block)
            continue
        stored = content[index]
        for key, value in block.items():
            current = stored.get(key)
            plain = current.to_plain() if hasattr(current, "to_plain") else current
            if plain != value:
                stored[key] = value


async def _one_by_one(events: AsyncIterator[StreamEvent]) -> AsyncIterator[list[StreamEvent]]:
    async for event in events:
        yield [event]


async def stream_message(
    events: AsyncIterator[StreamEvent], flush: Flush
) -> tuple[AssistantMessage, bool]:
    """Feed a provider stream into a :class:`MessageMirror`; return the terminal message (a
    deep copy, never the provider's object) and whether an error is retryable. A stream that
    raises, or ends without a terminal event, is a retryable error.

    A stream that also offers ``batches()`` (the SDK adapters' do) is read through it: the same
    events, a list per network read, each list fed at once (:meth:`MessageMirror.feed_batch`),
    so a fast stream's per-event awaits are paid once per read; a terminal event ends its list."""
    terminal: AssistantMessage | None = None
    retryable = False
    try:
        async with MessageMirror(flush) as mirror:
            batches: Callable[[], AsyncIterator[list[StreamEvent]]] | None = getattr(
                events, "batches", None
            )
            # the same events, a list per network read when the stream offers them: one feed a read
            lists = _one_by_one(events) if batches is None else batches()
            async for batch in lists:
                last = batch[-1] if batch else None
                if isinstance(last, DoneEvent | ErrorEvent):  # a terminal event comes last
                    batch = batch[:-1]
                if isinstance(last, DoneEvent):
                    terminal = _copy(last.message)
                    if terminal.stop_reason not in ("error", "aborted"):
                        # the caller commits the answer itself, next: the deltas of this read
                        # (a short answer's whole text) need no commit of their own
                        mirror.supersede()
                if batch:
                    await mirror.feed_batch(batch)
                if isinstance(last, ErrorEvent):
                    terminal = _copy(last.error)
                    retryable = last.retryable
    except Exception as exc:
        terminal = AssistantMessage(stop_reason="error", error_message=f"stream raised: {exc}")
        retryable = True
    if terminal is None:
        terminal = AssistantMessage(stop_reason="error", error_message="stream ended early")
        retryable = True
    return terminal, retryable


def assistant_json(message: AssistantMessage) -> dict[str, Any]:
    """The stored JSON of an assistant message (``stopReason`` always present)."""
    out = message_to_json(message)
    out["stopReason"] = message.stop_reason
    return out


def _copy(message: AssistantMessage) -> AssistantMessage:
    return msgspec.convert(msgspec.to_builtins(message), AssistantMessage)
