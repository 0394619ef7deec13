"""The streaming core every SDK provider adapter shares: an adapter is only its wire mapping.

A provider adapter (``anthropic``, ``openai``, and any later one) subclasses
:class:`SdkProvider` and supplies what is specific to its API, nothing else:

* **its SDK** (:class:`Sdk`): the package and client class, the path a request is POSTed to,
  the request options the SDK needs besides the body, and the SSE event decoder
  (``decode(event_name, data)``, ``Last(value)`` for the final event: see :mod:`._sse`);
* **request building**: :meth:`SdkProvider._params` (the request's JSON body as a dict; raise
  :class:`~pico3.models.ModelProviderError` for bad input) and :meth:`SdkProvider._wire_memo` (the
  fold that converts its message records: see :mod:`._memo`); an API that may send a request
  again in another shape overrides :meth:`SdkProvider._open` (OpenAI's text tool fallback);
* **event mapping**: a :class:`Mapper` subclass (``feed`` one decoded event, ``finish`` when
  the stream ends) that reports token counts with :meth:`Mapper.count`;
* **error mapping**: :meth:`SdkProvider._classify`; the Stainless-generated SDKs (``anthropic``,
  ``openai``) share :func:`classify_stainless` and only say what a status error means.

An adapter whose API searches the web itself subclasses :class:`SearchingProvider` (the
``web_search`` switch and :meth:`~SdkProvider.serves_search`), and every adapter reads what a
thinking level sends from its own table with :func:`thinking_setting` (one error for a level
the table lacks).

Where an SDK differs from these two, an adapter overrides one more method, still its own wire:
:meth:`SdkProvider._client_keywords` for a client made with other credentials (the Anthropic
SDK's Bedrock and Vertex clients take a region and cloud credentials, not an API key), and
:meth:`SdkProvider._post` for a client that does not send a raw streamed POST (it must return an
:class:`~._drive.SdkStream`: decoded events, a list per network read, and ``close``).

The core does the rest the same way for every adapter: the SDK client's lifecycle (made, and the
SDK imported with its package ``__init__`` s deferred, at the first request: see
:mod:`._sdk_import`; closed by ``aclose``), the request body encoded once by msgspec with the
request messages memoised per conversation, the raw SSE stream read off the SDK's HTTP response
(:mod:`._sse`), retries of opening with ``Retry-After`` and cancellation at every wait
(:func:`._drive.drive`), the usage and its cost accumulated and priced onto the message
(:class:`Mapper`), connection errors that name the URL (:func:`connection_error`), and models
the bundle does not know (:meth:`SdkProvider.model`).
"""

from __future__ import annotations

import sys
import time
from collections.abc import AsyncIterator, Callable, Hashable, Mapping, Sequence
from typing import Any, ClassVar, Protocol, Required, TypedDict, TypeVar, Unpack, cast

import anyio
import msgspec

from chord import Context
from coding_agent.worker.provider_search import offered_tools
from coding_agent.worker.providers._drive import SdkStream, drive
from coding_agent.worker.providers._memo import FoldMemo
from coding_agent.worker.providers._sdk_import import sdk_client, sdk_client_options
from coding_agent.worker.providers._sse import Decode, SseStream
from pico3.models import (
    MessageBuilder,
    ModelInfo,
    ModelProviderError,
    Request,
    RetryPolicy,
    Sleep,
    StreamEvent,
    Usage,
    compute_cost,
    parse_retry_after,
)

__all__ = [
    "ENCODER",
    "Mapper",
    "ProviderOptions",
    "Sdk",
    "SdkProvider",
    "SearchingProvider",
    "classify_stainless",
    "connection_error",
    "thinking_setting",
]

ENCODER = msgspec.json.Encoder()
"""Encodes request bodies (and the memoised messages in them)."""

_JSON_HEADERS = {"Content-Type": "application/json", "Accept": "text/event-stream"}


class Sdk(msgspec.Struct, frozen=True):
    """How an adapter's official SDK is reached: ``package.client(**options)`` is the client,
    a request is a streamed POST of a ready JSON body to ``path`` with ``options`` (beside the
    JSON and SSE headers), and each event of the response is ``decode(event_name, data)``."""

    package: str
    client: str
    path: str
    decode: Decode
    options: Mapping[str, Any] = msgspec.field(default_factory=dict)


class _SdkClient(Protocol):
    """What the core uses of a Stainless SDK client (``AsyncAnthropic``, ``AsyncOpenAI``)."""

    async def post(self, path: str, **request: Any) -> Any: ...

    async def close(self) -> None: ...


