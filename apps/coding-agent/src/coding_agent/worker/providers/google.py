"""Google adapter: Gemini through the official ``google-genai`` SDK, streamed.

Unlike the Stainless SDKs, ``google-genai`` offers no raw streamed POST, so this adapter opens a
stream with ``client.aio.models.generate_content_stream`` (the request as plain dicts, automatic
function calling off: the harness runs the tools) and maps the SDK's response chunks; the core
still owns retries (the SDK's own are off by default), ``Retry-After``, cancellation, pricing
and the message memo. The SDK (about a second of imports) is imported at the first request.

Request: ``system_instruction`` from the system sections, ``contents`` with roles ``user`` and
``model`` (images as ``inline_data``; tool results as ``function_response`` parts, their images
following as ``inline_data``), the tools as ``function_declarations`` with their JSON schemas
(``parameters_json_schema``), and ``thinking_config`` (``include_thoughts`` and a token budget
per thinking level) for models that think.

Stream mapping (``candidates[0].content.parts``):

* a part with ``thought: true`` -> thinking (Gemini's thought summaries);
* a text part -> text; a ``function_call`` part -> a whole tool call (Gemini sends its
  arguments at once; it sends no call ids, so one is made up);
* ``thought_signature`` (opaque bytes Gemini requires back on the part that carried it when the
  conversation continues, strictly so for function calls) -> kept base64-encoded as a thinking
  block's ``signature``: on a thought part, that block's own; on any other part, a thinking
  block with no text placed just before the part it belongs to, given back to the next part
  (or as an empty text part when none follows). Only this API's signatures are replayed;
  another provider's thinking is left out;
* ``finish_reason`` ``STOP`` / ``MAX_TOKENS`` -> ``stop`` (``toolUse`` when a function was
  called) / ``length``; a blocked answer (``SAFETY``, ``RECITATION``...) -> an error naming it;
* ``usage_metadata``: prompt tokens (less the cached ones) as input, candidates plus thoughts as
  output, cached content as ``cache_read`` (Gemini caches long prompts implicitly).

**Web search (Google Search grounding).** Gemini 2.x does not take its built-in ``google_search``
tool together with function declarations, and every agent request declares functions. So, as
Gemini CLI's ``google_web_search`` does, the agent's ``web_search`` tool runs the search: for a
model that has it (``ModelInfo.supports_web_search``) and unless ``[providers.google]
web_search = false``, :meth:`GoogleProvider.search_web` makes a separate ``generate_content``
request through the same client with only ``tools=[{"google_search": {}}]`` and the query, and
returns the grounded answer with its sources (:mod:`coding_agent.worker.provider_search`). A
request keeps the provider-only ``web_search`` function (no backend configured) only then.
"""

from __future__ import annotations

import base64
import itertools
import sys
import time
from collections.abc import AsyncIterator, Callable, Hashable, Sequence
from typing import Any

import msgspec

from coding_agent.worker.provider_search import GroundedAnswer, SearchFailed, grounded_text
from coding_agent.worker.providers._core import (
    Mapper,
    Sdk,
    SearchingProvider,
    connection_error,
    thinking_setting,
)
from coding_agent.worker.providers._drive import SdkStream
from coding_agent.worker.providers._memo import FoldMemo
from coding_agent.worker.providers.anthropic import THINKING_BUDGETS
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
    ToolCall,
    ToolResultMessage,
    UserMessage,
    parse_retry_after,
    retryable_status,
)

__all__ = ["API", "GOOGLE_MODELS", "GoogleProvider", "build_params", "classify_error"]

API = "google-generative-ai"

GOOGLE_MODELS: tuple[ModelInfo, ...] = (
    ModelInfo(
        id="gemini-2.5-pro",
        provider="google",
        api=API,
        context_window=1_048_576,
        max_output=65_536,
        cost=ModelCost(input=1.25, output=10, cache_read=0.31),
        supports_thinking=True,
        supports_images=True,
        supports_web_search=True,
    ),
    ModelInfo(
        id="gemini-2.5-flash",
        provider="google",
        api=API,
        context_window=1_048_576,
        max_output=65_536,
        cost=ModelCost(input=0.3, output=2.5, cache_read=0.075),
        supports_thinking=True,
        supports_images=True,
        supports_web_search=True,
    ),
)
"""Bundled metadata (dollars per million tokens, prompts up to 200k tokens, list prices as last
known; override them with ``[[models]]``). The first entry is the default model."""

_STOP = {"STOP": "stop", "MAX_TOKENS": "length"}
_call_ids = itertools.count()


