"""The shared streaming core (``providers._core``): an adapter that is only its wire mapping.

``_EchoProvider`` speaks a made-up streaming API through the real ``openai`` SDK client (any
Stainless client does) against the local stub server. It defines nothing but its request body,
its event mapping and what a status error means, and it gets from the core what the Anthropic
and OpenAI adapters get: the lazily made SDK client, retries that honour ``Retry-After``,
cancellation, priced usage on every end, the message memo and the end of a stream as one
error event."""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import anyio
import msgspec
import pytest
from provider_support import Sleeps, collect
from stub_server import Reply, StubServer, sse

from chord.context import BACKGROUND, with_cancel
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
    DoneEvent,
    ErrorEvent,
    Message,
    MessageBuilder,
    ModelCost,
    ModelInfo,
    ModelProviderError,
    Request,
    RetryPolicy,
    StreamEvent,
    TextContent,
    TextDeltaEvent,
    UserMessage,
    retryable_status,
)

ECHO = ModelInfo(
    id="echo-1", provider="echo", api="echo", cost=ModelCost(input=1, output=2), max_output=99
)


class _Event(msgspec.Struct):
    kind: str
    text: str = ""
    tokens_in: int | None = None
    tokens_out: int | None = None


_EVENT = msgspec.json.Decoder(_Event)


def _decode(event: str | None, data: bytes) -> Any:
    decoded = _EVENT.decode(data)
    return Last(decoded) if decoded.kind == "end" else decoded


class _Fold:
    """Each message's text as an encoded string; counts what it was fed."""

    fed = 0

    def __init__(self) -> None:
        self._items: list[bytes] = []

    def feed(self, message: Any) -> None:
        _Fold.fed += 1
        self._items.append(ENCODER.encode(str(message.content)))

    def render(self) -> list[Any]:
        return [msgspec.Raw(item) for item in self._items]


class _EchoMapper(Mapper):
    def __init__(self, builder: MessageBuilder, info: ModelInfo) -> None:
        super().__init__(builder, info)
        self._text: int | None = None

    def feed(self, event: Any, /) -> list[StreamEvent]:
        builder = self._builder
        if event.kind == "usage":
            self.count(input=event.tokens_in, output=event.tokens_out)
            return []
        if event.kind == "text":
            out: list[StreamEvent] = []
            if self._text is None:
                self._text, opened = builder.open_text()
                out.append(opened)
            return [*out, builder.delta(self._text, event.text)]
        return builder.done("stop", self.priced())  # "end"


class _EchoProvider(SdkProvider):
    """The whole adapter: its SDK, its body, its mapper, its status errors."""

    api = "echo"
    sdk = Sdk(package="openai", client="AsyncOpenAI", path="/echo", decode=_decode)
    bundled = (ECHO,)

    def _wire_memo(self, key: Hashable) -> FoldMemo:
        return FoldMemo(_Fold)

    def _client_keywords(self) -> dict[str, Any]:  # what this SDK's client takes besides
        return {**super()._client_keywords(), "default_headers": {"x-echo": "1"}}

    def _params(self, request: Request, info: ModelInfo, mapper: Mapper) -> dict[str, Any]:
        if request.max_tokens == 13:
            raise ModelProviderError("echo: 13 is unlucky", retryable=False)
        return {"model": request.model, "history": self._memo().render(request.messages)}

    def _mapper(self, builder: MessageBuilder, info: ModelInfo) -> Mapper:
        return _EchoMapper(builder, info)

    def _classify(self, exc: BaseException) -> ModelProviderError | None:
        return classify_stainless(exc, "openai", _status, clock=lambda: 1_000.0)


def _status(exc: Any) -> tuple[str, bool]:
    return f"echo {exc.status_code}: {exc.body}", retryable_status(exc.status_code)


def _events(*texts: str, end: bool = True) -> list[str]:
    out = [sse({"kind": "usage", "tokens_in": 1_000_000})]
    out += [sse({"kind": "text", "text": text}) for text in texts]
    out.append(sse({"kind": "usage", "tokens_out": 500_000}))
    return [*out, sse({"kind": "end"})] if end else out


def _provider(server: StubServer, sleeps: Sleeps | None = None) -> _EchoProvider:
    return _EchoProvider(
        api_key="k",
        base_url=server.url,
        sleep=sleeps or Sleeps(),
        retry=RetryPolicy(max_retries=2, base_delay=1.0, jitter=0.0),
    )


def _request(*texts: str, max_tokens: int | None = None) -> Request:
    messages: list[Message] = [UserMessage(content=text) for text in texts or ("hi",)]
    return Request(model="echo-1", messages=messages, max_tokens=max_tokens)


