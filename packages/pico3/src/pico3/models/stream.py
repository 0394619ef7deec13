"""Building and reducing event streams: the shared half of every provider.

A provider adapter reads its backend's own events and feeds them to a :class:`MessageBuilder`,
which keeps the partial :class:`AssistantMessage` and returns the matching contract events
(``*_start`` / ``*_delta`` / ``*_end``, then one terminal). Adapters therefore never assemble
messages by hand, and every provider's streams have the same shape.

:func:`reduce_events` is the inverse: it rebuilds the final message from the deltas alone. The
tests hold every provider to ``reduce_events(events) == final message``.

:func:`abortable` runs one await (the next chunk, a backoff sleep, a scripted pause) so that a
cancelled :class:`~chord.context.Context` stops it at once. Only that await sits inside the
cancel scope, never a ``yield``, which keeps cancel scopes out of async generators' suspension
points.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, TypeVar

import anyio
import msgspec

from chord.context import Context
from pico3.models.provider import (
    AssistantMessage,
    Citation,
    Deferred,
    DoneEvent,
    DoneReason,
    ErrorEvent,
    ErrorReason,
    ModelProviderError,
    ServerToolContent,
    ServerToolEvent,
    StartEvent,
    StreamEvent,
    TextContent,
    TextDeltaEvent,
    TextEndEvent,
    TextStartEvent,
    ThinkingContent,
    ThinkingDeltaEvent,
    ThinkingEndEvent,
    ThinkingStartEvent,
    ToolCall,
    ToolCallDeltaEvent,
    ToolCallEndEvent,
    ToolCallStartEvent,
    Usage,
)

__all__ = ["ABORTED", "MessageBuilder", "StreamProtocolError", "abortable", "reduce_events"]

T = TypeVar("T")


class _Aborted:
    __slots__ = ()

    def __repr__(self) -> str:
        return "ABORTED"


ABORTED = _Aborted()
"""Returned by :func:`abortable` when the context was cancelled before the await finished."""


async def abortable(fn: Callable[[], Awaitable[T]], ctx: Context) -> T | _Aborted:
    """Await ``fn()`` unless ``ctx`` is cancelled first; then return :data:`ABORTED`.

    Exceptions of ``fn`` propagate; cancellation of an *enclosing* anyio scope propagates too.
    """
    if ctx.cancelled:
        return ABORTED
    deadline = ctx.deadline
    scope = anyio.CancelScope(
        deadline=float("inf")
        if deadline is None
        else anyio.current_time() + (deadline - time.monotonic())
    )
    signal = ctx.abort_signal
    remove = signal.add_listener(lambda _reason: scope.cancel()) if signal is not None else None
    try:
        with scope:
            return await fn()
    finally:
        if remove is not None:
            remove()
    return ABORTED


class StreamProtocolError(ValueError):
    """An adapter fed the builder an impossible sequence (a bug in the adapter)."""


class MessageBuilder:
    """The partial assistant message of one stream, and the events that grow it.

    Blocks are opened, extended and closed by their content index; several may be open at once
    (OpenAI interleaves parallel tool calls). :meth:`done` and :meth:`fail` close whatever is
    still open, in index order, before the terminal event.
    """

    def __init__(
        self,
        *,
        api: str,
        provider: str,
        model: str,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.message = AssistantMessage(
            api=api, provider=provider, model=model, timestamp=int(clock() * 1000)
        )
        self._open: dict[int, list[str]] = {}
        self._finished = False

    # -- lifecycle ------------------------------------------------------------------------------
    def start(self) -> StartEvent:
        """The ``start`` event (call once, first)."""
        return StartEvent(partial=self.message)

    def open_text(self) -> tuple[int, TextStartEvent]:
        """Open a text block; returns its index and its start event."""
        index = self._append(TextContent(text=""))
        return index, TextStartEvent(content_index=index, partial=self.message)

    def open_thinking(self) -> tuple[int, ThinkingStartEvent]:
        """Open a thinking block; returns its index and its start event."""
        index = self._append(ThinkingContent(thinking=""))
        return index, ThinkingStartEvent(content_index=index, partial=self.message)

    def open_tool_call(self, call_id: str, name: str) -> tuple[int, ToolCallStartEvent]:
        """Open a tool call; its arguments arrive as JSON fragments via :meth:`delta`."""
        index = self._append(ToolCall(id=call_id, name=name, arguments={}))
        event = ToolCallStartEvent(content_index=index, id=call_id, name=name, partial=self.message)
        return index, event

    def delta(self, index: int, text: str) -> StreamEvent:
        """Append ``text`` to the open block at ``index`` (text, thinking or JSON fragment)."""
        parts = self._parts(index)
        block = self.message.content[index]
        # The block's own reference is dropped before the append, so the text held only by the
        # local grows in place (CPython's string concatenation); ``block.text += text`` would
        # copy the whole text at every delta, quadratic in a long answer's length. A text that
        # someone else still references is copied, as before.
        if isinstance(block, TextContent):
            grown, block.text = block.text, ""
            grown += text
            block.text = grown
            return TextDeltaEvent(content_index=index, delta=text, partial=self.message)
        if isinstance(block, ThinkingContent):
            grown, block.thinking = block.thinking, ""
            grown += text
            block.thinking = grown
            return ThinkingDeltaEvent(content_index=index, delta=text, partial=self.message)
        parts.append(text)  # a tool call's JSON, parsed once whole at close
        return ToolCallDeltaEvent(content_index=index, delta=text, partial=self.message)

    def set_signature(self, index: int, signature: str, *, redacted: bool = False) -> None:
        """Record a thinking block's signature (or a redacted block's opaque payload)."""
        self._parts(index)
        block = self.message.content[index]
        if not isinstance(block, ThinkingContent):
            raise StreamProtocolError(f"block {index} is not a thinking block")
        block.signature = (block.signature or "") + signature
        block.redacted = block.redacted or redacted

    def cite(self, index: int, citation: Citation) -> None:
        """Add ``citation`` to the open text block at ``index`` (a provider's web search
        answer citing a source; the terminal message carries it)."""
        self._parts(index)
        block = self.message.content[index]
        if not isinstance(block, TextContent):
            raise StreamProtocolError(f"block {index} is not a text block")
        block.citations = [*(block.citations or ()), citation]

    def server_tool(self, block: ServerToolContent) -> ServerToolEvent:
        """Add a tool the provider ran itself (complete: no deltas, nothing to close)."""
        if self._finished:
            raise StreamProtocolError("the stream already ended")
        self.message.content.append(block)
        index = len(self.message.content) - 1
        return ServerToolEvent(content_index=index, block=block, partial=self.message)

    def close(self, index: int) -> StreamEvent:
        """Close the block at ``index``. A tool call's JSON must parse to an object here."""
        parts = self._parts(index)
        del self._open[index]
        block = self.message.content[index]
        if isinstance(block, TextContent):
            return TextEndEvent(content_index=index, content=block.text, partial=self.message)
        if isinstance(block, ThinkingContent):
            return ThinkingEndEvent(
                content_index=index,
                content=block.thinking,
                signature=block.signature,
                partial=self.message,
            )
        if not isinstance(block, ToolCall):  # a server tool block is never open
            raise StreamProtocolError(f"block {index} cannot be closed")
        raw = "".join(parts)
        try:
            arguments: Any = msgspec.json.decode(raw) if raw.strip() else {}
        except msgspec.DecodeError:
            raise ModelProviderError(
                f"tool call {block.name!r} ({block.id}) has invalid JSON arguments: {raw!r}",
                retryable=True,
            ) from None
        if not isinstance(arguments, dict):
            raise ModelProviderError(
                f"tool call {block.name!r} ({block.id}) arguments must be a JSON object, "
                f"got {raw!r}",
                retryable=True,
            )
        block.arguments = arguments
        return ToolCallEndEvent(content_index=index, tool_call=block, partial=self.message)

    def close_all(self) -> list[StreamEvent]:
        """Close every open block in index order."""
        return [self.close(index) for index in sorted(self._open)]

    def done(self, reason: DoneReason, usage: Usage | None) -> list[StreamEvent]:
        """Close open blocks and finish successfully."""
        events = self.close_all()
        self._finish()
        self.message.stop_reason = reason
        self.message.usage = usage
        events.append(DoneEvent(reason=reason, message=self.message))
        return events

    def defer(self, handle: Any, poll_after_ms: int | None = None) -> DoneEvent:
        """Finish with a ``deferred`` done: the answer is to be fetched later with ``handle``
        (strict JSON). A deferred answer has no content of its own."""
        if self.message.content:
            raise StreamProtocolError("a deferred answer cannot follow content blocks")
        self._finish()
        self.message.deferred = Deferred(handle=handle, poll_after_ms=poll_after_ms)
        return DoneEvent(reason="deferred", message=self.message)

    def fail(
        self,
        reason: ErrorReason,
        message: str,
        *,
        retryable: bool = False,
        retry_after: float | None = None,
        usage: Usage | None = None,
    ) -> ErrorEvent:
        """Finish with an error (open blocks stay as they are: the partial is for display)."""
        self._finish()
        self._open.clear()
        self.message.stop_reason = reason
        self.message.error_message = message
        if usage is not None:
            self.message.usage = usage
        return ErrorEvent(
            reason=reason, error=self.message, retryable=retryable, retry_after=retry_after
        )

    def fail_with(self, error: ModelProviderError, usage: Usage | None = None) -> ErrorEvent:
        """:meth:`fail` with a classified :class:`ModelProviderError`."""
        return self.fail(
            "error",
            error.message,
            retryable=error.retryable,
            retry_after=error.retry_after,
            usage=usage,
        )

    def abort(self, usage: Usage | None = None) -> ErrorEvent:
        """Finish as ``aborted``."""
        return self.fail("aborted", "aborted", usage=usage)

    @property
    def finished(self) -> bool:
        """True once a terminal event was produced."""
        return self._finished

    # -- internals ------------------------------------------------------------------------------
    def _append(self, block: TextContent | ThinkingContent | ToolCall | ServerToolContent) -> int:
        if self._finished:
            raise StreamProtocolError("the stream already ended")
        self.message.content.append(block)
        index = len(self.message.content) - 1
        self._open[index] = []
        return index

    def _parts(self, index: int) -> list[str]:
        if self._finished:
            raise StreamProtocolError("the stream already ended")
        try:
            return self._open[index]
        except KeyError:
            raise StreamProtocolError(f"no open block at index {index}") from None

    def _finish(self) -> None:
        if self._finished:
            raise StreamProtocolError("the stream already ended")
        self._finished = True


