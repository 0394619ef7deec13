"""Retries with jittered exponential backoff that honour the server's ``Retry-After``.

One policy for every provider: SDK clients are built with their own retries switched off and
wrap the *opening* of a stream in :func:`retry_call`. Once a stream has produced content it is
never retried here (the harness decides, with the whole turn in view).

The wait before retry ``n`` (1-based) is the server's ``Retry-After`` when it sent one (exactly:
the server knows when it will take us back), else ``base_delay * 2**(n-1)`` capped at
``max_delay`` and jittered the way :mod:`chord.backoff` does it (drawn from
``[(1 - jitter) * d, d]``, so clients that failed together do not retry in lock step and the cap
still holds). A server asking for more than ``max_delay`` is not retried: the error surfaces at
once with its ``retry_after``, so the caller can say so rather than hang.

Time and chance are injectable: :func:`parse_retry_after` takes a wall ``clock`` for HTTP
dates, :func:`retry_call` takes the ``sleep`` it waits with and the ``random`` the jitter draws
from, so tests run without real waiting and get the same delays every run.
"""

from __future__ import annotations

import math
import random as _random
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import TypeVar

import anyio
import msgspec

from chord.backoff import capped_exponential, jittered
from chord.context import Context, ContextCancelled
from pico3.models.provider import ModelProviderError
from pico3.models.stream import ABORTED, abortable

__all__ = ["RetryPolicy", "Sleep", "parse_retry_after", "retry_call"]

T = TypeVar("T")

Sleep = Callable[[float], Awaitable[None]]
"""Waits the given number of seconds (``anyio.sleep`` unless a test injects its own)."""


class RetryPolicy(msgspec.Struct, frozen=True):
    """How often and how long to retry. Delays are in seconds; ``jitter`` is the random
    fraction of each backoff delay (0: exact)."""

    max_retries: int = 3
    base_delay: float = 2.0
    max_delay: float = 60.0
    jitter: float = 0.5

    def __post_init__(self) -> None:
        if self.max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {self.max_retries}")
        for field in ("base_delay", "max_delay"):
            value = getattr(self, field)
            if not math.isfinite(value) or value < 0:
                raise ValueError(f"{field} must be a finite number >= 0, got {value!r}")
        if not (0 <= self.jitter <= 1):
            raise ValueError(f"jitter must be within [0, 1], got {self.jitter!r}")

    def delay(
        self,
        retry: int,
        retry_after: float | None = None,
        *,
        random: Callable[[], float] = _random.random,
    ) -> float | None:
        """Seconds to wait before retry number ``retry`` (1-based), or ``None``: do not retry.

        ``random`` (a float in ``[0, 1)``) draws the jitter; a ``retry_after`` is used as is."""
        if retry < 1:
            raise ValueError(f"retry numbers start at 1, got {retry}")
        if retry > self.max_retries:
            return None
        if retry_after is not None:
            return None if retry_after > self.max_delay else max(retry_after, 0.0)
        ceiling = capped_exponential(self.base_delay, 2.0, self.max_delay, retry)
        return jittered(ceiling, self.jitter, random)


def parse_retry_after(
    headers: Mapping[str, str], clock: Callable[[], float] = time.time
) -> float | None:
    """The wait a response asks for, in seconds, or ``None``.

    Understands ``retry-after-ms`` (milliseconds, preferred when present), ``retry-after`` as
    delta-seconds, and ``retry-after`` as an HTTP date (relative to ``clock()``, never negative).
    Header names are matched case-insensitively; unparsable values count as absent.
    """
    lowered = {key.lower(): value for key, value in headers.items()}
    raw_ms = lowered.get("retry-after-ms")
    if raw_ms is not None:
        try:
            ms = float(raw_ms)
        except ValueError:
            ms = math.nan
        if math.isfinite(ms) and ms >= 0:
            return ms / 1000
    raw = lowered.get("retry-after")
    if raw is None:
        return None
    raw = raw.strip()
    try:
        seconds = float(raw)
    except ValueError:
        from email.utils import parsedate_to_datetime  # a dated Retry-After only

        try:
            when = parsedate_to_datetime(raw)
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:
            return None
        return max(when.timestamp() - clock(), 0.0)
    return seconds if math.isfinite(seconds) and seconds >= 0 else None


async def retry_call(
    fn: Callable[[], Awaitable[T]],
    policy: RetryPolicy,
    ctx: Context,
    *,
    sleep: Sleep = anyio.sleep,
    on_retry: Callable[[int, float, ModelProviderError], None] | None = None,
    random: Callable[[], float] = _random.random,
) -> T:
    """Call ``fn`` until it succeeds, retrying retryable :class:`ModelProviderError` per ``policy``.

    ``on_retry(retry, delay, error)`` is told before each wait; ``random`` draws the jitter. The last error is re-raised when
    the policy gives up or the error is not retryable. A cancelled ``ctx`` (before a call or
    during a wait) raises :class:`~chord.context.ContextCancelled`.
    """
    retry = 0
    while True:
        if ctx.cancelled:
            raise ContextCancelled(ctx.reason)
        try:
            return await fn()
        except ModelProviderError as error:
            if not error.retryable:
                raise
            retry += 1
            delay = policy.delay(retry, error.retry_after, random=random)
            if delay is None:
                raise
            if on_retry is not None:
                on_retry(retry, delay, error)

            async def wait(delay: float = delay) -> None:
                await sleep(delay)

            if await abortable(wait, ctx) is ABORTED:
                raise ContextCancelled(ctx.reason) from None
