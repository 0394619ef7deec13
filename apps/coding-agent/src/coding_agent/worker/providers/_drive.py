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

from collections.abc import AsyncIterator, Awaitable, Callable
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

__all__ = ["SdkStream", "drive"]


class SdkStream(Protocol):
    """A response's decoded events, a list per network read (see ``SseStream``)."""

    def batches(self) -> AsyncIterator[list[Any]]: ...

    async def close(self) -> None: ...


async def drive(
    builder: MessageBuilder,
    *,
    open: Callable[[], Awaitable[SdkStream]],
    feed: Callable[[Any], list[StreamEvent]],
    finish: Callable[[], list[StreamEvent]],
    classify: Callable[[BaseException], ModelProviderError | None],
    policy: RetryPolicy,
    sleep: Sleep,
    ctx: Context,
) -> AsyncIterator[StreamEvent]:
    """Run one request and yield its events (``start`` first, one terminal last)."""

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

    yield builder.start()
    try:
        stream = await retry_call(open_once, policy, ctx, sleep=sleep)
    except ContextCancelled:
        yield builder.abort()
        return
    except ModelProviderError as error:
        yield builder.fail_with(error)
        return
    except Exception as exc:  # an SDK failure nobody classified: still end the stream cleanly
        yield builder.fail("error", f"{type(exc).__name__}: {exc}")
        return

    batches = stream.batches()
    try:
        while True:
            try:
                batch = await abortable(batches.__anext__, ctx)  # one wait per network read
            except StopAsyncIteration:
                break
            if not isinstance(batch, list):  # ABORTED
                yield builder.abort(builder.message.usage)
                return
            for chunk in cast("list[Any]", batch):
                if ctx.cancelled:  # between the events of one read too
                    yield builder.abort(builder.message.usage)
                    return
                for event in feed(chunk):
                    yield event
                if builder.finished:
                    return
        for event in finish():
            yield event
        if not builder.finished:
            yield builder.fail("error", "the stream ended without a final event", retryable=True)
    except ModelProviderError as error:
        if not builder.finished:
            yield builder.fail_with(error, builder.message.usage)
    except Exception as exc:
        if not builder.finished:
            error = classify(exc)
            if error is None:
                error = ModelProviderError(f"{type(exc).__name__}: {exc}", retryable=False)
            yield builder.fail_with(error, builder.message.usage)
    finally:
        with anyio.CancelScope(shield=True):
            await stream.close()
