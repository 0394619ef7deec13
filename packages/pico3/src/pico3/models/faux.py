"""``faux``: a scripted, deterministic provider for tests, demos and offline use.

A :class:`FauxProvider` holds a queue of *steps*. Each :meth:`~FauxProvider.stream` call takes
the next step, which is either a ready :class:`FauxResponse` or a callable
``(request, state) -> FauxResponse`` that can react to what it was sent (say, to tool results).
The response is then streamed like a real model would: text and thinking word by word, tool
arguments as JSON fragments of ``chunk_chars`` characters, then ``done`` with estimated usage
(characters / 4). An empty queue ends the stream with the error
``"No more faux responses queued"`` instead of hanging.

There is no wall-clock pacing. Between deltas the stream only yields control
(``anyio.lowlevel.checkpoint``), so runs are fast and repeatable; a :func:`faux_pause` block
stops the stream on an ``anyio.Event`` the test controls, which is how a test aborts
"mid-stream" without sleeping. A cancelled context ends the stream with ``aborted`` at the
next delta or pause.

Build scripts with :func:`faux_text`, :func:`faux_thinking`, :func:`faux_tool_call`,
:func:`faux_pause`, :func:`faux_response` and :func:`faux_error`; :func:`faux_echo` is a
reactive step and :func:`faux_demo_script` a canned tool-using session for demos.

Deferred answers (a batch or background API): a :func:`faux_deferred` step ends the stream
with a ``deferred`` done carrying a handle ``faux-deferred-<n>``. Each later
:meth:`~FauxProvider.fetch_deferred` of the current handle takes the step's next *poll*:
:func:`faux_not_ready` (a fresh handle, optionally a new ``pollAfterMs``),
:func:`faux_fetch_error` (the fetch raises :class:`~pico3.models.provider.ModelProviderError`; the
handle stays valid) or a :class:`FauxResponse`, which answers with exactly the terminal event
the stream would have ended with. ``state.fetches`` and ``state.cancelled`` record the handles
asked for and given up.
"""

from __future__ import annotations

import re
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.lowlevel
import msgspec

from chord.context import Context, ContextCancelled
from pico3.models.provider import (
    DoneEvent,
    DoneReason,
    ErrorEvent,
    FetchResult,
    ModelCost,
    ModelInfo,
    ModelProviderError,
    Request,
    StreamEvent,
    TextContent,
    ToolResultMessage,
    Usage,
    UserMessage,
    compute_cost,
    estimate_tokens,
)
from pico3.models.stream import ABORTED, MessageBuilder, abortable

__all__ = [
    "FAUX_MODEL",
    "FauxBlock",
    "FauxDeferred",
    "FauxFetchError",
    "FauxNotReady",
    "FauxPause",
    "FauxPoll",
    "FauxProvider",
    "FauxResponse",
    "FauxState",
    "FauxStep",
    "FauxText",
    "FauxThinking",
    "FauxToolCall",
    "faux_deferred",
    "faux_demo_script",
    "faux_echo",
    "faux_error",
    "faux_fetch_error",
    "faux_not_ready",
    "faux_pause",
    "faux_response",
    "faux_text",
    "faux_thinking",
    "faux_tool_call",
]

FAUX_MODEL = ModelInfo(
    id="faux-1",
    provider="faux",
    api="faux",
    context_window=200_000,
    max_output=8_192,
    cost=ModelCost(),
    supports_thinking=True,
    supports_images=True,
)
"""The default faux model."""


class FauxText(msgspec.Struct, frozen=True):
    """Text the faux model says."""

    text: str


class FauxThinking(msgspec.Struct, frozen=True):
    """Thinking the faux model shows."""

    thinking: str
    signature: str | None = None


class FauxToolCall(msgspec.Struct, frozen=True):
    """A tool call; ``id`` ``None`` becomes ``call_<n>_<i>`` (call number, block number)."""

    name: str
    arguments: Mapping[str, Any]
    id: str | None = None


class FauxPause(msgspec.Struct, frozen=True, eq=False):
    """Stop streaming until ``gate`` is set (or the context is cancelled)."""

    gate: anyio.Event


FauxBlock = FauxText | FauxThinking | FauxToolCall | FauxPause


class FauxResponse(msgspec.Struct, frozen=True):
    """One scripted answer.

    ``stop_reason`` ``None`` means ``toolUse`` when there are tool calls, else ``stop``. With
    ``error`` set, the blocks stream first and the stream then ends with that error.
    ``usage`` ``None`` is estimated from the request and the content.
    """

    content: tuple[FauxBlock, ...] = ()
    stop_reason: DoneReason | None = None
    error: str | None = None
    retryable: bool = False
    retry_after: float | None = None
    usage: Usage | None = None