def build_params(
    request: Request, info: ModelInfo, *, memo: FoldMemo | None = None
) -> dict[str, Any]:
    """The keyword arguments of ``generate_content_stream`` for ``request`` (``model``,
    ``contents`` and ``config``, as the SDK's dicts)."""
    config: dict[str, Any] = {
        "max_output_tokens": request.max_tokens or info.max_output,
        "automatic_function_calling": {"disable": True},
    }
    if request.system:
        config["system_instruction"] = "\n\n".join(request.system)
    if request.tools:
        config["tools"] = [
            {
                "function_declarations": [
                    {
                        "name": t.name,
                        "description": t.description,
                        "parameters_json_schema": t.parameters,
                    }
                    for t in request.tools
                ]
            }
        ]
    if request.thinking_level != "off" and info.supports_thinking:
        budget = thinking_setting(THINKING_BUDGETS, request.thinking_level)
        config["thinking_config"] = {"include_thoughts": True, "thinking_budget": budget}
    contents = _contents(request.messages) if memo is None else memo.render(request.messages)
    return {"model": request.model, "contents": contents, "config": config}


def _contents(messages: Sequence[Message]) -> list[dict[str, Any]]:
    fold = _Fold()
    for message in messages:
        fold.feed(message)
    return fold.render()


class _Fold:
    """The conversion as a left fold (see :class:`._memo.Fold`): a run of tool results shares
    one ``user`` content, so only the last content can still grow."""

    __slots__ = ("_merging", "_out")

    def __init__(self) -> None:
        self._out: list[dict[str, Any]] = []
        self._merging = False

    def feed(self, message: Message) -> None:
        if isinstance(message, ToolResultMessage):
            parts = _result_parts(message)
            if self._merging:
                self._out[-1]["parts"].extend(parts)
            else:
                self._out.append({"role": "user", "parts": parts})
            self._merging = True
            return
        if isinstance(message, AssistantMessage):
            parts = _model_parts(message)
            if not parts:
                return  # nothing to send: a run of tool results continues across it
            self._out.append({"role": "model", "parts": parts})
        elif isinstance(message, UserMessage):
            content = message.content
            parts = [{"text": content}] if isinstance(content, str) else [_part(b) for b in content]
            self._out.append({"role": "user", "parts": parts})
        elif isinstance(message, SystemMessage):
            self._out.append({"role": "user", "parts": [{"text": message.content}]})
        self._merging = False

    def render(self) -> list[Any]:
        return list(self._out)


def _part(block: TextContent | ImageContent) -> dict[str, Any]:
    if isinstance(block, TextContent):
        return {"text": block.text}
    data = base64.b64decode(block.data)
    return {"inline_data": {"mime_type": block.mime_type, "data": data}}


def _result_parts(message: ToolResultMessage) -> list[dict[str, Any]]:
    text = "\n".join(b.text for b in message.content if isinstance(b, TextContent))
    key = "error" if message.is_error else "output"
    response = {"name": message.tool_name, "response": {key: text}}
    images = [_part(b) for b in message.content if isinstance(b, ImageContent)]
    return [{"function_response": response}, *images]


def _model_parts(message: AssistantMessage) -> list[dict[str, Any]]:
    """A model turn's parts; this API's thought signatures go back where they came from."""
    ours = message.api == API
    out: list[dict[str, Any]] = []
    pending: bytes | None = None  # a signature for the next part
    for block in message.content:
        if isinstance(block, ThinkingContent):
            if not ours:
                continue
            signature = base64.b64decode(block.signature) if block.signature else None
            if block.thinking:
                part: dict[str, Any] = {"text": block.thinking, "thought": True}
                if signature:
                    part["thought_signature"] = signature
                out.append(part)
            elif signature:
                if pending is not None:
                    out.append({"text": "", "thought_signature": pending})
                pending = signature
            continue
        if isinstance(block, TextContent):
            if not block.text and pending is None:
                continue
            part = {"text": block.text}
        elif isinstance(block, ToolCall):
            part = {"function_call": {"name": block.name, "args": block.arguments}}
        else:  # a server tool's blocks (another API's web search) mean nothing here
            continue
        if pending is not None:
            part["thought_signature"] = pending
            pending = None
        out.append(part)
    if pending is not None:
        out.append({"text": "", "thought_signature": pending})
    return out


