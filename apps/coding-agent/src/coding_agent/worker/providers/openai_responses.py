"""OpenAI Responses adapter: ``POST /responses``, streamed, through the official ``openai`` SDK.

The Responses API is the one OpenAI's reasoning and Codex models are meant for: a turn's output
is a list of *items* (``reasoning``, ``message``, ``function_call``), and the reasoning items
are carried into the next request so the model keeps its chain of thought across tool calls.
Requests are stateless (``store: false``, as Codex sends them): nothing is kept on OpenAI's
side, and the reasoning comes back encrypted (``include: ["reasoning.encrypted_content"]``) to
be replayed verbatim.

Where the reasoning is kept: a reasoning item becomes a thinking block whose text is the
item's summary (what the TUI shows as thinking) and whose ``signature`` is the item's
``encrypted_content``, the field the Anthropic adapter uses for its thinking signatures. The
block is part of the assistant message, so it is stored in the session and a resumed session
replays it. Only blocks of this API are replayed as reasoning (another provider's signature
means nothing here; its thinking is left out).

Streaming maps like this (``output_index`` keys the blocks):

==============================================  ==========================================
``response.output_item.added`` reasoning /      ``thinking_start`` / ``text_start`` /
message / function_call                         ``toolcall_start`` (``call_id``, ``name``)
``response.reasoning_summary_text.delta``       ``thinking_delta`` (summary parts joined by
(and ``response.reasoning_text.delta``)         a blank line)
``response.output_text.delta`` (and refusals)   ``text_delta``
``response.function_call_arguments.delta``      ``toolcall_delta``
``response.output_item.done``                   ``*_end``; a reasoning item's encrypted
                                                content becomes the block's signature
``response.completed``                          ``done`` (``toolUse`` when a function was
                                                called), usage: input, cached input, output
``response.incomplete`` / ``response.failed``   ``length`` / the error; ``error`` events too
==============================================  ==========================================

**Web search.** Where the model has it (``ModelInfo.supports_web_search``) and
``[providers.openai-responses] web_search`` is not ``false``, a request that offers the agent's
web tools (``web_fetch``, ``web_search``) offers OpenAI's own ``{"type": "web_search"}`` tool in
place of the agent's ``web_search``. A ``web_search_call`` item becomes a
:class:`~pico3.models.ServerToolContent` (the query, the sources when OpenAI lists them, the item
itself in ``blocks``) and is sent back as it came in the next request's input; the answer's
``url_citation`` annotations (``response.output_text.annotation.added``) become the text's
:class:`~pico3.models.Citation` list, kept in the message (the text itself is sent back as
plain assistant text, as before).

Images are ``input_image`` parts (data URLs) in user messages and in tool results (a
``function_call_output`` may carry text and images). OpenAI caches prompts by itself; cached
input tokens are reported as ``cache_read``. Status errors, retries with ``Retry-After`` and
connection errors are the ``openai`` SDK's, classified as the Chat Completions adapter does.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

import msgspec

from coding_agent.worker.providers._core import (
    ENCODER,
    Mapper,
    Sdk,
    SearchingProvider,
    thinking_setting,
)
from coding_agent.worker.providers._memo import FoldMemo, JoinedChunks
from coding_agent.worker.providers._sse import Last
from coding_agent.worker.providers.openai import REASONING_EFFORT, classify_error
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
    ToolCall,
    ToolResultMessage,
    UserMessage,
)

__all__ = ["API", "RESPONSES_MODELS", "WEB_SEARCH_TOOL", "OpenAIResponsesProvider", "build_params"]

API = "openai-responses"

RESPONSES_MODELS: tuple[ModelInfo, ...] = (
    ModelInfo(
        id="gpt-5",
        provider="openai-responses",
        api=API,
        context_window=400_000,
        max_output=128_000,
        cost=ModelCost(input=1.25, output=10, cache_read=0.125),
        supports_thinking=True,
        supports_images=True,
        supports_web_search=True,
    ),
    ModelInfo(
        id="gpt-5-codex",
        provider="openai-responses",
        api=API,
        context_window=400_000,
        max_output=128_000,
        cost=ModelCost(input=1.25, output=10, cache_read=0.125),
        supports_thinking=True,
        supports_images=True,
    ),
    ModelInfo(
        id="gpt-5-mini",
        provider="openai-responses",
        api=API,
        context_window=400_000,
        max_output=128_000,
        cost=ModelCost(input=0.25, output=2, cache_read=0.025),
        supports_thinking=True,
        supports_images=True,
        supports_web_search=True,
    ),
    ModelInfo(
        id="gpt-4.1",
        provider="openai-responses",
        api=API,
        context_window=1_047_576,
        max_output=32_768,
        cost=ModelCost(input=2, output=8, cache_read=0.5),
        supports_images=True,
        supports_web_search=True,
    ),
)
"""Bundled metadata (dollars per million tokens, list prices as last known; override them with
``[[models]]``). The first entry is the default model."""

WEB_SEARCH_TOOL: dict[str, Any] = {"type": "web_search"}
"""OpenAI's own web search tool as a request offers it."""

