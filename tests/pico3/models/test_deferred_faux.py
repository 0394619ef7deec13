"""Deferred answers in the provider contract and the faux provider (docs/design/turn.md#models)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

import anyio
import pytest

from chord.context import BACKGROUND, with_cancel
from pico3.models.faux import (
    FAUX_MODEL,
    FauxProvider,
    faux_deferred,
    faux_error,
    faux_fetch_error,
    faux_not_ready,
    faux_pause,
    faux_response,
    faux_thinking,
    faux_tool_call,
)
from pico3.models.provider import (
    AssistantMessage,
    Deferred,
    DeferringModelProvider,
    DoneEvent,
    ErrorEvent,
    ModelInfo,
    ModelProvider,
    ModelProviderError,
    Request,
    StartEvent,
    StreamEvent,
    TextContent,
    ToolCall,
    UserMessage,
    message_to_json,
)
from pico3.models.stream import MessageBuilder, StreamProtocolError, reduce_events

pytestmark = pytest.mark.anyio


def request(text: str = "hi") -> Request:
    return Request(model="faux-1", messages=[UserMessage(content=text)])


async def collect(provider: FauxProvider, req: Request) -> list[StreamEvent]:
    return [event async for event in provider.stream(req, BACKGROUND)]


def without_timestamp(message: AssistantMessage) -> dict[str, Any]:
    out = message_to_json(message)
    out.pop("timestamp", None)
    return out


async def test_a_deferred_step_streams_start_then_a_deferred_done() -> None:
    faux = FauxProvider([faux_deferred("later", poll_after_ms=1500)])
    events = await collect(faux, request())
    assert [type(e) for e in events] == [StartEvent, DoneEvent]
    done = events[-1]
    assert isinstance(done, DoneEvent) and done.reason == "deferred"
    assert done.message.deferred == Deferred(handle="faux-deferred-1", poll_after_ms=1500)
    assert done.message.content == []
    assert reduce_events(events).deferred == done.message.deferred
    assert faux.deferred_handles == ["faux-deferred-1"] and faux.state.call_count == 1


async def test_the_fetched_answer_is_the_terminal_event_a_stream_would_end_with() -> None:
    blocks = (faux_thinking("hmm", signature="sig"), "some text", faux_tool_call("t", {"a": 1}))
    deferred = FauxProvider([faux_deferred(faux_response(*blocks))])
    streamed = FauxProvider([faux_response(*blocks)])
    await collect(deferred, request())
    fetched = await deferred.fetch_deferred("faux-1", "faux-deferred-1", BACKGROUND)
    reference = (await collect(streamed, request()))[-1]
    assert isinstance(fetched, DoneEvent) and isinstance(reference, DoneEvent)
    assert fetched.reason == reference.reason == "toolUse"
    assert without_timestamp(fetched.message) == without_timestamp(reference.message)
    assert fetched.message.content[2] == reference.message.content[2]
    call = fetched.message.content[2]
    assert isinstance(call, ToolCall) and call.id == "call_1_2"  # the request's call number
    assert deferred.state.fetches == ["faux-deferred-1"] and deferred.deferred_handles == []


async def test_a_scripted_error_answer_comes_back_as_an_error_event() -> None:
    faux = FauxProvider([faux_deferred(faux_error("overloaded", retryable=True))])
    await collect(faux, request())
    fetched = await faux.fetch_deferred("faux-1", "faux-deferred-1", BACKGROUND)
    assert isinstance(fetched, ErrorEvent) and fetched.retryable
    assert fetched.error.stop_reason == "error" and fetched.error.error_message == "overloaded"


async def test_not_ready_answers_with_a_fresh_handle_and_retires_the_old_one() -> None:
    faux = FauxProvider([faux_deferred(faux_not_ready(poll_after_ms=250), "done")])
    await collect(faux, request())
    again = await faux.fetch_deferred("faux-1", "faux-deferred-1", BACKGROUND)
    assert isinstance(again, DoneEvent) and again.reason == "deferred"
    assert again.message.deferred == Deferred(handle="faux-deferred-2", poll_after_ms=250)
    with pytest.raises(ModelProviderError, match="unknown faux deferred handle") as raised:
        await faux.fetch_deferred("faux-1", "faux-deferred-1", BACKGROUND)
    assert not raised.value.retryable
    final = await faux.fetch_deferred("faux-1", "faux-deferred-2", BACKGROUND)
    assert isinstance(final, DoneEvent) and final.reason == "stop"
    assert faux.state.fetches == ["faux-deferred-1", "faux-deferred-1", "faux-deferred-2"]


async def test_a_fetch_error_raises_and_keeps_the_handle_valid() -> None:
    faux = FauxProvider([faux_deferred(faux_fetch_error("gateway down"), "ok")])
    await collect(faux, request())
    with pytest.raises(ModelProviderError, match="gateway down") as raised:
        await faux.fetch_deferred("faux-1", "faux-deferred-1", BACKGROUND)
    assert raised.value.retryable
    final = await faux.fetch_deferred("faux-1", "faux-deferred-1", BACKGROUND)
    assert isinstance(final, DoneEvent) and final.message.content == [TextContent(text="ok")]


async def test_cancel_forgets_the_handle_and_ignores_unknown_ones() -> None:
    faux = FauxProvider([faux_deferred("never")])
    await collect(faux, request())
    await faux.cancel_deferred("faux-1", "faux-deferred-1", BACKGROUND)
    await faux.cancel_deferred("faux-1", "no-such-handle", BACKGROUND)
    assert faux.state.cancelled == ["faux-deferred-1", "no-such-handle"]
    assert faux.deferred_handles == []
    with pytest.raises(ModelProviderError):
        await faux.fetch_deferred("faux-1", "faux-deferred-1", BACKGROUND)


async def test_a_cancelled_fetch_keeps_its_poll_for_the_next_one() -> None:
    gate = anyio.Event()
    faux = FauxProvider([faux_deferred(faux_response(faux_pause(gate), "late"))])
    await collect(faux, request())
    ctx, cancel = with_cancel(BACKGROUND)
    outcome: list[BaseException] = []
    async with anyio.create_task_group() as tg:

        async def fetch() -> None:
            try:
                await faux.fetch_deferred("faux-1", "faux-deferred-1", ctx)
            except Exception as exc:
                outcome.append(exc)

        tg.start_soon(fetch)
        await anyio.wait_all_tasks_blocked()
        cancel()
    assert len(outcome) == 1 and "cancelled" in str(outcome[0])
    gate.set()
    final = await faux.fetch_deferred("faux-1", "faux-deferred-1", BACKGROUND)
    assert isinstance(final, DoneEvent) and final.message.content == [TextContent(text="late")]


async def test_the_faux_provider_is_a_deferring_provider_and_a_plain_one_is_not() -> None:
    class Plain:
        name = "plain"

        def models(self) -> Sequence[ModelInfo]:
            return (FAUX_MODEL,)

        def model(self, model_id: str) -> ModelInfo:
            return FAUX_MODEL

        async def stream(self, request: Request, ctx: Any) -> AsyncIterator[StreamEvent]:
            yield MessageBuilder(api="x", provider="plain", model=request.model).start()

    assert isinstance(FauxProvider(), DeferringModelProvider)
    assert isinstance(Plain(), ModelProvider) and not isinstance(Plain(), DeferringModelProvider)


def test_builder_defer_rejects_content_and_anything_after_it() -> None:
    builder = MessageBuilder(api="x", provider="p", model="m")
    builder.start()
    builder.open_text()
    with pytest.raises(StreamProtocolError, match="cannot follow content"):
        builder.defer("h")
    fresh = MessageBuilder(api="x", provider="p", model="m")
    fresh.start()
    done = fresh.defer({"batch": "b1", "index": 3})
    assert done.message.deferred == Deferred(handle={"batch": "b1", "index": 3})
    with pytest.raises(StreamProtocolError, match="already ended"):
        fresh.open_text()


def test_deferred_wire_form_is_camel_case() -> None:
    message = AssistantMessage(deferred=Deferred(handle="h1", poll_after_ms=10))
    assert message_to_json(message)["deferred"] == {"handle": "h1", "pollAfterMs": 10}
    assert "deferred" not in message_to_json(AssistantMessage())