class FauxNotReady(msgspec.Struct, frozen=True):
    """A poll answer: still not ready; a new handle, polled after ``poll_after_ms``."""

    poll_after_ms: int | None = None


class FauxFetchError(msgspec.Struct, frozen=True):
    """A poll answer: asking failed (the fetch raises ``ModelProviderError``)."""

    message: str
    retryable: bool = True


FauxPoll = FauxResponse | FauxNotReady | FauxFetchError


class FauxDeferred(msgspec.Struct, frozen=True):
    """A step that answers with a deferred handle; fetches take ``polls`` in order."""

    polls: tuple[FauxPoll, ...]
    poll_after_ms: int | None = None


KEPT_REQUESTS = 64
"""How many of its newest requests a faux provider keeps in :attr:`FauxState.requests` (a
request holds the whole context: keeping all of them grew without bound in long sessions)."""


@dataclass
class FauxState:
    """What a faux provider has seen, in order: its newest ``KEPT_REQUESTS`` requests (all
    of them until there are more), every fetched and cancelled handle."""

    requests: deque[Request] = field(default_factory=lambda: deque(maxlen=KEPT_REQUESTS))
    fetches: list[Any] = field(default_factory=list)
    cancelled: list[Any] = field(default_factory=list)
    started: int = 0
    """How many streams were started (not bounded like ``requests``)."""

    @property
    def call_count(self) -> int:
        """How many streams were started."""
        return self.started

    def record(self, request: Request) -> None:
        """Count and keep ``request`` (dropping the oldest kept one past the bound)."""
        self.started += 1
        self.requests.append(request)


FauxStep = FauxResponse | FauxDeferred | Callable[[Request, FauxState], FauxResponse | FauxDeferred]


@dataclass
class _Pending:
    """A deferred answer: the request it answers, its call number and the polls left."""

    request: Request
    call: int
    polls: deque[FauxPoll]


def faux_text(text: str) -> FauxText:
    """A text block."""
    return FauxText(text)


def faux_thinking(thinking: str, signature: str | None = None) -> FauxThinking:
    """A thinking block."""
    return FauxThinking(thinking, signature)


def faux_tool_call(name: str, arguments: Mapping[str, Any], id: str | None = None) -> FauxToolCall:
    """A tool call block."""
    return FauxToolCall(name, dict(arguments), id)


def faux_pause(gate: anyio.Event) -> FauxPause:
    """A pause: the stream waits for ``gate`` here."""
    return FauxPause(gate)


def faux_response(
    *content: FauxBlock | str,
    stop_reason: DoneReason | None = None,
    usage: Usage | None = None,
) -> FauxResponse:
    """A response of ``content`` (plain strings become text blocks)."""
    blocks = tuple(FauxText(block) if isinstance(block, str) else block for block in content)
    return FauxResponse(blocks, stop_reason=stop_reason, usage=usage)


def faux_error(
    message: str,
    *content: FauxBlock | str,
    retryable: bool = False,
    retry_after: float | None = None,
) -> FauxResponse:
    """A response that streams ``content`` and then fails with ``message``."""
    blocks = tuple(FauxText(block) if isinstance(block, str) else block for block in content)
    return FauxResponse(blocks, error=message, retryable=retryable, retry_after=retry_after)


def faux_deferred(*polls: FauxPoll | str, poll_after_ms: int | None = None) -> FauxDeferred:
    """A step answered with a deferred handle; ``polls`` are the answers of successive fetches
    (plain strings become final text responses)."""
    made = tuple(faux_response(poll) if isinstance(poll, str) else poll for poll in polls)
    return FauxDeferred(made, poll_after_ms)


def faux_not_ready(poll_after_ms: int | None = None) -> FauxNotReady:
    """A poll answer: not ready yet (the fetch re-defers with a new handle)."""
    return FauxNotReady(poll_after_ms)


def faux_fetch_error(message: str, *, retryable: bool = True) -> FauxFetchError:
    """A poll answer: the fetch itself fails with ``ModelProviderError(message)``."""
    return FauxFetchError(message, retryable)