class Mapper:
    """Feeds one response's decoded events into a :class:`~pico3.models.stream.MessageBuilder`.

    A subclass implements :meth:`feed` (and :meth:`finish` when the end of the stream means
    something more than "incomplete") and reports token counts with :meth:`count`, which keeps
    the usage so far priced on the message being built (an aborted or failed stream still
    reports what it cost)."""

    def __init__(self, builder: MessageBuilder, info: ModelInfo) -> None:
        self._builder = builder
        self._info = info
        self._usage = Usage()

    def feed(self, event: Any, /) -> list[StreamEvent]:
        """The contract events for one decoded event (a terminal one ends the stream)."""
        raise NotImplementedError

    def finish(self) -> list[StreamEvent]:
        """The events when the stream ends before a terminal one (none: ``drive`` then reports
        an incomplete stream)."""
        return []

    def ending(self) -> bool:
        """Whether the response said its content is complete, its end (a usage chunk, the
        stream's close) still to come: ``drive`` then holds the events until that end."""
        return False

    def count(
        self,
        *,
        input: int | None = None,
        output: int | None = None,
        cache_read: int | None = None,
        cache_write: int | None = None,
    ) -> None:
        """Take the token counts given (``None`` keeps a count as it is) and put the usage so
        far, totalled and priced, on the message."""
        usage = self._usage
        if input is not None:
            usage.input = input
        if output is not None:
            usage.output = output
        if cache_read is not None:
            usage.cache_read = cache_read
        if cache_write is not None:
            usage.cache_write = cache_write
        self._builder.message.usage = self.priced()

    def priced(self) -> Usage:
        """A copy of the usage so far with its total and its cost at the model's prices."""
        usage = self._usage
        usage.total_tokens = usage.input + usage.output + usage.cache_read + usage.cache_write
        usage.cost = compute_cost(usage, self._info)
        return Usage(
            input=usage.input,
            output=usage.output,
            cache_read=usage.cache_read,
            cache_write=usage.cache_write,
            total_tokens=usage.total_tokens,
            cost=usage.cost,
        )


class ProviderOptions(TypedDict, total=False):
    """The keyword arguments of :class:`SdkProvider` (for an adapter that adds its own)."""

    api_key: Required[str]
    base_url: str | None
    models: Sequence[ModelInfo] | None
    retry: RetryPolicy | None
    sleep: Sleep | None
    clock: Callable[[], float]
    timeout: float
    name: str | None


