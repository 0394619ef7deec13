"""The loop every SDK adapter shares: open with retries, read chunks, map, end exactly once.

An adapter supplies four things: how to *open* its SDK stream, how to *feed* one SDK chunk
into a :class:`~pico3.models.stream.MessageBuilder` (returning contract events), how to
*finish* when the SDK stream ends, and how to *classify* an SDK exception into a
:class:`~pico3.models.ModelProviderError`. :func:`drive` does the rest the same way for both:

* opening is retried per the :class:`~pico3.models.RetryPolicy` (the SDK's own retries are off);
* every wait (connect, backoff, the next network read) is :func:`~pico3.models.abortable`, and
  the events of one read are fed only while the context is not cancelled, so a cancelled
  context ends the stream with ``aborted`` at once and the HTTP response is closed;
* no exception escapes: failures become one ``error`` event with the classification.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from typing import Any, Protocol, cast

import anyio

from chord import Context, ContextCancelled
from pico3.models import (
    ABORTED,
    MessageBuilder,
    ModelProviderError,
    RetryPolicy,
    Sleep,
    StreamEvent,
    abortable,
    retry_call,
)

__all__ = ["DrivenStream", "SdkStream", "drive"]


class SdkStream(Protocol):
    """A response's decoded events, a list per network read (see ``SseStream``)."""

    def batches(self) -> AsyncIterator[list[Any]]: ...

    async def close(self) -> None: ...


class DrivenStream:
    """The events of one request (:func:`drive`): an async iterator of them, one at a time, or
    :meth:`batches`, the same events a list per network read (``pico3.turn``'s
    ``stream_message`` takes those, paying its per-event awaits once per read). Use one or the
    other, once."""

    def __init__(self, run: Callable[[bool], AsyncGenerator[list[StreamEvent], None]]) -> None:
        self._run = run
        self._events: AsyncGenerator[StreamEvent, None] | None = None

    def __aiter__(self) -> DrivenStream:
        return self

    async def __anext__(self) -> StreamEvent:
        if self._events is None:
            self._events = self._each()
        return await self._events.__anext__()

    async def _each(self) -> AsyncGenerator[StreamEvent, None]:
        lists = self._run(False)
        try:
            async for events in lists:
                for event in events:
                    yield event
        finally:  # stopped early: the response is closed now, as the generator was
            await lists.aclose()

    async def aclose(self) -> None:
        """Stop early (the response is closed)."""
        if self._events is not None:
            await self._events.aclose()

    def batches(self) -> AsyncGenerator[list[StreamEvent], None]:
        """The events, a list per network read (the first holds ``start`` alone)."""
        return self._run(True)


def drive(
    builder: MessageBuilder,
    *,
    open: Callable[[], Awaitable[SdkStream]],
    feed: Callable[[Any], list[StreamEvent]],
    finish: Callable[[], list[StreamEvent]],
    classify: Callable[[BaseException], ModelProviderError | None],
    policy: RetryPolicy,
    sleep: Sleep,
    ctx: Context,
    ending: Callable[[], bool] | None = None,
) -> DrivenStream:
    """Run one request; its events (``start`` first, one terminal last).

    ``ending`` (the mapper's :attr:`~._core.Mapper.ending`) tells that the response's content is
    complete and only its end remains (OpenAI's ``finish_reason`` comes a chunk before the
    usage and the stream's close): from then on, per read, the events are held and handed over
    with the terminal one, in one list, so the consumer sees the answer's last text and its end
    together (``stream_message`` then commits no ``turn.message`` for text the answer's own
    commit stores at once)."""

    async def open_once() -> SdkStream:
        try:
            opened = await abortable(open, ctx)
        except ModelProviderError:
            raise
        except Exception as exc:
            error = classify(exc)
            if error is None:
                raise
            raise error from exc
        if opened is ABORTED:
            raise ContextCancelled(ctx.reason)
        return opened  # pyright: ignore[reportReturnType]

    async def run(per_read: bool) -> AsyncGenerator[list[StreamEvent], None]:
        """Lists of events: per read (``per_read``) or per chunk (the consumer then runs
        between the chunks of one read, and a cancel it makes stops the next one)."""
        yield [builder.start()]
        try:
            stream = await retry_call(open_once, policy, ctx, sleep=sleep)
        except ContextCancelled:
            yield [builder.abort()]
            return
        except ModelProviderError as error:
            yield [builder.fail_with(error)]
            return
        except Exception as exc:  # an SDK failure nobody classified: still end the stream
            yield [builder.fail("error", f"{type(exc).__name__}: {exc}")]
            return

        batches = stream.batches()
        read: list[StreamEvent] = []
        try:
            while True:
                try:
                    batch = await abortable(batches.__anext__, ctx)  # one wait per network read
                except StopAsyncIteration:
                    break
                if not isinstance(batch, list):  # ABORTED
                    yield [builder.abort(builder.message.usage)]
                    return
                for chunk in cast("list[Any]", batch):
                    if ctx.cancelled:  # between the events of one read too
                        yield [*read, builder.abort(builder.message.usage)]
                        return
                    if per_read:
                        read += feed(chunk)
                    else:
                        yield feed(chunk)
                    if builder.finished:
                        if read:
                            yield read
                        return
                if read and (ending is None or not ending()):
                    yield read
                    read = []
            end = finish()
            if not builder.finished:
                end.append(
                    builder.fail("error", "the stream ended without a final event", retryable=True)
                )
            yield [*read, *end]
        except ModelProviderError as error:
            if not builder.finished:
                yield [*read, builder.fail_with(error, builder.message.usage)]
        except Exception as exc:
            if not builder.finished:
                error = classify(exc)
                if error is None:
                    error = ModelProviderError(f"{type(exc).__name__}: {exc}", retryable=False)
                yield [*read, builder.fail_with(error, builder.message.usage)]
        finally:
            with anyio.CancelScope(shield=True):
                await stream.close()

    return DrivenStream(run)