_WEB_TOOLS = frozenset({"web_search", "web_fetch"})
"""A request that offers one of these may search (the conversation may use the web)."""

_RETRYABLE_CODES = frozenset({"server_error", "rate_limit_exceeded", "server_is_overloaded"})


def build_params(
    request: Request, info: ModelInfo, *, memo: FoldMemo | None = None, web_search: bool = True
) -> dict[str, Any]:
    """The JSON body of ``POST /responses`` for ``request`` (streaming, stateless). With
    ``memo`` the input items come JSON-encoded (see :mod:`._memo`); ``web_search``: offer
    OpenAI's own search where the model has it (module docstring)."""
    params: dict[str, Any] = {
        "model": request.model,
        "input": _input(request.messages) if memo is None else memo.render(request.messages),
        "stream": True,
        "store": False,
        "max_output_tokens": request.max_tokens or info.max_output,
    }
    if request.system:
        params["instructions"] = "\n\n".join(request.system)
    if request.tools:
        search = (
            web_search
            and info.supports_web_search
            and any(t.name in _WEB_TOOLS for t in request.tools)
        )
        params["tools"] = [
            {
                "type": "function",
                "name": t.name,
                "description": t.description,
                "parameters": t.parameters,
                "strict": False,
            }
            for t in request.tools
            if not (search and t.name == "web_search")
        ]
        if search:
            params["tools"].append(dict(WEB_SEARCH_TOOL))
    if info.supports_thinking:
        params["include"] = ["reasoning.encrypted_content"]
        if request.thinking_level != "off":
            effort = thinking_setting(REASONING_EFFORT, request.thinking_level)
            params["reasoning"] = {"effort": effort, "summary": "auto"}
    return params


def _input(messages: Sequence[Message]) -> list[dict[str, Any]]:
    return [item for message in messages for item in _items(message)]


def _items(message: Message) -> list[dict[str, Any]]:
    """The input items of one record."""
    if isinstance(message, UserMessage):
        if isinstance(message.content, str):
            return [{"role": "user", "content": message.content}]
        return [{"role": "user", "content": [_part(b) for b in message.content]}]
    if isinstance(message, AssistantMessage):
        return _assistant_items(message)
    if isinstance(message, ToolResultMessage):
        output: Any
        if any(isinstance(b, ImageContent) for b in message.content):
            output = [_part(b) for b in message.content]
        else:
            output = "\n".join(b.text for b in message.content if isinstance(b, TextContent))
        return [{"type": "function_call_output", "call_id": message.tool_call_id, "output": output}]
    if isinstance(message, SystemMessage):
        return [{"role": "developer", "content": message.content}]
    return []


def _assistant_items(message: AssistantMessage) -> list[dict[str, Any]]:
    """An answer's items in order: reasoning (this API's only, replayed with its encrypted
    content), text as an assistant message, function calls."""
    out: list[dict[str, Any]] = []
    ours = message.api == API
    for block in message.content:
        if isinstance(block, ThinkingContent):
            if ours and block.signature:
                summary = (
                    [{"type": "summary_text", "text": block.thinking}] if block.thinking else []
                )
                out.append(
                    {"type": "reasoning", "summary": summary, "encrypted_content": block.signature}
                )
        elif isinstance(block, TextContent):
            if block.text:
                out.append({"role": "assistant", "content": block.text})
        elif isinstance(block, ToolCall):
            out.append(_call_item(block))
        elif ours:  # this API's own web search: its items as they came
            out.extend(block.blocks)
        # another API's server tool blocks mean nothing here: left out
    return out


def _call_item(call: ToolCall) -> dict[str, Any]:
    return {
        "type": "function_call",
        "call_id": call.id,
        "name": call.name,
        "arguments": msgspec.json.encode(call.arguments).decode(),
    }


def _part(block: TextContent | ImageContent) -> dict[str, Any]:
    if isinstance(block, TextContent):
        return {"type": "input_text", "text": block.text}
    url = f"data:{block.mime_type};base64,{block.data}"
    return {"type": "input_image", "image_url": url, "detail": "auto"}


class _Fold:
    """:func:`_input` as a left fold (see :class:`._memo.Fold`): every record's items are final
    once fed, so they are encoded then and joined into a few buffers
    (:class:`._memo.JoinedChunks`) handed over as :class:`msgspec.Raw` values."""

    __slots__ = ("_out", "_prefix")

    def __init__(self) -> None:
        self._out: list[bytes] = []
        self._prefix = JoinedChunks()

    def feed(self, message: Message) -> None:
        self._out.extend(ENCODER.encode(item) for item in _items(message))

    def render(self) -> list[Any]:
        self._prefix.extend(self._out)
        self._out = []
        return self._prefix.raws()


