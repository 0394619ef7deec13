"""The line: one FIFO async mutex per session, and the guard against re-entering it.

Every storage interaction, commit and watch capture runs *on the line*, one at a time, in the
order callers arrived (anyio's ``Lock`` hands ownership to waiters first-in, first-out). Only
builders run while holding it.

A builder that calls back into the session would wait for the line it is holding: a silent
self-deadlock. Two guards turn that into :class:`NestedLineOperation` instead (DECISIONS D5):

* the builder's ``ctx`` carries this builder run's marker (a ``chord.context`` value), so a call
  made with the builder's ctx is recognised before queueing;
* a ``contextvars`` variable carries the same marker while a builder runs in the current task,
  which also catches a call made with some *outer* ctx from inside the builder.

A marker only counts while its builder is running: a builder ctx kept after the commit, or a
task that inherited the context variable and outlives the builder, may use the session freely.
"""

from __future__ import annotations

import contextvars
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager

import anyio

from chord.context import Context, ContextKey, with_value
from pico3.kernel.errors import NestedLineOperation

__all__ = ["Line"]

_LINE_MARKER: ContextKey[object] = ContextKey("pico3.line")
_ACTIVE: contextvars.ContextVar[object | None] = contextvars.ContextVar("pico3_line", default=None)


class Line:
    """A session's FIFO mutex with nested-use detection."""

    __slots__ = ("_lock", "_running")

    def __init__(self) -> None:
        self._lock = anyio.Lock()
        self._running: object | None = None  # the marker of the builder holding the line

    def check_not_nested(self, ctx: Context) -> None:
        """Raise :class:`NestedLineOperation` when called from inside a builder of this line."""
        running = self._running
        if running is not None and (ctx.value(_LINE_MARKER) is running or _ACTIVE.get() is running):
            raise NestedLineOperation(
                "session operation started from inside a builder; use the tx and the builder's "
                "ctx only (the line is held by this builder)"
            )

    @asynccontextmanager
    async def hold(self, ctx: Context) -> AsyncIterator[None]:
        """Enter the line (FIFO). The caller re-checks its state once inside."""
        self.check_not_nested(ctx)
        async with self._lock:
            yield

    @contextmanager
    def running_builder(self, ctx: Context) -> Iterator[Context]:
        """Mark a builder run (ctx value and context variable); yields the builder's ctx."""
        marker = object()
        self._running = marker
        token = _ACTIVE.set(marker)
        try:
            yield with_value(_LINE_MARKER, marker, ctx)
        finally:
            _ACTIVE.reset(token)
            self._running = None
