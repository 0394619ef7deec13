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

**Web search.** Where the model has it (``ModelInfo.supports_web_search``) and
``[providers.anthropic] web_search`` is not ``false``, a request that offers the agent's web
tools (``web_fetch``, ``web_search``: the conversation may use the web) offers Anthropic's own
web search (``web_search_20250305``, :data:`WEB_SEARCH_TOOL`) as the tool ``web_search``, in
place of the agent's backend tool of that name when one is configured. Anthropic runs it while it
answers: a ``server_tool_use`` block (the query) and a ``web_search_tool_result`` block (the
results) become one :class:`~pico3.models.ServerToolContent` (``results``: title and URL of
each; ``blocks``: both blocks as they came), and the ``citations`` of the text blocks that
follow (``citations_delta``) become the text's :class:`~pico3.models.Citation` list. Both are
part of the stored message and go back verbatim on the next request, as Anthropic requires.

This module is the wire mapping only (request building, event mapping, error mapping); the SDK
client, the streaming loop, retries with ``Retry-After``, cancellation, usage pricing and the
message memo are the shared core's (:mod:`._core`). Thinking levels become ``budget_tokens``
(:data:`THINKING_BUDGETS`), and the last system section and the last user message carry
``cache_control`` so prompts are cached.

Why one module: it is one API's wire mapping in both directions; a block kind (a server
tool's, a citation) is read from the stream and written back into the next request by code that
must agree on its shape, so each reader and its writer sit here together.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable, Sequence
from typing import Any, cast

import msgspec