# The parts of the Responses stream events the mapper reads (unknown fields are ignored).
class _Item(msgspec.Struct):
    type: str = ""
    id: str | None = None
    call_id: str | None = None
    name: str | None = None
    arguments: str | None = None
    encrypted_content: str | None = None
    status: str | None = None
    action: Any = None  # a web_search_call's action (query, sources), kept as sent
    content: Any = None  # a message's parts (their annotations are its citations)


class _InputDetails(msgspec.Struct):
    cached_tokens: int | None = None


class _Usage(msgspec.Struct):
    input_tokens: int | None = None
    output_tokens: int | None = None
    input_tokens_details: _InputDetails | None = None


class _Incomplete(msgspec.Struct):
    reason: str | None = None


class _Error(msgspec.Struct):
    code: str | None = None
    message: str | None = None


class _Response(msgspec.Struct):
    status: str | None = None
    usage: _Usage | None = None
    incomplete_details: _Incomplete | None = None
    error: _Error | None = None


class _Event(msgspec.Struct):
    type: str = ""
    output_index: int = 0
    summary_index: int = 0
    delta: str = ""
    item: _Item | None = None
    annotation: Any = None  # response.output_text.annotation.added
    response: _Response | None = None
    code: str | None = None
    message: str | None = None


_EVENT = msgspec.json.Decoder(_Event)
_LAST = frozenset({"response.completed", "response.incomplete", "response.failed"})


def _decode_event(event: str | None, data: bytes) -> Any:
    """One SSE event of a Responses stream: ``error`` fails the stream, ``response.completed``
    (or ``incomplete``/``failed``) is the last."""
    if not data or data.startswith(b"[DONE]"):
        return None
    try:
        decoded = _EVENT.decode(data)
    except msgspec.DecodeError as exc:
        raise ModelProviderError(
            f"openai: malformed stream event ({exc})", retryable=False
        ) from None
    if decoded.type == "error" or event == "error":
        code = decoded.code or "error"
        raise ModelProviderError(
            f"openai 200 {code}: {decoded.message or data.decode(errors='replace')}",
            retryable=code in _RETRYABLE_CODES,
            status=200,
        )
    return Last(decoded) if decoded.type in _LAST else decoded


class _Mapper(Mapper):
    """Feeds Responses stream events into a builder."""

    def __init__(self, builder: MessageBuilder, info: ModelInfo) -> None:
        super().__init__(builder, info)
        self._blocks: dict[int, int] = {}  # output_index -> content index
        self._streamed: set[int] = set()  # output indexes whose arguments came as deltas
        self._called = False
        self._cited: set[int] = set()  # output indexes whose citations came as events

    def feed(self, event: Any) -> list[StreamEvent]:
        builder = self._builder
        kind = event.type
        if kind == "response.output_item.done" and _is_search(event.item):
            return [builder.server_tool(_search_block(event.item))]
        if kind == "response.output_text.annotation.added":
            index = self._blocks.get(event.output_index)
            if index is not None and _is_url_citation(event.annotation):
                self._cited.add(event.output_index)
                builder.cite(index, _citation(event.annotation))
            return []
        if kind == "response.output_item.added":
            item = event.item
            if item.type == "reasoning":
                index, opened = builder.open_thinking()
            elif item.type == "message":
                index, opened = builder.open_text()
            elif item.type == "function_call":
                self._called = True
                index, opened = builder.open_tool_call(
                    item.call_id or item.id or "", item.name or ""
                )
            else:
                return []  # server tools and other item kinds are not part of the contract
            self._blocks[event.output_index] = index
            return [opened]
        index = self._blocks.get(event.output_index)
        if kind in _DELTAS:
            if index is None or not event.delta:
                return []
            if kind == "response.function_call_arguments.delta":
                self._streamed.add(event.output_index)
            return [builder.delta(index, event.delta)]
        if kind == "response.reasoning_summary_part.added":
            if index is None or event.summary_index == 0:
                return []
            return [builder.delta(index, "\n\n")]
        if kind == "response.output_item.done":
            if index is None:
                return []
            del self._blocks[event.output_index]
            streamed = event.output_index in self._streamed
            item = event.item
            out: list[StreamEvent] = []
            if item.type == "reasoning" and item.encrypted_content:
                builder.set_signature(index, item.encrypted_content)
            elif item.type == "message" and event.output_index not in self._cited:
                for annotation in _annotations(item.content):  # not streamed as events
                    builder.cite(index, _citation(annotation))
            elif item.type == "function_call" and item.arguments and not streamed:
                out.append(builder.delta(index, item.arguments))
            out.append(builder.close(index))
            return out
        if kind in _LAST:
            return self._end(event.response)
        return []

    def _end(self, response: _Response | None) -> list[StreamEvent]:
        builder = self._builder
        if response is not None and response.usage is not None:
            usage = response.usage
            details = usage.input_tokens_details
            cached = (details.cached_tokens or 0) if details is not None else 0
            self.count(
                input=(usage.input_tokens or 0) - cached,
                output=usage.output_tokens or 0,
                cache_read=cached,
            )
        priced = self.priced()
        status = response.status if response is not None else None
        if status == "completed":
            return builder.done("toolUse" if self._called else "stop", priced)
        if status == "incomplete":
            details = response.incomplete_details if response is not None else None
            reason = details.reason if details is not None else None
            if reason == "max_output_tokens":
                return builder.done("length", priced)
            return [builder.fail("error", f"openai: response incomplete ({reason})", usage=priced)]
        error = response.error if response is not None else None
        code = (error.code if error is not None else None) or "error"
        message = (error.message if error is not None else None) or f"response {status}"
        return [
            builder.fail(
                "error",
                f"openai 200 {code}: {message}",
                retryable=code in _RETRYABLE_CODES,
                usage=priced,
            )
        ]


