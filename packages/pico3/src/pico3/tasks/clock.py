"""Clocks: where durable timestamps and deadlines come from (docs/design/decisions.md#d8-g22).

Task code never reads ambient time. ``rt.now()`` gives epoch milliseconds for anything written
to storage (retry deadlines, poll times, notices), and ``rt.sleep(until_ms, ctx)`` waits for an
absolute time on the same clock, cancellably. A harness gets its clock from
``HarnessOptions(clock=...)``:

* :class:`SystemClock` (the default): wall-clock milliseconds, anyio sleeps.
* :class:`ManualClock` (tests): time moves only when the test calls :meth:`ManualClock.advance`
  or :meth:`ManualClock.set`, and :meth:`ManualClock.wait_for_sleepers` lets a test wait until
  the code under test is actually asleep, so no test has to sleep to synchronise.
"""

from __future__ import annotations

import time
from typing import Protocol, runtime_checkable

import anyio

from chord.context import Context, cancel_scope

__all__ = ["Clock", "ManualClock", "SystemClock"]


@runtime_checkable
class Clock(Protocol):
    """Epoch-millisecond time plus a cancellable sleep until an absolute time."""

    def now(self) -> int:
        """Milliseconds since the epoch."""
        ...

    async def sleep_until(self, until_ms: int, ctx: Context) -> None:
        """Return once ``now() >= until_ms``; raise ``ContextCancelled`` if ``ctx`` ends first."""
        ...


class SystemClock:
    """The wall clock."""

    def now(self) -> int:
        return int(time.time() * 1000)

    async def sleep_until(self, until_ms: int, ctx: Context) -> None:
        with cancel_scope(ctx):
            remaining = until_ms - self.now()
            while remaining > 0:  # the wall clock may run slow against the anyio clock
                await anyio.sleep(remaining / 1000)
                remaining = until_ms - self.now()


class ManualClock:
    """A clock that moves only when told to (tests)."""

    def __init__(self, start_ms: int = 1_700_000_000_000) -> None:
        self._now = start_ms
        self._sleepers: list[tuple[int, anyio.Event]] = []
        self._changed = anyio.Event()

    def now(self) -> int:
        return self._now

    @property
    def sleepers(self) -> int:
        """How many ``sleep_until`` calls are waiting right now."""
        return len(self._sleepers)

    def advance(self, ms: int) -> None:
        """Move time forward by ``ms`` and wake every sleeper whose time has come."""
        self.set(self._now + ms)

    def set(self, now_ms: int) -> None:
        """Jump to ``now_ms`` (never backwards) and wake due sleepers."""
        if now_ms < self._now:
            raise ValueError(f"ManualClock cannot go back from {self._now} to {now_ms}")
        self._now = now_ms
        for until, event in list(self._sleepers):
            if until <= now_ms:
                event.set()

    async def sleep_until(self, until_ms: int, ctx: Context) -> None:
        if until_ms <= self._now:
            ctx.raise_if_cancelled()
            return
        entry = (until_ms, anyio.Event())
        self._sleepers.append(entry)
        self._poke()
        try:
            with cancel_scope(ctx):
                await entry[1].wait()
        finally:
            self._sleepers.remove(entry)
            self._poke()

    async def wait_for_sleepers(self, count: int = 1) -> None:
        """Wait until at least ``count`` sleepers are waiting (no polling, no sleeps)."""
        while len(self._sleepers) < count:
            await self._changed.wait()

    def _poke(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()