def classify_error(
    exc: BaseException, clock: Callable[[], float] = time.time
) -> ModelProviderError | None:
    """A :class:`ModelProviderError` for a ``google-genai`` (or its ``httpx``) exception."""
    errors = sys.modules.get("google.genai.errors")
    error: Any = exc
    if errors is not None and isinstance(exc, errors.APIError):
        code = int(error.code or 0)
        response = getattr(error, "response", None)
        headers = getattr(response, "headers", None)
        return ModelProviderError(
            f"google {code} {error.status or 'error'}: {error.message or exc}",
            retryable=retryable_status(code),
            retry_after=parse_retry_after(dict(headers), clock) if headers else None,
            status=code or None,
        )
    httpx = sys.modules.get("httpx")
    if httpx is not None and isinstance(exc, httpx.TimeoutException):
        return ModelProviderError("google: request timed out", retryable=True)
    if httpx is not None and isinstance(exc, httpx.TransportError):
        return connection_error("google", exc)
    return None


class _ChunkStream:
    """A ``generate_content_stream`` iterator as an ``SdkStream`` (a chunk per batch); the
    first chunk was read when the stream was opened, so that opening fails (and is retried)
    on a status error."""

    def __init__(self, first: Any, rest: AsyncIterator[Any]) -> None:
        self._first = first
        self._rest = rest

    async def batches(self) -> AsyncIterator[list[Any]]:
        if self._first is not None:
            first, self._first = self._first, None
            yield [first]
        async for chunk in self._rest:
            yield [chunk]

    async def close(self) -> None:
        aclose = getattr(self._rest, "aclose", None)
        if aclose is not None:
            await aclose()


class _Mapper(Mapper):
    """Feeds ``GenerateContentResponse`` chunks into a builder."""

    def __init__(self, builder: MessageBuilder, info: ModelInfo) -> None:
        super().__init__(builder, info)
        self._open: tuple[str, int] | None = None  # ("text" | "thinking", index)
        self._finish: str | None = None
        self._blocked: str | None = None
        self._called = False

    def feed(self, chunk: Any) -> list[StreamEvent]:
        usage = getattr(chunk, "usage_metadata", None)
        if usage is not None:
            cached = usage.cached_content_token_count or 0
            self.count(
                input=(usage.prompt_token_count or 0) - cached,
                output=(usage.candidates_token_count or 0) + (usage.thoughts_token_count or 0),
                cache_read=cached,
            )
        feedback = getattr(chunk, "prompt_feedback", None)
        if feedback is not None and feedback.block_reason is not None:
            self._blocked = _name(feedback.block_reason)
        out: list[StreamEvent] = []
        for candidate in (chunk.candidates or ())[:1]:
            content = candidate.content
            for part in (content.parts if content is not None else None) or ():
                out.extend(self._part(part))
            if candidate.finish_reason is not None:
                self._finish = _name(candidate.finish_reason)
        return out

    def _part(self, part: Any) -> list[StreamEvent]:
        builder = self._builder
        out: list[StreamEvent] = []
        signature = part.thought_signature
        encoded = base64.b64encode(signature).decode() if signature else None
        if part.thought and part.text is not None:
            index = self._block("thinking", out)
            if part.text:
                out.append(builder.delta(index, part.text))
            if encoded:
                builder.set_signature(index, encoded)
            return out
        if encoded:  # the signature of the part that follows
            self._close(out)
            index, opened = builder.open_thinking()
            builder.set_signature(index, encoded)
            out += [opened, builder.close(index)]
        call = part.function_call
        if call is not None:
            self._close(out)
            self._called = True
            call_id = call.id or f"call_{next(_call_ids)}_{builder.message.timestamp}"
            index, opened = builder.open_tool_call(call_id, call.name or "")
            out.append(opened)
            out.append(builder.delta(index, msgspec.json.encode(call.args or {}).decode()))
            out.append(builder.close(index))
        elif part.text:
            index = self._block("text", out)
            out.append(builder.delta(index, part.text))
        return out

    def _block(self, kind: str, out: list[StreamEvent]) -> int:
        """The open block of ``kind`` (the other kind is closed, a new one opened)."""
        if self._open is not None and self._open[0] == kind:
            return self._open[1]
        self._close(out)
        builder = self._builder
        index, opened = builder.open_text() if kind == "text" else builder.open_thinking()
        out.append(opened)
        self._open = (kind, index)
        return index

    def _close(self, out: list[StreamEvent]) -> None:
        if self._open is not None:
            out.append(self._builder.close(self._open[1]))
            self._open = None

    def finish(self) -> list[StreamEvent]:
        builder = self._builder
        usage = builder.message.usage
        reason = _STOP.get(self._finish or "")
        if reason is None:
            if self._finish is None and self._blocked is None:
                return [
                    builder.fail(
                        "error", "google: the stream ended without a finish reason",
                        retryable=True, usage=usage,
                    )
                ]  # fmt: skip
            why = self._blocked or self._finish
            return [builder.fail("error", f"google: the answer was blocked ({why})", usage=usage)]
        if reason == "stop" and self._called:
            reason = "toolUse"
        return builder.done(reason, usage)  # type: ignore[arg-type]


