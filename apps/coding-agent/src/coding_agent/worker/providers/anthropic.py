"""Anthropic adapter: the Messages API, streamed, through the official ``anthropic`` SDK.

The SDK's raw stream events map onto the pico3 contract one to one:

==========================================  ============================================
``message_start``                           usage (input, cache read/write)
``content_block_start`` text/thinking/      ``text_start`` / ``thinking_start`` /
tool_use/redacted_thinking                  ``toolcall_start`` (``id``, ``name``)
``content_block_delta`` text/thinking/      ``text_delta`` / ``thinking_delta`` /
input_json/signature                        ``toolcall_delta`` (raw JSON) / signature kept
``content_block_stop``                      ``*_end`` (tool arguments parsed here)
``message_delta``                           stop reason, output tokens
``message_stop``                            ``done`` (``end_turn`` -> stop, ``max_tokens``
                                            -> length, ``tool_use`` -> toolUse)
==========================================  ============================================

This module is the wire mapping only (request building, event mapping, error mapping); the SDK
client, the streaming loop, retries with ``Retry-After``, cancellation, usage pricing and the
message memo are the shared core's (:mod:`._core`). Thinking levels become ``budget_tokens``
(:data:`THINKING_BUDGETS`), and the last system section and the last user message carry
``cache_control`` so prompts are cached.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable, Sequence
from typing import Any, cast

import msgspec

from coding_agent.worker.providers._core import (
    ENCODER,
    Mapper,
    Sdk,
    SdkProvider,
    classify_stainless,
)
from coding_agent.worker.providers._memo import FoldMemo
from coding_agent.worker.providers._sse import Last
from pico3.models import (
    AssistantMessage,
    ImageContent,
    Message,
    MessageBuilder,
    ModelCost,
    ModelInfo,
    ModelProviderError,
    Request,
    StreamEvent,
    SystemMessage,
    TextContent,
    ThinkingContent,
    ThinkingLevel,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    retryable_status,
)

__all__ = [
    "ANTHROPIC_MODELS",
    "THINKING_BUDGETS",
    "AnthropicProvider",
    "build_params",
    "classify_error",
    "decode_event",
]

API = "anthropic-messages"

ANTHROPIC_MODELS: tuple[ModelInfo, ...] = (
    ModelInfo(
        id="claude-sonnet-4-6",
        provider="anthropic",
        api=API,
        context_window=200_000,
        max_output=64_000,
        cost=ModelCost(input=3, output=15, cache_read=0.3, cache_write=3.75),
        supports_thinking=True,
        supports_images=True,
    ),
    ModelInfo(
        id="claude-opus-4-7",
        provider="anthropic",
        api=API,
        context_window=200_000,
        max_output=32_000,
        cost=ModelCost(input=5, output=25, cache_read=0.5, cache_write=6.25),
        supports_thinking=True,
        supports_images=True,
    ),
    ModelInfo(
        id="claude-haiku-4-5",
        provider="anthropic",
        api=API,
        context_window=200_000,
        max_output=64_000,
        cost=ModelCost(input=1, output=5, cache_read=0.1, cache_write=1.25),
        supports_thinking=True,
        supports_images=True,
    ),
)
"""Bundled metadata (dollars per million tokens, list prices as last known; override them in the
registry config). The first entry is the default model."""

THINKING_BUDGETS: dict[ThinkingLevel, int] = {
    "minimal": 1024,
    "low": 4096,
    "medium": 10240,
    "high": 32768,
    "xhigh": 32768,  # no higher tier on Anthropic: xhigh degrades to high
}
"""Thinking budget tokens per level (``off`` sends no thinking)."""

_MIN_BUDGET = 1024
_STOP_REASONS = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "pause_turn": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_use": "toolUse",
}


def build_params(
    request: Request, info: ModelInfo, *, memo: FoldMemo | None = None
) -> dict[str, Any]:
    """The keyword arguments of ``messages.create`` for ``request`` (always streaming). With
    ``memo`` the messages come JSON-encoded (see :mod:`._memo`): for the request body, not for
    reading."""
    max_tokens = request.max_tokens or info.max_output
    params: dict[str, Any] = {
        "model": request.model,
        "messages": _messages(request.messages) if memo is None else memo.render(request.messages),
        "max_tokens": max_tokens,
        "stream": True,
    }
    if request.system:
        system: list[dict[str, Any]] = [{"type": "text", "text": s} for s in request.system]
        system[-1]["cache_control"] = {"type": "ephemeral"}
        params["system"] = system
    if request.tools:
        params["tools"] = [
            {"name": t.name, "description": t.description, "input_schema": t.parameters}
            for t in request.tools
        ]
    if request.thinking_level != "off" and info.supports_thinking:
        budget = THINKING_BUDGETS.get(request.thinking_level)
        if budget is None:
            raise ModelProviderError(
                f"unknown thinking level {request.thinking_level!r}", retryable=False
            )
        total = min(max_tokens + budget, info.max_output)
        if total <= budget:
            budget = total - _MIN_BUDGET
        if budget >= _MIN_BUDGET:
            params["max_tokens"] = total
            params["thinking"] = {"type": "enabled", "budget_tokens": budget}
    return params


def _messages(messages: Sequence[Message], *, cache: bool = True) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for message in messages:
        if isinstance(message, UserMessage):
            content: Any = (
                message.content
                if isinstance(message.content, str)
                else [_user_block(b) for b in message.content]
            )
            out.append({"role": "user", "content": content})
        elif isinstance(message, AssistantMessage):
            signed = message.api in ("", API)  # another API's signatures mean nothing here
            blocks = [
                b for b in (_assistant_block(b, signed) for b in message.content) if b is not None
            ]
            if blocks:
                out.append({"role": "assistant", "content": blocks})
        elif isinstance(message, ToolResultMessage):
            result = {
                "type": "tool_result",
                "tool_use_id": message.tool_call_id,
                "content": [_user_block(b) for b in message.content],
                "is_error": message.is_error,
            }
            previous = out[-1] if out else None
            if previous is not None and previous.get("_tool_results"):
                previous["content"].append(result)
            else:
                out.append({"role": "user", "content": [result], "_tool_results": True})
        elif isinstance(message, SystemMessage):
            out.append({"role": "user", "content": f"<system>\n{message.content}\n</system>"})
    for message in out:
        message.pop("_tool_results", None)
    last_user = next((m for m in reversed(out) if m["role"] == "user"), None)
    if last_user is not None and cache:
        if isinstance(last_user["content"], str):
            last_user["content"] = [{"type": "text", "text": last_user["content"]}]
        if last_user["content"]:
            last_user["content"][-1] = {
                **last_user["content"][-1],
                "cache_control": {"type": "ephemeral"},
            }
    return out


def wire_memo() -> FoldMemo:
    """A memo of encoded request messages for :func:`build_params`."""
    return FoldMemo(_Fold)


class _Fold:
    """:func:`_messages` as a left fold (see :class:`._memo.Fold`), every message JSON-encoded
    but the last user one, which carries the cache breakpoint.

    Runs of tool results (across assistants with nothing to send) share one user message, so a
    message is a *group* of records; only the last group can still grow. The groups before the
    last user one never change again: their encodings are joined into one buffer (``_prefix``,
    comma-separated) as they fall behind it, and :meth:`render` hands that buffer over as a
    single :class:`msgspec.Raw`, which msgspec writes verbatim, so the array comes out as if
    each message were its own element. The body's encoding is then one copy of the history
    rather than a walk over thousands of small objects scattered over the heap (~0.4 ms at
    turn 2,000, which was most of what a late turn costs more than an early one)."""

    __slots__ = ("_assistant", "_groups", "_items", "_joined", "_merging", "_prefix")

    def __init__(self) -> None:
        self._groups: list[list[Message]] = []
        self._assistant: list[bool] = []  # per group: an assistant message
        self._prefix = b""  # the encoded groups before ``_joined``, comma-separated
        self._joined = 0
        self._items: list[bytes] = []  # the encoded groups from ``_joined`` on but the last
        self._merging = False  # the last group is a run of tool results

    def feed(self, message: Message) -> None:
        if isinstance(message, AssistantMessage):
            if not _messages([message]):
                return  # nothing to send: a run of tool results continues across it
            self._merging = False
            self._open([message], assistant=True)
        elif isinstance(message, ToolResultMessage):
            if self._merging:
                self._groups[-1].append(message)
            else:
                self._open([message], assistant=False)
            self._merging = True
        else:
            self._merging = False
            self._open([message], assistant=False)

    def _open(self, group: list[Message], *, assistant: bool) -> None:
        if self._groups:
            self._items.append(_encode_group(self._groups[-1]))
        self._groups.append(group)
        self._assistant.append(assistant)

    def render(self) -> list[Any]:
        if not self._groups:
            return []
        last = len(self._groups) - 1
        user = next((i for i in range(last, -1, -1) if not self._assistant[i]), None)
        self._join(last if user is None else user)
        out: list[Any] = [msgspec.Raw(self._prefix)] if self._prefix else []
        tail: list[Any] = [*self._items, _encode_group(self._groups[last])]
        if user is not None:
            tail[user - self._joined] = _messages(self._groups[user])[0]
        out.extend(msgspec.Raw(item) if isinstance(item, bytes) else item for item in tail)
        return out

    def _join(self, until: int) -> None:
        """Move the encoded groups before ``until`` into the joined prefix."""
        count = until - self._joined
        if count <= 0:
            return
        moved, self._items = self._items[:count], self._items[count:]
        self._prefix = b",".join([self._prefix, *moved] if self._prefix else moved)
        self._joined = until


def _encode_group(group: list[Message]) -> bytes:
    return ENCODER.encode(_messages(group, cache=False)[0])


def _user_block(block: TextContent | ImageContent) -> dict[str, Any]:
    if isinstance(block, TextContent):
        return {"type": "text", "text": block.text}
    return {
        "type": "image",
        "source": {"type": "base64", "media_type": block.mime_type, "data": block.data},
    }


def _assistant_block(
    block: TextContent | ThinkingContent | ToolCall, signed: bool = True
) -> dict[str, Any] | None:
    if isinstance(block, TextContent):
        return {"type": "text", "text": block.text} if block.text else None
    if isinstance(block, ToolCall):
        return {"type": "tool_use", "id": block.id, "name": block.name, "input": block.arguments}
    if not signed:
        return None if block.redacted else _unsigned(block)
    if block.redacted and block.signature:
        return {"type": "redacted_thinking", "data": block.signature}
    if block.signature:
        return {"type": "thinking", "thinking": block.thinking, "signature": block.signature}
    return _unsigned(block)


def _unsigned(block: ThinkingContent) -> dict[str, Any] | None:
    """Unsigned thinking (another provider's) cannot be replayed as thinking: kept as text."""
    return {"type": "text", "text": block.thinking} if block.thinking else None


def classify_error(
    exc: BaseException, clock: Callable[[], float] = time.time
) -> ModelProviderError | None:
    """A :class:`ModelProviderError` for an ``anthropic`` SDK exception (``None`` for others)."""
    return classify_stainless(exc, "anthropic", _status_error, clock)


def _status_error(exc: Any) -> tuple[str, bool]:
    """An ``anthropic.APIStatusError``'s message and whether it is worth retrying."""
    kind, detail = _error_body(exc.body)
    status = exc.status_code
    retryable = retryable_status(status) or kind in {
        "overloaded_error",
        "api_error",
        "rate_limit_error",
        "timeout_error",
    }
    if status == 200:  # an ``event: error`` inside a started stream
        retryable = kind in _RETRYABLE_IN_STREAM
    return f"anthropic {status} {kind or 'error'}: {detail or exc.message}", retryable


def _error_body(body: object) -> tuple[str, str]:
    """An error body's kind and message: Anthropic's (and Vertex's) ``{"error": {...}}``, or
    Bedrock's ``{"message": ...}``."""
    if isinstance(body, dict):
        body = cast("dict[str, Any]", body)
        error = body.get("error")
        if isinstance(error, dict):
            error = cast("dict[str, Any]", error)
            return str(error.get("type", "")), str(error.get("message", ""))
        message = body.get("message") or body.get("Message")
        if isinstance(message, str):
            return "", message
    return "", ""


_RETRYABLE_IN_STREAM = frozenset({"overloaded_error", "api_error", "rate_limit_error"})


# The parts of the Messages stream events the mapper reads (unknown fields are ignored).
class _EventUsage(msgspec.Struct):
    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_read_input_tokens: int | None = None
    cache_creation_input_tokens: int | None = None


class _EventMessage(msgspec.Struct):
    usage: _EventUsage | None = None


class _Block(msgspec.Struct):
    type: str = ""
    text: str | None = None
    thinking: str | None = None
    signature: str | None = None
    data: str | None = None
    id: str = ""
    name: str = ""


class _Delta(msgspec.Struct):
    type: str = ""
    text: str = ""
    thinking: str = ""
    partial_json: str = ""
    signature: str = ""
    stop_reason: str | None = None


class _Event(msgspec.Struct):
    type: str = ""
    index: int = 0
    message: _EventMessage | None = None
    content_block: _Block | None = None
    delta: _Delta | None = None
    usage: _EventUsage | None = None


_EVENT = msgspec.json.Decoder(_Event)


def decode_event(event: str | None, data: bytes) -> Any:
    """One SSE event of a Messages stream (as the SDK reads it: unnamed events and ``ping`` are
    skipped, ``error`` fails the stream, ``message_stop`` is the last)."""
    if event is None or event == "ping" or (not data and event != "error"):
        return None
    if event == "error":
        try:
            body: Any = msgspec.json.decode(data)
        except msgspec.DecodeError:
            body = None
        kind, detail = _error_body(body)
        raise ModelProviderError(
            f"anthropic 200 {kind or 'error'}: {detail or data.decode(errors='replace')}",
            retryable=kind in _RETRYABLE_IN_STREAM,
            status=200,
        )
    try:
        decoded = _EVENT.decode(data)
    except msgspec.DecodeError as exc:
        raise ModelProviderError(
            f"anthropic: malformed stream event ({exc})", retryable=False
        ) from None
    return Last(decoded) if decoded.type == "message_stop" else decoded


class _Mapper(Mapper):
    """Feeds raw Messages-API stream events into a builder."""

    def __init__(self, builder: MessageBuilder, info: ModelInfo) -> None:
        super().__init__(builder, info)
        self._blocks: dict[int, int] = {}
        self._stop: str | None = None

    def feed(self, event: Any) -> list[StreamEvent]:
        builder = self._builder
        kind = event.type
        if kind == "message_start":
            self._take_usage(event.message.usage)
            return []
        if kind == "content_block_start":
            block = event.content_block
            if block.type == "text":
                index, opened = builder.open_text()
                out: list[StreamEvent] = [opened]
                if block.text:
                    out.append(builder.delta(index, block.text))
            elif block.type == "thinking":
                index, opened = builder.open_thinking()
                out = [opened]
                if block.thinking:
                    out.append(builder.delta(index, block.thinking))
                if block.signature:
                    builder.set_signature(index, block.signature)
            elif block.type == "redacted_thinking":
                index, opened = builder.open_thinking()
                builder.set_signature(index, block.data, redacted=True)
                out = [opened]
            elif block.type == "tool_use":
                index, opened = builder.open_tool_call(block.id, block.name)
                out = [opened]
            else:
                return []  # server tools and other block kinds are not part of the contract
            self._blocks[event.index] = index
            return out
        if kind == "content_block_delta":
            index = self._blocks.get(event.index)
            if index is None:
                return []
            delta = event.delta
            if delta.type == "text_delta":
                return [builder.delta(index, delta.text)]
            if delta.type == "thinking_delta":
                return [builder.delta(index, delta.thinking)]
            if delta.type == "input_json_delta":
                return [builder.delta(index, delta.partial_json)] if delta.partial_json else []
            if delta.type == "signature_delta":
                builder.set_signature(index, delta.signature)
            return []
        if kind == "content_block_stop":
            index = self._blocks.pop(event.index, None)
            return [] if index is None else [builder.close(index)]
        if kind == "message_delta":
            if event.delta.stop_reason is not None:
                self._stop = event.delta.stop_reason
            self._take_usage(event.usage)
            return []
        if kind == "message_stop":
            return self._end()
        return []

    def _end(self) -> list[StreamEvent]:
        usage = self.priced()
        reason = _STOP_REASONS.get(self._stop or "")
        if reason is None:
            return [
                self._builder.fail("error", f"anthropic stopped with {self._stop!r}", usage=usage)
            ]
        return self._builder.done(reason, usage)  # type: ignore[arg-type]

    def _take_usage(self, usage: Any) -> None:
        if usage is None:
            return
        counts = {
            field: value
            for field, attr in _USAGE_FIELDS
            if isinstance(value := getattr(usage, attr, None), int)
        }
        self.count(**counts)


_USAGE_FIELDS = (
    ("input", "input_tokens"),
    ("output", "output_tokens"),
    ("cache_read", "cache_read_input_tokens"),
    ("cache_write", "cache_creation_input_tokens"),
)


class AnthropicProvider(SdkProvider):
    """A :class:`pico3.models.ModelProvider` backed by ``anthropic.AsyncAnthropic`` (keyword
    arguments: :class:`._core.SdkProvider`)."""

    api = API
    sdk = Sdk(
        package="anthropic", client="AsyncAnthropic", path="/v1/messages", decode=decode_event
    )
    bundled = ANTHROPIC_MODELS
    mapper_type = _Mapper
    unknown = ModelInfo(
        id="",
        provider="",
        api=API,
        context_window=200_000,
        max_output=32_000,
        supports_thinking=True,
        supports_images=True,
    )

    def _wire_memo(self, key: Hashable) -> FoldMemo:
        return wire_memo()

    def _params(self, request: Request, info: ModelInfo, mapper: Mapper) -> dict[str, Any]:
        return build_params(request, info, memo=self._memo())

    def _classify(self, exc: BaseException) -> ModelProviderError | None:
        return classify_error(exc, self._clock)
