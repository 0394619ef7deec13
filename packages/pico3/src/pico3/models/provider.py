"""The provider protocol: what a model backend must look like to the harness.

A *provider* turns a :class:`Request` into one async stream of :data:`StreamEvent` values and
never raises out of that stream. Every stream is ``start``, then any number of block events
(``text_*``, ``thinking_*``, ``toolcall_*``, and ``server_tool`` for a tool the provider ran
itself), then exactly one terminal event:

* :class:`DoneEvent` with ``reason`` ``stop`` | ``length`` | ``toolUse`` and the final
  :class:`AssistantMessage`, or
* :class:`ErrorEvent` with ``reason`` ``error`` | ``aborted``, the partial message (kept for
  display) and the error's classification (``retryable``, ``retry_after``), or
* :class:`DoneEvent` with ``reason`` ``deferred``: the answer is not ready (a batch or
  background job); ``message.deferred`` carries an opaque :class:`Deferred` handle.

Deferred answers (docs/design/turn.md#models): a provider that may defer also implements
:class:`DeferringModelProvider`. The harness persists the handle in the model call's checkpoint and
later calls ``fetch_deferred(model, handle, ctx)``, which answers with a terminal event exactly
as the stream would have ended (a final ``done``, an ``error``, or another ``deferred`` done
with a fresh handle), or ``cancel_deferred`` when the model call is aborted. A provider that
never defers (the app's HTTP adapters, for instance) implements only :class:`ModelProvider`.

The message records here are msgspec Structs whose JSON form *is* the harness's model-message
shape (``role`` = ``user`` | ``assistant`` | ``toolResult`` | ``system``; content blocks tagged
``type`` = ``text`` | ``thinking`` | ``toolCall`` | ``serverTool`` | ``image``; camelCase keys), so
:func:`messages_from_json` and :func:`message_to_json` convert losslessly between a conversation's
stored messages and a request.

Block events carry ``partial``: the provider's *live* partial message at the time of the event.
Copy it (:func:`copy_message`) before keeping it; the provider goes on mutating it. The final
message equals the reduction of the deltas (:func:`pico3.models.stream.reduce_events`).

Why one module: it is the contract itself (the message records, the stream events, the
protocol and the errors every adapter and the harness share); the records and the events that
carry them are one vocabulary, read side by side when an adapter is written, and a split would
only make each reader open several files to see one shape.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any, Literal, Protocol, runtime_checkable

import msgspec

from chord.context import Context

__all__ = [
    "AssistantBlock",
    "AssistantMessage",
    "Citation",
    "Cost",
    "Deferred",
    "DeferringModelProvider",
    "DoneEvent",
    "DoneReason",
    "ErrorEvent",
    "ErrorReason",
    "FetchResult",
    "ImageContent",
    "Message",
    "ModelCost",
    "ModelInfo",
    "ModelProvider",
    "ModelProviderError",
    "Request",
    "ServerToolContent",
    "ServerToolEvent",
    "StartEvent",
    "StopReason",
    "StreamEvent",
    "SystemMessage",
    "TerminalReason",
    "TextContent",
    "TextDeltaEvent",
    "TextEndEvent",
    "TextStartEvent",
    "ThinkingContent",
    "ThinkingDeltaEvent",
    "ThinkingEndEvent",
    "ThinkingLevel",
    "ThinkingStartEvent",
    "Tool",
    "ToolCall",
    "ToolCallDeltaEvent",
    "ToolCallEndEvent",
    "ToolCallStartEvent",
    "ToolResultMessage",
    "Usage",
    "UserMessage",
    "compute_cost",
    "copy_message",
    "estimate_tokens",
    "extend_prefix",
    "message_to_json",
    "messages_from_json",
    "retryable_status",
]

StopReason = Literal["stop", "length", "toolUse", "error", "aborted"]
DoneReason = Literal["stop", "length", "toolUse"]
TerminalReason = Literal["stop", "length", "toolUse", "deferred"]
ErrorReason = Literal["error", "aborted"]
ThinkingLevel = Literal["off", "minimal", "low", "medium", "high", "xhigh"]


class _Record(msgspec.Struct, rename="camel", omit_defaults=True):
    """Base of every record: camelCase on the wire, defaults left out."""


# -- content blocks ----------------------------------------------------------------------------
class Citation(_Record):
    """A web source: what a text block cites, or one result of a provider's own search.

    ``url`` and ``title`` are what a reader sees; ``cited_text`` the passage a citation quotes;
    ``data`` the provider's own record of it (Anthropic's ``web_search_result_location``, an
    OpenAI ``url_citation``), sent back as it was to the API that made it."""

    url: str
    title: str = ""
    cited_text: str = ""
    data: dict[str, Any] | None = None


class TextContent(_Record, tag_field="type", tag="text"):
    """Plain text; ``citations`` are the web sources the provider says it rests on (its own
    web search's answer), kept with the text."""

    text: str
    citations: list[Citation] | None = None


class ThinkingContent(_Record, tag_field="type", tag="thinking"):
    """Model reasoning. ``signature`` lets a provider verify replayed thinking; ``redacted``
    thinking carries its opaque payload in ``signature`` and no readable text."""

    thinking: str
    signature: str | None = None
    redacted: bool = False


class ToolCall(_Record, tag_field="type", tag="toolCall"):
    """A request to run tool ``name`` with JSON ``arguments``; ``id`` pairs it with its result."""

    id: str
    name: str
    arguments: dict[str, Any]


class ImageContent(_Record, tag_field="type", tag="image"):
    """An image as base64 ``data`` with its ``mime_type`` (``mimeType`` on the wire)."""

    data: str
    mime_type: str


class ServerToolContent(_Record, tag_field="type", tag="serverTool"):
    """A tool the provider ran itself while answering (its web search), kept whole.

    ``name`` is the tool (``web_search``), ``input`` what it was asked (``{"query": ...}``),
    ``results`` the sources it found. ``blocks`` are the provider's own blocks for it, as the
    API sent them (Anthropic's ``server_tool_use`` and ``web_search_tool_result``, an OpenAI
    ``web_search_call`` item): the adapter of the message's own API sends them back verbatim on
    the next request (Anthropic requires it); any other API leaves them out. Nothing runs on our
    side: no tool task, no result message."""

    id: str
    name: str
    input: dict[str, Any] = msgspec.field(default_factory=dict)
    results: list[Citation] = msgspec.field(default_factory=list)
    blocks: list[dict[str, Any]] = msgspec.field(default_factory=list)


AssistantBlock = TextContent | ThinkingContent | ToolCall | ServerToolContent


# -- usage and cost ----------------------------------------------------------------------------
class Cost(_Record):
    """Money spent on one response, in dollars, split like :class:`Usage`."""

    input: float = 0.0
    output: float = 0.0
    cache_read: float = 0.0
    cache_write: float = 0.0
    total: float = 0.0


class Usage(_Record):
    """Tokens of one response. ``input`` excludes cache reads and writes."""

    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0
    total_tokens: int = 0
    cost: Cost = msgspec.field(default_factory=Cost)


# -- messages ----------------------------------------------------------------------------------
class UserMessage(_Record, tag_field="role", tag="user"):
    """What the user (or a continuation) said."""

    content: str | list[TextContent | ImageContent]
    timestamp: int = 0


class Deferred(_Record):
    """A handle on an answer that is not ready yet (docs/design/turn.md#models).

    ``handle`` is opaque to the harness but must be strict JSON: it is stored in a checkpoint
    and handed back to :meth:`DeferringModelProvider.fetch_deferred` after any restart.
    ``poll_after_ms`` (``pollAfterMs`` on the wire) is how long to wait before asking; ``None``
    means the harness default (5 s).
    """

    handle: Any
    poll_after_ms: int | None = None


class AssistantMessage(_Record, tag_field="role", tag="assistant"):
    """A model's answer. ``usage`` is ``None`` when the provider reported none (unknown, not 0).

    ``deferred`` is set only on the message of a ``deferred`` done event: the answer itself is
    still to be fetched with that handle.
    """

    content: list[AssistantBlock] = msgspec.field(default_factory=list)
    api: str = ""
    provider: str = ""
    model: str = ""
    usage: Usage | None = None
    stop_reason: StopReason = "stop"
    error_message: str | None = None
    deferred: Deferred | None = None
    timestamp: int = 0


class ToolResultMessage(_Record, tag_field="role", tag="toolResult"):
    """The outcome of one tool call."""

    tool_call_id: str
    tool_name: str
    content: list[TextContent | ImageContent]
    is_error: bool = False
    timestamp: int = 0


class SystemMessage(_Record, tag_field="role", tag="system"):
    """A mid-conversation system note (e.g. a changed section or tool loadout)."""

    content: str
    timestamp: int = 0


Message = UserMessage | AssistantMessage | ToolResultMessage | SystemMessage


def messages_from_json(messages: Sequence[Mapping[str, Any]]) -> list[Message]:
    """Convert stored model messages (plain JSON) to records; unknown keys are ignored.

    Raises :class:`ValueError` naming the offending message and field on bad input.
    """
    try:
        return msgspec.convert(list(messages), list[Message])
    except msgspec.ValidationError as exc:
        raise ValueError(f"invalid model messages: {exc}") from None


def message_to_json(message: Message) -> dict[str, Any]:
    """The harness JSON form of ``message`` (what a conversation stores)."""
    return msgspec.to_builtins(message)


def copy_message(message: AssistantMessage) -> AssistantMessage:
    """A deep copy of ``message`` that shares nothing with the provider's live partial."""
    return msgspec.convert(msgspec.to_builtins(message), AssistantMessage)


# -- requests ----------------------------------------------------------------------------------
class Tool(_Record):
    """A tool offered to the model: ``parameters`` is a JSON Schema object."""

    name: str
    description: str
    parameters: dict[str, Any]


class Request(_Record):
    """One model call request.

    ``system`` holds the rendered system sections in order (adapters join or split them as
    their API likes). ``max_tokens`` of ``None`` means the model's own output limit.
    """

    model: str
    messages: list[Message]
    system: list[str] = msgspec.field(default_factory=list)
    tools: list[Tool] = msgspec.field(default_factory=list)
    thinking_level: ThinkingLevel = "off"
    max_tokens: int | None = None


# -- models ------------------------------------------------------------------------------------
class ModelCost(msgspec.Struct, rename="camel", omit_defaults=True, frozen=True):
    """Dollars per million tokens."""

    input: float = 0.0
    output: float = 0.0
    cache_read: float = 0.0
    cache_write: float = 0.0


class ModelInfo(msgspec.Struct, rename="camel", omit_defaults=True, frozen=True):
    """What the harness needs to know about a model. ``cost`` ``None`` means *unpriced*."""

    id: str
    provider: str
    api: str = ""
    context_window: int = 128_000
    max_output: int = 16_384
    cost: ModelCost | None = None
    supports_thinking: bool = False
    supports_images: bool = False
    supports_web_search: bool = False
    """The provider can search the web for this model itself (a server tool its adapter
    offers in place of the agent's ``web_search``)."""


def compute_cost(usage: Usage, model: ModelInfo) -> Cost:
    """Dollar cost of ``usage`` at ``model``'s prices (all zero when the model is unpriced)."""
    price = model.cost
    if price is None:
        return Cost()
    parts = (
        usage.input * price.input / 1e6,
        usage.output * price.output / 1e6,
        usage.cache_read * price.cache_read / 1e6,
        usage.cache_write * price.cache_write / 1e6,
    )
    return Cost(*parts, total=sum(parts))


def estimate_tokens(messages: Sequence[Message], system: Sequence[str] = ()) -> int:
    """A provider-independent token estimate: characters / 4, rounded up, plus images at 1200."""
    chars = sum(len(section) for section in system)
    images = 0
    for message in messages:
        more, pictures = message_weight(message)
        chars += more
        images += pictures
    return -(-chars // 4) + 1200 * images


def message_weight(message: Message) -> tuple[int, int]:
    """``(characters, images)`` of one message, as :func:`estimate_tokens` counts them."""
    content: Any = message.content
    if isinstance(content, str):
        return len(content), 0
    chars = images = 0
    for block in content:
        if isinstance(block, TextContent):
            chars += len(block.text)
        elif isinstance(block, ThinkingContent):
            chars += len(block.thinking)
        elif isinstance(block, ToolCall):
            chars += len(block.name) + len(msgspec.json.encode(block.arguments))
        elif isinstance(block, ServerToolContent):
            chars += len(msgspec.json.encode(block.blocks))
        else:
            images += 1
    return chars, images


def extend_prefix(seen: list[Any], items: Sequence[Any]) -> bool:
    """Whether ``items`` starts with ``seen``; if it does, ``seen`` is extended to equal it.

    The memos that keep a long conversation's work between requests (:class:`MessageMemo`, the
    offered tools', the hook copies', the adapters' folds) each ask, every request, whether the
    new messages start with the last request's. ``items[: len(seen)] == seen`` answers that by
    copying the whole history first, and a copy touches the reference count of every message,
    scattered over a long session's heap: ~35 µs per 4,000 messages, per memo, per request. Here
    only the new items are appended to ``seen`` and two lists of one length are compared, which
    takes the very same object as equal without touching it (any other is compared by value), so
    a request costs what its new items cost. When ``items`` does not start with ``seen``,
    ``seen`` is left as it was."""
    known = len(seen)
    if len(items) < known:
        return False
    whole = items if type(items) is list else list(items)
    seen.extend(whole[known:])
    if seen == whole:
        return True
    del seen[known:]
    return False


class MessageMemo:
    """A context's model messages split into system sections and request records
    (:func:`messages_from_json`) with their token estimate, remembered from the last call.

    A long conversation's context is re-sent every turn from a transcript cache whose message
    dicts are shared and never changed, so when a call's messages start with the last call's
    (compared by identity first, then by value, in C) only the new ones are converted. Anything
    else converts from scratch, so the result is always that of the call's messages."""

    __slots__ = ("_chars", "_images", "_messages", "_seen", "_system")

    def __init__(self) -> None:
        self._seen: list[Mapping[str, Any]] = []
        self._messages: list[Message] = []
        self._system: list[str] = []
        self._chars = 0
        self._images = 0

    def convert(self, raw: Sequence[Mapping[str, Any]]) -> tuple[list[Message], list[str], int]:
        """``(records, system sections, token estimate)`` of ``raw``: the ``system`` messages'
        non-empty contents, and :func:`messages_from_json` / :func:`estimate_tokens` of the
        others."""
        seen = self._seen
        known = len(seen)
        if not extend_prefix(seen, raw):
            self._seen, self._messages, self._system = [], [], []
            self._chars = self._images = 0
            seen, known = self._seen, 0
            seen.extend(raw)
        fresh = seen[known:]
        history: list[Mapping[str, Any]] = []
        system: list[str] = []
        for message in fresh:
            if message.get("role") != "system":
                history.append(message)
            elif message.get("content"):
                system.append(message.get("content", ""))
        try:
            converted = messages_from_json(history) if history else []
        except BaseException:
            del seen[known:]  # bad input: nothing kept
            raise
        self._system.extend(system)
        for message in converted:
            chars, images = message_weight(message)
            self._chars += chars
            self._images += images
        self._messages.extend(converted)
        tokens = -(-self._chars // 4) + 1200 * self._images
        return list(self._messages), list(self._system), tokens


# -- stream events -----------------------------------------------------------------------------
class _Event(msgspec.Struct, tag_field="type", rename="camel", omit_defaults=True):
    """Base of every stream event."""


class StartEvent(_Event, tag="start"):
    """The stream began; ``partial`` is empty but names api/provider/model."""

    partial: AssistantMessage


class TextStartEvent(_Event, tag="text_start"):
    """A text block opened at ``content_index``."""

    content_index: int
    partial: AssistantMessage


class TextDeltaEvent(_Event, tag="text_delta"):
    """``delta`` was appended to the text block at ``content_index``."""

    content_index: int
    delta: str
    partial: AssistantMessage


class TextEndEvent(_Event, tag="text_end"):
    """The text block at ``content_index`` is complete with ``content``."""

    content_index: int
    content: str
    partial: AssistantMessage


class ThinkingStartEvent(_Event, tag="thinking_start"):
    """A thinking block opened at ``content_index``."""

    content_index: int
    partial: AssistantMessage


class ThinkingDeltaEvent(_Event, tag="thinking_delta"):
    """``delta`` was appended to the thinking block at ``content_index``."""

    content_index: int
    delta: str
    partial: AssistantMessage


class ThinkingEndEvent(_Event, tag="thinking_end"):
    """The thinking block at ``content_index`` is complete (``signature`` when one came)."""

    content_index: int
    content: str
    partial: AssistantMessage
    signature: str | None = None


class ToolCallStartEvent(_Event, tag="toolcall_start"):
    """A tool call ``id``/``name`` opened at ``content_index``."""

    content_index: int
    id: str
    name: str
    partial: AssistantMessage


class ToolCallDeltaEvent(_Event, tag="toolcall_delta"):
    """A raw JSON fragment of the arguments of the call at ``content_index``."""

    content_index: int
    delta: str
    partial: AssistantMessage


class ToolCallEndEvent(_Event, tag="toolcall_end"):
    """The call at ``content_index`` is complete; ``tool_call.arguments`` is parsed."""

    content_index: int
    tool_call: ToolCall
    partial: AssistantMessage


class ServerToolEvent(_Event, tag="server_tool"):
    """The provider ran a tool itself (its web search): ``block``, complete, is at
    ``content_index`` (it has no start or delta events)."""

    content_index: int
    block: ServerToolContent
    partial: AssistantMessage


class DoneEvent(_Event, tag="done"):
    """Terminal success; with ``reason`` ``deferred`` the answer is to be fetched later with
    ``message.deferred`` (and ``message`` has no content)."""

    reason: TerminalReason
    message: AssistantMessage


class ErrorEvent(_Event, tag="error"):
    """Terminal failure; ``error`` is the partial message with ``stop_reason`` = ``reason``."""

    reason: ErrorReason
    error: AssistantMessage
    retryable: bool = False
    retry_after: float | None = None


StreamEvent = (
    StartEvent
    | TextStartEvent
    | TextDeltaEvent
    | TextEndEvent
    | ThinkingStartEvent
    | ThinkingDeltaEvent
    | ThinkingEndEvent
    | ToolCallStartEvent
    | ToolCallDeltaEvent
    | ToolCallEndEvent
    | ServerToolEvent
    | DoneEvent
    | ErrorEvent
)


# -- errors ------------------------------------------------------------------------------------
_RETRYABLE_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504, 529})


def retryable_status(status: int) -> bool:
    """True for HTTP statuses worth retrying: timeouts, conflicts, rate limits, 5xx, overload."""
    return status in _RETRYABLE_STATUS or 500 <= status < 600


class ModelProviderError(Exception):
    """A classified provider failure.

    ``retryable`` says whether trying the same request again may succeed; ``retry_after`` is the
    server's requested wait in seconds (``None`` when it named none); ``status`` the HTTP status
    when there was one.
    """

    def __init__(
        self,
        message: str,
        *,
        retryable: bool,
        retry_after: float | None = None,
        status: int | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.retryable = retryable
        self.retry_after = retry_after
        self.status = status

    def __repr__(self) -> str:
        return (
            f"ModelProviderError({self.message!r}, retryable={self.retryable}, "
            f"retry_after={self.retry_after}, status={self.status})"
        )


# -- the protocol ------------------------------------------------------------------------------
@runtime_checkable
class ModelProvider(Protocol):
    """A model backend.

    ``stream`` returns an async iterator that yields ``start`` first and exactly one terminal
    event last, never raises (failures become :class:`ErrorEvent`), and ends with ``aborted``
    promptly once ``ctx`` is cancelled. Closing the iterator early releases the connection.
    """

    @property
    def name(self) -> str:
        """The provider's name, the ``provider`` part of ``provider/model``."""
        ...

    def models(self) -> Sequence[ModelInfo]:
        """The models this provider knows (others may still work with default metadata)."""
        ...

    def model(self, model_id: str) -> ModelInfo:
        """Metadata for ``model_id``: a known model's, or defaults (unpriced) for another id."""
        ...

    def stream(self, request: Request, ctx: Context) -> AsyncIterator[StreamEvent]:
        """Stream the answer to ``request``."""
        ...


FetchResult = DoneEvent | ErrorEvent
"""What :meth:`DeferringModelProvider.fetch_deferred` answers: a terminal event."""


@runtime_checkable
class DeferringModelProvider(ModelProvider, Protocol):
    """A provider that may end a stream with a ``deferred`` done (a batch or background job).

    ``fetch_deferred`` asks for the answer behind ``handle`` and returns the terminal event the
    stream would have ended with: ``done`` (``stop`` | ``length`` | ``toolUse``) with the final
    message, ``error`` with its classification, or ``done`` ``deferred`` with a new handle when
    the answer is still not ready. It raises :class:`ModelProviderError` (or any exception, treated as
    retryable) when asking failed; the harness then retries the whole request under its retry
    policy. ``cancel_deferred`` gives up on ``handle`` (best effort: the harness ignores its
    failures) and must be a no-op for unknown handles. ``model`` is the model id of the request.
    """

    async def fetch_deferred(self, model: str, handle: Any, ctx: Context) -> FetchResult:
        """The terminal event of the answer behind ``handle``."""
        ...

    async def cancel_deferred(self, model: str, handle: Any, ctx: Context) -> None:
        """Abandon the answer behind ``handle``."""
        ...