def faux_echo(request: Request, state: FauxState) -> FauxResponse:
    """A reactive step for harness tests (docs/design/turn.md#faux-provider).

    The last message decides: user ``"tool:a,b"`` calls tools ``a`` and ``b`` with ``{}``;
    ``"error:x"`` fails with ``x``; a tool result answers ``"after tools"``; any other user text
    answers ``"answer to <text>"``.
    """
    del state
    last = request.messages[-1] if request.messages else None
    if isinstance(last, ToolResultMessage):
        return faux_response("after tools")
    text = ""
    if isinstance(last, UserMessage):
        if isinstance(last.content, str):
            text = last.content
        else:
            text = "".join(b.text for b in last.content if isinstance(b, TextContent))
    if text.startswith("tool:"):
        names = [name.strip() for name in text[5:].split(",") if name.strip()]
        return faux_response(*(faux_tool_call(name, {}) for name in names))
    if text.startswith("error:"):
        return faux_error(text[6:])
    return faux_response(f"answer to {text}")


def faux_demo_script(
    tool_calls: Sequence[tuple[str, Mapping[str, Any]]],
    summary: str,
    *,
    narration: Sequence[str] | None = None,
) -> list[FauxResponse]:
    """A canned session: one response per tool call (with a line of narration), then ``summary``.

    ``narration[i]`` is said before tool call ``i`` (default: ``"Running <name>."``). The app
    uses it for its offline demo, e.g. read -> edit -> bash -> summary.
    """
    if narration is not None and len(narration) != len(tool_calls):
        raise ValueError(f"narration has {len(narration)} lines for {len(tool_calls)} tool calls")
    steps: list[FauxResponse] = []
    for index, (name, arguments) in enumerate(tool_calls):
        line = narration[index] if narration is not None else f"Running {name}."
        steps.append(faux_response(line, faux_tool_call(name, arguments)))
    steps.append(faux_response(summary))
    return steps


_WORD = re.compile(r"\S+\s*|\s+")


