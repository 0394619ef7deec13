"""The line: one FIFO async mutex per session, and the guard against re-entering it.

Every storage interaction, commit and watch capture runs *on the line*, one at a time, in the
order callers arrived (anyio's ``Lock`` hands ownership to waiters first-in, first-out). Only
builders run while holding it.

A builder that calls back into the session would wait for the line it is holding: a silent
self-deadlock. Two guards turn that into :class:`NestedLineOperation` instead (docs/design/decisions.md#d5):

* the builder's ``ctx`` carries this builder run's marker (a ``chord.context`` value), so a call
  made with the builder's ctx is recognised before queueing;
* a ``contextvars`` variable carries the same marker while a builder runs in the current task,
  which also catches a call made with some *outer* ctx from inside the builder.

A marker only counts while its builder is running: a builder ctx kept after the commit, or a
task that inherited the context variable and outlives the builder, may use the session freely.

Commits are the hot path, so the line offers plain :meth:`Line.acquire` / :meth:`Line.release`
and :meth:`Line.enter_builder` / :meth:`Line.exit_builder` next to the context-manager forms.
Entering a free line yields to the event loop (a checkpoint, as any anyio lock would) at least
once per :data:`SLICE` seconds, so a loop of commits never starves the session's other tasks and
sees a cancelled anyio scope within a slice. Yielding on *every* entry would cost a trip through
the event loop per commit, a fifth of a small commit's CPU; within a slice, a free line is
entered at once. (The caller's ``ctx`` is checked on every call, by the kernel.)
"""

from __future__ import annotations

import contextvars
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import anyio.lowlevel

from chord.context import Context, ContextKey, with_value
from pico3.kernel.errors import NestedLineOperation

__all__ = ["SLICE", "Line"]

SLICE = 0.001
"""Seconds a free line may be entered without yielding to the event loop since its last yield."""

_LINE_MARKER: ContextKey[object] = ContextKey("pico3.line")
_ACTIVE: contextvars.ContextVar[object | None] = contextvars.ContextVar("pico3_line", default=None)


class Line:
    """A session's FIFO mutex with nested-use detection."""

    __slots__ = ("_lock", "_running", "_yielded")

    def __init__(self) -> None:
        self._lock = anyio.Lock()
        self._running: object | None = None  # the marker of the builder holding the line
        self._yielded = float("-inf")  # time.monotonic() of the last yield on entry

    def check_not_nested(self, ctx: Context) -> None:
        """Raise :class:`NestedLineOperation` when called from inside a builder of this line."""
        running = self._running
        if running is not None and (ctx.value(_LINE_MARKER) is running or _ACTIVE.get() is running):
            raise NestedLineOperation(
                "session operation started from inside a builder; use the tx and the builder's "
                "ctx only (the line is held by this builder)"
            )

    async def acquire(self, ctx: Context) -> None:
        """Enter the line (FIFO); pair with :meth:`release`. The caller re-checks its state
        once inside. Cancellation can only stop the wait, never a holder."""
        self.check_not_nested(ctx)
        lock = self._lock
        if lock.locked():
            await lock.acquire()  # queue behind the holder; ownership is handed over in order
            return
        lock.acquire_nowait()
        if time.monotonic() - self._yielded < SLICE:
            return
        try:
            await anyio.lowlevel.checkpoint()  # let others run (and see a pending cancel)
        except BaseException:
            lock.release()
            raise
        self._yielded = time.monotonic()

    def release(self) -> None:
        """Leave the line; the longest waiter, if any, holds it next."""
        self._lock.release()

    @asynccontextmanager
    async def hold(self, ctx: Context) -> AsyncIterator[None]:
        """Enter the line (FIFO) for the ``async with`` block."""
        await self.acquire(ctx)
        try:
            yield
        finally:
            self._lock.release()

    def enter_builder(self, ctx: Context) -> tuple[Context, contextvars.Token[object | None]]:
        """Mark a builder run (ctx value and context variable); returns the builder's ctx and
        the token :meth:`exit_builder` needs."""
        marker = object()
        self._running = marker
        return with_value(_LINE_MARKER, marker, ctx), _ACTIVE.set(marker)

    def exit_builder(self, token: contextvars.Token[object | None]) -> None:
        """End the builder run that :meth:`enter_builder` marked."""
        _ACTIVE.reset(token)
        self._running = None