class SdkProvider:
    """A :class:`pico3.models.ModelProvider` streaming through an official SDK (see the module
    docstring for what a subclass supplies).

    The SDK client is made with ``max_retries=0`` (opening is retried by
    :func:`pico3.models.retry_call`, so every provider backs off the same way and honours
    ``Retry-After``) at the first request: a worker serves before its SDK is imported, and a
    session that never asks the model never pays for it."""

    api: ClassVar[str]
    """The ``api`` of this adapter's :class:`~pico3.models.ModelInfo` records."""
    sdk: ClassVar[Sdk]
    bundled: ClassVar[tuple[ModelInfo, ...]]
    """The models known without configuration (the first is the default)."""
    default_name: ClassVar[str] = ""
    """The provider's name when none is given (empty: the SDK package's name)."""
    mapper_type: ClassVar[type[Mapper]]
    """The :class:`Mapper` subclass that reads this API's events (a new one per response)."""
    unknown: ClassVar[ModelInfo | None] = None
    """What a model the bundle and the configuration do not know is taken to be (its ``id`` and
    ``provider`` filled in; ``None``: the :class:`~pico3.models.ModelInfo` defaults)."""

    def __init__(
        self,
        *,
        api_key: str,
        base_url: str | None = None,
        models: Sequence[ModelInfo] | None = None,
        retry: RetryPolicy | None = None,
        sleep: Sleep | None = None,
        clock: Callable[[], float] = time.time,
        timeout: float = 600.0,
        name: str | None = None,
    ) -> None:
        self.name = name or self.default_name or self.sdk.package
        self._models = tuple(self.bundled if models is None else models)
        self._retry = retry or RetryPolicy()
        self._sleep = sleep or anyio.sleep
        self._clock = clock
        self._client_options = sdk_client_options(api_key, base_url, timeout)
        self._sdk_client: _SdkClient | None = None
        self._memos: dict[Hashable, FoldMemo] = {}

    # -- what an adapter supplies ---------------------------------------------------------------
    def _mapper(self, builder: MessageBuilder, info: ModelInfo) -> Mapper:
        """A new mapper for one response (a :attr:`mapper_type`)."""
        return self.mapper_type(builder, info)

    def _params(self, request: Request, info: ModelInfo, mapper: Mapper) -> dict[str, Any]:
        """The JSON body of ``request`` (its messages from :meth:`_memo`)."""
        raise NotImplementedError

    def _wire_memo(self, key: Hashable) -> FoldMemo:
        """A new memo of encoded request messages for requests that share ``key``."""
        raise NotImplementedError

    def _classify(self, exc: BaseException) -> ModelProviderError | None:
        """The :class:`ModelProviderError` for an SDK exception (``None``: not the SDK's)."""
        raise NotImplementedError

    def _unknown(self, model_id: str) -> ModelInfo:
        """Metadata for a model the bundle and the configuration do not know (unpriced: from
        :attr:`unknown`)."""
        if self.unknown is None:
            return ModelInfo(id=model_id, provider=self.name, api=self.api)
        return msgspec.structs.replace(self.unknown, id=model_id, provider=self.name)

    # -- the core -------------------------------------------------------------------------------
    def _client_keywords(self) -> dict[str, Any]:
        """The keyword arguments of the SDK's client class: the API key, base URL and timeout,
        and no SDK retries (:func:`~._sdk_import.sdk_client_options`)."""
        return self._client_options

    @property
    def _client(self) -> _SdkClient:
        """The SDK client, made (and the SDK imported) on first use (``._sdk_import.sdk_client``)."""
        if self._sdk_client is None:
            client = sdk_client(self.sdk.package, self.sdk.client, self._client_keywords())
            self._sdk_client = cast("_SdkClient", client)
        return self._sdk_client

    def models(self) -> Sequence[ModelInfo]:
        """The bundled (or configured) models."""
        return self._models

    def model(self, model_id: str) -> ModelInfo:
        """Metadata for ``model_id``; an unknown id gets the adapter's defaults, unpriced."""
        for info in self._models:
            if info.id == model_id:
                return info
        return self._unknown(model_id)

    async def aclose(self) -> None:
        """Close the SDK client's connection pool (if it was made)."""
        if self._sdk_client is not None:
            await self._sdk_client.close()

    def _memo(self, key: Hashable = None) -> FoldMemo:
        """This provider's memo of encoded messages for requests that share ``key``."""
        memo = self._memos.get(key)
        if memo is None:
            memo = self._memos[key] = self._wire_memo(key)
        return memo

    async def _open(self, request: Request, info: ModelInfo, mapper: Mapper) -> SdkStream:
        """Send ``request`` (once per attempt: bad input fails the stream)."""
        return await self._post(ENCODER.encode(self._params(request, info, mapper)))

    async def _post(self, body: bytes, path: str | None = None) -> SdkStream:
        """POST a ready JSON body through the SDK (its base URL, auth and version headers,
        timeout and status errors) to ``path`` (the SDK's unless given: an API whose path
        names the model) and read the raw event stream (:meth:`_stream`) with msgspec instead
        of the SDK's parameter transforms and per-event pydantic models, which cost more than
        the rest of a late turn together."""
        import httpx2

        sdk = self.sdk
        response = await self._client.post(
            sdk.path if path is None else path,
            cast_to=httpx2.Response,
            content=body,
            options={"headers": _JSON_HEADERS, **sdk.options},
            stream=True,
        )
        return self._stream(response)

    def _stream(self, response: Any) -> SdkStream:
        """The decoded events of a streamed ``httpx2.Response``: server-sent events, each
        ``sdk.decode`` d (an API framing its stream otherwise overrides this)."""
        return SseStream(response, self.sdk.decode)

    def serves_search(self, info: ModelInfo) -> bool:
        """Whether this provider searches the web itself for ``info``'s model (its server tool
        or a grounded request); without it, the ``web_search`` tool that only a provider's
        search can run is not offered (:func:`~coding_agent.worker.provider_search.offered_tools`)."""
        return False

    def stream(self, request: Request, ctx: Context) -> AsyncIterator[StreamEvent]:
        """Stream ``request``: ``start`` first, exactly one terminal event last."""
        info = self.model(request.model)
        request = offered_tools(request, self.serves_search(info))
        builder = MessageBuilder(
            api=self.api, provider=self.name, model=request.model, clock=self._clock
        )
        mapper = self._mapper(builder, info)

        async def open() -> SdkStream:
            return await self._open(request, info, mapper)

        return drive(
            builder,
            open=open,
            feed=mapper.feed,
            finish=mapper.finish,
            classify=self._classify,
            policy=self._retry,
            sleep=self._sleep,
            ctx=ctx,
            ending=mapper.ending,
        )