def _is_search(item: _Item | None) -> bool:
    return item is not None and item.type == "web_search_call"


def _is_url_citation(annotation: Any) -> bool:
    return (
        isinstance(annotation, dict)
        and annotation.get("type") == "url_citation"  # pyright: ignore[reportUnknownMemberType]
        and isinstance(annotation.get("url"), str)  # pyright: ignore[reportUnknownMemberType]
    )


def _citation(annotation: dict[str, Any]) -> Citation:
    """A ``url_citation`` annotation, kept whole in ``data``."""
    return Citation(
        url=str(annotation["url"]), title=str(annotation.get("title") or ""), data=annotation
    )


def _annotations(content: Any) -> list[dict[str, Any]]:
    """The ``url_citation`` annotations of a done message item's parts."""
    found: list[dict[str, Any]] = []
    for part in content if isinstance(content, list) else []:  # pyright: ignore[reportUnknownVariableType]
        notes = part.get("annotations") if isinstance(part, dict) else None  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
        found += [n for n in notes if _is_url_citation(n)] if isinstance(notes, list) else []  # pyright: ignore[reportUnknownVariableType]
    return found


def _search_block(item: _Item) -> ServerToolContent:
    """A done ``web_search_call`` item: its query and sources, the item kept as it came."""
    action: dict[str, Any] = item.action if isinstance(item.action, dict) else {}  # pyright: ignore[reportUnknownVariableType]
    query = action.get("query")
    sources = action.get("sources")
    results = [
        Citation(url=str(s["url"]), title=str(s.get("title") or ""))
        for s in (sources if isinstance(sources, list) else [])  # pyright: ignore[reportUnknownVariableType]
        if isinstance(s, dict) and isinstance(s.get("url"), str)  # pyright: ignore[reportUnknownMemberType]
    ]
    raw: dict[str, Any] = {"type": "web_search_call", "id": item.id or ""}
    if item.status is not None:
        raw["status"] = item.status
    if item.action is not None:
        raw["action"] = item.action
    return ServerToolContent(
        id=item.id or "",
        name="web_search",
        input={"query": query} if isinstance(query, str) else {},
        results=results,
        blocks=[raw],
    )


_DELTAS = frozenset(
    {
        "response.output_text.delta",
        "response.refusal.delta",
        "response.reasoning_summary_text.delta",
        "response.reasoning_text.delta",
        "response.function_call_arguments.delta",
    }
)


class OpenAIResponsesProvider(SearchingProvider):
    """A :class:`pico3.models.ModelProvider` for the Responses API backed by ``openai.AsyncOpenAI``
    (keyword arguments: :class:`._core.SearchingProvider`; ``web_search`` offers OpenAI's own web
    search tool where the model has it: module docstring)."""

    api = API
    sdk = Sdk(
        package="openai",
        client="AsyncOpenAI",
        path="/responses",
        decode=_decode_event,
        options={"security": {"bearer_auth": True}},
    )
    bundled = RESPONSES_MODELS
    default_name = "openai-responses"
    mapper_type = _Mapper
    unknown = ModelInfo(
        id="",
        provider="",
        api=API,
        context_window=400_000,
        max_output=128_000,
        supports_thinking=True,
        supports_images=True,
    )

    def _wire_memo(self, key: Hashable) -> FoldMemo:
        return FoldMemo(_Fold)

    def _params(self, request: Request, info: ModelInfo, mapper: Mapper) -> dict[str, Any]:
        return build_params(request, info, memo=self._memo(), web_search=self.web_search)

    def _classify(self, exc: BaseException) -> ModelProviderError | None:
        return classify_error(exc, self._clock)