def _search_error(error: ModelProviderError) -> str:
    """One line for a failed search: the API's message, with what to do for the usual cases."""
    message = " ".join(str(error).split())
    if len(message) > 300:
        message = message[:299] + "…"
    if error.status == 429:
        return f"Google Search quota or rate limit reached: {message}; wait and retry"
    if error.status in (400, 401, 403) and "key" in message.lower():
        return (
            f"Google Search refused the API key: {message}; check GEMINI_API_KEY "
            "(or GOOGLE_API_KEY, providers.google.api_key)"
        )
    return f"Google Search failed: {message}"


def _name(value: Any) -> str:
    """An SDK enum's name (``FinishReason.STOP`` -> ``STOP``), or the string itself."""
    return str(getattr(value, "name", None) or value)


class GoogleProvider(SearchingProvider):
    """A :class:`pico3.models.ModelProvider` for Gemini backed by ``google.genai.Client`` (keyword
    arguments: :class:`._core.SearchingProvider`; ``web_search`` runs the ``web_search`` tool as
    a Google Search grounded request where the model has it: module docstring)."""

    api = API
    sdk = Sdk(package="google.genai", client="Client", path="", decode=lambda _e, _d: None)
    bundled = GOOGLE_MODELS
    default_name = "google"
    mapper_type = _Mapper
    unknown = ModelInfo(
        id="",
        provider="",
        api=API,
        context_window=1_048_576,
        max_output=65_536,
        supports_thinking=True,
        supports_images=True,
    )

    async def search_web(self, query: str, info: ModelInfo) -> GroundedAnswer:
        """One ``generate_content`` request with only the ``google_search`` tool and ``query``
        (no function declarations: Gemini 2.x refuses the two together); the answer with its
        numbered sources (:func:`~coding_agent.worker.provider_search.grounded_text`), or
        :class:`~coding_agent.worker.provider_search.SearchFailed` with one line naming why."""
        client: Any = self._client
        try:
            response = await client.aio.models.generate_content(
                model=info.id,
                contents=[{"role": "user", "parts": [{"text": query}]}],
                config={"tools": [{"google_search": {}}]},
            )
        except Exception as exc:
            error = self._classify(exc)
            if error is None:
                raise
            raise SearchFailed(_search_error(error)) from None
        candidates = response.candidates or ()
        candidate = candidates[0] if candidates else None
        content = candidate.content if candidate is not None else None
        parts = (content.parts if content is not None else None) or ()
        text = "".join(p.text for p in parts if p.text and not p.thought)
        if not text.strip():
            reason = _name(candidate.finish_reason) if candidate is not None else None
            feedback = getattr(response, "prompt_feedback", None)
            blocked = feedback.block_reason if feedback is not None else None
            why = _name(blocked) if blocked is not None else reason or "no candidate"
            raise SearchFailed(f"Google Search (gemini {info.id}) gave no answer ({why})")
        metadata = candidate.grounding_metadata if candidate is not None else None
        return grounded_text(text, metadata)

    def _client_keywords(self) -> dict[str, Any]:
        options = self._client_options
        http: dict[str, Any] = {"timeout": int(options["timeout"] * 1000)}
        if options["base_url"]:
            http["base_url"] = options["base_url"]
        return {"api_key": options["api_key"], "http_options": http}

    def _wire_memo(self, key: Hashable) -> FoldMemo:
        return FoldMemo(_Fold)

    def _params(self, request: Request, info: ModelInfo, mapper: Mapper) -> dict[str, Any]:
        return build_params(request, info, memo=self._memo())

    def _classify(self, exc: BaseException) -> ModelProviderError | None:
        return classify_error(exc, self._clock)

    async def _open(self, request: Request, info: ModelInfo, mapper: Mapper) -> SdkStream:
        params = self._params(request, info, mapper)
        client: Any = self._client
        stream = await client.aio.models.generate_content_stream(**params)
        try:
            first = await anext(stream)
        except StopAsyncIteration:
            first = None
        return _ChunkStream(first, stream)

    async def aclose(self) -> None:
        """Close the SDK client's connections (if it was made)."""
        client: Any = self._sdk_client
        if client is not None:
            await client.aio.aclose()