class SearchingProvider(SdkProvider):
    """An :class:`SdkProvider` whose API searches the web itself for some models (Anthropic's
    and OpenAI's server tool, Gemini's Google Search grounding): it serves the ``web_search``
    tool for a model whose :attr:`~pico3.models.ModelInfo.supports_web_search` is set, unless
    made with ``web_search=False`` (:meth:`serves_search`). How the search is asked for is the
    adapter's (its ``_params``, or a ``search_web`` of its own)."""

    def __init__(self, *, web_search: bool = True, **options: Unpack[ProviderOptions]) -> None:
        """``web_search``: offer the provider's own web search where the model has it; the
        other keyword arguments are :class:`SdkProvider`'s."""
        super().__init__(**options)
        self.web_search = web_search

    def serves_search(self, info: ModelInfo) -> bool:
        """The provider's own search serves ``info``'s model and is not turned off."""
        return self.web_search and info.supports_web_search


_Setting = TypeVar("_Setting")


def thinking_setting(table: Mapping[Any, _Setting], level: str) -> _Setting:
    """What an adapter sends for thinking ``level`` (not ``off``, which sends nothing): its
    entry in ``table`` (a budget of tokens, a reasoning effort). A level the table lacks fails
    the request, not retried: ``ModelProviderError("unknown thinking level 'x'")``."""
    setting = table.get(level)
    if setting is None:
        raise ModelProviderError(f"unknown thinking level {level!r}", retryable=False)
    return setting


def classify_stainless(
    exc: BaseException,
    sdk: str,
    status: Callable[[Any], tuple[str, bool]],
    clock: Callable[[], float] = time.time,
) -> ModelProviderError | None:
    """The :class:`ModelProviderError` for an exception of the Stainless-generated SDK ``sdk``
    (``None`` for others). ``status(error)`` gives a status error's message and whether it is
    retryable; its ``Retry-After`` is read here. Timeouts are retried, connection failures
    are :func:`connection_error`, any other SDK error (an error object inside a started stream)
    is final."""
    if sdk not in sys.modules:
        return None  # no SDK exception can exist yet: importing the SDK to say so costs
    module = sys.modules[sdk]
    error: Any = exc
    if isinstance(exc, module.APIStatusError):
        message, retryable = status(exc)
        return ModelProviderError(
            message,
            retryable=retryable,
            retry_after=parse_retry_after(dict(error.response.headers), clock),
            status=error.status_code,
        )
    if isinstance(exc, module.APITimeoutError):
        return ModelProviderError(f"{sdk}: request timed out", retryable=True)
    if isinstance(exc, module.APIConnectionError):
        return connection_error(sdk, exc)
    if isinstance(exc, module.APIError):
        return ModelProviderError(f"{sdk}: {error.message}", retryable=False)
    return None


NO_ENDPOINT_STATUSES = frozenset({404, 405, 501})
"""Statuses a wrong base URL draws: no such path (404), a server that takes no POST there (405,
501: a web page, a proxy). The provider's error names the URL and what to check."""


def request_url(exc: object) -> str:
    """The URL of the request an SDK error came from (``"the server"`` when it has none)."""
    request = getattr(exc, "request", None)
    url = getattr(request, "url", None)
    return str(url) if url is not None else "the server"


_UNREACHABLE = ("connection refused", "name or service not known", "nodename nor servname")


def connection_error(provider: str, exc: BaseException) -> ModelProviderError:
    """The error for an SDK's connection failure, naming the URL. A refused connection or an
    unknown host is final (retrying cannot help and would hide it for a minute); a reset or
    an interrupted connection is retried."""
    request = getattr(exc, "request", None)
    url = getattr(request, "url", None)
    where = f" to {url}" if url is not None else ""
    cause: BaseException | None = exc
    seen = 0
    while cause is not None and seen < 10:
        text = str(cause).lower()
        if isinstance(cause, ConnectionRefusedError) or any(s in text for s in _UNREACHABLE):
            why = (
                "connection refused"
                if "refused" in text or isinstance(cause, ConnectionRefusedError)
                else "unknown host"
            )
            return ModelProviderError(
                f"{provider}: cannot connect{where}: {why} (is the server running, and is the "
                "base URL right?)",
                retryable=False,
            )
        cause, seen = cause.__cause__ or cause.__context__, seen + 1
    return ModelProviderError(f"{provider}: connection failed{where}: {exc}", retryable=True)