class FauxProvider:
    """The scripted provider. Not safe for two concurrent streams on one script (by design:
    scripts are sequences)."""

    def __init__(
        self,
        script: Iterable[FauxStep] = (),
        *,
        name: str = "faux",
        models: Sequence[ModelInfo] = (FAUX_MODEL,),
        chunk_chars: int = 16,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if chunk_chars < 1:
            raise ValueError(f"chunk_chars must be >= 1, got {chunk_chars}")
        self.name = name
        self._models = tuple(models)
        self._queue: deque[FauxStep] = deque(script)
        self._chunk = chunk_chars
        self._clock = clock
        self._deferred: dict[str, _Pending] = {}
        self._handles = 0
        self.state = FauxState()

    # -- script ---------------------------------------------------------------------------------
    def set_responses(self, steps: Iterable[FauxStep]) -> None:
        """Replace the queue."""
        self._queue = deque(steps)

    def append_responses(self, steps: Iterable[FauxStep]) -> None:
        """Add steps to the end of the queue."""
        self._queue.extend(steps)

    @property
    def pending_count(self) -> int:
        """Steps not yet used."""
        return len(self._queue)

    # -- provider -------------------------------------------------------------------------------
    def models(self) -> Sequence[ModelInfo]:
        """The configured faux models."""
        return self._models

    def model(self, model_id: str) -> ModelInfo:
        """The model named ``model_id`` (a default-sized one when unknown)."""
        for info in self._models:
            if info.id == model_id:
                return info
        return ModelInfo(
            id=model_id,
            provider=self.name,
            api="faux",
            context_window=FAUX_MODEL.context_window,
            max_output=FAUX_MODEL.max_output,
            cost=ModelCost(),
        )

    def stream(self, request: Request, ctx: Context) -> AsyncIterator[StreamEvent]:
        """Stream the next scripted response."""
        return self._stream(request, ctx)

    async def _stream(self, request: Request, ctx: Context) -> AsyncIterator[StreamEvent]:
        self.state.record(request)
        call = self.state.call_count
        builder = self._builder(request)
        yield builder.start()
        if not self._queue:
            yield builder.fail("error", "No more faux responses queued")
            return
        step = self._queue.popleft()
        if isinstance(step, FauxResponse | FauxDeferred):
            response = step
        else:
            response = step(request, self.state)
        if isinstance(response, FauxDeferred):
            await anyio.lowlevel.checkpoint()
            if ctx.cancelled:
                yield builder.abort()
                return
            handle = self._defer(_Pending(request, call, deque(response.polls)))
            yield builder.defer(handle, response.poll_after_ms)
            return
        async for event in self._body(builder, request, call, response, ctx):
            yield event

    async def _body(
        self,
        builder: MessageBuilder,
        request: Request,
        call: int,
        response: FauxResponse,
        ctx: Context,
    ) -> AsyncIterator[StreamEvent]:
        """Everything after ``start``: blocks, deltas, the terminal event."""
        info = self.model(request.model)
        produced = 0
        for number, block in enumerate(response.content):
            if isinstance(block, FauxPause):
                if await abortable(block.gate.wait, ctx) is ABORTED:
                    yield builder.abort()
                    return
                continue
            if isinstance(block, FauxToolCall):
                call_id = block.id or f"call_{call}_{number}"
                index, event = builder.open_tool_call(call_id, block.name)
                raw = msgspec.json.encode(dict(block.arguments)).decode()
                pieces = [raw[i : i + self._chunk] for i in range(0, len(raw), self._chunk)]
                produced += len(block.name) + len(raw)
            elif isinstance(block, FauxThinking):
                index, event = builder.open_thinking()
                pieces = _WORD.findall(block.thinking)
                if block.signature is not None:
                    builder.set_signature(index, block.signature)
                produced += len(block.thinking)
            else:
                index, event = builder.open_text()
                pieces = _WORD.findall(block.text)
                produced += len(block.text)
            yield event
            for piece in pieces:
                await anyio.lowlevel.checkpoint()
                if ctx.cancelled:
                    yield builder.abort()
                    return
                yield builder.delta(index, piece)
            yield builder.close(index)
        await anyio.lowlevel.checkpoint()
        if ctx.cancelled:
            yield builder.abort()
            return
        usage = response.usage or self._usage(request, produced, info)
        if response.error is not None:
            yield builder.fail(
                "error",
                response.error,
                retryable=response.retryable,
                retry_after=response.retry_after,
                usage=usage,
            )
            return
        reason = response.stop_reason
        if reason is None:
            has_calls = any(isinstance(b, FauxToolCall) for b in response.content)
            reason = "toolUse" if has_calls else "stop"
        for event in builder.done(reason, usage):
            yield event

    def _builder(self, request: Request) -> MessageBuilder:
        info = self.model(request.model)
        return MessageBuilder(
            api=info.api or "faux", provider=self.name, model=request.model, clock=self._clock
        )

    # -- deferred answers (docs/design/turn.md#models) -------------------------------------------------------
    def _defer(self, pending: _Pending) -> str:
        self._handles += 1
        handle = f"faux-deferred-{self._handles}"
        self._deferred[handle] = pending
        return handle

    @property
    def deferred_handles(self) -> list[str]:
        """Handles that can still be fetched (neither answered nor cancelled)."""
        return list(self._deferred)

    async def fetch_deferred(self, model: str, handle: Any, ctx: Context) -> FetchResult:
        """Take the next scripted poll of ``handle``: not ready (a new handle), a fetch failure
        (raises :class:`ModelProviderError`) or the answer (the terminal event the stream would have
        ended with). An unknown handle raises a non-retryable :class:`ModelProviderError`."""
        del model
        self.state.fetches.append(handle)
        pending = self._deferred.pop(handle, None) if isinstance(handle, str) else None
        if pending is None:
            raise ModelProviderError(f"unknown faux deferred handle {handle!r}", retryable=False)
        if not pending.polls:
            raise ModelProviderError(f"no faux poll scripted for {handle!r}", retryable=False)
        poll = pending.polls[0]
        builder = self._builder(pending.request)
        builder.start()
        if isinstance(poll, FauxNotReady):
            pending.polls.popleft()
            return builder.defer(self._defer(pending), poll.poll_after_ms)
        if isinstance(poll, FauxFetchError):
            pending.polls.popleft()
            self._deferred[handle] = pending  # the handle stays valid: asking failed, not it
            raise ModelProviderError(poll.message, retryable=poll.retryable)
        terminal: StreamEvent | None = None
        async for event in self._body(builder, pending.request, pending.call, poll, ctx):
            terminal = event
        if not isinstance(terminal, DoneEvent | ErrorEvent) or (
            isinstance(terminal, ErrorEvent) and terminal.reason == "aborted"
        ):
            self._deferred[handle] = pending  # interrupted: the same poll answers next time
            raise ContextCancelled("the fetch was cancelled")
        pending.polls.popleft()
        return terminal

    async def cancel_deferred(self, model: str, handle: Any, ctx: Context) -> None:
        """Forget ``handle`` (a no-op for unknown handles); recorded in ``state.cancelled``."""
        del model, ctx
        self.state.cancelled.append(handle)
        if isinstance(handle, str):
            self._deferred.pop(handle, None)

    @staticmethod
    def _usage(request: Request, produced_chars: int, info: ModelInfo) -> Usage:
        usage = Usage(
            input=estimate_tokens(request.messages, request.system),
            output=-(-produced_chars // 4),
        )
        usage.total_tokens = usage.input + usage.output
        usage.cost = compute_cost(usage, info)
        return usage