@pytest.mark.anyio
async def test_an_adapter_of_wire_mapping_alone_streams_priced_usage() -> None:
    with StubServer([Reply(events=_events("Hel", "lo"))]) as server:
        provider = _provider(server)
        assert provider.name == "openai" and provider.models() == (ECHO,)
        assert provider._sdk_client is None  # made at the first request
        events = await collect(provider, _request("hi"))
        sent = server.requests[0]
    assert sent.path == "/echo" and sent.body == {"model": "echo-1", "history": ["hi"]}
    assert sent.headers["authorization"] == "Bearer k"  # the SDK's auth, not ours
    assert sent.headers["x-echo"] == "1"  # the adapter's own client keywords
    done = events[-1]
    assert isinstance(done, DoneEvent) and done.message.content == [TextContent(text="Hello")]
    usage = done.message.usage
    assert usage is not None
    assert (usage.input, usage.output, usage.total_tokens) == (1_000_000, 500_000, 1_500_000)
    assert usage.cost.total == pytest.approx(2.0)  # $1 in + $1 out at the model's prices


@pytest.mark.anyio
async def test_the_core_retries_after_retry_after_and_ends_with_the_adapters_error() -> None:
    replies = [
        Reply(status=429, headers={"retry-after": "7"}, json_body={"error": "slow"}),
        Reply(status=400, json_body={"error": "bad"}),
    ]
    sleeps = Sleeps()
    with StubServer(replies) as server:
        events = await collect(_provider(server, sleeps), _request())
    assert sleeps.waits == [7.0] and len(server.requests) == 2
    error = events[-1]
    assert isinstance(error, ErrorEvent) and not error.retryable
    assert error.error.error_message == "echo 400: bad"


@pytest.mark.anyio
async def test_bad_input_from_the_body_builder_fails_the_stream_without_a_request() -> None:
    with StubServer([]) as server:
        events = await collect(_provider(server), _request(max_tokens=13))
        assert server.requests == []
    error = events[-1]
    assert isinstance(error, ErrorEvent) and error.error.error_message == "echo: 13 is unlucky"


@pytest.mark.anyio
async def test_a_stream_cut_short_or_cancelled_ends_once_with_the_usage_so_far() -> None:
    with StubServer([Reply(events=_events("a", end=False))]) as server:
        events = await collect(_provider(server), _request())
    cut = events[-1]
    assert isinstance(cut, ErrorEvent) and cut.retryable
    assert cut.error.usage is not None and cut.error.usage.output == 500_000

    ctx, cancel = with_cancel(BACKGROUND)
    seen: list[StreamEvent] = []
    with StubServer([Reply(events=_events("first", "second"), hold_after=2)]) as server:
        provider = _provider(server)
        try:
            async for event in provider.stream(_request(), ctx):
                seen.append(event)
                if isinstance(event, TextDeltaEvent):
                    cancel()  # the server holds the rest back: only the abort ends this
        finally:
            await provider.aclose()
        assert await anyio.to_thread.run_sync(server.disconnected.wait, 10)
    aborted = seen[-1]
    assert isinstance(aborted, ErrorEvent) and aborted.reason == "aborted"
    assert aborted.error.usage is not None and aborted.error.usage.input == 1_000_000


@pytest.mark.anyio
async def test_the_core_keeps_one_memo_so_a_growing_history_is_folded_once() -> None:
    first = UserMessage(content="one")
    history: list[Message] = [first, UserMessage(content="two")]
    replies = [Reply(events=_events("x")), Reply(events=_events("y"))]
    _Fold.fed = 0
    with StubServer(replies) as server:
        provider = _provider(server)
        try:
            for request in (
                Request(model="echo-1", messages=history),
                Request(model="echo-1", messages=[*history, UserMessage(content="three")]),
            ):
                events = [event async for event in provider.stream(request, BACKGROUND)]
                assert isinstance(events[-1], DoneEvent)
        finally:
            await provider.aclose()
        bodies = [r.body["history"] for r in server.requests]
    assert bodies == [["one", "two"], ["one", "two", "three"]]
    assert _Fold.fed == 3  # the second request fed only its new record


@pytest.mark.parametrize("adapter", ["anthropic", "openai", "openai_responses", "google"])
def test_every_adapter_refuses_an_unknown_thinking_level_with_one_error(adapter: str) -> None:
    """Each adapter reads what a thinking level sends from its own table through
    ``_core.thinking_setting``: a level no table has fails the request, not retried, with the
    same words whichever provider it was meant for."""
    from coding_agent.settings.model_config import OPENAI_COMPAT
    from coding_agent.worker.providers import anthropic, google, openai, openai_responses
    from pico3.models import ModelInfo, ModelProviderError, Request, UserMessage

    info = ModelInfo(id="m", provider=adapter, api=adapter, supports_thinking=True)
    request = Request(model="m", messages=[UserMessage(content="hi")], thinking_level="extreme")  # type: ignore[arg-type]
    build: dict[str, Any] = {
        "anthropic": lambda: anthropic.build_params(request, info),
        "openai": lambda: openai.build_params(request, info, OPENAI_COMPAT),
        "openai_responses": lambda: openai_responses.build_params(request, info),
        "google": lambda: google.build_params(request, info),
    }
    with pytest.raises(ModelProviderError) as raised:
        build[adapter]()
    assert str(raised.value) == "unknown thinking level 'extreme'"
    assert not raised.value.retryable