def reduce_events(events: Iterable[StreamEvent]) -> AssistantMessage:
    """Rebuild the final message from ``events`` using only starts, deltas and the terminal.

    Raises :class:`StreamProtocolError` when the events break the contract (no ``start`` first,
    a delta for an unopened block, nothing after the terminal, no terminal at all).
    """
    message: AssistantMessage | None = None
    content: list[Any] = []
    json_parts: dict[int, list[str]] = {}
    terminal: DoneEvent | ErrorEvent | None = None
    for event in events:
        if terminal is not None:
            raise StreamProtocolError(f"event after the terminal event: {event!r}")
        if message is None:
            if not isinstance(event, StartEvent):
                raise StreamProtocolError(f"first event must be start, got {type(event).__name__}")
            base = event.partial
            message = AssistantMessage(
                api=base.api, provider=base.provider, model=base.model, timestamp=base.timestamp
            )
            continue
        match event:
            case TextStartEvent():
                _expect_index(content, event.content_index)
                content.append(TextContent(text=""))
            case ThinkingStartEvent():
                _expect_index(content, event.content_index)
                content.append(ThinkingContent(thinking=""))
            case ToolCallStartEvent():
                _expect_index(content, event.content_index)
                content.append(ToolCall(id=event.id, name=event.name, arguments={}))
                json_parts[event.content_index] = []
            case TextDeltaEvent():
                _block(content, event.content_index, TextContent).text += event.delta
            case ThinkingDeltaEvent():
                _block(content, event.content_index, ThinkingContent).thinking += event.delta
            case ThinkingEndEvent():
                block = _block(content, event.content_index, ThinkingContent)
                block.signature = event.signature
            case ToolCallDeltaEvent():
                _block(content, event.content_index, ToolCall)
                json_parts[event.content_index].append(event.delta)
            case ToolCallEndEvent():
                block = _block(content, event.content_index, ToolCall)
                raw = "".join(json_parts[event.content_index])
                block.arguments = msgspec.json.decode(raw) if raw.strip() else {}
            case ServerToolEvent():
                _expect_index(content, event.content_index)
                content.append(event.block)
            case DoneEvent() | ErrorEvent():
                terminal = event
            case _:
                pass
    if message is None or terminal is None:
        raise StreamProtocolError("the stream has no start or no terminal event")
    final = terminal.message if isinstance(terminal, DoneEvent) else terminal.error
    # Redaction and citations are properties the deltas cannot carry; take them from the
    # terminal message.
    for index, block in enumerate(content):
        if isinstance(block, ThinkingContent) and index < len(final.content):
            other = final.content[index]
            if isinstance(other, ThinkingContent):
                block.redacted = other.redacted
                block.signature = other.signature
        elif isinstance(block, TextContent) and index < len(final.content):
            other = final.content[index]
            if isinstance(other, TextContent):
                block.citations = other.citations
    message.content = content
    message.usage = final.usage
    message.stop_reason = final.stop_reason
    message.error_message = final.error_message
    message.deferred = final.deferred
    return message


def _expect_index(content: list[Any], index: int) -> None:
    if index != len(content):
        raise StreamProtocolError(f"block opened at {index}, expected {len(content)}")


def _block(content: list[Any], index: int, kind: type[T]) -> T:
    if not 0 <= index < len(content) or not isinstance(content[index], kind):
        raise StreamProtocolError(f"no {kind.__name__} block at index {index}")
    return content[index]