from coding_agent.worker.providers._core import (
    ENCODER,
    NO_ENDPOINT_STATUSES,
    Mapper,
    Sdk,
    SearchingProvider,
    classify_stainless,
    request_url,
    thinking_setting,
)
from coding_agent.worker.providers._memo import FoldMemo, JoinedChunks
from coding_agent.worker.providers._sse import Last
from pico3.models import (
    AssistantMessage,
    Citation,
    ImageContent,
    Message,
    MessageBuilder,
    ModelCost,
    ModelInfo,
    ModelProviderError,
    Request,
    ServerToolContent,
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
    "WEB_SEARCH_TOOL",
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
        supports_web_search=True,
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
        supports_web_search=True,
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
        supports_web_search=True,
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

WEB_SEARCH_TOOL: dict[str, Any] = {
    "type": "web_search_20250305",
    "name": "web_search",
    "max_uses": 5,
}
"""Anthropic's web search server tool as a request offers it (at most 5 searches an answer)."""

_WEB_TOOLS = frozenset({"web_search", "web_fetch"})
"""A request that offers one of these may search: a conversation without the web tools (a
subagent limited to ``read`` and ``grep``) is not given the provider's search either."""

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
    request: Request,
    info: ModelInfo,
    *,
    memo: FoldMemo | None = None,
    web_search: bool = True,
) -> dict[str, Any]:
    """The keyword arguments of ``messages.create`` for ``request`` (always streaming). With
    ``memo`` the messages come JSON-encoded (see :mod:`._memo`): for the request body, not for
    reading. ``web_search``: offer Anthropic's own search when the model has it (module
    docstring)."""
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
        search = (
            web_search
            and info.supports_web_search
            and any(t.name in _WEB_TOOLS for t in request.tools)  # the web is allowed here
        )
        params["tools"] = [
            {"name": t.name, "description": t.description, "input_schema": t.parameters}
            for t in request.tools
            if not (search and t.name == WEB_SEARCH_TOOL["name"])
        ]
        if search:
            params["tools"].append(dict(WEB_SEARCH_TOOL))
    if request.thinking_level != "off" and info.supports_thinking:
        budget = thinking_setting(THINKING_BUDGETS, request.thinking_level)
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
            blocks: list[dict[str, Any]] = []
            for block in message.content:
                if isinstance(block, ServerToolContent):  # its own blocks, as they came
                    blocks.extend(block.blocks if signed else ())
                elif (sent := _assistant_block(block, signed)) is not None:
                    blocks.append(sent)
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
    last user one never change again: their encodings are joined into a few buffers
    (``_prefix``, comma-separated, :class:`._memo.JoinedChunks`) as they fall behind it, and
    :meth:`render` hands them over as :class:`msgspec.Raw` values, which msgspec writes
    verbatim, so the array comes out as if each message were its own element. The body's encoding is then one copy of the history
    rather than a walk over thousands of small objects scattered over the heap (~0.4 ms at
    turn 2,000, which was most of what a late turn costs more than an early one)."""

    __slots__ = ("_assistant", "_groups", "_items", "_joined", "_merging", "_prefix")

    def __init__(self) -> None:
        self._groups: list[list[Message]] = []
        self._assistant: list[bool] = []  # per group: an assistant message
        self._prefix = JoinedChunks()  # the encoded groups before ``_joined``
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
        out: list[Any] = self._prefix.raws()
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
        self._prefix.extend(moved)
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
        if not block.text:
            return None
        cited = [c.data for c in block.citations or () if c.data] if signed else []
        return {"type": "text", "text": block.text, **({"citations": cited} if cited else {})}
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
    if status in NO_ENDPOINT_STATUSES:  # a wrong base URL or model: say where, what to check
        return (
            f"anthropic {status} {kind or 'error'} from {request_url(exc)}: "
            f"{detail or exc.message} — check the base URL (ANTHROPIC_BASE_URL or "
            "providers.anthropic.base_url: the server's root, without /v1) and the model id",
            False,  # no endpoint there: asking again cannot help
        )
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
    tool_use_id: str = ""
    content: Any = None  # a web_search_tool_result's results (or its error), kept as sent


class _Delta(msgspec.Struct):
    type: str = ""
    text: str = ""
    thinking: str = ""
    partial_json: str = ""
    signature: str = ""
    stop_reason: str | None = None
    citation: Any = None  # a citations_delta's citation, kept as sent


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
        self._searches: dict[int, tuple[_Block, list[str]]] = {}  # server_tool_use by index
        self._asked: dict[str, tuple[_Block, dict[str, Any]]] = {}  # … by id, input parsed

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
            elif block.type == "server_tool_use":  # its input arrives as JSON deltas
                self._searches[event.index] = (block, [])
                return []
            elif block.type == "web_search_tool_result":
                return self._search_result(block)
            else:
                return []  # other block kinds are not part of the contract
            self._blocks[event.index] = index
            return out
        if kind == "content_block_delta":
            index = self._blocks.get(event.index)
            delta = event.delta
            if index is None:
                search = self._searches.get(event.index)
                if search is not None and delta.type == "input_json_delta":
                    search[1].append(delta.partial_json)
                return []
            if delta.type == "citations_delta" and isinstance(delta.citation, dict):
                builder.cite(index, _citation(cast("dict[str, Any]", delta.citation)))
                return []
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
            search = self._searches.pop(event.index, None)
            if search is not None:
                block, parts = search
                raw = "".join(parts)
                try:
                    asked: Any = msgspec.json.decode(raw) if raw.strip() else {}
                except msgspec.DecodeError:
                    asked = {}
                self._asked[block.id] = (block, asked if isinstance(asked, dict) else {})
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

    def _search_result(self, result: _Block) -> list[StreamEvent]:
        """A ``web_search_tool_result`` (complete in its start event) with the
        ``server_tool_use`` it answers: one server tool block, both kept as they came."""
        used, asked = self._asked.pop(result.tool_use_id, (None, {}))
        found = result.content if isinstance(result.content, list) else []
        results = [
            Citation(url=str(item["url"]), title=str(item.get("title") or ""))
            for item in cast("list[Any]", found)
            if isinstance(item, dict) and isinstance(item.get("url"), str)  # pyright: ignore[reportUnknownMemberType]
        ]
        blocks: list[dict[str, Any]] = []
        if used is not None:
            blocks.append(
                {"type": "server_tool_use", "id": used.id, "name": used.name, "input": asked}
            )
        blocks.append(
            {"type": "web_search_tool_result", "tool_use_id": result.tool_use_id,
             "content": result.content}
        )  # fmt: skip
        block = ServerToolContent(
            id=result.tool_use_id,
            name=used.name if used is not None else WEB_SEARCH_TOOL["name"],
            input=asked,
            results=results,
            blocks=blocks,
        )
        return [self._builder.server_tool(block)]

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


def _citation(data: dict[str, Any]) -> Citation:
    """A text block's citation (``web_search_result_location``), kept whole in ``data``."""
    return Citation(
        url=str(data.get("url") or ""),
        title=str(data.get("title") or ""),
        cited_text=str(data.get("cited_text") or ""),
        data=data,
    )


_USAGE_FIELDS = (
    ("input", "input_tokens"),
    ("output", "output_tokens"),
    ("cache_read", "cache_read_input_tokens"),
    ("cache_write", "cache_creation_input_tokens"),
)


class AnthropicProvider(SearchingProvider):
    """A :class:`pico3.models.ModelProvider` backed by ``anthropic.AsyncAnthropic`` (keyword
    arguments: :class:`._core.SearchingProvider`; ``web_search`` offers Anthropic's own web
    search tool where the model has it: module docstring)."""

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
        return build_params(request, info, memo=self._memo(), web_search=self.web_search)

    def _classify(self, exc: BaseException) -> ModelProviderError | None:
        return classify_error(exc, self._clock)
