"""OpenAI adapter: Chat Completions, streamed, through the official ``openai`` SDK.

Chat Completions is the API every OpenAI-compatible server speaks (Ollama, llama.cpp's
``llama-server``, vLLM, LM Studio), so one adapter serves them all; point ``base_url`` at the
server and pick an :class:`OpenAICompat` profile for what it supports.

Streaming maps like this:

* ``delta.content`` -> one text block (``text_start`` on the first fragment);
* ``delta.reasoning_content`` / ``delta.reasoning`` (local servers' thinking) -> a thinking block;
* ``delta.tool_calls[i]`` keyed by ``index``: the first fragment carries ``id`` and
  ``function.name`` (``toolcall_start``), later ones append ``function.arguments``
  (``toolcall_delta``); the JSON is parsed when the stream finishes (``toolcall_end``);
* ``finish_reason`` ``stop`` / ``length`` / ``tool_calls`` -> ``stop`` / ``length`` / ``toolUse``;
* usage arrives in a last chunk with no choices (``stream_options.include_usage``); cached
  prompt tokens are reported as ``cache_read`` and subtracted from ``input``.

Tool calling is ``native`` (the ``tools`` parameter) or ``text`` per model
(:mod:`~coding_agent.worker.providers.text_tools`): no ``tools`` parameter, a system section
that teaches a fenced ``tool_call`` convention, a transcript rendered as text, and
``delta.content`` parsed back into real tool calls. The mode comes from
:attr:`OpenAICompat.tool_calling` and the per-model ``tool_calling`` map; and when a server
refuses a request because it has tools (a 400, 404 or 422 saying tools are unsupported, such as
Ollama's "does not support tools"; see :func:`rejects_tools`), the same request is sent again at
once in text mode and the model stays in text mode for the provider's lifetime (the session).

This module is the wire mapping only (request building, event mapping, error mapping); the SDK
client, the streaming loop, retries with ``Retry-After``, cancellation, usage pricing and the
message memo are the shared core's (:mod:`._core`).

Why one module: it is one provider's adapter: request building, the wire records of the stream, the
stream-to-contract mapper and error classification all encode the same API's shapes and the same
compatibility profile (:class:`OpenAICompat`). Splitting would put halves of one wire format in
different files.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any, Unpack, cast

import msgspec

from coding_agent.settings.model_config import (
    LOCAL_COMPAT,
    OPENAI_COMPAT,
    OpenAICompat,
    ToolCalling,
)
from coding_agent.worker.providers._core import (
    ENCODER,
    NO_ENDPOINT_STATUSES,
    Mapper,
    ProviderOptions,
    Sdk,
    SdkProvider,
    classify_stainless,
    request_url,
    thinking_setting,
)
from coding_agent.worker.providers._drive import SdkStream
from coding_agent.worker.providers._memo import FoldMemo, JoinedChunks
from coding_agent.worker.providers._sse import Last
from coding_agent.worker.providers.text_tools import (
    ParsedCall,
    TextToolParser,
    render_history,
    render_tools_prompt,
    text_call_id,
)
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
    TextContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    retryable_status,
)

__all__ = [
    "OPENAI_MODELS",
    "REASONING_EFFORT",
    "OpenAIProvider",
    "build_params",
    "classify_error",
    "rejects_tools",
]

API = "openai-completions"

_log = logging.getLogger("coding_agent.worker.providers.openai")


OPENAI_MODELS: tuple[ModelInfo, ...] = (
    ModelInfo(
        id="gpt-4.1",
        provider="openai",
        api=API,
        context_window=1_047_576,
        max_output=32_768,
        cost=ModelCost(input=2, output=8, cache_read=0.5),
        supports_images=True,
    ),
    ModelInfo(
        id="gpt-4o",
        provider="openai",
        api=API,
        context_window=128_000,
        max_output=16_384,
        cost=ModelCost(input=2.5, output=10, cache_read=1.25),
        supports_images=True,
    ),
    ModelInfo(
        id="gpt-5",
        provider="openai",
        api=API,
        context_window=400_000,
        max_output=128_000,
        cost=ModelCost(input=1.25, output=10, cache_read=0.125),
        supports_thinking=True,
        supports_images=True,
    ),
)
"""Bundled metadata (dollars per million tokens, list prices as last known; override them in the
registry config). The first entry is the default model."""

REASONING_EFFORT = {
    "minimal": "minimal",
    "low": "low",
    "medium": "medium",
    "high": "high",
    "xhigh": "high",  # not every model has xhigh: degrade to high
}
"""``reasoning_effort`` per thinking level."""

_FINISH = {"stop": "stop", "length": "length", "tool_calls": "toolUse", "function_call": "toolUse"}


# The parts of a ``chat.completion.chunk`` the mapper reads (unknown fields are ignored).
class _Function(msgspec.Struct):
    name: str | None = None
    arguments: str | None = None


class _ToolCallDelta(msgspec.Struct):
    index: int = 0
    id: str | None = None
    function: _Function | None = None


class _Delta(msgspec.Struct):
    content: str | None = None
    reasoning_content: Any = None
    reasoning: Any = None
    tool_calls: list[_ToolCallDelta] | None = None


class _Choice(msgspec.Struct):
    delta: _Delta | None = None
    finish_reason: str | None = None


class _PromptDetails(msgspec.Struct):
    cached_tokens: int | None = None


class _Usage(msgspec.Struct):
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    prompt_tokens_details: _PromptDetails | None = None


class _Chunk(msgspec.Struct):
    id: str | None = None
    choices: list[_Choice] | None = None
    usage: _Usage | None = None
    error: Any = None


_CHUNK = msgspec.json.Decoder(_Chunk)


def _decode_chunk(event: str | None, data: bytes) -> Any:
    """One SSE event of a Chat Completions stream: a chunk, ``[DONE]`` ends the stream, an
    ``error`` object fails it (as the SDK's stream does)."""
    if data.startswith(b"[DONE]"):
        return Last(None)
    try:
        chunk = _CHUNK.decode(data)
    except msgspec.DecodeError as exc:
        raise ModelProviderError(
            f"openai: malformed stream chunk ({exc})", retryable=False
        ) from None
    if chunk.error:
        error = chunk.error
        message = error.get("message") if isinstance(error, dict) else None
        if not isinstance(message, str) or not message:
            message = "An error occurred during streaming"
        raise ModelProviderError(f"openai: {message}", retryable=False)
    return chunk


def build_params(
    request: Request,
    info: ModelInfo,
    compat: OpenAICompat,
    *,
    tool_calling: ToolCalling = "native",
    memo: FoldMemo | None = None,
) -> dict[str, Any]:
    """The keyword arguments of ``chat.completions.create`` for ``request`` (streaming).

    With ``tool_calling="text"`` no ``tools`` parameter is sent: the tools are described in a
    last system section and the history is rendered as text (see
    :mod:`~coding_agent.worker.providers.text_tools`). With ``memo`` the messages come
    JSON-encoded (see :mod:`._memo`): for the request body, not for reading."""
    text_tools = tool_calling == "text"
    system = list(request.system)
    history: Sequence[Message] = request.messages
    if text_tools:
        if request.tools:
            system.append(render_tools_prompt(request.tools))
        history = render_history(request.messages, images=info.supports_images)
    messages: list[dict[str, Any]] = []
    if system:
        role = "developer" if compat.developer_role else "system"
        messages.append({"role": role, "content": "\n\n".join(system)})
    messages.extend(_messages(history, images=info.supports_images, memo=memo))
    params: dict[str, Any] = {
        "model": request.model,
        "messages": messages,
        "stream": True,
        compat.max_tokens_field: request.max_tokens or info.max_output,
    }
    if compat.usage_in_streaming:
        params["stream_options"] = {"include_usage": True}
    if request.tools and not text_tools:
        params["tools"] = [
            {
                "type": "function",
                "function": {
                    "name": t.name,
                    "description": t.description,
                    "parameters": t.parameters,
                },
            }
            for t in request.tools
        ]
    if request.thinking_level != "off" and info.supports_thinking and compat.reasoning_effort:
        effort = thinking_setting(REASONING_EFFORT, request.thinking_level)
        params["reasoning_effort"] = effort
    return params


def _messages(
    messages: Sequence[Message], *, images: bool = True, memo: FoldMemo | None = None
) -> list[Any]:
    """Chat Completions messages. A ``tool`` message carries text only, so the images of a run
    of tool results follow it as one user message (when the model takes images). With ``memo``
    (made by :func:`wire_memo` for the same ``images``) they come JSON-encoded
    (:class:`msgspec.Raw`), each record converted once (see :mod:`._memo`)."""
    if memo is not None:
        return memo.render(messages)
    fold = _Fold(images, encode=False)
    for message in messages:
        fold.feed(message)
    return fold.render()


def wire_memo(images: bool) -> FoldMemo:
    """A memo of encoded request messages for :func:`build_params` (models taking images or
    not)."""
    return FoldMemo(lambda: _Fold(images, encode=True))


class _Fold:
    """:func:`_messages` as a left fold (see :class:`._memo.Fold`).

    Encoding, every message is final once fed (a run of tool results' images follow it as a
    message of their own, added when the run ends), so :meth:`render` joins the encoded messages
    into a few buffers (comma-separated, :class:`._memo.JoinedChunks`) and hands them over as
    :class:`msgspec.Raw` values, which msgspec writes verbatim, so the array comes out as if each
    message were its own element: the body's encoding is one copy of the history rather than a
    walk over thousands of small objects scattered over the heap."""

    __slots__ = ("_encode", "_images", "_out", "_pictures", "_prefix")

    def __init__(self, images: bool, *, encode: bool) -> None:
        self._images = images
        self._encode = encode
        self._out: list[Any] = []  # encoding: the encoded messages not yet in ``_prefix``
        self._prefix = JoinedChunks()  # encoding: the messages rendered so far
        self._pictures: list[dict[str, Any]] = []  # tool-result images awaiting their message

    def feed(self, message: Message) -> None:
        if self._pictures and not isinstance(message, ToolResultMessage):
            picture = _tool_images(self._pictures)
            self._out.append(ENCODER.encode(picture) if self._encode else picture)
            self._pictures = []
        items, found = _message_items(message, self._images)
        if self._encode:
            self._out.extend(ENCODER.encode(item) for item in items)
        else:
            self._out.extend(items)
        self._pictures.extend(found)

    def render(self) -> list[Any]:
        out: list[Any] = list(self._out)
        if self._encode:
            self._prefix.extend(out)
            self._out = []
            out = self._prefix.raws()
        if self._pictures:
            out.append(_tool_images(self._pictures))
        return out


def _message_items(
    message: Message, images: bool
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The Chat Completions messages of one record and the images it defers to the next
    user message."""
    if isinstance(message, UserMessage):
        if isinstance(message.content, str):
            return [{"role": "user", "content": message.content}], []
        return [{"role": "user", "content": [_part(b) for b in message.content]}], []
    if isinstance(message, AssistantMessage):
        text = "".join(b.text for b in message.content if isinstance(b, TextContent))
        calls = [
            {
                "id": b.id,
                "type": "function",
                "function": {
                    "name": b.name,
                    "arguments": msgspec.json.encode(b.arguments).decode(),
                },
            }
            for b in message.content
            if isinstance(b, ToolCall)
        ]
        if not text and not calls:
            return [], []
        entry: dict[str, Any] = {"role": "assistant", "content": text or None}
        if calls:
            entry["tool_calls"] = calls
        return [entry], []
    if isinstance(message, ToolResultMessage):
        text = "\n".join(b.text for b in message.content if isinstance(b, TextContent))
        found = [_part(b) for b in message.content if isinstance(b, ImageContent)]
        pictures: list[dict[str, Any]] = []
        if found and images:
            pictures = found
            text += f"\n({len(found)} image(s) attached in the next message)"
        elif found:
            text += "\n(image output omitted: this model takes no images)"
        return [{"role": "tool", "tool_call_id": message.tool_call_id, "content": text}], pictures
    return [{"role": "system", "content": message.content}], []


def _tool_images(parts: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "role": "user",
        "content": [{"type": "text", "text": "Images from the tool results above:"}, *parts],
    }


def _part(block: TextContent | ImageContent) -> dict[str, Any]:
    if isinstance(block, TextContent):
        return {"type": "text", "text": block.text}
    url = f"data:{block.mime_type};base64,{block.data}"
    return {"type": "image_url", "image_url": {"url": url}}


def classify_error(
    exc: BaseException, clock: Callable[[], float] = time.time
) -> ModelProviderError | None:
    """A :class:`ModelProviderError` for an ``openai`` SDK exception (``None`` for others)."""
    return classify_stainless(exc, "openai", _status_error, clock)


def _status_error(exc: Any) -> tuple[str, bool]:
    """An ``openai.APIStatusError``'s message and whether it is worth retrying."""
    status = exc.status_code
    detail = _detail(exc.body) or exc.message
    if status in NO_ENDPOINT_STATUSES:  # a wrong base URL or model: say where, what to check
        return (
            f"openai {status} from {request_url(exc)}: {detail} — nothing answers there: "
            "check the base URL "
            "(OPENAI_BASE_URL or providers.openai.base_url; an OpenAI-compatible server's "
            "usually ends in /v1) and the model id",
            False,
        )
    return f"openai {status}: {detail}", retryable_status(status)


_TOOL_REFUSAL_STATUS = frozenset({400, 404, 422})
_TOOL_WORDS = ("tool", "function")
_REFUSAL_WORDS = (
    "support",
    "require",
    "enable",
    "not allowed",
    "not permitted",
    "unknown",
    "unrecognized",
    "extra",
)
_OTHER_PROBLEMS = ("schema", "context", "token")


def rejects_tools(exc: BaseException) -> bool:
    """True when ``exc`` is a server refusing a request because it has ``tools`` at all.

    That is a 400, 404 or 422 whose message mentions tools or functions *and* says they are
    unsupported, need enabling or are not accepted (Ollama: "... does not support tools";
    vLLM: '"auto" tool choice requires --enable-auto-tool-choice'; llama.cpp: "tools param
    requires --jinja flag"). A bad tool schema or a context overflow that merely mentions
    functions is a different problem and does not count."""
    if "openai" not in sys.modules:
        return False
    import openai

    if not isinstance(exc, openai.APIStatusError) or exc.status_code not in _TOOL_REFUSAL_STATUS:
        return False
    message = f"{_detail(exc.body)} {exc.message}".lower()
    return (
        any(word in message for word in _TOOL_WORDS)
        and any(word in message for word in _REFUSAL_WORDS)
        and not any(word in message for word in _OTHER_PROBLEMS)
    )


def _detail(body: object) -> str:
    if isinstance(body, dict):
        body = cast("dict[str, Any]", body)
        error = body.get("error", body)
        if isinstance(error, dict):
            return str(cast("dict[str, Any]", error).get("message", ""))
        if isinstance(error, str):
            return error
    return ""


class _Mapper(Mapper):
    """Feeds Chat Completions chunks into a builder."""

    def __init__(self, builder: MessageBuilder, info: ModelInfo) -> None:
        super().__init__(builder, info)
        self._text: int | None = None
        self._thinking: int | None = None
        self._calls: dict[int, int] = {}
        self._finish: str | None = None
        self.text_tools = False
        """Parse fenced ``tool_call`` blocks out of the text (set before the first chunk)."""
        self._parser: TextToolParser | None = None
        self._text_calls = 0
        self._completion_id = ""

    def feed(self, chunk: Any) -> list[StreamEvent]:
        if chunk.__class__ is _Chunk and self._text is not None and not self.text_tools:
            # Nearly every chunk of an answer: one choice whose delta only extends the open
            # text block (what the general path below does for it, without its look-ups).
            choices = chunk.choices
            if chunk.usage is None and self._completion_id and choices and len(choices) == 1:
                choice = choices[0]
                delta = choice.delta
                if (
                    choice.finish_reason is None
                    and delta is not None
                    and delta.content
                    and delta.tool_calls is None
                    and not delta.reasoning_content
                    and not delta.reasoning
                ):
                    return [self._builder.delta(self._text, delta.content)]
        builder = self._builder
        out: list[StreamEvent] = []
        usage = getattr(chunk, "usage", None)
        if usage is not None:
            self._take_usage(usage)
        if not self._completion_id:
            self._completion_id = str(getattr(chunk, "id", None) or "")
        for choice in chunk.choices or ():
            delta = choice.delta
            if delta is not None:
                reasoning = getattr(delta, "reasoning_content", None) or getattr(
                    delta, "reasoning", None
                )
                if isinstance(reasoning, str) and reasoning:
                    if self._thinking is None:
                        self._thinking, opened = builder.open_thinking()
                        out.append(opened)
                    out.append(builder.delta(self._thinking, reasoning))
                if delta.content:
                    if self.text_tools:
                        out.extend(self._pieces(self._text_parser().feed(delta.content)))
                    else:
                        out.extend(self._append_text(delta.content))
                for call in delta.tool_calls or ():
                    out.extend(self._tool_fragment(call))
            if choice.finish_reason is not None:
                self._finish = choice.finish_reason
        return out

    def _tool_fragment(self, call: Any) -> list[StreamEvent]:
        builder = self._builder
        out: list[StreamEvent] = []
        index = self._calls.get(call.index)
        function = call.function
        if index is None:
            call_id = call.id or f"call_{call.index}"
            name = (function.name if function is not None else None) or ""
            index, opened = builder.open_tool_call(call_id, name)
            self._calls[call.index] = index
            out.append(opened)
        if function is not None and function.arguments:
            out.append(builder.delta(index, function.arguments))
        return out

    def _append_text(self, text: str) -> list[StreamEvent]:
        out: list[StreamEvent] = []
        if self._text is None:
            self._text, opened = self._builder.open_text()
            out.append(opened)
        out.append(self._builder.delta(self._text, text))
        return out

    def _text_parser(self) -> TextToolParser:
        if self._parser is None:
            self._parser = TextToolParser()
        return self._parser

    def _pieces(self, pieces: list[str | ParsedCall]) -> list[StreamEvent]:
        """Events for the parser's output: text extends the text block, a call is a whole
        tool call (start, arguments, end) after the text block before it is closed."""
        builder = self._builder
        out: list[StreamEvent] = []
        for piece in pieces:
            if isinstance(piece, str):
                out.extend(self._append_text(piece))
                continue
            if self._text is not None:
                out.append(builder.close(self._text))
                self._text = None  # text after the call is a new block
            seed = f"{self._completion_id}|{builder.message.timestamp}"
            call_id = text_call_id(seed, self._text_calls)
            self._text_calls += 1
            index, opened = builder.open_tool_call(call_id, piece.name)
            out.append(opened)
            out.append(builder.delta(index, msgspec.json.encode(piece.arguments).decode()))
            out.append(builder.close(index))
        return out

    def ending(self) -> bool:
        return self._finish is not None  # a finish_reason came: only the usage is to come

    def finish(self) -> list[StreamEvent]:
        builder = self._builder
        out: list[StreamEvent] = []
        if self._parser is not None:
            out.extend(self._pieces(self._parser.finish()))  # what was held back
        usage = builder.message.usage
        if self._finish is None:
            out.append(
                builder.fail(
                    "error", "the stream ended without a finish reason", retryable=True, usage=usage
                )
            )
            return out
        reason = _FINISH.get(self._finish)
        if reason is None:
            out.append(builder.fail("error", f"openai stopped with {self._finish!r}", usage=usage))
            return out
        if reason == "stop" and self._text_calls:
            reason = "toolUse"  # the server saw text; the harness must run the calls
        return out + builder.done(reason, usage)  # type: ignore[arg-type]

    def _take_usage(self, raw: Any) -> None:
        prompt = raw.prompt_tokens or 0
        details = getattr(raw, "prompt_tokens_details", None)
        cached = (getattr(details, "cached_tokens", None) or 0) if details is not None else 0
        self.count(input=prompt - cached, output=raw.completion_tokens or 0, cache_read=cached)


class OpenAIProvider(SdkProvider):
    """A :class:`pico3.models.ModelProvider` backed by ``openai.AsyncOpenAI`` Chat Completions
    (keyword arguments: :class:`._core.SdkProvider`'s, and these).

    ``compat`` is what the server supports (:data:`OPENAI_COMPAT` by default,
    :data:`LOCAL_COMPAT` with a ``base_url``). ``tool_calling`` maps model ids to their
    tool-calling mode; other models use ``compat.tool_calling``. A model the server refused
    tools for switches to ``text`` by itself (:meth:`tool_calling` tells the current mode)."""

    api = API
    sdk = Sdk(
        package="openai",
        client="AsyncOpenAI",
        path="/chat/completions",
        decode=_decode_chunk,
        options={"security": {"bearer_auth": True}},
    )
    bundled = OPENAI_MODELS
    mapper_type = _Mapper

    def __init__(
        self,
        *,
        compat: OpenAICompat | None = None,
        tool_calling: Mapping[str, ToolCalling] | None = None,
        **options: Unpack[ProviderOptions],
    ) -> None:
        super().__init__(**options)
        local = options.get("base_url") is not None
        self.compat = compat or (LOCAL_COMPAT if local else OPENAI_COMPAT)
        self._tool_calling: dict[str, ToolCalling] = dict(tool_calling or {})
        self.on_text_fallback: Callable[[str], None] | None = None
        """Called with the model id when a model refused native tools and switched to text
        (the worker tells its clients)."""

    def tool_calling(self, model_id: str) -> ToolCalling:
        """How ``model_id`` calls tools now: ``native`` or ``text``."""
        return self._tool_calling.get(model_id, self.compat.tool_calling)

    def set_tool_calling(self, model_id: str, mode: ToolCalling) -> None:
        """Use ``mode`` for ``model_id`` from the next request on."""
        if mode not in ("native", "text"):
            raise ValueError(f"tool calling must be 'native' or 'text', got {mode!r}")
        self._tool_calling[model_id] = mode

    def _wire_memo(self, key: Hashable) -> FoldMemo:
        return wire_memo(bool(key))  # by "the model takes images"

    def _classify(self, exc: BaseException) -> ModelProviderError | None:
        return classify_error(exc, self._clock)

    def _params(self, request: Request, info: ModelInfo, mapper: Mapper) -> dict[str, Any]:
        """The body in the model's current tool-calling mode (the mapper learns the mode
        before any chunk arrives)."""
        return self._params_in(request, info, mapper, self.tool_calling(request.model))

    def _params_in(
        self, request: Request, info: ModelInfo, mapper: Mapper, mode: ToolCalling
    ) -> dict[str, Any]:
        memo = self._memo(info.supports_images)
        params = build_params(request, info, self.compat, tool_calling=mode, memo=memo)
        cast("_Mapper", mapper).text_tools = mode == "text"
        return params

    async def _open(self, request: Request, info: ModelInfo, mapper: Mapper) -> SdkStream:
        """Send ``request``; when the server refuses its tools (:func:`rejects_tools`), send it
        again at once in text mode, which the model keeps from then on."""
        if self.tool_calling(request.model) == "text" or not request.tools:
            return await super()._open(request, info, mapper)
        try:
            return await self._post(
                ENCODER.encode(self._params_in(request, info, mapper, "native"))
            )
        except Exception as exc:
            if not rejects_tools(exc):
                raise
            detail = exc
        _log.warning(
            "%s/%s refused native tool calling (%s); using text tool calls from now on",
            self.name,
            request.model,
            detail,
        )
        self.set_tool_calling(request.model, "text")
        if self.on_text_fallback is not None:
            self.on_text_fallback(request.model)
        return await super()._open(request, info, mapper)
